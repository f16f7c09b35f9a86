//! Shell completion that knows the store: chat ids (with their names) wherever a command takes
//! one, branch names wherever it takes a branch, through clap_complete's dynamic engine (the
//! shell asks `sessiondb` itself at each Tab, so new conversations complete at once).
//!
//! Completion only reads: the database is opened only when it exists (`SESSIONDB_DB`, else
//! the config file's or the default path; a server's database is there to ask), and any error
//! yields no candidates rather than noise on the terminal.

mod shells;

use clap::CommandFactory;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};

use super::{Cli, Failure};
use sessiondb::store::{queries, Store};

/// Answers the shell when it asks for completions (`COMPLETE=<shell>` in the environment:
/// prints them and exits), else returns at once.
pub fn answer_the_shell() {
    clap_complete::CompleteEnv::with_factory(command).shells(shells::all()).bin(shells::NAME).completer(shells::NAME).complete();
}

/// The command line, with the store's names as candidates for the arguments that take them.
pub fn command() -> clap::Command {
    with_candidates(Cli::command())
}

fn with_candidates(cmd: clap::Command) -> clap::Command {
    let cmd = cmd.mut_args(|arg| match arg.get_id().as_str() {
        "chat_id" | "chat_ids" => arg.add(ArgValueCandidates::new(chat_ids)),
        "branch" | "from" | "a" | "b" => arg.add(ArgValueCandidates::new(branches)),
        "role" => arg.add(ArgValueCandidates::new(|| ["system", "user", "assistant"].into_iter().map(CompletionCandidate::new).collect::<Vec<_>>())),
        _ => arg,
    });
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    names.iter().fold(cmd, |cmd, name| cmd.mut_subcommand(name, with_candidates))
}

/// The store, when there is one to read: an SQLite file that exists (completion never creates
/// one), or a server's database.
fn store() -> Option<Store> {
    let path = std::env::var_os("SESSIONDB_DB").filter(|p| !p.is_empty()).map(Into::into).or_else(|| super::config::default_db_path().ok().flatten())?;
    (path.is_file() || Store::is_server(&path)).then(|| Store::open(&path).ok()).flatten()
}

fn chat_ids() -> Vec<CompletionCandidate> {
    let Some(conn) = store().and_then(|s| s.connection().ok()) else { return Vec::new() };
    queries::list_conversations(&conn, true, None)
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            // The shells' protocols separate a value from its help with a tab, and a line per
            // value: a name is shown on one line, its control characters escaped.
            let help = (c.name != c.chat_id).then(|| sessiondb::render::terminal::visible(&c.name.replace(['\t', '\n', '\r'], " ")).into_owned().into());
            CompletionCandidate::new(c.chat_id).help(help)
        })
        .collect()
}

fn branches() -> Vec<CompletionCandidate> {
    let Some(conn) = store().and_then(|s| s.connection().ok()) else { return Vec::new() };
    queries::all_branch_names(&conn).unwrap_or_default().into_iter().map(CompletionCandidate::new).collect()
}

/// `sessiondb completions SHELL`: the script that registers the dynamic completion with the
/// shell (the same as `COMPLETE=SHELL sessiondb` prints): for the command `sessiondb`, asking
/// the `sessiondb` on `PATH`.
pub fn registration(shell: &str) -> Result<(), Failure> {
    let shells = shells::all();
    let completer = shells.completer(shell).ok_or_else(|| Failure(format!("no completion for shell {shell:?}: bash, elvish, fish, powershell or zsh")))?;
    completer.write_registration("COMPLETE", shells::NAME, shells::NAME, shells::NAME, &mut std::io::stdout()).map_err(Failure::from)
}
