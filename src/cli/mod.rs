//! The `sessiondb` command line: argument parsing and plain reporting, nothing else. Every
//! command is a thin call into the library; errors are printed as one sentence naming the file
//! or conversation, and the exit code says whether everything succeeded.

mod bookmarks;
mod complete;
mod config;
mod doctor;
mod export;
mod help;
mod import;
mod lifecycle;
mod list;
mod mcp;
mod ops;
mod read;
mod recover;
mod search;
#[cfg(feature = "serve")]
mod serve;
mod show;
mod stats;
mod sync;
mod term;
mod views;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use sessiondb::store::Store;

#[derive(Parser)]
#[command(name = "sessiondb", version, about = "gptme conversation history in SQLite, kept in step with gptme's files")]
pub struct Cli {
    /// The database file [default: `db` in $XDG_CONFIG_HOME/sessiondb/config.toml, else
    /// $XDG_DATA_HOME/sessiondb/sessions.db]
    #[arg(long, global = true, env = "SESSIONDB_DB", value_name = "PATH")]
    db: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import gptme conversation directories into the store
    Import(import::Args),
    /// Write conversations back as gptme directories
    Export(export::Args),
    /// Bring the store and a logs root in step, both ways (once, or --watch)
    Sync(sync::Args),
    /// Check the database (integrity, schema, orphaned rows, totals) and its sync state
    Doctor(doctor::Args),
    /// List conversations, most recently modified first
    List(list::Args),
    /// Print the messages of one branch of a conversation
    Show(show::Args),
    /// Full-text search across every conversation, ranked
    Search(search::Args),
    /// Serve gptme's web UI and v2 API from the store, following the logs root live
    #[cfg(feature = "serve")]
    Serve(serve::Args),
    /// Statistics across conversations (cost, tokens, models, activity), or for one
    Stats(stats::Args),
    /// Read a conversation, as gptme's `chats read` shows it (or in full)
    Read(read::Args),
    /// Print the script that sets up completion of chat ids and branch names in your shell
    ///
    /// bash, zsh, fish, elvish or powershell: chat ids and branch names complete from the store.
    /// Same as `COMPLETE=SHELL sessiondb`; e.g. `source <(sessiondb completions bash)` in
    /// ~/.bashrc
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: String,
    },
    /// Print the man page (roff) of sessiondb or of one of its commands, or write them all
    Man(ManArgs),
    /// Create an empty conversation in gptme's logs root
    New(ops::NewArgs),
    /// Append a message (attachments stored as gptme stores them)
    Append(ops::AppendArgs),
    /// Remove the last messages, as gptme's undo does (with a backup branch)
    Undo(ops::UndoArgs),
    /// Replace a branch's messages from TOML (a file, or your editor)
    Edit(ops::EditArgs),
    /// Create a branch from another one
    Branch(ops::BranchArgs),
    /// List a conversation's branches
    Branches(ops::BranchesArgs),
    /// Show where two branches differ
    Diff(ops::DiffArgs),
    /// Who speaks next when the conversation is resumed, and why
    Next(ops::NextArgs),
    /// Compacted views: create, use, off
    #[command(subcommand)]
    View(views::ViewCommand),
    /// Copy a conversation (all of it, or through the N-th turn)
    Fork(lifecycle::ForkArgs),
    /// Bookmark the current position (for backtrack)
    Checkpoint(bookmarks::CheckpointArgs),
    /// List the bookmarks
    Checkpoints(bookmarks::CheckpointsArgs),
    /// Rewind to a bookmark or message index
    Backtrack(bookmarks::BacktrackArgs),
    /// Set the display name (config.toml's [chat] name)
    Rename(lifecycle::RenameArgs),
    /// Remove a conversation: its rows and gptme's directory of it (--store-only: the rows)
    ///
    /// Removes the conversation from the store AND deletes its directory in gptme's logs, as
    /// gptme's own `chats delete` does: gptme loses it too. Shows what goes and asks first
    /// (--yes without a terminal).
    ///
    /// With --store-only, only the store's copy goes and gptme's directory stays: the next
    /// `sessiondb sync` (or import, or a command naming the conversation) reads it in again, as
    /// any conversation gptme has and the store does not.
    Rm(lifecycle::RmArgs),
    /// Find (and with --delete remove) empty conversations
    Clean(lifecycle::CleanArgs),
    /// Rebuild a branch from its event log and compare (--apply to replace it)
    Recover(recover::RecoverArgs),
    /// Serve search, list, read and stats to an MCP client (gptme, Claude Code, Codex) on
    /// standard input and output
    Mcp(mcp::Args),
}

