//! What people give the log operations, decoded and checked: the fields of a message to append
//! (role, timestamp, metadata JSON, attached files) and lists of messages in gptme's editable
//! TOML.
//!
//! Invariant: nothing here changes anything, and every input is checked whole before an
//! operation starts; an error names the input it is about (the command line adds how it was
//! given).

use std::path::{Path, PathBuf};

use crate::codec::json::{self, Json};
use crate::codec::timestamp::{format_naive, normalise};
use crate::codec::toml_log::{toml_to_messages, TomlError};
use crate::model::{Message, Role};

/// Why an input was refused.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("role must be system, user or assistant, not {0:?}")]
    Role(String),
    #[error("timestamp {0:?} is not ISO 8601")]
    Timestamp(String),
    #[error("metadata: {0}")]
    MetadataJson(json::ParseError),
    #[error("metadata must be a JSON object")]
    MetadataNotObject,
    /// An attached or given file that cannot be read (or made absolute).
    #[error("{path}")]
    File { path: PathBuf, source: std::io::Error },
    #[error("{0}: not a file")]
    NotAFile(PathBuf),
    /// A TOML file that is not a list of messages.
    #[error("{path}")]
    Toml { path: PathBuf, source: TomlError },
    /// A message of an edit with a role a person may not give (one the branch already had is
    /// kept as it is).
    #[error("message {number}: role must be system, user or assistant, not {role:?}")]
    EditedRole { number: usize, role: String },
}

/// The role of a message a person adds: `system`, `user` or `assistant`.
pub fn role(name: &str) -> Result<Role, InputError> {
    match name {
        "system" | "user" | "assistant" => Ok(Role::parse(name)),
        other => Err(InputError::Role(other.to_owned())),
    }
}

/// The optional fields of a message to append, as given.
#[derive(Debug, Default)]
pub struct MessageFields<'a> {
    /// ISO 8601, normalised as gptme writes it; `None` for now (naive local time, as gptme's
    /// `datetime.now()`).
    pub timestamp: Option<&'a str>,
    /// A JSON object.
    pub metadata: Option<&'a str>,
    /// Files to attach (stored by content hash, as gptme stores them); each must exist.
    pub files: &'a [PathBuf],
    pub pinned: bool,
    pub hide: bool,
    pub ephemeral_ttl: Option<i64>,
    pub call_id: Option<String>,
}

/// The message to append: `content` by `role`, with `fields` checked and decoded.
pub fn message(role: Role, content: String, fields: MessageFields<'_>) -> Result<Message, InputError> {
    let timestamp = match fields.timestamp {
        Some(t) => normalise(t).ok_or_else(|| InputError::Timestamp(t.to_owned()))?,
        None => format_naive(chrono::Local::now().naive_local()),
    };
    let mut message = Message::new(role, content, Some(timestamp));
    message.pinned = fields.pinned;
    message.hide = fields.hide;
    message.ephemeral_ttl = fields.ephemeral_ttl;
    message.call_id = fields.call_id;
    for file in fields.files {
        let absolute = std::path::absolute(file).map_err(|source| InputError::File { path: file.clone(), source })?;
        if !absolute.is_file() {
            return Err(InputError::NotAFile(file.clone()));
        }
        message.files.push(absolute.to_string_lossy().into_owned());
    }
    if let Some(text) = fields.metadata {
        let value = json::parse(text).map_err(InputError::MetadataJson)?.value;
        if !matches!(value, Json::Object(_)) {
            return Err(InputError::MetadataNotObject);
        }
        message.metadata = Some(value);
    }
    Ok(message)
}

/// The messages of a file in gptme's editable TOML layout (what `edit`, `import --toml` and
/// `view create` take).
pub fn read_toml_messages(path: &Path) -> Result<Vec<Message>, InputError> {
    // A FIFO named here would block the command: refused, as any file that is not regular.
    let bytes = crate::fs::nofollow::read_user_file(path).map_err(|source| InputError::File { path: path.to_owned(), source })?;
    let text = String::from_utf8(bytes).map_err(|e| InputError::File {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to())),
    })?;
    toml_to_messages(&text).map_err(|source| InputError::Toml { path: path.to_owned(), source })
}

/// What an edit of a branch would do, checked before it starts.
#[derive(Debug, PartialEq)]
pub enum Edit {
    /// The messages are the branch's own, as the editable TOML shows them: nothing to do (and
    /// no backup to make).
    Unchanged,
    /// Replace the branch with these messages; `empties` when there are none left of a branch
    /// that had some (worth asking about first).
    Replace { messages: Vec<Message>, empties: bool },
}

/// Checks `edited` against `current`, the branch it replaces: unchanged as TOML shows it, or
/// a replacement whose every message has a role a person may give — `system`, `user` or
/// `assistant`, as for `append` — unless the branch already holds that very message (a
/// stored message with another role survives an edit that leaves it alone).
pub fn edit(current: &[Message], edited: Vec<Message>) -> Result<Edit, InputError> {
    use crate::codec::toml_log::messages_to_toml;
    if messages_to_toml(&edited) == messages_to_toml(current) {
        return Ok(Edit::Unchanged);
    }
    for (i, m) in edited.iter().enumerate() {
        let known = role(m.role.as_str()).is_ok() || current.iter().any(|c| c.role == m.role && c.content == m.content);
        if !known {
            return Err(InputError::EditedRole { number: i + 1, role: m.role.as_str().to_owned() });
        }
    }
    Ok(Edit::Replace { empties: edited.is_empty() && !current.is_empty(), messages: edited })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: &str, content: &str) -> Message {
        Message::new(Role::parse(role), content, Some("2026-12-04T10:00:00".into()))
    }

    #[test]
    fn edits_are_checked_whole() {
        let current = vec![m("user", "hi"), m("robot", "beep")];
        assert_eq!(edit(&current, current.clone()).unwrap(), Edit::Unchanged);
        assert!(matches!(edit(&current, vec![m("user", "hi"), m("robot", "beep"), m("user", "more")]).unwrap(), Edit::Replace { empties: false, .. }));
        assert!(matches!(edit(&current, vec![m("robot", "new")]), Err(InputError::EditedRole { number: 1, .. })));
        assert!(matches!(edit(&current, Vec::new()).unwrap(), Edit::Replace { empties: true, .. }));
        assert_eq!(edit(&[], Vec::new()).unwrap(), Edit::Unchanged);
    }
}
