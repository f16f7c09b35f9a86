//! Messages ⇄ gptme's TOML layout for editing by hand (`[[messages]]` tables).
//!
//! The layout is gptme's (`msgs_to_toml`), so gptme's `toml_to_msgs` reads what this writes,
//! but the round trip is lossless where gptme's own is not (0.35.1):
//! - content escapes every backslash, quote and control character (gptme turns a literal
//!   backslash followed by `n` into a line continuation, and lets `"""` end the string early);
//!   newlines and tabs stay literal so the text reads naturally;
//! - `ephemeral_ttl` is read back (gptme's multi-message reader drops it);
//! - floats keep every digit (gptme prints six decimals), `call_id` is escaped;
//! - what TOML cannot hold at all — `null`, integers beyond 64 bits, top-level fields from a
//!   newer gptme that are not representable — travels as exact JSON in one extra key,
//!   `sessiondb_json`, which gptme ignores and this reader applies last.
//!
//! Content is written as gptme writes it: `"""`, a newline, the text, a newline, `"""`; the
//! reader removes exactly that one trailing newline and keeps every other character.

use super::json::{self, Json};
use super::message_line::message_from_json;
use crate::model::Message;

/// The key carrying values TOML cannot represent, as a JSON object of top-level fields.
const EXACT_JSON_KEY: &str = "sessiondb_json";

/// Why a TOML text is not a list of messages, with the 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct TomlError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Writes messages as `[[messages]]` tables.
pub fn messages_to_toml(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        write_message(&mut out, m);
        out.push('\n');
    }
    out
}

fn write_message(out: &mut String, m: &Message) {
    out.push_str("[[messages]]\nrole = ");
    basic_string(out, m.role.as_str());
    out.push_str("\ncontent = \"\"\"\n");
    multiline_body(out, &m.content);
    out.push_str("\n\"\"\"\n");
    if let Some(ts) = &m.timestamp {
        out.push_str("timestamp = ");
        basic_string(out, ts);
        out.push('\n');
    }
    for (flag, set) in [("pinned", m.pinned), ("hide", m.hide), ("ui_only", m.ui_only)] {
        if set {
            out.push_str(flag);
            out.push_str(" = true\n");
        }
    }
    if let Some(ttl) = m.ephemeral_ttl {
        out.push_str(&format!("ephemeral_ttl = {ttl}\n"));
    }
    if !m.files.is_empty() {
        out.push_str("files = [");
        for (i, f) in m.files.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            basic_string(out, f);
        }
        out.push_str("]\n");
    }
    if !m.file_hashes.is_empty() {
        out.push_str("file_hashes = { ");
        for (i, (path, hash)) in m.file_hashes.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            basic_string(out, path);
            out.push_str(" = ");
            basic_string(out, hash);
        }
        out.push_str(" }\n");
    }
    let mut exact: Vec<(String, Json)> = Vec::new();
    if let Some(metadata) = &m.metadata {
        if representable(metadata) && matches!(metadata, Json::Object(_)) {
            out.push_str("metadata = ");
            toml_value(out, metadata);
            out.push('\n');
        } else {
            exact.push(("metadata".into(), metadata.clone()));
        }
    }
    if let Some(call_id) = &m.call_id {
        out.push_str("call_id = ");
        basic_string(out, call_id);
        out.push('\n');
    }
    for (key, value) in &m.extra {
        if representable(value) && is_bare_key(key) && key != EXACT_JSON_KEY {
            out.push_str(key);
            out.push_str(" = ");
            toml_value(out, value);
            out.push('\n');
        } else {
            exact.push((key.clone(), value.clone()));
        }
    }
    if !exact.is_empty() {
        out.push_str(EXACT_JSON_KEY);
        out.push_str(" = ");
        basic_string(out, &json::dump(&Json::Object(exact)));
        out.push('\n');
    }
}

fn is_bare_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether TOML can hold the value exactly (no null, integers within 64 bits).
fn representable(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Int(digits) => digits.parse::<i64>().is_ok(),
        Json::Array(items) => items.iter().all(representable),
        Json::Object(members) => members.iter().all(|(_, v)| representable(v)),
        _ => true,
    }
}

fn toml_value(out: &mut String, value: &Json) {
    match value {
        Json::Null => unreachable!("checked by representable()"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Int(digits) => out.push_str(digits),
        Json::Float(f) if f.is_nan() => out.push_str("nan"),
        Json::Float(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "inf" } else { "-inf" }),
        // Python's repr is valid TOML and reads back to the same double.
        Json::Float(f) => json::write_py_float(out, *f),
        Json::Str(s) => basic_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                toml_value(out, item);
            }
            out.push(']');
        }
        Json::Object(members) => {
            if members.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push_str("{ ");
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                basic_string(out, key);
                out.push_str(" = ");
                toml_value(out, item);
            }
            out.push_str(" }");
        }
    }
}

/// A single-line TOML basic string, spelled as tomlkit (and so gptme) spells it.
fn basic_string(out: &mut String, s: &str) {
    out.push_str(&super::config::toml_string(s));
}