/// `man`: which page, or all of them.
#[derive(clap::Args)]
pub(crate) struct ManArgs {
    /// The command whose page to print (`import`, `view create`) [default: sessiondb's own]
    command: Vec<String>,
    /// Instead: write every page (sessiondb.1, sessiondb-import.1, …) into this directory
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    dir: Option<PathBuf>,
}

/// Man pages: one for sessiondb and one per command (the pages `sessiondb(1)` refers to, such
/// as `sessiondb-import(1)`), printed or written to a directory.
fn man(args: &ManArgs) -> Result<(), Failure> {
    let mut cmd = <Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    // Built, the commands carry their pages' names (sessiondb-import).
    cmd.build();
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
        clap_mangen::generate_to(cmd, dir).map_err(|e| Failure(format!("{}: {e}", dir.display())))?;
        term::say!("wrote the man pages of sessiondb and its commands to {}", dir.display());
        return Ok(());
    }
    let mut page = cmd;
    for name in &args.command {
        page = page.find_subcommand(name).cloned().ok_or_else(|| Failure(format!("no command {:?}; `sessiondb --help` lists them", args.command.join(" "))))?;
    }
    clap_mangen::Man::new(page).render(&mut std::io::stdout()).map_err(Failure::from)
}

/// `--queue`, for the commands that change a conversation.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct QueueArg {
    /// Change only the store now; `sessiondb sync` writes the change to the conversation's
    /// directory later (when gptme has the conversation open, say), keeping both versions if
    /// gptme changed it meanwhile
    #[arg(long)]
    pub(crate) queue: bool,
}

/// `--source`, for the commands that read a logs root in.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct SourceArg {
    /// The name of the logs root's source in the store, when it is new there [default: the name
    /// the store has for the root, else HOSTNAME:PATH]; conversations are named SOURCE:CHAT
    /// where a chat id is in several sources
    #[arg(long, value_name = "NAME")]
    pub(crate) source: Option<String>,
}

/// Runs an operation (queued or not), adding the way out to a refusal because gptme holds the
/// conversation.
pub(crate) fn run_op<T>(
    store: &Store,
    chat_id: &str,
    queue: QueueArg,
    op: impl FnOnce(&mut sessiondb::ops::Session) -> Result<T, sessiondb::ops::OpsError>,
) -> Result<T, Failure> {
    sessiondb::ops::run(store, chat_id, queue.queue, op).map_err(|e| match e {
        sessiondb::ops::OpsError::Lock(l) => {
            Failure(format!("{}, or give --queue to store the change now and have `sessiondb sync` write it", sessiondb::cause::chain(&l)))
        }
        other => Failure::from(other),
    })
}

/// A failure to report: the message is printed as `sessiondb: <message>`.
#[derive(Debug)]
pub struct Failure(pub String);

impl<E: std::error::Error + 'static> From<E> for Failure {
    /// The error and its causes, each worded once ([`sessiondb::cause::chain`]).
    fn from(e: E) -> Self {
        Failure(sessiondb::cause::chain(&e))
    }
}

/// Runs the command line; returns the process exit code.
pub fn run() -> i32 {
    complete::answer_the_shell();
    let matches = help::laid_out(<Cli as clap::CommandFactory>::command()).get_matches();
    let named = named_conversations(&matches);
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match dispatch(cli, &named) {
        Ok(code) => code,
        Err(Failure(message)) => {
            term::tell!("sessiondb: {message}");
            1
        }
    }
}

/// Opens the database; only a command that writes (`create`) makes one where there is none.
fn open_store(db: Option<PathBuf>, create: bool) -> Result<Store, Failure> {
    let path = match db {
        Some(db) => db,
        None => config::default_db_path()?.ok_or_else(|| Failure("cannot find a place for the database: set --db, SESSIONDB_DB or HOME".into()))?,
    };
    Ok(if create { Store::open(&path)? } else { Store::open_existing(&path)? })
}

