//! Materialise: writing conversations from the store back as gptme directories.
//!
//! Every file is written atomically with its original mode and modification time; symlinks are
//! recreated as links (never followed) after everything else, so nothing is ever written
//! beneath one; directories get their mode and mtime last, deepest first, since writing into a
//! directory changes its mtime. All of it goes through [`Dir`] handles: a link planted in the
//! target where a directory or file is to be written is refused, never written through. The result is the directory that was
//! imported, byte for byte (gptme's `.lock`, which holds a process id, is never copied: export
//! takes that lock itself while it writes, and refuses a conversation a live gptme holds).

use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::model::ChatId;
use crate::store::queries::{self, EntryKind};
use crate::store::StoreError;

use crate::fs::gptme_lock::{self, LockError};
use crate::fs::nofollow::Dir;

#[derive(Debug, thiserror::Error)]
pub enum MaterialiseError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}")]
    Io { path: PathBuf, source: io::Error },
    #[error("stored chat id {0:?} is not a valid gptme chat id")]
    InvalidChatId(String),
    #[error("stored path {0:?} is not a plain relative path")]
    UnsafePath(String),
    /// The directory to write is not a name in a parent (`/`, `..`).
    #[error("stored path {:?} is not a plain relative path", .0.display().to_string())]
    UnsafeRoot(PathBuf),
    #[error("stored path {path:?} lies beneath the stored symbolic link {link:?}: sessiondb never writes beneath a link (re-import the conversation from its directory)")]
    BeneathLink { path: String, link: String },
    #[error(transparent)]
    Locked(#[from] LockError),
    /// A file of a conversation directory in a logs root the store reads holds other bytes than
    /// the store's copy (gptme wrote to it since the store last read it, or it is another
    /// source's conversation of that chat id): replacing it would lose them.
    #[error("{} holds other bytes than the store's copy, in logs root {} that the store reads as source {source_name:?}; nothing of this conversation was written (run `sessiondb sync` to read the directory in first, or export to another directory)", path.display(), root.display())]
    WouldReplace { path: PathBuf, root: PathBuf, source_name: String },
}

/// What one conversation's export wrote.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExportStats {
    pub files: u64,
    pub bytes: u64,
}

/// Writes conversation `chat_id` to `<target_root>/<chat_id>/`.
pub fn export_conversation(conn: &crate::store::Connection, chat_id: &str, target_root: &Path) -> Result<ExportStats, MaterialiseError> {
    // `SOURCE:CHAT` names it too; the directory is named after the chat id.
    let named = crate::store::sources::resolve(conn, chat_id)?;
    let id = ChatId::new(named.chat_id.as_str()).map_err(|_| MaterialiseError::InvalidChatId(chat_id.to_owned()))?;
    export_conversation_to(conn, chat_id, &target_root.join(id.as_str()))
}

