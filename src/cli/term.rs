//! Terminal plumbing for the command line: printing lines and documents, made safe by the
//! library's rule for showing stored text ([`sessiondb::render::terminal`]).
//!
//! Invariant: human-readable output (everything but `--json`, `show --json` and the documents of
//! `export --format` written to a file or a pipe) goes through [`say!`], [`tell!`] or
//! [`print_document`], so that it never carries a control character from stored text raw,
//! whether or not standard output is a terminal. Widths are terminal cells ([`cells`]), never
//! characters, so that CJK and emoji cannot push a table out of line.

use std::io::IsTerminal;

pub use sessiondb::render::terminal::{visible, visible_line, Visible};

/// A document (`export --format`) on standard output: exact when written to a file or a pipe,
/// made [`visible`] on a terminal.
pub fn print_document(text: &str) {
    if std::io::stdout().is_terminal() {
        print!("{}", visible(text));
    } else {
        print!("{text}");
    }
}

/// `println!` for human-readable output: the whole line made [`visible`].
macro_rules! say {
    ($($arg:tt)*) => { println!("{}", ::sessiondb::render::terminal::visible(&format!($($arg)*))) };
}

/// `eprintln!` for messages to people: the whole line made [`visible`].
macro_rules! tell {
    ($($arg:tt)*) => { eprintln!("{}", ::sessiondb::render::terminal::visible(&format!($($arg)*))) };
}

pub(crate) use {say, tell};

/// How many terminal cells `text` takes: two for CJK and most emoji, none for combining marks.
/// Tables are laid out in cells, never in characters.
pub fn cells(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` cut to at most `width` cells, ending in `…` when it was cut.
pub fn cut(text: &str, width: usize) -> String {
    if cells(text) <= width {
        return text.to_owned();
    }
    let budget = width.saturating_sub(1);
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > budget {
            break;
        }
        used += w;
        out.push(c);
    }
    // A sequence that the string measure counts wider than its characters (an emoji with its
    // presentation selector) can still overflow: drop characters until it fits.
    while cells(&out) > budget {
        out.pop();
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// `text` cut to at most `width` cells from the start, beginning with `…` when it was cut: for
/// names whose end tells them apart (`anthropic/claude-sonnet-4-6` → `…claude-sonnet-4-6`).
pub fn cut_start(text: &str, width: usize) -> String {
    if cells(text) <= width {
        return text.to_owned();
    }
    let budget = width.saturating_sub(1);
    let mut kept: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > budget {
            break;
        }
        used += w;
        kept.push(c);
    }
    let mut out: String = kept.into_iter().rev().collect();
    while cells(&out) > budget {
        out.remove(0);
    }
    if width > 0 {
        out.insert(0, '…');
    }
    out
}

/// `text` followed by spaces up to `width` cells (nothing added when it is already wider).
pub fn pad(text: &str, width: usize) -> String {
    let mut out = text.to_owned();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(cells(text))));
    out
}
