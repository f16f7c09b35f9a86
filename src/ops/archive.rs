//! Archiving conversations out of gptme's logs root, and restoring them (`sessiondb archive`,
//! `sessiondb restore`): the store keeps them whole, listed, searchable and readable, while
//! gptme's root (which gptme lists by reading every directory) holds only the ones in use.
//!
//! Invariant: a directory leaves its logs root only after the store was found, under gptme's
//! lock and inside the store's write transaction, to hold every entry of it as it is (bytes,
//! permissions, modification times, link targets, nothing more and nothing less; [`difference`]),
//! and after the mark that it is archived committed. It leaves in one rename into the root's
//! parking folder ([`PARKING`]), which neither gptme's listing (a glob of `*/conversation.jsonl`)
//! nor a sync (the root's own subdirectories) looks into, and is removed from there. A restore
//! writes the directory from the store into the parking folder, moves it into the root in one
//! rename that never replaces anything, then clears the mark. So a kill at any moment leaves
//! the directory whole in the root (marked archived or not: the next `archive` or `restore`
//! finishes, and a sync reads it as usual), or gone with the mark committed; never a partial
//! directory in the root, and never a directory gone without the mark. Leftovers in the parking
//! folder are copies of what the store holds, removed by [`clear_parking`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::OpsError;
use crate::fs::dirtx::DirError;
use crate::fs::gptme_lock;
use crate::fs::nofollow::Dir;
use crate::fs::walk::{Found, Listing};
use crate::layout;
use crate::store::modify::LiveConversation;
use crate::store::queries::{self, EntryKind, ListFilter};
use crate::store::{modify, sources, Store, WriteBatch};
use crate::sync::ingest::IngestError;
use crate::sync::materialise;

/// The folder of a logs root that directories pass through on their way out of it and back in.
pub const PARKING: &str = ".sessiondb-archive";

/// Which conversations `archive` or `restore` takes: those named (all, when none is), of those
/// last modified before `until` and of source `source`, when given.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub chats: Vec<String>,
    /// Epoch seconds.
    pub until: Option<f64>,
    /// A source's name.
    pub source: Option<String>,
}

/// A conversation `archive` would take out of its logs root, or `restore` put back.
#[derive(Debug, Clone)]
pub struct ArchiveCandidate {
    /// How commands name it: its chat id, or `SOURCE:CHAT` when several sources have that id.
    pub name: String,
    /// Its directory in its logs root.
    pub dir: PathBuf,
    pub modified: f64,
    pub messages: i64,
    /// The bytes of its directory's files, where it is.
    pub bytes: u64,
}

/// What a selection holds to archive or restore, and which of the conversations it names are
/// left out, with why.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    pub found: Vec<ArchiveCandidate>,
    pub left_out: Vec<(String, &'static str)>,
    /// The logs roots of every conversation selected on this machine, those left out too: where
    /// an interrupted run may have left something to clear ([`clear_parking`]).
    pub roots: std::collections::BTreeSet<PathBuf>,
}

/// The conversations of `selection` that are in their logs roots on this machine, to archive
/// (those archived already but whose directory is still there, after an interrupted archive,
/// among them). Those archived already are left out, as are those of another host's source.
pub fn archive_candidates(store: &Store, selection: &Selection) -> Result<Candidates, OpsError> {
    candidates(store, selection, |c| {
        if layout::is_conversation_dir(Path::new(&c.source_dir)) {
            None
        } else if c.archived {
            Some("archived already")
        } else {
            Some("its directory is not in the logs root (deleted or moved; `sessiondb sync` marks it)")
        }
    })
}

/// The archived conversations of `selection` (their directories out of the root).
pub fn restore_candidates(store: &Store, selection: &Selection) -> Result<Candidates, OpsError> {
    candidates(store, selection, |c| (!c.archived).then_some("not archived"))
}

