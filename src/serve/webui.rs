//! The web UI: gptme's own build (`gptme/server/webui-dist`), served from where it is
//! installed. Nothing of it is copied into this repository.
//!
//! Invariant: only files under the web UI directory are served (the path is resolved and must
//! stay inside); an unknown page gets `index.html` (the UI routes itself), an unknown API path
//! a JSON 404, and without a web UI every page says how to get one.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::Shared;

/// The web UI to serve: `given` (`--webui-dir`), else `$GPTME_WEBUI_DIR`, else the build inside
/// the `gptme` package that `python3` imports. `None` when none has an `index.html`.
pub fn locate(given: Option<PathBuf>) -> Option<PathBuf> {
    let has_index = |d: &Path| d.join("index.html").is_file();
    if let Some(d) = given {
        return has_index(&d).then_some(d);
    }
    if let Some(d) = std::env::var_os("GPTME_WEBUI_DIR").map(PathBuf::from) {
        return has_index(&d).then_some(d);
    }
    let python = std::env::var_os("GPTME_PYTHON").unwrap_or_else(|| "python3".into());
    let out = std::process::Command::new(python)
        .args(["-c", "import gptme.server, os; print(os.path.join(os.path.dirname(gptme.server.__file__), 'webui-dist'))"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && has_index(&d)).then_some(d)
}

/// Everything no route took: an API path is a JSON 404; anything else a file of the web UI.
pub(crate) async fn fallback(State(state): State<Shared>, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    if path.starts_with("/api/") {
        return (StatusCode::NOT_FOUND, Json(json!({"error": "Not Found"}))).into_response();
    }
    let Some(dir) = state.config.webui.clone() else {
        return (
            StatusCode::NOT_FOUND,
            "sessiondb serve has no web UI to serve: give --webui-dir, set GPTME_WEBUI_DIR, or install gptme (pip install gptme) so that python3 finds it.\n",
        )
            .into_response();
    };
    tokio::task::spawn_blocking(move || file(&dir, &path)).await.unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn file(dir: &Path, path: &str) -> Response {
    let Ok(base) = dir.canonicalize() else { return StatusCode::NOT_FOUND.into_response() };
    let rel = path.trim_start_matches('/');
    let wanted = super::lexical(&base.join(rel));
    let found = wanted.canonicalize().ok().filter(|p| p.starts_with(&base) && p.is_file());
    let (file, cache) = match found {
        Some(f) => {
            let immutable = rel.starts_with("assets/");
            (f, if immutable { "public, max-age=31536000, immutable" } else { "no-cache" })
        }
        None => (base.join("index.html"), "no-cache"),
    };
    match std::fs::read(&file) {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(&file)), (header::CACHE_CONTROL, cache)], Body::from(bytes)).into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "mp3" => "audio/mpeg",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}
