//! `recover`: a branch rebuilt from its event log.

use std::path::PathBuf;

use super::term::say;
use super::Failure;
use sessiondb::ops::{self, with_session, Recovery, Standing};
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
    let recovery = source.compare();
    let Recovery { event_log, ref prompt, ref recovered, current, difference } = recovery;
    if args.apply {
        if !event_log {
            return Err(Failure("no event log: nothing to recover".into()));
        }
        let chat_id = args.chat_id.as_deref().expect("--apply needs CHAT_ID");
        if difference.is_some() {
            let applied = recovery.applied();
            let backup = with_session(stored(), chat_id, |s| s.apply_recovery(&args.branch, &applied))?;
            say!("replaced {} with its {} system prompt messages and {} recovered messages; backup branch: {backup}", args.branch, prompt.len(), recovered.len());
        } else {
            say!("{} already equals its event log; nothing changed", args.branch);
        }
        return Ok(0);
    }
    let standing = recovery.standing();
    if args.json {
        super::print_json(&serde_json::json!({
            "event_log": event_log,
            "messages": recovered.len(),
            "prompt": prompt.len(),
            "current": current,
            "equal": difference.is_none(),
            "first_difference": difference,
            "standing": match standing {
                Standing::Same => "same",
                Standing::Short { .. } => "branch_short",
                Standing::Ahead { .. } => "event_log_short",
                Standing::Apart { .. } => "apart",
            },
        }));
        return Ok(0);
    }
    if !event_log {
        say!("no event log: nothing to recover");
        return Ok(0);
    }
    // Messages are numbered as `read` and `search` number them: from 0, every one counted.
    let prompt_note = match prompt.len() {
        0 => String::new(),
        n => format!(", the first {n} of them the system prompt gptme begins with (which it never logs as an event)"),
    };
    say!("the event log replays to {}; the branch has {}{prompt_note}", super::plural(recovered.len() as u64, "message"), super::plural(current as u64, "message"));
    match standing {
        Standing::Same => say!("the branch is what its event log replays to: it is sound, nothing to recover"),
        Standing::Short { missing } => say!(
            "the branch stops short: the event log's last {} (from message {current} on) are missing from it, as when a transcript is cut short by a crash; `--apply` restores them (the branch as it is becomes a backup branch)",
            super::plural(missing as u64, "message")
        ),
        Standing::Ahead { extra } => say!(
            "the branch holds {} after what its event log replays to (from message {} on): the event log stops early, the branch is not damaged; nothing to recover",
            super::plural(extra as u64, "message"),
            current - extra
        ),
        Standing::Apart { at } => say!(
            "they part from message {at} on: the branch was changed in a way the event log does not record, or the transcript was damaged; read both (`sessiondb read`) before choosing: `--apply` would replace the branch with the event log's version (the branch as it is kept as a backup branch)"
        ),
    }
    Ok(0)
}
