//! Materialising changes that were made in the store only (operations run with `--queue`)
//! into the conversation directory, keeping both sides of every conflict.
//!
//! Each queued path remembers what the directory held when the store last agreed with it (its
//! size and mtime, see `pending_paths`). At sync, a path whose directory copy still matches
//! that base gets the store's version, written atomically. A path the directory changed too is
//! a conflict, unless both now hold the same bytes (a sync that was killed after writing): the
//! directory's version stays where it is, and the store's is kept beside it —
//! a branch transcript as the new branch `<branch>-conflict-<n>` (its event log, if that
//! diverged too, as that branch's `events.jsonl`), a view as `views/<view>-conflict-<n>.jsonl`,
//! any other file as `<path>.conflict-<n>`. Then the conversation is read back from the
//! directory, so the store holds exactly what the directory holds: both versions.
//!
//! The directory is written under gptme's `.lock` (a conversation that a live gptme holds is
//! left for a later sync) and through a [`DirTransaction`], and the store commits only after
//! every file is in place, so a crash at any point leaves the queue to be finished next time.
//! Every look at the directory goes through its handle ([`Dir`]): a conflict name whose place
//! holds a link, FIFO, device or socket is not free and is never opened (the next name is
//! taken), and a link where a directory is to be written fails the conversation, naming it.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde::Serialize;

use super::ingest::{self, IngestError, ReadMode};
use super::SyncError;
use crate::fs::dirtx::{DirError, DirTransaction};
use crate::fs::gptme_lock;
use crate::fs::nofollow::{Dir, Kind};
use crate::fs::walk::walk;
use crate::layout::{self, classify};
use crate::store::{modify, pending, queries, DocumentKind, StoreError, WriteBatch};

/// Both sides changed one file since the last sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    pub chat_id: String,
    /// The file both sides changed; it keeps the directory's version.
    pub path: String,
    /// Where the store's version was kept (`None`: the store had removed the file).
    pub kept_as: Option<String>,
}

/// What materialising one conversation's queue did (or, in a dry run, would do).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Materialised {
    pub files: u64,
    /// Messages the directory's transcripts gained.
    pub messages: u64,
    pub conflicts: Vec<Conflict>,
}

/// The store's version of one path: a directory, a file's bytes and mode, or nothing.
enum StoreVersion {
    Absent,
    Dir(u32),
    File { bytes: Vec<u8>, mode: u32 },
}

fn store_version(conn: &crate::store::Connection, entries: &HashMap<String, queries::Entry>, path: &str) -> Result<StoreVersion, StoreError> {
    let Some(entry) = entries.get(path).cloned() else { return Ok(StoreVersion::Absent) };
    let mut bytes = Vec::new();
    match entry.kind {
        queries::EntryKind::Dir => return Ok(StoreVersion::Dir(entry.mode)),
        queries::EntryKind::Symlink(target) => bytes = target, // compared, never written (operations make no links)
        queries::EntryKind::Blob(sha) => {
            queries::open_blob(conn, &sha)?.read_to_end(&mut bytes).map_err(|source| StoreError::Io { path: path.to_owned(), source })?;
        }
        queries::EntryKind::Document { id, kind, ends_with_newline } => {
            crate::sync::materialise::write_document(conn, id, kind, ends_with_newline, &mut bytes)?;
        }
    }
    Ok(StoreVersion::File { bytes, mode: entry.mode })
}

