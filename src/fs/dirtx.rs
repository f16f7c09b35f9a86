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
    Exchange { a: PathBuf, b: PathBuf },
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

    /// Replaces `path` atomically with the first `len` bytes of `source` (as
    /// [`Self::replace_with_prefix`]), and gives the file `path` named until then the new name
    /// `kept` (which must not exist), with permission bits `kept_mode` and the current time as
    /// mtime, as a file just written has: a copy of the old bytes that costs nothing.
    ///
    /// `kept` never names a file that a writer appending to `path` in place (gptme, or
    /// sessiondb) could change, whenever the process is killed: the names are exchanged in one
    /// atomic step ([`Dir::replace_copy_keeping_old`]). Where the filesystem cannot exchange
    /// names, `kept` is written as a copy first. Undone by putting back the old `path` and
    /// removing `kept`. Returns the new `path`'s attributes and `kept`'s.
    pub fn replace_with_prefix_keeping_old(
        &mut self,
        path: &Path,
        mode: u32,
        source: &File,
        len: u64,
        kept: &Path,
        kept_mode: u32,
    ) -> Result<(FileStat, FileStat), DirError> {
        let (rel, kept_rel) = (self.rel(path)?, self.rel(kept)?);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| DirError::Io { path, source }
        };
        let old = match self.root.stat(&rel).map_err(io(path))? {
            Some(s) if s.kind == Kind::File => s,
            _ => return Err(io(path)(io::Error::other("not a regular file"))),
        };
        match self.root.replace_copy_keeping_old(&rel, mode, super::meta::now_ns(), source, len, &kept_rel) {
            Ok(()) => {
                // Undone in reverse: the old file's attributes back, the names exchanged back,
                // then `kept` (the new bytes by then) removed.
                self.done(&kept_rel, Undo::Remove { rel: kept_rel.clone() }, true);
                self.undo.push(Undo::Exchange { a: kept_rel.clone(), b: rel.clone() });
                self.changed.push(self.root.path().join(&rel));
                self.root.set_file_attributes(&kept_rel, kept_mode, super::meta::now_ns()).map_err(io(kept))?;
                self.undo.push(Undo::Attributes { rel: kept_rel.clone(), mode: old.mode, mtime_ns: old.mtime_ns });
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                let whole = self.open_read(path)?;
                self.replace_with_prefix(kept, kept_mode, &whole, old.size)?;
                self.replace_with_prefix(path, mode, source, len)?;
            }
            Err(e) => return Err(io(path)(e)),
        }
        let stat = |rel: &Path, shown: &Path| -> Result<FileStat, DirError> {
            let s = self.root.stat(rel).map_err(io(shown))?.ok_or_else(|| io(shown)(io::ErrorKind::NotFound.into()))?;
            Ok(FileStat { mode: s.mode, mtime_ns: s.mtime_ns, size: s.size })
        };
        Ok((stat(&rel, path)?, stat(&kept_rel, kept)?))
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
                Undo::Exchange { a, b } => root.exchange(&a, &b),
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

    /// The old file becomes the kept one without a copy, never sharing a name with the new
    /// file (an append to the branch after the replacement leaves the kept file alone), and a
    /// transaction dropped uncommitted puts the names back as they were.
    #[test]
    fn the_replaced_file_is_kept_under_a_new_name_and_never_shared() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, kept) = (dir.path().join("a"), dir.path().join("b/kept"));
        fs::create_dir(dir.path().join("b")).unwrap();
        fs::write(&a, "one\ntwo\n").unwrap();
        let old_ino = fs::metadata(&a).unwrap().ino();
        for commit in [false, true] {
            let mut tx = DirTransaction::new(Dir::open(dir.path()).unwrap());
            let source = tx.open_read(&a).unwrap();
            let (stat, kept_stat) = tx.replace_with_prefix_keeping_old(&a, 0o600, &source, 4, &kept, 0o600).unwrap();
            assert_eq!((fs::read(&a).unwrap(), fs::read(&kept).unwrap()), (b"one\n".to_vec(), b"one\ntwo\n".to_vec()));
            assert_eq!(fs::metadata(&kept).unwrap().ino(), old_ino, "the old file itself, not a copy");
            assert_ne!(fs::metadata(&a).unwrap().ino(), old_ino);
            assert_eq!((stat.size, kept_stat.size, kept_stat.mode & 0o777), (4, 8, 0o600));
            if commit {
                tx.commit().unwrap();
            } else {
                drop(tx);
                assert_eq!(fs::read(&a).unwrap(), b"one\ntwo\n");
                assert_eq!(fs::metadata(&a).unwrap().ino(), old_ino);
                assert!(!kept.exists(), "rolled back");
            }
        }
        fs::OpenOptions::new().append(true).open(&a).unwrap().write_all(b"three\n").unwrap();
        assert_eq!(fs::read(&kept).unwrap(), b"one\ntwo\n", "an append to the branch never reaches the kept file");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary names left");
        assert_eq!(fs::read_dir(dir.path().join("b")).unwrap().count(), 1);
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

    /// A replacement that fails (the source is shorter than asked) leaves the file as it was,
    /// no kept file and no debris.
    #[test]
    fn a_failed_replacement_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let (a, kept) = (dir.path().join("a"), dir.path().join("kept"));
        fs::write(&a, "one\n").unwrap();
        let mut tx = DirTransaction::new(Dir::open(dir.path()).unwrap());
        let source = tx.open_read(&a).unwrap();
        assert!(tx.replace_with_prefix(&a, 0o600, &source, 100).is_err());
        assert!(tx.replace_with_prefix_keeping_old(&a, 0o600, &source, 100, &kept, 0o600).is_err());
        drop(tx);
        assert_eq!(fs::read(&a).unwrap(), b"one\n");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no kept file, no temporary name");
    }
}
