//! The log-operation commands: new, append, undo, edit, branch, branches, diff, next.

use std::io::Read;
use std::path::PathBuf;

use super::term::say;
use super::Failure;
use sessiondb::codec::toml_log::{messages_to_toml, toml_to_messages};
use sessiondb::model::resume::{next_speaker, Next};
use sessiondb::model::{Log, Message};
use sessiondb::ops::input::{self, InputError};
use sessiondb::ops::{self, with_session};
use sessiondb::store::{queries, Store};

#[derive(clap::Args)]
pub struct NewArgs {
    /// The new conversation's id: the name of its directory
    chat_id: String,
    /// Display name (config.toml's [chat] name)
    #[arg(long)]
    name: Option<String>,
    /// gptme's logs root to create it in [default: as for import]
    #[arg(long, value_name = "DIR")]
    logs_dir: Option<PathBuf>,
}

pub fn new(store: &Store, args: NewArgs) -> Result<i32, Failure> {
    let root = match args.logs_dir {
        Some(dir) => dir,
        None => super::config::default_logs_root()?.ok_or_else(|| Failure("cannot find gptme's logs: give --logs-dir".into()))?,
    };
    // As gptme does on its first conversation, the command line makes the logs root when it
    // is missing (`serve` never does: see ops::new_conversation).
    std::fs::create_dir_all(&root).map_err(|e| Failure(format!("cannot create the logs root {}: {e}", root.display())))?;
    let created = ops::new_conversation(store, &root, &args.chat_id, args.name.as_deref())?;
    say!("created {} in {}", created.chat_id, created.dir.display());
    Ok(0)
}

#[derive(clap::Args)]
pub struct AppendArgs {
    /// The conversation to append to
    chat_id: String,
    /// system, user or assistant
    #[arg(long)]
    role: String,
    /// The message text
    #[arg(long, conflicts_with = "stdin", required_unless_present = "stdin")]
    content: Option<String>,
    /// Read the message text from standard input
    #[arg(long)]
    stdin: bool,
    /// Pin the message: gptme keeps it at the top of the chat and never trims it from context
    #[arg(long)]
    pinned: bool,
    /// Hide the message from gptme's chat output (it is still sent to the model)
    #[arg(long)]
    hide: bool,
    /// Drop from the model's context after N more assistant turns
    #[arg(long, value_name = "N")]
    ttl: Option<i64>,
    /// The id of the tool call this message answers
    #[arg(long, value_name = "ID")]
    call_id: Option<String>,
    /// Attach a file (stored by content hash in files/, as gptme stores it)
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
    /// Metadata as a JSON object
    #[arg(long, value_name = "JSON")]
    metadata: Option<String>,
    /// The branch to append to
    #[arg(long, default_value = "main")]
    branch: String,
    /// The message's timestamp, ISO 8601 as gptme writes it [default: now, local time]
    #[arg(long, value_name = "TIME")]
    timestamp: Option<String>,
    /// Print what was appended as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    queue: super::QueueArg,
}

/// An input refused, as the command line tells it: naming the flag that gave it (`--role`,
/// `--timestamp`, `--metadata`), or the file.
fn flag_error(e: InputError) -> Failure {
    match e {
        InputError::Role(_) | InputError::Timestamp(_) | InputError::MetadataJson(_) | InputError::MetadataNotObject => Failure(format!("--{e}")),
        other => Failure::from(other),
    }
}

/// A TOML file refused: its messages are not read, so nothing changed.
pub(super) fn toml_error(e: InputError) -> Failure {
    match e {
        InputError::Toml { .. } => Failure(format!("{}; nothing changed", sessiondb::cause::chain(&e))),
        other => Failure::from(other),
    }
}