/// The conversations of `selection` of this machine's sources that `unwanted` has no reason to
/// leave out.
fn candidates(store: &Store, selection: &Selection, unwanted: impl Fn(&queries::ConversationSummary) -> Option<&'static str>) -> Result<Candidates, OpsError> {
    let conn = store.connection()?;
    let here: HashSet<String> = sources::usable(&conn)?.into_iter().map(|s| s.label).collect();
    let source = selection.source.as_deref().map(|name| sources::named(&conn, name)).transpose()?;
    let mut found = Vec::new();
    if selection.chats.is_empty() {
        let filter = ListFilter { include_test: true, until: selection.until, source: source.as_ref().map(|s| s.id), ..ListFilter::default() };
        found = queries::list_filtered(&conn, &filter)?;
    } else {
        for chat in &selection.chats {
            let c = queries::conversation_summary(&conn, chat)?;
            let in_source = source.as_ref().is_none_or(|s| s.label == c.source);
            if in_source && selection.until.is_none_or(|until| c.modified < until) {
                found.push(c);
            }
        }
    }
    let names: HashSet<String> = queries::chat_ids(&conn)?.into_iter().collect();
    let mut out = Candidates::default();
    for c in found {
        let name = queries::name_among(&names, &c);
        if here.contains(&c.source) {
            out.roots.extend(Path::new(&c.source_dir).parent().map(Path::to_owned));
        }
        let why = if here.contains(&c.source) { unwanted(&c) } else { Some("of another host's source") };
        if let Some(why) = why {
            // Said only of conversations named: a selection by age or source leaves them quietly.
            if !selection.chats.is_empty() {
                out.left_out.push((name, why));
            }
            continue;
        }
        out.found.push(ArchiveCandidate {
            name,
            bytes: crate::fs::walk::tree_bytes(Path::new(&c.source_dir)),
            dir: PathBuf::from(c.source_dir),
            modified: c.modified,
            messages: c.messages,
        });
    }
    Ok(out)
}

/// What [`archive`] or [`restore`] did to one conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// The bytes of the directory's files taken out of the root, or written back.
    pub bytes: u64,
    /// The directory was where it was to go already (an interrupted run finished, or nothing
    /// to do): only the store's mark changed, if anything.
    pub already: bool,
}

/// Archives conversation `name` (a chat id or `SOURCE:CHAT`): checks, under gptme's lock (a
/// conversation a live gptme holds is refused), that the store holds its directory byte for
/// byte, marks it archived, and takes the directory out of the logs root (see the module's doc).
/// Refused, with nothing changed, when the directory differs from the store's copy (gptme wrote
/// to it since the last sync) or has changes queued for it.
pub fn archive(store: &Store, name: &str) -> Result<Moved, OpsError> {
    let (mut conn, chat_id, conv) = scoped(store, name)?;
    let chat_id = chat_id.as_str();
    if !layout::is_conversation_dir(&conv.dir) {
        return if conv.archived { Ok(Moved { bytes: 0, already: true }) } else { Err(OpsError::DirectoryGone { dir: conv.dir }) };
    }
    let (handle, lock) = gptme_lock::acquire_path(&conv.dir)?;
    let batch = WriteBatch::begin(&mut conn)?;
    let conv = modify::load_conversation(batch.conn(), chat_id)?; // as it is now, in the transaction
    if crate::store::pending::has_pending(batch.conn(), conv.id)? {
        return Err(OpsError::QueuedChanges { chat_id: name.to_owned(), dir: conv.dir, where_: "not synced yet" });
    }
    let listing = walk(&handle)?;
    if let Some((path, what)) = difference(batch.conn(), conv.id, &handle, &listing)? {
        return Err(OpsError::NotAsStored { chat_id: name.to_owned(), dir: conv.dir, path, what });
    }
    modify::set_archived(batch.conn(), conv.id, true)?;
    batch.finish()?;
    let bytes = listing.entries.iter().filter(|f| f.meta.is_file()).map(|f| f.meta.len()).sum();
    let parked = park(&conv.dir)?;
    drop(lock);
    std::fs::remove_dir_all(&parked).map_err(io(&parked))?;
    let _ = std::fs::remove_dir(parked.parent().unwrap_or(&parked)); // the parking folder, when empty
    Ok(Moved { bytes, already: false })
}

