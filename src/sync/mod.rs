//! Moving conversations between gptme's directories and the store: [`ingest`] reads
//! directories in ([`import`] a whole logs root, [`pass`] both ways), [`materialise`] writes
//! them back out, both through the link-safe filesystem primitives of [`crate::fs`], under
//! gptme's own process lock. Everything that changes a conversation fails with the one
//! [`SyncError`] ([`error`]).

pub mod acknowledged;
pub mod catch_up;
pub mod document;
pub mod error;
pub mod follow;
pub mod import;
pub mod incremental;
pub mod ingest;
pub mod materialise;
pub mod pass;
pub mod pending;
pub mod status;
pub mod watch;

pub use error::SyncError;
