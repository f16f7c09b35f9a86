//! `view`: creating, switching to and switching off gptme's views.

use std::path::PathBuf;

use super::term::say;
use super::Failure;
use sessiondb::ops::with_session;
use sessiondb::store::Store;

#[derive(clap::Subcommand)]
pub enum ViewCommand {
    /// Create (or replace) a compacted view from a TOML file of messages
    Create {
        /// The conversation
        chat_id: String,
        /// The view's name (views/NAME.jsonl)
        name: String,
        /// The view's messages, in gptme's editable TOML
        #[arg(long, value_name = "FILE")]
        toml: PathBuf,
    },
    /// Make a view active: appends then go to main and the view
    Use {
        /// The conversation
        chat_id: String,
        /// The view to make active
        name: String,
    },
    /// Deactivate the view
    Off {
        /// The conversation
        chat_id: String,
    },
}

pub fn view(store: &Store, command: ViewCommand) -> Result<i32, Failure> {
    match command {
        ViewCommand::Create { chat_id, name, toml } => {
            let messages = sessiondb::ops::input::read_toml_messages(&toml).map_err(super::ops::toml_error)?;
            with_session(store, &chat_id, |s| s.create_view(&name, &messages))?;
            say!("view {name}: {} messages", messages.len());
        }
        ViewCommand::Use { chat_id, name } => {
            with_session(store, &chat_id, |s| s.use_view(&name))?;
            say!("view {name} is active");
        }
        ViewCommand::Off { chat_id } => {
            with_session(store, &chat_id, |s| s.view_off())?;
            say!("no view is active");
        }
    }
    Ok(0)
}
