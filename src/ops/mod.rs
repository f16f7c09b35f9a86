//! gptme's log operations on the store: what `LogManager` does, with the same results on disk.
//!
//! Every operation runs in a [`Session`]: it takes the conversation's gptme lock (refusing a
//! conversation a live gptme holds), opens one write transaction, and first re-reads the
//! directory if something else changed it since the store last saw it. It then changes rows
//! and files together — files through a [`DirTransaction`], so that any failure before the
//! commit puts the directory back as it was — and commits both. Appends cost the same however
//! long the conversation is: one row or two, one line appended to `conversation.jsonl` and one
//! to `events.jsonl` (plus gptme's periodic checkpoint, which snapshots the whole list).

mod archive;
mod bookmarks;
pub mod input;
mod lifecycle;
mod recover;
mod rename;
mod views;

use std::path::{Path, PathBuf};

use crate::codec::events::{Event, Payload, CHECKPOINT, CHECKPOINT_INTERVAL, MESSAGE_APPEND, MESSAGE_EDIT, UNDO};
use crate::codec::json::Json;
use crate::fs::dirtx::{DirError, DirTransaction, FileStat};
use crate::fs::gptme_lock::{self, ConversationLock};
use crate::fs::walk::directory_fingerprint;
use crate::layout::{self, Backup, MAIN};
use crate::model::Message;
use crate::store::modify::{self, Doc, LiveConversation};
use crate::store::queries::{self, StoredLine};
use crate::store::{DocumentKind, Store, StoreError, WriteBatch};
use crate::sync::ingest::{self, IngestError};

pub use crate::codec::events::replay;
pub use crate::codec::normalise::{normalise_for_rewrite, rewrites_unchanged};
pub use archive::{archive, archive_candidates, clear_parking, restore, restore_candidates, ArchiveCandidate, Candidates, Moved, Selection, PARKING};
pub use lifecycle::{
    clean_candidates, fork, fork_at_turn, new_conversation, removal, remove, remove_from_store, remove_unchanged, slice_at_turn, CleanCandidate, NewConversation,
    Removal,
};
pub use recover::{read_directory_branch, read_event_file, read_stored_branch, Recovery, RecoverySource, Standing};

/// What an operation fails with: the one error of changing conversations (see
/// [`crate::sync::error`]), shared with writing queued changes out.
pub use crate::sync::SyncError as OpsError;

/// The result of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The line written (what gptme writes for the message).
    pub line: Vec<u8>,
    /// The view that received the message too, when one was active.
    pub view: Option<String>,
    /// The event's sequence number, and the checkpoint's when one was due.
    pub seq: i64,
    pub checkpoint_seq: Option<i64>,
}

/// What an undo removed (the `/undo` command included) and the backup branch it saved.
pub type Undone = (Vec<Message>, Option<String>);

/// One operation on one conversation, in progress.
pub struct Session<'c> {
    batch: WriteBatch<'c>,
    conv: LiveConversation,
    dir: DirTransaction,
    /// gptme's lock on the directory (none for a queued operation's private copy).
    _lock: Option<ConversationLock>,
    /// gptme's lock sidecars (`.events.jsonl.lock`, `.config.lock`) held until the end, by
    /// path: a second flock on a new descriptor would wait for our own first one.
    sidecars: Vec<(String, std::fs::File)>,
}

/// Runs `op` on conversation `chat_id` as one transaction over the store and its directory.
/// Changes queued earlier with [`with_queued_session`] are written out first.
///
/// `chat_id` is a chat id or `SOURCE:CHAT` ([`crate::store::sources::resolve`]); once found,
/// everything the operation looks up and writes is of that conversation's source.
pub fn with_session<T>(store: &Store, chat_id: &str, op: impl FnOnce(&mut Session) -> Result<T, OpsError>) -> Result<T, OpsError> {
    let named = crate::store::sources::resolve(&store.connection()?, chat_id)?;
    with_session_in(store, &named, op)
}

