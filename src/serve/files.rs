//! A conversation's own files: `…/files/<path>` (attachments and workspace files the messages
//! link to) and `…/workspace[/<path>]` (the workspace browser).
//!
//! Invariant: a path from a URL is resolved (links followed) and served only when it lies
//! inside the conversation directory or its workspace; `..`, absolute paths and links leading
//! out are refused with 400, as gptme-server's `safe_workspace_path` refuses them. Nothing is
//! created: a missing workspace is a 404, not a new directory. A text file is answered with its
//! secrets masked unless the server shows them (`--show-secrets`).

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::read::live_summary;
use super::{blocking, check_id, ApiError, Shared};

/// `base`/`rel` resolved, when it stays inside `base` (itself resolved). `Err` with gptme's
/// message when it escapes or is too long; `Ok(None)` when it does not exist.
fn inside(base: &Path, rel: &str) -> Result<Option<PathBuf>, ApiError> {
    if rel.split('/').any(|c| c.len() > 255) || rel.len() > 4096 {
        return Err(ApiError::bad_request("Path too long"));
    }
    let Ok(base) = base.canonicalize() else { return Ok(None) };
    let escapes = || ApiError::bad_request(format!("Path escapes workspace: '{rel}'"));
    // As Python's `resolve()`: links are followed before `..` is applied, so a `..` after a
    // link leads out of wherever the link points.
    match base.join(rel).canonicalize() {
        Ok(p) if p.starts_with(&base) => Ok(Some(p)),
        Ok(_) => Err(escapes()),
        Err(_) if !resolved(&base.join(rel)).starts_with(&base) => Err(escapes()),
        Err(_) => Ok(None),
    }
}

/// Python's `Path.resolve()` of a path that is not all there (`strict=False`): each link on the
/// way is followed wherever it leads, even somewhere missing, before a `..` after it is applied;
/// from the first component that does not exist on, the rest is taken by its text. So
/// `workspace/../x` where `workspace` links out of the conversation leads out, as in gptme.
fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    // Each name to take, `None` for `..`.
    let names = |p: &Path| -> Vec<Option<std::ffi::OsString>> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(Some(n.to_owned())),
                Component::ParentDir => Some(None),
                _ => None,
            })
            .collect()
    };
    let mut todo: std::collections::VecDeque<Option<std::ffi::OsString>> = names(path).into();
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        let Some(name) = name else {
            out.pop();
            continue;
        };
        let next = out.join(&name);
        match std::fs::read_link(&next) {
            // As Python, a loop of links (40 followed) ends the following.
            Ok(target) if links < 40 => {
                links += 1;
                let target = if target.is_absolute() { target } else { out.join(target) };
                for n in names(&target).into_iter().rev() {
                    todo.push_front(n);
                }
                out = PathBuf::from("/");
            }
            _ => out = next,
        }
    }
    out
}

/// The conversation's directory and the workspace its files are looked up in: as gptme's
/// `LogManager.workspace`, `<dir>/workspace` (resolved) when it is there, else the configured
/// one.
fn dirs(store: &crate::store::Store, id: &str) -> Result<(PathBuf, PathBuf), ApiError> {
    let conn = store.connection()?;
    let s = live_summary(&conn, id)?;
    let logdir = PathBuf::from(&s.source_dir);
    let local = logdir.join(crate::layout::WORKSPACE);
    let workspace = match local.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) if local.is_symlink() => local,
        Err(_) => super::read::configured_workspace(&s),
    };
    Ok((logdir, workspace))
}

/// `GET …/files/<path>`: the file under the conversation directory, else under the workspace.
pub async fn conversation_file(State(state): State<Shared>, UrlPath((id, path)): UrlPath<(String, String)>) -> Result<Response, ApiError> {
    check_id(&id)?;
    if path.starts_with('/') {
        // Flask's `<path:>` does not take an absolute path: gptme-server's router says 404.
        return Err(ApiError::not_found("Not Found"));
    }
    blocking(&state, move |store, config| {
        let (logdir, workspace) = dirs(store, &id)?;
        let found = match inside(&logdir, &path).map_err(|_| ApiError::bad_request("Path escapes conversation directory"))? {
            Some(p) => Some(p),
            None => inside(&workspace, &path).ok().flatten(),
        };
        let file = found.filter(|p| p.is_file()).ok_or_else(|| ApiError::not_found("File not found"))?;
        let mut bytes = std::fs::read(&file).map_err(|_| ApiError::not_found("File not found"))?;
        // A text file is answered with its secrets masked, as the messages are.
        if let Ok(text) = std::str::from_utf8(&bytes) {
            if let std::borrow::Cow::Owned(masked) = config.secrets.text(text) {
                bytes = masked.into_bytes();
            }
        }
        let mime = mime_type(&file).unwrap_or("application/octet-stream");
        Ok(([(header::CONTENT_TYPE, mime)], Body::from(bytes)).into_response())
    })
    .await
}

