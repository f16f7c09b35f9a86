//! A conversation read out of the store as gptme has it loaded: its messages (for `edit`,
//! `next`, `recover` and `export --format toml`), or a readable document of them
//! (`export --format markdown|html`, rendered by [`crate::render`]).
//!
//! Invariant: what is read is the log gptme has loaded for the branch — the active view on
//! main when one is active, else the branch ([`modify::loaded_doc`]). A document's messages are
//! the ones gptme holds in memory (a message without a timestamp has its file's mtime), streamed
//! from the store to the output, so memory does not grow with the conversation; a failed read
//! of the store is reported as itself, and a document written to a file leaves no file then
//! (the file is written atomically; a link there is replaced, not followed). A document shows
//! secrets as its caller says ([`Shown`]: masked unless `--show-secrets`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::codec::normalise::normalise_for_rewrite;
use crate::model::Message;
use crate::render::{self, Format};
use crate::secrets::Shown;
use crate::store::modify::{self, Doc};
use crate::store::{queries, Connection, StoreError};

/// Why a document could not be written.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the document failed: to the file `path`, or to the writer given (`None`).
    #[error("{}", path.as_ref().map_or("standard output".into(), |p| p.display().to_string()))]
    Write { path: Option<PathBuf>, source: io::Error },
}

/// The document of the log gptme has loaded for `branch` of `chat_id`, and the conversation's
/// row id.
pub fn loaded(conn: &Connection, chat_id: &str, branch: &str) -> Result<(i64, Doc), StoreError> {
    let conv = modify::load_conversation(conn, chat_id)?;
    let doc = modify::loaded_doc(conn, conv.id, branch)?.ok_or_else(|| StoreError::NoBranch { chat_id: chat_id.to_owned(), branch: branch.to_owned() })?;
    Ok((conv.id, doc))
}

/// The messages of the log gptme has loaded for `branch`, as stored: what `edit` replaces,
/// `export --format toml` writes, `next` decides on and `recover` compares with.
pub fn loaded_messages(conn: &Connection, chat_id: &str, branch: &str) -> Result<Vec<Message>, StoreError> {
    let (_, doc) = loaded(conn, chat_id, branch)?;
    queries::with_document_lines(conn, doc.id, 0, |lines| lines.filter_map(|l| l.message).collect())
}

/// The mtime gptme sees on document `path` of a conversation, in epoch seconds (0 when the
/// store has no entry for it): what a message without a timestamp gets as its time.
pub fn held_mtime(conn: &Connection, conversation_id: i64, path: &str) -> f64 {
    let mtime_ns = queries::entry_mtime(conn, conversation_id, path).unwrap_or(0);
    mtime_ns.div_euclid(1_000_000_000) as f64 + mtime_ns.rem_euclid(1_000_000_000) as f64 * 1e-9
}

/// Renders `doc` to `out`, message by message from the store. The outer error is the store's,
/// the inner one the output's.
fn stream(
    conn: &Connection,
    chat_id: &str,
    (conversation_id, doc): &(i64, Doc),
    format: Format,
    shown: Shown,
    out: &mut dyn Write,
) -> Result<io::Result<()>, StoreError> {
    // As gptme holds them: a message without a timestamp has its file's mtime.
    let mtime = held_mtime(conn, *conversation_id, &doc.path);
    queries::with_document_lines(conn, doc.id, 0, |lines| {
        let messages = lines.filter_map(|l| l.message).map(|m| {
            let mut m = normalise_for_rewrite(&m, mtime);
            shown.apply(&mut m.content);
            m
        });
        render::document(format, chat_id, messages, out)
    })
}

/// Writes the loaded log of `branch` as a document in `format` to `out`, and flushes it.
pub fn write_document(conn: &Connection, chat_id: &str, branch: &str, format: Format, shown: Shown, out: &mut dyn Write) -> Result<(), DocumentError> {
    let loaded = loaded(conn, chat_id, branch)?;
    stream(conn, chat_id, &loaded, format, shown, out)?.and_then(|()| out.flush()).map_err(|source| DocumentError::Write { path: None, source })
}

/// Writes the loaded log of `branch` as a document in `format` to the file `path`, atomically
/// ([`write_file`]).
pub fn write_document_file(conn: &Connection, chat_id: &str, branch: &str, format: Format, shown: Shown, path: &Path) -> Result<(), DocumentError> {
    let loaded = loaded(conn, chat_id, branch)?;
    let mut failed = None;
    let written = write_file(path, |out| {
        stream(conn, chat_id, &loaded, format, shown, out).unwrap_or_else(|e| {
            let reason = io::Error::other(crate::cause::chain(&e));
            failed = Some(e);
            Err(reason)
        })
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    written
}

/// Writes a document (`write`'s output: `export --format toml`'s text, say) to the file `path`,
/// atomically. As any program's `open(O_CREAT)` would: a new file under the umask; a file
/// being replaced keeps its mode; a link at `path` is replaced, not followed.
pub fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), DocumentError> {
    let mode = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => crate::fs::meta::mode_bits(&m),
        _ => crate::fs::meta::new_file_mode(),
    };
    crate::fs::atomic::write_atomic(path, mode, crate::fs::meta::now_ns(), write).map_err(|source| DocumentError::Write { path: Some(path.to_owned()), source })
}
