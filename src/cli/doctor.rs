//! `sessiondb doctor [LOGS_DIR] [--json]`: is the database sound, and where does it stand
//! against gptme's logs?

use std::path::{Path, PathBuf};

use super::term::say;
use super::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use sessiondb::store::doctor::{check_database_with, open_unmigrated, DatabaseReport, Problem, Step};
use sessiondb::sync::status::{sync_state_with_progress, SyncState};

#[derive(clap::Args)]
pub struct Args {
    /// gptme's logs root to compare the store with [default: $GPTME_LOGS_HOME, else `logs` in config.toml, else
    /// $XDG_DATA_HOME/gptme/logs, else ~/.local/share/gptme/logs, when it exists]
    logs_dir: Option<PathBuf>,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
    /// First make the substring index (for literal search) again from the stored messages
    #[arg(long)]
    reindex: bool,
}

/// How to get a sound database back: gptme's directories hold everything except changes
/// queued with --queue and not yet synced.
fn restore_advice(db: &Path, logs: Option<&Path>) -> String {
    let logs = logs.map(|l| l.display().to_string()).unwrap_or_else(|| "LOGS_DIR".into());
    format!(
        "gptme's directories are the source of the history: move {db} (and its -wal and -shm files) aside, then run \
         `sessiondb import {logs}` to build a new database from them. Only changes queued with --queue and not yet \
         written by `sessiondb sync` exist in the database alone.",
        db = db.display()
    )
}

/// [`restore_advice`] for a server's database, which sessiondb does not move aside.
fn server_restore_advice(logs: Option<&Path>) -> String {
    let logs = logs.map(|l| l.display().to_string()).unwrap_or_else(|| "LOGS_DIR".into());
    format!(
        "gptme's directories are the source of the history: create a new database on the server (`createdb`), then run \
         `sessiondb --db NEW_URL import {logs} --source NAME` from each host to build it from them. Only changes queued with --queue \
         and not yet written by `sessiondb sync` exist in the database alone."
    )
}

/// The store against the logs root, with a progress bar on standard error while it runs (on a
/// terminal only: indicatif draws nothing elsewhere), as import has: thousands of
/// conversations take seconds.
fn compare_with_progress(conn: &sessiondb::store::Connection, logs: &Path) -> Result<SyncState, sessiondb::sync::ingest::IngestError> {
    let mut bar: Option<ProgressBar> = None;
    let state = sync_state_with_progress(conn, logs, &mut |done, total| {
        let bar = bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(ProgressStyle::with_template("{spinner} comparing with the logs: {pos}/{len} conversations {wide_bar} {eta}").expect("valid template"));
            bar
        });
        bar.set_position(done);
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    state
}

