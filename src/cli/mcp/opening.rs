//! The server before its store is open: `sessiondb mcp` answers the protocol whether or not it
//! can open the store, and says why it cannot where the agent and its user will see it.
//!
//! Invariant: `initialize`, `tools/list` and `ping` are answered as when the store is open (the
//! same four tools); until the store opens, every call of one of them is a tool error
//! (`isError`) saying what failed, what the server's environment held, and what to change, and
//! `initialize`'s instructions say the same. Each call tries to open the store again; once it
//! has opened it stays open and every call goes to [`Server`].
//!
//! Why: an MCP client starts its servers with an environment of its choosing (Codex gives
//! them only `HOME`, `PATH`, `LANG`, `TZ`, `SHELL`, `TERM` and a few more), so a store found
//! through `XDG_DATA_HOME` or `SESSIONDB_DB` in the user's shell is not found by the server. A
//! server that exited then left the agent without its tools and without a word of why.

use std::cell::{OnceCell, RefCell};

use serde_json::{Map, Value};

use super::rpc::Tools;
use super::tools::{self, Server};
use crate::cli::Failure;

/// The variables that say where the store and gptme's logs are (besides `HOME`), as a client
/// must pass them on to the server.
pub const LOCATING_VARIABLES: [&str; 4] = ["SESSIONDB_DB", "GPTME_LOGS_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"];

/// The tools, over a store opened now or at a later call.
pub struct Opening<'a> {
    /// Opens the store and sets the tools up over it.
    open: &'a dyn Fn() -> Result<Server, Failure>,
    server: OnceCell<Server>,
    /// Why the last try failed, worded for the agent.
    problem: RefCell<Option<String>>,
    instructions: String,
}

impl<'a> Opening<'a> {
    /// Tries `open` now; when it fails, says why on standard error.
    pub fn new(open: &'a dyn Fn() -> Result<Server, Failure>) -> Opening<'a> {
        let mut opening = Opening { open, server: OnceCell::new(), problem: RefCell::new(None), instructions: String::new() };
        opening.instructions = match opening.server() {
            Some(server) => server.instructions().to_owned(),
            None => {
                let problem = opening.problem.borrow().clone().unwrap_or_default();
                crate::cli::term::tell!("{problem}");
                format!("{} Right now no tool can answer: {problem}", tools::INSTRUCTIONS)
            }
        };
        opening
    }

    /// Whether the store was opened (at the start or by a later call).
    pub fn opened(&self) -> bool {
        self.server.get().is_some()
    }

    /// The tools over the store, opening it if it is not open yet; `None` (the reason kept in
    /// `problem`) when it still cannot be.
    fn server(&self) -> Option<&Server> {
        if let Some(server) = self.server.get() {
            return Some(server);
        }
        match (self.open)() {
            Ok(server) => {
                if self.problem.take().is_some() {
                    crate::cli::term::tell!("sessiondb: the store is open now; answering");
                }
                Some(self.server.get_or_init(|| server))
            }
            Err(Failure(reason)) => {
                *self.problem.borrow_mut() = Some(problem(&reason));
                None
            }
        }
    }
}

impl Tools for Opening<'_> {
    fn list(&self) -> Vec<Value> {
        tools::tool_specs()
    }

    fn call(&self, name: &str, arguments: &Map<String, Value>) -> Option<Value> {
        match self.server() {
            Some(server) => server.call(name, arguments),
            None => {
                tools::tool_specs().iter().find(|t| t["name"] == name)?;
                Some(tools::tool_error(self.problem.borrow().as_deref().unwrap_or_default()))
            }
        }
    }

    fn instructions(&self) -> &str {
        &self.instructions
    }
}

/// Why the server cannot answer, for the agent to tell its user: the failure, the variables the
/// server had, and how to give it the store.
fn problem(reason: &str) -> String {
    let value = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(|v| v.to_string_lossy().into_owned());
    let set: Vec<String> = LOCATING_VARIABLES.iter().filter_map(|name| value(name).map(|v| format!("{name}={v}"))).collect();
    let unset: Vec<&str> = LOCATING_VARIABLES.iter().copied().filter(|name| value(name).is_none()).collect();
    let mut had = vec![format!("HOME={}", value("HOME").unwrap_or_else(|| "(not set)".into()))];
    had.extend(set);
    let had = match unset.as_slice() {
        [] => had.join(", "),
        [one] => format!("{}, and no {one}", had.join(", ")),
        unset => format!("{}, and none of {}", had.join(", "), unset.join(", ")),
    };
    let list = LOCATING_VARIABLES.map(|v| format!("\"{v}\"")).join(", ");
    format!(
        "sessiondb cannot open its store: {reason}. This server was started with {had}. \
         If the store is elsewhere, give the server its place: `--db PATH` before `mcp` in the server's arguments, \
         or the variables that name it passed on to the server (Codex passes only HOME, PATH and a few others: \
         add env_vars = [{list}] to [mcp_servers.sessiondb] in ~/.codex/config.toml; Claude Code: \
         claude mcp add sessiondb -e SESSIONDB_DB=PATH -- sessiondb mcp), then restart the agent. \
         The server tries again at each call, so a store made meanwhile (`sessiondb import`) is used without a restart."
    )
}
