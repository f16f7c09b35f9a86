//! gptme's `/backtrack`: bookmarks in `conv-checkpoints.jsonl` (gptme calls them conversation
//! checkpoints), and going back to one by an edit of main.

use super::{umask_mode, OpsError, Session};
use crate::codec::bookmarks::{encode_bookmark, Bookmark};
use crate::layout::{self, MAIN};
use crate::model::{Message, Role};
use crate::store::DocumentKind;
use crate::store::{modify, queries};

impl Session<'_> {
    /// The conversation's bookmarks, oldest first (damaged lines skipped, as gptme does).
    pub fn bookmarks(&self) -> Result<Vec<Bookmark>, OpsError> {
        Ok(queries::bookmarks(self.conn(), self.conv.id)?)
    }

    /// `/backtrack mark LABEL`: appends a bookmark at the current length of main (or of the
    /// active view, which is gptme's log then).
    pub fn add_bookmark(&mut self, label: Option<&str>) -> Result<Bookmark, OpsError> {
        let existing = self.bookmarks()?;
        let label = label.map_or_else(|| format!("cp{}", existing.len() + 1), str::to_owned);
        let current = self.target(MAIN)?;
        let index = self.messages(&current)?.len() as i64;
        let bookmark = Bookmark { index, label, timestamp: super::now_utc_iso() };
        let rel = layout::BOOKMARKS;
        let mode = umask_mode();
        let doc = match modify::find_doc(self.conn(), self.conv.id, DocumentKind::Bookmarks, layout::BOOKMARKS_NAME)? {
            Some(d) => d,
            None => modify::create_doc(self.batch.conn(), self.conv.id, rel, DocumentKind::Bookmarks, layout::BOOKMARKS_NAME, mode)?,
        };
        modify::append_bookmark(self.conn(), &doc, &bookmark)?;
        let mut bytes = encode_bookmark(&bookmark).into_bytes();
        bytes.push(b'\n');
        let expected = if self.abs(rel).exists() { doc.size } else { None };
        let stat = self.dir.append(&self.abs(rel), expected, mode, &bytes)?;
        self.record(rel, stat)?;
        Ok(bookmark)
    }

    /// `/backtrack TARGET [REASON]`: a bare integer is a message index, anything else the most
    /// recent bookmark with that label. Truncates main by an edit (with its backup branch) and
    /// appends gptme's hidden system summary. Returns how many messages were removed.
    pub fn backtrack(&mut self, target: &str, reason: Option<&str>) -> Result<usize, OpsError> {
        let (index, label) = if target.strip_prefix('-').unwrap_or(target).chars().all(|c| c.is_ascii_digit()) && !target.is_empty() && target != "-" {
            let i: i64 = target.parse().map_err(|_| OpsError::Invalid(format!("invalid index {target}")))?;
            (i, format!("@{i}"))
        } else {
            let found = self.bookmarks()?.into_iter().rev().find(|c| c.label == target);
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
}
