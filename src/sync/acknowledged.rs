//! Keeping what sessiondb acknowledged when gptme rewrites a transcript from a stale copy.
//!
//! gptme 0.35.1's `LogManager.load` reads the transcript before it takes `.lock`. A message
//! sessiondb appends in that gap is missing from gptme's copy, and gptme's next rewrite of the
//! file (an append that finds the file longer than it thinks, an edit, an undo) drops it. So
//! every message sessiondb appends to a branch is recorded (`store::acknowledged`), and before
//! a conversation is read again whole ([`rescue`], called by `ingest::import_dirs`) each record
//! is judged against the directory:
//!
//! - **present** in any transcript of the directory: safe. The record is dropped once no gptme
//!   can hold a copy without it: no live process holds `.lock` and the append is older than
//!   [`SETTLE`] (gptme's read-to-lock gap is milliseconds).
//! - **removed on purpose**: replaying the branch's event log from the append's own event, an
//!   undo pops it without leaving a backup branch (gptme keeps a backup of every other undo and
//!   of every edit, and the message would then be present in it). The record is dropped.
//! - **displaced** otherwise. The store's copy of that branch — which still holds the message,
//!   because the re-read has not happened yet — is written to the directory as a new branch
//!   `<branch>-conflict-<n>`, and the re-read takes it in. The file is created new (linked into
//!   place, never replacing anything), which is safe even while gptme holds the conversation:
//!   gptme writes only the branches it knows. The record is dropped in the caller's transaction.
//!
//! If the conflict branch cannot be written, the caller must not re-read the conversation: the
//! store's copy is then the only one. Should a re-read still race a rewrite (judged present,
//! then read from the rewritten file), the store no longer holds the message while its record
//! remains: `sync` and the operations notice (`store::acknowledged::any_missing_from_store`)
//! and read the conversation again, which judges it again; the conflict branch then holds the
//! recorded lines alone, in the order they were acknowledged.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Serialize;

use super::ingest::IngestError;
use crate::codec::events::{decode_event_line, Event, EventLine, Payload, CHECKPOINT, MESSAGE_APPEND, MESSAGE_EDIT, UNDO};
use crate::codec::message_line::{decode_line, LineContent};
use crate::fs::walk::walk;
use crate::layout::{self, classify};
use crate::store::acknowledged::{self as records, message_key, Acknowledged, MessageKey};
use crate::store::{modify, DocumentKind, StoreError};

/// How long after an append a gptme that loaded the conversation just before it may still be
/// taking `.lock` (its read-to-lock gap is milliseconds; this is generous).
pub const SETTLE: f64 = 60.0;

/// Messages sessiondb appended that a rewrite of the directory dropped without an undo or an
/// edit to explain it.
#[derive(Debug, Clone, Serialize)]
pub struct Displaced {
    pub chat_id: String,
    /// The transcript they were appended to.
    pub path: String,
    pub messages: u64,
    /// The new branch that keeps them (`None` when only checked, as `doctor` does).
    pub kept_as: Option<String>,
}

enum Verdict {
    Present,
    Explained,
    Displaced,
}

/// What the directory says about the records: the messages its transcripts hold, and per
/// branch event log, which sequence numbers it holds and what it replays to.
struct DirectoryView {
    present: HashSet<MessageKey>,
    logs: HashMap<String, EventLog>,
}

/// One branch's event log, decoded (damaged lines skipped, as gptme skips them).
struct EventLog(Vec<Event>);