fn with_session_in<T>(store: &Store, named: &crate::store::sources::Named, op: impl FnOnce(&mut Session) -> Result<T, OpsError>) -> Result<T, OpsError> {
    let mut conn = store.connection()?;
    conn.scope_to(named.source_id)?;
    let chat_id = named.chat_id.as_str();
    let conv = modify::load_conversation(&conn, chat_id)?;
    if conv.archived && !layout::is_conversation_dir(&conv.dir) {
        return Err(OpsError::Archived { chat_id: chat_id.to_owned() });
    }
    let dir = conv.dir;
    if !dir.join(layout::MAIN_TRANSCRIPT).exists() {
        return Err(OpsError::DirectoryGone { dir });
    }
    if crate::store::pending::has_pending(&conn, conv.id)? {
        crate::sync::pending::materialise_pending(&mut conn, chat_id, false)?;
    }
    // The directory lock first, then the database lock: every writer takes them in this order.
    let (handle, lock) = gptme_lock::acquire_path(&dir)?;
    crate::fs::atomic::remove_debris(&handle).map_err(|source| DirError::Io { path: dir.clone(), source })?;
    let mut batch = WriteBatch::begin(&mut conn)?;
    // By chat id, inside the transaction: another process may have replaced the rows (a new
    // conversation id) since they were looked up above.
    let now = modify::load_conversation(batch.conn(), chat_id)?;
    if crate::store::pending::has_pending(batch.conn(), now.id)? {
        // Queued by another process after the check above: write it out first, then begin again.
        drop(batch);
        drop(lock);
        drop(conn);
        return with_session_in(store, named, op);
    }
    // gptme (or a person) changed the directory: operate on what is there now. Also when the
    // store lost a message sessiondb acknowledged (a read that raced a rewrite): reading it
    // again judges the directory first, keeping such messages as a branch.
    catch_up(&mut batch, now.id, &dir, ingest::ReadMode::Whole, |conn| crate::store::acknowledged::any_missing_from_store(conn, chat_id))?;
    // The store now holds what the directory holds, under the lock, and every acknowledged
    // message has been judged: no gptme can have a copy of this conversation older than the
    // appends recorded before the settling time.
    crate::store::acknowledged::forget_settled(batch.conn(), chat_id, crate::sync::acknowledged::SETTLE)?;
    let conv = modify::load_conversation(batch.conn(), chat_id)?;
    let missing = crate::store::acknowledged::missing_from_store(batch.conn(), chat_id)?;
    let mut session = Session { batch, conv, dir: DirTransaction::new(handle), _lock: Some(lock), sidecars: Vec::new() };
    let out = op(&mut session)?;
    let Session { batch, conv, dir, _lock, sidecars } = session;
    // What this operation took out (an undo, an edit) was taken out on purpose.
    crate::store::acknowledged::forget_removed(batch.conn(), chat_id, &missing)?;
    modify::refresh_dir_entries(batch.conn(), conv.id, &conv.dir)?;
    let fingerprint = directory_fingerprint(&conv.dir).map_err(IngestError::from)?;
    modify::set_fingerprint(batch.conn(), conv.id, &fingerprint)?;
    batch.finish()?;
    dir.commit()?;
    drop(sidecars);
    Ok(out)
}

/// Reads directory `dir` into the store again (as `read` says) when it changed since the store
/// last read or wrote it (its fingerprint moved), or when `behind` finds the store behind it
/// anyway. The one place an operation re-reads a directory before changing it.
fn catch_up(
    batch: &mut WriteBatch,
    conversation_id: i64,
    dir: &Path,
    read: ingest::ReadMode,
    behind: impl FnOnce(&crate::store::Connection) -> Result<bool, StoreError>,
) -> Result<(), OpsError> {
    let stored = queries::fingerprint(batch.conn(), conversation_id)?;
    if directory_fingerprint(dir).map_err(IngestError::from)? != stored || behind(batch.conn())? {
        ingest::import_conversation(batch, dir, read)?;
    }
    Ok(())
}

/// Runs `op` with [`with_queued_session`] when `queued`, else with [`with_session`].
pub fn run<T>(store: &Store, chat_id: &str, queued: bool, op: impl FnOnce(&mut Session) -> Result<T, OpsError>) -> Result<T, OpsError> {
    if queued {
        with_queued_session(store, chat_id, op)
    } else {
        with_session(store, chat_id, op)
    }
}

