//! Splitting a file into lines without losing a byte.
//!
//! A file is its lines joined by `\n`, plus a final `\n` when the file ends with one. Keeping
//! that one flag beside the lines is enough to write back any file exactly, including one whose
//! last line was cut off mid-write.

use std::io::{self, BufRead};

/// The longest line read: gptme's largest real lines (a pasted file, a long tool output) are a
/// few megabytes; a longer "line" is a damaged or hostile file (a sparse file of zeros has no
/// newline at all), and reading it whole would take unbounded memory.
pub const MAX_LINE: usize = 64 << 20;

/// Reads `\n`-terminated lines one at a time, so memory is bounded by the longest line (at
/// most [`MAX_LINE`]: a longer one is an error naming its line number).
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Whether the most recent line ended with `\n`.
    terminated: bool,
    /// Lines returned so far.
    lines: u64,
    max_line: usize,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_max_line(inner, MAX_LINE)
    }

    pub fn with_max_line(inner: R, max_line: usize) -> Self {
        LineReader { inner, buf: Vec::new(), terminated: true, lines: 0, max_line }
    }

    /// The next line without its `\n`, or `None` at the end of the file.
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        self.buf.clear();
        loop {
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                break;
            }
            let (taken, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if self.buf.len() + taken > self.max_line + 1 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("line {} is longer than {} MiB: not a gptme log line", self.lines + 1, self.max_line >> 20),
                ));
            }
            self.buf.extend_from_slice(&available[..taken]);
            self.inner.consume(taken);
            if done {
                break;
            }
        }
        if self.buf.is_empty() {
            return Ok(None);
        }
        self.lines += 1;
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

    #[test]
    fn a_line_beyond_the_limit_is_an_error_naming_it() {
        let mut r = LineReader::with_max_line(&b"short\n0123456789\nx"[..], 8);
        assert_eq!(r.next_line().unwrap(), Some(&b"short"[..]));
        let e = r.next_line().unwrap_err();
        assert!(e.to_string().contains("line 2 is longer"), "{e}");
        let mut r = LineReader::with_max_line(&b"12345678\n"[..], 8);
        assert_eq!(r.next_line().unwrap(), Some(&b"12345678"[..]), "the limit itself is fine");
    }
}
