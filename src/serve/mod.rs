//! `sessiondb serve`: gptme-server's v2 conversation API, answered from the store, so the web
//! UI that ships inside the `gptme` package browses, searches and follows the whole history.
//!
//! Invariant: a read never writes to the logs root (gptme-server creates `workspace/` and
//! rewrites `config.toml` on reads; this server only reads the store and, for `files/` and
//! `workspace`, the conversation's own files, never a path outside them). Every store call runs
//! on tokio's blocking pool, never on an async worker. Changes reach the store by the watch
//! machinery of `sync --watch` ([`live`]), which also tells the open event streams; the
//! server's own writes go through [`crate::ops`] with gptme's lock, as the CLI's do. Without
//! a token (`--no-auth`) the server binds loopback only. Which requests are admitted at all
//! (their `Host`, and for writes their origin and type) is [`admission`]'s rule; how many
//! connections are served and for how long, [`listen`]'s. The server is its logs root's: in a store holding
//! several sources (see [`crate::store::sources`]), it lists, finds, searches and writes the
//! conversations of its root's source only, as gptme-server serves one logs directory, so
//! that another root's conversation of the same chat id is never shown or changed here.
//! Messages, search excerpts, previews and attached text files are answered with their secrets
//! masked ([`crate::secrets`]) unless the server was started with `--show-secrets`; an edit
//! from the web UI keeps each secret whose mask it left standing.

mod admission;
mod files;
mod gptme_json;
mod listen;
mod live;
mod read;
pub mod webui;
mod write;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::store::sources::Source;
use crate::store::{Store, StoreError};

pub(crate) use gptme_json::lexical;

/// How `sessiondb serve` was asked to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub host: IpAddr,
    pub port: u16,
    /// The bearer token clients must present; `None` (`--no-auth`) only on a loopback address.
    pub token: Option<String>,
    /// Whether the token was made for this run (none was given): the link printed at start
    /// then carries it, as gptme-server's does.
    pub token_made_here: bool,
    /// Names besides `localhost` and the addresses listened on that requests may give as
    /// their `Host` (`--allow-host`; see [`admission`]).
    pub allowed_hosts: Vec<String>,
    /// The logs root served (and watched).
    pub logs_root: PathBuf,
    /// The name of the root's source, when given (see [`crate::store::sources`]).
    pub source: Option<String>,
    /// The web UI build to serve at `/`, if one was found.
    pub webui: Option<PathBuf>,
    pub cors_origin: Option<String>,
    /// How often the watcher rescans the whole root, besides filesystem notifications.
    pub rescan: std::time::Duration,
    /// Whether messages, search excerpts and attached text files are answered with their
    /// secrets masked (the default) or as they are (`--show-secrets`).
    pub secrets: crate::secrets::Shown,
}

/// Why the server could not start or went down.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("refusing to listen on {0} without a token: drop --no-auth, or give --token or GPTME_SERVER_TOKEN (only a loopback address may go without)")]
    NoToken(IpAddr),
    #[error("cannot listen on {addr}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("--cors-origin {0:?} is not a valid origin")]
    Origin(String),
    #[error("the server failed")]
    Io(#[from] std::io::Error),
    #[error("cannot serve the logs root")]
    Store(#[from] StoreError),
    /// Following the logs root stopped for good (the database moved away): serving stopped.
    #[error("stopped serving")]
    Stopped(#[source] crate::sync::SyncError),
}

/// What every request handler shares.
pub(crate) struct AppState {
    /// Scoped to the served root's source ([`Store::scoped_to`]).
    pub store: Store,
    /// The served root's source.
    pub source: Source,
    pub config: Config,
    /// The `Host` values requests are admitted with.
    pub hosts: admission::Hosts,
    /// Taken by every write in turn, first come first served (tokio's mutex is fair), so that
    /// a long write ([`write::create`]'s many messages) lets the others in between its turns.
    pub writes: tokio::sync::Mutex<()>,
    /// The logs root's device and inode at start (none when it was missing): conversations
    /// are created only in that directory.
    pub root: Option<(u64, u64)>,
    pub live: live::Live,
}

pub(crate) type Shared = Arc<AppState>;

/// An error answered as gptme-server answers one: `{"error": "..."}` with a status.
#[derive(Debug)]
pub(crate) struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub fn bad_request(msg: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, msg.into())
    }
    pub fn not_found(msg: impl Into<String>) -> ApiError {
        ApiError(StatusCode::NOT_FOUND, msg.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::NoConversation(id) => ApiError::not_found(format!("Conversation not found: {id}")),
            StoreError::NoBranch { .. } | StoreError::NoSuchFilter { .. } => ApiError::not_found(crate::cause::chain(&e)),
            StoreError::QueryTooLarge { .. } => ApiError::bad_request(crate::cause::chain(&e)),
            StoreError::Moved { .. } => ApiError(StatusCode::SERVICE_UNAVAILABLE, crate::cause::chain(&e)),
            other => ApiError(StatusCode::INTERNAL_SERVER_ERROR, crate::cause::chain(&other)),
        }
    }
}

