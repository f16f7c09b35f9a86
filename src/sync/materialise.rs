//! Materialise: writing conversations from the store back as gptme directories.
//!
//! Every file is written atomically with its original mode and modification time; symlinks are
//! recreated as links (never followed); directories get their mode and mtime last, deepest
//! first, since writing into a directory changes its mtime. The result is the directory that was
//! imported, byte for byte (gptme's `.lock`, which holds a process id, is never copied: export
//! takes that lock itself while it writes, and refuses a conversation a live gptme holds).

use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::model::ChatId;
use crate::store::queries::{self, EntryKind};
use crate::store::StoreError;

use super::fsutil::{set_dir_attributes, symlink_atomic, sync_dir, write_atomic};
use super::gptme_lock::{self, LockError};

#[derive(Debug, thiserror::Error)]
pub enum MaterialiseError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("stored chat id {0:?} is not a valid gptme chat id")]
    InvalidChatId(String),
    #[error("stored path {0:?} is not a plain relative path")]
    UnsafePath(String),
    #[error("{0}")]
    Locked(#[from] LockError),
}

/// What one conversation's export wrote.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExportStats {
    pub files: u64,
    pub bytes: u64,
}

/// Writes conversation `chat_id` to `<target_root>/<chat_id>/`.
pub fn export_conversation(conn: &rusqlite::Connection, chat_id: &str, target_root: &Path) -> Result<ExportStats, MaterialiseError> {
    let id = ChatId::new(chat_id).map_err(|_| MaterialiseError::InvalidChatId(chat_id.to_owned()))?;
    export_conversation_to(conn, chat_id, &target_root.join(id.as_str()))
}

/// Writes conversation `chat_id` as the directory `root` (which may be named otherwise, for a
/// fork).
pub fn export_conversation_to(conn: &rusqlite::Connection, chat_id: &str, root: &Path) -> Result<ExportStats, MaterialiseError> {
    let conversation_id = queries::conversation_id(conn, chat_id)?;
    let root = root.to_path_buf();
    let io_at = |path: &Path| {
        let path = path.to_owned();
        move |source| MaterialiseError::Io { path, source }
    };
    std::fs::create_dir_all(&root).map_err(io_at(&root))?;
    // Never write where a live gptme has the conversation loaded; keep others out meanwhile.
    let _lock = gptme_lock::acquire(&root)?;
    let entries = queries::entries(conn, conversation_id)?;
    let mut stats = ExportStats::default();
    let mut dirs = Vec::new();
    for entry in &entries {
        if !is_safe_relative(&entry.path) {
            return Err(MaterialiseError::UnsafePath(entry.path.clone()));
        }
        let path = if entry.path.is_empty() { root.clone() } else { root.join(&entry.path) };
        match &entry.kind {
            EntryKind::Dir => {
                if !path.is_dir() {
                    std::fs::create_dir_all(&path).map_err(io_at(&path))?;
                }
                dirs.push((path, entry.mode, entry.mtime_ns));
            }
            EntryKind::Symlink(target) => {
                symlink_atomic(&path, Path::new(std::ffi::OsStr::from_bytes(target)), entry.mtime_ns).map_err(io_at(&path))?;
            }
            EntryKind::Blob(sha) => {
                let mut blob = queries::open_blob(conn, sha)?;
                write_atomic(&path, entry.mode, entry.mtime_ns, |out| {
                    stats.bytes += io::copy(&mut blob as &mut dyn Read, out)?;
                    Ok(())
                })
                .map_err(io_at(&path))?;
                stats.files += 1;
            }
            EntryKind::Document { id, kind, ends_with_newline } => {
                let mut result = Ok(0);
                write_atomic(&path, entry.mode, entry.mtime_ns, |out| {
                    result = write_document(conn, *id, *kind, *ends_with_newline, out);
                    Ok(())
                })
                .map_err(io_at(&path))?;
                stats.bytes += result?;
                stats.files += 1;
            }
        }
    }
    // Deepest first, so that setting a child's mtime cannot disturb its parent's afterwards.
    dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
    for (path, mode, mtime_ns) in &dirs {
        sync_dir(path).map_err(io_at(path))?;
        set_dir_attributes(path, *mode, *mtime_ns).map_err(io_at(path))?;
    }
    if let Some(parent) = root.parent() {
        let _ = sync_dir(parent);
    }
    Ok(stats)
}

/// Writes a document's lines, exactly as stored, to `out`; returns the bytes written.
pub fn write_document(
    conn: &rusqlite::Connection,
    document_id: i64,
    kind: crate::store::DocumentKind,
    ends_with_newline: bool,
    out: &mut dyn std::io::Write,
) -> Result<u64, StoreError> {
    let mut first = true;
    let mut bytes = 0;
    queries::for_each_line(conn, document_id, kind, |line| {
        if !first {
            out.write_all(b"\n")?;
            bytes += 1;
        }
        first = false;
        bytes += line.len() as u64;
        out.write_all(line)
    })?;
    if !first && ends_with_newline {
        out.write_all(b"\n").map_err(|source| StoreError::Io { path: format!("document {document_id}"), source })?;
        bytes += 1;
    }
    Ok(bytes)
}

/// A stored entry path must be relative and must not climb: the store may have been written by
/// something other than ingest, and export must never write outside its target.
fn is_safe_relative(path: &str) -> bool {
    path.is_empty() || Path::new(path).components().all(|c| matches!(c, std::path::Component::Normal(_)))
}
