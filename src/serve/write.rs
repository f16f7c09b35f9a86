//! The write endpoints, each mapped onto one of sessiondb's operations ([`crate::ops`]), which
//! take gptme's lock on the conversation and change its directory and the store together:
//! `PUT` (a new conversation), `POST` (append a message), `PATCH`/`DELETE …/messages/<i>`
//! (edit, truncate, delete, with a backup branch as gptme keeps one), `POST …/fork`, `DELETE`
//! (as `sessiondb rm`, refused while gptme holds the conversation or changes are queued) and
//! `PATCH …/config` (rename).
//!
//! Invariant: a request is checked as gptme-server checks it (same messages) before anything
//! is written; no model runs here, so the calls that would generate (`…/step`, `…/rerun`) say
//! so with 501 and change nothing.

use std::path::PathBuf;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Map, Value};

use super::{check_id, writing, ApiError, Config, Shared};
use crate::model::{Message, Role};
use crate::ops::{self, input, OpsError};
use crate::secrets::{unmask, Shown};
use crate::store::{queries, Store};

type Params = Query<std::collections::HashMap<String, String>>;

impl From<OpsError> for ApiError {
    fn from(e: OpsError) -> ApiError {
        let text = crate::cause::chain(&e);
        match e {
            OpsError::Store(s) => ApiError::from(s),
            OpsError::Lock(_) => ApiError(StatusCode::CONFLICT, format!("{text}: gptme has the conversation open; try again when it is done")),
            OpsError::Exists { .. } | OpsError::QueuedChanges { .. } | OpsError::Archived { .. } => ApiError(StatusCode::CONFLICT, text),
            OpsError::DirectoryGone { .. } => ApiError::not_found(text),
            OpsError::NoLogsRoot { .. } => ApiError(StatusCode::SERVICE_UNAVAILABLE, text),
            OpsError::Invalid(_) | OpsError::InvalidName { .. } => ApiError::bad_request(text),
            _ => ApiError(StatusCode::INTERNAL_SERVER_ERROR, text),
        }
    }
}

impl From<input::InputError> for ApiError {
    fn from(e: input::InputError) -> ApiError {
        ApiError::bad_request(crate::cause::chain(&e))
    }
}

/// The JSON object of a request body, as gptme reads one (an empty body is `{}`).
fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad_request("JSON body must be an object")),
        Err(_) => Err(ApiError::bad_request("Malformed JSON in request body")),
    }
}

const ROLES: &str = "('system', 'user', 'assistant')";

/// A message from a request: `role`, `content`, optional `timestamp` and `files` (paths in the
/// conversation's workspace, attached as gptme attaches them).
fn message_from(m: &Map<String, Value>, workspace: &std::path::Path) -> Result<Message, ApiError> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some(r @ ("system" | "user" | "assistant")) => Role::parse(r),
        other => return Err(ApiError::bad_request(format!("Invalid role: {}. Must be one of: {ROLES}", other.map_or("None".into(), str::to_owned)))),
    };
    let content = match m.get("content") {
        None => return Err(ApiError::bad_request("Message missing required 'content' field")),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(ApiError::bad_request("Message 'content' must be a string")),
    };
    let files: Vec<PathBuf> = match m.get("files") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(|f| workspace_file(workspace, f)).collect::<Result<_, _>>()?
        }
        Some(_) => return Err(ApiError::bad_request("Message 'files' must be a list of strings")),
    };
    let fields = input::MessageFields { timestamp: m.get("timestamp").and_then(Value::as_str), files: &files, ..input::MessageFields::default() };
    Ok(input::message(role, content, fields)?)
}

/// A file a message names: inside the conversation's workspace, existing.
fn workspace_file(workspace: &std::path::Path, f: &str) -> Result<PathBuf, ApiError> {
    let base = workspace.canonicalize().map_err(|_| ApiError::bad_request(format!("File not found in workspace: {f}")))?;
    let path = base.join(f).canonicalize().map_err(|_| ApiError::bad_request(format!("File not found in workspace: {f}")))?;
    if !path.starts_with(&base) {
        return Err(ApiError::bad_request(format!("File path escapes workspace: {f}")));
    }
    Ok(path)
}

/// The conversation's workspace (for attachments named in requests).
fn workspace_of(store: &Store, id: &str) -> Result<PathBuf, ApiError> {
    let conn = store.connection()?;
    let s = super::read::live_summary(&conn, id)?;
    Ok(super::read::configured_workspace(&s))
}

