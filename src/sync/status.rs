//! How the store stands against a logs root, without changing either: in full for `sessiondb
//! doctor` ([`sync_state`]), and at a glance for the commands that list or search everything
//! ([`behind`]).

use std::path::Path;

use serde::Serialize;

use super::ingest::{self, IngestError};
use crate::fs::walk::{fingerprint as fingerprint_of, walk};
use crate::store::queries;

/// Where each conversation of a logs root stands.
#[derive(Debug, Default, Serialize)]
pub struct SyncState {
    pub logs_dir: String,
    /// Conversations whose directory is exactly as the store last read or wrote it.
    pub in_step: u64,
    /// Directories changed since (the next `sync` reads them).
    pub changed: Vec<String>,
    /// Directories whose only change is a last line without its newline, in a transcript or
    /// event log: gptme is writing it, or it was cut off. `sync` reads whole lines only, so it
    /// has nothing to read there yet; `import` keeps a cut-off line as it is.
    pub unfinished: Vec<String>,
    /// Conversations with changes queued in the store (the next `sync` writes them).
    pub queued: Vec<String>,
    /// Directories the store does not have yet.
    pub not_imported: Vec<String>,
    /// Stored conversations whose directory is gone: marked deleted, or to be marked by `sync`.
    pub deleted: Vec<String>,
    /// Conversations archived out of the root (`sessiondb archive`): gone on purpose, kept whole
    /// in the store.
    pub archived: u64,
    /// Conversations with queued changes whose directory is gone (renamed or deleted): nothing
    /// can be written until it is back (or the store's copy is exported elsewhere).
    pub stranded: Vec<super::pass::Stranded>,
    /// Messages sessiondb appended that the directory dropped without an undo or an edit to
    /// explain it (gptme rewrote it from a stale copy): the next `sync` keeps them as a branch.
    pub displaced: Vec<super::acknowledged::Displaced>,
    /// Directories holding temporary files of an interrupted sessiondb write (harmless; the
    /// next operation or sync on the conversation removes them).
    pub debris: Vec<String>,
}

/// Compares every conversation directory under `logs_root` with the store. Reads metadata only.
pub fn sync_state(conn: &crate::store::Connection, logs_root: &Path) -> Result<SyncState, IngestError> {
    sync_state_with_progress(conn, logs_root, &mut |_, _| {})
}

/// [`sync_state`], telling `progress` after each conversation directory how many are done and
/// how many there are (thousands of directories take seconds: a caller can show how far it is).
pub fn sync_state_with_progress(conn: &crate::store::Connection, logs_root: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<SyncState, IngestError> {
    let root = std::path::absolute(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })?;
    let root = crate::store::sources::known_root(conn, &root).map_err(|source| IngestError::Store { path: root.clone(), source })?;
    let source = crate::store::sources::find(conn, &root, None).map_err(|source| IngestError::Store { path: root.clone(), source })?;
    // Chat ids below are the root's source's (the acknowledged appends of `my-chat` are this
    // root's, whatever other roots hold).
    let previous = conn.set_scope(source.map(|s| s.id));
    let state = sync_state_in(conn, root, progress);
    conn.set_scope(previous);
    state
}

