//! gptme's views: `views/<name>.jsonl` (a compacted copy of main that gptme loads instead of
//! main while `views/.current` names it), created, switched to and switched off. The marker
//! itself is decided in one place, [`crate::layout`]; this module only writes it.

use super::{umask_mode, OpsError, Session, TRANSCRIPT_MODE};
use crate::layout;
use crate::model::Message;
use crate::store::modify;
use crate::store::DocumentKind;

impl Session<'_> {
    /// gptme's `create_view`: writes `views/<name>.jsonl` with the given (compacted) messages.
    pub fn create_view(&mut self, name: &str, messages: &[Message]) -> Result<(), OpsError> {
        crate::model::ChatId::new(name).map_err(|reason| OpsError::InvalidName { what: "view name", name: name.to_owned(), reason })?;
        self.ensure_dir(layout::VIEWS_DIR)?;
        let rel = layout::view_path(name);
        let mut doc = match modify::find_doc(self.conn(), self.conv.id, DocumentKind::View, name)? {
            Some(d) => d,
            None => modify::create_doc(self.batch.conn(), self.conv.id, &rel, DocumentKind::View, name, TRANSCRIPT_MODE)?,
        };
        let messages = super::new_messages(messages);
        modify::replace_lines(self.batch.conn(), self.conv.id, &mut doc, &messages)?;
        self.rewrite(&doc)
    }

    /// gptme's `switch_view` on main: records the view in `views/.current` so later appends
    /// go to main and the view together.
    pub fn use_view(&mut self, name: &str) -> Result<(), OpsError> {
        if modify::find_doc(self.conn(), self.conv.id, DocumentKind::View, name)?.is_none() {
            return Err(OpsError::Invalid(format!("view '{name}' does not exist")));
        }
        self.write_small_file(layout::VIEW_MARKER, umask_mode(), format!("{name}\n").as_bytes())
    }

    /// gptme's `switch_to_master`: removes the marker.
    pub fn view_off(&mut self) -> Result<(), OpsError> {
        let path = self.abs(layout::VIEW_MARKER);
        self.dir.remove(&path)?;
        modify::remove_entry(self.conn(), self.conv.id, layout::VIEW_MARKER)?;
        Ok(())
    }
}