/// Runs `op` on conversation `chat_id` in the store only, leaving its directory untouched
/// until `sessiondb sync` writes the change (see `sync::pending`): for a conversation that a
/// live gptme has open, or a directory that cannot be written now.
///
/// The operation runs exactly as [`with_session`] would, on a private copy of the conversation
/// materialised from the store; every path it changes is queued with what the directory held
/// when the store last read it, which is how the sync tells a conflict from a plain update.
pub fn with_queued_session<T>(store: &Store, chat_id: &str, op: impl FnOnce(&mut Session) -> Result<T, OpsError>) -> Result<T, OpsError> {
    let mut conn = store.connection()?;
    let named = crate::store::sources::resolve(&conn, chat_id)?;
    conn.scope_to(named.source_id)?;
    let chat_id = named.chat_id.as_str();
    let mut batch = WriteBatch::begin(&mut conn)?;
    let conv = modify::load_conversation(batch.conn(), chat_id)?;
    // Queued for a directory that is not there on purpose: restored first, or never written.
    if conv.archived && !layout::is_conversation_dir(&conv.dir) {
        return Err(OpsError::Archived { chat_id: chat_id.to_owned() });
    }
    if !crate::store::pending::has_pending(batch.conn(), conv.id)? && conv.dir.join(layout::MAIN_TRANSCRIPT).exists() {
        // The base of the queue must be what the directory holds now: catch up first.
        catch_up(&mut batch, conv.id, &conv.dir, ingest::ReadMode::CompleteLines, |_| Ok(false))?;
    }
    let conv = modify::load_conversation(batch.conn(), chat_id)?;
    let bases = queries::entry_stats(batch.conn(), conv.id)?;
    let staging = tempfile::Builder::new().prefix("sessiondb-queue-").tempdir().map_err(|source| DirError::Io { path: std::env::temp_dir(), source })?;
    let copy = staging.path().join(&conv.chat_id);
    crate::sync::materialise::export_conversation_to(batch.conn(), chat_id, &copy)?;
    let staged = LiveConversation { dir: copy.clone(), ..conv.clone() };
    let handle = crate::fs::nofollow::Dir::open(&copy).map_err(|source| DirError::Io { path: copy.clone(), source })?;
    let missing = crate::store::acknowledged::missing_from_store(batch.conn(), chat_id)?;
    let mut session = Session { batch, conv: staged, dir: DirTransaction::new(handle), _lock: None, sidecars: Vec::new() };
    let out = op(&mut session)?;
    let Session { batch, dir, sidecars, .. } = session;
    crate::store::acknowledged::forget_removed(batch.conn(), chat_id, &missing)?; // taken out on purpose
    let mut changed: Vec<String> =
        dir.changed_paths().iter().filter_map(|p| p.strip_prefix(&copy).ok()).filter_map(|p| p.to_str().map(str::to_owned)).filter(|p| !p.is_empty()).collect();
    changed.sort();
    changed.dedup();
    crate::store::pending::queue_paths(batch.conn(), conv.id, &changed, &bases)?;
    batch.finish()?;
    drop(sidecars);
    dir.commit()?;
    Ok(out)
}

/// Permission bits of a file created with `open(..., "a")` under the current umask, as gptme's
/// event log and bookmarks are created.
fn umask_mode() -> u32 {
    crate::fs::meta::new_file_mode()
}

/// gptme writes transcripts through temporary files: mode 0600.
const TRANSCRIPT_MODE: u32 = 0o600;

fn now_utc_iso() -> String {
    let now = chrono::Utc::now();
    crate::codec::timestamp::format_utc(now.timestamp_micros() as f64 / 1e6)
}

