//! One sync pass between a gptme logs root and the store, in both directions (or, to catch
//! up before a command, in only: see [`super::catch_up`]; then no queue goes out and no
//! debris is removed).
//!
//! First the store's queued changes go out ([`super::pending`]), conversation by conversation,
//! each under gptme's lock; then the directories' changes come in, in one write transaction
//! (committed about every 64 MB): unchanged conversations cost one `lstat` per file, grown
//! ones are extended from their watermarks ([`super::incremental`]), and new or otherwise
//! changed ones are read whole by the ordinary import, taking only complete lines. Directories
//! that are gone are marked deleted in the store, never purged. A conversation that fails is
//! reported ([`ConversationError`], its cause typed) and the pass goes on with the others.
//!
//! A pass reads one logs root into that root's source (see [`crate::store::sources`]): its
//! connection is scoped to the source before anything is read, so that the conversations it
//! looks up, replaces, marks deleted or writes out are that source's only, whatever chat ids
//! other roots share with it.
//!
//! A pass can be killed at any moment: the store commits rows and watermarks together, so the
//! next pass starts from the last commit and neither loses nor repeats a line.
//!
//! Whether a conversation has queued changes is decided inside the in-phase's write
//! transaction, never from what the out phase saw: a queue committed in between (an `append
//! --queue` racing the pass) is written out after the transaction commits, not replaced by a
//! re-read (the store refuses that anyway: `StoreError::Queued`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::acknowledged::Displaced;
use super::import::BATCH_BYTES;
use super::incremental::{self, Plan};
use super::ingest::{self, format_warning, IngestError, Outcome, ReadMode};
use super::pending::{self, Conflict};
/// What a pass fails with as a whole: the one sync error (also reachable as `sync::pass::SyncError`).
pub use super::SyncError;
use crate::fs::gptme_lock::LockError;
use crate::store::queries::{self, RootConversation};
use crate::store::{modify, sources, Store, StoreError, WriteBatch};

/// What came in from the directories.
#[derive(Debug, Default, Clone, Serialize)]
pub struct IngestSummary {
    /// Conversation directories the pass looked at, changed or not.
    pub checked: u64,
    /// Conversations that changed and were read (new ones included).
    pub conversations: u64,
    pub new_conversations: u64,
    /// Messages the store did not hold before.
    pub messages: u64,
    /// Conversations whose directory is gone (marked deleted in the store).
    pub deleted: u64,
    /// Conversations with queued store changes that a live gptme holds: neither read nor
    /// written until it lets go.
    pub skipped_locked: u64,
    /// Conversations whose files kept changing while they were read (gptme writing them):
    /// read at the next pass.
    pub changing: u64,
    pub failed: u64,
}

/// What went out to the directories.
#[derive(Debug, Default, Clone, Serialize)]
pub struct MaterialiseSummary {
    pub conversations: u64,
    /// Messages the directories gained.
    pub messages: u64,
    pub files: u64,
    /// Conversations with queued changes that a live gptme holds (left for a later pass).
    pub skipped_locked: u64,
    pub failed: u64,
}

#[derive(Debug, Serialize)]
pub struct SyncReport {
    pub logs_dir: String,
    pub dry_run: bool,
    pub ingest: IngestSummary,
    pub materialise: MaterialiseSummary,
    pub conflicts: Vec<Conflict>,
    /// Lines gptme would not load (`path:line: reason`), at most 100.
    pub warnings: Vec<String>,
    /// The conversations that failed (the pass went on with the others).
    pub errors: Vec<ConversationError>,
    /// Conversations with queued changes whose directory is gone: kept in the store until the
    /// directory is back, or until they are exported elsewhere (see [`Stranded`]).
    pub stranded: Vec<Stranded>,
    /// Messages sessiondb had appended that a rewrite by gptme dropped, without an undo or an
    /// edit to explain it: each transcript's are kept as a new branch.
    pub displaced: Vec<Displaced>,
    pub seconds: f64,
}

/// Changes queued for a conversation directory that is gone (renamed or deleted).
#[derive(Debug, Clone, Serialize)]
pub struct Stranded {
    pub chat_id: String,
    /// Where the directory was.
    pub dir: String,
}

impl SyncReport {
    /// Whether the pass changed anything (or, in a dry run, would).
    pub fn changed_anything(&self) -> bool {
        let i = &self.ingest;
        let m = &self.materialise;
        i.conversations + i.deleted + m.conversations > 0 || !self.conflicts.is_empty() || !self.displaced.is_empty()
    }
}

