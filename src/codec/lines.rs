//! Splitting a file into lines without losing a byte.
//!
//! A file is its lines joined by `\n`, plus a final `\n` when the file ends with one. Keeping
//! that one flag beside the lines is enough to write back any file exactly, including one whose
//! last line was cut off mid-write.

use std::io::{self, BufRead};

/// Reads `\n`-terminated lines one at a time, so memory is bounded by the longest line.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Whether the most recent line ended with `\n`.
    terminated: bool,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader { inner, buf: Vec::new(), terminated: true }
    }

    /// The next line without its `\n`, or `None` at the end of the file.
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        self.buf.clear();
        let n = self.inner.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        self.terminated = self.buf.last() == Some(&b'\n');
        if self.terminated {
            self.buf.pop();
        }
        Ok(Some(&self.buf))
    }

    /// True when the file read so far ends with `\n` (or is empty).
    pub fn ends_with_newline(&self) -> bool {
        self.terminated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(bytes: &[u8]) -> (Vec<Vec<u8>>, bool) {
        let mut r = LineReader::new(bytes);
        let mut lines = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            lines.push(l.to_vec());
        }
        (lines, r.ends_with_newline())
    }

    #[test]
    fn keeps_the_shape_of_the_file() {
        assert_eq!(split(b""), (vec![], true));
        assert_eq!(split(b"a\n"), (vec![b"a".to_vec()], true));
        assert_eq!(split(b"a\n\nb"), (vec![b"a".to_vec(), b"".to_vec(), b"b".to_vec()], false));
        assert_eq!(split(b"\n"), (vec![b"".to_vec()], true));
    }
}
