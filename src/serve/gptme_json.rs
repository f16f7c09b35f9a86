//! gptme-server 0.35.1's JSON shapes, built from what the store holds.
//!
//! Invariant: every value here is what gptme-server would answer for the same files, field for
//! field, except for the deliberate differences the README lists (a non-finite number is
//! `null`, never a bare `NaN`). Pure: no file is read and no database is touched; the callers
//! hand in the rows and messages.

use std::path::{Component, Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::codec::json::to_serde;
use crate::model::Message;
use crate::store::queries::ConversationSummary;

/// gptme's listing reads a whole `conversation.jsonl` only when it is this small or `detail`
/// is asked for; a bigger one is read from its tail, without cost and token totals
/// (`logmanager/conversations.py`, `_TAIL_BYTES`).
const TAIL_BYTES: u64 = 8192;

/// A float as JSON; NaN and infinities (which Python writes as bare `NaN`) become `null`.
fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// One item of `GET /api/v2/conversations`: `asdict(ConversationMeta)` plus the web UI's
/// aliases `message_count` and `last_updated`. `main_size` is the size of the conversation's
/// `conversation.jsonl`; without `detail`, gptme reports no totals for one past
/// [`TAIL_BYTES`], and one branch.
pub fn conversation_item(c: &ConversationSummary, detail: bool, main_size: Option<u64>) -> Value {
    let full_scan = detail || main_size.is_none_or(|s| s <= TAIL_BYTES);
    let (cost, input, output, cache_read, usage) = if full_scan {
        let usage = serde_json::from_str::<Value>(&c.models_usage).unwrap_or_else(|_| json!({}));
        (c.total_cost.map_or(Value::Null, number), c.total_input_tokens, c.total_output_tokens, c.total_cache_read_tokens, null_non_finite(usage))
    } else {
        (json!(0.0), 0, 0, 0, json!({}))
    };
    json!({
        "id": c.chat_id,
        "name": c.name,
        "path": format!("{}/{}", c.source_dir, crate::layout::MAIN_TRANSCRIPT),
        "created": number(c.created),
        "modified": number(c.modified),
        "messages": c.messages,
        "branches": if detail { c.branches } else { 1 },
        "workspace": c.workspace.clone().unwrap_or_else(|| format!("{}/{}", c.source_dir, crate::layout::WORKSPACE)),
        "agent_name": null,
        "agent_path": null,
        "agent_avatar": null,
        "agent_urls": null,
        "model": c.model,
        "total_cost": cost,
        "total_input_tokens": input,
        "total_output_tokens": output,
        "total_cache_read_tokens": cache_read,
        "models_usage": usage,
        "last_message_role": c.last_message_role,
        "last_message_preview": c.last_message_preview,
        "message_count": c.messages,
        "last_updated": number(c.modified),
    })
}

/// `value` with every non-finite number made `null` (serde_json cannot hold one; this is for
/// values parsed with a lenient reader that turned `NaN` into a huge float or similar).
fn null_non_finite(value: Value) -> Value {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| !f.is_finite()) => Value::Null,
        Value::Array(items) => Value::Array(items.into_iter().map(null_non_finite).collect()),
        Value::Object(members) => Value::Object(members.into_iter().map(|(k, v)| (k, null_non_finite(v))).collect()),
        other => other,
    }
}

/// The cursor gptme's paginated listing hands out: `<modified as %.17g>|<quoted id>`.
pub fn encode_cursor(modified: f64, chat_id: &str) -> String {
    format!("{}|{}", py_repr_17g(modified), quote(chat_id))
}

/// A cursor back into (modified, id); a bare number (the legacy cursor) has no id. `None` when
/// it is neither.
pub fn parse_cursor(raw: &str) -> Option<(f64, Option<String>)> {
    match raw.split_once('|') {
        None => raw.trim().parse().ok().map(|t| (t, None)),
        Some((_, "")) => None,
        Some((t, id)) => Some((t.trim().parse().ok()?, Some(unquote(id)))),
    }
}