/// Writes conversation `chat_id` as the directory `root` (which may be named otherwise, for a
/// fork). `root`'s parent is the user's (created when missing, links in its path followed);
/// `root` itself and everything beneath it are written through handles that follow no link, so
/// a link planted there is refused (an error naming it), never written through.
pub fn export_conversation_to(conn: &crate::store::Connection, chat_id: &str, root: &Path) -> Result<ExportStats, MaterialiseError> {
    let conversation_id = queries::conversation_id(conn, chat_id)?;
    let io_at = |path: &Path| {
        let path = path.to_owned();
        move |source| MaterialiseError::Io { path, source }
    };
    let (parent, name) = match (root.parent(), root.file_name()) {
        (Some(parent), Some(name)) => (if parent.as_os_str().is_empty() { Path::new(".") } else { parent }, name),
        _ => return Err(MaterialiseError::UnsafeRoot(root.to_owned())),
    };
    std::fs::create_dir_all(parent).map_err(io_at(parent))?;
    let parent_dir = Dir::open_given(parent).map_err(io_at(parent))?;
    parent_dir.create_dir(Path::new(name), 0o777).map_err(io_at(root))?;
    let dir = Dir::open(root).map_err(io_at(root))?;
    // Never write where a live gptme has the conversation loaded; keep others out meanwhile.
    let _lock = gptme_lock::acquire(&dir)?;
    let entries = queries::entries(conn, conversation_id)?;
    refuse_paths_beneath_links(&entries)?;
    // Into a logs root the store reads, the directory may hold what gptme wrote since; anywhere
    // else (a copy, a backup refreshed) the store's copy is the newer one.
    let absolute_parent = std::path::absolute(parent).map_err(io_at(parent))?;
    if let Some(source) = crate::store::sources::reading_any(conn, &absolute_parent)? {
        refuse_replacing_other_bytes(conn, &dir, root, &entries, &source)?;
    }
    let mut stats = ExportStats::default();
    let mut dirs = Vec::new();
    let mut links = Vec::new();
    for entry in &entries {
        if !is_safe_relative(&entry.path) {
            return Err(MaterialiseError::UnsafePath(entry.path.clone()));
        }
        let rel = Path::new(&entry.path);
        let path = root.join(rel);
        match &entry.kind {
            EntryKind::Dir => {
                if !entry.path.is_empty() {
                    dir.create_dir(rel, 0o777).map_err(io_at(&path))?;
                }
                dirs.push((rel, entry.mode, entry.mtime_ns));
            }
            // Last, once everything else is written: nothing is ever written beneath a link.
            EntryKind::Symlink(target) => links.push((rel, Path::new(std::ffi::OsStr::from_bytes(target)), entry.mtime_ns)),
            EntryKind::Blob(sha) => {
                let mut blob = queries::open_blob(conn, sha)?;
                dir.write_atomic(rel, entry.mode, entry.mtime_ns, |out| {
                    stats.bytes += io::copy(&mut blob as &mut dyn Read, out)?;
                    Ok(())
                })
                .map_err(io_at(&path))?;
                stats.files += 1;
            }
            EntryKind::Document { id, kind, ends_with_newline } => {
                let mut result = Ok(0);
                dir.write_atomic(rel, entry.mode, entry.mtime_ns, |out| {
                    result = write_document(conn, *id, *kind, *ends_with_newline, out);
                    Ok(())
                })
                .map_err(io_at(&path))?;
                stats.bytes += result?;
                stats.files += 1;
            }
        }
    }
    for (rel, target, mtime_ns) in links {
        dir.symlink_atomic(rel, target, mtime_ns).map_err(io_at(&root.join(rel)))?;
    }
    // Deepest first, so that setting a child's mtime cannot disturb its parent's afterwards.
    dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
    for (rel, mode, mtime_ns) in dirs {
        let path = root.join(rel);
        let sub = dir.open_dir(rel).map_err(io_at(&path))?;
        sub.sync().map_err(io_at(&path))?;
        sub.set_attributes(mode, mtime_ns).map_err(io_at(&path))?;
    }
    let _ = parent_dir.sync();
    Ok(stats)
}

/// Refuses, before anything is written, when a regular file already at one of the stored
/// files' paths under `dir`, a conversation directory of `source`'s logs root, holds other
/// bytes than the store's copy of it: an export over the directories gptme writes must not
/// replace what the store never read.
/// Compared by SHA-256, the store's side without reading a blob (its digest is its key) and a
/// document as [`write_document`] would write it. Called under gptme's lock on the directory,
/// which every writer of it takes, so the files cannot change between this and the writing.
fn refuse_replacing_other_bytes(
    conn: &crate::store::Connection,
    dir: &Dir,
    root: &Path,
    entries: &[queries::Entry],
    source: &crate::store::sources::Source,
) -> Result<(), MaterialiseError> {
    for entry in entries {
        if !matches!(entry.kind, EntryKind::Blob(_) | EntryKind::Document { .. }) {
            continue;
        }
        let rel = Path::new(&entry.path);
        let path = root.join(rel);
        let io_err = |source| MaterialiseError::Io { path: path.clone(), source };
        if !dir.stat(rel).map_err(io_err)?.is_some_and(|stat| matches!(stat.kind, crate::fs::nofollow::Kind::File)) {
            continue;
        }
        let there = file_digest(dir, rel).map_err(io_err)?;
        if Some(there) != stored_digest(conn, &entry.kind)? {
            return Err(MaterialiseError::WouldReplace { path, root: source.root.clone(), source_name: source.name.clone() });
        }
    }
    Ok(())
}

