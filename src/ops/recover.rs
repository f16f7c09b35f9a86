//! Recovering a branch from its event log (`sessiondb recover`): reading an event log as gptme
//! does, comparing what it replays to with the log gptme loads, and replaying it onto the
//! branch as an edit.
//!
//! Invariant: the comparison is with the log gptme has loaded for the branch (the active view
//! on main, when one is active), which is what an applied recovery replaces. gptme never logs
//! the system prompt a conversation begins with as an event: those leading system messages are
//! the branch's own, kept by an applied recovery and not counted as a difference, so that a
//! healthy conversation compares equal and `--apply` never drops its prompt.

use std::path::Path;

use super::{OpsError, Session};
use crate::codec::events::{replay, Event};
use crate::model::{Log, Message};
use crate::store::modify;
use crate::store::{DocumentKind, Store};
use crate::sync::ingest::IngestError;

/// A branch's event log and the messages of the log gptme loads for it.
#[derive(Debug, Clone, Default)]
pub struct RecoverySource {
    /// The events, `None` when the branch has no event log.
    pub events: Option<Vec<Event>>,
    /// The messages an applied recovery would replace.
    pub current: Vec<Message>,
}

/// What a branch's event log replays to, against what the branch holds.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// Whether there is an event log that replays to anything at all.
    pub event_log: bool,
    /// The branch's leading system messages that the event log does not hold: the prompt gptme
    /// starts a conversation with and never logs as an event.
    pub prompt: Vec<Message>,
    /// The messages the event log replays to (none without one), as gptme's
    /// `recover_messages` gives them.
    pub recovered: Vec<Message>,
    /// How many messages the branch holds now.
    pub current: usize,
    /// The index (in the branch, from 0) of the first message where the branch and
    /// [`Recovery::applied`] differ, `None` when they are the same.
    pub difference: Option<usize>,
}

/// How a branch stands against its event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The branch is what its event log replays to (after its prompt): nothing to recover.
    Same,
    /// The branch stops short of the event log: its last `missing` messages are not in the
    /// branch (a transcript cut short), and an applied recovery restores them.
    Short { missing: usize },
    /// The event log stops short of the branch: the branch holds `extra` messages after what
    /// the log replays to; an applied recovery would drop them, so nothing is to be recovered.
    Ahead { extra: usize },
    /// They part at the branch's message `at` (from 0).
    Apart { at: usize },
}

impl Recovery {
    /// What an applied recovery writes: the branch's prompt, then the replayed messages.
    pub fn applied(&self) -> Vec<Message> {
        self.prompt.iter().chain(&self.recovered).cloned().collect()
    }

    /// How the branch stands against the event log.
    pub fn standing(&self) -> Standing {
        let whole = self.prompt.len() + self.recovered.len();
        match self.difference {
            None => Standing::Same,
            Some(at) if at == self.current => Standing::Short { missing: whole - at },
            Some(at) if at == whole => Standing::Ahead { extra: self.current - at },
            Some(at) => Standing::Apart { at },
        }
    }
}

impl RecoverySource {
    /// The recovery these events and messages give.
    pub fn compare(&self) -> Recovery {
        let recovered = self.events.as_deref().and_then(replay);
        let event_log = recovered.is_some();
        let recovered = recovered.unwrap_or_default();
        // The leading system messages before the one the replay begins with: gptme's prompt.
        let leading = self.current.iter().take_while(|m| m.role == crate::model::Role::System).count();
        let prompt_len = (0..=leading).find(|&i| recovered.first().is_some_and(|r| self.current.get(i) == Some(r))).unwrap_or(leading);
        let prompt = if event_log { self.current[..prompt_len].to_vec() } else { Vec::new() };
        let applied = Log::new(prompt.iter().chain(&recovered).cloned().collect());
        let difference = Log::new(self.current.clone()).first_difference(&applied);
        Recovery { event_log, prompt, recovered, current: self.current.len(), difference }
    }
}

/// Reads `branch` of a gptme directory that has not been imported: its event log and the log
/// gptme loads for it (the active view, on main with one), both as gptme reads them. A log that
/// cannot be read counts as empty; an event log that cannot be read is an error naming it.
pub fn read_directory_branch(dir: &Path, branch: &str) -> Result<RecoverySource, OpsError> {
    let path = dir.join(crate::layout::events_path(branch));
    let events = read_event_file(&path).map_err(|source| IngestError::Io { path, source })?;
    let marker = crate::fs::nofollow::read_user_file(&dir.join(crate::layout::VIEW_MARKER)).ok();
    let loaded = crate::layout::loaded_log(branch, marker.as_deref(), |v| dir.join(crate::layout::view_path(v)).is_file());
    let current =
        crate::fs::nofollow::read_user_file(&dir.join(loaded.path())).map(|bytes| crate::codec::message_line::decode_messages(&bytes)).unwrap_or_default();
    Ok(RecoverySource { events, current })
}

/// Reads `branch` of a stored conversation: its stored event log and the log gptme has loaded
/// for it.
pub fn read_stored_branch(store: &Store, chat_id: &str, branch: &str) -> Result<RecoverySource, OpsError> {
    let events = super::with_session(store, chat_id, |s| s.stored_events(branch))?;
    let current = crate::sync::document::loaded_messages(&store.connection()?, chat_id, branch)?;
    Ok(RecoverySource { events, current })
}

/// Reads an event log file as gptme does (damaged lines skipped).
pub fn read_event_file(path: &std::path::Path) -> std::io::Result<Option<Vec<Event>>> {
    let bytes = match crate::fs::nofollow::read_user_file(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let events = bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| match crate::codec::events::decode_event_line(line) {
            crate::codec::events::EventLine::Event { event, .. } => Some(event),
            _ => None,
        })
        .collect();
    Ok(Some(events))
}

impl Session<'_> {
    /// The events of `branch`'s log as stored, `None` when it has none.
    pub fn stored_events(&self, branch: &str) -> Result<Option<Vec<Event>>, OpsError> {
        let Some(doc) = modify::find_doc(self.conn(), self.conv.id, DocumentKind::Events, branch)? else { return Ok(None) };
        Ok(Some(modify::events(self.conn(), &doc)?.into_iter().filter_map(|e| e.event).collect()))
    }

    /// Replaces `branch` with `messages` recovered from its event log (an edit, so the
    /// current list is kept as a backup branch).
    pub fn apply_recovery(&mut self, branch: &str, messages: &[Message]) -> Result<String, OpsError> {
        self.edit(branch, messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::events::{replay, Payload, CHECKPOINT, MESSAGE_APPEND, UNDO};
    use crate::codec::json::Json;
    use crate::model::Role;

    fn m(role: Role, c: &str) -> Message {
        Message::new(role, c, None)
    }

    #[test]
    fn replay_rules() {
        let append = |seq, c: &str| Event { seq, ts: String::new(), kind: MESSAGE_APPEND.into(), payload: Payload::Message(m(Role::User, c)) };
        let undo =
            |seq, n: i64| Event { seq, ts: String::new(), kind: UNDO.into(), payload: Payload::Other(Json::Object(vec![("n".into(), Json::Int(n.to_string()))])) };
        assert_eq!(replay(&[]), None);
        assert_eq!(replay(&[append(1, "a"), undo(2, 1)]), Some(vec![]));
        let checkpoint = Event { seq: 3, ts: String::new(), kind: CHECKPOINT.into(), payload: Payload::Messages(vec![m(Role::User, "x")]) };
        let got = replay(&[append(1, "a"), append(2, "b"), checkpoint, append(4, "c")]).unwrap();
        assert_eq!(got.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["x", "c"]);
    }
}