/// The conversations the command line names (a `CHAT_ID` argument, or `--chat`), whichever
/// subcommand names them.
fn named_conversations(matches: &clap::ArgMatches) -> Vec<String> {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    ["chat_id", "chat_ids"].iter().filter_map(|id| m.try_get_many::<String>(id).ok().flatten()).flatten().cloned().collect()
}

/// Reads into the store what gptme wrote to a conversation the command names since the last
/// sync ([`sessiondb::sync::catch_up`]). A directory that cannot be read is reported, and the
/// command goes on with the store's copy.
fn catch_up(store: &Store, chat_id: &str) {
    let default_root = config::default_logs_root().ok().flatten();
    match sessiondb::sync::catch_up::catch_up(store, chat_id, default_root.as_deref()) {
        Ok(Some(report)) => {
            for e in &report.errors {
                term::tell!("sessiondb: warning: {}; using the store's copy", sessiondb::cause::chain(e));
            }
            if report.ingest.new_conversations > 0 && report.errors.is_empty() {
                term::tell!("sessiondb: {chat_id} is new since the last sync; took it in from {}", report.logs_dir);
            }
        }
        Ok(None) => {}
        Err(e) => term::tell!("sessiondb: warning: {chat_id}: could not catch up with its directory: {}; using the store's copy", sessiondb::cause::chain(&e)),
    }
}

fn dispatch(cli: Cli, named: &[String]) -> Result<i32, Failure> {
    // These describe the program and need no database.
    match &cli.command {
        Command::Completions { shell } => {
            complete::registration(shell)?;
            return Ok(0);
        }
        Command::Man(args) => {
            man(args)?;
            return Ok(0);
        }
        _ => {}
    }
    if let Command::Doctor(args) = cli.command {
        let path = match cli.db {
            Some(db) => db,
            None => config::default_db_path()?.ok_or_else(|| Failure("cannot find the database: set --db or SESSIONDB_DB".into()))?,
        };
        return doctor::run(&path, args);
    }
    // `recover --dir` reads a directory, never the database.
    if let Command::Recover(args) = cli.command {
        let store = if args.reads_a_directory() { None } else { Some(open_store(cli.db, false)?) };
        return recover::recover(store.as_ref(), args);
    }
    // Taking in gptme's logs, or starting a conversation, is how a history begins; every other
    // command needs one already (a mistyped --db must not look like an empty history).
    let creates = match &cli.command {
        Command::Import(args) => args.takes_in_logs(),
        // The MCP server reads gptme's logs root in before each answer, as `sync` does.
        Command::Mcp(args) => args.takes_in_logs(),
        Command::Sync(_) | Command::New(_) => true,
        #[cfg(feature = "serve")]
        Command::Serve(_) => true,
        _ => false,
    };
    // A logs root that is not there fails before the database is made: a mistyped path must
    // not leave an empty store behind, which later commands would take for an empty history.
    if creates {
        if let Some(root) = logs_root_read(&cli.command) {
            logs_root(root)?;
        }
    }
    let store = open_store(cli.db, creates)?;
    #[cfg(feature = "serve")]
    if let Command::Serve(args) = cli.command {
        return serve::run(store, args);
    }
    // What gptme changed since the last sync is seen by every command that names the
    // conversation. Not for `new` (it makes one), `import` and `sync` (they read directories
    // themselves); for `rm`, only a conversation the store has, so that what it shows and
    // removes is what the directory holds (removing a directory never imported must not import
    // it first).
    if !matches!(cli.command, Command::New(_) | Command::Import(_) | Command::Sync(_)) {
        let stored_only = matches!(cli.command, Command::Rm(_));
        let stored = |chat_id: &str| store.connection().is_ok_and(|conn| sessiondb::store::sources::resolve(&conn, chat_id).is_ok());
        named.iter().filter(|chat_id| !stored_only || stored(chat_id)).for_each(|chat_id| catch_up(&store, chat_id));
    }
    // Commands over every conversation say how many gptme changed since the last sync (they
    // cannot show those yet), counted beside the command, on another thread. The count looks
    // at every conversation of the logs root: the command never waits more than
    // [`BEHIND_GRACE`] for it after it is done (a note not ready by then is left out).
    let across_all = matches!(cli.command, Command::List(_) | Command::Search(_) | Command::Stats(_)) && named.is_empty();
    let behind = across_all.then(|| {
        let (store, (sender, receiver)) = (store.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || sender.send(behind(&store)));
        receiver
    });
    let code = run_command(&store, cli.command);
    if let Some(Ok(Some(note))) = behind.map(|r| r.recv_timeout(BEHIND_GRACE)) {
        term::tell!("{note}");
    }
    code
}

