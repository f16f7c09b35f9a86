//! `conv-checkpoints.jsonl` lines: the user's `/backtrack` bookmarks, `{index, label, timestamp}`.

use super::json::{self, write_py_string, Json};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// How many messages the conversation had when the bookmark was made.
    pub index: i64,
    pub label: String,
    /// UTC ISO 8601, as written.
    pub timestamp: String,
}

/// What a line of `conv-checkpoints.jsonl` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BookmarkLine {
    Bookmark { bookmark: Bookmark, canonical: bool },
    Blank,
    Malformed(String),
}

/// Decodes one line (without its newline) as gptme's `list_conv_checkpoints` does.
pub fn decode_bookmark_line(line: &[u8]) -> BookmarkLine {
    let Ok(text) = std::str::from_utf8(line) else {
        return BookmarkLine::Malformed("invalid UTF-8".into());
    };
    if text.trim().is_empty() {
        return BookmarkLine::Blank;
    }
    let parsed = match json::parse(text.trim()) {
        Ok(p) => p,
        Err(e) => return BookmarkLine::Malformed(format!("invalid JSON: {e}")),
    };
    let value = parsed.value;
    let index = value.get("index").and_then(Json::as_i64);
    let label = value.get("label").and_then(Json::as_str);
    let timestamp = value.get("timestamp").and_then(Json::as_str);
    match (index, label, timestamp) {
        (Some(index), Some(label), Some(timestamp)) => {
            let bookmark = Bookmark { index, label: label.to_owned(), timestamp: timestamp.to_owned() };
            let canonical = !parsed.lossy && encode_bookmark(&bookmark).as_bytes() == line;
            BookmarkLine::Bookmark { bookmark, canonical }
        }
        _ => BookmarkLine::Malformed("expected integer 'index', string 'label' and 'timestamp'".into()),
    }
}

/// The line gptme writes: `json.dumps(dataclasses.asdict(record))`.
pub fn encode_bookmark(bookmark: &Bookmark) -> String {
    let mut out = format!("{{\"index\": {}, \"label\": ", bookmark.index);
    write_py_string(&mut out, &bookmark.label);
    out.push_str(", \"timestamp\": ");
    write_py_string(&mut out, &bookmark.timestamp);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let line = r#"{"index": 4, "label": "before \u00e9dit", "timestamp": "2026-07-16T10:00:00.000001+00:00"}"#;
        match decode_bookmark_line(line.as_bytes()) {
            BookmarkLine::Bookmark { bookmark, canonical } => {
                assert!(canonical);
                assert_eq!(bookmark.label, "before édit");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode_bookmark_line(b"{\"index\": 1}"), BookmarkLine::Malformed(_)));
    }
}