/// Writes the queued changes of conversation `chat_id` to its directory (see the module
/// documentation), or with `dry_run` only reports what that would do. Fails with
/// [`SyncError::Lock`] when a live gptme holds the conversation.
pub fn materialise_pending(conn: &mut crate::store::Connection, chat_id: &str, dry_run: bool) -> Result<Materialised, SyncError> {
    let dir = modify::load_conversation(conn, chat_id)?.dir;
    let io_dir = |source| DirError::Io { path: dir.clone(), source };
    let handle = Dir::open(&dir).map_err(io_dir)?;
    // The directory lock first, then the database lock, as every writer takes them.
    let _lock = if dry_run { None } else { Some(gptme_lock::acquire(&handle)?) };
    if !dry_run {
        crate::fs::atomic::remove_debris(&handle).map_err(io_dir)?;
    }
    let mut batch = WriteBatch::begin(conn)?;
    let conv = modify::load_conversation(batch.conn(), chat_id)?;
    let mut tx = DirTransaction::new(handle.try_clone().map_err(io_dir)?);
    let mut out = Materialised::default();
    let mut names = ConflictNames::default();
    let mut messages = TranscriptMessages::of_directory(&dir, &handle)?;
    let entries: HashMap<String, queries::Entry> = queries::entries(batch.conn(), conv.id)?.into_iter().map(|e| (e.path.clone(), e)).collect();
    for p in pending::pending_paths(batch.conn(), conv.id)? {
        let abs = dir.join(&p.path);
        let rel = Path::new(&p.path);
        let io = |source| DirError::Io { path: abs.clone(), source };
        let now = handle.stat(rel).map_err(io)?;
        let store = store_version(batch.conn(), &entries, &p.path)?;
        if let StoreVersion::Dir(mode) = store {
            if now.is_none() && !dry_run {
                tx.create_dir(&abs, mode)?;
            }
            continue;
        }
        let dir_changed = match (&now, p.base) {
            (None, None) => false,
            (Some(m), _) if m.kind == Kind::Dir => true,
            (Some(m), Some((size, mtime_ns))) => m.size != size || m.mtime_ns != mtime_ns,
            _ => true,
        };
        if !dir_changed {
            match store {
                StoreVersion::File { bytes, mode } => {
                    if !dry_run {
                        tx.replace(&abs, mode, |w| w.write_all(&bytes))?;
                    }
                    out.files += 1;
                    out.messages += messages.count_new(&p.path, &bytes);
                }
                StoreVersion::Absent if now.is_some() => {
                    if !dry_run {
                        tx.remove(&abs)?;
                    }
                    out.files += 1;
                }
                _ => {}
            }
            continue;
        }
        let on_disk = match now.map(|m| m.kind) {
            Some(Kind::File) => Some(handle.read(rel, u64::MAX).map_err(io)?),
            Some(Kind::Symlink) => Some(handle.read_link(rel).map_err(io)?.into_os_string().into_encoded_bytes()),
            _ => None,
        };
        match store {
            StoreVersion::File { bytes, mode } => {
                if on_disk.as_deref() == Some(&bytes[..]) {
                    continue; // both hold the same: written by a sync that did not get to commit
                }
                let kept = names.place(&handle, &p.path, &bytes).map_err(io)?;
                let kept_abs = dir.join(&kept);
                if !holds(&handle, &kept, &bytes).map_err(io)? && !dry_run {
                    if let Some(parent) = kept_abs.parent() {
                        tx.create_dir(parent, crate::fs::meta::new_dir_mode())?;
                    }
                    tx.replace(&kept_abs, mode, |w| w.write_all(&bytes))?;
                }
                out.files += 1;
                out.messages += messages.count_new(&kept, &bytes);
                out.conflicts.push(Conflict { chat_id: chat_id.to_owned(), path: p.path.clone(), kept_as: Some(kept) });
            }
            StoreVersion::Absent => {
                if on_disk.is_some() {
                    out.conflicts.push(Conflict { chat_id: chat_id.to_owned(), path: p.path.clone(), kept_as: None });
                }
            }
            StoreVersion::Dir(_) => unreachable!("handled above"),
        }
    }
    if dry_run {
        return Ok(out); // the batch rolls back, and nothing was written
    }
    // The directory now holds everything: the queue is done, and the directory is read back,
    // in the same transaction (a queue added meanwhile waits for the lock and then for the
    // next sync, since the queued operation takes the database lock too).
    pending::clear(batch.conn(), conv.id)?;
    crate::store::acknowledged::touch(batch.conn(), chat_id)?;
    ingest::import_conversation(&mut batch, &dir, ReadMode::Whole)?;
    batch.finish()?;
    tx.commit()?;
    Ok(out)
}

/// The messages a conversation directory's transcripts hold, to count what a write adds.
struct TranscriptMessages(std::collections::HashSet<crate::store::LineDigest>);

