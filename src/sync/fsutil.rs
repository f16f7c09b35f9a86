//! Filesystem writes that never leave a half-written file behind.
//!
//! [`write_atomic`] writes into a temporary file beside the target, sets its mode and
//! modification time, fsyncs it and renames it over the target: a reader (or gptme) sees the old
//! file or the new one, never a mixture, and a crash leaves at most a stray temporary file.
//! Callers fsync the directory once they have renamed everything into it ([`sync_dir`]).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use filetime::FileTime;

/// Prefix of temporary files, so that a stray one is recognisable.
pub const TEMP_PREFIX: &str = ".sessiondb-tmp-";

/// Removes what interrupted writers left in conversation directory `dir`: temporary files and
/// the backups a [`super::dirtx::DirTransaction`] keeps until it commits (all named with
/// [`TEMP_PREFIX`]). Only to be called under the conversation's lock, when no sessiondb can be
/// writing there; by then each such file is a copy of something the directory or the store
/// already holds. Symlinks are not followed. Returns how many files were removed.
pub fn remove_debris(dir: &Path) -> io::Result<u64> {
    let mut removed = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() && entry.file_name().to_str().is_some_and(|n| n.starts_with(TEMP_PREFIX)) {
                fs::remove_file(entry.path())?;
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
    let temp = tempfile::Builder::new().prefix(TEMP_PREFIX).tempfile_in(parent)?;
    {
        let mut out = BufWriter::with_capacity(1 << 16, temp.as_file());
        fill(&mut out)?;
        out.flush()?;
    }
    let file: &File = temp.as_file();
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.sync_all()?;
    filetime::set_file_handle_times(file, None, Some(file_time(mtime_ns)))?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Atomically replaces `path` with a symbolic link to `target`, with modification time
/// `mtime_ns` on the link itself.
pub fn symlink_atomic(path: &Path, target: &Path, mtime_ns: i64) -> io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    // Reserve a unique name, then put the link in its place.
    let temp = tempfile::Builder::new().prefix(TEMP_PREFIX).tempfile_in(parent)?.into_temp_path();
    let temp_path = temp.to_path_buf();
    fs::remove_file(&temp_path)?;
    std::os::unix::fs::symlink(target, &temp_path)?;
    let result = filetime::set_symlink_file_times(&temp_path, file_time(mtime_ns), file_time(mtime_ns))
        .and_then(|_| fs::rename(&temp_path, path));
    if result.is_err() {
        let _ = fs::remove_file(&temp_path);
    }
    std::mem::forget(temp); // the name now belongs to the link (or was removed above)
    result
}

/// Sets a directory's permission bits and modification time.
pub fn set_dir_attributes(path: &Path, mode: u32, mtime_ns: i64) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    filetime::set_file_mtime(path, file_time(mtime_ns))
}

/// Flushes a directory's entries (the renames into it) to disk.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

pub fn file_time(mtime_ns: i64) -> FileTime {
    FileTime::from_unix_time(mtime_ns.div_euclid(1_000_000_000), mtime_ns.rem_euclid(1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn symlinks_replace_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("l");
        symlink_atomic(&link, Path::new("/nowhere"), 1_000_000_000).unwrap();
        symlink_atomic(&link, Path::new("../x"), 2_000_000_000).unwrap();
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("../x"));
        assert_eq!(fs::symlink_metadata(&link).unwrap().mtime(), 2);
    }
}
