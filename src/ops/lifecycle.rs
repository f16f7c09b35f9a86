//! Whole conversations: creating one (gptme's `LogManager.load(create=True)`), forking it
//! (whole, or at a user turn), removing it, and finding what `clean` would remove. Each new
//! directory is written completely and then imported; a failure removes what was written.

use std::path::{Path, PathBuf};

use super::{normalise_for_rewrite, OpsError};
use crate::codec::message_line::encode_message;
use crate::fs::atomic::{sync_dir, write_atomic};
use crate::fs::gptme_lock;
use crate::model::{ChatId, Message, Role};
use crate::store::{modify, queries, DocumentKind, Store, WriteBatch};
use crate::sync::catch_up::unchanged_since_read;
use crate::sync::{ingest, materialise};

/// What [`new_conversation`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewConversation {
    pub chat_id: String,
    pub dir: PathBuf,
}

/// `config.toml` as gptme's `rename_conversation` writes it for a new file.
pub fn config_with_name(name: &str) -> String {
    crate::codec::config::set_chat_name("", name).expect("the empty text is valid TOML")
}

/// Creates `<logs_root>/<chat_id>/` with an empty `conversation.jsonl` (mode 0600, as gptme
/// writes it) and, with a name, a `config.toml`, then imports it. Refuses an id gptme would
/// refuse, or one that exists already.
pub fn new_conversation(store: &Store, logs_root: &Path, chat_id: &str, name: Option<&str>) -> Result<NewConversation, OpsError> {
    let dir = validate_new(logs_root, chat_id)?;
    // Into the root as it is: one that is missing (an unmounted disk) is not made anew here,
    // where a write would land in an empty mount point (callers that may create it, do).
    if !logs_root.is_dir() {
        return Err(OpsError::NoLogsRoot { root: logs_root.to_owned() });
    }
    std::fs::create_dir(&dir)
        .map_err(|e| if e.kind() == std::io::ErrorKind::NotFound { OpsError::NoLogsRoot { root: logs_root.to_owned() } } else { io(&dir)(e) })?;
    let created = (|| -> Result<(), OpsError> {
        write_atomic(&dir.join(crate::layout::MAIN_TRANSCRIPT), 0o600, crate::fs::meta::now_ns(), |_| Ok(())).map_err(io(&dir))?;
        if let Some(name) = name {
            let mode = super::umask_mode();
            write_atomic(&dir.join(crate::layout::CONFIG), mode, crate::fs::meta::now_ns(), |out| out.write_all(config_with_name(name).as_bytes()))
                .map_err(io(&dir))?;
        }
        sync_dir(&dir).map_err(io(&dir))?;
        import_dir(store, &dir)
    })();
    if let Err(e) = created {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let _ = sync_dir(logs_root);
    let chat_id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(NewConversation { chat_id, dir })
}

/// An I/O failure on `path`, as an operation's error.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OpsError {
    let path = path.to_owned();
    move |source| OpsError::Dir(crate::fs::dirtx::DirError::Io { path, source })
}

fn import_dir(store: &Store, dir: &Path) -> Result<(), OpsError> {
    let mut conn = store.connection()?;
    let mut batch = WriteBatch::begin(&mut conn)?;
    ingest::import_conversation(&mut batch, dir, ingest::ReadMode::Whole)?;
    batch.finish()?;
    Ok(())
}

fn validate_new(logs_root: &Path, new_id: &str) -> Result<PathBuf, OpsError> {
    let id = ChatId::new(new_id).map_err(|reason| OpsError::InvalidName { what: "chat id", name: new_id.to_owned(), reason })?;
    let dir = logs_root.join(id.as_str());
    if dir.exists() {
        return Err(OpsError::Exists { dir });
    }
    Ok(dir)
}