/// `GET …/workspace`.
pub async fn workspace(state: State<Shared>, id: UrlPath<String>, q: Query<std::collections::HashMap<String, String>>) -> Result<Response, ApiError> {
    browse(state, id.0, None, q.0).await
}

/// `GET …/workspace/<path>`.
pub async fn workspace_path(
    state: State<Shared>,
    UrlPath((id, path)): UrlPath<(String, String)>,
    q: Query<std::collections::HashMap<String, String>>,
) -> Result<Response, ApiError> {
    browse(state, id, Some(path), q.0).await
}

/// gptme's `browse_workspace`: a directory's listing (directories first, then by name ignoring
/// case), a file's metadata, or an image's bytes.
async fn browse(State(state): State<Shared>, id: String, sub: Option<String>, q: std::collections::HashMap<String, String>) -> Result<Response, ApiError> {
    check_id(&id)?;
    blocking(&state, move |store, _| {
        let (logdir, workspace) = dirs(store, &id)?;
        let root = match q.get("root").map(String::as_str).unwrap_or("workspace") {
            "workspace" => workspace,
            "attachments" => logdir.join(crate::layout::ATTACHMENTS_DIR),
            _ => return Err(ApiError::bad_request("root must be 'workspace' or 'attachments'")),
        };
        if !root.is_dir() {
            // gptme creates a conversation's default workspace (or attachments directory)
            // when asked for it; this server creates nothing, and answers what it would hold.
            let default = [logdir.join(crate::layout::WORKSPACE), logdir.join(crate::layout::ATTACHMENTS_DIR)];
            // (A link there that leads nowhere is not nothing: gptme says it is not found.)
            if sub.is_none() && default.contains(&root) && std::fs::symlink_metadata(&root).is_err() {
                return Ok(Json(json!([])).into_response());
            }
            return Err(ApiError::not_found("Workspace not found"));
        }
        let show_hidden = q.get("show_hidden").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let base = root.canonicalize().map_err(|_| ApiError::not_found("Workspace not found"))?;
        let path = match sub.as_deref().filter(|s| !s.is_empty()) {
            None => base.clone(),
            Some(s) => inside(&base, s)?.ok_or_else(|| ApiError::not_found("File or directory not found"))?,
        };
        if path.is_file() {
            if let Some(mime) = mime_type(&path).filter(|m| m.starts_with("image/")) {
                let bytes = std::fs::read(&path).map_err(|_| ApiError::not_found("File not found"))?;
                return Ok(([(header::CONTENT_TYPE, mime)], Body::from(bytes)).into_response());
            }
            return Ok(Json(file_dict(&path, &base)?).into_response());
        }
        let mut items = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if !show_hidden && name.starts_with('.') {
                continue;
            }
            if let Ok(d) = file_dict(&entry.path(), &base) {
                items.push(d);
            }
        }
        items.sort_by_key(|d| (d["type"] == "file", d["name"].as_str().unwrap_or("").to_lowercase()));
        Ok(Json(Value::Array(items)).into_response())
    })
    .await
}

/// `WorkspaceFile.to_dict()`.
fn file_dict(path: &Path, base: &Path) -> Result<Value, ApiError> {
    let meta = std::fs::metadata(path).map_err(|_| ApiError::not_found("File not found"))?;
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0.0, |d| d.as_secs_f64());
    let is_dir = meta.is_dir();
    Ok(json!({
        "name": path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        "path": path.strip_prefix(base).unwrap_or(path).to_string_lossy(),
        "type": if is_dir { "directory" } else { "file" },
        "size": meta.len(),
        "modified": crate::codec::timestamp::format_utc(mtime),
        "mime_type": if is_dir { None } else { mime_type(path) },
    }))
}

/// Python's `mimetypes.guess_type` for the types a conversation commonly holds (an unknown
/// suffix has none, as in Python).
fn mime_type(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?.to_lowercase();
    let (_, ext) = name.rsplit_once('.')?;
    // `archive.tar.gz` is a tar archive (gzip its encoding), as Python says.
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        return Some("application/x-tar");
    }
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/vnd.microsoft.icon",
        "txt" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" => "text/javascript",
        "py" => "text/x-python",
        "json" => "application/json",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "tar" => "application/x-tar",
        "xml" => "application/xml",
        "toml" => "application/toml",
        "sh" => "application/x-sh",
        "mp3" => "audio/mpeg",
        "wav" => "audio/x-wav",
        "mp4" => "video/mp4",
        _ => return None,
    })
}
