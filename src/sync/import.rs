//! `sessiondb import`: every conversation directory of a logs root read whole into the store.
//!
//! Invariant: an import replaces nothing the store alone holds. A conversation with changes
//! queued in the store is skipped (re-reading it would replace them; `sessiondb sync` merges),
//! and one that fails leaves the store's copy as it was. Conversations are committed in batches
//! of about [`BATCH_BYTES`], so an interrupted import keeps what it committed. The batches are
//! committed unindexed, so that what they hold can be listed at once. On SQLite the three
//! search indexes are built after the last one, the word and substring indexes here
//! ([`crate::store::fts::catch_up`]: a search meanwhile catches up itself, or says what it
//! could not look at) while the ranking index is built on a thread of its own; the write-ahead
//! log is folded into the database at the end. On a server, whose search sets are written
//! beside the writers, the batches are smaller ([`SERVER_BATCH_BYTES`]) and a thread of their
//! own indexes each as it commits, while the next is read.
//! What happens on the way is told to a [`Progress`] callback, and what came of it all is the
//! [`ImportReport`]: the caller only shows them.

use std::path::Path;
use std::time::Instant;

use super::ingest::{self, IngestError, Outcome, ReadMode};
use super::pass::SyncError;
use crate::store::{LineWarning, Store, StoreError, WriteBatch};

/// Conversations are committed in batches of about this many bytes (by `import` and by the
/// in-phase of a sync pass): few enough commits that full-text indexing runs in bulk, small
/// enough that an interrupted import loses little work.
pub const BATCH_BYTES: u64 = 64 << 20;

/// [`BATCH_BYTES`] on a server: a batch's texts can be indexed only once it has committed, and
/// they are then indexed beside the import (on the other core, by the server), so the sooner
/// the better; a commit on a server costs about what it costs SQLite.
pub const SERVER_BATCH_BYTES: u64 = 8 << 20;

/// What an import did, in total.
#[derive(Debug, Default, Clone)]
pub struct ImportReport {
    /// Conversations read and stored.
    pub conversations: u64,
    /// Conversations that had not changed since the last import (nothing written).
    pub unchanged: u64,
    /// Conversations that could not be imported (each told as [`Progress::Failed`]).
    pub failed: u64,
    /// Subdirectories that are not conversations, and conversations with queued changes.
    pub skipped: u64,
    pub messages: u64,
    pub branches: u64,
    pub views: u64,
    pub events: u64,
    pub attachments: u64,
    pub bytes: u64,
    /// Malformed lines (kept as they are), counted beyond the ones told one by one.
    pub warnings: u64,
    /// From the start until the last batch committed: every conversation read could be listed
    /// from then on (the search indexes were built after).
    pub listable_seconds: f64,
    pub seconds: f64,
}

