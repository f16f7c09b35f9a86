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
/// the `gptme` package that a Python interpreter imports ([`pythons`]). `None` when none has an
/// `index.html`.
pub fn locate(given: Option<PathBuf>) -> Option<PathBuf> {
    let has_index = |d: &Path| d.join("index.html").is_file();
    if let Some(d) = given {
        return has_index(&d).then_some(d);
    }
    if let Some(d) = std::env::var_os("GPTME_WEBUI_DIR").map(PathBuf::from) {
        return has_index(&d).then_some(d);
    }
    pythons().into_iter().find_map(|python| {
        let out = std::process::Command::new(python)
            .args(["-c", "import gptme.server, os; print(os.path.join(os.path.dirname(gptme.server.__file__), 'webui-dist'))"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        (out.status.success() && has_index(&d)).then_some(d)
    })
}

/// The interpreters asked for gptme, in turn: `$GPTME_PYTHON` alone when set; else the one the
/// `gptme` command on `PATH` runs with (its `#!` line: pipx and `uv tool` install gptme in a
/// virtual environment of its own, which `python3` does not see), then `python3`.
fn pythons() -> Vec<std::ffi::OsString> {
    if let Some(python) = std::env::var_os("GPTME_PYTHON") {
        return vec![python];
    }
    let command = std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|dir| dir.join("gptme")).find(|p| p.is_file()));
    command.and_then(|c| interpreter(&c)).into_iter().chain(["python3".into()]).collect()
}

/// The program a script's `#!` line names (through `env`, the program `env` is given).
fn interpreter(script: &Path) -> Option<std::ffi::OsString> {
    use std::io::Read;
    let mut head = [0u8; 512];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?.lines().next()?.strip_prefix("#!")?;
    let mut words = line.split_whitespace();
    let program = words.next()?;
    let program = if program.ends_with("/env") { words.find(|w| !w.starts_with('-'))? } else { program };
    Some(program.into())
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
            "sessiondb serve has no web UI to serve: give --webui-dir, set GPTME_WEBUI_DIR, or install gptme (pipx install gptme, or pip install gptme) so that the gptme command or python3 finds it.\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scripts_interpreter_is_read_from_its_first_line() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("#!/home/you/.local/pipx/venvs/gptme/bin/python\nimport sys\n", Some("/home/you/.local/pipx/venvs/gptme/bin/python")),
            ("#!/usr/bin/env python3\n", Some("python3")),
            ("#!/usr/bin/env -S python3 -u\n", Some("python3")),
            ("#! /opt/py/bin/python3.12 -E\n", Some("/opt/py/bin/python3.12")),
            ("\x7fELF binary", None),
            ("", None),
        ];
        for (i, (text, want)) in cases.into_iter().enumerate() {
            let script = dir.path().join(format!("gptme-{i}"));
            std::fs::write(&script, text).unwrap();
            assert_eq!(interpreter(&script), want.map(std::ffi::OsString::from), "{text:?}");
        }
    }
}
