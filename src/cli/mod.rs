//! The `sessiondb` command line: argument parsing and plain reporting, nothing else. Every
//! command is a thin call into the library; errors are printed as one sentence naming the file
//! or conversation, and the exit code says whether everything succeeded.

mod archive;
mod backup;
mod bookmarks;
mod compact;
mod complete;
mod config;
mod doctor;
mod export;
mod help;
mod import;
mod lifecycle;
mod list;
mod mcp;
mod named;
mod ops;
mod read;
mod recover;
mod search;
mod secrets;
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
    /// Write a consistent copy of the store to a new file, while other processes go on writing
    Backup(backup::Args),
    /// Give the store's free pages back to the file system, while other processes go on
    Compact(compact::Args),
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
    /// List the credentials (API keys, tokens, private keys, passwords) the conversations hold
    ///
    /// Messages of every branch and attached files are scanned for the formats people paste and
    /// tools print: cloud provider keys, GitHub and GitLab tokens, OpenAI, Anthropic and other
    /// API keys, private key blocks, JWTs, passwords in URLs, and secret-named assignments of
    /// random-looking values. Each is shown with where it is and its format's prefix only.
    Secrets(secrets::Args),
    /// Take conversations out of gptme's logs root, kept whole in the store (by id, age, source)
    ///
    /// Each conversation's directory is checked to be exactly what the store holds (every
    /// file's bytes, permissions and modification time), marked archived, and removed from the
    /// logs root: gptme no longer lists or loads it, and sessiondb still lists, searches, shows
    /// and serves it. A conversation gptme has open, or changed since the last `sessiondb sync`,
    /// is left where it is. `sessiondb restore` writes it back exactly.
    Archive(archive::Args),
    /// Write archived conversations back into gptme's logs root, exactly as they were
    Restore(archive::Args),
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

/// `--show-secrets`, for the commands that show stored text.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub(crate) struct SecretsArg {
    /// Show credentials (API keys, tokens, private keys, passwords in URLs: what `sessiondb
    /// secrets` lists) as they are; by default each is shown as ‹masked KIND›
    #[arg(long)]
    pub(crate) show_secrets: bool,
}

impl SecretsArg {
    pub(crate) fn shown(self) -> sessiondb::secrets::Shown {
        sessiondb::secrets::Shown::from_flag(self.show_secrets)
    }
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

/// A filter that names nothing in the store ([`StoreError::NoSuchFilter`]: `--model`,
/// `--source`, `--chat`, …) is a usage error, as a bad argument is: said, and exit 2, for every
/// command that filters. Any other error is a failure.
pub(crate) fn refused_filter(e: sessiondb::store::StoreError) -> Result<i32, Failure> {
    match e {
        e @ sessiondb::store::StoreError::NoSuchFilter { .. } => {
            term::tell!("sessiondb: {e}");
            Ok(2)
        }
        other => Err(other.into()),
    }
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
    // Before any command line is built: an argument takes its variable's value when it is.
    unset_empty_variables(&<Cli as clap::CommandFactory>::command());
    complete::answer_the_shell();
    let matches = help::laid_out(<Cli as clap::CommandFactory>::command()).get_matches();
    let named = Named { conversations: named_values(&matches, &["chat_id", "chat_ids"]), branches: named_values(&matches, &["branch", "from", "a", "b"]) };
    let db_from_env = matches.value_source("db") == Some(clap::parser::ValueSource::EnvVariable);
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match dispatch(cli, &named, db_from_env) {
        Ok(code) => code,
        Err(Failure(message)) => {
            term::tell!("sessiondb: {message}");
            1
        }
    }
}

/// Takes an environment variable that a flag of `command` (or of its subcommands) is read
/// from, set but empty (`SESSIONDB_DB=`), for unset, as every other variable sessiondb reads
/// is taken: clap would take it for the flag given without its value. Call before the command
/// line that parses the arguments is built (an argument reads its variable when it is built);
/// the environment is changed for this process.
fn unset_empty_variables(command: &clap::Command) {
    for arg in command.get_arguments() {
        if let Some(name) = arg.get_env() {
            if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
                std::env::remove_var(name);
            }
        }
    }
    command.get_subcommands().for_each(unset_empty_variables);
}

