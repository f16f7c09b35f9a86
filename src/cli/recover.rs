//! `recover`: a branch rebuilt from its event log.

use std::path::PathBuf;

use super::term::say;
use super::Failure;
use sessiondb::model::Message;
use sessiondb::ops::{self, with_session};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct RecoverArgs {
    /// A stored conversation (or use --dir)
    #[arg(required_unless_present = "dir")]
    chat_id: Option<String>,
    /// Recover from a gptme directory that has not been imported
    #[arg(long, value_name = "PATH", conflicts_with = "chat_id")]
    dir: Option<PathBuf>,
    #[arg(long, default_value = "main")]
    branch: String,
    /// Replace the branch with what the event log replays to (the current list becomes a backup branch)
    #[arg(long, conflicts_with = "dir")]
    apply: bool,
    #[arg(long)]
    json: bool,
}

pub fn recover(store: &Store, args: RecoverArgs) -> Result<i32, Failure> {
    let (events, current): (Option<Vec<_>>, Vec<Message>) = match &args.dir {
        Some(dir) => {
            let path = dir.join(sessiondb::layout::events_path(&args.branch));
            let events = ops::read_event_file(&path).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
            // The log gptme loads (the active view, on main with one), which an edit replaces.
            let marker = sessiondb::fs::nofollow::read_user_file(&dir.join(sessiondb::layout::VIEW_MARKER)).ok();
            let loaded = sessiondb::layout::loaded_log(&args.branch, marker.as_deref(), |v| dir.join(sessiondb::layout::view_path(v)).is_file());
            let file = dir.join(loaded.path());
            let current = match sessiondb::fs::nofollow::read_user_file(&file) {
                Ok(bytes) => bytes
                    .split(|b| *b == b'\n')
                    .filter_map(|l| match sessiondb::codec::message_line::decode_line(l).content {
                        sessiondb::codec::message_line::LineContent::Message(m) => Some(m),
                        _ => None,
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            (events, current)
        }
        None => {
            let chat_id = args.chat_id.as_deref().expect("required without --dir");
            let events = with_session(store, chat_id, |s| s.stored_events(&args.branch))?;
            // What `--apply` replaces: the log gptme has loaded.
            let current = super::ops::loaded_messages(store, chat_id, &args.branch)?;
            (events, current)
        }
    };
    let recovered = events.as_deref().and_then(ops::replay);
    let event_log = recovered.is_some();
    let recovered = recovered.unwrap_or_default();
    let current_log = sessiondb::model::Log::new(current.clone());
    let recovered_log = sessiondb::model::Log::new(recovered.clone());
    let difference = current_log.first_difference(&recovered_log);
    if args.apply {
        if !event_log {
            return Err(Failure("no event log: nothing to recover".into()));
        }
        let chat_id = args.chat_id.as_deref().expect("--apply needs CHAT_ID");
        if difference.is_some() {
            let backup = with_session(store, chat_id, |s| s.apply_recovery(&args.branch, &recovered))?;
            say!("replaced {} with {} recovered messages; backup branch: {backup}", args.branch, recovered.len());
        } else {
            say!("{} already equals its event log; nothing changed", args.branch);
        }
        return Ok(0);
    }
    if args.json {
        say!(
            "{}",
            serde_json::json!({
                "event_log": event_log,
                "messages": recovered.len(),
                "current": current.len(),
                "equal": difference.is_none(),
                "first_difference": difference,
            })
        );
    } else if !event_log {
        say!("no event log: nothing to recover");
    } else {
        say!("the event log replays to {} messages; the branch has {}", recovered.len(), current.len());
        match difference {
            None => say!("they are the same"),
            Some(at) => say!("they differ from message {} on (use --apply to replace the branch)", at + 1),
        }
    }
    Ok(0)
}