/// gptme's `LogManager.fork`: a copy of the whole conversation — every branch, view, event
/// log, attachment and other file, with modes and mtimes — as `new_id` beside it.
pub fn fork(store: &Store, chat_id: &str, new_id: &str) -> Result<PathBuf, OpsError> {
    let conn = store.connection()?;
    let source = modify::load_conversation(&conn, chat_id)?;
    let logs_root = source.dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let dest = validate_new(&logs_root, new_id)?;
    let result = materialise::export_conversation_to(&conn, chat_id, &dest).map_err(OpsError::from).and_then(|_| import_dir(store, &dest));
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&dest);
        return Err(e);
    }
    Ok(dest)
}

/// gptme's `chats fork --at-turn N`: a new conversation holding main's messages through the
/// N-th user exchange (turn 0: only what precedes the first user message), with the source's
/// `files/` and `attachments/` copied. The source is never modified.
pub fn fork_at_turn(store: &Store, chat_id: &str, turn: usize, new_id: Option<&str>) -> Result<(String, usize), OpsError> {
    let conn = store.connection()?;
    let source = modify::load_conversation(&conn, chat_id)?;
    let main = modify::find_doc(&conn, source.id, DocumentKind::Branch, crate::layout::MAIN)?
        .ok_or_else(|| OpsError::Invalid(format!("{chat_id}: has no conversation")))?;
    let mtime_ns = queries::entry_mtime(&conn, source.id, "conversation.jsonl")?;
    let mtime = super::seconds(mtime_ns);
    let messages: Vec<_> = modify::doc_lines(&conn, &main)?.into_iter().filter_map(|l| l.message).map(|m| normalise_for_rewrite(&m, mtime)).collect();
    let users = messages.iter().filter(|m| m.role == Role::User).count();
    if turn > users {
        return Err(OpsError::Invalid(format!("turn {turn} out of range: '{chat_id}' has {users} user turn(s) (valid range: 0–{users})")));
    }
    let sliced = slice_at_turn(&messages, turn);
    let new_id = new_id.map_or_else(|| format!("{}-fork-{}", source.chat_id, chrono::Utc::now().format("%Y%m%d-%H%M%S")), str::to_owned);
    let logs_root = source.dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let dest = validate_new(&logs_root, &new_id)?;
    let result = (|| -> Result<(), OpsError> {
        std::fs::create_dir(&dest).map_err(io(&dest))?;
        let now = crate::fs::meta::now_ns();
        write_atomic(&dest.join(crate::layout::MAIN_TRANSCRIPT), 0o600, now, |out| {
            for m in &sliced {
                out.write_all(encode_message(m).as_bytes())?;
                out.write_all(b"\n")?;
            }
            Ok(())
        })
        .map_err(io(&dest))?;
        for sub in [crate::layout::FILES_DIR, crate::layout::ATTACHMENTS_DIR] {
            let src = source.dir.join(sub);
            if src.exists() {
                let status = std::process::Command::new("cp").arg("-a").arg(&src).arg(dest.join(sub)).status().map_err(io(&src))?;
                if !status.success() {
                    return Err(OpsError::CopyFailed { path: src });
                }
            }
        }
        import_dir(store, &dest)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&dest);
        return Err(e);
    }
    Ok((new_id, sliced.len()))
}

/// Removes a conversation: its directory (as gptme's `chats delete` does) and its rows.
/// Refused while a live gptme holds it, and — unless `force` — while it has changes queued
/// for its directory (decided inside the write transaction, so a queue cannot slip in).
pub fn remove(store: &Store, chat_id: &str, force: bool) -> Result<(), OpsError> {
    remove_with(store, chat_id, force, false, false)
}

/// Removes a conversation's rows only (`rm --store-only`): its directory stays as it is, so
/// the next sync (or import, or a command naming it) reads it in again as a new conversation.
/// Refused, unless `force`, while it has changes queued for its directory (they would be lost).
pub fn remove_from_store(store: &Store, chat_id: &str, force: bool) -> Result<(), OpsError> {
    remove_with(store, chat_id, force, false, true)
}

