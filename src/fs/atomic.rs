//! Filesystem writes that never leave a half-written file behind, for paths the user gives.
//!
//! [`write_atomic`] writes into a temporary file beside the target, sets its mode and
//! modification time, fsyncs it and renames it over the target: a reader (or gptme) sees the old
//! file or the new one, never a mixture, and a crash leaves at most a stray temporary file. The
//! target's directory is resolved as given; the target itself is replaced, never written
//! through (a link there is replaced by the file). Writes inside a conversation directory go
//! through [`super::nofollow::Dir`] itself, which follows no link at all.

use std::io::{self, Write};
use std::path::Path;

use super::nofollow::{Dir, Kind};

/// Prefix of temporary files, so that a stray one is recognisable.
pub const TEMP_PREFIX: &str = ".sessiondb-tmp-";

/// Removes what interrupted writers left in conversation directory `dir`: temporary files and
/// the backups a [`super::dirtx::DirTransaction`] keeps until it commits (all named with
/// [`TEMP_PREFIX`]). Only to be called under the conversation's lock, when no sessiondb can be
/// writing there; by then each such file is a copy of something the directory or the store
/// already holds. Symlinks are neither followed nor removed. Returns how many files were
/// removed.
pub fn remove_debris(dir: &Dir) -> io::Result<u64> {
    let mut removed = 0;
    let mut pending = vec![dir.try_clone()?];
    while let Some(d) = pending.pop() {
        for (name, kind) in d.entries()? {
            if kind == Kind::Dir {
                pending.push(d.open_dir(Path::new(&name))?);
            } else if kind == Kind::File && name.to_str().is_some_and(|n| n.starts_with(TEMP_PREFIX)) {
                d.remove_file(Path::new(&name))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// Atomically replaces `path` with what `fill` writes, with permission bits `mode` and
/// modification time `mtime_ns` (nanoseconds since the epoch).
pub fn write_atomic(path: &Path, mode: u32, mtime_ns: i64, fill: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    Dir::open_given(parent)?.write_atomic(Path::new(name), mode, mtime_ns, fill)
}

/// Flushes a directory's entries (the renames into it) to disk.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn atomic_write_sets_mode_and_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "old").unwrap();
        write_atomic(&path, 0o640, 1_500_000_000_123_456_789, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o640);
        assert_eq!((meta.mtime(), meta.mtime_nsec()), (1_500_000_000, 123_456_789));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }

    #[test]
    fn failed_fill_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "old").unwrap();
        let err = write_atomic(&path, 0o600, 0, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn debris_is_removed_but_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join(format!("{TEMP_PREFIX}victim")), "keep").unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join(format!("sub/{TEMP_PREFIX}x")), "debris").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        assert_eq!(remove_debris(&Dir::open(dir.path()).unwrap()).unwrap(), 1);
        assert_eq!(fs::read_dir(dir.path().join("sub")).unwrap().count(), 0);
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    }
}