/// Why one conversation failed in a pass, which went on with the others. Its text is the
/// report's `error:` line (and a string in the JSON report); the cause stays typed.
#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    /// Its queued changes could not be written out; they stay queued for the next pass.
    #[error("{chat_id}")]
    WriteOut { chat_id: String, source: SyncError },
    /// Bringing it up to date from what the store holds (its watermarks) failed.
    #[error(transparent)]
    Update(IngestError),
    /// Reading it whole failed. The cause is worded inside this one's text (it comes before
    /// the sentence's end), so it is not also a `source`.
    #[error("{}; nothing of this conversation was read", crate::cause::chain(.0))]
    Read(IngestError),
}

impl Serialize for ConversationError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&crate::cause::chain(self))
    }
}

/// What became of one conversation's queued changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteOut {
    /// Written (or, in a dry run, counted).
    Done,
    /// A live gptme holds the conversation: still queued.
    Locked,
    /// Writing failed (a full disk, say): still queued, and the error is in the report. Never
    /// counted as locked.
    Failed,
}

/// Writes the queued changes of `chat_id` out (or, in a dry run, counts them) into the report.
fn write_out(conn: &mut crate::store::Connection, chat_id: &str, dry_run: bool, report: &mut SyncReport) -> WriteOut {
    match pending::materialise_pending(conn, chat_id, dry_run) {
        Ok(m) => {
            report.materialise.conversations += 1;
            report.materialise.files += m.files;
            report.materialise.messages += m.messages;
            report.conflicts.extend(m.conflicts);
            WriteOut::Done
        }
        Err(SyncError::Lock(LockError::Held { .. } | LockError::HeldBy { .. } | LockError::Busy { .. })) => {
            report.materialise.skipped_locked += 1;
            WriteOut::Locked
        }
        Err(e) => {
            report.materialise.failed += 1;
            report.errors.push(ConversationError::WriteOut { chat_id: chat_id.to_owned(), source: e });
            WriteOut::Failed
        }
    }
}

/// The conversations of this root whose directory is gone while changes are queued for it
/// (renamed or deleted under gptme): nothing can be written until it is back.
fn stranded_queues(stored: &HashMap<String, RootConversation>, on_disk: &HashMap<String, PathBuf>, root: &Path, in_scope: impl Fn(&str) -> bool) -> Vec<Stranded> {
    let mut out: Vec<Stranded> = stored
        .iter()
        .filter(|(chat_id, s)| s.queued && in_scope(chat_id) && !on_disk.contains_key(*chat_id))
        .map(|(chat_id, _)| Stranded { chat_id: chat_id.clone(), dir: root.join(chat_id).display().to_string() })
        .collect();
    out.sort_by(|a, b| a.chat_id.cmp(&b.chat_id));
    out
}

/// Removes what an interrupted sessiondb write left in `dir`, when the conversation can be
/// locked at once (never waiting, so that a gptme starting now is not kept out for long).
/// Left for a later pass otherwise. Returns whether anything was removed.
fn clear_debris(dir: &Path) -> bool {
    let Ok(handle) = crate::fs::nofollow::Dir::open(dir) else { return false };
    match crate::fs::gptme_lock::try_acquire(&handle) {
        Ok(_lock) => crate::fs::atomic::remove_debris(&handle).is_ok_and(|removed| removed > 0),
        Err(_) => false,
    }
}

const MAX_WARNINGS: usize = 100;

/// Runs one pass over `logs_root`, or only over the conversations named in `only` (watch mode
/// passes the ones it saw change), into the root's source: the one named `source` (made when
/// new), else the one the store has for the root, else a new one named by default
/// ([`crate::store::sources::default_name`]). With `dry_run`, reports what the pass would do
/// and changes nothing, in the store or on disk.
///
/// A pass the store gave up for meeting another writer (hosts syncing their own sources into
/// one server at once: [`SyncError::is_transient`]) runs again, up to [`ATTEMPTS`] times in
/// all: what the first committed stays, and the next reads on from there.
pub fn sync_pass(store: &Store, logs_root: &Path, source: Option<&str>, only: Option<&HashSet<String>>, dry_run: bool) -> Result<SyncReport, SyncError> {
    let mut attempt = 1;
    loop {
        match pass(store, logs_root, source, only, dry_run, Direction::Both) {
            Err(e) if e.is_transient() && attempt < ATTEMPTS => attempt += 1,
            done => return done,
        }
    }
}

/// How many times a pass is tried when the store gives it up for meeting another writer (a
/// conversation in it is tried twice, as one whose files vanish is).
const ATTEMPTS: u32 = 3;

/// A pass over conversations `only` of `logs_root` that only reads their directories in (into
/// the root's source, named `source` when it is new): see [`super::catch_up`] and
/// [`super::follow`].
pub(super) fn pass_in(store: &Store, logs_root: &Path, source: Option<&str>, only: &HashSet<String>) -> Result<SyncReport, SyncError> {
    pass(store, logs_root, source, Some(only), false, Direction::In)
}

