//! Times and permission bits, each computed in one place.
//!
//! Modification times travel as nanoseconds since the epoch (`i64`), as the store keeps them;
//! [`mtime_seconds`] gives the float CPython gives as `st_mtime`, for listings that must agree
//! with gptme's to the last bit. New files and directories take the permission bits the umask
//! gives `open(…, O_CREAT, 0666)` and `mkdir(…, 0777)`, as gptme's own do.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// A file's modification time in nanoseconds since the epoch.
pub fn mtime_ns(meta: &Metadata) -> i64 {
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

/// Modification time → epoch seconds, computed as CPython computes `st_mtime`
/// (`sec + nsec * 1e-9`).
pub fn mtime_seconds(meta: &Metadata) -> f64 {
    meta.mtime() as f64 + meta.mtime_nsec() as f64 * 1e-9
}

/// Permission bits (`st_mode & 0o7777`).
pub fn mode_bits(meta: &Metadata) -> u32 {
    meta.mode() & 0o7777
}

/// The current time in nanoseconds since the epoch (0 before it).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

/// The process's file mode creation mask.
pub fn umask() -> u32 {
    // SAFETY: umask only swaps the process's file mode mask; it is restored at once.
    let mask = unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old
    };
    mask as u32
}

/// Permission bits of a new file, as `open(…, O_CREAT, 0666)` makes it under the umask.
pub fn new_file_mode() -> u32 {
    0o666 & !umask()
}

/// Permission bits of a new directory, as `mkdir(…, 0777)` makes it under the umask.
pub fn new_dir_mode() -> u32 {
    0o777 & !umask()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_agree_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        filetime::set_file_mtime(&path, filetime::FileTime::from_unix_time(1_500_000_000, 123_456_789)).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(mtime_ns(&meta), 1_500_000_000_123_456_789);
        assert_eq!(mtime_seconds(&meta), 1_500_000_000.0 + 123_456_789.0 * 1e-9);
        let before = now_ns();
        assert!(before > 1_500_000_000_000_000_000 && now_ns() >= before);
    }

    #[test]
    fn new_modes_follow_the_umask() {
        let mask = umask();
        assert_eq!(new_file_mode(), 0o666 & !mask);
        assert_eq!(new_dir_mode(), 0o777 & !mask);
        assert_eq!(umask(), mask, "reading the umask leaves it as it was");
    }
}
