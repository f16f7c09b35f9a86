//! `sync --watch`: following a logs root as gptme writes it.
//!
//! Filesystem notifications (inotify on Linux) name the conversation directories that changed;
//! after a short pause to let a burst of writes settle, a sync pass runs over just those. A full
//! pass runs at start and then every `rescan` interval, so that anything the notifications
//! missed (an overflowing event queue, a filesystem without notifications) is still picked up.
//! When notifications cannot be set up at all, rescanning alone carries on. Each pass opens the
//! database afresh, so a watcher survives its write-ahead log being deleted, and any number of
//! watchers can follow one root (their passes take turns on the database's write lock).

use std::collections::HashSet;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

use super::pass::{sync_pass, SyncReport};
use super::SyncError;
use crate::store::{Store, StoreError};

/// How long a burst of notifications may go on before the pass runs.
const SETTLE: Duration = Duration::from_millis(5);
/// How often the stop flag is looked at while nothing happens.
const TICK: Duration = Duration::from_millis(200);

/// What the watch loop tells its caller.
pub enum WatchEvent<'a> {
    /// A pass ran (`full`: over the whole root).
    Pass { report: &'a SyncReport, full: bool },
    /// Notifications are unavailable or lost some events; rescanning covers for them.
    Degraded(String),
    /// A pass failed as a whole (the store could not be written, say); the loop goes on.
    Failed(SyncError),
}

/// The conversation (first path component under `root`) that `path` belongs to.
pub(super) fn conversation_of(root: &Path, path: &Path) -> Option<String> {
    match path.strip_prefix(root).ok()?.components().next()? {
        Component::Normal(name) => name.to_str().map(str::to_owned),
        _ => None,
    }
}

/// Filesystem notifications on a logs root, set up before the pass that first reads it: a
/// change made during or after that pass is then among them, so that the loop
/// ([`watch_notified`]) need not read the whole root again to be sure of it.
pub struct Notifications {
    root: std::path::PathBuf,
    events: mpsc::Receiver<notify::Result<notify::Event>>,
    /// Dropped, it stops the notifications; `None` when they could not be set up.
    watcher: Option<notify::RecommendedWatcher>,
    /// Why there are none, when there are none, said as the loop starts.
    degraded: Option<String>,
}

impl Notifications {
    /// Sets up notifications on `logs_root` and everything under it (rescanning every `rescan`
    /// will cover for them when they cannot be had).
    pub fn on(logs_root: &Path, rescan: Duration) -> Notifications {
        let root = std::path::absolute(logs_root).unwrap_or_else(|_| logs_root.to_owned());
        let (tx, events) = mpsc::channel();
        let mut watcher = notify::recommended_watcher(move |event| {
            let _ = tx.send(event);
        })
        .ok();
        let mut degraded = None;
        if let Some(w) = watcher.as_mut() {
            if let Err(e) = w.watch(&root, RecursiveMode::Recursive) {
                degraded = Some(format!("no filesystem notifications ({e}); rescanning every {} s", rescan.as_secs()));
                watcher = None;
            }
        } else {
            degraded = Some(format!("no filesystem notifications; rescanning every {} s", rescan.as_secs()));
        }
        Notifications { root, events, watcher, degraded }
    }
}

/// Syncs `logs_root` (into source `source`: see [`sync_pass`]) until `stop` is set, calling
/// `on_event` after every pass, the first a full one. Ends with [`StoreError::Moved`] when the
/// database file is no longer the one `store` opened (a pass would otherwise write to another
/// file, or make one).
pub fn watch(
    store: &Store,
    logs_root: &Path,
    source: Option<&str>,
    rescan: Duration,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(WatchEvent),
) -> Result<(), SyncError> {
    watch_notified(store, Notifications::on(logs_root, rescan), source, rescan, true, stop, on_event)
}

/// [`watch`] with notifications set up before (`notes`): `full_first` false when a full pass
/// ran after they were, so that the loop starts from them (`sessiondb serve`, which syncs the
/// root before it answers).
pub fn watch_notified(
    store: &Store,
    notes: Notifications,
    source: Option<&str>,
    rescan: Duration,
    full_first: bool,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(WatchEvent),
) -> Result<(), SyncError> {
    let Notifications { root, events: rx, watcher, degraded } = notes;
    if let Some(why) = degraded {
        on_event(WatchEvent::Degraded(why));
    }
    // Each pass opens the database afresh: connections kept open for hours would go on using
    // a write-ahead log that was deleted or replaced under them, failing (or worse, writing
    // where no one reads) until restarted. Opening costs about a millisecond.
    let run = |only: Option<&HashSet<String>>, on_event: &mut dyn FnMut(WatchEvent)| -> Result<(), SyncError> {
        match store.reopen().map_err(SyncError::from).and_then(|fresh| sync_pass(&fresh, &root, source, only, false)) {
            Ok(report) => on_event(WatchEvent::Pass { report: &report, full: only.is_none() }),
            Err(SyncError::Store(e @ StoreError::Moved { .. })) => return Err(e.into()),
            Err(e) => on_event(WatchEvent::Failed(e)),
        }
        Ok(())
    };
    if full_first {
        run(None, on_event)?;
    }
    let mut next_rescan = Instant::now() + rescan;
    while !stop.load(Ordering::SeqCst) {
        let wait = next_rescan.saturating_duration_since(Instant::now()).min(TICK);
        let first = match rx.recv_timeout(wait) {
            Ok(event) => event,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() >= next_rescan {
                    run(None, on_event)?;
                    next_rescan = Instant::now() + rescan;
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait); // no watcher: rescans only
                continue;
            }
        };
        let mut changed = HashSet::new();
        let mut lost = false;
        let mut note = |event: notify::Result<notify::Event>| match event {
            // Reads (this loop's own among them) change nothing: only writes, creations,
            // removals and renames call for a pass.
            Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => {}
            Ok(e) => {
                lost |= e.need_rescan();
                changed.extend(e.paths.iter().filter_map(|p| conversation_of(&root, p)));
            }
            Err(_) => lost = true,
        };
        note(first);
        let settle_until = Instant::now() + SETTLE;
        while let Ok(event) = rx.recv_timeout(settle_until.saturating_duration_since(Instant::now())) {
            note(event);
        }
        if lost {
            on_event(WatchEvent::Degraded("notifications were lost; rescanning".into()));
            run(None, on_event)?;
            next_rescan = Instant::now() + rescan;
        } else if !changed.is_empty() {
            run(Some(&changed), on_event)?;
        }
    }
    drop(watcher);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_map_to_their_conversation() {
        let root = Path::new("/logs");
        assert_eq!(conversation_of(root, Path::new("/logs/c1/conversation.jsonl")).as_deref(), Some("c1"));
        assert_eq!(conversation_of(root, Path::new("/logs/c1/branches/x.jsonl")).as_deref(), Some("c1"));
        assert_eq!(conversation_of(root, Path::new("/logs/c2")).as_deref(), Some("c2"));
        assert_eq!(conversation_of(root, Path::new("/logs")), None);
        assert_eq!(conversation_of(root, Path::new("/elsewhere/c1")), None);
    }
}