/// Refuses (503) to create a conversation when the logs root is not the directory served
/// since start: gone, or another one in its place (a disk unmounted leaves its empty mount
/// point), so that nothing lands where gptme will not look once the disk is back.
fn root_in_place(state: &super::AppState) -> Result<(), ApiError> {
    use std::os::unix::fs::MetadataExt;
    let root = &state.config.logs_root;
    let now = std::fs::metadata(root).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()));
    if now.is_none() || now != state.root {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}: the logs root is not the directory served since start (gone, or a disk unmounted?); nothing was written", root.display()),
        ));
    }
    Ok(())
}

/// A session id to hand back where gptme hands one back (this server keeps no sessions).
fn session_id() -> String {
    format!("sessiondb-{}", std::process::id())
}

/// `PUT /api/v2/conversations/<id>`: a new conversation with the messages given (no system
/// prompt is generated: no model runs here) and `config.chat.name` as its name.
pub async fn create(State(state): State<Shared>, UrlPath(id): UrlPath<String>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    let req = object(&body)?;
    let raw = match req.get("messages") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(ApiError::bad_request("'messages' must be a list")),
    };
    let name = match req.get("config") {
        None => None,
        Some(Value::Object(c)) => match c.get("chat") {
            None => None,
            Some(Value::Object(chat)) => chat.get("name").and_then(Value::as_str).map(str::to_owned),
            Some(_) => return Err(ApiError::bad_request("'config.chat' must be an object")),
        },
        Some(_) => return Err(ApiError::bad_request("'config' must be an object")),
    };
    root_in_place(&state)?;
    let made = id.clone();
    let messages = writing(&state, move |store, config| {
        let dir = config.logs_root.join(&made);
        if dir.exists() {
            return Err(ApiError(StatusCode::CONFLICT, format!("Conversation already exists: {made}")));
        }
        let workspace = dir.join(crate::layout::WORKSPACE);
        let messages = raw
            .iter()
            .map(|m| m.as_object().ok_or_else(|| ApiError::bad_request("Each message must be an object")).and_then(|m| message_from(m, &workspace)))
            .collect::<Result<Vec<_>, _>>()?;
        ops::new_conversation(store, &config.logs_root, &made, name.as_deref())?;
        Ok(messages)
    })
    .await?;
    append_in_turns(&state, &id, messages).await?;
    Ok(Json(json!({"status": "ok", "conversation_id": id, "session_id": session_id()})))
}

/// The longest one write turn of [`append_in_turns`] goes on appending.
const WRITE_TURN: std::time::Duration = std::time::Duration::from_millis(100);

/// Appends `messages` to main of conversation `id` in turns: each turn is one operation (its
/// own lock and transaction) that stops appending once it has taken [`WRITE_TURN`], then gives
/// the other writes waiting their turn, so that no request holds the store for long however
/// many messages it brings. A failure stops at the message that failed; those before it stay.
async fn append_in_turns(state: &Shared, id: &str, messages: Vec<Message>) -> Result<(), ApiError> {
    let messages = std::sync::Arc::new(messages);
    let mut done = 0;
    while done < messages.len() {
        let (messages, id) = (messages.clone(), id.to_owned());
        done += writing(state, move |store, _| {
            let started = std::time::Instant::now();
            Ok(ops::with_session(store, &id, |s| {
                let mut n = 0;
                for m in &messages[done..] {
                    s.append(crate::layout::MAIN, m)?;
                    n += 1;
                    if started.elapsed() >= WRITE_TURN {
                        break;
                    }
                }
                Ok(n)
            })?)
        })
        .await?;
    }
    Ok(())
}

/// `POST /api/v2/conversations/<id>`: appends a message (to `branch`, default main).
pub async fn append(State(state): State<Shared>, UrlPath(id): UrlPath<String>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("No JSON data provided"));
    }
    let req = object(&body)?;
    if !req.contains_key("role") || !req.contains_key("content") {
        return Err(ApiError::bad_request("Missing required fields (role, content)"));
    }
    if !req["content"].is_string() {
        return Err(ApiError::bad_request("content must be a string"));
    }
    let branch = req.get("branch").and_then(Value::as_str).unwrap_or(crate::layout::MAIN).to_owned();
    writing(&state, move |store, _| {
        let message = message_from(&req, &workspace_of(store, &id)?)?;
        if branch != crate::layout::MAIN && !queries::branch_names(&store.connection()?, &id)?.contains(&branch) {
            return Err(ApiError::not_found(format!("Branch not found: {branch}")));
        }
        ops::with_session(store, &id, |s| s.append(&branch, &message))?;
        Ok(Json(json!({"status": "ok"})))
    })
    .await
}

