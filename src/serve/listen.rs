//! The accept loop: HTTP/1.1 connections handed to the router, with bounds on what a client
//! that is slow, idle or too numerous can hold.
//!
//! Invariant: no client keeps the server from answering others. A request head must arrive
//! whole within [`HEAD_TIMEOUT`] of the connection starting to wait for it, which bounds a
//! half-sent head and an idle keep-alive connection alike (hyper's timer starts whenever a
//! connection waits for a head); a body must arrive within [`BODY_TIMEOUT`]. At most
//! [`connection_cap`] connections are served at once: one past the cap is answered `503` with
//! `Retry-After` and closed at once, so a client beyond it learns why rather than waiting
//! unanswered, and the files it would need are kept for the store and the served files. At
//! start the soft limit of open files is raised to the hard one
//! ([`raise_open_files_limit`]), so the cap is as high as the system allows. Shutdown stops
//! accepting, lets the requests under way finish (the event streams are ended by their owner)
//! and gives up on them after [`SHUTDOWN_GRACE`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How long a connection may take to send a request's head, counted from when it starts
/// waiting for one (after connecting, or after the previous response on a kept-alive one).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a request's body may take to arrive whole.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long shutdown waits for the requests under way.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Open files kept for everything but connections: the store's (SQLite's file, log and shared
/// memory per pooled connection, the ranking index's segments), the watcher's, served files.
const RESERVED_FILES: u64 = 256;

/// Raises this process's soft limit of open files to its hard limit (as far as the system
/// allows); returns the soft limit in force afterwards.
pub fn raise_open_files_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the one struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

/// How many connections are served at once with `open_files` files allowed: all but
/// [`RESERVED_FILES`], at least 16 and at most 65,536.
pub fn connection_cap(open_files: u64) -> usize {
    open_files.saturating_sub(RESERVED_FILES).clamp(16, 65_536) as usize
}

/// The answer to a connection past the cap.
fn busy() -> Vec<u8> {
    let body = r#"{"error": "too many connections are open; try again in a moment"}"#;
    let head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 5\r\nConnection: close";
    format!("{head}\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// Serves `app` on `listener`, at most `cap` connections at once, until `shutdown` completes.
pub async fn serve(listener: TcpListener, app: Router, cap: usize, shutdown: impl Future<Output = ()>) {
    let permits = Arc::new(Semaphore::new(cap));
    let graceful = GracefulShutdown::new();
    let mut busy_logged = false;
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if !busy_logged {
                tracing::warn!(cap, "{cap} connections are open: refusing more (503) until some close");
                busy_logged = true;
            }
            tokio::spawn(refuse(stream));
            continue;
        };
        busy_logged = false;
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection =
            hyper::server::conn::http1::Builder::new().timer(TokioTimer::new()).header_read_timeout(HEAD_TIMEOUT).serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still under way after {} s; stopping without them", SHUTDOWN_GRACE.as_secs());
    }
}

/// Answers a connection past the cap and closes it.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&busy())).await;
    let _ = stream.shutdown().await;
}

/// An accept that failed: a connection reset before it was taken is nothing; running out of
/// files waits a moment for some to close (logged, since the cap should have prevented it).
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!("cannot accept a connection: {e}");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_says_its_length() {
        let busy = busy();
        let split = busy.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&busy[..split]).into_owned();
        assert!(head.contains(&format!("Content-Length: {}\r\n", busy.len() - split)), "{head}");
        assert!(serde_json::from_slice::<serde_json::Value>(&busy[split..]).is_ok());
    }

    #[test]
    fn the_cap_keeps_files_for_the_store() {
        assert_eq!(connection_cap(1024), 768);
        assert_eq!(connection_cap(100), 16);
        assert_eq!(connection_cap(u64::MAX), 65_536);
    }
}