/// Python's `f"{x:.17g}"`: 17 significant digits, trailing zeros dropped.
fn py_repr_17g(x: f64) -> String {
    let s = format!("{x:.16e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..17).contains(&exp) {
        let decimals = (16 - exp).max(0) as usize;
        let fixed = format!("{x:.decimals$}");
        if fixed.contains('.') {
            fixed.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            fixed
        }
    } else {
        let m = mantissa.trim_end_matches('0').trim_end_matches('.');
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// `urllib.parse.quote(s, safe='')`.
fn quote(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `urllib.parse.unquote`.
fn unquote(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a conversation's attachment paths are made relative to.
pub struct Dirs<'a> {
    pub workspace: &'a Path,
    pub logdir: &'a Path,
}

/// A message as `Message.to_dict()` gives it, its `files` made relative to the workspace or the
/// conversation directory as `api_conversation` does. `m` must be normalised the way gptme
/// holds it ([`crate::codec::normalise::normalise_for_rewrite`]).
pub fn message_dict(m: &Message, dirs: &Dirs) -> Value {
    let mut d = Map::new();
    d.insert("role".into(), json!(m.role.as_str()));
    d.insert("content".into(), json!(m.content));
    d.insert("timestamp".into(), json!(m.timestamp));
    if !m.files.is_empty() {
        d.insert("files".into(), Value::Array(m.files.iter().map(|f| json!(relative_file(f, dirs))).collect()));
    }
    if !m.file_hashes.is_empty() {
        d.insert("file_hashes".into(), Value::Object(m.file_hashes.iter().map(|(k, v)| (k.clone(), json!(v))).collect()));
    }
    if m.pinned {
        d.insert("pinned".into(), json!(true));
    }
    if m.hide {
        d.insert("hide".into(), json!(true));
    }
    if m.ui_only {
        d.insert("ui_only".into(), json!(true));
    }
    if let Some(ttl) = m.ephemeral_ttl {
        d.insert("ephemeral_ttl".into(), json!(ttl));
    }
    if let Some(call_id) = m.call_id.as_deref().filter(|c| !c.is_empty()) {
        d.insert("call_id".into(), json!(call_id));
    }
    if let Some(meta) = m.metadata.as_ref().map(to_serde).filter(|v| v.as_object().is_some_and(|o| !o.is_empty())) {
        d.insert("metadata".into(), meta);
    }
    Value::Object(d)
}

/// Whether gptme takes `s` for a URI rather than a path (`scheme://…`).
fn is_uri(s: &str) -> bool {
    s.split_once("://").is_some_and(|(scheme, _)| !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
}

/// `_abs_to_rel_workspace`: under the workspace, relative to it; else under the conversation
/// directory, relative to that; else absolute. A relative path is taken from the conversation
/// directory (gptme takes it from the server's working directory, which says nothing about
/// the conversation).
fn relative_file(f: &str, dirs: &Dirs) -> String {
    if is_uri(f) {
        return f.to_owned();
    }
    let abs = lexical(&dirs.logdir.join(f));
    for base in [dirs.workspace, dirs.logdir] {
        if let Ok(rel) = abs.strip_prefix(lexical(base)) {
            return rel.to_string_lossy().into_owned();
        }
    }
    abs.to_string_lossy().into_owned()
}

/// `path` with `.` and `..` resolved by its text alone.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `ChatConfig.to_dict()` of a conversation's `config.toml`: the `[chat]` fields gptme knows,
/// with its defaults (`stream`, `interactive`) and the workspace it reports, then `env` (and
/// `mcp` when set). `None` when the text is not TOML (gptme then falls back to defaults).
pub fn chat_config_dict(text: &str, workspace: &str) -> Option<Value> {
    let table: toml::Table = text.parse().ok()?;
    let chat = table.get("chat").and_then(toml::Value::as_table).cloned().unwrap_or_default();
    let mut out = Map::new();
    for key in CHAT_FIELDS {
        let value = match *key {
            "workspace" => Some(json!(tilde(workspace))),
            "stream" | "interactive" => Some(chat.get(*key).map_or(json!(true), toml_to_json)),
            other => chat.get(other).map(toml_to_json).filter(|v| !v.is_null()),
        };
        if let Some(v) = value {
            out.insert((*key).into(), v);
        }
    }
    let mut d = Map::new();
    d.insert("chat".into(), Value::Object(out));
    d.insert("env".into(), table.get("env").map_or(json!({}), toml_to_json));
    if let Some(mcp) = table.get("mcp") {
        d.insert("mcp".into(), toml_to_json(mcp));
    }
    Some(Value::Object(d))
}

/// `ChatConfig`'s fields in declaration order (gptme 0.35.1, `config/chat.py`).
const CHAT_FIELDS: &[&str] = &[
    "name",
    "model",
    "tools",
    "tool_format",
    "stream",
    "interactive",
    "no_confirm",
    "watch_autowake",
    "max_tokens",
    "context_budget",
    "temperature",
    "top_p",
    "workspace",
    "agent",
    "system_prompt",
    "agent_profile",
    "allow_hosts",
];

/// `path_with_tilde`: the home directory spelled `~`.
fn tilde(path: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/" => match path.strip_prefix(&home) {
            Some("") => "~".into(),
            Some(rest) if rest.starts_with('/') => format!("~{rest}"),
            _ => path.to_owned(),
        },
        _ => path.to_owned(),
    }
}

fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => json!(s),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => number(*f),
        toml::Value::Boolean(b) => json!(b),
        toml::Value::Datetime(d) => json!(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(t.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_spell_floats_as_python() {
        assert_eq!(py_repr_17g(1796367151.5319998), "1796367151.5319998");
        assert_eq!(py_repr_17g(1700000000.0), "1700000000");
        let c = encode_cursor(1700000000.25, "a b/c");
        assert_eq!(c, "1700000000.25|a%20b%2Fc");
        assert_eq!(parse_cursor(&c), Some((1700000000.25, Some("a b/c".into()))));
        assert_eq!(parse_cursor("12.5"), Some((12.5, None)));
        assert_eq!(parse_cursor("x|"), None);
    }

    #[test]
    fn files_are_made_relative_as_gptme_does() {
        let dirs = Dirs { workspace: Path::new("/w"), logdir: Path::new("/l/c") };
        assert_eq!(relative_file("/w/a/b.txt", &dirs), "a/b.txt");
        assert_eq!(relative_file("attachments/x.png", &dirs), "attachments/x.png");
        assert_eq!(relative_file("/etc/passwd", &dirs), "/etc/passwd");
        assert_eq!(relative_file("https://x.org/a", &dirs), "https://x.org/a");
    }
}
