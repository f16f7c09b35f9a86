//! Following a logs root between catch-ups, for a long-lived reader (the MCP server) that must
//! answer with everything gptme wrote before each question, without walking every conversation
//! directory for each one.
//!
//! Filesystem notifications (inotify on Linux, through `notify`) name the conversations that
//! changed; a catch-up reads in just those ([`super::pass`], in only). The notifications are
//! asynchronous, so before each catch-up a *fence* is written: a file created in a private
//! directory watched by the same watcher. One inotify instance queues its events in the order
//! they happened, so once the fence's event has come through, so has the event of every write
//! that finished before the catch-up began — gptme's last append included. Whenever that cannot
//! be relied on — the first catch-up, notifications unavailable or lost (a queue overflow), a
//! fence that does not come through within [`FENCE_WAIT`], a catch-up that failed, and every
//! [`FULL_EVERY`] in any case — the whole root is caught up instead ([`super::catch_up::catch_up_root`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

use super::catch_up::catch_up_root;
use super::pass::{pass_in, SyncReport};
use super::watch::conversation_of;
use super::SyncError;
use crate::store::Store;

/// How long a fence may take to come through before the whole root is caught up instead.
const FENCE_WAIT: Duration = Duration::from_secs(2);
/// The longest time between two catch-ups of the whole root (a safety net for anything the
/// notifications did not say).
const FULL_EVERY: Duration = Duration::from_secs(60);

/// What the notifications said since the last catch-up, folded as they arrive (on the
/// watcher's thread), so that memory holds one name per changed conversation however long the
/// server waits between questions.
#[derive(Default)]
struct Seen {
    changed: HashSet<String>,
    /// Some notification was lost (a queue overflow) or failed: only a walk of the whole root
    /// can say what changed.
    lost: bool,
    /// The highest fence whose event has come through.
    fence: u64,
}

/// The watcher, the fences' directory and what the notifications said.
struct Watch {
    _watcher: notify::RecommendedWatcher,
    fences: tempfile::TempDir,
    seen: Arc<(Mutex<Seen>, Condvar)>,
}

/// A logs root followed between catch-ups (see the module's documentation).
pub struct Follower {
    root: PathBuf,
    /// `None` when notifications are unavailable: every catch-up is then of the whole root.
    watch: Option<Watch>,
    fences: u64,
    /// When the whole root was last caught up (`None`: not yet, or it must be again).
    last_full: Option<Instant>,
    /// The source's name, when given (see [`Follower::with_source`]).
    source: Option<String>,
}

impl Follower {
    /// Starts following `logs_root`. Notifications that cannot be set up leave a follower that
    /// catches up the whole root every time.
    pub fn new(logs_root: &Path) -> Follower {
        let root = std::path::absolute(logs_root).unwrap_or_else(|_| logs_root.to_owned());
        let watch = (|| {
            let fences = tempfile::Builder::new().prefix("sessiondb-fence-").tempdir().ok()?;
            let seen = Arc::new((Mutex::new(Seen::default()), Condvar::new()));
            let (fold_root, fold_fences, fold_seen) = (root.clone(), fences.path().to_owned(), seen.clone());
            let fold = move |event: notify::Result<notify::Event>| {
                let (lock, arrived) = &*fold_seen;
                let mut seen = lock.lock().unwrap_or_else(|e| e.into_inner());
                match event {
                    // Reads (the catch-ups' own among them) change nothing.
                    Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => {}
                    Ok(e) => {
                        seen.lost |= e.need_rescan();
                        for path in &e.paths {
                            match path.strip_prefix(&fold_fences).ok().and_then(|n| n.to_str()?.parse::<u64>().ok()) {
                                Some(fence) => seen.fence = seen.fence.max(fence),
                                None => seen.changed.extend(conversation_of(&fold_root, path)),
                            }
                        }
                    }
                    Err(_) => seen.lost = true,
                }
                arrived.notify_all();
            };
            // Links are not followed: a conversation's `workspace` link leads into a project,
            // whose edits are not the conversation's.
            let mut watcher = notify::RecommendedWatcher::new(fold, notify::Config::default().with_follow_symlinks(false)).ok()?;
            watcher.watch(fences.path(), RecursiveMode::NonRecursive).ok()?;
            watcher.watch(&root, RecursiveMode::Recursive).ok()?;
            Some(Watch { _watcher: watcher, fences, seen })
        })();
        Follower { root, watch, fences: 0, last_full: None, source: None }
    }

    /// Reads the root into the source named `source` (`None`: the one the store has for the
    /// root, else one named by default; see [`crate::store::sources`]).
    pub fn with_source(mut self, source: Option<String>) -> Follower {
        self.source = source;
        self
    }

    /// Whether notifications are in use (else every catch-up reads the whole root).
    pub fn notified(&self) -> bool {
        self.watch.is_some()
    }

    /// Reads into the store what gptme changed under the root since the last catch-up: the
    /// conversations notifications named, or the whole root when they cannot be relied on (see
    /// the module's documentation). `None` when nothing was read.
    pub fn catch_up(&mut self, store: &Store) -> Result<Option<SyncReport>, SyncError> {
        let changed = self.changed();
        let full_due = self.last_full.is_none_or(|t| t.elapsed() >= FULL_EVERY);
        let outcome = match changed {
            Some(names) if !full_due => {
                if names.is_empty() {
                    return Ok(None);
                }
                pass_in(store, &self.root, self.source.as_deref(), &names).map(Some)
            }
            _ => {
                self.last_full = Some(Instant::now());
                catch_up_root(store, &self.root, self.source.as_deref())
            }
        };
        if outcome.is_err() {
            self.last_full = None; // what the notifications named is taken: read everything next time
        }
        outcome
    }

    /// The conversations notifications named since the last call, up to a fence written now
    /// (taken: the next call starts afresh); `None` when they cannot be relied on.
    fn changed(&mut self) -> Option<HashSet<String>> {
        let watch = self.watch.as_ref()?;
        self.fences += 1;
        let fence = watch.fences.path().join(self.fences.to_string());
        let written = std::fs::File::create(&fence).is_ok();
        let _ = std::fs::remove_file(&fence);
        let (lock, arrived) = &*watch.seen;
        let seen = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (mut seen, waited) = arrived.wait_timeout_while(seen, FENCE_WAIT, |s| s.fence < self.fences).unwrap_or_else(|e| e.into_inner());
        let Seen { changed, lost, .. } = std::mem::take(&mut *seen);
        seen.fence = self.fences.max(seen.fence);
        (written && !waited.timed_out() && !lost).then_some(changed)
    }
}
