//! Terminal plumbing for the command line: printing lines and documents, made safe by the
//! library's rule for showing stored text ([`sessiondb::render::terminal`]).
//!
//! Invariant: human-readable output (everything but `--json`, `show --json` and the documents of
//! `export --format` written to a file or a pipe) goes through [`say!`], [`tell!`] or
//! [`print_document`], so that it never carries a control character from stored text raw,
//! whether or not standard output is a terminal.

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
