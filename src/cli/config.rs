//! The configuration file, `$XDG_CONFIG_HOME/sessiondb/config.toml` (else
//! `~/.config/sessiondb/config.toml`): where the database lives and where gptme's logs are, for
//! people who keep them elsewhere than the defaults.
//!
//! Invariant: the file only replaces defaults. A flag, and then an environment variable
//! (`SESSIONDB_DB`, `GPTME_LOGS_HOME`), always wins over it; no file is the same as an empty
//! one; a file that cannot be read or parsed, or that has a key this sessiondb does not know,
//! stops every command that needs a path, naming the file (and the line) and what is wrong,
//! rather than being half-used. A FIFO, device or socket in its place is refused at once,
//! never opened to wait on.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::Failure;

/// What the file may say.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// The database file.
    db: Option<PathBuf>,
    /// gptme's logs root.
    logs: Option<PathBuf>,
}

/// Where the file is looked for.
pub fn path() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|h| h.join(".config")))?;
    Some(dir.join("sessiondb").join("config.toml"))
}

/// The file, read once per process.
fn config() -> Result<&'static Config, Failure> {
    static CONFIG: OnceLock<Result<Config, String>> = OnceLock::new();
    CONFIG.get_or_init(|| path().map_or(Ok(Config::default()), |p| read(&p))).as_ref().map_err(|e| Failure(e.clone()))
}

fn read(path: &Path) -> Result<Config, String> {
    // Never opened in a way that could wait: a FIFO (or a device) in its place is refused,
    // naming it, rather than blocking every command.
    let bytes = match sessiondb::fs::nofollow::read_user_file(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) if e.get_ref().is_some_and(|r| r.is::<sessiondb::fs::nofollow::Refused>()) => return Err(format!("the configuration file {e}")),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("{}: not UTF-8 text (byte {}); it may set `db` and `logs`, each a path", path.display(), e.utf8_error().valid_up_to()))?;
    let mut config: Config = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        format!("{}{at}: {} (it may set `db` and `logs`, each a path)", path.display(), e.message())
    })?;
    config.db = config.db.map(home);
    config.logs = config.logs.map(home);
    Ok(config)
}

/// A leading `~/` is the home directory, as people write paths in files.
fn home(path: PathBuf) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(h)) => PathBuf::from(h).join(rest),
        _ => path,
    }
}

/// The database when no flag or `SESSIONDB_DB` names one: the file's `db`, else
/// [`sessiondb::store::default_db_path`].
pub fn default_db_path() -> Result<Option<PathBuf>, Failure> {
    Ok(config()?.db.clone().or_else(sessiondb::store::default_db_path))
}

/// Where the database path comes from when no flag or variable gives it, for errors about it.
pub fn db_origin() -> String {
    match (config(), path()) {
        (Ok(Config { db: Some(_), .. }), Some(file)) => format!("the `db` of {}", file.display()),
        _ => "the default database path".into(),
    }
}

/// Where gptme's logs root comes from when none is given ([`default_logs_root`]), for errors
/// about it: `GPTME_LOGS_HOME`, the file's `logs`, or gptme's default.
pub fn logs_root_origin() -> String {
    if std::env::var_os("GPTME_LOGS_HOME").is_some_and(|v| !v.is_empty()) {
        return "from GPTME_LOGS_HOME".into();
    }
    match (config(), path()) {
        (Ok(Config { logs: Some(_), .. }), Some(file)) => format!("the `logs` of {}", file.display()),
        _ => "gptme's default logs root".into(),
    }
}

/// gptme's logs root when none is given: `$GPTME_LOGS_HOME`, else the file's `logs`, else
/// gptme's own default ([`sessiondb::layout::default_logs_root`]).
pub fn default_logs_root() -> Result<Option<PathBuf>, Failure> {
    if std::env::var_os("GPTME_LOGS_HOME").is_some_and(|v| !v.is_empty()) {
        return Ok(sessiondb::layout::default_logs_root());
    }
    Ok(config()?.logs.clone().or_else(sessiondb::layout::default_logs_root))
}
