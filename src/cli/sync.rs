//! `sessiondb sync [LOGS_DIR] [--dry-run] [--json] [--watch [--rescan SECS]]`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::term::{say, tell};
use super::Failure;
use sessiondb::store::Store;
use sessiondb::sync::pass::{sync_pass, Stranded, SyncReport};
use sessiondb::sync::watch::{watch, WatchEvent};

#[derive(clap::Args)]
pub struct Args {
    /// gptme's logs root [default: $GPTME_LOGS_HOME, else `logs` in config.toml, else $XDG_DATA_HOME/gptme/logs, else
    /// ~/.local/share/gptme/logs]
    pub(crate) logs_dir: Option<PathBuf>,
    /// Report what would be done, and change nothing
    #[arg(long, conflicts_with = "watch")]
    dry_run: bool,
    /// Print the summary as JSON (with --watch: one JSON object per line, per pass)
    #[arg(long)]
    json: bool,
    /// Keep running, taking in what gptme writes as it writes it (Ctrl-C stops)
    #[arg(long)]
    watch: bool,
    /// With --watch: seconds between full rescans, which catch anything notifications missed
    #[arg(long, default_value_t = 30, value_name = "SECS", requires = "watch")]
    rescan: u64,
    #[command(flatten)]
    source: super::SourceArg,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let root = super::logs_root(args.logs_dir)?;
    if args.watch {
        return watch_root(store, &root, args.source.source.as_deref(), Duration::from_secs(args.rescan.max(1)), args.json);
    }
    let report = sync_pass(store, &root, args.source.source.as_deref(), None, args.dry_run)?;
    if !args.dry_run {
        catch_up_indexes(store);
        store.flush_wal()?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serialisable"));
    } else {
        print_summary(&report);
    }
    Ok(exit_code(&report))
}

fn exit_code(report: &SyncReport) -> i32 {
    i32::from(report.ingest.failed + report.materialise.failed > 0)
}

/// What a pass did, in as few words as it takes: one line when nothing changed, else a line
/// per direction with what happened, leaving out what did not.
fn print_summary(r: &SyncReport) {
    let (i, m) = (&r.ingest, &r.materialise);
    let came_in = i.conversations + i.deleted + i.skipped_locked + i.changing + i.failed > 0;
    let went_out = m.conversations + m.skipped_locked + m.failed > 0;
    if !came_in && !went_out && r.conflicts.is_empty() {
        say!("nothing new in {} ({} checked)", r.logs_dir, super::plural(i.checked, "conversation"));
    }
    let and = |first: String, rest: &[(u64, &str)]| {
        let rest = rest.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}"));
        std::iter::once(first).chain(rest).collect::<Vec<_>>().join("; ")
    };
    if came_in {
        let would = if r.dry_run { "would take in" } else { "took in" };
        let first = format!("{would} {} ({} new), {}", super::plural(i.conversations, "conversation"), i.new_conversations, super::plural(i.messages, "message"));
        say!(
            "{}",
            and(
                first,
                &[
                    (i.deleted, "gone (marked deleted)"),
                    (i.skipped_locked, "skipped (locked by gptme)"),
                    (i.changing, "still being written (next pass)"),
                    (i.failed, "failed")
                ]
            )
        );
    }
    if went_out {
        let would = if r.dry_run { "would write out" } else { "wrote out" };
        let first =
            format!("{would} {}, {}, {}", super::plural(m.conversations, "conversation"), super::plural(m.messages, "message"), super::plural(m.files, "file"));
        say!("{}", and(first, &[(m.skipped_locked, "skipped (locked by gptme)"), (m.failed, "failed")]));
    }
    if !r.conflicts.is_empty() {
        say!("{}", super::plural(r.conflicts.len() as u64, "conflict"));
    }
    for c in &r.conflicts {
        match &c.kept_as {
            Some(kept) => say!("  {}: {}: both sides changed it; the directory's version stays, the store's is kept as {kept}", c.chat_id, c.path),
            None => say!("  {}: {}: removed in the store but changed in the directory; the directory's version stays", c.chat_id, c.path),
        }
    }
    for d in &r.displaced {
        tell!("warning: {}", rescued_message(&d.chat_id, &d.path, d.messages, d.kept_as.as_deref().unwrap_or("-")));
    }
    for s in &r.stranded {
        tell!("warning: {}", stranded_message(s));
    }
    for w in &r.warnings {
        tell!("warning: {w}");
    }
    for e in &r.errors {
        tell!("error: {}", sessiondb::cause::chain(e));
    }
}

