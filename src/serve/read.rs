//! The read endpoints: the API root, the conversation listing (with search and pagination),
//! one conversation, its config, and what the web UI asks a history-only server on load.
//!
//! Invariant: parameters are parsed and refused as gptme-server 0.35.1 parses and refuses them
//! (same messages, same statuses), and answers are built by [`super::gptme_json`] from the
//! store alone; nothing here writes anywhere.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::gptme_json::{self, Dirs};
use super::{blocking, check_id, ApiError, Shared};
use crate::codec::normalise::normalise_for_rewrite;
use crate::secrets::Shown;
use crate::store::queries::{self, ConversationSummary, ListFilter};
use crate::store::search::{self, SearchQuery, Sort};
use crate::store::{modify, Connection, StoreError};

/// The gptme version whose API this server speaks.
pub const GPTME_VERSION: &str = "0.35.1";
const API_VERSION: i64 = 2;
const CONTRACT_REVISION: i64 = 2;

type Params = Query<HashMap<String, String>>;

/// `GET /api/v2`.
pub async fn root() -> Response {
    let body = json!({
        "message": "gptme v2 API",
        "documentation": "https://gptme.org/docs/server.html",
        "version": GPTME_VERSION,
        "api_version": API_VERSION,
        "contract_revision": CONTRACT_REVISION,
        "capabilities": {"external_session_catalog": false, "external_session_transcript": false},
        "provider_configured": false,
        "server": format!("sessiondb {} (history only: no model runs here; q= also searches message content)", env!("CARGO_PKG_VERSION")),
    });
    ([("X-API-Version", API_VERSION.to_string())], Json(body)).into_response()
}

/// `GET /api/v2/version`.
pub async fn version() -> Response {
    ([("X-API-Version", API_VERSION.to_string())], Json(json!({"api_version": API_VERSION, "contract_revision": CONTRACT_REVISION}))).into_response()
}

/// A boolean query parameter as gptme reads one: present and `""`, `1`, `true` or `yes`.
fn flag(params: &HashMap<String, String>, name: &str) -> bool {
    params.get(name).is_some_and(|v| matches!(v.to_lowercase().as_str(), "" | "1" | "true" | "yes"))
}

/// What `GET /api/v2/conversations` was asked.
struct ListRequest {
    limit: usize,
    search: String,
    detail: bool,
    paginated: bool,
    cursor: Option<(f64, Option<String>)>,
}

impl ListRequest {
    fn parse(p: &HashMap<String, String>) -> Result<ListRequest, ApiError> {
        let limit: i64 = match p.get("limit") {
            Some(l) => l.trim().parse().map_err(|_| ApiError::bad_request("limit must be an integer"))?,
            None => 100,
        };
        if limit <= 0 {
            return Err(ApiError::bad_request("limit must be a positive integer"));
        }
        // `q` takes precedence over its alias `search`, even when empty.
        let search = p.get("q").or_else(|| p.get("search")).map_or(String::new(), |s| s.trim().to_lowercase());
        let cursor = match p.get("cursor").filter(|c| !c.is_empty()) {
            Some(c) => Some(gptme_json::parse_cursor(c).ok_or_else(|| ApiError::bad_request("cursor must be a numeric Unix timestamp or opaque cursor token"))?),
            None => None,
        };
        Ok(ListRequest { limit: limit.min(MAX_LISTED as i64) as usize, search, detail: flag(p, "detail"), paginated: flag(p, "paginated"), cursor })
    }
}