/// [`remove`] for `clean`, which chose the conversation by what the store holds: refused
/// ([`OpsError::ChangedSinceRead`]) unless its directory is as the store last read it,
/// decided under gptme's lock, so that a conversation gptme wrote to since (no longer empty) is
/// never removed for being empty.
pub fn remove_unchanged(store: &Store, chat_id: &str) -> Result<(), OpsError> {
    remove_with(store, chat_id, false, true, false)
}

fn remove_with(store: &Store, chat_id: &str, force: bool, only_unchanged: bool, keep_dir: bool) -> Result<(), OpsError> {
    let mut conn = store.connection()?;
    let conv = modify::load_conversation(&conn, chat_id)?;
    // From here on, the chat id of this conversation's source (see `store::sources`).
    conn.scope_to(conv.source_id)?;
    let chat_id = conv.chat_id.as_str();
    // The directory is gptme's: it is locked only to be removed.
    let _lock = if conv.dir.exists() && !keep_dir { Some(gptme_lock::acquire_path(&conv.dir)?) } else { None };
    let batch = WriteBatch::begin(&mut conn)?;
    let conv = modify::load_conversation(batch.conn(), chat_id)?; // its rows as they are now
    if only_unchanged && conv.dir.exists() && !unchanged_since_read(batch.conn(), conv.id, &conv.dir)? {
        return Err(OpsError::ChangedSinceRead { chat_id: chat_id.to_owned(), dir: conv.dir.clone() });
    }
    if !force && crate::store::pending::has_pending(batch.conn(), conv.id)? {
        let where_ = if conv.dir.exists() { "not synced yet" } else { "the directory is gone: renamed or deleted" };
        return Err(OpsError::QueuedChanges { chat_id: chat_id.to_owned(), dir: conv.dir.clone(), where_ });
    }
    modify::delete_conversation(batch.conn(), conv.id)?;
    // A directory that stays may still hold what sessiondb appended in gptme's copies: the
    // record of those appends stays with it.
    if !keep_dir {
        crate::store::acknowledged::forget_conversation(batch.conn(), chat_id)?;
    }
    crate::store::blobs::remove_all_unreferenced(batch.conn())?;
    if conv.dir.exists() && !keep_dir {
        std::fs::remove_dir_all(&conv.dir).map_err(|source| OpsError::Dir(crate::fs::dirtx::DirError::Io { path: conv.dir.clone(), source }))?;
    }
    batch.finish()?;
    Ok(())
}

/// What [`remove`] would take away, for a confirmation or a dry run.
#[derive(Debug, Clone)]
pub struct Removal {
    pub summary: queries::ConversationSummary,
    /// The conversation's directory, when it is there (it goes too).
    pub dir: Option<std::path::PathBuf>,
    /// Bytes in that directory.
    pub size_bytes: u64,
    /// Changes queued with `--queue` that were never written to the directory.
    pub queued: bool,
}

/// What removing `chat_id` would take away. Changes nothing.
pub fn removal(store: &Store, chat_id: &str) -> Result<Removal, OpsError> {
    let conn = store.connection()?;
    let summary = queries::conversation_summary(&conn, chat_id)?;
    let conv = modify::load_conversation(&conn, chat_id)?;
    let queued = crate::store::pending::has_pending(&conn, conv.id)?;
    let dir = conv.dir.is_dir().then_some(conv.dir);
    let size_bytes = dir.as_deref().map_or(0, crate::fs::walk::tree_bytes);
    Ok(Removal { summary, dir, size_bytes, queued })
}

/// A conversation `clean` would remove.
#[derive(Debug, Clone)]
pub struct CleanCandidate {
    pub chat_id: String,
    pub name: String,
    pub messages: i64,
    pub size_bytes: u64,
}

