//! `conv-checkpoints.jsonl` lines: the user's `/backtrack` bookmarks, `{index, label, timestamp}`.

use super::json::{self, write_py_string, Json};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvCheckpoint {
    /// How many messages the conversation had when the bookmark was made.
    pub index: i64,
    pub label: String,
    /// UTC ISO 8601, as written.
    pub timestamp: String,
}

/// What a line of `conv-checkpoints.jsonl` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointLine {
    Checkpoint { checkpoint: ConvCheckpoint, canonical: bool },
    Blank,
    Malformed(String),
}

/// Decodes one line (without its newline) as gptme's `list_conv_checkpoints` does.
pub fn decode_checkpoint_line(line: &[u8]) -> CheckpointLine {
    let Ok(text) = std::str::from_utf8(line) else {
        return CheckpointLine::Malformed("invalid UTF-8".into());
    };
    if text.trim().is_empty() {
        return CheckpointLine::Blank;
    }
    let parsed = match json::parse(text.trim()) {
        Ok(p) => p,
        Err(e) => return CheckpointLine::Malformed(format!("invalid JSON: {e}")),
    };
    let value = parsed.value;
    let index = value.get("index").and_then(Json::as_i64);
    let label = value.get("label").and_then(Json::as_str);
    let timestamp = value.get("timestamp").and_then(Json::as_str);
    match (index, label, timestamp) {
        (Some(index), Some(label), Some(timestamp)) => {
            let checkpoint = ConvCheckpoint { index, label: label.to_owned(), timestamp: timestamp.to_owned() };
            let canonical = !parsed.lossy && encode_checkpoint(&checkpoint).as_bytes() == line;
            CheckpointLine::Checkpoint { checkpoint, canonical }
        }
        _ => CheckpointLine::Malformed("expected integer 'index', string 'label' and 'timestamp'".into()),
    }
}

/// The line gptme writes: `json.dumps(dataclasses.asdict(record))`.
pub fn encode_checkpoint(checkpoint: &ConvCheckpoint) -> String {
    let mut out = format!("{{\"index\": {}, \"label\": ", checkpoint.index);
    write_py_string(&mut out, &checkpoint.label);
    out.push_str(", \"timestamp\": ");
    write_py_string(&mut out, &checkpoint.timestamp);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let line = r#"{"index": 4, "label": "before \u00e9dit", "timestamp": "2026-07-16T10:00:00.000001+00:00"}"#;
        match decode_checkpoint_line(line.as_bytes()) {
            CheckpointLine::Checkpoint { checkpoint, canonical } => {
                assert!(canonical);
                assert_eq!(checkpoint.label, "before édit");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode_checkpoint_line(b"{\"index\": 1}"), CheckpointLine::Malformed(_)));
    }
}