/// The messages gptme has loaded on main (the active view when there is one).
fn loaded(store: &Store, id: &str) -> Result<Vec<Message>, ApiError> {
    super::read::live_summary(&store.connection()?, id)?;
    Ok(crate::sync::document::loaded_messages(&store.connection()?, id, crate::layout::MAIN)?)
}

fn index_in(index: i64, len: usize) -> Result<usize, ApiError> {
    if index < 0 || index as usize >= len {
        return Err(ApiError::not_found(format!("Message index {index} out of range (0-{})", len as i64 - 1)));
    }
    Ok(index as usize)
}

/// The conversation after an edit, as gptme answers (`to_dict(branches=True)`).
fn edited(store: &Store, config: &Config, id: &str) -> Result<Json<Value>, ApiError> {
    let mut d = super::read::conversation_dict(&store.connection()?, id, config.secrets)?;
    if let Some(o) = d.as_object_mut() {
        o.remove("logdir");
    }
    Ok(Json(d))
}

/// `PATCH …/messages/<i>[?truncate=1]`: a user message's new content (and, with `truncate`,
/// nothing after it), with a backup branch as gptme's `edit` keeps.
pub async fn edit_message(
    State(state): State<Shared>,
    UrlPath((id, index)): UrlPath<(String, i64)>,
    Query(p): Params,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    let req = object(&body)?;
    let truncate = p.get("truncate").is_some_and(|t| t == "1");
    let content = match req.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::bad_request("content must be a string")),
    };
    if req.get("files").is_some_and(|f| !f.is_null()) {
        return Err(ApiError::bad_request("editing a message's files is not supported by sessiondb serve"));
    }
    if !truncate && content.as_deref().is_none_or(|c| c.trim().is_empty()) {
        return Err(ApiError::bad_request("content or files is required"));
    }
    writing(&state, move |store, config| {
        let msgs = loaded(store, &id)?;
        let i = index_in(index, msgs.len())?;
        // The web UI was shown the message masked: where a mask still stands, the secret it
        // stood for is kept.
        let content = match config.secrets {
            Shown::Masked => content.map(|c| unmask(&c, &msgs[i].content).into_owned()),
            Shown::AsTheyAre => content,
        };
        let changed = content.as_deref().is_some_and(|c| c != msgs[i].content);
        if changed && msgs[i].role != Role::User {
            return Err(ApiError::bad_request("Can only edit user messages"));
        }
        let mut new: Vec<Message> = msgs[..i].to_vec();
        new.push(match &content {
            Some(c) if changed => msgs[i].with_content(c.clone()),
            _ => msgs[i].clone(),
        });
        if !truncate {
            new.extend_from_slice(&msgs[i + 1..]);
        }
        if !changed && !truncate {
            return Err(ApiError::bad_request("No changes requested"));
        }
        ops::with_session(store, &id, |s| s.edit(crate::layout::MAIN, &new))?;
        edited(store, config, &id)
    })
    .await
}

/// `DELETE …/messages/<i>`: removes one message (not a system message, nor one whose removal
/// would put two messages of one role side by side), with a backup branch.
pub async fn delete_message(State(state): State<Shared>, UrlPath((id, index)): UrlPath<(String, i64)>) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    writing(&state, move |store, config| {
        let msgs = loaded(store, &id)?;
        let i = index_in(index, msgs.len())?;
        if msgs[i].role == Role::System {
            return Err(ApiError::bad_request("Cannot delete system messages"));
        }
        let prev = msgs[..i].iter().rev().find(|m| m.role != Role::System).map(|m| m.role.clone());
        let next = msgs[i + 1..].iter().find(|m| m.role != Role::System).map(|m| m.role.clone());
        if let (Some(p), Some(n)) = (&prev, &next) {
            if p == n {
                return Err(ApiError::bad_request(format!(
                    "Deleting this message would create consecutive '{}' messages, which is not supported by LLM APIs",
                    n.as_str()
                )));
            }
        }
        let new: Vec<Message> = msgs[..i].iter().chain(&msgs[i + 1..]).cloned().collect();
        ops::with_session(store, &id, |s| s.edit(crate::layout::MAIN, &new))?;
        edited(store, config, &id)
    })
    .await
}