impl EventLog {
    /// Whether the log shows `ours` taken out on purpose: replayed from its own
    /// `message_append` event on, it is popped by an undo that left no backup branch (gptme
    /// keeps none when a command is on top). Any other way out — an undo that did keep a
    /// backup (which would then hold it: it is not in the directory, so that undo worked on a
    /// copy without it), an edit or a checkpoint whose list lacks it, a log compacted past its
    /// event — is not on purpose: gptme wrote from a copy that never had it.
    fn removed_on_purpose(&self, ours: &Acknowledged) -> bool {
        let Some(start) = self.0.iter().position(|e| e.seq == ours.event_seq && e.kind == MESSAGE_APPEND) else { return false };
        // The messages from ours up (ours first), with their contents' start: gptme's undo
        // looks at whether the last one is a command (`/...`), or the `/undo` command itself.
        let mut above: Vec<(MessageKey, String)> = vec![(ours.key, String::new())];
        let head = |m: &crate::model::Message| m.content.chars().take(5).collect::<String>();
        let from_list = |messages: &[crate::model::Message]| -> Option<Vec<(MessageKey, String)>> {
            let at = messages.iter().rposition(|m| message_key(m) == ours.key)?;
            Some(messages[at..].iter().map(|m| (message_key(m), head(m))).collect())
        };
        for event in &self.0[start + 1..] {
            match (event.kind.as_str(), &event.payload) {
                (MESSAGE_APPEND, Payload::Message(m)) => above.push((message_key(m), head(m))),
                (UNDO, Payload::Other(payload)) => {
                    // As gptme's undo: a `/undo` on top goes first, a backup is kept unless the
                    // message then on top is a command, then n are popped.
                    let n = payload.get("n").and_then(crate::codec::json::Json::as_i64).unwrap_or(1).max(0) as usize;
                    if above.len() > 1 && above.last().is_some_and(|(_, h)| h.starts_with("/undo")) {
                        above.pop();
                    }
                    let backup = above.last().is_some_and(|(_, h)| !h.starts_with('/'));
                    if n >= above.len() {
                        return !backup;
                    }
                    above.truncate(above.len() - n);
                }
                (MESSAGE_EDIT | CHECKPOINT, Payload::Messages(ms)) => match from_list(ms) {
                    Some(list) => above = list,
                    None => return false,
                },
                _ => {}
            }
        }
        false
    }
}

/// Opens `path` for reading when it is a regular file (never a link, FIFO or device); `None`
/// when it is missing or something else.
fn open_regular(path: &Path) -> std::io::Result<Option<fs::File>> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => crate::fs::nofollow::open_regular(path).map(Some),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn lines(file: fs::File) -> impl Iterator<Item = std::io::Result<Vec<u8>>> {
    BufReader::new(file).split(b'\n')
}

impl DirectoryView {
    fn read(dir: &Path, records: &[Acknowledged]) -> Result<Self, IngestError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| IngestError::Io { path, source }
        };
        let mut present = HashSet::new();
        for f in walk(dir)?.entries {
            if !matches!(classify(&f.rel), Some((DocumentKind::Branch | DocumentKind::View, _))) || !f.meta.is_file() {
                continue;
            }
            let path = dir.join(&f.rel);
            let Some(file) = open_regular(&path).map_err(io(&path))? else { continue };
            for line in lines(file) {
                if let LineContent::Message(m) = decode_line(&line.map_err(io(&path))?).content {
                    present.insert(message_key(&m));
                }
            }
        }
        let mut logs = HashMap::new();
        let wanted: HashSet<String> = records.iter().filter_map(|r| layout::events_path_of_transcript(&r.path)).collect();
        for rel in wanted {
            let path = dir.join(&rel);
            let Some(file) = open_regular(&path).map_err(io(&path))? else { continue };
            let mut events = Vec::new();
            for line in lines(file) {
                if let EventLine::Event { event, .. } = decode_event_line(&line.map_err(io(&path))?) {
                    events.push(event);
                }
            }
            logs.insert(rel, EventLog(events));
        }
        Ok(DirectoryView { present, logs })
    }

    /// Present in a transcript; else removed on purpose when the branch's event log shows it
    /// (see [`EventLog::removed_on_purpose`]); else displaced.
    fn verdict(&self, r: &Acknowledged) -> Verdict {
        if self.present.contains(&r.key) {
            return Verdict::Present;
        }
        match layout::events_path_of_transcript(&r.path).and_then(|e| self.logs.get(&e)) {
            Some(log) if log.removed_on_purpose(r) => Verdict::Explained,
            _ => Verdict::Displaced,
        }
    }
}

fn store_err(dir: &Path) -> impl Fn(StoreError) -> IngestError + '_ {
    move |source| IngestError::Store { path: dir.to_owned(), source }
}

