//! `sessiondb archive` and `sessiondb restore`: conversations out of gptme's logs root and back,
//! the store keeping them whole meanwhile ([`sessiondb::ops::archive`]).

use super::term::{say, tell};
use super::Failure;
use sessiondb::ops::{self, ArchiveCandidate, Candidates, Selection};
use sessiondb::store::Store;

/// Which conversations `archive` or `restore` takes, and how it reports.
#[derive(clap::Args)]
pub struct Args {
    /// The conversations (chat ids, or SOURCE:CHAT)
    #[arg(value_name = "CHAT_ID")]
    chat_ids: Vec<String>,
    /// Only conversations last modified before DATE: YYYY-MM-DD, or Nd / Nh ago (`--before 90d`)
    #[arg(long, value_name = "DATE")]
    before: Option<String>,
    /// Only conversations of this source (a logs root the store reads)
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// Every conversation (of --source, when given), when no CHAT_ID and no --before says which
    #[arg(long)]
    all: bool,
    /// List what would be done, and change nothing
    #[arg(long)]
    dry_run: bool,
    /// Print what was done as JSON
    #[arg(long)]
    json: bool,
}

/// Which way conversations go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Archive,
    Restore,
}

impl Way {
    fn verb(self) -> &'static str {
        match self {
            Way::Archive => "archive",
            Way::Restore => "restore",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Way::Archive => "archived",
            Way::Restore => "restored",
        }
    }
}

pub fn archive(store: &Store, args: Args) -> Result<i32, Failure> {
    let found = ops::archive_candidates(store, &selection(Way::Archive, &args)?)?;
    run(store, Way::Archive, found, args.dry_run, args.json)
}

pub fn restore(store: &Store, args: Args) -> Result<i32, Failure> {
    let found = ops::restore_candidates(store, &selection(Way::Restore, &args)?)?;
    run(store, Way::Restore, found, args.dry_run, args.json)
}

/// The selection the arguments give; all of the store only with `--all`, so that a bare
/// `archive` never empties a logs root.
fn selection(way: Way, args: &Args) -> Result<Selection, Failure> {
    if args.chat_ids.is_empty() && args.before.is_none() && !args.all {
        return Err(Failure(format!(
            "say which conversations to {}: CHAT_ID…, --before DATE (e.g. --before 90d), or --all (with --source NAME for one logs root's)",
            way.verb()
        )));
    }
    let until = args.before.as_deref().map(super::parse_since).transpose()?;
    Ok(Selection { chats: args.chat_ids.clone(), until, source: args.source.clone() })
}

fn run(store: &Store, way: Way, candidates: Candidates, dry_run: bool, json: bool) -> Result<i32, Failure> {
    let found = candidates.found.as_slice();
    if !json {
        for (name, why) in &candidates.left_out {
            tell!("sessiondb: {name}: {why}; left as it is");
        }
    }
    // What interrupted runs left in the parking folders of the roots concerned goes first.
    if !dry_run {
        for root in &candidates.roots {
            ops::clear_parking(store, root)?;
        }
    }
    let mut rows = Vec::new();
    let (mut moved, mut failed, mut bytes) = (0usize, 0usize, 0u64);
    for c in found {
        let result = if dry_run {
            None
        } else {
            Some(match way {
                Way::Archive => ops::archive(store, &c.name),
                Way::Restore => ops::restore(store, &c.name),
            })
        };
        let (state, error) = match &result {
            None => (format!("would {}", way.verb()), None),
            Some(Ok(_)) => {
                moved += 1;
                (way.done().to_owned(), None)
            }
            Some(Err(e)) => {
                failed += 1;
                let text = sessiondb::cause::chain(e);
                if !json {
                    tell!("sessiondb: could not {} {}: {text}", way.verb(), c.name);
                }
                ("failed".to_owned(), Some(text))
            }
        };
        // What would go, or what went.
        let size = if dry_run { c.bytes } else { result.as_ref().and_then(|r| r.as_ref().ok()).map_or(0, |d| d.bytes) };
        bytes += size;
        if json {
            let modified = sessiondb::codec::timestamp::format_utc(c.modified);
            let mut row = serde_json::json!({"id": c.name, "messages": c.messages, "modified": modified, "size_bytes": size, "result": state});
            if let Some(error) = error {
                row["error"] = serde_json::Value::String(error);
            }
            rows.push(row);
        } else if dry_run {
            say!("{}\t{} messages\t{}", c.name, c.messages, super::human_bytes(c.bytes));
        }
    }
    if json {
        super::print_json(&serde_json::json!({
            "dry_run": dry_run,
            "found": found.len(),
            way.done(): moved,
            "failed": failed,
            "bytes": bytes,
            "left_out": candidates.left_out.iter().map(|(name, why)| serde_json::json!({"id": name, "why": why})).collect::<Vec<_>>(),
            "conversations": rows,
        }));
    } else {
        summary(way, found, dry_run, moved, failed, bytes);
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

fn summary(way: Way, found: &[ArchiveCandidate], dry_run: bool, moved: usize, failed: usize, bytes: u64) {
    let n = |count: usize| super::plural(count as u64, "conversation");
    if found.is_empty() {
        say!("nothing to {}", way.verb());
    } else if dry_run {
        match way {
            Way::Archive => say!("{} would leave gptme's logs root, {} (dry run; nothing changed)", n(found.len()), super::human_bytes(bytes)),
            Way::Restore => say!("{} would be written back to gptme's logs root (dry run; nothing changed)", n(found.len())),
        }
    } else {
        match way {
            Way::Archive => say!(
                "archived {} out of gptme's logs root ({} freed there); they stay listed, searchable and readable here (`sessiondb restore CHAT_ID` puts one back)",
                n(moved),
                super::human_bytes(bytes)
            ),
            Way::Restore => say!("restored {} to gptme's logs root ({})", n(moved), super::human_bytes(bytes)),
        }
        if failed > 0 {
            say!("{} left as {} (see above)", n(failed), if way == Way::Archive { "they were" } else { "archived" });
        }
    }
}
