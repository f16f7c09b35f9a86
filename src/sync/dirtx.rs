//! A directory transaction: changes to a conversation directory that can be undone.
//!
//! An operation changes the store and the directory together; if anything fails before the
//! store commits, the directory must be as it was. Every change made through a
//! [`DirTransaction`] records how to undo it — an append remembers the old length, a
//! replacement or removal keeps the old file under a temporary name (a hard link), a new file
//! or directory is simply removed — and dropping the transaction without [`DirTransaction::commit`]
//! undoes them in reverse order. Appends are flushed to disk (`fdatasync`) before they count as
//! done; replacements go through [`write_atomic`], so a crash leaves the old or the new file.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::fsutil::{sync_dir, write_atomic, TEMP_PREFIX};

/// A file's state after a write, to record in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub mode: u32,
    pub mtime_ns: i64,
    pub size: u64,
}

pub fn stat(path: &Path) -> io::Result<FileStat> {
    let m = fs::symlink_metadata(path)?;
    Ok(FileStat { mode: m.mode() & 0o7777, mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(), size: m.len() })
}

enum Undo {
    Truncate { path: PathBuf, len: u64 },
    Restore { path: PathBuf, backup: PathBuf },
    Remove { path: PathBuf },
    RemoveDir { path: PathBuf },
}

/// Why a directory change was refused.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{path}: changed on disk since sessiondb last read it ({found} bytes, expected {expected})")]
    Changed { path: PathBuf, expected: u64, found: u64 },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

#[derive(Default)]
pub struct DirTransaction {
    undo: Vec<Undo>,
    /// Every path created, written or removed, in order (repeats possible).
    changed: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    committed: bool,
}

fn now_ns() -> i64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    d.as_nanos() as i64
}

impl DirTransaction {
    pub fn new() -> Self {
        DirTransaction::default()
    }

    /// The paths this transaction created, wrote or removed.
    pub fn changed_paths(&self) -> &[PathBuf] {
        &self.changed
    }

    fn touched(&mut self, path: &Path) {
        if let Some(parent) = path.parent() {
            if !self.dirs.iter().any(|d| d == parent) {
                self.dirs.push(parent.to_owned());
            }
        }
    }

    /// Creates a directory (and its parents) when missing.
    pub fn create_dir(&mut self, path: &Path, mode: u32) -> Result<(), DirError> {
        if path.is_dir() {
            return Ok(());
        }
        if let Some(parent) = path.parent() {
            self.create_dir(parent, mode)?;
        }
        let io = |source| DirError::Io { path: path.to_owned(), source };
        fs::create_dir(path).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(io)?;
        self.undo.push(Undo::RemoveDir { path: path.to_owned() });
        self.changed.push(path.to_owned());
        self.touched(path);
        Ok(())
    }

    /// Appends `bytes` to `path` (creating it with `mode` when missing). When `expected_size`
    /// is given, the file must have exactly that size first: otherwise another program wrote
    /// it, and appending would interleave with its bytes.
    pub fn append(&mut self, path: &Path, expected_size: Option<u64>, mode: u32, bytes: &[u8]) -> Result<FileStat, DirError> {
        let io = |source| DirError::Io { path: path.to_owned(), source };
        let existing = fs::metadata(path).ok().map(|m| m.len());
        if let (Some(expected), found) = (expected_size, existing.unwrap_or(0)) {
            if expected != found {
                return Err(DirError::Changed { path: path.to_owned(), expected, found });
            }
        }
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = OpenOptions::new().append(true).create(true).mode(mode).open(path).map_err(io)?;
        self.undo.push(match existing {
            Some(len) => Undo::Truncate { path: path.to_owned(), len },
            None => Undo::Remove { path: path.to_owned() },
        });
        if existing.is_none() {
            self.touched(path);
        }
        self.changed.push(path.to_owned());
        file.write_all(bytes).map_err(io)?;
        file.sync_data().map_err(io)?;
        stat(path).map_err(io)
    }