/// The database's path and, unless `--db` gave it, where it came from (said with any error
/// about it: `from SESSIONDB_DB`, the config file's `db`, the default).
fn database(db: Option<PathBuf>, from_env: bool) -> Result<(PathBuf, Option<String>), Failure> {
    Ok(match db {
        Some(db) => (db, from_env.then(|| "from SESSIONDB_DB".to_owned())),
        None => (
            config::default_db_path()?.ok_or_else(|| Failure("cannot find a place for the database: set --db, SESSIONDB_DB or HOME".into()))?,
            Some(config::db_origin()),
        ),
    })
}

/// A failure about a path, with where the path came from when that was not the command line.
fn from_origin(failure: Failure, origin: Option<&str>) -> Failure {
    match origin {
        Some(origin) => Failure(format!("{} (the path is {origin})", failure.0)),
        None => failure,
    }
}

/// Opens the database; only a command that writes (`create`) makes one where there is none.
fn open_store(db: Option<PathBuf>, from_env: bool, create: bool) -> Result<Store, Failure> {
    let (path, origin) = database(db, from_env)?;
    let opened = if create { Store::open(&path) } else { Store::open_existing(&path) };
    opened.map_err(|e| from_origin(e.into(), origin.as_deref()))
}

/// What the command line names: conversations (a `CHAT_ID` argument, or `--chat`) and branches
/// (`--branch`, `--from`, `diff A B`), whichever subcommand names them.
struct Named {
    conversations: Vec<String>,
    branches: Vec<String>,
}

