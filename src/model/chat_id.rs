//! Chat ids: the name of a conversation's directory under the logs root.
//!
//! A [`ChatId`] can only be built through [`ChatId::new`], which applies gptme's own rules
//! (`conversation_id_error` in 0.35), so any `ChatId` is safe to join onto a logs root: it is one
//! path component and can never climb out of it.

use std::fmt;

/// A validated conversation id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChatId(String);

/// Why a string is not a valid chat id (gptme's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatIdError {
    #[error("conversation name cannot be empty")]
    Empty,
    #[error("conversation name cannot start or end with whitespace")]
    SurroundingWhitespace,
    #[error("conversation name too long ({0} bytes, at most 255)")]
    TooLong(usize),
    #[error("conversation name cannot contain control characters")]
    NotPrintable,
    #[error("conversation name must be a single path component (no '.', '/', '\\', or '..')")]
    NotOneComponent,
}

/// Linux NAME_MAX: the longest single path component.
const MAX_BYTES: usize = 255;

impl ChatId {
    pub fn new(value: impl Into<String>) -> Result<Self, ChatIdError> {
        let value = value.into();
        if value.trim().is_empty() {
            return Err(ChatIdError::Empty);
        }
        if value.trim() != value {
            return Err(ChatIdError::SurroundingWhitespace);
        }
        if value.len() > MAX_BYTES {
            return Err(ChatIdError::TooLong(value.len()));
        }
        if !value.chars().all(is_printable) {
            return Err(ChatIdError::NotPrintable);
        }
        if value == "." || value.contains('/') || value.contains('\\') || value.contains("..") {
            return Err(ChatIdError::NotOneComponent);
        }
        Ok(ChatId(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChatId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An approximation of Python's `str.isprintable`: false for control, format, separator (other
/// than the ASCII space), surrogate, private-use and unassigned characters. Rust's standard
/// library has no Unicode category tables, so the non-ASCII part covers the categories that
/// matter for file names: C0/C1 controls, line/paragraph separators, the common format
/// characters and the non-ASCII spaces.
fn is_printable(ch: char) -> bool {
    if ch == ' ' {
        return true;
    }
    if ch.is_control() || ch.is_whitespace() {
        return false;
    }
    !matches!(ch,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        | '\u{e000}'..='\u{f8ff}' | '\u{f0000}'..='\u{10ffff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_ids() {
        for id in ["2024-01-01-chat", "a b", "中文", "x.y", "emoji-😀"] {
            assert!(ChatId::new(id).is_ok(), "{id}");
        }
    }

    #[test]
    fn rejects_unsafe_ids() {
        let long = "x".repeat(256);
        let cases: [(&str, ChatIdError); 9] = [
            ("", ChatIdError::Empty),
            ("   ", ChatIdError::Empty),
            (" a", ChatIdError::SurroundingWhitespace),
            (&long, ChatIdError::TooLong(256)),
            ("a\u{1}b", ChatIdError::NotPrintable),
            ("a\u{200b}b", ChatIdError::NotPrintable),
            (".", ChatIdError::NotOneComponent),
            ("a/b", ChatIdError::NotOneComponent),
            ("..x", ChatIdError::NotOneComponent),
        ];
        for (id, err) in cases {
            assert_eq!(ChatId::new(id).unwrap_err(), err, "{id:?}");
        }
        assert_eq!(ChatId::new("a\\b").unwrap_err(), ChatIdError::NotOneComponent);
    }
}
