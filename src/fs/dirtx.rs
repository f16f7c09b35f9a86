//! A directory transaction: changes to a conversation directory that can be undone.
//!
//! An operation changes the store and the directory together; if anything fails before the
//! store commits, the directory must be as it was. Every change made through a
//! [`DirTransaction`] records how to undo it — an append remembers the old length, a
//! replacement or removal keeps the old file under a temporary name (a hard link), a new file
//! or directory is simply removed — and dropping the transaction without [`DirTransaction::commit`]
//! undoes them in reverse order. Appends are flushed to disk (`fdatasync`) before they count as
//! done; replacements are atomic, so a crash leaves the old or the new file.
//!
//! Every change, and every undo, goes through the conversation directory's handle
//! ([`Dir`]): nothing is written, truncated or locked through a link, and a link where a
//! directory or file is to be written is refused.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::atomic::TEMP_PREFIX;
use super::nofollow::{self, Dir, Kind};

/// A file's state after a write, to record in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub mode: u32,
    pub mtime_ns: i64,
    pub size: u64,
}

pub fn stat(path: &Path) -> io::Result<FileStat> {
    let m = std::fs::symlink_metadata(path)?;
    Ok(FileStat { mode: super::meta::mode_bits(&m), mtime_ns: super::meta::mtime_ns(&m), size: m.len() })
}

/// Paths are relative to the transaction's directory.
enum Undo {
    Truncate { rel: PathBuf, len: u64 },
    Restore { rel: PathBuf, backup: PathBuf },
    Remove { rel: PathBuf },
    RemoveDir { rel: PathBuf },
    Attributes { rel: PathBuf, mode: u32, mtime_ns: i64 },
}

/// Why a directory change was refused.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{path}: changed on disk since sessiondb last read it ({found} bytes, expected {expected})")]
    Changed { path: PathBuf, expected: u64, found: u64 },
    #[error("{path}")]
    Io { path: PathBuf, source: io::Error },
}

pub struct DirTransaction {
    root: Dir,
    undo: Vec<Undo>,
    /// Every path created, written or removed, in order (repeats possible).
    changed: Vec<PathBuf>,
    /// The directories whose entries changed, relative.
    dirs: Vec<PathBuf>,
    committed: bool,
}

