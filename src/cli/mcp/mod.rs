//! `sessiondb mcp [LOGS_DIR]`: the store as a Model Context Protocol server on standard input
//! and output, so that gptme (or any MCP client) can search, list, read and count every past
//! conversation.
//!
//! Invariant: standard output carries the protocol and nothing else ([`rpc`]); everything for
//! people goes to standard error. The server lives until its client closes standard input;
//! no request, however malformed, ends it ([`rpc`]), no failure of a tool does ([`tools`]), and
//! neither does a store that cannot be opened ([`opening`]).
//!
//! The transport is written here rather than taken from the official SDK (`rmcp`): MCP over
//! stdio is newline-delimited JSON-RPC with three methods that matter, the store is
//! synchronous, and rmcp's stdio transport ends the session on a line it cannot parse
//! (modelcontextprotocol/rust-sdk#825), where this server must answer and go on.

mod budget;
mod opening;
// The transport and the tools, for another transport to serve too (`rpc::answer_bytes` with a
// `tools::Server`).
pub(crate) mod rpc;
pub(crate) mod tools;

use std::path::PathBuf;

use super::{config, term, Failure};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// gptme's logs root, read in before each answer [default: $GPTME_LOGS_HOME, else gptme's
    /// default]; without one, the store is answered from as it stands
    pub(crate) logs_dir: Option<PathBuf>,
    #[command(flatten)]
    source: super::SourceArg,
    #[command(flatten)]
    secrets: super::SecretsArg,
}

impl Args {
    /// Whether the server may create the database: only when it has a logs root to read in
    /// (as `sync`), so that a mistyped `--db` never looks like an empty history.
    pub fn takes_in_logs(&self) -> bool {
        self.logs_dir.is_some() || config::default_logs_root().ok().flatten().is_some_and(|r| r.is_dir())
    }
}

/// Serves the tools until the client closes standard input. `open_store` opens the database
/// (creating it when the arguments allow, [`Args::takes_in_logs`]); when it fails, the server
/// answers all the same and each tool call says why ([`opening`]), trying again. The exit code
/// is 1 when the store never opened.
pub fn run(args: Args, open_store: &dyn Fn(&Args) -> Result<Store, Failure>) -> Result<i32, Failure> {
    let open = || -> Result<tools::Server, Failure> {
        // A logs root given that is not there fails before the database is made: a mistyped
        // path must not leave an empty store behind.
        let logs_root = match &args.logs_dir {
            Some(given) => Some(super::logs_root(Some(given.clone()))?),
            None => config::default_logs_root()?.filter(|r| r.is_dir()),
        };
        let store = open_store(&args)?;
        if logs_root.is_none() {
            term::tell!("sessiondb: no gptme logs root found (give LOGS_DIR or set GPTME_LOGS_HOME); answering from the store as it stands");
        }
        let following = logs_root.is_some();
        let server = tools::Server::new(store, logs_root, args.source.source.clone(), args.secrets.shown());
        if following && !server.notified() {
            term::tell!("sessiondb: no filesystem notifications for the logs root; each answer over every conversation walks it first");
        }
        Ok(server)
    };
    let tools = opening::Opening::new(&open);
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    rpc::serve(&mut stdin.lock(), &mut stdout.lock(), &tools)?;
    Ok(if tools.opened() { 0 } else { 1 })
}
