//! Incremental-ingest watermarks: how far a file has been read, and how to tell that it has only
//! grown since.
//!
//! gptme appends new lines to `conversation.jsonl`, branch and view files and `events.jsonl`,
//! and rewrites them (edit, undo, compaction) through a temporary file renamed over the old
//! one, which gives the file a new inode. So a file that still has the inode it was read from,
//! is at least as long as what was read, and still holds the same bytes just before that point
//! has only gained bytes at its end, and reading from the watermark on gives exactly the new
//! lines. Any other change means a full re-read.

use std::fs::File;
use std::os::unix::fs::FileExt;

use sha2::{Digest, Sha256};

/// How many bytes before the watermark its digest covers.
pub const TAIL_WINDOW: u64 = 4096;

/// What was read of one file, recorded so that the next sync reads only what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermark {
    /// Bytes read from the start of the file (whole lines, in sync).
    pub size: u64,
    pub ino: u64,
    /// SHA-256 of the (up to) [`TAIL_WINDOW`] bytes before `size`.
    pub tail: [u8; 32],
}

/// The digest of the (up to) [`TAIL_WINDOW`] bytes of `file` that end at `end`.
pub fn tail_digest(file: &File, end: u64) -> std::io::Result<[u8; 32]> {
    let start = end.saturating_sub(TAIL_WINDOW);
    let mut buf = vec![0; (end - start) as usize];
    file.read_exact_at(&mut buf, start)?;
    Ok(Sha256::digest(&buf).into())
}

/// Whether `file` (with inode `ino` and length `len` now) only grew since `mark` was taken.
pub fn only_grew(file: &File, ino: u64, len: u64, mark: &Watermark) -> std::io::Result<bool> {
    if ino != mark.ino || len < mark.size {
        return Ok(false);
    }
    Ok(tail_digest(file, mark.size)? == mark.tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn mark(path: &std::path::Path) -> Watermark {
        let f = File::open(path).unwrap();
        let m = f.metadata().unwrap();
        Watermark { size: m.len(), ino: m.ino(), tail: tail_digest(&f, m.len()).unwrap() }
    }

    fn grew(path: &std::path::Path, w: &Watermark) -> bool {
        let f = File::open(path).unwrap();
        let m = f.metadata().unwrap();
        only_grew(&f, m.ino(), m.len(), w).unwrap()
    }

    #[test]
    fn tells_an_append_from_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "a\nb\n").unwrap();
        let w = mark(&path);
        assert!(grew(&path, &w), "unchanged counts as grown by nothing");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"c\n").unwrap();
        assert!(grew(&path, &w));
        // Rewritten in place with other bytes before the mark.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all(b"x").unwrap();
        assert!(!grew(&path, &w));
        // Replaced by a new file with the very same bytes: a new inode, so a full re-read.
        let w = mark(&path);
        let tmp = dir.path().join("t");
        std::fs::write(&tmp, std::fs::read(&path).unwrap()).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(!grew(&path, &w));
        // Truncated.
        let w = mark(&path);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(2).unwrap();
        assert!(!grew(&path, &w));
    }
}
