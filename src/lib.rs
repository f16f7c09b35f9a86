//! sessiondb: gptme's conversation history in SQLite, kept in step with gptme's own files.
//!
//! The crate is organised by concern:
//! - [`model`]: `Message`, `Log` and chat ids, with gptme's semantics;
//! - [`codec`]: gptme's file formats, byte for byte;
//! - [`layout`]: gptme's directory layout — every path in a conversation, what a path is, which
//!   log gptme has loaded (the active view or the branch), which conversations are tests, the
//!   logs root and which of its directories are conversations (uses only `model`);
//! - [`store`]: the SQLite database (schema migrations, writes, queries);
//! - [`sync`]: moving conversations between gptme directories and the store;
//! - [`fs`]: file primitives (link-safe handles, atomic writes, directory transactions,
//!   gptme's lock, directory walking, watermarks, times and modes);
//! - [`ops`]: gptme's log operations (append, edit, undo, branch, …) on store and directory;
//! - [`render`]: Markdown and HTML documents of a conversation, and how stored text is shown
//!   on a terminal ([`render::terminal`]).
//!
//! The `sessiondb` command line (`src/main.rs`, `src/cli/`) is part of the binary, not of this
//! library: it parses arguments, calls the library and prints what comes back.

pub mod codec;
pub mod fs;
pub mod layout;
pub mod model;
pub mod ops;
pub mod render;
pub mod store;
pub mod sync;