pub fn run(db: &Path, args: Args) -> Result<i32, Failure> {
    sessiondb::store::check_usable(db)?;
    let server = sessiondb::store::Store::is_server(db);
    if server {
        // A server that cannot be reached is said as every command says it, not as a report.
        drop(open_unmigrated(db)?);
    }
    if !server && std::fs::symlink_metadata(db).is_err() {
        return Err(sessiondb::store::StoreError::NoDatabase { path: db.to_owned() }.into());
    }
    let logs = match args.logs_dir {
        Some(dir) => Some(dir),
        None => super::config::default_logs_root()?.filter(|l| l.is_dir()),
    };
    if args.reindex {
        let store = sessiondb::store::Store::open(db)?;
        sessiondb::store::fts::rebuild_substring_index(&store.connection()?)?;
        if !args.json {
            say!("{}", if server { "rebuilt the search indexes" } else { "rebuilt the substring index" });
        }
        // A server has no ranking index (its word search ranks from the rebuilt sets).
        if !server {
            let ranked = sessiondb::store::ranking::RankingIndex::rebuild(&store.connection()?, &mut |_| {})?;
            if !args.json {
                say!("rebuilt the ranking index ({ranked} messages)");
            }
        }
    }
    // A plain connection, no migration: doctor changes nothing, and must work on a database
    // that the rest of sessiondb refuses (a newer schema) or cannot read (a damaged file).
    // Progress on a terminal (stderr; nothing is drawn elsewhere): the check under way, and the
    // conversations the per-conversation checks have done.
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
    bar.set_message("checking the database");
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    let mut show = |step: Step| match step.total {
        0 => bar.set_message(format!("checking: {}", step.check.label())),
        total => bar.set_message(format!("checking: {} ({}/{total} conversations)", step.check.label(), step.done)),
    };
    let checked = open_unmigrated(db).and_then(|conn| {
        let report = check_database_with(&conn, &mut show)?;
        Ok((conn, report))
    });
    let (report, state, sync_error) = match checked {
        Ok((conn, report)) => {
            // The logs root can be compared whenever the rows can be trusted at all.
            let readable = report.schema_version == report.supported_version && !report.problems.iter().any(Problem::is_damage);
            let (state, sync_error) = match (&logs, readable) {
                (Some(l), true) => {
                    bar.finish_and_clear(); // the comparison has a bar of its own
                    match compare_with_progress(&conn, l) {
                        Ok(s) => (Some(s), None),
                        Err(e) => (None, Some(sessiondb::cause::chain(&e))),
                    }
                }
                _ => (None, None),
            };
            (report, state, sync_error)
        }
        Err(e) => (DatabaseReport { problems: vec![Problem::Unreadable(sessiondb::cause::chain(&e))], ..DatabaseReport::default() }, None, None),
    };
    bar.finish_and_clear();
    let damaged = report.problems.iter().any(Problem::is_damage);
    let advice = damaged.then(|| if server { server_restore_advice(logs.as_deref()) } else { restore_advice(db, logs.as_deref()) });
    let mut problems: Vec<String> = report.problems.iter().map(Problem::to_string).collect();
    if let Some(e) = &sync_error {
        problems.push(format!("logs root: {e}"));
    }
    if let Some(s) = &state {
        for stranded in &s.stranded {
            problems.push(super::sync::stranded_message(stranded));
        }
        for d in &s.displaced {
            problems.push(format!(
                "{}: {} message(s) sessiondb had appended to {} were dropped by a rewrite that no undo or edit explains; \
                 the store still holds them, and `sessiondb sync` keeps them as a conflict branch",
                d.chat_id, d.messages, d.path
            ));
        }
    }
    if args.json {
        let json = serde_json::json!({
            "ok": problems.is_empty(),
            "database": sessiondb::store::Store::shown(db),
            "schema_version": report.schema_version,
            "supported_version": report.supported_version,
            "conversations": report.conversations,
            "messages": report.messages,
            "unindexed": report.unindexed,
            "problems": problems,
            "sync": state,
            "advice": advice,
        });
        println!("{}", serde_json::to_string_pretty(&json).expect("serialisable"));
    } else {
        print_report(db, &report, &problems, state.as_ref(), advice.as_deref());
    }
    Ok(i32::from(!problems.is_empty()))
}

/// How many ids a line of the human report names.
const SHOWN: usize = 5;

fn print_report(db: &Path, report: &DatabaseReport, problems: &[String], state: Option<&SyncState>, advice: Option<&str>) {
    say!("database: {}", sessiondb::store::Store::shown(db));
    say!("schema version {} (this sessiondb: {})", report.schema_version, report.supported_version);
    say!("{} conversations, {} messages", report.conversations, report.messages);
    if report.unindexed > 0 {
        say!(
            "{} messages are not in the search indexes yet (an import builds them after its conversations, or was stopped before it was done): the next search or `sessiondb sync` indexes them",
            report.unindexed
        );
    }
    if problems.is_empty() {
        if sessiondb::store::Store::is_server(db) {
            say!("no problems found: search indexes, orphaned rows, blobs, documents, listing totals (the server keeps its pages and foreign keys whole itself)");
        } else {
            say!("no problems found: integrity, foreign keys, full-text and substring indexes, orphaned rows, listing totals");
        }
    } else {
        say!("{} problems:", problems.len());
        for p in problems {
            say!("  {p}");
        }
    }
    if let Some(s) = state {
        say!("against {}:", s.logs_dir);
        say!("  {} conversations in step", s.in_step);
        // A count and the first few ids: hundreds of ids on one line help nobody (`--json`
        // lists every one).
        let list = |what: &str, items: &[String]| {
            if !items.is_empty() {
                let more = items.len().saturating_sub(SHOWN);
                let tail = if more > 0 { format!(", and {more} more (`--json` lists them all)") } else { String::new() };
                say!("  {} {what}: {}{tail}", items.len(), items[..items.len().min(SHOWN)].join(", "));
            }
        };
        list("changed since the last sync (`sessiondb sync` reads them)", &s.changed);
        list(
            "ending in an unfinished line (gptme is writing it, or it was cut off: `sessiondb sync` reads it once it ends, \
             `sessiondb import` keeps a cut-off line as it is)",
            &s.unfinished,
        );
        list("with queued changes (`sessiondb sync` writes them)", &s.queued);
        list("not imported yet", &s.not_imported);
        list("gone from the logs root (kept until `sessiondb rm`)", &s.deleted);
        if s.archived > 0 {
            say!("  {} archived out of the logs root, kept whole in the store (`sessiondb restore` puts them back)", s.archived);
        }
        list("with temporary files of an interrupted write (removed by the next sync or operation)", &s.debris);
    }
    if let Some(a) = advice {
        say!("to restore: {a}");
    }
}