/// Runs `f` with the store on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(state: &Shared, f: impl FnOnce(&Store, &Config) -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || f(&state.store, &state.config))
        .await
        .unwrap_or_else(|e| Err(ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("the request's worker failed: {e}"))))
}

/// Runs the write `f` with the store on the blocking pool, in its turn ([`AppState::writes`]).
pub(crate) async fn writing<T: Send + 'static>(state: &Shared, f: impl FnOnce(&Store, &Config) -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    let _turn = state.writes.lock().await;
    blocking(state, f).await
}

/// gptme's check of a conversation id from a URL (`util/conversation_ids.py`): one path
/// component, printable, at most 255 bytes.
pub(crate) fn check_id(id: &str) -> Result<(), ApiError> {
    if id.len() > 255 {
        return Err(ApiError::bad_request("conversation_id too long"));
    }
    let bad = id.trim().is_empty() || id != id.trim() || id.chars().any(char::is_control) || id == "." || id.contains(['/', '\\']) || id.contains("..");
    if bad {
        return Err(ApiError::bad_request("Invalid conversation_id"));
    }
    Ok(())
}

/// The largest request body accepted (a message with attachments referenced by path is small;
/// gptme's uploads are not served here).
const BODY_LIMIT: usize = 2 << 20;

/// The most a request's header fields may hold, in bytes. hyper's own bound depends on how the
/// bytes arrive (a head that lands in one read may pass), so the server states its own.
const HEAD_LIMIT: usize = 64 << 10;

/// The most a request's target (path and query) may hold, in bytes; under hyper's own 64 KiB.
const TARGET_LIMIT: usize = 32 << 10;

/// Serves until Ctrl-C or SIGTERM. Refuses a non-loopback address without a token.
pub fn run(store: Store, config: Config) -> Result<(), ServeError> {
    if config.token.is_none() && !config.host.is_loopback() {
        return Err(ServeError::NoToken(config.host));
    }
    // The store holds the root as it is now before the first request is answered; the
    // watcher keeps it so from then on, from notifications set up before this pass (so that
    // it need not read the whole root again while the first requests are answered).
    let notes = crate::sync::watch::Notifications::on(&config.logs_root, config.rescan);
    match crate::sync::pass::sync_pass(&store, &config.logs_root, config.source.as_deref(), None, false) {
        Ok(report) => tracing::info!(conversations = report.ingest.new_conversations, ms = millis(report.seconds), "synced {}", config.logs_root.display()),
        Err(e) => tracing::warn!("the first sync of {} failed: {}; serving the store as it is", config.logs_root.display(), crate::cause::chain(&e)),
    }
    // Searches rank from the ranking index once it has caught up (from the word index until then).
    if let Err(e) = store.catch_up_ranking(&mut |_| {}) {
        tracing::warn!("the ranking index could not be brought up to date: {}; searches rank from the word index meanwhile", crate::cause::chain(&e));
    }
    // The sync above made the root's source, unless it failed before; then it is made here
    // (a root with no conversations yet is still the one served).
    let conn = store.connection()?;
    let root = crate::store::sources::known_root(&conn, &config.logs_root)?;
    let source = crate::store::sources::register(&conn, &root, config.source.as_deref())?;
    drop(conn);
    let store = store.scoped_to(source.id);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(store, source, config, notes))
}