/// Restores archived conversation `name`: writes its directory from the store, exactly (bytes,
/// permissions, modification times), into its logs root, and clears the mark. A directory
/// already there is left as it is: one the store holds byte for byte (an interrupted run) only
/// has the mark cleared; any other is refused.
pub fn restore(store: &Store, name: &str) -> Result<Moved, OpsError> {
    let (mut conn, chat_id, conv) = scoped(store, name)?;
    let chat_id = chat_id.as_str();
    if !conv.archived {
        return Err(OpsError::NotArchived { chat_id: name.to_owned(), dir: conv.dir });
    }
    let (root, dir_name) = split(&conv.dir)?;
    if !root.is_dir() {
        return Err(OpsError::NoLogsRoot { root: root.to_owned() });
    }
    if std::fs::symlink_metadata(&conv.dir).is_ok() {
        // Something is there: the conversation itself, put back by an interrupted run or by
        // hand, or something else, never replaced.
        if !layout::is_conversation_dir(&conv.dir) {
            return Err(OpsError::Exists { dir: conv.dir });
        }
        let (handle, _lock) = gptme_lock::acquire_path(&conv.dir)?;
        let batch = WriteBatch::begin(&mut conn)?;
        if difference(batch.conn(), conv.id, &handle, &walk(&handle)?)?.is_some() {
            return Err(OpsError::Exists { dir: conv.dir });
        }
        modify::set_archived(batch.conn(), conv.id, false)?;
        batch.finish()?;
        return Ok(Moved { bytes: 0, already: true });
    }
    let root_dir = Dir::open_given(root).map_err(io(root))?;
    let parked_name = parking_name(dir_name);
    let parked = Path::new(PARKING).join(&parked_name);
    root_dir.create_dir(Path::new(PARKING), 0o700).map_err(io(&root.join(PARKING)))?;
    let written = materialise::export_conversation_to(&conn, chat_id, &root.join(&parked));
    let moved = written.map_err(OpsError::from).and_then(|stats| {
        root_dir.rename_no_replace(&parked, Path::new(dir_name)).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => OpsError::Exists { dir: conv.dir.clone() },
            _ => io(&conv.dir)(e),
        })?;
        Ok(stats)
    });
    let stats = match moved {
        Ok(stats) => stats,
        Err(e) => {
            let _ = std::fs::remove_dir_all(root.join(&parked));
            return Err(e);
        }
    };
    // The directory's own modification time, as stored, whatever the rename did to it.
    if let Some(top) = queries::entries(&conn, conv.id)?.into_iter().find(|e| e.path.is_empty()) {
        root_dir.open_dir(Path::new(dir_name)).and_then(|d| d.set_mtime(top.mtime_ns)).map_err(io(&conv.dir))?;
    }
    let _ = root_dir.remove_dir(Path::new(PARKING)); // when empty
    root_dir.sync().map_err(io(root))?;
    let batch = WriteBatch::begin(&mut conn)?;
    modify::set_archived(batch.conn(), conv.id, false)?;
    batch.finish()?;
    Ok(Moved { bytes: stats.bytes, already: false })
}

/// The conversation `name` names (a chat id or `SOURCE:CHAT`), with a connection scoped to its
/// source and its chat id there.
fn scoped(store: &Store, name: &str) -> Result<(crate::store::Connection, String, LiveConversation), OpsError> {
    let conn = store.connection()?;
    let named = sources::resolve(&conn, name)?;
    conn.scope_to(named.source_id)?;
    let conv = modify::load_conversation(&conn, &named.chat_id)?;
    Ok((conn, named.chat_id, conv))
}

/// Removes what interrupted archives and restores left in `root`'s parking folder: copies of
/// conversations the store holds (of the source reading `root`), and the folder when nothing
/// else is there. Anything else there is left. Returns how many were removed.
pub fn clear_parking(store: &Store, root: &Path) -> Result<usize, OpsError> {
    let parking = root.join(PARKING);
    let Ok(entries) = std::fs::read_dir(&parking) else { return Ok(0) };
    let stored = queries::conversations_in(&store.connection()?, root)?;
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(chat_id) = name.to_str().and_then(|n| n.rsplit_once('.')).map(|(chat, _)| chat) else { continue };
        if stored.contains_key(chat_id) {
            std::fs::remove_dir_all(entry.path()).map_err(io(&entry.path()))?;
            removed += 1;
        }
    }
    // The folder itself, when that left it empty: a run with nothing to move would leave it.
    let _ = std::fs::remove_dir(&parking);
    Ok(removed)
}

