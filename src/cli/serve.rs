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
    /// The bearer token clients must give (as gptme-server's); without one, only a loopback
    /// address is served, to anyone on this machine
    #[arg(long, env = "GPTME_SERVER_TOKEN", hide_env_values = true)]
    token: Option<String>,
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
}

pub fn run(store: Store, args: Args) -> Result<i32, Failure> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SESSIONDB_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if args.json {
        builder.json().init();
    } else {
        builder.init();
    }
    let logs_root = super::logs_root(args.logs_dir)?;
    let config = Config {
        host: args.host,
        port: args.port,
        token: args.token.filter(|t| !t.is_empty()),
        logs_root: std::path::absolute(&logs_root).unwrap_or(logs_root),
        source: args.source.source,
        webui: serve::webui::locate(args.webui_dir),
        cors_origin: args.cors_origin,
        rescan: Duration::from_secs(args.rescan.max(1)),
    };
    serve::run(store, config)?;
    Ok(0)
}