impl Session<'_> {
    pub fn conversation(&self) -> &LiveConversation {
        &self.conv
    }

    fn conn(&self) -> &crate::store::Connection {
        self.batch.conn()
    }

    fn abs(&self, rel: &str) -> PathBuf {
        self.conv.dir.join(rel)
    }

    /// Stores an opaque small file (a marker, a bookmark file) and writes it.
    fn write_small_file(&mut self, rel: &str, mode: u32, data: &[u8]) -> Result<(), OpsError> {
        let path = self.abs(rel);
        let stat = self.dir.replace(&path, mode, |out| out.write_all(data))?;
        modify::set_blob_entry(self.conn(), self.conv.id, rel, stat.mode, stat.mtime_ns, data)?;
        Ok(())
    }

    /// Records a file's state after a write, with the watermark of what the store now holds of
    /// it (the whole file), so that the next sync does not read it again.
    fn record(&self, rel: &str, stat: FileStat) -> Result<(), OpsError> {
        modify::set_entry_stat(self.conn(), self.conv.id, rel, stat.mode, stat.mtime_ns, stat.size)?;
        let path = self.abs(rel);
        let io = |source| DirError::Io { path: path.clone(), source };
        let file = self.dir.open_read(&path)?;
        let ino = crate::fs::nofollow::fstat(&file).map_err(io)?.ino;
        let tail = crate::fs::watermark::tail_digest(&file, stat.size).map_err(io)?;
        modify::set_watermark(self.conn(), self.conv.id, rel, &crate::fs::watermark::Watermark { size: stat.size, ino, tail })?;
        Ok(())
    }

    /// Creates directory `rel` when missing, as gptme's `mkdir` does: mode 0777 less the umask.
    fn ensure_dir(&mut self, rel: &str) -> Result<(), OpsError> {
        let mode = crate::fs::meta::new_dir_mode();
        modify::ensure_dir(self.batch.conn(), self.conv.id, rel, mode)?;
        let abs = self.abs(rel);
        self.dir.create_dir(&abs, mode)?;
        Ok(())
    }

    pub fn branch_doc(&self, name: &str) -> Result<Doc, OpsError> {
        modify::find_doc(self.conn(), self.conv.id, DocumentKind::Branch, name)?
            .ok_or_else(|| StoreError::NoBranch { chat_id: self.conv.chat_id.clone(), branch: name.to_owned() }.into())
    }

    /// The messages of a document, as gptme holds them in memory (damaged lines skipped,
    /// legacy forms normalised as gptme's reader normalises them).
    pub fn messages(&self, doc: &Doc) -> Result<Vec<Message>, OpsError> {
        let mtime = self.file_mtime(&doc.path)?;
        Ok(modify::doc_lines(self.conn(), doc)?.into_iter().filter_map(|l| l.message).map(|m| normalise_for_rewrite(&m, mtime)).collect())
    }

    fn file_mtime(&self, rel: &str) -> Result<f64, OpsError> {
        let mtime_ns = queries::entry_mtime(self.conn(), self.conv.id, rel).unwrap_or(0);
        Ok(seconds(mtime_ns))
    }

    /// The active view of the main branch (gptme's `views/.current` marker), if it names one.
    pub fn active_view(&self) -> Result<Option<Doc>, OpsError> {
        Ok(modify::active_view(self.conn(), self.conv.id)?)
    }

    /// Writes a document's rows as its whole file, atomically.
    fn rewrite(&mut self, doc: &Doc) -> Result<(), OpsError> {
        let path = self.abs(&doc.path);
        let conn = self.batch.conn();
        let mut result = Ok(0);
        let stat = self.dir.replace(&path, doc.mode, |out| {
            result = crate::sync::materialise::write_document(conn, doc.id, doc.kind, true, out);
            Ok(())
        })?;
        result?;
        self.record(&doc.path, stat)
    }

    /// Adds `message` at the end of a transcript (branch or view). When the file ends with a
    /// newline, one line is appended. Otherwise its last line was cut off, and gptme cannot
    /// extend it: it rewrites the file from the messages it holds (normalised, the damaged line
    /// gone), and so does this. Returns the document after and the new line's bytes.
    fn extend(&mut self, before: &Doc, message: &Message) -> Result<(Doc, Vec<u8>, FileStat), OpsError> {
        let mut doc = before.clone();
        if !before.ends_with_newline {
            let mut messages = self.messages(before)?;
            messages.push(message.clone());
            self.replace(&mut doc, &messages)?;
            let line = crate::codec::message_line::encode_message(message).into_bytes();
            let path = self.abs(&doc.path);
            let stat = crate::fs::dirtx::stat(&path).map_err(|source| DirError::Io { path, source })?;
            return Ok((doc, line, stat));
        }
        let line = modify::append_line(self.batch.conn(), self.conv.id, &mut doc, message)?;
        let mut bytes = line.clone();
        bytes.push(b'\n');
        let stat = self.dir.append(&self.abs(&doc.path), before.size, doc.mode, &bytes)?;
        self.record(&doc.path, stat)?;
        if doc.kind == DocumentKind::Branch && doc.name == MAIN {
            let mut totals = crate::store::totals::load(self.conn(), self.conv.id)?;
            totals.feed(&line, None);
            crate::store::totals::save(self.conn(), self.conv.id, &totals, seconds(stat.mtime_ns))?;
        }
        Ok((doc, line, stat))
    }

    /// Stores attachments by content as gptme does (`files/<16 hex of sha256><suffix>`,
    /// copied with mode and mtime) and returns the message with their hashes filled in.
    fn store_attachments(&mut self, message: &Message) -> Result<Message, OpsError> {
        let mut message = message.clone();
        for file in message.files.clone() {
            let path = Path::new(&file);
            if !path.is_absolute() || !path.is_file() {
                continue; // URIs and missing files are referenced, not stored (as in gptme)
            }
            // Read in pieces, never whole: an attachment may be larger than memory.
            let io = |source| DirError::Io { path: path.to_owned(), source };
            let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
            std::io::copy(&mut std::fs::File::open(path).map_err(io)?, &mut hasher).map_err(io)?;
            let sha: [u8; 32] = sha2::Digest::finalize(hasher).into();
            let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
            let hash = hex[..16].to_owned();
            let suffix = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
            let rel = layout::attachment_path(&hash, &suffix);
            self.ensure_dir(layout::FILES_DIR)?;
            if !self.abs(&rel).exists() {
                let copy = self.abs(&rel);
                let stat = self.dir.copy_file(path, &copy)?;
                // Stored from the copy written, so that the store holds what the directory holds.
                let file = std::fs::File::open(&copy).map_err(|source| DirError::Io { path: copy.clone(), source })?;
                modify::put_file(self.conn(), self.conv.id, &rel, stat.mode, stat.mtime_ns, &sha, stat.size, std::io::BufReader::new(file))?;
            }
            match message.file_hashes.iter_mut().find(|(p, _)| *p == file) {
                Some(entry) => entry.1 = hash,
                None => message.file_hashes.push((file.clone(), hash)),
            }
        }
        Ok(message)
    }

    /// Appends `message` to `branch` as gptme's `LogManager.append` does: attachments stored,
    /// the line appended (to main and the active view together when one is active), then a
    /// `message_append` event and, when due, a checkpoint with compaction.
    pub fn append(&mut self, branch: &str, message: &Message) -> Result<Appended, OpsError> {
        let message = self.store_attachments(message)?;
        let before = self.branch_doc(branch)?;
        let view = Some(self.target(branch)?).filter(|d| d.kind == DocumentKind::View);
        self.ensure_dir(layout::BRANCHES_DIR)?;
        let (doc, line, _) = self.extend(&before, &message)?;
        // With a view active, gptme's log is the view: it gets the message, and the event log
        // (main's) snapshots the view at checkpoints.
        let current = match &view {
            Some(v) => self.extend(v, &message)?.0,
            None => doc,
        };
        let (seq, checkpoint_seq) = self.log_event(branch, MESSAGE_APPEND, Payload::Message(message.clone()), &current)?;
        // Acknowledged: kept safe from a gptme that loaded the branch just before this append.
        crate::store::acknowledged::record(self.conn(), &self.conv.chat_id, &before.path, &message, &line, seq)?;
        Ok(Appended { line, view: view.map(|v| v.name), seq, checkpoint_seq })
    }

    /// Writes one event to `branch`'s event log (creating it as gptme does), then a checkpoint
    /// of `current` with compaction when the event's seq is a multiple of 50.
    fn log_event(&mut self, branch: &str, kind: &str, payload: Payload, current: &Doc) -> Result<(i64, Option<i64>), OpsError> {
        let dir = layout::events_dir(branch);
        if !dir.is_empty() {
            self.ensure_dir(&dir)?;
        }
        let rel = layout::events_path(branch);
        let mode = umask_mode();
        self.lock_sidecar(&layout::events_lock_path(branch))?;
        let before = match modify::find_doc(self.conn(), self.conv.id, DocumentKind::Events, branch)? {
            Some(d) => d,
            None => modify::create_doc(self.conn(), self.conv.id, &rel, DocumentKind::Events, branch, mode)?,
        };
        let mut doc = before.clone();
        let seq = modify::next_seq(self.conn(), &doc)?;
        let event = Event { seq, ts: now_utc_iso(), kind: kind.to_owned(), payload };
        let line = modify::append_event(self.batch.conn(), self.conv.id, &mut doc, &event)?;
        let expected = if before.line_count == 0 && !self.abs(&rel).exists() { None } else { before.size };
        let mut bytes = Vec::new();
        if !before.ends_with_newline {
            bytes.push(b'\n'); // gptme repairs a damaged tail before appending
        }
        bytes.extend_from_slice(&line);
        bytes.push(b'\n');
        let stat = self.dir.append(&self.abs(&rel), expected, mode, &bytes)?;
        self.record(&rel, stat)?;
        if seq % CHECKPOINT_INTERVAL != 0 {
            return Ok((seq, None));
        }
        // The snapshot is built from rows, not from messages held in memory, whenever gptme
        // would write the branch back as it is (all that gptme itself writes).
        if modify::rewrites_unchanged(self.conn(), self.conv.id, current)? {
            modify::append_checkpoint_of(self.batch.conn(), &mut doc, seq + 1, &now_utc_iso(), current)?;
        } else {
            let snapshot = self.messages(current)?;
            let checkpoint = Event { seq: seq + 1, ts: now_utc_iso(), kind: CHECKPOINT.to_owned(), payload: Payload::Messages(snapshot) };
            modify::append_event(self.batch.conn(), self.conv.id, &mut doc, &checkpoint)?;
        }
        modify::compact_events(self.batch.conn(), &mut doc, seq + 1)?;
        // gptme compacts through mkstemp: the rewritten log has mode 0600.
        doc.mode = 0o600;
        self.rewrite(&doc)?;
        Ok((seq, Some(seq + 1)))
    }

    /// Takes one of gptme's lock sidecars (an empty file flocked while a file beside it is
    /// written), creating it as gptme does, and holds it until the session ends.
    pub(crate) fn lock_sidecar(&mut self, rel: &str) -> Result<(), OpsError> {
        if self.sidecars.iter().any(|(held, _)| held == rel) {
            return Ok(());
        }
        let path = self.abs(rel);
        if !path.exists() {
            let stat = self.dir.append(&path, None, umask_mode(), b"")?;
            modify::set_blob_entry(self.conn(), self.conv.id, rel, stat.mode, stat.mtime_ns, b"")?;
        }
        let file = self.dir.open_for_lock(&path)?;
        file.lock().map_err(|source| DirError::Io { path: path.clone(), source })?;
        self.sidecars.push((rel.to_owned(), file));
        Ok(())
    }

    /// Saves the current state of `branch` (or of the active view) as backup branch
    /// `<branch>-<kind>-<n>`, n counting the existing backups with that prefix, as gptme does.
    fn save_backup(&mut self, branch: &str, kind: Backup, messages: &[Message]) -> Result<String, OpsError> {
        let name = self.backup_name(branch, kind)?;
        self.create_branch(&name, messages)?;
        Ok(name)
    }

    /// The name of the next backup branch `<branch>-<kind>-<n>`.
    fn backup_name(&self, branch: &str, kind: Backup) -> Result<String, OpsError> {
        let prefix = layout::backup_prefix(branch, kind);
        let existing = modify::docs(self.conn(), self.conv.id, DocumentKind::Branch)?;
        let n = existing.iter().filter(|d| d.name.starts_with(&prefix)).count();
        Ok(layout::backup_name(branch, kind, n))
    }

    fn create_branch(&mut self, name: &str, messages: &[Message]) -> Result<(), OpsError> {
        self.ensure_dir(layout::BRANCHES_DIR)?;
        let rel = layout::branch_path(name);
        let mut doc = modify::create_doc(self.batch.conn(), self.conv.id, &rel, DocumentKind::Branch, name, TRANSCRIPT_MODE)?;
        modify::replace_lines(self.batch.conn(), self.conv.id, &mut doc, messages)?;
        self.rewrite(&doc)?;
        self.refresh_branch_count()
    }

    fn refresh_branch_count(&self) -> Result<(), OpsError> {
        Ok(modify::refresh_branch_count(self.conn(), self.conv.id)?)
    }

    /// The document an edit or undo of `branch` changes: the log gptme has loaded for it (the
    /// active view when one is active on main, else the branch; see [`modify::loaded_doc`]).
    fn target(&self, branch: &str) -> Result<Doc, OpsError> {
        modify::loaded_doc(self.conn(), self.conv.id, branch)?
            .ok_or_else(|| StoreError::NoBranch { chat_id: self.conv.chat_id.clone(), branch: branch.to_owned() }.into())
    }

    /// Replaces a document's messages and rewrites its file; updates listing totals for main.
    fn replace(&mut self, doc: &mut Doc, messages: &[Message]) -> Result<(), OpsError> {
        modify::replace_lines(self.batch.conn(), self.conv.id, doc, messages)?;
        self.rewrite(doc)?;
        modify::remove_unreferenced_messages(self.conn(), self.conv.id)?;
        if doc.kind == DocumentKind::Branch && doc.name == MAIN {
            self.refresh_totals()?;
        }
        Ok(())
    }

    /// Recomputes the listing totals from main's lines (after a rewrite).
    fn refresh_totals(&self) -> Result<(), OpsError> {
        let main = self.branch_doc(MAIN)?;
        let totals = crate::store::totals::recompute(self.conn(), main.id)?;
        let mtime = self.file_mtime(layout::MAIN_TRANSCRIPT)?;
        crate::store::totals::save(self.conn(), self.conv.id, &totals, mtime)?;
        Ok(())
    }

    /// gptme's `LogManager.edit`: back up the current list as `<branch>-edit-<n>`, replace it,
    /// and log a `message_edit` event carrying the whole new list.
    pub fn edit(&mut self, branch: &str, messages: &[Message]) -> Result<String, OpsError> {
        let mut doc = self.target(branch)?;
        let current = self.messages(&doc)?;
        let backup = self.save_backup(branch, Backup::Edit, &current)?;
        let messages = new_messages(messages);
        self.replace(&mut doc, &messages)?;
        self.log_event(branch, MESSAGE_EDIT, Payload::Messages(messages), &doc)?;
        Ok(backup)
    }

    /// gptme's `LogManager.undo(n)`: a `/undo` command on top is removed first; a backup
    /// `<branch>-undo-<k>` is saved unless the (new) last message is a command; then up to `n`
    /// messages are removed and an `undo` event is logged. Returns the messages removed (the
    /// `/undo` command included) and the backup's name; `None` when there was nothing to undo.
    ///
    /// One deliberate difference: gptme logs `{"n": n}` even when it also removed the `/undo`
    /// command, so its event log then replays to one message too many. sessiondb counts the
    /// command too (`n + 1`), so that recovery gives back the transcript.
    pub fn undo(&mut self, branch: &str, n: usize) -> Result<Option<Undone>, OpsError> {
        let mut doc = self.target(branch)?;
        if let Some(undone) = self.undo_by_prefix(branch, &mut doc, n)? {
            return Ok(undone);
        }
        let mut messages = self.messages(&doc)?;
        let mut removed = Vec::new();
        let undo_command = messages.last().is_some_and(|m| m.content.starts_with("/undo"));
        if undo_command {
            removed.push(messages.pop().expect("checked"));
        }
        let backup = match messages.last() {
            Some(last) if !last.content.starts_with('/') => Some(self.save_backup(branch, Backup::Undo, &messages)?),
            _ => None,
        };
        if messages.is_empty() {
            if !removed.is_empty() {
                self.replace(&mut doc, &messages)?;
            }
            return Ok(None);
        }
        for _ in 0..n {
            match messages.pop() {
                Some(m) => removed.push(m),
                None => break,
            }
        }
        self.replace(&mut doc, &messages)?;
        let logged = n + usize::from(undo_command);
        let payload = Payload::Other(Json::Object(vec![("n".into(), Json::Int(logged.to_string()))]));
        self.log_event(branch, UNDO, payload, &doc)?;
        Ok(Some((removed, backup)))
    }

    /// [`Self::undo`] without reading the branch, for a file that ends with a newline and whose
    /// every line gptme writes back as it is (all that gptme itself writes): the backup and
    /// the branch after the undo are then prefixes of the file's bytes and of its rows, and are
    /// copied, not rebuilt. Only the last `n + 2` lines are read. `None` when that does not
    /// hold, or the file is not what the store says it is: the caller undoes the general way.
    fn undo_by_prefix(&mut self, branch: &str, doc: &mut Doc, n: usize) -> Result<Option<Option<Undone>>, OpsError> {
        let Some(size) = doc.size.filter(|_| doc.ends_with_newline) else { return Ok(None) };
        if !modify::rewrites_unchanged(self.conn(), self.conv.id, doc)? {
            return Ok(None);
        }
        let total = doc.line_count;
        let tail: Vec<StoredLine> = queries::with_document_lines_back(self.conn(), doc.id, total, |lines| lines.take(n.saturating_add(2)).collect())?;
        let tail_lines: Vec<Vec<u8>> = tail.iter().map(StoredLine::line).collect();
        let Some(messages) = tail.iter().map(|l| l.message.as_ref()).collect::<Option<Vec<&Message>>>() else { return Ok(None) };
        let undo_command = messages.first().is_some_and(|m| m.content.starts_with("/undo"));
        let kept = total - i64::from(undo_command);
        if kept == 0 {
            if undo_command {
                self.replace(doc, &[])?;
            }
            return Ok(Some(None));
        }
        let removed_count = i64::try_from(n).unwrap_or(i64::MAX).min(kept) + i64::from(undo_command);
        let new_len = total - removed_count;
        // Bytes from the end of the file to the start of line `line`.
        let suffix = |line: i64| -> u64 { tail_lines[..(total - line) as usize].iter().map(|l| l.len() as u64 + 1).sum() };
        let path = self.abs(&doc.path);
        let io = |source| DirError::Io { path: path.clone(), source };
        let cut = size.checked_sub(suffix(new_len)).ok_or_else(|| StoreError::Corrupt(format!("{}: lines longer than the file", doc.path)))?;
        let file = self.dir.open_read(&path)?;
        if !file_ends_with(file, size, cut, tail_lines[..removed_count as usize].iter().rev().map(Vec::as_slice)).map_err(io)? {
            return Ok(None);
        }
        let backup = match messages.get(usize::from(undo_command)) {
            Some(last) if !last.content.starts_with('/') => {
                let name = self.backup_name(branch, Backup::Undo)?;
                self.ensure_dir(layout::BRANCHES_DIR)?;
                let rel = layout::branch_path(&name);
                let mut backup = modify::create_doc(self.batch.conn(), self.conv.id, &rel, DocumentKind::Branch, &name, TRANSCRIPT_MODE)?;
                modify::copy_lines(self.conn(), doc, &mut backup, kept)?;
                let backup_len = size - suffix(kept);
                self.refresh_branch_count()?;
                // The backup is the whole file when no `/undo` command was removed first: then it
                // is the file itself, kept under the backup's name as the branch is replaced
                // (never copied, never sharing a name with the branch: see
                // `DirTransaction::replace_with_prefix_keeping_old`), with the mode and mtime of
                // a new file. Otherwise it is a copy of the file's first bytes.
                let written = if backup_len == size {
                    None
                } else {
                    let source = self.dir.open_read(&path)?;
                    Some(self.dir.replace_with_prefix(&self.abs(&rel), backup.mode, &source, backup_len)?)
                };
                Some((name, rel, written))
            }
            _ => None,
        };
        modify::truncate_lines(self.conn(), doc, new_len)?;
        let source = self.dir.open_read(&path)?;
        let backup = match backup {
            Some((name, rel, None)) => {
                let (stat, kept) = self.dir.replace_with_prefix_keeping_old(&path, doc.mode, &source, cut, &self.abs(&rel), TRANSCRIPT_MODE)?;
                self.record(&doc.path, stat)?;
                self.record(&rel, kept)?;
                Some(name)
            }
            Some((name, rel, Some(kept))) => {
                let stat = self.dir.replace_with_prefix(&path, doc.mode, &source, cut)?;
                self.record(&doc.path, stat)?;
                self.record(&rel, kept)?;
                Some(name)
            }
            None => {
                let stat = self.dir.replace_with_prefix(&path, doc.mode, &source, cut)?;
                self.record(&doc.path, stat)?;
                None
            }
        };
        let gone = &tail[..removed_count as usize];
        modify::remove_messages_if_unreferenced(self.conn(), &gone.iter().map(|l| l.message_id).collect::<Vec<_>>())?;
        if doc.kind == DocumentKind::Branch && doc.name == MAIN {
            let stored = crate::store::totals::load(self.conn(), self.conv.id)?;
            let lines: Vec<&[u8]> = tail_lines[..removed_count as usize].iter().rev().map(Vec::as_slice).collect();
            let totals = match queries::with_document_lines_back(self.conn(), doc.id, new_len, |kept| stored.without_suffix(&lines, kept.map(|l| l.line())))? {
                Some(totals) => totals,
                None => crate::store::totals::recompute(self.conn(), doc.id)?,
            };
            crate::store::totals::save(self.conn(), self.conv.id, &totals, self.file_mtime(layout::MAIN_TRANSCRIPT)?)?;
        }
        let removed = gone.iter().filter_map(|l| l.message.clone()).collect();
        let logged = n + usize::from(undo_command);
        let payload = Payload::Other(Json::Object(vec![("n".into(), Json::Int(logged.to_string()))]));
        self.log_event(branch, UNDO, payload, doc)?;
        Ok(Some(Some((removed, backup))))
    }

    /// gptme's `LogManager.branch`: creates `name` as a copy of `from` (or of the active view,
    /// as gptme copies its current log) when it does not exist. Returns whether it was created.
    pub fn branch(&mut self, name: &str, from: &str) -> Result<bool, OpsError> {
        crate::model::ChatId::new(name).map_err(|reason| OpsError::InvalidName { what: "branch name", name: name.to_owned(), reason })?;
        if modify::find_doc(self.conn(), self.conv.id, DocumentKind::Branch, name)?.is_some() {
            return Ok(false);
        }
        let source = self.target(from)?;
        let messages = self.messages(&source)?;
        self.create_branch(name, &messages)?;
        Ok(true)
    }
}

