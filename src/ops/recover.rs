//! Recovering a branch from its event log (`sessiondb recover`): reading an event log as gptme
//! does and replaying it onto the branch as an edit.

use super::{OpsError, Session};
use crate::codec::events::Event;
use crate::model::Message;
use crate::store::modify;
use crate::store::DocumentKind;

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