/// The SHA-256 of the bytes a stored file entry holds, without reading a blob (its digest is
/// its key) and of a document as [`write_document`] writes it; `None` for a directory or link.
pub(crate) fn stored_digest(conn: &crate::store::Connection, kind: &EntryKind) -> Result<Option<[u8; 32]>, StoreError> {
    use sha2::{Digest, Sha256};
    Ok(match kind {
        EntryKind::Document { id, kind, ends_with_newline } => {
            let mut hasher = Sha256::new();
            write_document(conn, *id, *kind, *ends_with_newline, &mut hasher)?;
            Some(hasher.finalize().into())
        }
        EntryKind::Blob(sha) => Some(*sha),
        EntryKind::Dir | EntryKind::Symlink(_) => None,
    })
}

/// The SHA-256 of regular file `rel` under `dir`, read through the handle (a link is refused).
pub(crate) fn file_digest(dir: &Dir, rel: &Path) -> io::Result<[u8; 32]> {
    use sha2::{Digest, Sha256};
    let mut there = Sha256::new();
    io::copy(&mut dir.open_read(rel)?, &mut there)?;
    Ok(there.finalize().into())
}

/// Writes a document's lines, exactly as stored, to `out`, as they are read (a line as long as
/// the conversation, an event log's checkpoint, is never held whole); returns the bytes written.
pub fn write_document(
    conn: &crate::store::Connection,
    document_id: i64,
    kind: crate::store::DocumentKind,
    ends_with_newline: bool,
    out: &mut dyn std::io::Write,
) -> Result<u64, StoreError> {
    let mut first = true;
    let mut line_open = false;
    let mut bytes = 0;
    queries::for_each_line_in_pieces(conn, document_id, kind, |piece, ends| {
        if !first && !line_open {
            out.write_all(b"\n")?;
            bytes += 1;
        }
        first = false;
        line_open = !ends;
        bytes += piece.len() as u64;
        out.write_all(piece)
    })?;
    if !first && ends_with_newline {
        out.write_all(b"\n").map_err(|source| StoreError::Io { path: format!("document {document_id}"), source })?;
        bytes += 1;
    }
    Ok(bytes)
}

/// No stored entry may lie beneath a stored link: writing it would mean writing through the
/// link (a store written by an older sessiondb could hold such entries).
fn refuse_paths_beneath_links(entries: &[queries::Entry]) -> Result<(), MaterialiseError> {
    let links: std::collections::HashSet<&str> = entries.iter().filter(|e| matches!(e.kind, EntryKind::Symlink(_))).map(|e| e.path.as_str()).collect();
    for entry in entries {
        let mut ancestors = Path::new(&entry.path).ancestors().skip(1);
        if let Some(link) = ancestors.find_map(|a| a.to_str().filter(|a| links.contains(a))) {
            return Err(MaterialiseError::BeneathLink { path: entry.path.clone(), link: link.to_owned() });
        }
    }
    Ok(())
}

/// A stored entry path must be relative and must not climb: the store may have been written by
/// something other than ingest, and export must never write outside its target.
fn is_safe_relative(path: &str) -> bool {
    path.is_empty() || Path::new(path).components().all(|c| matches!(c, std::path::Component::Normal(_)))
}
