//! Live: the logs root followed by `sync --watch`'s machinery, and the event streams
//! (`GET …/events`) told of every change, whoever made it.
//!
//! Invariant: after each sync pass the listing rows of every conversation are compared with
//! the ones seen before (modification time, message count, name); each conversation whose row
//! changed is announced once on a broadcast channel. A stream that hears of its conversation
//! reads it again and sends `message_added` for each message appended after what it last sent,
//! or `conversation_edited` with the whole log when the earlier messages changed. Changes made
//! through this server reach the streams the same way (its writes touch the directory, the
//! watcher's pass sees them), so there is one path for every writer.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::{blocking, check_id, ApiError, Shared};
use crate::store::queries;
use crate::store::Store;
use crate::sync::watch::{watch_notified, Notifications, WatchEvent};

/// The watcher thread and the channel it announces changed conversations on.
pub struct Live {
    changed: broadcast::Sender<String>,
    stop: Arc<AtomicBool>,
    /// Set when the server shuts down: every open event stream ends, so that a graceful
    /// shutdown does not wait for browsers to go away.
    closing: tokio::sync::watch::Sender<bool>,
    /// Why the watcher stopped for good (the database moved away), once it has: the server
    /// stops too.
    failure: Arc<(std::sync::Mutex<Option<crate::sync::SyncError>>, tokio::sync::Notify)>,
}

/// A conversation's row as far as change goes.
type Seen = HashMap<String, (f64, i64, String)>;

/// Every conversation served (the served source's, test ones included), by chat id.
fn snapshot(store: &Store) -> Option<Seen> {
    let conn = store.connection().ok()?;
    let every = queries::ListFilter { include_test: true, source: store.scope(), ..queries::ListFilter::default() };
    let rows = queries::list_filtered(&conn, &every).ok()?;
    Some(rows.into_iter().map(|c| (c.chat_id, (c.modified, c.messages, c.name))).collect())
}

impl Live {
    /// Starts following the root `notes` are on, from those notifications (set up before the
    /// server's first full pass of it, so nothing changed since is missed), with a full rescan
    /// every `rescan`.
    pub fn start(store: Store, notes: Notifications, rescan: Duration) -> Live {
        let (changed, _) = broadcast::channel(1024);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, flag) = (changed.clone(), stop.clone());
        let failure = Arc::new((std::sync::Mutex::new(None), tokio::sync::Notify::new()));
        let failed = failure.clone();
        std::thread::Builder::new()
            .name("sessiondb-watch".into())
            .spawn(move || {
                let mut seen = snapshot(&store).unwrap_or_default();
                let mut on_event = |event: WatchEvent| match event {
                    WatchEvent::Pass { report, full } => {
                        if !report.errors.is_empty() {
                            for e in &report.errors {
                                tracing::warn!("sync: {}", crate::cause::chain(e));
                            }
                        }
                        tracing::debug!(full, seconds = report.seconds, "sync pass");
                        let Some(now) = snapshot(&store) else { return };
                        for (id, row) in &now {
                            if seen.get(id) != Some(row) {
                                let _ = tx.send(id.clone());
                            }
                        }
                        seen = now;
                    }
                    WatchEvent::Degraded(why) => tracing::warn!("watch: {why}"),
                    WatchEvent::Failed(e) => tracing::warn!("sync pass failed: {}", crate::cause::chain(&e)),
                };
                if let Err(e) = watch_notified(&store, notes, None, rescan, false, &flag, &mut on_event) {
                    *failed.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    failed.1.notify_one();
                }
            })
            .expect("a thread can be started");
        Live { changed, stop, closing: tokio::sync::watch::channel(false).0, failure }
    }

    /// Completes when the watcher has stopped for good ([`Live::failure`] says why).
    pub async fn failed(&self) {
        self.failure.1.notified().await;
    }

    /// Why the watcher stopped for good, if it has.
    pub fn failure(&self) -> Option<crate::sync::SyncError> {
        self.failure.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Stops the watcher and ends every event stream.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.closing.send_replace(true);
    }

    fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changed.subscribe()
    }
}

/// `GET …/events`: `connected`, then `message_added` / `conversation_edited` as the
/// conversation changes, and a `ping` at least every 15 seconds.
pub async fn events(State(state): State<Shared>, UrlPath(id): UrlPath<String>) -> Result<impl IntoResponse, ApiError> {
    check_id(&id)?;
    let rx = state.live.subscribe();
    let first = {
        let id = id.clone();
        blocking(&state, move |store, config| {
            let conn = store.connection()?;
            super::read::conversation_dict(&conn, &id, config.secrets)
        })
        .await?
    };
    let session_id = format!("sessiondb-{}", std::process::id());
    let opening = vec![
        data(json!({"type": "connected", "session_id": session_id, "generating": false, "last_error": null, "pending_tools": []})),
        data(json!({"type": "ping"})),
    ];
    let closing = state.live.closing.subscribe();
    let changes = stream::unfold((first, rx, closing), move |(mut last, mut rx, mut closing)| {
        let (state, id) = (state.clone(), id.clone());
        async move {
            loop {
                let heard = tokio::select! {
                    heard = rx.recv() => heard,
                    _ = closing.wait_for(|closed| *closed) => return None,
                };
                match heard {
                    Ok(changed) if changed != id => continue,
                    // Missed announcements: look again in any case.
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
                let read_id = id.clone();
                let Ok(now) = blocking(&state, move |store, config| super::read::conversation_dict(&store.connection()?, &read_id, config.secrets)).await else {
                    continue;
                };
                let batch = difference(&last, &now);
                last = now;
                if !batch.is_empty() {
                    return Some((batch.into_iter().map(data).collect::<Vec<_>>(), (last, rx, closing)));
                }
            }
        }
    });
    let stream = stream::once(async move { opening }).chain(changes).flat_map(stream::iter);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).event(Event::default().data(json!({"type": "ping"}).to_string()))))
}

/// One SSE event of JSON data.
fn data(v: Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(v.to_string()))
}

/// The events that take a client from conversation `before` to `after`: a `message_added` per
/// message appended to the loaded log, else one `conversation_edited` with the whole log (and
/// nothing when the log and branches are unchanged).
fn difference(before: &Value, after: &Value) -> Vec<Value> {
    let (old, new) = (before["log"].as_array(), after["log"].as_array());
    let (Some(old), Some(new)) = (old, new) else { return Vec::new() };
    if old == new && before["branches"] == after["branches"] {
        return Vec::new();
    }
    if new.len() > old.len() && new[..old.len()] == old[..] {
        return new[old.len()..].iter().map(|m| json!({"type": "message_added", "message": m})).collect();
    }
    vec![json!({"type": "conversation_edited", "index": first_difference(old, new), "truncated": new.len() < old.len(), "log": new, "branches": after["branches"]})]
}

fn first_difference(a: &[Value], b: &[Value]) -> usize {
    a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()))
}
