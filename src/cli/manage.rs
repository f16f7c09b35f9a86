//! Commands for views, forks, bookmarks, names, removal and recovery.

use std::path::PathBuf;

use super::term::{say, tell};
use super::Failure;
use crate::codec::toml_log::toml_to_messages;
use crate::model::Message;
use crate::ops::{self, with_session};
use crate::store::Store;

#[derive(clap::Subcommand)]
pub enum ViewCommand {
    /// Create (or replace) a compacted view from a TOML file of messages
    Create {
        chat_id: String,
        name: String,
        #[arg(long, value_name = "FILE")]
        toml: PathBuf,
    },
    /// Make a view active: appends then go to main and the view
    Use { chat_id: String, name: String },
    /// Deactivate the view
    Off { chat_id: String },
}

pub fn view(store: &Store, command: ViewCommand) -> Result<i32, Failure> {
    match command {
        ViewCommand::Create { chat_id, name, toml } => {
            let text = std::fs::read_to_string(&toml).map_err(|e| Failure(format!("{}: {e}", toml.display())))?;
            let messages = toml_to_messages(&text).map_err(|e| Failure(format!("{}: {e}; nothing changed", toml.display())))?;
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

#[derive(clap::Args)]
pub struct ForkArgs {
    chat_id: String,
    /// The new conversation's id [default with --at-turn: <id>-fork-<time>]
    new_id: Option<String>,
    /// Keep only the messages through the N-th user exchange (0: before the first)
    #[arg(long, value_name = "N")]
    at_turn: Option<usize>,
}

pub fn fork(store: &Store, args: ForkArgs) -> Result<i32, Failure> {
    match args.at_turn {
        Some(turn) => {
            let (id, kept) = ops::fork_at_turn(store, &args.chat_id, turn, args.new_id.as_deref())?;
            say!("forked '{}' at turn {turn} → '{id}' ({kept} messages kept)", args.chat_id);
        }
        None => {
            let new_id = args.new_id.ok_or_else(|| Failure("give NEW_ID (or --at-turn N)".into()))?;
            let dir = ops::fork(store, &args.chat_id, &new_id)?;
            say!("forked '{}' → '{new_id}' ({})", args.chat_id, dir.display());
        }
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct CheckpointArgs {
    chat_id: String,
    /// The bookmark's label [default: cp<N>]
    label: Option<String>,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn checkpoint(store: &Store, args: CheckpointArgs) -> Result<i32, Failure> {
    let c = super::run_op(store, &args.chat_id, args.queue, |s| s.mark(args.label.as_deref()))?;
    say!("Checkpoint '{}' saved at message index {}.", c.label, c.index);
    Ok(0)
}

#[derive(clap::Args)]
pub struct CheckpointsArgs {
    chat_id: String,
    #[arg(long)]
    json: bool,
}

pub fn checkpoints(store: &Store, args: CheckpointsArgs) -> Result<i32, Failure> {
    let list = with_session(store, &args.chat_id, |s| s.checkpoints())?;
    if args.json {
        let rows: Vec<_> = list.iter().map(|c| serde_json::json!({"index": c.index, "label": c.label, "timestamp": c.timestamp})).collect();
        println!("{}", serde_json::to_string_pretty(&rows).expect("serialisable"));
    } else if list.is_empty() {
        say!("No checkpoints yet. Use `sessiondb checkpoint CHAT_ID [LABEL]` to save one.");
    } else {
        say!("{:>3}  {:<16}  {:>5}  Timestamp", "#", "Label", "Index");
        for (i, c) in list.iter().enumerate() {
            say!("{:>3}  {:<16}  {:>5}  {}", i + 1, c.label, c.index, c.timestamp.get(..19).unwrap_or(&c.timestamp).replace('T', " "));
        }
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct BacktrackArgs {
    chat_id: String,
    /// A bookmark's label (the most recent wins) or a bare message index
    target: String,
    /// Why, recorded in the summary message
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn backtrack(store: &Store, args: BacktrackArgs) -> Result<i32, Failure> {
    let removed = super::run_op(store, &args.chat_id, args.queue, |s| s.backtrack(&args.target, args.reason.as_deref()))?;
    if removed == 0 {
        say!("already there; nothing to rewind");
    } else {
        say!("backtracked {removed} message(s)");
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct RenameArgs {
    chat_id: String,
    name: String,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn rename(store: &Store, args: RenameArgs) -> Result<i32, Failure> {
    super::run_op(store, &args.chat_id, args.queue, |s| s.rename(&args.name))?;
    say!("renamed {} to {:?}", args.chat_id, args.name);
    Ok(0)
}

#[derive(clap::Args)]
pub struct RmArgs {
    chat_id: String,
    /// Remove it even though changes queued with --queue were never written to its directory
    /// (they are lost)
    #[arg(long)]
    force: bool,
}

pub fn rm(store: &Store, args: RmArgs) -> Result<i32, Failure> {
    ops::remove(store, &args.chat_id, args.force)?;
    say!("removed {}", args.chat_id);
    Ok(0)
}

#[derive(clap::Args)]
pub struct CleanArgs {
    /// Conversations with at most this many messages count as empty
    #[arg(short = 'n', long = "max-messages", default_value_t = 1)]
    max_messages: i64,
    #[arg(long)]
    include_test: bool,
    /// Remove them (without this, only list them)
    #[arg(long)]
    delete: bool,
    #[arg(long)]
    json: bool,
}

pub fn clean(store: &Store, args: CleanArgs) -> Result<i32, Failure> {
    let found = ops::clean_candidates(store, args.max_messages, args.include_test)?;
    let (mut deleted, mut freed) = (0, 0);
    if args.delete {
        for c in &found {
            match ops::remove(store, &c.chat_id, false) {
                Ok(()) => {
                    deleted += 1;
                    freed += c.size_bytes;
                }
                Err(e) => tell!("warning: could not delete {}: {e}", c.chat_id),
            }
        }
    }
    let total: u64 = found.iter().map(|c| c.size_bytes).sum();
    if args.json {
        let rows: Vec<_> = found.iter().map(|c| serde_json::json!({"id": c.chat_id, "name": c.name, "messages": c.messages, "size_bytes": c.size_bytes})).collect();
        println!("{}", serde_json::json!({"found": found.len(), "deleted": deleted, "freed_bytes": freed, "total_bytes": total, "conversations": rows}));
    } else if found.is_empty() {
        say!("No empty conversations found.");
    } else {
        for c in &found {
            say!("{}\t{} messages\t{} bytes", c.chat_id, c.messages, c.size_bytes);
        }
        if args.delete {
            say!("deleted {deleted} of {} conversations, freed {freed} bytes", found.len());
        } else {
            say!("{} conversations, {total} bytes (dry run; --delete removes them)", found.len());
        }
    }
    Ok(0)
}

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
            let path = dir.join(crate::layout::events_path(&args.branch));
            let events = ops::read_event_file(&path).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
            // The log gptme loads (the active view, on main with one), which an edit replaces.
            let marker = crate::fs::nofollow::read_user_file(&dir.join(crate::layout::VIEW_MARKER)).ok();
            let loaded = crate::layout::loaded_log(&args.branch, marker.as_deref(), |v| dir.join(crate::layout::view_path(v)).is_file());
            let file = dir.join(loaded.path());
            let current = match crate::fs::nofollow::read_user_file(&file) {
                Ok(bytes) => bytes
                    .split(|b| *b == b'\n')
                    .filter_map(|l| match crate::codec::message_line::decode_line(l).content {
                        crate::codec::message_line::LineContent::Message(m) => Some(m),
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
    let current_log = crate::model::Log::new(current.clone());
    let recovered_log = crate::model::Log::new(recovered.clone());
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
