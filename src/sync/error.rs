//! The one error of changing conversations: a sync pass ([`super::pass`]), writing queued
//! changes out ([`super::pending`]) and every live operation (`ops`, which calls it
//! `OpsError`) fail with [`SyncError`].
//!
//! Invariant: every cause stays typed. A variant wrapping another error prints exactly that
//! error (`transparent`, its source forwarded), so what a user reads is the message of the
//! layer that failed; only [`SyncError::Invalid`] is free text, and it is a request refused,
//! never a flattened cause or a path. Paths are `PathBuf`s, printed with `display()`.

use std::path::PathBuf;

use super::ingest::IngestError;
use super::materialise::MaterialiseError;
use crate::fs::dirtx::DirError;
use crate::fs::gptme_lock::LockError;
use crate::model::ChatIdError;
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
    /// A request the conversation cannot satisfy (an index out of range, a view that does not
    /// exist); the text says which.
    #[error("{0}")]
    Invalid(String),
    /// A name gptme would refuse for a conversation, branch or view (`what` says which).
    #[error("invalid {what} {name:?}: {reason}")]
    InvalidName {
        what: &'static str,
        name: String,
        #[source]
        reason: ChatIdError,
    },
    #[error("{dir}: the conversation directory is gone (run `sessiondb import`)")]
    DirectoryGone { dir: PathBuf },
    /// The logs root a new conversation was to go into is not a directory (an unmounted disk,
    /// a mistyped path): it is never created on the way.
    #[error("{root}: the logs root is not there (a disk not mounted?); nothing was written")]
    NoLogsRoot { root: PathBuf },
    #[error("{dir}: a conversation with this id exists already")]
    Exists { dir: PathBuf },
    /// `cp -a` of a directory a fork copies exited with a failure.
    #[error("copying {path} failed")]
    CopyFailed { path: PathBuf },
    #[error(
        "{chat_id}: it has changes queued in the store that its directory {dir} does not hold yet ({where_}); removing it would discard them. \
             Write them out first (`sessiondb sync`, or `sessiondb export --to DIR {chat_id}` to keep a copy elsewhere), or pass --force to discard them"
    )]
    QueuedChanges { chat_id: String, dir: PathBuf, where_: &'static str },
    /// `clean` chose the conversation by what the store held, and its directory changed since
    /// the store last read it (gptme wrote to it): it may no longer be empty.
    #[error("{chat_id}: its directory {dir} changed since the store last read it, so it may not be empty any more; left as it is (run `sessiondb sync`, then clean again)")]
    ChangedSinceRead { chat_id: String, dir: PathBuf },
    /// `archive` found the directory other than the store's copy of it, at `path` (relative to
    /// `dir`; empty for the directory itself): removing it would lose what the store never read.
    #[error(
        "{chat_id}: {} {what}, so the store does not hold the directory byte for byte; nothing was archived \
         (run `sessiondb sync` to read it in, then archive again)",
        if path.is_empty() { dir.display().to_string() } else { dir.join(path).display().to_string() }
    )]
    NotAsStored { chat_id: String, dir: PathBuf, path: String, what: &'static str },
    /// An operation that writes a conversation's directory, on one archived out of its logs root.
    #[error("{chat_id} is archived: its directory is out of the logs root, kept whole in the store (run `sessiondb restore {chat_id}` first)")]
    Archived { chat_id: String },
    /// `restore` of a conversation that is not archived.
    #[error("{chat_id} is not archived (its directory is {dir})")]
    NotArchived { chat_id: String, dir: PathBuf },
    /// A directory given as the logs root that holds things, but no conversation: not a logs
    /// root (a conversation's `branches/`, say, or the wrong folder).
    #[error(
        "{dir}: no conversation here; give gptme's logs root, the directory that holds one directory per conversation \
         (each with a conversation.jsonl), or one conversation's directory"
    )]
    NotALogsRoot { dir: PathBuf },
}

impl SyncError {
    /// Whether the store gave up a write only for meeting another writer
    /// ([`StoreError::is_transient`]): the same work again usually succeeds.
    pub fn is_transient(&self) -> bool {
        match self {
            SyncError::Store(e) => e.is_transient(),
            SyncError::Ingest(e) => e.is_transient(),
            _ => false,
        }
    }
}