/// Every entry of directory `dir` but gptme's `.lock` and temporary files ([`crate::fs::walk`]).
fn walk(dir: &Dir) -> Result<Listing, OpsError> {
    Ok(crate::fs::walk::walk(dir.path()).map_err(IngestError::from)?)
}

/// The first way directory `dir` (as `listing` found it) differs from what the store holds of conversation
/// `conversation_id`, as (path relative to it, what), or `None` when it holds exactly that:
/// every stored entry there, of its kind, with its permissions; every file with its bytes
/// (by SHA-256) and modification time; every link with its target; and nothing else (gptme's
/// `.lock`, which the store never keeps, aside). Directories' modification times move whenever
/// a file comes and goes (gptme's lock file, say) and are not compared.
fn difference(conn: &crate::store::Connection, conversation_id: i64, dir: &Dir, listing: &Listing) -> Result<Option<(String, &'static str)>, OpsError> {
    let mut there: HashMap<&str, &Found> = listing.entries.iter().map(|f| (f.rel.as_str(), f)).collect();
    for entry in queries::entries(conn, conversation_id)? {
        let Some(found) = there.remove(entry.path.as_str()) else { return Ok(Some((entry.path, "is missing"))) };
        let kind = found.meta.file_type();
        let what = match &entry.kind {
            EntryKind::Dir if !kind.is_dir() => Some("is not a directory"),
            EntryKind::Symlink(target) if found.link.as_ref() != Some(target) => Some("is not the stored link"),
            EntryKind::Blob(_) | EntryKind::Document { .. } if !kind.is_file() => Some("is not a regular file"),
            _ if found.mode() != entry.mode => Some("has other permissions"),
            EntryKind::Dir => None,
            _ if found.mtime_ns() != entry.mtime_ns => Some("has another modification time"),
            EntryKind::Symlink(_) => None,
            EntryKind::Blob(_) | EntryKind::Document { .. } => {
                let rel = Path::new(&entry.path);
                let bytes = materialise::file_digest(dir, rel).map_err(io(&dir.path().join(rel)))?;
                (Some(bytes) != materialise::stored_digest(conn, &entry.kind)?).then_some("holds other bytes")
            }
        };
        if let Some(what) = what {
            return Ok(Some((entry.path, what)));
        }
    }
    Ok(there.into_keys().min().map(|path| (path.to_owned(), "is not in the store")))
}

/// Moves conversation directory `dir` out of its logs root, into the root's parking folder, in
/// one rename; returns where it went.
fn park(dir: &Path) -> Result<PathBuf, OpsError> {
    let (root, name) = split(dir)?;
    let root_dir = Dir::open_given(root).map_err(io(root))?;
    let parked = Path::new(PARKING).join(parking_name(name));
    // Another process may remove the (empty) parking folder between its making and the rename.
    let mut attempts = 0;
    loop {
        root_dir.create_dir(Path::new(PARKING), 0o700).map_err(io(&root.join(PARKING)))?;
        match root_dir.rename_no_replace(Path::new(name), &parked) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempts < 3 => attempts += 1,
            Err(e) => return Err(io(dir)(e)),
        }
    }
    root_dir.sync().map_err(io(root))?;
    Ok(root.join(parked))
}

/// A name in the parking folder for conversation directory `name`: `<name>.<pid>-<nanoseconds>`
/// ([`clear_parking`] reads the chat id back up to the last dot).
fn parking_name(name: &str) -> String {
    format!("{name}.{}-{}", std::process::id(), crate::fs::meta::now_ns())
}

/// A conversation directory's logs root and name.
fn split(dir: &Path) -> Result<(&Path, &str), OpsError> {
    match (dir.parent(), dir.file_name().and_then(|n| n.to_str())) {
        (Some(root), Some(name)) => Ok((root, name)),
        _ => Err(OpsError::Materialise(materialise::MaterialiseError::UnsafeRoot(dir.to_owned()))),
    }
}

/// An I/O failure on `path`, as an operation's error.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OpsError {
    let path = path.to_owned();
    move |source| OpsError::Dir(DirError::Io { path, source })
}