pub fn append(store: &Store, args: AppendArgs) -> Result<i32, Failure> {
    let role = input::role(&args.role).map_err(flag_error)?;
    let content = match args.content {
        Some(c) => c,
        None => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| Failure(format!("reading standard input: {e}")))?;
            text
        }
    };
    let fields = input::MessageFields {
        timestamp: args.timestamp.as_deref(),
        metadata: args.metadata.as_deref(),
        files: &args.files,
        pinned: args.pinned,
        hide: args.hide,
        ephemeral_ttl: args.ttl,
        call_id: args.call_id,
    };
    let message = input::message(role, content, fields).map_err(flag_error)?;
    let appended = super::run_op(store, &args.chat_id, args.queue, |s| s.append(&args.branch, &message))?;
    if args.json {
        let out = serde_json::json!({
            "line": String::from_utf8_lossy(&appended.line),
            "view": appended.view,
            "seq": appended.seq,
            "checkpoint_seq": appended.checkpoint_seq,
        });
        super::print_json(&out);
    } else {
        let view = appended.view.map(|v| format!(" and view {v}")).unwrap_or_default();
        say!("appended to {}{} (event {})", args.branch, view, appended.seq);
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct UndoArgs {
    /// The conversation
    chat_id: String,
    /// How many messages to remove
    #[arg(short = 'n', default_value_t = 1)]
    n: usize,
    /// The branch to remove them from
    #[arg(long, default_value = "main")]
    branch: String,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn undo(store: &Store, args: UndoArgs) -> Result<i32, Failure> {
    match super::run_op(store, &args.chat_id, args.queue, |s| s.undo(&args.branch, args.n))? {
        None => say!("Nothing to undo."),
        Some((removed, backup)) => {
            for m in &removed {
                let text: String = sessiondb::secrets::mask(&m.content).split_whitespace().collect::<Vec<_>>().join(" ").chars().take(50).collect();
                say!("undid {}: {text}", m.role.as_str());
            }
            if let Some(b) = backup {
                say!("backup branch: {b}");
            }
        }
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct EditArgs {
    /// The conversation
    chat_id: String,
    /// The branch to replace (main: the active view when one is active)
    #[arg(long, default_value = "main")]
    branch: String,
    /// Take the new messages from this TOML file instead of opening an editor
    #[arg(long, value_name = "FILE")]
    toml: Option<PathBuf>,
    /// Empty the branch without asking, when the new messages are none
    #[arg(long)]
    allow_empty: bool,
    #[command(flatten)]
    queue: super::QueueArg,
}

/// Runs `$VISUAL` (else `$EDITOR`, else `vi`) on `path`; true when it exited successfully. An
/// empty variable counts as unset.
fn run_editor(path: &std::path::Path) -> Result<bool, Failure> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let editor = var("VISUAL").or_else(|| var("EDITOR")).unwrap_or_else(|| "vi".into());
    // The variable may hold arguments ("code --wait"), so let the shell split it.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(path)
        .status()
        .map_err(|e| Failure(format!("cannot run editor {editor:?}: {e}")))?;
    Ok(status.success())
}

pub fn edit(store: &Store, args: EditArgs) -> Result<i32, Failure> {
    // What the edit replaces: the log gptme has loaded (the active view, when one is).
    let current = loaded_messages(store, &args.chat_id, &args.branch)?;
    let messages = match &args.toml {
        Some(file) => input::read_toml_messages(file).map_err(toml_error)?,
        None => {
            let original = messages_to_toml(&current);
            let file = tempfile::Builder::new().prefix("sessiondb-edit-").suffix(".toml").tempfile().map_err(Failure::from)?;
            std::fs::write(file.path(), &original).map_err(Failure::from)?;
            if !run_editor(file.path())? {
                say!("editor failed; nothing changed");
                return Ok(1);
            }
            let edited = std::fs::read_to_string(file.path()).map_err(Failure::from)?;
            if edited == original {
                say!("no changes");
                return Ok(0);
            }
            // As git takes an emptied commit message: saving nothing is giving up, not asking
            // for an empty branch (`--toml` with an empty file, or `undo`, empties one).
            if edited.trim().is_empty() {
                say!("the edited file is empty; nothing changed");
                return Ok(0);
            }
            toml_to_messages(&edited).map_err(|e| Failure(format!("the edited TOML: {e}; nothing changed")))?
        }
    };
    let Some(messages) = checked_edit(&current, messages, &args.branch, args.allow_empty)? else { return Ok(0) };
    let backup = super::run_op(store, &args.chat_id, args.queue, |s| s.edit(&args.branch, &messages))?;
    say!("edited {} ({} messages); backup branch: {backup}", args.branch, messages.len());
    Ok(0)
}

/// The messages an edit of `branch` (now `current`) replaces it with, checked
/// ([`input::edit`]); `None` when there is nothing to do: unchanged (said so), or emptying the
/// branch declined.
fn checked_edit(current: &[Message], edited: Vec<Message>, branch: &str, allow_empty: bool) -> Result<Option<Vec<Message>>, Failure> {
    match input::edit(current, edited).map_err(|e| Failure(format!("{}; nothing changed", sessiondb::cause::chain(&e))))? {
        input::Edit::Unchanged => {
            say!("no changes");
            Ok(None)
        }
        input::Edit::Replace { messages, empties } => {
            if empties && !allow_empty {
                let question = format!("this empties {branch} ({} messages; a backup branch keeps them). Go on?", current.len());
                let refusal = format!("the new messages are none: that would empty {branch}; give --allow-empty to empty it");
                if !super::confirm(&question, &refusal)? {
                    say!("nothing changed");
                    return Ok(None);
                }
            }
            Ok(Some(messages))
        }
    }
}

#[derive(clap::Args)]
pub struct BranchArgs {
    /// The conversation
    chat_id: String,
    /// The new branch's name
    name: String,
    /// The branch to copy
    #[arg(long, default_value = "main")]
    from: String,
    #[command(flatten)]
    queue: super::QueueArg,
}

pub fn branch(store: &Store, args: BranchArgs) -> Result<i32, Failure> {
    let created = super::run_op(store, &args.chat_id, args.queue, |s| s.branch(&args.name, &args.from))?;
    say!("{} {}", if created { "created branch" } else { "branch exists:" }, args.name);
    Ok(0)
}

#[derive(clap::Args)]
pub struct BranchesArgs {
    /// The conversation
    chat_id: String,
    /// Print the branches and their message counts as JSON
    #[arg(long)]
    json: bool,
}

pub fn branches(store: &Store, args: BranchesArgs) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let mut rows = Vec::new();
    for name in queries::branch_names(&conn, &args.chat_id)? {
        let count = queries::branch_messages(&conn, &args.chat_id, &name)?.len();
        rows.push((name, count));
    }
    if args.json {
        let out: Vec<_> = rows.iter().map(|(n, c)| serde_json::json!({"branch": n, "messages": c})).collect();
        println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
    } else {
        for (name, count) in rows {
            say!("{name}\t{count} messages");
        }
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The conversation
    chat_id: String,
    /// The first branch: what only it has is shown with `-`
    a: String,
    /// The second branch: what only it has is shown with `+`
    b: String,
    #[command(flatten)]
    secrets: super::SecretsArg,
}

pub fn diff(store: &Store, args: DiffArgs) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let load = |b: &str| -> Result<Log, Failure> { Ok(Log::new(queries::branch_messages(&conn, &args.chat_id, b)?)) };
    let (a, b) = (load(&args.a)?, load(&args.b)?);
    match a.first_difference(&b) {
        None => say!("{} and {} are the same", args.a, args.b),
        Some(at) => {
            say!("{} and {} differ from message {}", args.a, args.b, at + 1);
            say!("--- {}\n+++ {}", args.a, args.b);
            // As diff and git: the first side's lines with `-`, the second's with `+`, each line.
            for (sign, log) in [('-', &a), ('+', &b)] {
                for m in &log.messages()[at..] {
                    for line in format!("{}: {}", m.role.as_str(), args.secrets.shown().text(&m.content)).split('\n') {
                        say!("{sign} {line}");
                    }
                }
            }
        }
    }
    Ok(0)
}

#[derive(clap::Args)]
pub struct NextArgs {
    /// The conversation
    chat_id: String,
    /// The branch to resume (main: the active view when one is active)
    #[arg(long, default_value = "main")]
    branch: String,
    /// Print who is next and the rule that decided as JSON
    #[arg(long)]
    json: bool,
}

pub fn next(store: &Store, args: NextArgs) -> Result<i32, Failure> {
    let messages = loaded_messages(store, &args.chat_id, &args.branch)?;
    let (who, reason) = next_speaker(&messages);
    let who = match who {
        Next::User => "user",
        Next::Assistant => "assistant",
    };
    if args.json {
        super::print_json(&serde_json::json!({"next": who, "reason": reason.name(), "explanation": reason.describe()}));
    } else {
        say!("{who}: {}", reason.describe());
    }
    Ok(0)
}

/// The messages of the log gptme has loaded for `branch` ([`sessiondb::sync::document::loaded_messages`]).
pub(super) fn loaded_messages(store: &Store, chat_id: &str, branch: &str) -> Result<Vec<Message>, Failure> {
    Ok(sessiondb::sync::document::loaded_messages(&store.connection()?, chat_id, branch)?)
}

/// `export --format toml`: one branch (the loaded log, as `edit` takes it) as gptme's editable
/// TOML, written to `output` (atomically) or else on standard output.
pub fn export_toml(store: &Store, chat_id: &str, branch: &str, output: Option<&std::path::Path>) -> Result<i32, Failure> {
    let toml = messages_to_toml(&loaded_messages(store, chat_id, branch)?);
    match output {
        Some(path) => {
            sessiondb::sync::document::write_file(path, |out| out.write_all(toml.as_bytes()))?;
            say!("Exported conversation to {}", path.display());
        }
        None => super::term::print_document(&toml),
    }
    Ok(0)
}

/// `import --toml FILE CHAT_ID`: replaces a branch with the file's messages (an edit).
pub fn import_toml(store: &Store, file: &std::path::Path, chat_id: &str, branch: &str, allow_empty: bool) -> Result<i32, Failure> {
    let messages = input::read_toml_messages(file).map_err(toml_error)?;
    let current = loaded_messages(store, chat_id, branch)?;
    let Some(messages) = checked_edit(&current, messages, branch, allow_empty)? else { return Ok(0) };
    let backup = with_session(store, chat_id, |s| s.edit(branch, &messages))?;
    say!("replaced {branch} with {} messages from {}; backup branch: {backup}", messages.len(), file.display());
    Ok(0)
}