/// gptme's `chats clean`: conversations with at most `max_messages` messages and no branches
/// (test conversations only when `include_test`), with their size on disk. Judged on the
/// directories as they are: a small one that changed since the store last read it (gptme
/// wrote to it) is read in first. Remove them with [`remove_unchanged`].
pub fn clean_candidates(store: &Store, max_messages: i64, include_test: bool) -> Result<Vec<CleanCandidate>, OpsError> {
    let conn = store.connection()?;
    let small = |c: &queries::ConversationSummary| c.messages <= max_messages && c.branches <= 1;
    for c in queries::list_conversations(&conn, include_test, None)?.iter().filter(|c| small(c) && Path::new(&c.source_dir).exists()) {
        // Reads the directory in only when it changed since the store read it. One that cannot
        // be read in keeps the store's counts here; removing it is then refused
        // ([`remove_unchanged`]), since its directory still differs.
        let _ = crate::sync::catch_up::catch_up(store, &crate::store::sources::qualified(&c.source, &c.chat_id), None);
    }
    // How each is named: its chat id, or `SOURCE:CHAT` when several sources have that chat id.
    let names: std::collections::HashSet<String> = queries::chat_ids(&conn)?.into_iter().collect();
    let mut out = Vec::new();
    for c in queries::list_conversations(&conn, include_test, None)? {
        if small(&c) {
            let size_bytes = crate::fs::walk::tree_bytes(Path::new(&c.source_dir));
            out.push(CleanCandidate { chat_id: queries::name_among(&names, &c), name: c.name, messages: c.messages, size_bytes });
        }
    }
    Ok(out)
}

/// gptme's `_slice_at_turn`: turn 0 keeps the messages before the first user message; turn N
/// keeps everything up to (not including) the user message after the N-th.
pub fn slice_at_turn(messages: &[Message], turn: usize) -> Vec<Message> {
    if turn == 0 {
        return messages.iter().take_while(|m| m.role != Role::User).cloned().collect();
    }
    let mut users = 0;
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::User {
            users += 1;
            if users == turn + 1 {
                return messages[..i].to_vec();
            }
        }
    }
    messages.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: Role, c: &str) -> Message {
        Message::new(role, c, None)
    }

    /// The guard of `clean`'s removal: a directory written to since the store read it is left
    /// as it is, decided under the lock (the listing before may be a moment old).
    #[test]
    fn a_removal_for_clean_leaves_a_directory_changed_since_it_was_read() {
        let work = tempfile::tempdir().unwrap();
        let logs = work.path().join("logs");
        let store = Store::open(&work.path().join("db")).unwrap();
        std::fs::create_dir(&logs).unwrap();
        new_conversation(&store, &logs, "c", None).unwrap();
        let transcript = logs.join("c").join(crate::layout::MAIN_TRANSCRIPT);
        let mut text = std::fs::read_to_string(&transcript).unwrap();
        text.push_str("{\"role\": \"user\", \"content\": \"written since\", \"timestamp\": \"2026-01-01T00:00:00\"}\n");
        std::fs::write(&transcript, &text).unwrap();
        match remove_unchanged(&store, "c") {
            Err(OpsError::ChangedSinceRead { chat_id, .. }) => assert_eq!(chat_id, "c"),
            other => panic!("expected ChangedSinceRead, got {other:?}"),
        }
        assert_eq!(std::fs::read_to_string(&transcript).unwrap(), text, "left as it was");
        new_conversation(&store, &logs, "d", None).unwrap();
        remove_unchanged(&store, "d").unwrap();
        assert!(!logs.join("d").exists());
    }

    #[test]
    fn turns() {
        let log = vec![m(Role::System, "s"), m(Role::User, "u1"), m(Role::Assistant, "a1"), m(Role::System, "tool"), m(Role::User, "u2"), m(Role::Assistant, "a2")];
        assert_eq!(slice_at_turn(&log, 0).len(), 1);
        assert_eq!(slice_at_turn(&log, 1).len(), 4);
        assert_eq!(slice_at_turn(&log, 2).len(), 6);
        assert_eq!(slice_at_turn(&log, 9).len(), 6);
    }
}