/// `GET /api/v2/conversations`: a bare array, or with `paginated` `{conversations,
/// next_cursor}`. `q`/`search` matches name, id and last-message preview as gptme does, and
/// also message content through the full-text index.
pub async fn conversations(State(state): State<Shared>, Query(p): Params) -> Result<Json<Value>, ApiError> {
    let req = ListRequest::parse(&p)?;
    let source = state.source.clone();
    blocking(&state, move |store, config| {
        let conn = store.connection()?;
        let listed = |limit| queries::list_filtered(&conn, &ListFilter { limit, source: Some(source.id), ..ListFilter::default() });
        let item = |c: &ConversationSummary| -> Result<Value, ApiError> {
            let size = if req.detail { None } else { queries::main_transcript_size(&conn, &c.chat_id)? };
            Ok(gptme_json::conversation_item(c, req.detail, size))
        };
        if !req.paginated && req.search.is_empty() {
            let rows = listed(Some(req.limit))?;
            return Ok(Json(Value::Array(rows.iter().map(item).collect::<Result<_, _>>()?)));
        }
        if req.search.is_empty() {
            // A page straight from the index: as fast at 10,000 conversations as at 100.
            let after = req.cursor.as_ref().map(|(t, id)| (*t, id.as_deref()));
            let mut rows = queries::list_page(&conn, Some(source.id), after, req.limit + 1)?;
            let has_more = rows.len() > req.limit;
            rows.truncate(req.limit);
            return Ok(Json(page_json(&rows, has_more, item)?));
        }
        // The listing's keys in its order, the whole rows read for the ones kept only.
        let keys = queries::listing_keys(&conn, &ListFilter { source: Some(source.id), ..ListFilter::default() })?;
        // Unpaged, the answer is the first `limit` matches in the listing's order, which is the
        // order content matches come in (newest first, ties by chat id): a conversation among
        // them that matches by content is among the first `limit` content matches. A page
        // orders ties the other way, so it asks for as many as a listing holds.
        let wanted = if req.paginated { MAX_LISTED } else { req.limit };
        let in_content = content_matches(&conn, &source.name, &req.search, wanted, config.secrets)?;
        let by_meta = |k: &queries::ListingKey| {
            k.name.to_lowercase().contains(&req.search)
                || k.chat_id.to_lowercase().contains(&req.search)
                || k.preview.as_deref().unwrap_or("").to_lowercase().contains(&req.search)
        };
        let mut kept: Vec<(&queries::ListingKey, bool)> = keys
            .iter()
            .filter_map(|k| {
                let meta = by_meta(k);
                (meta || in_content.contains_key(&k.chat_id)).then_some((k, meta))
            })
            .collect();
        let mut has_more = false;
        if req.paginated {
            // gptme pages on (modified, id), newest first, ties by id descending.
            kept.sort_by(|(a, _), (b, _)| b.modified.total_cmp(&a.modified).then_with(|| b.chat_id.cmp(&a.chat_id)));
            if let Some((t, id)) = &req.cursor {
                kept.retain(|(c, _)| match id {
                    None => c.modified < *t,
                    Some(id) => c.modified < *t || (c.modified == *t && c.chat_id.as_str() < id.as_str()),
                });
            }
            has_more = kept.len() > req.limit;
        }
        kept.truncate(req.limit);
        let mut whole = queries::summaries_by_id(&conn, &kept.iter().map(|(k, _)| k.id).collect::<Vec<_>>())?;
        let rows: Vec<ConversationSummary> = kept
            .iter()
            .filter_map(|(k, meta)| {
                let mut c = whole.remove(&k.id)?;
                // Found in a message alone: the name carries the text around the match, for the
                // stock web UI filters the answer again by id and name (Ctrl-K), and shows the name.
                if !meta {
                    if let Some(excerpt) = in_content.get(&c.chat_id).filter(|e| !e.is_empty()) {
                        c.name = format!("{} · {excerpt}", c.name);
                    }
                }
                Some(c)
            })
            .collect();
        if !req.paginated {
            return Ok(Json(Value::Array(rows.iter().map(item).collect::<Result<_, _>>()?)));
        }
        Ok(Json(page_json(&rows, has_more, item)?))
    })
    .await
}

/// `{conversations, next_cursor}`: the cursor points after the page's last row when there is
/// more.
fn page_json(rows: &[ConversationSummary], has_more: bool, item: impl Fn(&ConversationSummary) -> Result<Value, ApiError>) -> Result<Value, ApiError> {
    let next_cursor = match rows.last() {
        Some(last) if has_more => json!(gptme_json::encode_cursor(last.modified, &last.chat_id)),
        _ => Value::Null,
    };
    let page = rows.iter().map(item).collect::<Result<Vec<_>, _>>()?;
    Ok(json!({"conversations": page, "next_cursor": next_cursor}))
}

/// How many characters of a message a content match shows either side of the match, in a
/// result's name.
const EXCERPT_AROUND: usize = 24;

/// The most conversations a listing gives (gptme-server's cap).
const MAX_LISTED: usize = 1000;

/// The first `limit` conversations, newest first, whose messages contain `text` (as a
/// substring, as gptme matches names), through the full-text index, each with an excerpt of
/// its best match.
fn content_matches(conn: &Connection, source: &str, text: &str, limit: usize, secrets: Shown) -> Result<HashMap<String, String>, StoreError> {
    let q = SearchQuery {
        text: text.to_owned(),
        limit,
        matches: 1,
        literal: true,
        sort: Sort::Newest,
        source: Some(source.to_owned()),
        secrets,
        ..SearchQuery::default()
    };
    let found = search::search(conn, &q)?;
    Ok(found
        .conversations
        .into_iter()
        .map(|c| {
            let excerpt = c.hits.first().and_then(|h| search::excerpt(&h.content, &found.highlight, EXCERPT_AROUND)).unwrap_or_default();
            (c.chat_id, excerpt)
        })
        .collect())
}

