//! Commands on whole conversations: `fork`, `rename`, `rm`, `clean`.

use super::term::{say, tell};
use super::Failure;
use sessiondb::ops::{self};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct ForkArgs {
    /// The conversation to copy
    chat_id: String,
    /// The new conversation's id [default with --at-turn: <id>-fork-<time>]
    new_id: Option<String>,
    /// The new conversation's id, as gptme's `chats fork --name` takes it (the same as NEW_ID)
    #[arg(long, value_name = "NAME", conflicts_with = "new_id")]
    name: Option<String>,
    /// Keep only the messages through the N-th user exchange (0: before the first)
    #[arg(long, value_name = "N")]
    at_turn: Option<usize>,
}

pub fn fork(store: &Store, mut args: ForkArgs) -> Result<i32, Failure> {
    args.new_id = args.new_id.or(args.name.take());
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
pub struct RenameArgs {
    /// The conversation
    chat_id: String,
    /// The new display name
    name: String,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn rename(store: &Store, args: RenameArgs) -> Result<i32, Failure> {
    super::run_op(store, &args.chat_id, args.queue, |s| s.rename(&args.name))?;
    say!("renamed {} to {:?}", args.chat_id, args.name);
    Ok(0)
}

/// `rm`: what it removes is gptme's too, unless `--store-only` (its help is on `Command::Rm`).
#[derive(clap::Args)]
pub struct RmArgs {
    /// The conversation to remove
    chat_id: String,
    /// Remove only the store's copy; gptme's directory stays, and the next sync reads it in again
    #[arg(long)]
    store_only: bool,
    /// Remove it even though changes queued with --queue were never written to its directory
    /// (they are lost)
    #[arg(long)]
    force: bool,
    /// Remove without asking (needed when standard input is not a terminal)
    #[arg(short = 'y', long)]
    yes: bool,
    /// Show what would be removed, and remove nothing
    #[arg(long)]
    dry_run: bool,
}

/// Removes a conversation — its rows and gptme's directory of it, or with `--store-only` its
/// rows alone — once the user has seen what goes: asked on a terminal, `--yes` otherwise;
/// `--dry-run` only shows it.
pub fn rm(store: &Store, args: RmArgs) -> Result<i32, Failure> {
    let r = ops::removal(store, &args.chat_id)?;
    let s = &r.summary;
    let what = format!(
        "{}{}: {} message{}, {} branch{}{}",
        s.chat_id,
        if s.name != s.chat_id { format!(" ({})", s.name) } else { String::new() },
        s.messages,
        if s.messages == 1 { "" } else { "s" },
        s.branches,
        if s.branches == 1 { "" } else { "es" },
        match (&r.dir, args.store_only) {
            (Some(dir), false) => format!(
                ", from the store and from gptme: its directory {} ({}) is deleted (--store-only keeps it)",
                dir.display(),
                super::human_bytes(r.size_bytes)
            ),
            (Some(dir), true) => format!(", from the store only: gptme's directory {} stays, and the next sync reads it in again", dir.display()),
            (None, _) => ", store only (its directory is gone)".into(),
        }
    );
    let queued = if r.queued { "; its changes queued with --queue were never written to the directory and go with it" } else { "" };
    if args.dry_run {
        say!("would remove {what}{queued}");
        return Ok(0);
    }
    let refusal = format!("rm would remove {what}{queued}: give --yes to remove it without a terminal to ask on (--dry-run shows what goes)");
    if !args.yes && !super::confirm(&format!("remove {what}{queued}?"), &refusal)? {
        tell!("nothing removed");
        return Ok(1);
    }
    if args.store_only {
        ops::remove_from_store(store, &args.chat_id, args.force)?;
        match &r.dir {
            Some(dir) => say!("removed {} from the store; gptme's directory {} stays (`sessiondb sync` reads it in again)", args.chat_id, dir.display()),
            None => say!("removed {} from the store", args.chat_id),
        }
    } else {
        ops::remove(store, &args.chat_id, args.force)?;
        say!("removed {}", args.chat_id);
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct CleanArgs {
    /// Conversations with at most this many messages count as empty
    #[arg(long = "max-messages", value_name = "N", default_value_t = 1)]
    max_messages: i64,
    /// Include test and eval conversations, as --all does for list, search and stats
    #[arg(long = "all", visible_alias = "include-test")]
    include_test: bool,
    /// Remove them (without this, only list them)
    #[arg(long)]
    delete: bool,
    /// Print the conversations found (and what was deleted) as JSON
    #[arg(long)]
    json: bool,
}

pub fn clean(store: &Store, args: CleanArgs) -> Result<i32, Failure> {
    let found = ops::clean_candidates(store, args.max_messages, args.include_test)?;
    let (mut deleted, mut freed) = (0, 0);
    if args.delete {
        for c in &found {
            match ops::remove_unchanged(store, &c.chat_id) {
                Ok(()) => {
                    deleted += 1;
                    freed += c.size_bytes;
                }
                Err(e) => tell!("warning: could not delete {}: {}", c.chat_id, sessiondb::cause::chain(&e)),
            }
        }
    }
    let total: u64 = found.iter().map(|c| c.size_bytes).sum();
    if args.json {
        let rows: Vec<_> = found.iter().map(|c| serde_json::json!({"id": c.chat_id, "name": c.name, "messages": c.messages, "size_bytes": c.size_bytes})).collect();
        super::print_json(&serde_json::json!({"found": found.len(), "deleted": deleted, "freed_bytes": freed, "total_bytes": total, "conversations": rows}));
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
