//! sessiondb: gptme's conversation history in SQLite, kept in step with gptme's own files.
//!
//! The crate is organised by concern:
//! - [`cause`]: an error and its causes worded as one line (every room may use it);
//! - [`model`]: `Message`, `Log` and chat ids, with gptme's semantics;
//! - [`codec`]: gptme's file formats, byte for byte;
//! - [`layout`]: gptme's directory layout — every path in a conversation, what a path is, which
//!   log gptme has loaded (the active view or the branch), which conversations are tests, the
//!   logs root and which of its directories are conversations (uses only `model`);
//! - [`store`]: the SQLite database (schema migrations, writes, queries, `doctor`'s checks);
//! - [`sync`]: moving conversations between gptme directories and the store (a whole logs root
//!   imported, [`sync::import`]; a sync pass; the loaded log of a branch as a document,
//!   [`sync::document`]);
//! - [`fs`]: file primitives (link-safe handles, atomic writes, directory transactions,
//!   gptme's lock, directory walking, watermarks, times and modes);
//! - [`ops`]: gptme's log operations (append, edit, undo, branch, …) on store and directory,
//!   and what people give them, checked and decoded ([`ops::input`]);
//! - [`render`]: Markdown and HTML documents of a conversation (code highlighted with the
//!   `highlight` feature), and how stored text is shown on a terminal ([`render::terminal`]);
//! - [`serve`] (the `serve` feature): gptme-server's v2 API over the store, for gptme's web UI.
//!
//! The `sessiondb` command line (`src/main.rs`, `src/cli/`) is part of the binary, not of this
//! library (the `cli` feature): it parses arguments, calls the library and prints the typed
//! results that come back. `tests/layering.rs` checks which room may use which.

pub mod cause;
pub mod codec;
pub mod fs;
pub mod layout;
pub mod model;
pub mod ops;
pub mod render;
pub mod secrets;
#[cfg(feature = "serve")]
pub mod serve;
pub mod store;
pub mod sync;
