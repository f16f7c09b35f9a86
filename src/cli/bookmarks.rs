//! `checkpoint`, `checkpoints`, `backtrack`: gptme's `/backtrack` bookmarks.

use super::term::say;
use super::Failure;
use sessiondb::ops::with_session;
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct CheckpointArgs {
    /// The conversation to bookmark
    chat_id: String,
    /// The bookmark's label [default: cp<N>]
    label: Option<String>,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn checkpoint(store: &Store, args: CheckpointArgs) -> Result<i32, Failure> {
    let c = super::run_op(store, &args.chat_id, args.queue, |s| s.add_bookmark(args.label.as_deref()))?;
    say!("Checkpoint '{}' saved at message index {}.", c.label, c.index);
    Ok(0)
}

#[derive(clap::Args)]
pub struct CheckpointsArgs {
    /// The conversation
    chat_id: String,
    /// Print the bookmarks as JSON
    #[arg(long)]
    json: bool,
}

pub fn checkpoints(store: &Store, args: CheckpointsArgs) -> Result<i32, Failure> {
    let list = with_session(store, &args.chat_id, |s| s.bookmarks())?;
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
    /// The conversation to rewind
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
