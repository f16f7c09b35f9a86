//! One line of `conversation.jsonl` (and of branch, view and lossless files) ⇄ [`Message`].
//!
//! Reading follows gptme 0.35's `_message_from_json_line`: the line is decoded as UTF-8 with
//! replacement, stripped, and must be a JSON object whose `role` and `content` are strings.
//! Writing produces exactly `json.dumps(message.to_dict())`.
//!
//! The lossless rule lives here: [`decode_line`] says whether the line is *canonical*, i.e.
//! whether [`encode_message`] of the decoded message gives back the very same bytes. Callers
//! keep the original bytes of every line that is not canonical (legacy forms, unknown fields in
//! an unusual order, malformed lines), so that writing a file back never changes a byte.

use super::json::{self, dump_into, write_py_string, Json};
use super::timestamp;
use crate::model::{Message, Role};

/// What a line of a message file holds.
#[derive(Debug, Clone, PartialEq)]
pub enum LineContent {
    Message(Message),
    /// Empty or whitespace-only: gptme skips it silently.
    Blank,
    /// Not a message gptme would load; the reason says why (gptme skips it with a warning).
    Malformed(String),
}

/// A decoded line and whether re-encoding reproduces it byte for byte.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedLine {
    pub content: LineContent,
    pub canonical: bool,
}

/// Decodes one line, given without its terminating newline.
pub fn decode_line(line: &[u8]) -> DecodedLine {
    let (text, utf8_lossy) = match std::str::from_utf8(line) {
        Ok(s) => (std::borrow::Cow::Borrowed(s), false),
        Err(_) => (String::from_utf8_lossy(line), true),
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return DecodedLine { content: LineContent::Blank, canonical: false };
    }
    let parsed = match json::parse(trimmed) {
        Ok(p) => p,
        Err(e) => {
            let reason = if utf8_lossy { format!("invalid UTF-8, then invalid JSON: {e}") } else { format!("invalid JSON: {e}") };
            return DecodedLine { content: LineContent::Malformed(reason), canonical: false };
        }
    };
    match message_from_json(parsed.value) {
        Ok(message) => {
            let canonical = !utf8_lossy && !parsed.lossy && encode_message(&message).as_bytes() == line;
            DecodedLine { content: LineContent::Message(message), canonical }
        }
        Err(reason) => DecodedLine { content: LineContent::Malformed(reason), canonical: false },
    }
}

/// The messages of a whole message file (`conversation.jsonl`, a branch or a view), as gptme
/// loads them: blank and malformed lines skipped.
pub fn decode_messages(bytes: &[u8]) -> Vec<Message> {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| match decode_line(l).content {
            LineContent::Message(m) => Some(m),
            _ => None,
        })
        .collect()
}

/// Builds a message from a decoded JSON value with gptme's reading rules, or says why gptme
/// would skip it.
pub fn message_from_json(value: Json) -> Result<Message, String> {
    let Json::Object(members) = value else {
        return Err("expected a JSON object".into());
    };
    let mut role = None;
    let mut content = None;
    let mut message = Message::new(Role::User, "", None);
    for (key, value) in members {
        match key.as_str() {
            "role" => match value {
                Json::Str(s) => role = Some(Role::parse(&s)),
                _ => return Err("'role' must be a string".into()),
            },
            "content" => match value {
                Json::Str(s) => content = Some(s),
                _ => return Err("'content' must be a string".into()),
            },
            "timestamp" => match value {
                Json::Str(s) if timestamp::parse(&s).is_some() => message.timestamp = Some(s),
                Json::Str(s) => return Err(format!("timestamp {s:?} is not ISO 8601")),
                _ => return Err("'timestamp' must be a string".into()),
            },
            "files" => match value {
                Json::Array(items) => {
                    for item in items {
                        match item {
                            Json::Str(s) => message.files.push(s),
                            _ => return Err("'files' must be a list of strings".into()),
                        }
                    }
                }
                _ => return Err("'files' must be a list".into()),
            },
            "file_hashes" => match value {
                Json::Object(hashes) => {
                    for (path, hash) in hashes {
                        match hash {
                            Json::Str(h) => message.file_hashes.push((path, h)),
                            _ => return Err("'file_hashes' values must be strings".into()),
                        }
                    }
                }
                _ => return Err("'file_hashes' must be an object".into()),
            },
            "call_id" => match value {
                Json::Str(s) => message.call_id = Some(s),
                Json::Null => {}
                _ => return Err("'call_id' must be a string".into()),
            },
            "pinned" => message.pinned = flag(&value, "pinned")?,
            "hide" => message.hide = flag(&value, "hide")?,
            "ui_only" => message.ui_only = flag(&value, "ui_only")?,
            "ephemeral_ttl" => match value {
                Json::Null => {}
                Json::Int(_) => message.ephemeral_ttl = Some(value.as_i64().ok_or("'ephemeral_ttl' is out of range")?),
                _ => return Err("'ephemeral_ttl' must be an integer".into()),
            },
            "metadata" => match value {
                Json::Object(_) => message.metadata = Some(value),
                v if !v.is_truthy() => message.metadata = Some(v),
                _ => return Err("'metadata' must be an object".into()),
            },
            // `quiet` is never written by gptme; anything else is from a newer version.
            _ => message.extra.push((key, value)),
        }
    }
    message.role = role.ok_or("'role' and 'content' must be strings")?;
    message.content = content.ok_or("'role' and 'content' must be strings")?;
    Ok(message)
}

fn flag(value: &Json, name: &str) -> Result<bool, String> {
    match value {
        Json::Bool(b) => Ok(*b),
        Json::Null => Ok(false),
        _ => Err(format!("'{name}' must be a boolean")),
    }
}