/// How long a command over every conversation waits, once done, for the count of what gptme
/// changed since the last sync ([`behind`]).
const BEHIND_GRACE: std::time::Duration = std::time::Duration::from_millis(100);
/// The note [`dispatch`] prints when the store is behind gptme's logs root.
fn behind(store: &Store) -> Option<String> {
    let root = config::default_logs_root().ok().flatten().filter(|r| r.is_dir())?;
    let behind = sessiondb::sync::status::behind(&store.connection().ok()?, &root).ok()?;
    let count = |n: u64, what: &str| (n > 0).then(|| format!("{n} {what}"));
    let parts: Vec<String> = [count(behind.new, "new"), count(behind.changed, "changed")].into_iter().flatten().collect();
    (!parts.is_empty()).then(|| {
        let total = behind.new + behind.changed;
        let (noun, verb) = if total == 1 { ("conversation", "is") } else { ("conversations", "are") };
        format!("sessiondb: {} {noun} in {} since the last sync {verb} not included; `sessiondb sync` brings them in", parts.join(" and "), root.display())
    })
}

fn run_command(store: &Store, command: Command) -> Result<i32, Failure> {
    match command {
        Command::Import(args) => import::run(store, args),
        Command::Export(args) => export::run(store, args),
        Command::Sync(args) => sync::run(store, args),
        Command::List(args) => list::run(store, args),
        Command::Show(args) => show::run(store, args),
        Command::Search(args) => search::run(store, args),
        Command::Stats(args) => stats::run(store, args),
        Command::Read(args) => read::run(store, args),
        Command::Completions { .. } | Command::Man(_) | Command::Doctor(_) | Command::Recover(_) => unreachable!("handled above"),
        #[cfg(feature = "serve")]
        Command::Serve(_) => unreachable!("handled above"),
        Command::New(args) => ops::new(store, args),
        Command::Append(args) => ops::append(store, args),
        Command::Undo(args) => ops::undo(store, args),
        Command::Edit(args) => ops::edit(store, args),
        Command::Branch(args) => ops::branch(store, args),
        Command::Branches(args) => ops::branches(store, args),
        Command::Diff(args) => ops::diff(store, args),
        Command::Next(args) => ops::next(store, args),
        Command::View(command) => views::view(store, command),
        Command::Fork(args) => lifecycle::fork(store, args),
        Command::Checkpoint(args) => bookmarks::checkpoint(store, args),
        Command::Checkpoints(args) => bookmarks::checkpoints(store, args),
        Command::Backtrack(args) => bookmarks::backtrack(store, args),
        Command::Rename(args) => lifecycle::rename(store, args),
        Command::Rm(args) => lifecycle::rm(store, args),
        Command::Clean(args) => lifecycle::clean(store, args),
        Command::Mcp(args) => mcp::run(store, args),
    }
}

/// The logs root a command that creates the database reads (`None` inside: the default one),
/// if it reads one.
fn logs_root_read(command: &Command) -> Option<Option<PathBuf>> {
    match command {
        Command::Import(args) if args.takes_in_logs() => Some(args.logs_dir.clone()),
        Command::Sync(args) => Some(args.logs_dir.clone()),
        #[cfg(feature = "serve")]
        Command::Serve(args) => Some(args.logs_dir.clone()),
        // Without a LOGS_DIR, `mcp` reads the default root only when it is there.
        Command::Mcp(args) => args.logs_dir.clone().map(Some),
        _ => None,
    }
}