fn parent_of(rel: &Path) -> PathBuf {
    rel.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl DirTransaction {
    /// A transaction over the directory `root` (every path given must lie inside it).
    pub fn new(root: Dir) -> Self {
        DirTransaction { root, undo: Vec::new(), changed: Vec::new(), dirs: Vec::new(), committed: false }
    }

    /// The paths this transaction created, wrote or removed.
    pub fn changed_paths(&self) -> &[PathBuf] {
        &self.changed
    }

    /// `path` relative to the transaction's directory.
    fn rel(&self, path: &Path) -> Result<PathBuf, DirError> {
        path.strip_prefix(self.root.path()).map(Path::to_path_buf).map_err(|_| DirError::Io {
            path: path.to_owned(),
            source: io::Error::other(format!("outside the conversation directory {}", self.root.path().display())),
        })
    }

    fn done(&mut self, rel: &Path, undo: Undo, new_entry: bool) {
        self.undo.push(undo);
        if new_entry {
            let parent = parent_of(rel);
            if !self.dirs.contains(&parent) {
                self.dirs.push(parent);
            }
        }
        self.changed.push(self.root.path().join(rel));
    }

    /// Opens an existing regular file of the directory for reading.
    pub fn open_read(&self, path: &Path) -> Result<File, DirError> {
        let rel = self.rel(path)?;
        self.root.open_read(&rel).map_err(|source| DirError::Io { path: path.to_owned(), source })
    }

    /// Opens an existing regular file of the directory to hold a lock on it.
    pub fn open_for_lock(&self, path: &Path) -> Result<File, DirError> {
        let rel = self.rel(path)?;
        self.root.open_append(&rel, None).map_err(|source| DirError::Io { path: path.to_owned(), source })
    }

    /// Creates a directory (and its parents) when missing, with permission bits `mode`.
    pub fn create_dir(&mut self, path: &Path, mode: u32) -> Result<(), DirError> {
        let rel = self.rel(path)?;
        let mut prefix = PathBuf::new();
        for name in rel.iter() {
            prefix.push(name);
            let at = self.root.path().join(&prefix);
            let io = |source| DirError::Io { path: at.clone(), source };
            if self.root.create_dir(&prefix, 0o700).map_err(io)? {
                self.done(&prefix.clone(), Undo::RemoveDir { rel: prefix.clone() }, true);
                self.root.open_dir(&prefix).and_then(|d| d.set_mode(mode)).map_err(io)?;
            }
        }
        Ok(())
    }

    /// Appends `bytes` to `path` (creating it with `mode` when missing). When `expected_size`
    /// is given, the file must have exactly that size first: otherwise another program wrote
    /// it, and appending would interleave with its bytes.
    pub fn append(&mut self, path: &Path, expected_size: Option<u64>, mode: u32, bytes: &[u8]) -> Result<FileStat, DirError> {
        let rel = self.rel(path)?;
        let io = |source| DirError::Io { path: path.to_owned(), source };
        let existing = self.root.stat(&rel).map_err(io)?.map(|s| s.size);
        if let (Some(expected), found) = (expected_size, existing.unwrap_or(0)) {
            if expected != found {
                return Err(DirError::Changed { path: path.to_owned(), expected, found });
            }
        }
        let mut file = self.root.open_append(&rel, Some(mode)).map_err(io)?;
        let undo = match existing {
            Some(len) => Undo::Truncate { rel: rel.clone(), len },
            None => Undo::Remove { rel: rel.clone() },
        };
        self.done(&rel, undo, existing.is_none());
        file.write_all(bytes).map_err(io)?;
        file.sync_data().map_err(io)?;
        file_stat(&file).map_err(io)
    }

    /// Replaces (or creates) `path` atomically with what `fill` writes, with permission bits
    /// `mode` and the current time as mtime.
    pub fn replace(&mut self, path: &Path, mode: u32, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<FileStat, DirError> {
        self.write(path, mode, super::meta::now_ns(), fill)
    }

    /// Replaces (or creates) `path` atomically with the first `len` bytes of `source`, with
    /// permission bits `mode` and the current time as mtime; the kernel copies the bytes (see
    /// [`Dir::write_atomic_copy`]).
    pub fn replace_with_prefix(&mut self, path: &Path, mode: u32, source: &File, len: u64) -> Result<FileStat, DirError> {
        self.replace_by(path, |root, rel| root.write_atomic_copy(rel, mode, super::meta::now_ns(), source, len))
    }

    /// Gives the regular file `existing` the new name `new` too (a hard link; `new` must not
    /// exist): a copy of its bytes that costs nothing, for as long as `existing` is only ever
    /// replaced, never changed in place. Undone by removing `new`.
    pub fn link_as_new(&mut self, existing: &Path, new: &Path) -> Result<FileStat, DirError> {
        let (from, rel) = (self.rel(existing)?, self.rel(new)?);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| DirError::Io { path, source }
        };
        match self.root.stat(&from).map_err(io(existing))? {
            Some(s) if s.kind == Kind::File => {}
            _ => return Err(io(existing)(io::Error::other("not a regular file"))),
        }
        self.root.hard_link(&from, &rel).map_err(io(new))?;
        self.done(&rel, Undo::Remove { rel: rel.clone() }, true);
        let stat = self.root.stat(&rel).map_err(io(new))?.ok_or_else(|| io(new)(io::ErrorKind::NotFound.into()))?;
        Ok(FileStat { mode: stat.mode, mtime_ns: stat.mtime_ns, size: stat.size })
    }

    /// Sets the permission bits of regular file `path` and its modification time to now, as a
    /// file just written has. Undone by putting back the old ones.
    pub fn touch_as_new(&mut self, path: &Path, mode: u32) -> Result<FileStat, DirError> {
        let rel = self.rel(path)?;
        let io = |source| DirError::Io { path: path.to_owned(), source };
        let old = self.root.stat(&rel).map_err(io)?.ok_or_else(|| io(io::ErrorKind::NotFound.into()))?;
        self.root.set_file_attributes(&rel, mode, super::meta::now_ns()).map_err(io)?;
        self.undo.push(Undo::Attributes { rel: rel.clone(), mode: old.mode, mtime_ns: old.mtime_ns });
        let stat = self.root.stat(&rel).map_err(io)?.ok_or_else(|| io(io::ErrorKind::NotFound.into()))?;
        Ok(FileStat { mode: stat.mode, mtime_ns: stat.mtime_ns, size: stat.size })
    }

    fn write(&mut self, path: &Path, mode: u32, mtime_ns: i64, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<FileStat, DirError> {
        self.replace_by(path, |root, rel| root.write_atomic(rel, mode, mtime_ns, fill))
    }

    /// Replaces `path` by `replace` (an atomic replacement through the directory's handle),
    /// keeping the old file aside until commit.
    fn replace_by(&mut self, path: &Path, replace: impl FnOnce(&Dir, &Path) -> io::Result<()>) -> Result<FileStat, DirError> {
        let rel = self.rel(path)?;
        let io = |source| DirError::Io { path: path.to_owned(), source };
        let backup = self.keep_aside(&rel).map_err(io)?;
        if let Err(e) = replace(&self.root, &rel) {
            if let Some(backup) = &backup {
                let _ = self.root.remove_file(backup);
            }
            return Err(io(e));
        }
        let undo = match backup {
            Some(backup) => Undo::Restore { rel: rel.clone(), backup },
            None => Undo::Remove { rel: rel.clone() },
        };
        self.done(&rel, undo, true);
        let stat = self.root.stat(&rel).map_err(io)?.ok_or_else(|| io(io::ErrorKind::NotFound.into()))?;
        Ok(FileStat { mode: stat.mode, mtime_ns: stat.mtime_ns, size: stat.size })
    }

    /// Copies `source` (a file the user named) to `path` with its mode and mtime (as Python's
    /// `shutil.copy2`).
    pub fn copy_file(&mut self, source: &Path, path: &Path) -> Result<FileStat, DirError> {
        let io = |e| DirError::Io { path: source.to_owned(), source: e };
        use std::os::unix::fs::OpenOptionsExt;
        let mut input = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(source).map_err(io)?;
        let meta = nofollow::fstat(&input).map_err(io)?;
        if meta.kind != Kind::File {
            return Err(io(io::Error::other("not a regular file")));
        }
        self.write(path, meta.mode, meta.mtime_ns, |out| io::copy(&mut input, out).map(|_| ()))
    }

    /// Removes a file (kept aside until commit).
    pub fn remove(&mut self, path: &Path) -> Result<(), DirError> {
        let rel = self.rel(path)?;
        let io = |source| DirError::Io { path: path.to_owned(), source };
        if let Some(backup) = self.keep_aside(&rel).map_err(io)? {
            self.root.remove_file(&rel).map_err(io)?;
            self.done(&rel, Undo::Restore { rel: rel.clone(), backup }, true);
        }
        Ok(())
    }

    /// Hard-links an existing entry to a temporary name beside it, so it can be restored.
    fn keep_aside(&mut self, rel: &Path) -> io::Result<Option<PathBuf>> {
        if self.root.stat(rel)?.is_none() {
            return Ok(None);
        }
        let parent = parent_of(rel);
        for attempt in 0..100 {
            let backup = parent.join(format!("{TEMP_PREFIX}backup-{}-{attempt}", std::process::id()));
            match self.root.hard_link(rel, &backup) {
                Ok(()) => return Ok(Some(backup)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("no free name for a backup"))
    }

    /// Makes the changes permanent: removes the backups and flushes the directories.
    ///
    /// Removing a backup moves its directory's mtime, which the caller has just recorded in the
    /// store as the operation left it; that mtime is put back, since the backup was never part
    /// of the directory's contents.
    pub fn commit(mut self) -> Result<(), DirError> {
        self.committed = true;
        let at = |rel: &Path| self.root.path().join(rel);
        let mut parents: Vec<(Dir, i64)> = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        for undo in std::mem::take(&mut self.undo) {
            if let Undo::Restore { backup, .. } = undo {
                let parent = parent_of(&backup);
                if !seen.contains(&parent) {
                    if let Ok(dir) = self.root.open_dir(&parent) {
                        if let Ok(meta) = dir.metadata() {
                            parents.push((dir, meta.mtime_ns));
                        }
                    }
                    seen.push(parent);
                }
                let _ = self.root.remove_file(&backup);
            }
        }
        for (dir, mtime_ns) in &parents {
            dir.set_mtime(*mtime_ns).map_err(|source| DirError::Io { path: dir.path().to_owned(), source })?;
        }
        for rel in &self.dirs {
            self.root.open_dir(rel).and_then(|d| d.sync()).map_err(|source| DirError::Io { path: at(rel), source })?;
        }
        Ok(())
    }
}

fn file_stat(file: &File) -> io::Result<FileStat> {
    let s = nofollow::fstat(file)?;
    Ok(FileStat { mode: s.mode, mtime_ns: s.mtime_ns, size: s.size })
}

impl Drop for DirTransaction {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for undo in self.undo.drain(..).rev() {
            let root = &self.root;
            let _ = match undo {
                Undo::Truncate { rel, len } => root.open_append(&rel, None).and_then(|f| f.set_len(len)),
                Undo::Restore { rel, backup } => root.rename(&backup, &rel),
                Undo::Remove { rel } => root.remove_file(&rel),
                Undo::RemoveDir { rel } => root.remove_dir(&rel),
                Undo::Attributes { rel, mode, mtime_ns } => root.set_file_attributes(&rel, mode, mtime_ns),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn dropping_undoes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, "one\n").unwrap();
        fs::write(&b, "keep").unwrap();
        {
            let mut tx = DirTransaction::new(Dir::open(dir.path()).unwrap());
            tx.append(&a, Some(4), 0o600, b"two\n").unwrap();
            tx.replace(&b, 0o600, |w| w.write_all(b"new")).unwrap();
            tx.create_dir(&dir.path().join("x/y"), 0o755).unwrap();
            tx.append(&dir.path().join("x/y/c"), None, 0o600, b"c").unwrap();
            assert_eq!(fs::read(&a).unwrap(), b"one\ntwo\n");
        }
        assert_eq!(fs::read(&a).unwrap(), b"one\n");
        assert_eq!(fs::read(&b).unwrap(), b"keep");
        assert!(!dir.path().join("x").exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "no backups left");
    }

    #[test]
    fn commit_keeps_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        fs::write(&a, "one\n").unwrap();
        let mut tx = DirTransaction::new(Dir::open(dir.path()).unwrap());
        assert!(matches!(tx.append(&a, Some(3), 0o600, b"x"), Err(DirError::Changed { .. })));
        tx.replace(&a, 0o640, |w| w.write_all(b"new")).unwrap();
        // What the store records after the operation, before the commit removes the backup.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let recorded = fs::metadata(dir.path()).unwrap().modified().unwrap();
        tx.commit().unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(fs::metadata(dir.path()).unwrap().modified().unwrap(), recorded, "removing the backup keeps the directory's mtime");
    }

    #[test]
    fn a_linked_backup_and_a_prefix_replacement_roll_back_and_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (branch, backup) = (dir.path().join("branch"), dir.path().join("backup"));
        fs::write(&branch, "one\ntwo\n").unwrap();
        fs::set_permissions(&branch, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let before = fs::metadata(&branch).unwrap();
        for commit in [false, true] {
            let mut tx = DirTransaction::new(Dir::open(dir.path()).unwrap());
            let linked = tx.link_as_new(&branch, &backup).unwrap();
            assert_eq!(linked.size, 8);
            let source = tx.open_read(&branch).unwrap();
            tx.replace_with_prefix(&branch, 0o644, &source, 4).unwrap();
            let touched = tx.touch_as_new(&backup, 0o600).unwrap();
            assert_eq!(touched.mode, 0o600);
            assert_eq!((fs::read(&branch).unwrap(), fs::read(&backup).unwrap()), (b"one\n".to_vec(), b"one\ntwo\n".to_vec()));
            assert!(matches!(tx.link_as_new(&branch, &backup), Err(DirError::Io { .. })), "an existing name is never replaced");
            if commit {
                tx.commit().unwrap();
                assert_eq!(fs::read(&backup).unwrap(), b"one\ntwo\n");
                assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
            } else {
                drop(tx);
                assert_eq!(fs::read(&branch).unwrap(), b"one\ntwo\n");
                let after = fs::metadata(&branch).unwrap();
                assert_eq!((after.permissions(), after.modified().unwrap()), (before.permissions(), before.modified().unwrap()), "mode and mtime put back");
                assert!(!backup.exists());
                assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no backups left");
            }
        }
        // A replacement that fails (the source is shorter than asked) leaves the file and no debris.
        let mut tx = DirTransaction::new(Dir::open(dir.path()).unwrap());
        let source = tx.open_read(&backup).unwrap();
        assert!(tx.replace_with_prefix(&branch, 0o600, &source, 100).is_err());
        assert_eq!(fs::read(&branch).unwrap(), b"one\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "the kept-aside copy is gone");
    }
}