/// Which recorded appends of `chat_id` the directory `dir` has dropped without explanation,
/// per transcript. Reads only: for `doctor`.
pub fn check(conn: &crate::store::Connection, chat_id: &str, dir: &Path) -> Result<Vec<Displaced>, IngestError> {
    let records = records::of_conversation(conn, chat_id).map_err(store_err(dir))?;
    if records.is_empty() || !dir.join(layout::MAIN_TRANSCRIPT).exists() {
        return Ok(Vec::new());
    }
    let view = DirectoryView::read(dir, &records)?;
    let mut by_path: Vec<Displaced> = Vec::new();
    for r in records.iter().filter(|r| matches!(view.verdict(r), Verdict::Displaced)) {
        match by_path.iter_mut().find(|d| d.path == r.path) {
            Some(d) => d.messages += 1,
            None => by_path.push(Displaced { chat_id: chat_id.to_owned(), path: r.path.clone(), messages: 1, kept_as: None }),
        }
    }
    Ok(by_path)
}

/// Judges every recorded append of `chat_id` against `dir` (see the module documentation),
/// writing a conflict branch for each transcript that lost some, and dropping the records that
/// are settled. Call inside the write transaction that then re-reads the conversation, before
/// reading it; on error, do not re-read it.
pub fn rescue(conn: &crate::store::Connection, chat_id: &str, dir: &Path) -> Result<Vec<Displaced>, IngestError> {
    let records = records::of_conversation(conn, chat_id).map_err(store_err(dir))?;
    if records.is_empty() || !dir.join(layout::MAIN_TRANSCRIPT).exists() {
        return Ok(Vec::new());
    }
    let view = DirectoryView::read(dir, &records)?;
    let unheld = crate::fs::gptme_lock::holder(dir).is_none();
    let mut displaced: Vec<(String, Vec<&Acknowledged>)> = Vec::new();
    for r in &records {
        match view.verdict(r) {
            Verdict::Present if unheld && records::epoch_seconds() - r.appended_at > SETTLE => records::forget(conn, chat_id, r).map_err(store_err(dir))?,
            Verdict::Present => {}
            Verdict::Explained => records::forget(conn, chat_id, r).map_err(store_err(dir))?,
            Verdict::Displaced => match displaced.iter_mut().find(|(p, _)| *p == r.path) {
                Some((_, list)) => list.push(r),
                None => displaced.push((r.path.clone(), vec![r])),
            },
        }
    }
    let mut kept = Vec::new();
    if displaced.is_empty() {
        return Ok(kept);
    }
    let mut names = super::pending::ConflictNames::default();
    let io = |source| IngestError::Io { path: dir.to_owned(), source };
    let handle = crate::fs::nofollow::Dir::open(dir).map_err(io)?;
    for (path, lost) in displaced {
        let (bytes, mode) = store_copy(conn, chat_id, &path, &lost).map_err(store_err(dir))?;
        let rel = names.place(&handle, &path, &bytes).map_err(io)?;
        create_new(&handle, &rel, mode, &bytes).map_err(|source| IngestError::Io { path: dir.join(&rel), source })?;
        for r in &lost {
            records::forget(conn, chat_id, r).map_err(store_err(dir))?;
        }
        kept.push(Displaced { chat_id: chat_id.to_owned(), path, messages: lost.len() as u64, kept_as: Some(rel) });
    }
    Ok(kept)
}

/// What the conflict branch for transcript `path` of `chat_id` holds, and its mode: the store's
/// copy of the transcript when it holds every one of `lost` (the usual case: the directory has
/// not been read since), else the lost messages alone (each record keeps its line).
fn store_copy(conn: &crate::store::Connection, chat_id: &str, path: &str, lost: &[&Acknowledged]) -> Result<(Vec<u8>, u32), StoreError> {
    let mut bytes = Vec::new();
    let mut mode = 0o600; // gptme writes transcripts through temporary files
    let mut held = HashSet::new();
    let conv = modify::load_conversation(conn, chat_id)?;
    let doc = match classify(path) {
        Some((kind, name)) => modify::find_doc(conn, conv.id, kind, &name)?,
        None => None,
    };
    if let Some(doc) = doc {
        mode = doc.mode;
        super::materialise::write_document(conn, doc.id, doc.kind, true, &mut bytes)?;
        for line in bytes.split(|&b| b == b'\n') {
            if let LineContent::Message(m) = decode_line(line).content {
                held.insert(message_key(&m));
            }
        }
    }
    if lost.iter().any(|r| !held.contains(&r.key)) {
        // The store's copy was read again from the directory since: it no longer shows where
        // they stood. Keep just them, in the order they were acknowledged.
        bytes.clear();
        for r in lost {
            bytes.extend_from_slice(&r.line);
            bytes.push(b'\n');
        }
    }
    Ok((bytes, mode))
}

