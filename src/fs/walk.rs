//! Listing a conversation directory, and the fingerprint that says whether it changed.
//!
//! [`walk`] lists every entry below a directory, parents first and in name order, without
//! following symbolic links (a link's target is read as bytes, never followed). Entries that
//! vanish between being listed and being looked at are skipped: gptme renames temporary files
//! into place at any moment. gptme's process lock and sessiondb's own temporary files are
//! never listed (the latter are noted as debris). [`fingerprint`] digests what was listed; equal
//! digests mean nothing in the directory changed.

use std::ffi::OsStr;
use std::fs::{self, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::atomic::TEMP_PREFIX;
use crate::layout::LOCK;

/// Why a directory could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: file name is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
}

/// One filesystem entry found in a conversation directory.
#[derive(Debug)]
pub struct Found {
    /// Relative to the conversation directory, '/'-separated; "" is the directory itself.
    pub rel: String,
    pub meta: Metadata,
    /// A symbolic link's target, as written.
    pub link: Option<Vec<u8>>,
}

impl Found {
    /// Permission bits.
    pub fn mode(&self) -> u32 {
        super::meta::mode_bits(&self.meta)
    }

    /// Modification time, nanoseconds since the epoch.
    pub fn mtime_ns(&self) -> i64 {
        super::meta::mtime_ns(&self.meta)
    }

    /// A symbolic link's target as a path.
    pub fn link_target(&self) -> Option<&Path> {
        self.link.as_deref().map(|t| Path::new(OsStr::from_bytes(t)))
    }
}

/// What [`walk`] found.
#[derive(Debug)]
pub struct Listing {
    /// Every entry, sorted by relative path; the first is the directory itself.
    pub entries: Vec<Found>,
    /// Whether an interrupted sessiondb write left temporary files.
    pub debris: bool,
}

/// Names that are never listed: gptme's process lock holds a PID that means nothing once
/// copied, and sessiondb's own temporary files are debris of an interrupted write.
fn is_ignored(rel: &str) -> bool {
    rel == LOCK || rel.rsplit('/').next().is_some_and(|n| n.starts_with(TEMP_PREFIX))
}

/// Lists every entry below `dir` (see the module documentation).
pub fn walk(dir: &Path) -> Result<Listing, WalkError> {
    let mut debris = false;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| WalkError::Io { path, source }
    };
    let mut entries = vec![Found { rel: String::new(), meta: fs::symlink_metadata(dir).map_err(io(dir))?, link: None }];
    let mut pending = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel)) = pending.pop() {
        let mut children: Vec<_> = fs::read_dir(&abs).map_err(io(&abs))?.collect::<Result<_, _>>().map_err(io(&abs))?;
        children.sort_by_key(|e| e.file_name());
        for child in children {
            let path = child.path();
            let name = child.file_name();
            let name = name.to_str().ok_or_else(|| WalkError::NotUtf8 { path: path.clone() })?;
            let child_rel = if rel.is_empty() { name.to_owned() } else { format!("{rel}/{name}") };
            if is_ignored(&child_rel) {
                debris |= name.starts_with(TEMP_PREFIX);
                continue;
            }
            let vanished = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                // Gone since it was listed (gptme renamed its temporary file into place).
                Err(e) if vanished(&e) => continue,
                Err(e) => return Err(io(&path)(e)),
            };
            let link = if meta.file_type().is_symlink() {
                match fs::read_link(&path) {
                    Ok(target) => Some(target.into_os_string().into_encoded_bytes()),
                    Err(e) if vanished(&e) => continue,
                    Err(e) => return Err(io(&path)(e)),
                }
            } else {
                None
            };
            if meta.is_dir() {
                pending.push((path, child_rel.clone()));
            }
            entries.push(Found { rel: child_rel, meta, link });
        }
    }
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(Listing { entries, debris })
}

/// A digest of every entry's identity and attributes: equal digests mean nothing changed.
///
/// Files count by mode, size, mtime and inode (an atomic rewrite is a new inode); symlinks by
/// target and mtime; directories by mode only, since what they contain is listed itself and
/// their mtimes move whenever a temporary file comes and goes. ctime is left out for the same
/// reason: sessiondb's own hard-linked backups touch it without changing anything.
pub fn fingerprint(dir: &Path, found: &[Found]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(dir.as_os_str().as_bytes());
    for f in found {
        let m = &f.meta;
        h.update(b"\n");
        h.update(f.rel.as_bytes());
        let fields: Vec<i64> = if m.is_dir() { vec![m.mode() as i64] } else { vec![m.mode() as i64, m.len() as i64, m.mtime(), m.mtime_nsec(), m.ino() as i64] };
        for v in fields {
            h.update(v.to_le_bytes());
        }
        if let Some(target) = &f.link {
            h.update(target);
        }
    }
    h.finalize().to_vec()
}

/// The fingerprint of directory `dir` as it is now (see [`fingerprint`]); `dir` is made
/// absolute first, as every stored fingerprint is of an absolute path.
pub fn directory_fingerprint(dir: &Path) -> Result<Vec<u8>, WalkError> {
    let dir = std::path::absolute(dir).map_err(|source| WalkError::Io { path: dir.to_owned(), source })?;
    Ok(fingerprint(&dir, &walk(&dir)?.entries))
}

/// The bytes of the regular files in `dir` and below, links not followed (what `du -b` counts
/// of files); 0 for a directory that is not there, and entries that cannot be read count 0.
pub fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parents_first_in_name_order_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("b")).unwrap();
        fs::write(root.join("b/x"), b"1").unwrap();
        fs::write(root.join("a"), b"2").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        fs::write(root.join(".lock"), b"123").unwrap();
        fs::write(root.join(format!("{TEMP_PREFIX}1")), b"").unwrap();
        let listing = walk(root).unwrap();
        let rels: Vec<_> = listing.entries.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(rels, ["", "a", "b", "b/x", "link"]);
        assert!(listing.debris);
        assert_eq!(listing.entries[4].link_target(), Some(Path::new("/etc")));
    }

    #[test]
    fn the_fingerprint_moves_with_content_and_link_targets_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a"), b"1").unwrap();
        std::os::unix::fs::symlink("x", root.join("l")).unwrap();
        let first = directory_fingerprint(root).unwrap();
        assert_eq!(directory_fingerprint(root).unwrap(), first);
        fs::write(root.join(".lock"), b"9").unwrap();
        assert_eq!(directory_fingerprint(root).unwrap(), first, "gptme's lock is not content");
        fs::remove_file(root.join("l")).unwrap();
        std::os::unix::fs::symlink("y", root.join("l")).unwrap();
        let relinked = directory_fingerprint(root).unwrap();
        assert_ne!(relinked, first);
        fs::write(root.join("a"), b"22").unwrap();
        assert_ne!(directory_fingerprint(root).unwrap(), relinked);
    }

    #[test]
    fn a_name_that_is_not_utf8_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(OsStr::from_bytes(b"\xff")), b"").unwrap();
        assert!(matches!(walk(dir.path()), Err(WalkError::NotUtf8 { .. })));
    }
}