/// Messages given to an edit or a view, as gptme would hold them: timestamps normalised, and
/// a missing one set to now (gptme's `Message` defaults to `datetime.now()`, local time).
fn new_messages(messages: &[Message]) -> Vec<Message> {
    let now = crate::codec::timestamp::format_naive(chrono::Local::now().naive_local());
    messages
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m.timestamp.get_or_insert_with(|| now.clone());
            normalise_for_rewrite(&m, 0.0)
        })
        .collect()
}

/// Whether `file` is `size` bytes long and its bytes from `from` on are `lines`, each followed
/// by a newline.
fn file_ends_with<'a>(mut file: std::fs::File, size: u64, from: u64, lines: impl Iterator<Item = &'a [u8]>) -> std::io::Result<bool> {
    use std::io::{Read, Seek};
    if file.metadata()?.len() != size {
        return Ok(false);
    }
    file.seek(std::io::SeekFrom::Start(from))?;
    let mut found = Vec::new();
    file.read_to_end(&mut found)?;
    let mut expected = Vec::with_capacity(found.len());
    for line in lines {
        expected.extend_from_slice(line);
        expected.push(b'\n');
    }
    Ok(found == expected)
}

/// Nanoseconds since the epoch → seconds, as CPython computes `st_mtime`.
fn seconds(ns: i64) -> f64 {
    ns.div_euclid(1_000_000_000) as f64 + ns.rem_euclid(1_000_000_000) as f64 * 1e-9
}