/// What `GET /api/v2/conversations/<id>` was asked: the last `limit` messages, ending before
/// `before`.
struct Page {
    limit: Option<usize>,
    before: Option<usize>,
}

impl Page {
    fn parse(p: &HashMap<String, String>) -> Result<Page, ApiError> {
        let limit = match p.get("limit") {
            Some(l) => {
                let l: i64 = l.trim().parse().map_err(|_| ApiError::bad_request("limit must be a positive integer"))?;
                if l <= 0 {
                    return Err(ApiError::bad_request("limit must be a positive integer"));
                }
                Some(l.min(10_000) as usize)
            }
            None => None,
        };
        let before = match p.get("before") {
            Some(b) => {
                let b: i64 = b.trim().parse().map_err(|_| ApiError::bad_request("before must be a non-negative integer"))?;
                if b < 0 {
                    return Err(ApiError::bad_request("before must be a non-negative integer"));
                }
                Some(b as usize)
            }
            None => None,
        };
        if before.is_some() && limit.is_none() {
            return Err(ApiError::bad_request("before requires limit to be set"));
        }
        Ok(Page { limit, before })
    }
}

/// `GET /api/v2/conversations/<id>`.
pub async fn conversation(State(state): State<Shared>, UrlPath(id): UrlPath<String>, Query(p): Params) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    let page = Page::parse(&p)?;
    blocking(&state, move |store, config| {
        let conn = store.connection()?;
        let mut d = conversation_dict(&conn, &id, config.secrets)?;
        if let Some(limit) = page.limit {
            let log = d["log"].as_array().cloned().unwrap_or_default();
            let total = log.len();
            let end = page.before.map_or(total, |b| b.min(total));
            let start = end.saturating_sub(limit);
            d["log"] = Value::Array(log[start..end].to_vec());
            d["total_messages"] = json!(total);
            d["has_more"] = json!(start > 0);
            if start > 0 {
                d["before"] = json!(start);
            }
        }
        Ok(Json(d))
    })
    .await
}

/// A listed conversation's row: 404 for one the store does not have, or whose directory is
/// gone (gptme no longer finds it).
pub(crate) fn live_summary(conn: &Connection, id: &str) -> Result<ConversationSummary, ApiError> {
    let summary = queries::conversation_summary(conn, id)?;
    if !Path::new(&summary.source_dir).join(crate::layout::MAIN_TRANSCRIPT).exists() {
        return Err(ApiError::not_found(format!("Conversation not found: {id}")));
    }
    Ok(summary)
}

/// The workspace gptme's `ChatConfig` reports for a conversation (the store keeps it; without
/// one, `<dir>/workspace`).
pub(crate) fn configured_workspace(s: &ConversationSummary) -> PathBuf {
    s.workspace.as_ref().map(PathBuf::from).unwrap_or_else(|| Path::new(&s.source_dir).join(crate::layout::WORKSPACE))
}

/// `LogManager.to_dict(branches=True)` plus `logdir`, as `api_conversation` answers: `log` is
/// what gptme has loaded (the active view on main when there is one), `branches` every branch,
/// with main as loaded.
pub(crate) fn conversation_dict(conn: &Connection, id: &str, shown: Shown) -> Result<Value, ApiError> {
    let summary = live_summary(conn, id)?;
    let logdir = PathBuf::from(&summary.source_dir);
    let workspace = configured_workspace(&summary);
    let dirs = Dirs { workspace: &workspace, logdir: &logdir };
    let conv = modify::load_conversation(conn, id)?;
    let loaded = modify::loaded_doc(conn, conv.id, crate::layout::MAIN)?
        .ok_or_else(|| StoreError::NoBranch { chat_id: id.to_owned(), branch: crate::layout::MAIN.into() })?;
    let log = doc_messages(conn, conv.id, loaded.id, &loaded.path, &dirs, shown)?;
    let mut branches = serde_json::Map::new();
    branches.insert(crate::layout::MAIN.into(), log.clone());
    for name in queries::branch_names(conn, id)? {
        if name == crate::layout::MAIN {
            continue;
        }
        let doc = queries::branch_document(conn, id, &name)?;
        branches.insert(name.clone(), doc_messages(conn, conv.id, doc, &crate::layout::branch_path(&name), &dirs, shown)?);
    }
    Ok(json!({
        "id": id,
        "name": summary.name,
        "log": log,
        "logfile": logdir.join(crate::layout::MAIN_TRANSCRIPT),
        "branches": branches,
        "logdir": logdir,
    }))
}