impl TranscriptMessages {
    fn of_directory(dir: &Path, handle: &Dir) -> Result<Self, SyncError> {
        let mut seen = std::collections::HashSet::new();
        for f in walk(dir).map_err(IngestError::from)?.entries {
            if matches!(classify(&f.rel), Some((DocumentKind::Branch, _))) && f.meta.is_file() {
                let bytes = handle.read(Path::new(&f.rel), u64::MAX).map_err(|source| DirError::Io { path: dir.join(&f.rel), source })?;
                seen.extend(Self::messages(&bytes));
            }
        }
        Ok(TranscriptMessages(seen))
    }

    fn messages(bytes: &[u8]) -> impl Iterator<Item = crate::store::LineDigest> + '_ {
        use sha2::Digest;
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| matches!(crate::codec::message_line::decode_line(l).content, crate::codec::message_line::LineContent::Message(_)))
            .map(|l| sha2::Sha256::digest(l).into())
    }

    /// How many messages written to transcript `rel` as `bytes` the directory did not hold.
    fn count_new(&mut self, rel: &str, bytes: &[u8]) -> u64 {
        if !matches!(classify(rel), Some((DocumentKind::Branch, _))) {
            return 0;
        }
        let digests: Vec<_> = Self::messages(bytes).collect();
        digests.into_iter().filter(|d| self.0.insert(*d)).count() as u64
    }
}

/// Conflict names handed out in one pass: a branch's transcript and event log go to the same
/// `<branch>-conflict-<n>`.
#[derive(Default)]
pub(crate) struct ConflictNames {
    branches: HashMap<String, String>,
}

impl ConflictNames {
    /// Where the store's version of `rel` goes: the first free name, or one that already holds
    /// exactly `bytes` (a pass that was interrupted after writing it). A name whose place holds
    /// anything else — a link, a FIFO, a device — is passed over unopened.
    pub(crate) fn place(&mut self, dir: &Dir, rel: &str, bytes: &[u8]) -> std::io::Result<String> {
        let holds = |candidate: &str| holds(dir, candidate, bytes);
        let free = |candidate: &str| dir.stat(Path::new(candidate)).map(|s| s.is_none());
        match classify(rel) {
            Some((kind @ (DocumentKind::Branch | DocumentKind::Events), branch)) => {
                let file = |name: &str| match kind {
                    DocumentKind::Branch => layout::branch_path(name),
                    _ => layout::events_path(name),
                };
                if let Some(name) = self.branches.get(&branch) {
                    if free(&file(name))? || holds(&file(name))? {
                        return Ok(file(name));
                    }
                }
                for n in 1.. {
                    let name = layout::conflict_branch(&branch, n);
                    let unused = free(&layout::branch_path(&name))? && free(&layout::events_dir(&name))?;
                    if unused || holds(&file(&name))? {
                        self.branches.insert(branch.clone(), name.clone());
                        return Ok(file(&name));
                    }
                }
                unreachable!("an unbounded range")
            }
            Some((DocumentKind::View, view)) => first_free(|n| layout::conflict_view_path(&view, n), free, holds),
            _ => first_free(|n| layout::conflict_file_path(rel, n), free, holds),
        }
    }
}

/// Whether `rel` is a regular file holding exactly `bytes` (nothing else is opened).
fn holds(dir: &Dir, rel: &str, bytes: &[u8]) -> std::io::Result<bool> {
    let rel = Path::new(rel);
    match dir.stat(rel)? {
        Some(s) if s.kind == Kind::File && s.size == bytes.len() as u64 => Ok(dir.read(rel, s.size + 1)? == bytes),
        _ => Ok(false),
    }
}

/// The first name `name(n)`, n = 1, 2, …, that is free or holds the bytes already. Ends: each
/// check either answers or fails (a parent that is a link or not a directory fails them all).
fn first_free(
    name: impl Fn(u64) -> String,
    free: impl Fn(&str) -> std::io::Result<bool>,
    holds: impl Fn(&str) -> std::io::Result<bool>,
) -> std::io::Result<String> {
    for n in 1.. {
        let candidate = name(n);
        if free(&candidate)? || holds(&candidate)? {
            return Ok(candidate);
        }
    }
    unreachable!("an unbounded range")
}
