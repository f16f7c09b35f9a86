//! The one error of changing conversations: a sync pass ([`super::pass`]), writing queued
//! changes out ([`super::pending`]) and every live operation (`ops`, which calls it
//! `OpsError`) fail with [`SyncError`].
//!
//! Invariant: every cause stays typed. A variant wrapping another error prints exactly that
//! error (`transparent`, its source forwarded), so what a user reads is the message of the
//! layer that failed; only [`SyncError::Invalid`] carries text, and it is a request refused,
//! never a flattened cause. Paths are `PathBuf`s, printed with `display()`.

use std::path::PathBuf;

use super::ingest::IngestError;
use super::materialise::MaterialiseError;
use crate::fs::dirtx::DirError;
use crate::fs::gptme_lock::LockError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Materialise(#[from] MaterialiseError),
    /// A request the conversation cannot satisfy (a name gptme would refuse, an index out of
    /// range); the text says which.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "{chat_id}: it has changes queued in the store that its directory {dir} does not hold yet ({where_}); removing it would discard them. \
             Write them out first (`sessiondb sync`, or `sessiondb export --to DIR {chat_id}` to keep a copy elsewhere), or pass --force to discard them"
    )]
    QueuedChanges { chat_id: String, dir: PathBuf, where_: &'static str },
}