/// The values of the arguments `ids` of the innermost subcommand.
fn named_values(matches: &clap::ArgMatches, ids: &[&str]) -> Vec<String> {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    ids.iter().filter_map(|id| m.try_get_many::<String>(id).ok().flatten()).flatten().cloned().collect()
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

fn dispatch(cli: Cli, named: &Named, db_from_env: bool) -> Result<i32, Failure> {
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
        let (path, origin) = database(cli.db, db_from_env)?;
        return doctor::run(&path, args).map_err(|f| from_origin(f, origin.as_deref()));
    }
    // `recover --dir` reads a directory, never the database.
    if let Command::Recover(args) = cli.command {
        let store = if args.reads_a_directory() { None } else { Some(open_store(cli.db, db_from_env, false)?) };
        return recover::recover(store.as_ref(), args);
    }
    // The MCP server opens its store itself: one it cannot open is said to the agent, in
    // answers, rather than in an exit its client would not show. It reads gptme's logs root
    // in before each answer, as `sync` does, so it creates the database when it has one.
    if let Command::Mcp(args) = cli.command {
        let db = cli.db;
        return mcp::run(args, &|args: &mcp::Args| open_store(db.clone(), db_from_env, args.takes_in_logs()));
    }
    // Taking in gptme's logs, or starting a conversation, is how a history begins; every other
    // command needs one already (a mistyped --db must not look like an empty history).
    let creates = match &cli.command {
        Command::Import(args) => args.takes_in_logs(),
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
    let store = open_store(cli.db, db_from_env, creates)?;
    #[cfg(feature = "serve")]
    if let Command::Serve(args) = cli.command {
        return serve::run(store, args);
    }
    // What gptme changed since the last sync is seen by every command that names the
    // conversation. Not for `new` (it makes one), `import` and `sync` (they read directories
    // themselves); for `rm`, only a conversation the store has, so that what it shows and
    // removes is what the directory holds (removing a directory never imported must not import
    // it first).
    // Not for `archive`: a conversation gptme changed since the last sync is left in the root.
    if !matches!(cli.command, Command::New(_) | Command::Import(_) | Command::Sync(_) | Command::Archive(_)) {
        let stored_only = matches!(cli.command, Command::Rm(_));
        let stored = |chat_id: &str| store.connection().is_ok_and(|conn| sessiondb::store::sources::resolve(&conn, chat_id).is_ok());
        named.conversations.iter().filter(|chat_id| !stored_only || stored(chat_id)).for_each(|chat_id| catch_up(&store, chat_id));
    }
    // A conversation or branch named that the store does not have is refused here, with the
    // closest ids or the branches there are; `new` makes one, `rm` and `clean` take what a
    // directory holds, and `search` answers a filter naming nothing itself (exit 2).
    if !matches!(cli.command, Command::New(_) | Command::Import(_) | Command::Sync(_) | Command::Rm(_) | Command::Clean(_) | Command::Search(_)) {
        for chat_id in &named.conversations {
            named::check_conversation(&store, chat_id)?;
        }
        if let [chat_id] = named.conversations.as_slice() {
            for branch in &named.branches {
                named::check_branch(&store, chat_id, branch)?;
            }
        }
    }
    // Commands over every conversation say how many gptme changed since the last sync (they
    // cannot show those yet), counted beside the command, on another thread. The count looks
    // at every conversation of the logs root: the command never waits more than
    // [`BEHIND_GRACE`] for it after it is done (a note not ready by then is left out). The note
    // is for people: a command asked for JSON (a tool's, an agent's) neither counts nor waits.
    let for_people = match &cli.command {
        Command::List(a) => !a.json,
        Command::Search(a) => !a.json,
        Command::Stats(a) => !a.json,
        _ => false,
    };
    let across_all = for_people && named.conversations.is_empty();
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
/// The note [`dispatch`] prints when the store is behind the logs roots it reads: the roots
/// its conversations come from (its sources), never a root it has not read (gptme's default
/// one, say, beside a store built from another), a line for each root that changed.
fn behind(store: &Store) -> Option<String> {
    let conn = store.connection().ok()?;
    let default_root = config::default_logs_root().ok().flatten().and_then(|r| std::fs::canonicalize(r).ok());
    let roots = sessiondb::store::queries::logs_roots(&conn).ok()?;
    let notes: Vec<String> = roots
        .iter()
        .filter(|root| root.is_dir())
        .filter_map(|root| {
            let behind = sessiondb::sync::status::behind(&conn, root).ok()?;
            let count = |n: u64, what: &str| (n > 0).then(|| format!("{} {what}", grouped(n)));
            let parts: Vec<String> = [count(behind.new, "new"), count(behind.changed, "changed")].into_iter().flatten().collect();
            (!parts.is_empty()).then(|| {
                let total = behind.new + behind.changed;
                let (noun, verb) = if total == 1 { ("conversation", "is") } else { ("conversations", "are") };
                // Plain `sync` reads gptme's default root; another root is named.
                let sync =
                    if std::fs::canonicalize(root).ok() == default_root { "sessiondb sync".to_owned() } else { format!("sessiondb sync {}", root.display()) };
                format!("sessiondb: {} {noun} in {} since the last sync {verb} not included; `{sync}` brings them in", parts.join(" and "), root.display())
            })
        })
        .collect();
    (!notes.is_empty()).then(|| notes.join("\n"))
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
        Command::Backup(args) => backup::run(store, args),
        Command::Compact(args) => compact::run(store, args),
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
        Command::Secrets(args) => secrets::run(store, args),
        Command::Archive(args) => archive::archive(store, args),
        Command::Restore(args) => archive::restore(store, args),
        Command::Mcp(_) => unreachable!("handled above"),
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
        _ => None,
    }
}

/// The logs root a command works on: the one given, else gptme's default; it must exist.
pub(crate) fn logs_root(given: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let (root, origin) = match given {
        Some(given) => (given, None),
        None => (
            config::default_logs_root()?.ok_or_else(|| Failure("cannot find gptme's logs: give LOGS_DIR or set GPTME_LOGS_HOME".into()))?,
            Some(config::logs_root_origin()),
        ),
    };
    let problem = match std::fs::metadata(&root) {
        Ok(meta) if meta.is_dir() => return Ok(root),
        Ok(_) => "not a directory; give gptme's logs root".to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "not found".to_owned(),
        Err(e) => e.to_string(),
    };
    Err(from_origin(Failure(format!("{}: {problem}", root.display())), origin.as_deref()))
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

/// A count of things for people: `1 conversation`, `2,000 conversations`, `3 matches` (the
/// plural by `s`, or `es` after `ch`, `s` and `x`; digits grouped by thousands).
pub(crate) fn plural(n: impl Into<u64>, one: &str) -> String {
    let n: u64 = n.into();
    let many = if one.ends_with("ch") || one.ends_with('s') || one.ends_with('x') { "es" } else { "s" };
    format!("{} {one}{}", grouped(n), if n == 1 { "" } else { many })
}

/// `2000` → `2,000`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
pub(crate) fn human_bytes(bytes: u64) -> String {
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
