//! How stored text is shown to people on a terminal: the one rule that makes it safe to print.
//!
//! Invariant: text made [`visible`] (or passed through [`Visible`]) never carries a control
//! character from stored text — names, roles, contents, model names, branch and file names —
//! raw: each is shown escaped (`\u{1b}`, `\r`, `\u{9b}`), as Rust's `char::escape_default`
//! writes it, so that no stored text can drive the terminal (clear the screen, write the
//! clipboard with OSC 52, move the cursor, retitle the window). Multi-line text keeps its
//! newlines and tabs; a one-line cell ([`visible_line`]) escapes those too. The command line
//! applies this to all its human-readable output (everything but `--json`, `show --json` and
//! the documents of `export --format` written to a file or a pipe), adding its own colour codes
//! only after the text has been made visible.

use std::borrow::Cow;

/// `text` with every control character (C0, DEL and C1) escaped, except newlines and tabs.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape_controls(text, true)
}

/// `text` with every control character escaped, newlines and tabs too: for one-line cells.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape_controls(text, false)
}

fn escape_controls(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let kept = |c: char| !c.is_control() || (keep_lines && (c == '\n' || c == '\t'));
    if text.chars().all(kept) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if kept(c) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    Cow::Owned(out)
}

/// A writer that passes a document on made [`visible`], as it is streamed (`export --format`
/// on a terminal). A character split between two writes is held until it is whole; bytes that
/// are not UTF-8 are shown as U+FFFD.
pub struct Visible<W: std::io::Write> {
    inner: W,
    carry: Vec<u8>,
}

impl<W: std::io::Write> Visible<W> {
    pub fn new(inner: W) -> Self {
        Visible { inner, carry: Vec::new() }
    }

    fn pass(&mut self, upto: usize) -> std::io::Result<()> {
        let chunk: Vec<u8> = self.carry.drain(..upto).collect();
        self.inner.write_all(visible(&String::from_utf8_lossy(&chunk)).as_bytes())
    }
}

impl<W: std::io::Write> std::io::Write for Visible<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.carry.extend_from_slice(buf);
        let whole = match std::str::from_utf8(&self.carry) {
            Ok(_) => self.carry.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(), // a character cut short
            Err(_) => self.carry.len(),
        };
        self.pass(whole)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.pass(self.carry.len())?;
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_document_is_made_visible_across_writes() {
        use std::io::Write;
        let mut out = Visible::new(Vec::new());
        let text = "a\u{1b}[2Jb \u{9b}c é\n";
        for b in text.as_bytes() {
            out.write_all(std::slice::from_ref(b)).unwrap(); // every character split
        }
        out.flush().unwrap();
        assert_eq!(String::from_utf8(out.inner).unwrap(), visible(text));
    }

    #[test]
    fn controls_are_escaped_and_lines_kept() {
        assert_eq!(visible("a\x1b]52;c;aGk=\x07b\r\n\tc\u{9b}2J\u{7f}"), "a\\u{1b}]52;c;aGk=\\u{7}b\\r\n\tc\\u{9b}2J\\u{7f}");
        assert_eq!(visible_line("a\nb\tc"), "a\\nb\\tc");
        assert!(matches!(visible("plain ünïcode 数据"), Cow::Borrowed(_)));
    }
}
