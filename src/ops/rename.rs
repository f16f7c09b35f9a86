//! gptme's `rename_conversation`: the display name in `config.toml`.

use super::{umask_mode, OpsError, Session};
use crate::layout;
use crate::store::{modify, queries};

impl Session<'_> {
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
        modify::rename_conversation(self.conn(), self.conv.id, name)?;
        Ok(())
    }
}
