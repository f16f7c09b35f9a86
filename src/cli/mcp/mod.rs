//! `sessiondb mcp [LOGS_DIR]`: the store as a Model Context Protocol server on standard input
//! and output, so that gptme (or any MCP client) can search, list, read and count every past
//! conversation.
//!
//! Invariant: standard output carries the protocol and nothing else ([`rpc`]); everything for
//! people goes to standard error. The server lives until its client closes standard input;
//! no request, however malformed, ends it ([`rpc`]), and no failure of a tool does ([`tools`]).
//!
//! The transport is written here rather than taken from the official SDK (`rmcp`): MCP over
//! stdio is newline-delimited JSON-RPC with three methods that matter, the store is
//! synchronous, and rmcp's stdio transport ends the session on a line it cannot parse
//! (modelcontextprotocol/rust-sdk#825), where this server must answer and go on.

mod budget;
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
}

impl Args {
    /// Whether the server may create the database: only when it has a logs root to read in
    /// (as `sync`), so that a mistyped `--db` never looks like an empty history.
    pub fn takes_in_logs(&self) -> bool {
        self.logs_dir.is_some() || config::default_logs_root().ok().flatten().is_some_and(|r| r.is_dir())
    }
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let logs_root = match args.logs_dir {
        Some(given) => Some(super::logs_root(Some(given))?),
        None => {
            let root = config::default_logs_root()?.filter(|r| r.is_dir());
            if root.is_none() {
                term::tell!("sessiondb: no gptme logs root found (give LOGS_DIR or set GPTME_LOGS_HOME); answering from the store as it stands");
            }
            root
        }
    };
    let following = logs_root.is_some();
    let server = tools::Server::new(store, logs_root, args.source.source);
    if following && !server.notified() {
        term::tell!("sessiondb: no filesystem notifications for the logs root; each answer over every conversation walks it first");
    }
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    rpc::serve(&mut stdin.lock(), &mut stdout.lock(), &server)?;
    Ok(0)
}
