//! What gptme's reader does to a message, so that a rewrite writes what gptme would write.
//!
//! gptme rewrites a transcript from the messages it holds in memory, and it holds them as its
//! reader made them: timestamps parsed and re-printed by `datetime.isoformat()`, token counts
//! stored flat in old metadata moved under `usage`, and a line without a timestamp given the
//! file's mtime (an aware UTC timestamp). Appends never rewrite
//! existing lines, so only rewrites (edit, undo, backups) apply this. One deliberate
//! difference: fields from a newer gptme are kept, where gptme 0.35 would drop them.

use crate::codec::timestamp::{format_utc, normalise};
use crate::model::Json;
use crate::model::Message;

const TOKEN_KEYS: [&str; 5] = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"];

/// The message as gptme would write it back; `file_mtime` (epoch seconds) stands in for a
/// missing timestamp.
pub fn normalise_for_rewrite(m: &Message, file_mtime: f64) -> Message {
    let mut m = m.clone();
    m.timestamp = Some(match &m.timestamp {
        Some(t) => normalise(t).unwrap_or_else(|| t.clone()),
        None => format_utc(file_mtime),
    });
    if let Some(Json::Object(members)) = &m.metadata {
        if flat_usage(members) {
            let (usage, mut remaining): (Vec<_>, Vec<_>) = members.iter().cloned().partition(|(k, _)| TOKEN_KEYS.contains(&k.as_str()));
            remaining.push(("usage".into(), Json::Object(usage)));
            m.metadata = Some(Json::Object(remaining));
        }
    }
    m
}

/// Token counts stored flat in the metadata (old gptme), which gptme's reader moves under `usage`.
fn flat_usage(members: &[(String, Json)]) -> bool {
    !members.iter().any(|(k, _)| k == "usage") && members.iter().any(|(k, _)| TOKEN_KEYS.contains(&k.as_str()))
}

/// Whether [`normalise_for_rewrite`] leaves `m` as it is, whatever the file's mtime: gptme,
/// rewriting a file from this message, writes the message's own encoding back.
pub fn rewrites_unchanged(m: &Message) -> bool {
    let timestamp_kept = m.timestamp.as_deref().is_some_and(|t| normalise(t).is_none_or(|n| n == t));
    let metadata_kept = match &m.metadata {
        Some(Json::Object(members)) => !flat_usage(members),
        _ => true,
    };
    timestamp_kept && metadata_kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json::{dump, parse};
    use crate::model::Role;

    #[test]
    fn flat_tokens_move_under_usage_and_timestamps_appear() {
        let mut m = Message::new(Role::Assistant, "x", None);
        m.metadata = Some(parse(r#"{"model": "m", "input_tokens": 5, "cost": 0.1, "output_tokens": 2}"#).unwrap().value);
        let n = normalise_for_rewrite(&m, 1.5);
        assert_eq!(n.timestamp.as_deref(), Some("1970-01-01T00:00:01.500000+00:00"));
        assert_eq!(dump(n.metadata.as_ref().unwrap()), r#"{"model": "m", "cost": 0.1, "usage": {"input_tokens": 5, "output_tokens": 2}}"#);
        let nested = parse(r#"{"usage": {"input_tokens": 1}, "input_tokens": 9}"#).unwrap().value;
        m.metadata = Some(nested.clone());
        assert_eq!(normalise_for_rewrite(&m, 0.0).metadata, Some(nested));
    }

    #[test]
    fn unchanged_exactly_when_normalising_changes_nothing() {
        // Message equality is gptme's (role and content): compare what normalising may change.
        let kept = |m: &Message| {
            let n = normalise_for_rewrite(m, 7.0);
            n.timestamp == m.timestamp && n.metadata == m.metadata
        };
        let mut m = Message::new(Role::User, "x", Some("2026-07-16T10:00:00.500000".into()));
        assert!(rewrites_unchanged(&m) && kept(&m));
        for (timestamp, metadata) in [(Some("2026-07-16T10:00:00.5"), None), (None, None), (Some("2026-07-16T10:00:00"), Some(r#"{"input_tokens": 5}"#))] {
            m.timestamp = timestamp.map(str::to_owned);
            m.metadata = metadata.map(|j| parse(j).unwrap().value);
            assert!(!rewrites_unchanged(&m) && !kept(&m), "{timestamp:?} {metadata:?}");
        }
    }
}
