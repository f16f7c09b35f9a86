//! File primitives: everything sessiondb does to a file or directory goes through here.
//!
//! - [`nofollow`]: directory handles that resolve every path without following a link, so no
//!   write lands outside its target (and the raw `stat` of a handle);
//! - [`atomic`]: whole-file replacement through a temporary file, for paths the user names;
//! - [`dirtx`]: a directory transaction that undoes its changes unless committed;
//! - [`gptme_lock`]: gptme's own per-conversation process lock;
//! - [`walk`]: listing a conversation directory and fingerprinting what it holds;
//! - [`watermark`]: how far a file was read, and whether it has only grown since;
//! - [`meta`]: times and permission bits, computed one way everywhere.
//!
//! Nothing here knows about the store or gptme's formats: this room depends on `std` and the
//! system only.

pub mod atomic;
pub mod dirtx;
pub mod gptme_lock;
pub mod meta;
pub mod nofollow;
pub mod walk;
pub mod watermark;