/// What an import tells as it goes, in order.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A subdirectory of the logs root without `conversation.jsonl`: skipped. Told before
    /// [`Progress::Found`].
    NotAConversation { dir: &'a Path },
    /// How many conversation directories will be read.
    Found { conversations: u64 },
    /// Messages sessiondb had appended to `path` that a rewrite dropped, kept as branch
    /// `kept_as`.
    Rescued { dir: &'a Path, path: &'a str, messages: u64, kept_as: &'a str },
    /// A malformed line, kept as it is.
    Warning { dir: &'a Path, warning: &'a LineWarning },
    /// Malformed lines beyond the ones told as [`Progress::Warning`].
    MoreWarnings { dir: &'a Path, count: u64 },
    /// A conversation with changes queued in the store: skipped.
    Queued { dir: &'a Path },
    /// A conversation that could not be imported; nothing of it was.
    Failed { dir: &'a Path, error: &'a IngestError },
    /// One conversation done, whatever became of it.
    Done { dir: &'a Path },
    /// Building the word and substring indexes, after every conversation was stored: `indexed`
    /// messages of `of` so far.
    Indexing { indexed: u64, of: u64 },
}

/// Imports every conversation directory of `logs_root` into `store` (see the module's
/// invariant), into the root's source (named `source`, else as the store knows the root, else
/// by default: see [`crate::store::sources`]), telling `progress` what happens. `logs_root` may
/// also be one conversation's directory (it has a `conversation.jsonl`): that conversation is
/// imported. A directory that
/// holds something, but no conversation, is [`SyncError::NotALogsRoot`]; an empty one imports
/// nothing (gptme has not written anything yet).
pub fn import_root(store: &Store, logs_root: &Path, source: Option<&str>, progress: &mut dyn FnMut(Progress<'_>)) -> Result<ImportReport, SyncError> {
    let batch_bytes = if Store::is_server(store.path()) { SERVER_BATCH_BYTES } else { BATCH_BYTES };
    import_root_in_batches(store, logs_root, source, batch_bytes, progress)
}

/// [`import_root`], committing about every `batch_bytes` of logs read instead of
/// [`BATCH_BYTES`] (or [`SERVER_BATCH_BYTES`]).
pub fn import_root_in_batches(
    store: &Store,
    logs_root: &Path,
    source: Option<&str>,
    batch_bytes: u64,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<ImportReport, SyncError> {
    let started = Instant::now();
    let (dirs, others) = if crate::layout::is_conversation_dir(logs_root) {
        // Its own name is the chat id: resolved, so that `.` or `chat/..` name it too.
        let dir = std::fs::canonicalize(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })?;
        (vec![dir], Vec::new())
    } else {
        let (dirs, others) = ingest::conversation_dirs(logs_root)?;
        let empty = std::fs::read_dir(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })?.next().is_none();
        if dirs.is_empty() && !empty {
            return Err(SyncError::NotALogsRoot { dir: logs_root.to_owned() });
        }
        (dirs, others)
    };
    let mut report = ImportReport { skipped: others.len() as u64, ..ImportReport::default() };
    for dir in &others {
        progress(Progress::NotAConversation { dir });
    }
    progress(Progress::Found { conversations: dirs.len() as u64 });
    // The root every directory read is in: a conversation's directory's parent when one was given.
    let root = match dirs.first() {
        Some(dir) if dirs.len() == 1 && others.is_empty() && crate::layout::is_conversation_dir(logs_root) => dir.parent().unwrap_or(dir).to_owned(),
        _ => std::path::absolute(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })?,
    };
    // The same directory under another path is read as the root the store knows it by.
    let known = crate::store::sources::known_root(&store.connection()?, &root)?;
    let dirs: Vec<std::path::PathBuf> =
        if known == crate::store::sources::root_key(&root) { dirs } else { dirs.iter().filter_map(|d| Some(known.join(d.file_name()?))).collect() };
    let root = known;
    // Storing the rows takes both cores (reading and decoding on one, writing on the other).
    // Then on SQLite the three indexes: the ranking index on a thread of its own, the word and
    // substring indexes here (SQLite has one writer), about as long each. A server's search
    // sets follow the batches as they commit, and what is left is indexed here and by that
    // thread at once.
    let mut follower = store.follow_indexes();
    let follow = Store::is_server(store.path());
    let mut committed = || {
        if follow {
            follower.committed();
        }
    };
    let imported = import_batches(store, &root, source, &dirs, batch_bytes, &mut report, &mut committed, progress);
    report.listable_seconds = started.elapsed().as_secs_f64();
    follower.committed();
    let indexed = imported.and_then(|()| Ok(store.catch_up_search_indexes(&mut |indexed, of| progress(Progress::Indexing { indexed, of }))?));
    drop(follower);
    indexed?;
    store.flush_wal()?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Reads `dirs`, which are in `root`, into the store in `root`'s source (see [`import_root`]), in
/// unindexed batches of about `batch_bytes`.
#[allow(clippy::too_many_arguments)]
fn import_batches(
    store: &Store,
    root: &Path,
    source: Option<&str>,
    dirs: &[std::path::PathBuf],
    batch_bytes: u64,
    report: &mut ImportReport,
    committed: &mut dyn FnMut(),
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), SyncError> {
    let mut conn = store.connection()?;
    // Scoped to the root's source: the directories read replace that source's rows only, under
    // that source's write lock.
    crate::store::sources::scope_to_root(&conn, root, source)?;
    let mut batch = WriteBatch::begin_unindexed(&mut conn)?;
    let mut in_batch = 0;
    // A conversation whose write met another writer's (on a server, hosts importing at once
    // meet over attachments they share; the server breaks a deadlock by failing one) is
    // imported again once the others are done.
    let mut todo = std::borrow::Cow::Borrowed(dirs);
    for attempt in 0..2 {
        let mut retry = Vec::new();
        ingest::import_dirs(&mut batch, &todo, ReadMode::Whole, false, &mut |batch, dir, outcome| {
            match outcome {
                Ok(Outcome::Imported(stats)) => {
                    report.conversations += 1;
                    report.messages += stats.messages;
                    report.branches += stats.branches;
                    report.views += stats.views;
                    report.events += stats.events;
                    report.attachments += stats.attachments;
                    report.bytes += stats.bytes;
                    report.warnings += stats.warnings.len() as u64 + stats.more_warnings;
                    for (path, messages, kept_as) in &stats.rescued {
                        progress(Progress::Rescued { dir, path, messages: *messages, kept_as });
                    }
                    for warning in &stats.warnings {
                        progress(Progress::Warning { dir, warning });
                    }
                    if stats.more_warnings > 0 {
                        progress(Progress::MoreWarnings { dir, count: stats.more_warnings });
                    }
                    in_batch += stats.bytes;
                    if in_batch > batch_bytes || batch.dictionary_due() {
                        batch.commit()?;
                        committed();
                        in_batch = 0;
                    }
                }
                Ok(Outcome::Unchanged) => report.unchanged += 1,
                // Re-reading it would replace its queued changes (the store refuses): `sync` merges.
                Err(IngestError::Store { source: StoreError::Queued(_), .. }) => {
                    report.skipped += 1;
                    progress(Progress::Queued { dir });
                }
                Err(error) if error.is_transient() && attempt == 0 => {
                    retry.push(dir.to_owned());
                    return Ok(());
                }
                Err(error) => {
                    report.failed += 1;
                    progress(Progress::Failed { dir, error: &error });
                }
            }
            progress(Progress::Done { dir });
            Ok(())
        })?;
        todo = std::borrow::Cow::Owned(retry);
        if todo.is_empty() {
            break;
        }
    }
    batch.finish()?;
    Ok(())
}