/// Messages sessiondb appended that gptme's rewrite dropped, and where they are kept.
pub(super) fn rescued_message(conversation: &str, path: &str, messages: u64, kept_as: &str) -> String {
    format!(
        "{conversation}: {messages} message(s) sessiondb had appended to {path} were dropped by a rewrite that no undo or edit explains \
         (gptme loaded the conversation just before they were written); kept as {kept_as}"
    )
}

/// What to do about changes queued for a directory that is gone.
pub(super) fn stranded_message(s: &Stranded) -> String {
    format!(
        "{chat}: changes queued in the store cannot be written out: its directory {dir} is gone (renamed or deleted). \
         Move it back and run `sessiondb sync`, or write the store's copy elsewhere with `sessiondb export --to DIR {chat}`; \
         until then `sessiondb rm {chat}` refuses (`--force` discards them)",
        chat = s.chat_id,
        dir = s.dir
    )
}

fn watch_root(store: &Store, root: &std::path::Path, source: Option<&str>, rescan: Duration, json: bool) -> Result<i32, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).map_err(|e| Failure(format!("cannot handle Ctrl-C: {e}")))?;
    if !json {
        tell!("sessiondb: watching {} (Ctrl-C stops)", root.display());
    }
    let mut failures = 0;
    let mut told_stranded = std::collections::HashSet::new();
    watch(store, root, source, rescan, &stop, &mut |event| match event {
        WatchEvent::Pass { report, .. } => {
            failures += report.ingest.failed + report.materialise.failed;
            if !json {
                for s in &report.stranded {
                    if told_stranded.insert(s.chat_id.clone()) {
                        tell!("warning: {}", stranded_message(s));
                    }
                }
            }
            if json {
                println!("{}", serde_json::to_string(report).expect("serialisable"));
            } else if report.changed_anything() || !report.errors.is_empty() {
                let time = chrono::Local::now().format("%H:%M:%S%.3f");
                let (i, m) = (&report.ingest, &report.materialise);
                say!(
                    "{time} in: {}, {}{}; out: {}, {}; {}",
                    super::plural(i.conversations, "conversation"),
                    super::plural(i.messages, "message"),
                    if i.deleted > 0 { format!(", {} gone", i.deleted) } else { String::new() },
                    super::plural(m.conversations, "conversation"),
                    super::plural(m.messages, "message"),
                    super::plural(report.conflicts.len() as u64, "conflict"),
                );
                for d in &report.displaced {
                    tell!("warning: {}", rescued_message(&d.chat_id, &d.path, d.messages, d.kept_as.as_deref().unwrap_or("-")));
                }
                for c in &report.conflicts {
                    say!("  conflict {}: {} (the store's version is kept as {})", c.chat_id, c.path, c.kept_as.as_deref().unwrap_or("-"));
                }
                for e in &report.errors {
                    tell!("error: {}", sessiondb::cause::chain(e));
                }
            }
        }
        WatchEvent::Degraded(why) => tell!("sessiondb: {why}"),
        WatchEvent::Failed(e) => tell!("sessiondb: sync failed: {}; trying again at the next change", sessiondb::cause::chain(&e)),
    })?;
    // A fresh handle, as every pass had (the first one may hold a log deleted meanwhile).
    Store::open(store.path())?.flush_wal()?;
    if !json {
        tell!("sessiondb: stopped");
    }
    Ok(i32::from(failures > 0))
}

/// Brings the search indexes up to the store after a command that wrote messages, with a
/// spinner on a terminal: the word and substring indexes first (behind only after an import
/// that was stopped before it built them, whose messages the writes since wait with), then the
/// ranking index. A failure is told and the command still succeeds (searches catch up or say
/// what they could not look at, and answer from the word index meanwhile; `doctor --reindex`
/// makes the indexes again).
pub(crate) fn catch_up_indexes(store: &Store) {
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_style(indicatif::ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
    if let Err(e) = store.catch_up_search_indexes(&mut |indexed, of| spinner.set_message(format!("search index: {indexed}/{of} messages"))) {
        spinner
            .suspend(|| tell!("warning: the search index could not be brought up to date: {}; searches index what is missing first", sessiondb::cause::chain(&e)));
    }
    let caught = store.catch_up_ranking(&mut |added| spinner.set_message(format!("ranking index: {added} messages")));
    spinner.finish_and_clear();
    if let Err(e) = caught {
        tell!("warning: the ranking index could not be brought up to date: {}; searches rank from the word index meanwhile", sessiondb::cause::chain(&e));
    }
}
