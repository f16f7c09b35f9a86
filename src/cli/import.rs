//! `sessiondb import [LOGS_DIR] [--json]`.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::term::{say, tell};
use super::{human_bytes, Failure};
use sessiondb::store::Store;
use sessiondb::sync::import::{import_root, Progress};
use sessiondb::sync::ingest::format_warning;

#[derive(clap::Args)]
pub struct Args {
    /// gptme's logs root [default: $GPTME_LOGS_HOME, else `logs` in config.toml, else $XDG_DATA_HOME/gptme/logs, else
    /// ~/.local/share/gptme/logs]; with --toml, the CHAT_ID whose branch is replaced
    #[arg(value_name = "LOGS_DIR | CHAT_ID")]
    pub(crate) logs_dir: Option<PathBuf>,
    /// Print a machine-readable summary
    #[arg(long)]
    json: bool,
    /// Instead: replace a branch of CHAT_ID with the messages of this TOML file (gptme's
    /// editable layout; a backup branch is kept)
    #[arg(long, value_name = "FILE", requires = "logs_dir")]
    toml: Option<PathBuf>,
    /// With --toml: the branch to replace
    #[arg(long, default_value = "main")]
    branch: String,
    /// With --toml: empty the branch without asking, when the file holds no messages
    #[arg(long, requires = "toml")]
    allow_empty: bool,
    #[command(flatten)]
    source: super::SourceArg,
}

impl Args {
    /// Whether this imports conversations (and so may create the database), rather than
    /// replacing a branch of one already stored (`--toml`).
    pub fn takes_in_logs(&self) -> bool {
        self.toml.is_none()
    }
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    if let (Some(file), Some(chat_id)) = (&args.toml, &args.logs_dir) {
        return super::ops::import_toml(store, file, &chat_id.to_string_lossy(), &args.branch, args.allow_empty);
    }
    let root = super::logs_root(args.logs_dir)?;
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut indexing = false;
    // Messages go above the bar, once there is one.
    let tell_above = |bar: &Option<ProgressBar>, line: String| match bar {
        Some(bar) => bar.suspend(|| tell!("{line}")),
        None => tell!("{line}"),
    };
    let summary = import_root(store, &root, args.source.source.as_deref(), &mut |event| match event {
        Progress::NotAConversation { dir } => tell_above(&bar, format!("sessiondb: skipped {}: no conversation.jsonl", dir.display())),
        Progress::Found { conversations } => {
            let new = ProgressBar::new(conversations);
            new.set_style(ProgressStyle::with_template("{spinner} importing {pos}/{len} {wide_bar} {eta}").expect("valid template"));
            bar = Some(new);
        }
        Progress::Rescued { dir, path, messages, kept_as } => {
            tell_above(&bar, format!("warning: {}", super::sync::rescued_message(&dir.display().to_string(), path, messages, kept_as)))
        }
        Progress::Warning { dir, warning } => tell_above(&bar, format!("warning: {}", format_warning(dir, warning))),
        Progress::MoreWarnings { dir, count } => tell_above(&bar, format!("warning: {}: {count} more malformed lines", dir.display())),
        Progress::Queued { dir } => tell_above(&bar, format!("sessiondb: skipped {}: it has changes queued in the store; run `sessiondb sync`", dir.display())),
        Progress::Failed { error, .. } => tell_above(&bar, format!("error: {}; nothing of this conversation was imported", sessiondb::cause::chain(error))),
        Progress::Done { .. } => {
            if let Some(bar) = &bar {
                bar.inc(1);
            }
        }
        Progress::Indexing { indexed, of } => {
            let bar = bar.get_or_insert_with(|| ProgressBar::new(of));
            if !indexing {
                // Every conversation is in (and can be listed): the bar goes on for the indexes.
                indexing = true;
                bar.set_style(ProgressStyle::with_template("{spinner} search index {pos}/{len} messages {wide_bar} {eta}").expect("valid template"));
                bar.set_length(of);
                bar.reset_eta();
            }
            bar.set_position(indexed);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    super::sync::catch_up_indexes(store);
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        let json = serde_json::json!({
            "logs_dir": root.display().to_string(),
            "conversations": summary.conversations,
            "unchanged": summary.unchanged,
            "failed": summary.failed,
            "skipped": summary.skipped,
            "messages": summary.messages,
            "branches": summary.branches,
            "views": summary.views,
            "events": summary.events,
            "attachments": summary.attachments,
            "bytes": summary.bytes,
            "warnings": summary.warnings,
            "listable_seconds": (summary.listable_seconds * 1000.0).round() / 1000.0,
            "seconds": (seconds * 1000.0).round() / 1000.0,
        });
        println!("{}", serde_json::to_string_pretty(&json).expect("serialisable"));
    } else {
        say!(
            "imported {} conversations ({} unchanged, {} failed): {} messages, {} branches, {} views, {} events, {} attachments, {} in {:.2} s",
            summary.conversations,
            summary.unchanged,
            summary.failed,
            summary.messages,
            summary.branches,
            summary.views,
            summary.events,
            summary.attachments,
            human_bytes(summary.bytes),
            seconds
        );
    }
    Ok(if summary.failed > 0 { 1 } else { 0 })
}
