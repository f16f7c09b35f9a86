//! Creating a conversation, as gptme's `LogManager.load(create=True)` does.

use std::path::{Path, PathBuf};

use crate::fs::atomic::{sync_dir, write_atomic};
use crate::model::ChatId;
use crate::store::{Store, WriteBatch};
use crate::sync::ingest;

use super::OpsError;

/// What [`new_conversation`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewConversation {
    pub chat_id: String,
    pub dir: PathBuf,
}

/// `config.toml` as gptme's `rename_conversation` writes it for a new file.
pub fn config_with_name(name: &str) -> String {
    crate::codec::config::set_chat_name("", name).expect("the empty text is valid TOML")
}

/// Creates `<logs_root>/<chat_id>/` with an empty `conversation.jsonl` (mode 0600, as gptme
/// writes it) and, with a name, a `config.toml`, then imports it. Refuses an id gptme would
/// refuse, or one that exists already.
pub fn new_conversation(store: &Store, logs_root: &Path, chat_id: &str, name: Option<&str>) -> Result<NewConversation, OpsError> {
    let id = ChatId::new(chat_id).map_err(|e| OpsError::Invalid(format!("invalid chat id {chat_id:?}: {e}")))?;
    let dir = logs_root.join(id.as_str());
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| OpsError::Dir(crate::fs::dirtx::DirError::Io { path, source })
    };
    if dir.exists() {
        return Err(OpsError::Invalid(format!("{}: a conversation with this id exists already", dir.display())));
    }
    std::fs::create_dir_all(logs_root).map_err(io(logs_root))?;
    std::fs::create_dir(&dir).map_err(io(&dir))?;
    let created = (|| -> Result<(), OpsError> {
        write_atomic(&dir.join(crate::layout::MAIN_TRANSCRIPT), 0o600, crate::fs::meta::now_ns(), |_| Ok(())).map_err(io(&dir))?;
        if let Some(name) = name {
            let mode = super::umask_mode();
            write_atomic(&dir.join(crate::layout::CONFIG), mode, crate::fs::meta::now_ns(), |out| out.write_all(config_with_name(name).as_bytes()))
                .map_err(io(&dir))?;
        }
        sync_dir(&dir).map_err(io(&dir))?;
        let mut conn = store.connection()?;
        let mut batch = WriteBatch::begin(&mut conn)?;
        ingest::import_conversation(&mut batch, &dir, ingest::ReadMode::Whole)?;
        batch.finish()?;
        Ok(())
    })();
    if let Err(e) = created {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let _ = sync_dir(logs_root);
    Ok(NewConversation { chat_id: id.as_str().to_owned(), dir })
}