async fn serve(store: Store, source: Source, config: Config, notes: crate::sync::watch::Notifications) -> Result<(), ServeError> {
    // Before the port opens: a client that reaches it finds the limit raised already.
    let cap = listen::connection_cap(listen::raise_open_files_limit());
    let addr = SocketAddr::new(config.host, config.port);
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
    let cors = match &config.cors_origin {
        Some(o) => Some(HeaderValue::from_str(o).map_err(|_| ServeError::Origin(o.clone()))?),
        None => None,
    };
    let live = live::Live::start(store.clone(), notes, config.rescan);
    let hosts = admission::Hosts::new(config.host, &config.allowed_hosts);
    let root = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&config.logs_root).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
    };
    let state: Shared = Arc::new(AppState { store, source, config: config.clone(), hosts, writes: tokio::sync::Mutex::new(()), root, live });
    let app = router(state.clone(), cors);
    let bound = listener.local_addr()?;
    let webui = config.webui.as_ref().map_or_else(|| "none".to_owned(), |d| d.display().to_string());
    tracing::info!(address = %bound, logs = %config.logs_root.display(), auth = config.token.is_some(), webui = %webui, connections = cap, "sessiondb serve listening on http://{bound}");
    announce(&config, bound);
    let stopping = state.clone();
    listen::serve(listener, app, cap, async move {
        tokio::select! {
            () = shutdown_signal() => tracing::info!("stopping: closing the event streams, finishing the requests under way"),
            () = stopping.live.failed() => tracing::error!("stopping: the logs root can no longer be followed into the store"),
        }
        stopping.live.stop();
    })
    .await;
    if let Some(e) = state.live.failure() {
        return Err(ServeError::Stopped(e));
    }
    tracing::info!("stopped");
    Ok(())
}

