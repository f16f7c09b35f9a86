//! One conversation message, as gptme's `Message` dataclass defines it.
//!
//! A `Message` is a value: nothing mutates it in place, a change builds a new one
//! ([`Message::with_content`], [`Message::concat`]). Two messages are equal when their role and
//! content are equal, as in gptme, because branch diffs and undo compare only what was said.
//! Fields a newer gptme may add are kept in [`Message::extra`], in the order they were read.

use super::Json;

/// Who said a message. gptme reads any string here (its `Literal` is not enforced); a role it
/// does not name is kept as [`Role::Other`] rather than rejected.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
    Other(String),
}

impl Role {
    pub fn parse(s: &str) -> Role {
        match s {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => Role::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Other(s) => s,
        }
    }
}

/// A message with every field gptme persists.
#[derive(Debug, Clone)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// The timestamp exactly as written (gptme writes naive local `isoformat()`); `None` for
    /// legacy lines that have none (gptme then uses the file's mtime).
    pub timestamp: Option<String>,
    /// Attachment paths or URIs, as written.
    pub files: Vec<String>,
    /// Attachment path → 16-hex content hash, in insertion order.
    pub file_hashes: Vec<(String, String)>,
    pub call_id: Option<String>,
    pub pinned: bool,
    pub hide: bool,
    /// Shown in the UI but never sent to the model (gptme 0.35's `ui_only`).
    pub ui_only: bool,
    pub ephemeral_ttl: Option<i64>,
    /// The metadata object as written (`model`, `cost`, `usage`, … and anything newer).
    pub metadata: Option<Json>,
    /// Top-level fields gptme does not know, in the order they were read.
    pub extra: Vec<(String, Json)>,
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role && self.content == other.content
    }
}

impl Eq for Message {}

/// Token and cost figures of one message, read the way gptme's listing reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cost: f64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_creation_tokens: i64,
}

impl Usage {
    /// Input tokens as gptme totals them: plain input plus cache reads plus cache creation.
    pub fn total_input(&self) -> i64 {
        self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens
    }
}

impl Message {
    /// A new message with only role, content and timestamp set.
    pub fn new(role: Role, content: impl Into<String>, timestamp: Option<String>) -> Message {
        Message {
            role,
            content: content.into(),
            timestamp,
            files: Vec::new(),
            file_hashes: Vec::new(),
            call_id: None,
            pinned: false,
            hide: false,
            ui_only: false,
            ephemeral_ttl: None,
            metadata: None,
            extra: Vec::new(),
        }
    }

    /// A copy with other content.
    pub fn with_content(&self, content: impl Into<String>) -> Message {
        Message { content: content.into(), ..self.clone() }
    }

    /// Joins two messages of the same role as gptme's `Message.concat` does: contents joined
    /// by `separator`, files appended, file hashes merged (the other's win), flags ORed, the
    /// shorter ttl kept; everything else from `self`. `None` when the roles differ.
    pub fn concat(&self, other: &Message, separator: &str) -> Option<Message> {
        if self.role != other.role {
            return None;
        }
        let mut file_hashes = self.file_hashes.clone();
        for (path, hash) in &other.file_hashes {
            match file_hashes.iter_mut().find(|(p, _)| p == path) {
                Some(entry) => entry.1 = hash.clone(),
                None => file_hashes.push((path.clone(), hash.clone())),
            }
        }
        let ephemeral_ttl = match (self.ephemeral_ttl, other.ephemeral_ttl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Some(Message {
            content: format!("{}{}{}", self.content, separator, other.content),
            files: self.files.iter().chain(&other.files).cloned().collect(),
            file_hashes,
            pinned: self.pinned || other.pinned,
            hide: self.hide || other.hide,
            ui_only: self.ui_only || other.ui_only,
            ephemeral_ttl,
            ..self.clone()
        })
    }

    /// The model named in metadata, if any.
    pub fn model(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("model")?.as_str().filter(|m| !m.is_empty())
    }

    /// Cost and tokens as gptme's `_full_scan` reads them: from `metadata.usage` when that is
    /// a non-empty object, else from the flat fields of older logs. Missing, null and
    /// non-numeric values count as zero.
    pub fn usage(&self) -> Usage {
        let Some(meta) = self.metadata.as_ref().filter(|m| m.is_truthy()) else {
            return Usage::default();
        };
        let source = match meta.get("usage") {
            Some(usage) if usage.is_truthy() => usage,
            _ => meta,
        };
        let tokens = |key: &str| -> i64 { source.get(key).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))).unwrap_or(0) };
        Usage {
            cost: meta.get("cost").and_then(Json::as_f64).unwrap_or(0.0),
            input_tokens: tokens("input_tokens"),
            output_tokens: tokens("output_tokens"),
            cache_read_tokens: tokens("cache_read_tokens"),
            cache_creation_tokens: tokens("cache_creation_tokens"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json::parse;

    fn msg(role: Role, content: &str) -> Message {
        Message::new(role, content, Some("2026-01-01T00:00:00".into()))
    }

    #[test]
    fn equality_is_role_and_content_only() {
        let a = msg(Role::User, "hi");
        let mut b = msg(Role::User, "hi");
        b.timestamp = None;
        b.pinned = true;
        assert_eq!(a, b);
        assert_ne!(a, msg(Role::Assistant, "hi"));
        assert_ne!(a, msg(Role::User, "hi "));
    }

    #[test]
    fn concat_follows_gptme() {
        let mut a = msg(Role::User, "a");
        a.ephemeral_ttl = Some(3);
        a.file_hashes = vec![("/x".into(), "1".into())];
        let mut b = msg(Role::User, "b");
        b.ephemeral_ttl = Some(2);
        b.hide = true;
        b.file_hashes = vec![("/x".into(), "2".into()), ("/y".into(), "3".into())];
        b.timestamp = Some("later".into());
        let c = a.concat(&b, "\n\n").unwrap();
        assert_eq!(c.content, "a\n\nb");
        assert_eq!(c.ephemeral_ttl, Some(2));
        assert!(c.hide && !c.pinned);
        assert_eq!(c.timestamp.as_deref(), Some("2026-01-01T00:00:00"));
        assert_eq!(c.file_hashes, vec![("/x".into(), "2".into()), ("/y".into(), "3".into())]);
        assert!(a.concat(&msg(Role::System, "x"), "").is_none());
    }

    #[test]
    fn usage_reads_nested_and_flat_metadata() {
        let mut m = msg(Role::Assistant, "x");
        m.metadata = Some(
            parse(r#"{"model": "m", "cost": 0.5, "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 2, "cache_creation_tokens": 1}}"#)
                .unwrap()
                .value,
        );
        let u = m.usage();
        assert_eq!((u.total_input(), u.output_tokens, u.cost), (13, 5, 0.5));
        assert_eq!(m.model(), Some("m"));
        m.metadata = Some(parse(r#"{"model": "m", "input_tokens": 7, "output_tokens": 3}"#).unwrap().value);
        assert_eq!(m.usage().total_input(), 7);
        m.metadata = Some(parse(r#"{"cost": null}"#).unwrap().value);
        assert_eq!(m.usage(), Usage::default());
    }
}