/// The messages of a document as gptme holds them (a message without a timestamp has its
/// file's mtime), as `to_dict` gives them, their secrets as `shown` says.
fn doc_messages(conn: &Connection, conversation_id: i64, document_id: i64, path: &str, dirs: &Dirs, shown: Shown) -> Result<Value, StoreError> {
    let mtime = crate::sync::document::held_mtime(conn, conversation_id, path);
    queries::with_document_lines(conn, document_id, 0, |lines| {
        Value::Array(
            lines
                .filter_map(|l| l.message)
                .map(|m| {
                    let mut m = normalise_for_rewrite(&m, mtime);
                    shown.apply(&mut m.content);
                    gptme_json::message_dict(&m, dirs)
                })
                .collect(),
        )
    })
}

/// `GET …/config`: the conversation's `ChatConfig.to_dict()`. Without a `config.toml`, gptme's
/// defaults with the workspace this server reports for it (`<dir>/workspace`): gptme-server
/// writes a `config.toml` when the UI opens such a conversation and answers it from then on; this
/// server answers the same defaults and writes nothing.
pub async fn config(State(state): State<Shared>, UrlPath(id): UrlPath<String>) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    blocking(&state, move |store, _| {
        let conn = store.connection()?;
        let summary = live_summary(&conn, &id)?;
        let conv = modify::load_conversation(&conn, &id)?;
        let (text, workspace) = match queries::stored_file(&conn, conv.id, crate::layout::CONFIG)? {
            Some((bytes, _)) => (String::from_utf8_lossy(&bytes).into_owned(), summary.workspace.clone().unwrap_or_default()),
            None => (String::new(), configured_workspace(&summary).display().to_string()),
        };
        let dict = gptme_json::chat_config_dict(&text, &workspace)
            .unwrap_or_else(|| json!({"chat": {"stream": true, "interactive": true, "workspace": summary.source_dir}, "env": {}}));
        Ok(Json(dict))
    })
    .await
}

/// What a server that runs no model and holds no settings truthfully answers to the calls the
/// web UI makes on load (gptme-server's answers on a fresh install, without providers).
pub fn history_only_routes() -> Router<Shared> {
    async fn fixed(v: Value) -> Json<Value> {
        Json(v)
    }
    let r = |v: Value| get(move || fixed(v.clone()));
    Router::new()
        .route("/api/v2/providers/health", r(json!({"providers": {}})))
        .route("/api/v2/models", r(json!({"default": null, "favorites": [], "models": []})))
        .route("/api/v2/tasks", r(json!({"tasks": []})))
        .route("/api/v2/user", r(json!({"avatar": null, "color": null, "name": "User"})))
        .route("/api/v2/agents", r(json!([])))
        .route("/api/v2/sessions", r(json!([])))
        .route("/api/v2/skills", r(json!({"skills": []})))
        .route("/api/v2/tools", r(json!({"tools": []})))
        .route("/api/v2/commands", r(json!({"commands": []})))
        .route("/api/v2/external-sessions", r(json!({"sessions": []})))
        .route("/api/v2/config", r(json!({"agent": {}})))
        .route("/api/v2/server/health", r(json!({"generating_count": 0, "health": "green", "idle_count": 0, "session_count": 0, "slots": []})))
        .route(
            "/api/v2/user/settings",
            r(json!({"config_files": {}, "default_model": null, "default_model_source": null, "provider_sources": {}, "providers_configured": []})),
        )
        .route("/api/v2/conversations/{id}/metadata", get(metadata))
}

/// `GET …/metadata` (gptme 0.35.1 answers 404; the UI asks anyway): the listing row.
async fn metadata(State(state): State<Shared>, UrlPath(id): UrlPath<String>) -> Result<Response, ApiError> {
    check_id(&id)?;
    blocking(&state, move |store, _| {
        let conn = store.connection()?;
        let summary = live_summary(&conn, &id)?;
        Ok(([(header::CACHE_CONTROL, "no-cache")], Json(gptme_json::conversation_item(&summary, true, None))).into_response())
    })
    .await
}