/// Which way a pass goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Queued changes out, then the directories' changes in (`sync`).
    Both,
    /// The directories' changes in only ([`super::catch_up`]).
    In,
}

fn pass(
    store: &Store,
    logs_root: &Path,
    source: Option<&str>,
    only: Option<&HashSet<String>>,
    dry_run: bool,
    direction: Direction,
) -> Result<SyncReport, SyncError> {
    let started = Instant::now();
    let root = std::path::absolute(logs_root).map_err(|source| IngestError::Io { path: logs_root.to_owned(), source })?;
    let root = sources::known_root(&store.connection()?, &root)?;
    let in_scope = |chat_id: &str| only.is_none_or(|o| o.contains(chat_id));
    let mut report = SyncReport {
        logs_dir: root.display().to_string(),
        dry_run,
        ingest: IngestSummary::default(),
        materialise: MaterialiseSummary::default(),
        conflicts: Vec::new(),
        warnings: Vec::new(),
        errors: Vec::new(),
        stranded: Vec::new(),
        displaced: Vec::new(),
        seconds: 0.0,
    };
    // Watch passes name their conversations: look at just those, not the whole root.
    let dirs = match only {
        None => ingest::conversation_dirs(&root)?.0,
        Some(only) => only
            .iter()
            .map(|name| root.join(name))
            .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) && crate::layout::is_conversation_dir(d))
            .collect(),
    };
    let on_disk: HashMap<String, PathBuf> =
        dirs.into_iter().filter_map(|d| Some((d.file_name()?.to_str()?.to_owned(), d))).filter(|(name, _)| in_scope(name)).collect();
    report.ingest.checked = on_disk.len() as u64;
    let mut conn = store.connection()?;
    // Scoped before any write transaction begins, which then takes that source's write lock
    // alone. A root the store has no source for yet has no stored conversations: its source is
    // made first, in a transaction of its own (in a dry run, in the in-phase's, which is rolled
    // back, so that a dry run makes none).
    if dry_run {
        if let Some(known) = sources::find(&conn, &root, source)? {
            conn.scope_to(known.id)?;
        }
    } else {
        sources::scope_to_root(&conn, &root, source)?;
    }

    // Out: queued store changes, each conversation in its own transaction.
    let stored = queries::conversations_in(&conn, &root)?;
    // What became of each queue the out phase tried (the in phase must not read those again).
    let mut tried: HashMap<String, WriteOut> = HashMap::new();
    let mut queued: Vec<&String> = stored.iter().filter(|(c, s)| direction == Direction::Both && s.queued && on_disk.contains_key(*c)).map(|(c, _)| c).collect();
    queued.sort();
    for chat_id in queued {
        tried.insert(chat_id.clone(), write_out(&mut conn, chat_id, dry_run, &mut report));
    }
    report.stranded = stranded_queues(&stored, &on_disk, &root, in_scope);

    // In: what the directories gained, in one transaction. The stored conversations are read
    // inside it: another process (a second watcher) may have replaced rows since.
    let mut batch = WriteBatch::begin(&mut conn)?;
    let source = sources::register(batch.conn(), &root, source)?;
    batch.conn().scope_to(source.id)?;
    let stored = queries::conversations_in(batch.conn(), &root)?;
    let acknowledged = crate::store::acknowledged::chat_ids(batch.conn())?;
    let mut full = Vec::new();
    // Conversations queued while this pass ran: written out once the pass has committed.
    let mut late: Vec<String> = Vec::new();
    let mut names: Vec<&String> = on_disk.keys().collect();
    names.sort();
    for name in names {
        let dir = &on_disk[name];
        let Some(s) = stored.get(name) else {
            report.ingest.new_conversations += 1;
            full.push(dir.clone());
            continue;
        };
        // Decided inside the write transaction: a queue committed after the out phase looked
        // (an `append --queue` racing this pass) must not be replaced by a re-read.
        // (`stored` was read inside this transaction, so its `queued` is the queue as it stands.)
        if s.queued {
            match tried.get(name) {
                Some(WriteOut::Locked) if !dry_run => report.ingest.skipped_locked += 1,
                Some(_) => {} // failed (reported), or a dry run
                None if !dry_run && direction == Direction::Both => late.push(name.clone()),
                None => {}
            }
            continue;
        }
        // A message sessiondb acknowledged that the store no longer holds (a re-read raced a
        // gptme rewriting the directory): read it whole, which judges the directory again.
        if acknowledged.contains(name) && crate::store::acknowledged::any_missing_from_store(batch.conn(), name)? {
            full.push(dir.clone());
            continue;
        }
        let known = incremental::Known { fingerprint: &s.fingerprint, dir_mtimes: &s.dir_mtimes };
        let outcome = incremental::plan(batch.conn(), s.id, dir, Some(known)).and_then(|planned| {
            // Removing files moves their directories' mtimes: plan again, so that the mtimes
            // recorded are the ones the directory has from now on.
            let planned = if planned.debris && !dry_run && direction == Direction::Both && clear_debris(dir) {
                incremental::plan(batch.conn(), s.id, dir, Some(known))?
            } else {
                planned
            };
            planned.record_dir_mtimes(batch.conn(), s.id).map_err(|source| IngestError::Store { path: dir.clone(), source })?;
            Ok((planned.plan, planned.fingerprint))
        });
        let outcome = outcome.and_then(|(plan, fingerprint)| match plan {
            Plan::Unchanged => {
                if fingerprint != s.fingerprint || s.deleted {
                    modify::mark_unchanged(batch.conn(), s.id, &fingerprint).map_err(|source| IngestError::Store { path: dir.clone(), source })?;
                }
                Ok(Some(None))
            }
            Plan::Grow(grown) => incremental::apply_growth(&mut batch, s.id, dir, &grown, &fingerprint).map(|o| o.map(Some)),
            Plan::Full => Ok(None),
        });
        match outcome {
            Ok(Some(None)) => {}
            Ok(Some(Some(stats))) if stats.bytes == 0 => {} // only an unfinished line, still unfinished
            Ok(Some(Some(stats))) => {
                report.ingest.conversations += 1;
                report.ingest.messages += stats.new_messages;
            }
            Ok(None) => full.push(dir.clone()),
            Err(e) if e.vanished() || e.is_transient() => full.push(dir.clone()), // read whole, below (with a retry)
            Err(e) => {
                report.ingest.failed += 1;
                report.errors.push(ConversationError::Update(e));
            }
        }
    }
    // gptme writes through temporary files renamed into place, so a file listed a moment ago
    // may be gone when it is opened: such a conversation is read again at once, and if it is
    // still changing, left for the next pass (not a failure). One whose write met another
    // writer's (a server's deadlock, broken by failing one of them) is written again at once.
    let mut batch_bytes = 0;
    // The indexes built beside a writer (SQLite's ranking index, a server's search sets) follow
    // the batches as they commit (many when a root is read in whole: a first sync, `serve`'s
    // first start), on the other core.
    let mut follower = store.follow_indexes();
    for attempt in 0..2 {
        let mut retry = Vec::new();
        ingest::import_dirs(&mut batch, &full, ReadMode::CompleteLines, dry_run, &mut |batch, dir, outcome| {
            match outcome {
                Ok(Outcome::Imported(stats)) => {
                    report.ingest.conversations += 1;
                    let chat_id = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    for (path, messages, kept_as) in &stats.rescued {
                        let kept_as = Some(kept_as.clone());
                        report.displaced.push(Displaced { chat_id: chat_id.clone(), path: path.clone(), messages: *messages, kept_as });
                    }
                    report.ingest.messages += stats.new_messages;
                    for w in &stats.warnings {
                        if report.warnings.len() < MAX_WARNINGS {
                            report.warnings.push(format_warning(dir, w));
                        }
                    }
                    batch_bytes += stats.bytes;
                    if (batch_bytes > BATCH_BYTES || batch.dictionary_due()) && !dry_run {
                        batch.commit()?;
                        follower.committed();
                        batch_bytes = 0;
                    }
                }
                Ok(Outcome::Unchanged) => {}
                Err(IngestError::Store { source: StoreError::Queued(chat_id), .. }) if direction == Direction::Both => late.push(chat_id),
                Err(IngestError::Store { source: StoreError::Queued(_), .. }) => {} // the store's copy stands until `sync`
                Err(e) if (e.vanished() || e.is_transient()) && attempt == 0 => retry.push(dir.to_owned()),
                Err(e) if e.vanished() => report.ingest.changing += 1,
                Err(e) => {
                    report.ingest.failed += 1;
                    report.errors.push(ConversationError::Read(e));
                }
            }
            Ok(())
        })?;
        full = retry;
        if full.is_empty() {
            break;
        }
    }

    // Gone: marked, kept until `sessiondb rm`. An archived conversation's directory is gone on
    // purpose (`sessiondb archive`).
    for (chat_id, s) in &stored {
        if in_scope(chat_id) && !s.deleted && !s.archived && !on_disk.contains_key(chat_id) {
            modify::mark_deleted(batch.conn(), s.id)?;
            report.ingest.deleted += 1;
        }
    }
    if dry_run {
        drop(batch); // rolls back
    } else {
        batch.finish()?;
    }
    // Queued while the pass ran: out now (the directory is read back as it is written).
    late.sort();
    late.dedup();
    for chat_id in &late {
        write_out(&mut conn, chat_id, false, &mut report);
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
