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
//! - **removed on purpose**: the branch's event log still holds the append's own event and
//!   replays (as gptme's recovery does) to a list without the message: an undo or an edit took
//!   it out. A later undo of something else does not count. The record is dropped.
//! - **displaced** otherwise. The store's copy of that branch — which still holds the message,
//!   because the re-read has not happened yet — is written to the directory as a new branch
//!   `<branch>-conflict-<n>`, and the re-read takes it in. The file is created new (linked into
//!   place, never replacing anything), which is safe even while gptme holds the conversation:
//!   gptme writes only the branches it knows. The record is dropped in the caller's transaction.
//!
//! If the conflict branch cannot be written, the caller must not re-read the conversation: the
//! store's copy is then the only one.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use serde::Serialize;

use super::ingest::{self, IngestError};
use crate::codec::events::{decode_event_line, replay, EventLine, MESSAGE_APPEND};
use crate::codec::message_line::{decode_line, LineContent};
use crate::store::acknowledged::{self as records, message_key, Acknowledged, MessageKey};
use crate::store::{live, DocumentKind, StoreError};

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

/// One branch's event log, as far as the judgement needs it.
struct EventLog {
    /// The seqs of its `message_append` events.
    appends: HashSet<i64>,
    /// The messages gptme's recovery replays it to.
    replayed: HashSet<MessageKey>,
}

/// The event log of the branch whose transcript is `path`.
fn events_path(path: &str) -> Option<String> {
    match ingest::classify(path) {
        Some((DocumentKind::Branch, _)) if path == "conversation.jsonl" => Some("events.jsonl".to_owned()),
        Some((DocumentKind::Branch, name)) => Some(format!("branches/{name}/events.jsonl")),
        _ => None,
    }
}

/// Opens a regular file for reading without following a link or blocking on a FIFO.
fn open_regular(path: &Path) -> std::io::Result<Option<fs::File>> {
    let file = match fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None), // a link: not a transcript
        Err(e) => return Err(e),
    };
    Ok(file.metadata()?.is_file().then_some(file))
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
        for f in ingest::walk(dir)? {
            if !matches!(ingest::classify(&f.rel), Some((DocumentKind::Branch | DocumentKind::View, _))) || !f.meta.is_file() {
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
        let wanted: HashSet<String> = records.iter().filter_map(|r| events_path(&r.path)).collect();
        for rel in wanted {
            let path = dir.join(&rel);
            let Some(file) = open_regular(&path).map_err(io(&path))? else { continue };
            let mut events = Vec::new();
            for line in lines(file) {
                if let EventLine::Event { event, .. } = decode_event_line(&line.map_err(io(&path))?) {
                    events.push(event);
                }
            }
            let appends = events.iter().filter(|e| e.kind == MESSAGE_APPEND).map(|e| e.seq).collect();
            let replayed = replay(&events).unwrap_or_default().iter().map(message_key).collect();
            logs.insert(rel, EventLog { appends, replayed });
        }
        Ok(DirectoryView { present, logs })
    }

    /// Present in a transcript; else removed on purpose when the branch's event log still holds
    /// the append's own event and replays (as gptme's recovery does) to a list without the
    /// message — an undo or an edit took it out; else displaced. A log compacted past the
    /// append cannot tell: displaced, the safe side.
    fn verdict(&self, r: &Acknowledged) -> Verdict {
        if self.present.contains(&r.key) {
            return Verdict::Present;
        }
        let log = events_path(&r.path).and_then(|e| self.logs.get(&e));
        match log {
            Some(log) if log.appends.contains(&r.event_seq) && !log.replayed.contains(&r.key) => Verdict::Explained,
            _ => Verdict::Displaced,
        }
    }
}

fn store_err(dir: &Path) -> impl Fn(StoreError) -> IngestError + '_ {
    move |source| IngestError::Store { path: dir.to_owned(), source }
}

/// Which recorded appends of `chat_id` the directory `dir` has dropped without explanation,
/// per transcript. Reads only: for `doctor`.
pub fn check(conn: &rusqlite::Connection, chat_id: &str, dir: &Path) -> Result<Vec<Displaced>, IngestError> {
    let records = records::of_conversation(conn, chat_id).map_err(store_err(dir))?;
    if records.is_empty() || !dir.join("conversation.jsonl").exists() {
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
pub fn rescue(conn: &rusqlite::Connection, chat_id: &str, dir: &Path) -> Result<Vec<Displaced>, IngestError> {
    let records = records::of_conversation(conn, chat_id).map_err(store_err(dir))?;
    if records.is_empty() || !dir.join("conversation.jsonl").exists() {
        return Ok(Vec::new());
    }
    let view = DirectoryView::read(dir, &records)?;
    let unheld = super::gptme_lock::holder(dir).is_none();
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
    let mut names = super::pending::ConflictNames::default();
    for (path, lost) in displaced {
        let (bytes, mode) = store_copy(conn, chat_id, &path, &lost).map_err(store_err(dir))?;
        let rel = names.place(dir, &path, &bytes);
        create_new(dir, &rel, mode, &bytes).map_err(|source| IngestError::Io { path: dir.join(&rel), source })?;
        for r in &lost {
            records::forget(conn, chat_id, r).map_err(store_err(dir))?;
        }
        kept.push(Displaced { chat_id: chat_id.to_owned(), path, messages: lost.len() as u64, kept_as: Some(rel) });
    }
    Ok(kept)
}

/// The store's copy of transcript `path` of `chat_id`, with any of `lost` it does not hold
/// appended (each record holds its line), and the file's mode.
fn store_copy(conn: &rusqlite::Connection, chat_id: &str, path: &str, lost: &[&Acknowledged]) -> Result<(Vec<u8>, u32), StoreError> {
    let mut bytes = Vec::new();
    let mut mode = 0o600; // gptme writes transcripts through temporary files
    let mut held = HashSet::new();
    let conv = live::load_conversation(conn, chat_id)?;
    let doc = match ingest::classify(path) {
        Some((kind, name)) => live::find_doc(conn, conv.id, kind, &name)?,
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
    for r in lost.iter().filter(|r| !held.contains(&r.key)) {
        bytes.extend_from_slice(&r.line);
        bytes.push(b'\n');
    }
    Ok((bytes, mode))
}

/// Creates `dir/rel` holding `bytes`, atomically and only if nothing is there: written to a
/// temporary file beside it, then hard-linked into place (which fails rather than replace).
/// Its parent (`branches/`) is created when missing; a link there is refused.
fn create_new(dir: &Path, rel: &str, mode: u32, bytes: &[u8]) -> std::io::Result<()> {
    let dest = dir.join(rel);
    let parent = dest.parent().expect("a path inside the conversation");
    match fs::symlink_metadata(parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(std::io::Error::other("not a directory (a link or a file where gptme keeps branches/); nothing was written through it")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fs::create_dir(parent)?,
        Err(e) => return Err(e),
    }
    let temp = tempfile::Builder::new().prefix(super::fsutil::TEMP_PREFIX).tempfile_in(parent)?;
    let mut file = temp.as_file();
    file.write_all(bytes)?;
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.sync_all()?;
    fs::hard_link(temp.path(), &dest)?;
    drop(temp);
    super::fsutil::sync_dir(parent)
}
