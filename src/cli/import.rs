//! `sessiondb import [LOGS_DIR] [--json]`.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::term::{say, tell};
use super::{human_bytes, Failure};
use sessiondb::store::{Store, StoreError, WriteBatch};
use sessiondb::sync::ingest::{self, format_warning, IngestError, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// gptme's logs root [default: $GPTME_LOGS_HOME, else $XDG_DATA_HOME/gptme/logs, else
    /// ~/.local/share/gptme/logs]; with --toml, the CHAT_ID whose branch is replaced
    #[arg(value_name = "LOGS_DIR | CHAT_ID")]
    logs_dir: Option<PathBuf>,
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
}

/// Conversations are committed in batches of about this many bytes: few enough commits that
/// full-text indexing runs in bulk, small enough that an interrupted import loses little work.
const BATCH_BYTES: u64 = 64 << 20;

#[derive(Default)]
struct Summary {
    conversations: u64,
    unchanged: u64,
    failed: u64,
    skipped: u64,
    messages: u64,
    branches: u64,
    views: u64,
    events: u64,
    attachments: u64,
    bytes: u64,
    warnings: u64,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    if let (Some(file), Some(chat_id)) = (&args.toml, &args.logs_dir) {
        return super::ops::import_toml(store, file, &chat_id.to_string_lossy(), &args.branch);
    }
    let root = super::logs_root(args.logs_dir)?;
    let started = Instant::now();
    let (dirs, others) = ingest::conversation_dirs(&root)?;
    let mut summary = Summary { skipped: others.len() as u64, ..Summary::default() };
    for other in &others {
        tell!("sessiondb: skipped {}: no conversation.jsonl", other.display());
    }
    let progress = ProgressBar::new(dirs.len() as u64);
    progress.set_style(ProgressStyle::with_template("{spinner} importing {pos}/{len} {wide_bar} {eta}").expect("valid template"));
    let mut conn = store.connection()?;
    let mut batch = WriteBatch::begin(&mut conn)?;
    let mut batch_bytes = 0;
    ingest::import_dirs(&mut batch, &dirs, ingest::ReadMode::Whole, false, &mut |batch, dir, outcome| {
        match outcome {
            Ok(Outcome::Imported(stats)) => {
                summary.conversations += 1;
                summary.messages += stats.messages;
                summary.branches += stats.branches;
                summary.views += stats.views;
                summary.events += stats.events;
                summary.attachments += stats.attachments;
                summary.bytes += stats.bytes;
                summary.warnings += stats.warnings.len() as u64 + stats.more_warnings;
                for (path, n, kept_as) in &stats.rescued {
                    progress.suspend(|| tell!("warning: {}", super::sync::rescued_message(&dir.display().to_string(), path, *n, kept_as)));
                }
                for warning in &stats.warnings {
                    progress.suspend(|| tell!("warning: {}", format_warning(dir, warning)));
                }
                if stats.more_warnings > 0 {
                    progress.suspend(|| tell!("warning: {}: {} more malformed lines", dir.display(), stats.more_warnings));
                }
                batch_bytes += stats.bytes;
                if batch_bytes > BATCH_BYTES {
                    batch.commit()?;
                    batch_bytes = 0;
                }
            }
            Ok(Outcome::Unchanged) => summary.unchanged += 1,
            // Re-reading it would replace its queued changes (the store refuses): `sync` merges.
            Err(IngestError::Store { source: StoreError::Queued(_), .. }) => {
                summary.skipped += 1;
                progress.suspend(|| tell!("sessiondb: skipped {}: it has changes queued in the store; run `sessiondb sync`", dir.display()));
            }
            Err(e) => {
                summary.failed += 1;
                progress.suspend(|| tell!("error: {}", describe(&e)));
            }
        }
        progress.inc(1);
        Ok(())
    })?;
    batch.finish()?;
    drop(conn);
    store.flush_wal()?;
    progress.finish_and_clear();
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

fn describe(e: &IngestError) -> String {
    format!("{e}; nothing of this conversation was imported")
}
