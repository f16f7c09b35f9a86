//! `sessiondb serve [LOGS_DIR] [--host H] [--port P] [--token T] [--webui-dir DIR]
//! [--cors-origin O] [--json]`: gptme's web UI and v2 API over the store. Argument parsing and
//! logging set-up only; the server is [`sessiondb::serve`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::Failure;
use sessiondb::serve::{self, Config};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// gptme's logs root to serve (and follow) [default: as for `sync`]
    pub(crate) logs_dir: Option<PathBuf>,
    #[command(flatten)]
    source: super::SourceArg,
    /// The address to listen on; one that is not loopback needs a token
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// The port to listen on (0: any free one, named in the log)
    #[arg(long, default_value_t = 5700)]
    port: u16,
    /// The bearer token clients must give (as gptme-server's) [default: a new random one for
    /// this run, given to the web UI in the link serve prints]
    #[arg(long, env = "GPTME_SERVER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Serve without a token: anyone on this machine may read and write the history (a
    /// loopback address only; web pages are still refused). GPTME_DISABLE_AUTH=1 says the same
    #[arg(long, conflicts_with = "token")]
    no_auth: bool,
    /// Another name clients may reach the server by, besides localhost and its addresses (a
    /// reverse proxy's, say); repeatable. Requests naming any other host are refused
    #[arg(long, value_name = "HOST")]
    allow_host: Vec<String>,
    /// The web UI build to serve [default: $GPTME_WEBUI_DIR, else the one inside the gptme
    /// package python3 imports]
    #[arg(long, value_name = "DIR")]
    webui_dir: Option<PathBuf>,
    /// Allow this origin to call the API from a browser (CORS)
    #[arg(long, value_name = "ORIGIN")]
    cors_origin: Option<String>,
    /// Log one JSON object per line (for running as a service)
    #[arg(long)]
    json: bool,
    /// Seconds between full rescans of the logs root, which catch anything notifications missed
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    rescan: u64,
    #[command(flatten)]
    secrets: super::SecretsArg,
}

pub fn run(store: Store, args: Args) -> Result<i32, Failure> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SESSIONDB_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: a log file keeps plain text.
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if args.json {
        builder.json().init();
    } else {
        builder.init();
    }
    let logs_root = super::logs_root(args.logs_dir)?;
    let no_auth = args.no_auth || std::env::var("GPTME_DISABLE_AUTH").is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"));
    let given = args.token.filter(|t| !t.is_empty());
    let generated = (!no_auth && given.is_none()).then(new_token).transpose()?;
    let config = Config {
        host: args.host,
        port: args.port,
        token: if no_auth { None } else { given.or_else(|| generated.clone()) },
        token_made_here: generated.is_some(),
        allowed_hosts: args.allow_host,
        logs_root: std::path::absolute(&logs_root).unwrap_or(logs_root),
        source: args.source.source,
        webui: serve::webui::locate(args.webui_dir),
        cors_origin: args.cors_origin,
        rescan: Duration::from_secs(args.rescan.max(1)),
        secrets: args.secrets.shown(),
    };
    serve::run(store, config)?;
    Ok(0)
}

/// A token for one run: 32 bytes from the kernel's random source, in hexadecimal.
fn new_token() -> Result<String, Failure> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Failure(format!("cannot make a token (/dev/urandom: {e}); give one with --token")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