/// Creates `rel` beneath `handle` holding `bytes`, atomically and only if nothing is there: written to a
/// temporary file beside it, then hard-linked into place (which fails rather than replace).
/// Its parent (`branches/`) is created when missing; nothing is done through a link.
fn create_new(handle: &crate::fs::nofollow::Dir, rel: &str, mode: u32, bytes: &[u8]) -> std::io::Result<()> {
    let rel = Path::new(rel);
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        handle.create_dir(parent, crate::fs::meta::new_dir_mode())?;
    }
    let temp = parent.unwrap_or(Path::new("")).join(format!("{}rescue-{}", crate::fs::atomic::TEMP_PREFIX, std::process::id()));
    handle.write_atomic(&temp, mode, crate::fs::meta::now_ns(), |out| out.write_all(bytes))?;
    let linked = handle.hard_link(&temp, rel);
    handle.remove_file(&temp)?;
    linked?;
    match parent {
        Some(p) => handle.open_dir(p)?.sync(),
        None => handle.sync(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json::Json;
    use crate::model::{Message, Role};

    fn message(content: &str) -> Message {
        Message::new(Role::User, content, Some("2026-12-01T10:00:00".into()))
    }

    fn append(seq: i64, content: &str) -> Event {
        Event { seq, ts: String::new(), kind: MESSAGE_APPEND.into(), payload: Payload::Message(message(content)) }
    }

    fn undo(seq: i64, n: i64) -> Event {
        Event { seq, ts: String::new(), kind: UNDO.into(), payload: Payload::Other(Json::Object(vec![("n".into(), Json::Int(n.to_string()))])) }
    }

    fn edit(seq: i64, contents: &[&str]) -> Event {
        Event { seq, ts: String::new(), kind: MESSAGE_EDIT.into(), payload: Payload::Messages(contents.iter().map(|c| message(c)).collect()) }
    }

    fn ours() -> Acknowledged {
        Acknowledged { path: "conversation.jsonl".into(), key: message_key(&message("ours")), line: Vec::new(), event_seq: 2, appended_at: 0.0 }
    }

    #[test]
    fn only_an_undo_that_kept_no_backup_removes_on_purpose() {
        let judged = |events: Vec<Event>| EventLog(events).removed_on_purpose(&ours());
        // An undo keeps a backup holding it: had it worked on a copy with ours, ours would be
        // in that backup, so its absence means the copy never had it.
        assert!(!judged(vec![append(1, "a"), append(2, "ours"), undo(3, 1)]));
        // A later undo of something else leaves it.
        assert!(!judged(vec![append(2, "ours"), append(3, "b"), undo(4, 1)]));
        // An edit, or a list written from a copy that never had it.
        assert!(!judged(vec![append(1, "a"), append(2, "ours"), edit(3, &["a"])]));
        // A log compacted past its event cannot tell.
        assert!(!judged(vec![append(5, "b")]));
        // `/undo` on top goes first, and the backup then holds ours: not on purpose.
        assert!(!judged(vec![append(1, "a"), append(2, "ours"), append(3, "/undo"), undo(4, 1)]));
        // A command on top keeps no backup: an undo through ours is on purpose.
        assert!(judged(vec![append(1, "a"), append(2, "ours"), append(3, "/x"), undo(4, 2)]));
        // An edit that kept it, then such an undo.
        assert!(judged(vec![append(2, "ours"), edit(3, &["a", "ours", "/x"]), undo(4, 2)]));
    }
}