    /// Replaces (or creates) `path` atomically with what `fill` writes, with permission bits
    /// `mode` and the current time as mtime.
    pub fn replace(&mut self, path: &Path, mode: u32, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<FileStat, DirError> {
        let io = |source| DirError::Io { path: path.to_owned(), source };
        let backup = self.keep_aside(path).map_err(io)?;
        write_atomic(path, mode, now_ns(), fill).map_err(io)?;
        self.undo.push(match backup {
            Some(backup) => Undo::Restore { path: path.to_owned(), backup },
            None => Undo::Remove { path: path.to_owned() },
        });
        self.touched(path);
        self.changed.push(path.to_owned());
        stat(path).map_err(io)
    }

    /// Copies `source` to `path` with its mode and mtime (as Python's `shutil.copy2`).
    pub fn copy_file(&mut self, source: &Path, path: &Path) -> Result<FileStat, DirError> {
        let io = |e| DirError::Io { path: source.to_owned(), source: e };
        let meta = fs::metadata(source).map_err(io)?;
        let mut input = fs::File::open(source).map_err(io)?;
        let mtime_ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let backup = self.keep_aside(path).map_err(io)?;
        write_atomic(path, meta.mode() & 0o7777, mtime_ns, |out| io::copy(&mut input, out).map(|_| ()))
            .map_err(|source| DirError::Io { path: path.to_owned(), source })?;
        self.undo.push(match backup {
            Some(backup) => Undo::Restore { path: path.to_owned(), backup },
            None => Undo::Remove { path: path.to_owned() },
        });
        self.touched(path);
        self.changed.push(path.to_owned());
        stat(path).map_err(|source| DirError::Io { path: path.to_owned(), source })
    }

    /// Removes a file (kept aside until commit).
    pub fn remove(&mut self, path: &Path) -> Result<(), DirError> {
        let io = |source| DirError::Io { path: path.to_owned(), source };
        if let Some(backup) = self.keep_aside(path).map_err(io)? {
            fs::remove_file(path).map_err(io)?;
            self.undo.push(Undo::Restore { path: path.to_owned(), backup });
            self.touched(path);
            self.changed.push(path.to_owned());
        }
        Ok(())
    }

    /// Hard-links an existing file to a temporary name beside it, so it can be restored.
    fn keep_aside(&mut self, path: &Path) -> io::Result<Option<PathBuf>> {
        if fs::symlink_metadata(path).is_err() {
            return Ok(None);
        }
        let parent = path.parent().unwrap_or(Path::new("."));
        for attempt in 0..100 {
            let backup = parent.join(format!("{TEMP_PREFIX}backup-{}-{attempt}", std::process::id()));
            match fs::hard_link(path, &backup) {
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
        let mut parents: Vec<(PathBuf, filetime::FileTime)> = Vec::new();
        for undo in std::mem::take(&mut self.undo) {
            if let Undo::Restore { backup, .. } = undo {
                if let Some(parent) = backup.parent() {
                    if !parents.iter().any(|(p, _)| p == parent) {
                        if let Ok(meta) = fs::metadata(parent) {
                            parents.push((parent.to_owned(), filetime::FileTime::from_last_modification_time(&meta)));
                        }
                    }
                }
                let _ = fs::remove_file(&backup);
            }
        }
        for (parent, mtime) in &parents {
            filetime::set_file_mtime(parent, *mtime).map_err(|source| DirError::Io { path: parent.clone(), source })?;
        }
        for dir in &self.dirs {
            sync_dir(dir).map_err(|source| DirError::Io { path: dir.clone(), source })?;
        }
        Ok(())
    }
}

impl Drop for DirTransaction {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for undo in self.undo.drain(..).rev() {
            let _ = match undo {
                Undo::Truncate { path, len } => OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(len)),
                Undo::Restore { path, backup } => fs::rename(&backup, &path),
                Undo::Remove { path } => fs::remove_file(&path),
                Undo::RemoveDir { path } => fs::remove_dir(&path),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_undoes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, "one\n").unwrap();
        fs::write(&b, "keep").unwrap();
        {
            let mut tx = DirTransaction::new();
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
        let mut tx = DirTransaction::new();
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
}