/// `POST …/fork?after_message=N[&branch=B]`: a new conversation holding the branch's messages
/// through N, named `Fork of <name> @ msg <N+1>` as gptme names it.
pub async fn fork(State(state): State<Shared>, UrlPath(id): UrlPath<String>, Query(p): Params) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    let after: i64 = p
        .get("after_message")
        .ok_or_else(|| ApiError::bad_request("after_message query parameter is required"))?
        .trim()
        .parse()
        .map_err(|_| ApiError::bad_request("after_message must be an integer"))?;
    let branch = p.get("branch").cloned().unwrap_or_else(|| crate::layout::MAIN.into());
    root_in_place(&state)?;
    let (new_id, msgs) = writing(&state, move |store, config| {
        let summary = super::read::live_summary(&store.connection()?, &id)?;
        let msgs = if branch == crate::layout::MAIN {
            loaded(store, &id)?
        } else {
            let conn = store.connection()?;
            if !queries::branch_names(&conn, &id)?.contains(&branch) {
                return Err(ApiError::not_found(format!("Branch not found: {branch}")));
            }
            queries::branch_messages(&conn, &id, &branch)?
        };
        if after < 0 || after as usize >= msgs.len() {
            return Err(ApiError::bad_request(format!("Message index {after} out of range (0-{})", msgs.len() as i64 - 1)));
        }
        let now = chrono::Utc::now();
        let new_id =
            format!("chat-{}-{:09}", now.to_rfc3339_opts(chrono::SecondsFormat::Micros, false).replace(':', "-"), now.timestamp_subsec_nanos() % 1_000_000_000);
        let name = format!("Fork of {} @ msg {}", summary.name, after + 1);
        ops::new_conversation(store, &config.logs_root, &new_id, Some(&name))?;
        let mut msgs = msgs;
        msgs.truncate(after as usize + 1);
        Ok((new_id, msgs))
    })
    .await?;
    append_in_turns(&state, &new_id, msgs).await?;
    Ok(Json(json!({"status": "ok", "conversation_id": new_id, "session_id": session_id()})))
}

/// `DELETE /api/v2/conversations/<id>`: as `sessiondb rm --yes` (refused while gptme holds it
/// or changes queued in the store are not written out).
pub async fn remove(State(state): State<Shared>, UrlPath(id): UrlPath<String>) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    writing(&state, move |store, _| {
        super::read::live_summary(&store.connection()?, &id)?;
        ops::remove(store, &id, false)?;
        Ok(Json(json!({"status": "ok"})))
    })
    .await
}

/// `PATCH …/config`: only the name (`{"chat": {"name": …}}`) can change here; other settings
/// concern generation, which this server does not do.
pub async fn patch_config(State(state): State<Shared>, UrlPath(id): UrlPath<String>, body: axum::body::Bytes) -> Result<Json<Value>, ApiError> {
    check_id(&id)?;
    let req = object(&body)?;
    let chat = match req.get("chat") {
        Some(Value::Object(c)) => c.clone(),
        None => Map::new(),
        Some(_) => return Err(ApiError::bad_request("'chat' must be an object")),
    };
    let other: Vec<&String> = req.keys().filter(|k| *k != "chat").chain(chat.keys().filter(|k| *k != "name")).collect();
    if !other.is_empty() {
        return Err(ApiError::bad_request(format!("sessiondb serve runs no model: only chat.name can be changed here, not {other:?}")));
    }
    let Some(name) = chat.get("name").and_then(Value::as_str).map(str::to_owned) else {
        return Err(ApiError::bad_request("chat.name (a string) is required"));
    };
    writing(&state, move |store, _| {
        super::read::live_summary(&store.connection()?, &id)?;
        ops::with_session(store, &id, |s| s.rename(&name))?;
        let conn = store.connection()?;
        let conv = crate::store::modify::load_conversation(&conn, &id)?;
        let summary = queries::conversation_summary(&conn, &id)?;
        let text = queries::stored_file(&conn, conv.id, crate::layout::CONFIG)?.map(|(b, _)| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let config = super::gptme_json::chat_config_dict(&text, summary.workspace.as_deref().unwrap_or_default()).unwrap_or(Value::Null);
        Ok(Json(json!({"status": "ok", "message": "Chat config updated", "config": config, "tools": []})))
    })
    .await
}

/// `POST …/step` and `…/rerun`: generation, which this server does not do.
pub async fn no_model() -> ApiError {
    ApiError(
        StatusCode::NOT_IMPLEMENTED,
        "sessiondb serve runs no model: it serves the history. Your message was saved; generate replies with gptme (or gptme-server) on the same logs.".into(),
    )
}