/// The logs root a command works on: the one given, else gptme's default; it must exist.
pub(crate) fn logs_root(given: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let root = match given {
        Some(given) => given,
        None => config::default_logs_root()?.ok_or_else(|| Failure("cannot find gptme's logs: give LOGS_DIR or set GPTME_LOGS_HOME".into()))?,
    };
    match std::fs::metadata(&root) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(Failure(format!("{}: not a directory; give gptme's logs root", root.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Failure(format!("{}: not found", root.display()))),
        Err(e) => return Err(Failure(format!("{}: {e}", root.display()))),
    }
    Ok(root)
}

/// Asks the person at the terminal `question` (a `[y/N]` question on standard error) before
/// something that cannot be undone: true for yes. Without a terminal to ask on, fails with
/// `refusal`, which should name the flag that says yes in advance.
pub(crate) fn confirm(question: &str, refusal: &str) -> Result<bool, Failure> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return Err(Failure(refusal.to_owned()));
    }
    eprint!("{}", sessiondb::render::terminal::visible(&format!("{question} [y/N] ")));
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).map_err(Failure::from)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// A `--json` answer: pretty-printed, as every command prints JSON (only `sync --watch --json`
/// writes one object per line, one per pass).
pub(crate) fn print_json(value: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(value).expect("serialisable"));
}

/// A cost in dollars to four places, as gptme prints one (`f"${cost:.4f}"`): a cost that is
/// not a number (unknown, or NaN in the logs) is `$nan`, as Python spells it.
pub(crate) fn dollars(cost: Option<f64>) -> String {
    match cost {
        Some(c) if c.is_finite() => format!("${c:.4}"),
        Some(c) if c.is_infinite() => if c > 0.0 { "$inf" } else { "$-inf" }.to_owned(),
        _ => "$nan".to_owned(),
    }
}

/// A token count for people: 1234 → 1.2K, 2500000 → 2.5M.
pub(crate) fn human_tokens(n: i64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}K", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// A duration as gptme words it: `3d 4h`, `2h 5m`, `4m 10s`, `12s`.
pub(crate) fn human_duration(seconds: i64) -> String {
    let (d, h, m, s) = (seconds / 86_400, seconds % 86_400 / 3_600, seconds % 3_600 / 60, seconds % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// A cost as gptme's summaries show one (`stats`, `list --metadata`): cents at a cent or more,
/// else four decimals; a cost that is not a number is `$nan`, as gptme prints it.
pub(crate) fn short_dollars(cost: Option<f64>) -> String {
    match cost {
        Some(c) if c.is_finite() && c.abs() >= 0.01 => format!("${c:.2}"),
        Some(c) if c.is_finite() => format!("${c:.4}"),
        other => dollars(other),
    }
}

/// Formats a byte count for people.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Python's `shutil.get_terminal_size().columns`: `$COLUMNS`, else the terminal's, else 80.
pub(crate) fn terminal_width(terminal: bool) -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|&c: &usize| c > 0) {
        return c;
    }
    if terminal {
        // SAFETY: TIOCGWINSZ fills a winsize struct for a terminal descriptor.
        let mut size: libc::winsize = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0 && size.ws_col > 0 {
            return size.ws_col as usize;
        }
    }
    80
}

/// `YYYY-MM-DD` (midnight UTC, as gptme's `--since` reads it), or `Nd` / `Nh` before now.
pub(crate) fn parse_since(text: &str) -> Result<f64, Failure> {
    let now = chrono::Utc::now();
    let ago = |n: &str, secs: i64| -> Option<f64> { n.parse::<i64>().ok().map(|n| now.timestamp() as f64 - (n * secs) as f64) };
    if let Some(n) = text.strip_suffix('d') {
        if let Some(t) = ago(n, 86_400) {
            return Ok(t);
        }
    }
    if let Some(n) = text.strip_suffix('h') {
        if let Some(t) = ago(n, 3_600) {
            return Ok(t);
        }
    }
    let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| Failure(format!("--since {text:?}: expected YYYY-MM-DD, Nd or Nh")))?;
    Ok(date.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp() as f64)
}