/// The line gptme writes for `message`, without the newline: `json.dumps(message.to_dict())`.
/// Fields gptme does not know ([`Message::extra`]) follow the known ones.
pub fn encode_message(message: &Message) -> String {
    let mut out = String::with_capacity(message.content.len() + 96);
    encode_message_into(&mut out, message);
    out
}

/// Appends the encoded message to `out` (used for messages nested in event payloads).
pub fn encode_message_into(out: &mut String, message: &Message) {
    out.push_str("{\"role\": ");
    write_py_string(out, message.role.as_str());
    out.push_str(", \"content\": ");
    write_py_string(out, &message.content);
    if let Some(ts) = &message.timestamp {
        out.push_str(", \"timestamp\": ");
        write_py_string(out, ts);
    }
    if !message.files.is_empty() {
        out.push_str(", \"files\": [");
        for (i, f) in message.files.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_py_string(out, f);
        }
        out.push(']');
    }
    if !message.file_hashes.is_empty() {
        out.push_str(", \"file_hashes\": {");
        for (i, (path, hash)) in message.file_hashes.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_py_string(out, path);
            out.push_str(": ");
            write_py_string(out, hash);
        }
        out.push('}');
    }
    if message.pinned {
        out.push_str(", \"pinned\": true");
    }
    if message.hide {
        out.push_str(", \"hide\": true");
    }
    if message.ui_only {
        out.push_str(", \"ui_only\": true");
    }
    if let Some(ttl) = message.ephemeral_ttl {
        out.push_str(", \"ephemeral_ttl\": ");
        out.push_str(&ttl.to_string());
    }
    if let Some(call_id) = message.call_id.as_deref().filter(|c| !c.is_empty()) {
        out.push_str(", \"call_id\": ");
        write_py_string(out, call_id);
    }
    if let Some(metadata) = message.metadata.as_ref().filter(|m| m.is_truthy()) {
        out.push_str(", \"metadata\": ");
        dump_into(out, metadata);
    }
    for (key, value) in &message.extra {
        out.push_str(", ");
        write_py_string(out, key);
        out.push_str(": ");
        dump_into(out, value);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(line: &str) -> DecodedLine {
        decode_line(line.as_bytes())
    }

    #[test]
    fn gptme_lines_are_canonical() {
        let lines = [
            r#"{"role": "user", "content": "hello", "timestamp": "2026-07-16T10:00:00"}"#,
            r#"{"role": "assistant", "content": "caf\u00e9 \ud83d\ude00\n\"q\" \\", "timestamp": "2026-07-16T10:00:00.123456", "pinned": true, "hide": true, "ephemeral_ttl": 2, "call_id": "c1", "metadata": {"model": "m", "cost": 1e-05, "usage": {"input_tokens": 1}}}"#,
            r#"{"role": "user", "content": "", "timestamp": "2026-07-16T10:00:00", "files": ["/a b.png"], "file_hashes": {"/a b.png": "0123456789abcdef"}}"#,
        ];
        for line in lines {
            let d = roundtrip(line);
            assert!(d.canonical, "{line}");
            let LineContent::Message(m) = d.content else { panic!() };
            assert_eq!(encode_message(&m), line);
        }
    }

    #[test]
    fn legacy_and_unusual_lines_are_messages_but_not_canonical() {
        for line in [
            r#"{"role": "user", "content": "legacy, undated"}"#.to_string(),
            r#"{"role":"user","content":"compact"}"#.to_string(),
            r#"{"content": "x", "role": "user", "timestamp": "2026-07-16T10:00:00"}"#.to_string(),
            "{\"role\": \"user\", \"content\": \"caf\u{e9}\", \"timestamp\": \"2026-07-16T10:00:00\"}".to_string(),
            r#"{"role": "user", "content": "x", "timestamp": "2026-07-16T10:00:00", "pinned": false}"#.to_string(),
        ] {
            let d = roundtrip(&line);
            assert!(matches!(d.content, LineContent::Message(_)), "{line}");
            // A line without timestamp re-encodes identically, so only the others differ.
            if line.contains("timestamp") {
                assert!(!d.canonical, "{line}");
            }
        }
    }

    #[test]
    fn unknown_fields_are_kept_in_order() {
        let line = r#"{"role": "user", "content": "x", "timestamp": "2026-07-16T10:00:00", "zeta": 1, "alpha": {"b": [1, 2.5]}}"#;
        let d = roundtrip(line);
        assert!(d.canonical);
        let LineContent::Message(m) = d.content else { panic!() };
        assert_eq!(m.extra.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["zeta", "alpha"]);
    }

    #[test]
    fn malformed_lines_say_why() {
        assert_eq!(roundtrip("   ").content, LineContent::Blank);
        let cases = [
            ("{\"role\": ", "invalid JSON"),
            ("[1]", "expected a JSON object"),
            (r#"{"role": "user"}"#, "must be strings"),
            (r#"{"role": 1, "content": "x"}"#, "'role' must be a string"),
            (r#"{"role": "user", "content": "x", "timestamp": "yesterday"}"#, "not ISO 8601"),
        ];
        for (line, reason) in cases {
            match roundtrip(line).content {
                LineContent::Malformed(r) => assert!(r.contains(reason), "{line}: {r}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        assert!(!roundtrip("{\"role\": \"user\", \"content\": \"\u{fffd}\"}").canonical);
        let invalid_utf8 = b"{\"role\": \"user\", \"content\": \"\xff\"}";
        let d = decode_line(invalid_utf8);
        assert!(matches!(d.content, LineContent::Message(_)) && !d.canonical);
    }
}