fn sync_state_in(conn: &crate::store::Connection, root: std::path::PathBuf, progress: &mut dyn FnMut(u64, u64)) -> Result<SyncState, IngestError> {
    let mut state = SyncState { logs_dir: root.display().to_string(), ..SyncState::default() };
    let (dirs, _) = ingest::conversation_dirs(&root)?;
    let mut stored: std::collections::HashMap<String, (i64, Vec<u8>, bool)> = std::collections::HashMap::new();
    let mut archived = std::collections::HashSet::new();
    for (chat, c) in queries::conversations_in(conn, &root).map_err(|source| IngestError::Store { path: root.clone(), source })? {
        if c.archived {
            archived.insert(chat.clone());
        }
        stored.insert(chat, (c.id, c.fingerprint, c.queued));
    }
    let mut on_disk = std::collections::HashSet::new();
    let total = dirs.len() as u64;
    for (done, dir) in dirs.into_iter().enumerate() {
        progress(done as u64, total);
        let Some(name) = dir.file_name().and_then(|n| n.to_str()).map(str::to_owned) else { continue };
        on_disk.insert(name.clone());
        // `dir` is under the absolute `root`, so it is already the path fingerprints are taken of.
        let listing = walk(&dir)?;
        if listing.debris {
            state.debris.push(name.clone());
        }
        match stored.get(&name) {
            None => state.not_imported.push(name),
            Some((id, fingerprint, queued)) => {
                if *queued {
                    state.queued.push(name.clone());
                }
                if fingerprint_of(&dir, &listing.entries) == *fingerprint {
                    state.in_step += 1;
                } else if unfinished_only(conn, *id, &dir)? {
                    // As `sync` sees it: nothing to read until the line ends.
                    state.unfinished.push(name);
                } else {
                    state.displaced.extend(super::acknowledged::check(conn, &name, &dir)?);
                    state.changed.push(name);
                }
            }
        }
    }
    progress(total, total);
    state.archived = archived.iter().filter(|c| !on_disk.contains(*c)).count() as u64;
    let mut gone: Vec<String> = stored.keys().filter(|c| !on_disk.contains(*c) && !archived.contains(*c)).cloned().collect();
    gone.sort();
    state.stranded = gone
        .iter()
        .filter(|c| stored.get(*c).is_some_and(|(_, _, queued)| *queued))
        .map(|c| super::pass::Stranded { chat_id: c.clone(), dir: root.join(c).display().to_string() })
        .collect();
    state.deleted = gone;
    Ok(state)
}

/// How many conversations of a logs root the store is behind on, at a glance.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Behind {
    /// Conversation directories the store does not have.
    pub new: u64,
    /// Stored conversations whose main transcript changed since the store last read or wrote
    /// it (by size and mtime).
    pub changed: u64,
}

/// Counts what `sessiondb sync` would bring in from `logs_root` that `list`, `search` and
/// `stats` cannot show yet: new conversation directories, and conversations whose main
/// transcript (what those commands show) changed. One directory listing and one `lstat` per
/// conversation, so that saying so costs little beside the listing itself; the full picture,
/// every file of every conversation, is [`sync_state`]'s.
pub fn behind(conn: &crate::store::Connection, logs_root: &Path) -> Result<Behind, IngestError> {
    let root = std::path::absolute(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })?;
    let mut behind = Behind::default();
    let entries = std::fs::read_dir(&root).map_err(|source| IngestError::Io { path: root.clone(), source })?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let dir = root.join(&name);
        let Ok(meta) = std::fs::symlink_metadata(dir.join(crate::layout::MAIN_TRANSCRIPT)) else { continue };
        found.push((name, dir, meta));
    }
    // The store's side only when there is something to compare it with.
    if found.is_empty() {
        return Ok(behind);
    }
    let stored = queries::main_transcript_stats(conn, &root).map_err(|source| IngestError::Store { path: root.clone(), source })?;
    for (name, dir, meta) in found {
        match stored.get(&name) {
            Some(seen) if Path::new(&seen.dir) == dir => {
                if seen.size != Some(meta.len()) || seen.mtime_ns != crate::fs::meta::mtime_ns(&meta) {
                    behind.changed += 1;
                }
            }
            _ => behind.new += 1,
        }
    }
    Ok(behind)
}

/// Whether the only change to stored conversation `id` in `dir` is an unfinished last line
/// (see [`super::incremental::only_unfinished_lines`]): `sync` would read nothing there.
fn unfinished_only(conn: &crate::store::Connection, id: i64, dir: &Path) -> Result<bool, IngestError> {
    match super::incremental::plan(conn, id, dir, None)?.plan {
        super::incremental::Plan::Grow(grown) => {
            super::incremental::only_unfinished_lines(dir, &grown).map_err(|source| IngestError::Io { path: dir.to_owned(), source })
        }
        _ => Ok(false),
    }
}