/// Says where the web UI is, with this run's token in the link when it was made here (in the
/// fragment, as gptme-server's link has it, so that it is never sent in a request).
fn announce(config: &Config, bound: SocketAddr) {
    let mut shown = bound;
    if shown.ip().is_unspecified() {
        shown.set_ip(if shown.is_ipv4() { std::net::Ipv4Addr::LOCALHOST.into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
    }
    let link = match (&config.token, config.token_made_here) {
        (Some(token), true) => format!("http://{shown}/#userToken={token}"),
        _ => format!("http://{shown}/"),
    };
    if config.webui.is_some() {
        tracing::info!(url = %link, "open the web UI: {link}");
    } else {
        tracing::warn!("no web UI found (give --webui-dir or GPTME_WEBUI_DIR, or install gptme: pipx install gptme); serving the API only");
    }
    if let (Some(token), true) = (&config.token, config.token_made_here) {
        tracing::info!("API clients give this run's token as `Authorization: Bearer {token}` (--token or GPTME_SERVER_TOKEN sets one of your own)");
    } else if config.token.is_none() {
        tracing::warn!("--no-auth: anyone on this machine can read and change the history through this server");
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = ctrl_c => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
}

fn router(state: Shared, cors: Option<HeaderValue>) -> Router {
    let open = Router::new().route("/api/v2", get(read::root)).route("/api/v2/version", get(read::version));
    let api = Router::new()
        .route("/api/v2/auth/cookie", post(set_cookie).delete(clear_cookie))
        .route("/api/v2/conversations", get(read::conversations))
        .route("/api/v2/conversations/{id}", get(read::conversation).put(write::create).post(write::append).delete(write::remove))
        .route("/api/v2/conversations/{id}/config", get(read::config).patch(write::patch_config))
        .route("/api/v2/conversations/{id}/files/{*path}", get(files::conversation_file))
        .route("/api/v2/conversations/{id}/workspace", get(files::workspace))
        .route("/api/v2/conversations/{id}/workspace/{*path}", get(files::workspace_path))
        .route("/api/v2/conversations/{id}/events", get(live::events))
        .route("/api/v2/conversations/{id}/messages/{index}", axum::routing::patch(write::edit_message).delete(write::delete_message))
        .route("/api/v2/conversations/{id}/fork", post(write::fork))
        .route("/api/v2/conversations/{id}/step", post(write::no_model))
        .route("/api/v2/conversations/{id}/rerun", post(write::no_model))
        .merge(read::history_only_routes())
        .layer(middleware::from_fn_with_state(state.clone(), require_auth));
    let mut app = open.merge(api).fallback(webui::fallback).with_state(state.clone());
    if let Some(origin) = cors {
        use tower_http::cors::CorsLayer;
        app = app.layer(
            CorsLayer::new()
                .allow_origin(origin)
                .allow_methods([Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
                .allow_credentials(true),
        );
    }
    app.layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(middleware::from_fn(bounded_body))
        .layer(middleware::from_fn_with_state(state, admission::admit))
        .layer(middleware::from_fn(bounded_head))
        .layer(middleware::from_fn(log_request))
}

/// Refuses a request whose header fields (431) or target (414) are longer than [`HEAD_LIMIT`]
/// or [`TARGET_LIMIT`].
async fn bounded_head(req: Request, next: Next) -> Response {
    let fields: usize = req.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if fields > HEAD_LIMIT {
        return ApiError(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request's header fields hold {fields} bytes; at most {HEAD_LIMIT} are accepted"),
        )
        .into_response();
    }
    let target = req.uri().path_and_query().map_or(0, |t| t.as_str().len());
    if target > TARGET_LIMIT {
        return ApiError(StatusCode::URI_TOO_LONG, format!("the request's path and query hold {target} bytes; at most {TARGET_LIMIT} are accepted"))
            .into_response();
    }
    next.run(req).await
}

/// Reads the request's body whole before the handler runs: refused 408 when it has not arrived
/// within [`listen::BODY_TIMEOUT`] (a client that announces a body and sends it slowly, or not
/// at all, holds nothing longer), 413 past [`BODY_LIMIT`].
async fn bounded_body(req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(listen::BODY_TIMEOUT, axum::body::to_bytes(body, BODY_LIMIT)).await {
        Err(_) => ApiError(StatusCode::REQUEST_TIMEOUT, format!("the request's body did not arrive within {} s", listen::BODY_TIMEOUT.as_secs())).into_response(),
        Ok(Err(e)) if std::error::Error::source(&e).is_some_and(|c| c.is::<http_body_util::LengthLimitError>()) => {
            ApiError(StatusCode::PAYLOAD_TOO_LARGE, format!("the request's body is over {BODY_LIMIT} bytes")).into_response()
        }
        Ok(Err(e)) => ApiError::bad_request(format!("the request's body could not be read: {e}")).into_response(),
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
    }
}

/// One log line per request, at info level.
async fn log_request(req: Request, next: Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let start = Instant::now();
    let response = next.run(req).await;
    tracing::info!(method = %method, path = %path, status = response.status().as_u16(), ms = millis(start.elapsed().as_secs_f64()), "request");
    response
}

/// `seconds` in milliseconds to one decimal, as a log line shows a duration (`ms=0.4`, not
/// `ms=0.412345678`).
fn millis(seconds: f64) -> f64 {
    (seconds * 1e4).round() / 10.0
}

/// The cookie the web UI's event streams authenticate with (gptme's `gptme_auth`).
const AUTH_COOKIE: &str = "gptme_auth";

/// gptme-server's `require_auth`: the bearer token, else the `gptme_auth` cookie, else the
/// (deprecated) `token` query parameter, compared in constant time.
async fn require_auth(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let Some(expected) = state.config.token.as_deref() else { return next.run(req).await };
    let mut token: Option<String> = None;
    if let Some(h) = req.headers().get(header::AUTHORIZATION) {
        let h = h.to_str().unwrap_or("");
        match h.split_once(' ') {
            Some((scheme, t)) if scheme.eq_ignore_ascii_case("bearer") => token = Some(t.to_owned()),
            Some(_) => return ApiError(StatusCode::UNAUTHORIZED, "Invalid authentication scheme".into()).into_response(),
            None => return ApiError(StatusCode::UNAUTHORIZED, "Invalid authorization header format".into()).into_response(),
        }
    }
    if token.as_deref().is_none_or(str::is_empty) {
        token = req
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == AUTH_COOKIE)
            .map(|(_, v)| v.to_owned());
    }
    if token.as_deref().is_none_or(str::is_empty) {
        token = req.uri().query().and_then(|q| q.split('&').filter_map(|p| p.split_once('=')).find(|(k, _)| *k == "token").map(|(_, v)| v.to_owned()));
    }
    match token.filter(|t| !t.is_empty()) {
        None => ApiError(StatusCode::UNAUTHORIZED, "Missing authentication credentials".into()).into_response(),
        Some(t) if !constant_time_eq(t.as_bytes(), expected.as_bytes()) => ApiError(StatusCode::UNAUTHORIZED, "Invalid or expired token".into()).into_response(),
        Some(_) => next.run(req).await,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `POST /api/v2/auth/cookie`: the token as an HttpOnly cookie, for `EventSource`.
async fn set_cookie(State(state): State<Shared>) -> Response {
    let mut response = Json(json!({"ok": true, "message": "Auth cookie set"})).into_response();
    if let Some(token) = &state.config.token {
        for path in ["/api/", "/preview/"] {
            let cookie = format!("{AUTH_COOKIE}={token}; Max-Age=86400; HttpOnly; SameSite=Lax; Path={path}");
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
        }
    }
    response
}

async fn clear_cookie() -> Response {
    let mut response = Json(json!({"ok": true, "message": "Auth cookie cleared"})).into_response();
    for path in ["/api/", "/preview/"] {
        let cookie = format!("{AUTH_COOKIE}=; Max-Age=0; HttpOnly; SameSite=Lax; Path={path}");
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    response
}
