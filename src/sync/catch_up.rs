//! Catching the store up with one conversation before a command that names it: a conversation
//! gptme created or changed since the last `sync` is read in first, so that `read`, `show`,
//! `export`, `append`, `undo` and the rest see what gptme wrote, not what the last sync saw.
//! [`catch_up_root`] does the same for every conversation of a logs root, before a question
//! over all of them (the MCP server's).
//!
//! It reads exactly as a sync pass reads ([`super::pass`]: watermarks, complete lines, a
//! rewritten file read whole), and only in that direction: queued changes are not written
//! out (a conversation with changes queued in the store keeps the store's copy until
//! `sessiondb sync`), and debris is left alone. The one file it may create is the one a sync
//! would: a conflict branch keeping messages sessiondb acknowledged that a gptme rewrite
//! dropped (created new, never replacing anything). When the directory is as the store last saw it (the
//! usual case), it costs one `lstat` per file and takes no write lock, so a command that only
//! reads never waits for a writer.

use std::collections::HashSet;
use std::path::Path;

use super::pass::{self, SyncReport};
use super::SyncError;
use crate::fs::walk::directory_fingerprint;
use crate::store::{modify, queries, sources, Store, StoreError};

/// Reads the directory of the conversation `chat_id` names (a chat id, or `SOURCE:CHAT`: see
/// [`crate::store::sources::resolve`]) into the store when it is new to the store or changed
/// since the store last read or wrote it. The directory is the one the store has the
/// conversation from; for a conversation the store does not have, the chat id under its
/// source's root (`SOURCE:CHAT`), else under `default_root` (gptme's logs root), else under
/// any logs root the store's conversations come from. `None` when there was nothing to read:
/// no such directory, an unchanged one, one with changes queued in the store, or a chat id
/// stored in several sources (the command says so).
pub fn catch_up(store: &Store, chat_id: &str, default_root: Option<&Path>) -> Result<Option<SyncReport>, SyncError> {
    let conn = store.connection()?;
    let dir = match modify::load_conversation(&conn, chat_id) {
        Ok(conv) => {
            // Archived: its directory is gone on purpose, and the store holds all of it.
            if conv.archived && !crate::layout::is_conversation_dir(&conv.dir) {
                return Ok(None);
            }
            if unchanged_since_read(&conn, conv.id, &conv.dir)? || crate::store::pending::has_pending(&conn, conv.id)? {
                return Ok(None);
            }
            conv.dir
        }
        Err(StoreError::Ambiguous { .. }) => return Ok(None),
        Err(StoreError::NoConversation(_)) => {
            // `SOURCE:CHAT` of a source the store has: CHAT under that source's root.
            // Of the sources this role reads roots into: another role's root is its machine's.
            let qualified = sources::usable(&conn)?
                .into_iter()
                .filter_map(|s| Some(s.root.join([&s.label, &s.name].iter().find_map(|n| chat_id.strip_prefix(n.as_str())?.strip_prefix(':'))?)));
            let bare = match crate::model::ChatId::new(chat_id) {
                Ok(_) => default_root.map(Path::to_path_buf).into_iter().chain(queries::logs_roots(&conn)?).map(|root| root.join(chat_id)).collect(),
                Err(_) => Vec::new(), // not a name a directory of a logs root can have
            };
            let one_component = |dir: &Path| dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| crate::model::ChatId::new(n).is_ok());
            // `SOURCE:CHAT` first, as the store reads a name (`sources::resolve`).
            match qualified.chain(bare).find(|dir| one_component(dir) && crate::layout::is_conversation_dir(dir)) {
                Some(dir) => dir,
                None => return Ok(None),
            }
        }
        Err(e) => return Err(e.into()),
    };
    drop(conn);
    let Some(root) = dir.parent().filter(|_| crate::layout::is_conversation_dir(&dir)) else { return Ok(None) };
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else { return Ok(None) };
    Ok(Some(pass::pass_in(store, root, None, &HashSet::from([name.to_owned()]))?))
}

/// Reads into the store what gptme changed under `logs_root` since the store last read it: new
/// conversations, changed ones, and directories that are gone (marked deleted), as
/// [`catch_up`] does for one conversation — in only, queued changes left for `sync`. Call it
/// before answering a question over every conversation (an MCP search, say), so that the answer
/// includes what gptme wrote a moment ago. Deciding what changed costs one directory listing and
/// a walk (one `lstat` per file) of each conversation, and takes no write lock; only the
/// changed conversations are then read, in one pass. `None` when nothing had changed.
///
/// The root's source is named `source` when the store has none for it yet (see
/// [`crate::store::sources`]).
pub fn catch_up_root(store: &Store, logs_root: &Path, source: Option<&str>) -> Result<Option<SyncReport>, SyncError> {
    let root = std::path::absolute(logs_root).map_err(|source| super::ingest::IngestError::Io { path: logs_root.to_owned(), source })?;
    let stored = queries::conversations_in(&store.connection()?, &root)?;
    let (dirs, _) = super::ingest::conversation_dirs(&root)?;
    let mut changed = HashSet::new();
    let mut on_disk = HashSet::new();
    for dir in dirs {
        let Some(name) = dir.file_name().and_then(|n| n.to_str()).map(str::to_owned) else { continue };
        let unchanged = stored.get(&name).is_some_and(|s| s.queued || (!s.deleted && s.fingerprint == fingerprint_or_empty(&dir)));
        if !unchanged {
            changed.insert(name.clone());
        }
        on_disk.insert(name);
    }
    changed.extend(stored.iter().filter(|(name, s)| !s.deleted && !s.archived && !on_disk.contains(*name)).map(|(name, _)| name.clone()));
    if changed.is_empty() {
        return Ok(None);
    }
    Ok(Some(pass::pass_in(store, &root, source, &changed)?))
}

/// Whether conversation `conversation_id`'s directory `dir` is as the store last read or wrote
/// it (the same directory fingerprint; a directory that cannot be walked never is).
pub fn unchanged_since_read(conn: &crate::store::Connection, conversation_id: i64, dir: &Path) -> Result<bool, StoreError> {
    Ok(queries::fingerprint(conn, conversation_id)? == fingerprint_or_empty(dir))
}

/// The directory's fingerprint, or an empty one (never stored for a directory read whole) when
/// it cannot be taken: the pass then reads it and reports what is wrong.
fn fingerprint_or_empty(dir: &Path) -> Vec<u8> {
    directory_fingerprint(dir).unwrap_or_default()
}
