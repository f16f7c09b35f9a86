//! `recover`: a branch rebuilt from its event log.

use std::path::PathBuf;

use super::term::say;
use super::Failure;
use sessiondb::ops::{self, with_session, Recovery};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct RecoverArgs {
    /// A stored conversation (or use --dir)
    #[arg(required_unless_present = "dir")]
    chat_id: Option<String>,
    /// Recover from a gptme directory that has not been imported
    #[arg(long, value_name = "PATH", conflicts_with = "chat_id")]
    dir: Option<PathBuf>,
    /// The branch to rebuild
    #[arg(long, default_value = "main")]
    branch: String,
    /// Replace the branch with what the event log replays to (the current list becomes a backup branch)
    #[arg(long, conflicts_with = "dir")]
    apply: bool,
    /// Print the comparison as JSON
    #[arg(long)]
    json: bool,
}

impl RecoverArgs {
    /// With `--dir`, only a directory is read: no database is needed.
    pub fn reads_a_directory(&self) -> bool {
        self.dir.is_some()
    }
}

/// `recover`; `store` is `None` only when [`RecoverArgs::reads_a_directory`].
pub fn recover(store: Option<&Store>, args: RecoverArgs) -> Result<i32, Failure> {
    let stored = || store.expect("a database unless --dir");
    let source = match &args.dir {
        Some(dir) => ops::read_directory_branch(dir, &args.branch)?,
        None => ops::read_stored_branch(stored(), args.chat_id.as_deref().expect("required without --dir"), &args.branch)?,
    };
    let Recovery { event_log, recovered, current, difference } = source.compare();
    if args.apply {
        if !event_log {
            return Err(Failure("no event log: nothing to recover".into()));
        }
        let chat_id = args.chat_id.as_deref().expect("--apply needs CHAT_ID");
        if difference.is_some() {
            let backup = with_session(stored(), chat_id, |s| s.apply_recovery(&args.branch, &recovered))?;
            say!("replaced {} with {} recovered messages; backup branch: {backup}", args.branch, recovered.len());
        } else {
            say!("{} already equals its event log; nothing changed", args.branch);
        }
        return Ok(0);
    }
    if args.json {
        super::print_json(&serde_json::json!({
            "event_log": event_log,
            "messages": recovered.len(),
            "current": current,
            "equal": difference.is_none(),
            "first_difference": difference,
        }));
    } else if !event_log {
        say!("no event log: nothing to recover");
    } else {
        say!("the event log replays to {} messages; the branch has {}", recovered.len(), current);
        match difference {
            None => say!("they are the same"),
            Some(at) => say!("they differ from message {} on (use --apply to replace the branch)", at + 1),
        }
    }
    Ok(0)
}