/// The body of a multi-line basic string: newlines and tabs literal, `"` and `\` escaped (so
/// no `"""` and no line-continuation backslash can occur), every other control character —
/// carriage returns included, which TOML readers may normalise — as a `\u` escape.
fn multiline_body(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn from_toml_value(value: &toml::Value) -> Json {
    match value {
        toml::Value::String(s) => Json::Str(s.clone()),
        toml::Value::Integer(i) => Json::Int(i.to_string()),
        toml::Value::Float(f) => Json::Float(*f),
        toml::Value::Boolean(b) => Json::Bool(*b),
        toml::Value::Datetime(d) => Json::Str(d.to_string()),
        toml::Value::Array(items) => Json::Array(items.iter().map(from_toml_value).collect()),
        toml::Value::Table(t) => Json::Object(t.iter().map(|(k, v)| (k.clone(), from_toml_value(v))).collect()),
    }
}

/// Reads `[[messages]]` tables back into messages. A text that is not TOML, or a message that
/// lacks `role` or `content` or has a mistyped field, is an error naming where.
pub fn toml_to_messages(text: &str) -> Result<Vec<Message>, TomlError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let (line, column) = e.span().map_or((1, 1), |span| line_column(text, span.start));
        TomlError { line, column, message: e.message().to_owned() }
    })?;
    let error_at = |needle: &str, index: usize, message: String| {
        // Point at the index-th `[[messages]]` header for errors inside one message.
        let offset = text.match_indices(needle).nth(index).map_or(0, |(i, _)| i);
        let (line, column) = line_column(text, offset);
        TomlError { line, column, message }
    };
    let messages = match table.get("messages") {
        None => return Ok(Vec::new()),
        Some(toml::Value::Array(items)) => items,
        Some(_) => return Err(error_at("messages", 0, "`messages` must be an array of tables ([[messages]])".into())),
    };
    let mut out = Vec::with_capacity(messages.len());
    for (i, item) in messages.iter().enumerate() {
        let toml::Value::Table(t) = item else {
            return Err(error_at("[[messages]]", i, format!("message {} is not a table", i + 1)));
        };
        let mut members: Vec<(String, Json)> = Vec::new();
        let mut exact: Option<Json> = None;
        for (key, value) in t {
            match (key.as_str(), value) {
                (EXACT_JSON_KEY, toml::Value::String(s)) => {
                    let parsed = json::parse(s).map_err(|e| error_at("[[messages]]", i, format!("message {}: {EXACT_JSON_KEY}: {e}", i + 1)))?;
                    exact = Some(parsed.value);
                }
                ("content", toml::Value::String(s)) => {
                    let content = s.strip_suffix('\n').unwrap_or(s);
                    members.push(("content".into(), Json::Str(content.to_owned())));
                }
                _ => members.push((key.clone(), from_toml_value(value))),
            }
        }
        if let Some(Json::Object(exact)) = exact {
            for (key, value) in exact {
                match members.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => members.push((key, value)),
                }
            }
        }
        let message = message_from_json(Json::Object(members)).map_err(|e| error_at("[[messages]]", i, format!("message {}: {e}", i + 1)))?;
        out.push(message);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::message_line::encode_message;
    use crate::model::Role;

    fn roundtrip(m: &Message) -> Message {
        let text = messages_to_toml(std::slice::from_ref(m));
        let back = toml_to_messages(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back.len(), 1);
        assert_eq!(encode_message(&back[0]), encode_message(m), "\n{text}");
        back.into_iter().next().unwrap()
    }

    #[test]
    fn gptme_lossy_cases_survive() {
        for content in [
            "literal \\n backslash-n",
            "\"\"\" triple",
            "trailing space   ",
            "\n\nleading newlines",
            "ctrl \u{1}\u{7f}\r\n crlf",
            "ends with quote\"",
            "ends with backslash\\",
            "",
            "\t",
            "\u{2028} 中文 😀",
        ] {
            let mut m = Message::new(Role::User, content, Some("2026-07-16T10:00:00".into()));
            m.ephemeral_ttl = Some(3);
            m.call_id = Some("a\"b\\c".into());
            assert_eq!(roundtrip(&m).content, content);
        }
    }

    #[test]
    fn metadata_keeps_exact_values_and_order() {
        let mut m = Message::new(Role::Assistant, "x", Some("2026-07-16T10:00:00".into()));
        m.metadata =
            Some(json::parse(r#"{"model": "m", "cost": 0.0123456789, "z": [1, 2.5, {"q": true}], "a": NaN, "usage": {"input_tokens": 10}}"#).unwrap().value);
        let text = messages_to_toml(std::slice::from_ref(&m));
        assert!(!text.contains(EXACT_JSON_KEY), "{text}");
        roundtrip(&m);
        m.metadata = Some(json::parse(r#"{"status": null, "big": 123456789012345678901234567890}"#).unwrap().value);
        let text = messages_to_toml(std::slice::from_ref(&m));
        assert!(text.contains(EXACT_JSON_KEY), "{text}");
        roundtrip(&m);
        m.extra = vec![("newer_field".into(), Json::Int("3".into())), ("odd key".into(), Json::Null)];
        roundtrip(&m);
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = toml_to_messages("[[messages]]\nrole = \"user\"\ncontent = \"\"\"\nunterminated\n").unwrap_err();
        assert!(e.line >= 3, "{e}");
        let e = toml_to_messages("[[messages]]\nrole = \"user\"\n\n[[messages]]\nrole = \"user\"\ncontent = 5\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}"); // the first message lacks content
        assert!(e.message.contains("message 1"), "{e}");
    }
}
