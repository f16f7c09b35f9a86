//! The rest of gptme's log operations: views, bookmarks and backtrack, rename, and the
//! replay of an event log (recover). Each runs inside a [`Session`].

use super::{umask_mode, OpsError, Session, TRANSCRIPT_MODE};
use crate::codec::conv_checkpoints::{encode_checkpoint, ConvCheckpoint};
use crate::codec::events::Event;
use crate::layout::{self, MAIN};
use crate::model::{Message, Role};
use crate::store::DocumentKind;
use crate::store::{live, queries};

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

/// gptme's `_slice_at_turn`: turn 0 keeps the messages before the first user message; turn N
/// keeps everything up to (not including) the user message after the N-th.
pub fn slice_at_turn(messages: &[Message], turn: usize) -> Vec<Message> {
    if turn == 0 {
        return messages.iter().take_while(|m| m.role != Role::User).cloned().collect();
    }
    let mut users = 0;
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::User {
            users += 1;
            if users == turn + 1 {
                return messages[..i].to_vec();
            }
        }
    }
    messages.to_vec()
}

impl Session<'_> {
    /// Stores an opaque small file (a marker, a bookmark file) and writes it.
    fn write_small_file(&mut self, rel: &str, mode: u32, data: &[u8]) -> Result<(), OpsError> {
        let path = self.abs(rel);
        let stat = self.dir.replace(&path, mode, |out| out.write_all(data))?;
        live::set_blob_entry(self.conn(), self.conv.id, rel, stat.mode, stat.mtime_ns, data)?;
        Ok(())
    }

    /// gptme's `create_view`: writes `views/<name>.jsonl` with the given (compacted) messages.
    pub fn create_view(&mut self, name: &str, messages: &[Message]) -> Result<(), OpsError> {
        crate::model::ChatId::new(name).map_err(|e| OpsError::Invalid(format!("invalid view name {name:?}: {e}")))?;
        self.ensure_dir(layout::VIEWS_DIR)?;
        let rel = layout::view_path(name);
        let mut doc = match live::find_doc(self.conn(), self.conv.id, DocumentKind::View, name)? {
            Some(d) => d,
            None => live::create_doc(self.batch.conn(), self.conv.id, &rel, DocumentKind::View, name, TRANSCRIPT_MODE)?,
        };
        let messages = super::new_messages(messages);
        live::replace_lines(self.batch.conn(), self.conv.id, &mut doc, &messages)?;
        self.rewrite(&doc)
    }

    /// gptme's `switch_view` on main: records the view in `views/.current` so later appends
    /// go to main and the view together.
    pub fn use_view(&mut self, name: &str) -> Result<(), OpsError> {
        if live::find_doc(self.conn(), self.conv.id, DocumentKind::View, name)?.is_none() {
            return Err(OpsError::Invalid(format!("view '{name}' does not exist")));
        }
        self.write_small_file(layout::VIEW_MARKER, umask_mode(), format!("{name}\n").as_bytes())
    }

    /// gptme's `switch_to_master`: removes the marker.
    pub fn view_off(&mut self) -> Result<(), OpsError> {
        let path = self.abs(layout::VIEW_MARKER);
        self.dir.remove(&path)?;
        live::remove_entry(self.conn(), self.conv.id, layout::VIEW_MARKER)?;
        Ok(())
    }

    /// The conversation's bookmarks, oldest first (damaged lines skipped, as gptme does).
    pub fn checkpoints(&self) -> Result<Vec<ConvCheckpoint>, OpsError> {
        Ok(queries::bookmarks(self.conn(), self.conv.id)?)
    }

    /// `/backtrack mark LABEL`: appends a bookmark at the current length of main (or of the
    /// active view, which is gptme's log then).
    pub fn mark(&mut self, label: Option<&str>) -> Result<ConvCheckpoint, OpsError> {
        let existing = self.checkpoints()?;
        let label = label.map_or_else(|| format!("cp{}", existing.len() + 1), str::to_owned);
        let current = self.target(MAIN)?;
        let index = self.messages(&current)?.len() as i64;
        let checkpoint = ConvCheckpoint { index, label, timestamp: super::now_utc_iso() };
        let rel = layout::BOOKMARKS;
        let mode = umask_mode();
        let doc = match live::find_doc(self.conn(), self.conv.id, DocumentKind::ConvCheckpoints, layout::BOOKMARKS_NAME)? {
            Some(d) => d,
            None => live::create_doc(self.batch.conn(), self.conv.id, rel, DocumentKind::ConvCheckpoints, layout::BOOKMARKS_NAME, mode)?,
        };
        live::append_bookmark(self.conn(), &doc, &checkpoint)?;
        let mut bytes = encode_checkpoint(&checkpoint).into_bytes();
        bytes.push(b'\n');
        let expected = if self.abs(rel).exists() { doc.size } else { None };
        let stat = self.dir.append(&self.abs(rel), expected, mode, &bytes)?;
        self.record(rel, stat)?;
        Ok(checkpoint)
    }

    /// `/backtrack TARGET [REASON]`: a bare integer is a message index, anything else the most
    /// recent bookmark with that label. Truncates main by an edit (with its backup branch) and
    /// appends gptme's hidden system summary. Returns how many messages were removed.
    pub fn backtrack(&mut self, target: &str, reason: Option<&str>) -> Result<usize, OpsError> {
        let (index, label) = if target.strip_prefix('-').unwrap_or(target).chars().all(|c| c.is_ascii_digit()) && !target.is_empty() && target != "-" {
            let i: i64 = target.parse().map_err(|_| OpsError::Invalid(format!("invalid index {target}")))?;
            (i, format!("@{i}"))
        } else {
            let found = self.checkpoints()?.into_iter().rev().find(|c| c.label == target);
            let c =
                found.ok_or_else(|| OpsError::Invalid(format!("no checkpoint named {target:?} found (use a label, message index, or `sessiondb checkpoints`)")))?;
            (c.index, c.label)
        };
        let current = self.target(MAIN)?;
        let messages = self.messages(&current)?;
        if index < 0 {
            return Err(OpsError::Invalid(format!("invalid index {index}")));
        }
        let index = index as usize;
        if index > messages.len() {
            return Err(OpsError::Invalid(format!("checkpoint index {index} is beyond the conversation's length ({} messages)", messages.len())));
        }
        if index == messages.len() {
            return Ok(0);
        }
        let removed = messages.len() - index;
        self.edit(MAIN, &messages[..index])?;
        let mut summary = format!("[Backtracked {removed} message(s) to index {index}");
        if !label.starts_with('@') {
            summary.push_str(&format!(" (checkpoint: '{label}')"));
        }
        summary.push(']');
        if let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) {
            summary.push('\n');
            summary.push_str(reason);
        }
        let mut message = Message::new(Role::System, summary, Some(crate::codec::timestamp::format_naive(chrono::Local::now().naive_local())));
        message.hide = true;
        self.append(MAIN, &message)?;
        Ok(removed)
    }

    /// gptme's `rename_conversation`: sets `[chat] name` in config.toml, keeping the rest.
    pub fn rename(&mut self, name: &str) -> Result<(), OpsError> {
        // gptme's chat_config_lock: serialises config.toml's read-modify-write with its
        // auto-namer.
        self.lock_sidecar(layout::CONFIG_LOCK)?;
        let current = queries::stored_file(self.conn(), self.conv.id, layout::CONFIG)?;
        let (text, mode) = match &current {
            Some((data, mode)) => (String::from_utf8_lossy(data).into_owned(), *mode),
            None => (String::new(), umask_mode()),
        };
        let updated = crate::codec::config::set_chat_name(&text, name).map_err(|e| OpsError::Invalid(format!("config.toml: {e}")))?;
        self.write_small_file(layout::CONFIG, mode, updated.as_bytes())?;
        live::rename_conversation(self.conn(), self.conv.id, name)?;
        Ok(())
    }

    /// The events of `branch`'s log as stored, `None` when it has none.
    pub fn stored_events(&self, branch: &str) -> Result<Option<Vec<Event>>, OpsError> {
        let Some(doc) = live::find_doc(self.conn(), self.conv.id, DocumentKind::Events, branch)? else { return Ok(None) };
        Ok(Some(live::events(self.conn(), &doc)?.into_iter().filter_map(|e| e.event).collect()))
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

    fn m(role: Role, c: &str) -> Message {
        Message::new(role, c, None)
    }

    #[test]
    fn turns() {
        let log = vec![m(Role::System, "s"), m(Role::User, "u1"), m(Role::Assistant, "a1"), m(Role::System, "tool"), m(Role::User, "u2"), m(Role::Assistant, "a2")];
        assert_eq!(slice_at_turn(&log, 0).len(), 1);
        assert_eq!(slice_at_turn(&log, 1).len(), 4);
        assert_eq!(slice_at_turn(&log, 2).len(), 6);
        assert_eq!(slice_at_turn(&log, 9).len(), 6);
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
