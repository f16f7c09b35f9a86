//! A PostgreSQL server as the store: connections by URL, pooled like SQLite's.
//!
//! `--db postgres://…` (or `postgresql://…`) names a database on a server; everything after the
//! scheme is libpq's URL syntax (user, password, host, port, database, `?options`), TLS with
//! libpq's `sslmode` and `sslrootcert` (`store::server_tls`). A password in the URL is never
//! printed: [`redacted`] is what errors show. Each connection starts with the settings the
//! store relies on: UTC, and a lock timeout equal to SQLite's busy timeout, so that a writer held
//! up by another host fails with a clear error instead of waiting for ever.
//!
//! Invariant: no command waits for ever on a server that does not answer (libpq's defaults
//! would). Every request has a deadline, and one not met names the server, the wait and what to
//! do ([`super::sql::Error::NoAnswer`]):
//! - Connecting (the socket, TLS, the startup, authentication: the whole of it) takes at most the
//!   URL's `connect_timeout`, [`CONNECT_TIMEOUT`] when it gives none (0: for ever, as libpq).
//! - The server runs no statement of sessiondb's past its `statement_timeout`: the URL's
//!   (`options=-c statement_timeout=…`), or the one the server's configuration gives the role or
//!   the database, else [`STATEMENT_TIMEOUT`] (0: none). It is per statement, and an import or a
//!   sync is many short statements (a conversation's rows, the search indexes in batches): none
//!   comes near it; what it stops is a statement gone wrong, with the server's own error. A server that answers
//!   nothing for that long and [`GRACE`] more (stopped, overloaded, behind a proxy that
//!   stalled) is given up by sessiondb itself, as the server would have answered by then.
//! - A connection the pool hands out again is first asked an empty statement, which a working
//!   server answers at once: it waits [`GRACE`] at most.
//! - A server whose machine or network is gone is found out sooner, by TCP: keepalives (after
//!   [`KEEPALIVE_IDLE`] of quiet) and a time limit on unacknowledged data
//!   ([`TCP_USER_TIMEOUT`]), unless the URL sets `keepalives*` or `tcp_user_timeout` itself.

use std::time::Duration;

use super::sql::pg::{Client, Deadline};
use super::sql::{seconds, Error};

/// How long connecting may take when the URL gives no `connect_timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a statement of sessiondb's runs on the server when neither the URL nor the
/// server's configuration sets `statement_timeout`.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(300);
/// How much longer than the `statement_timeout` a request waits for the server's answer.
pub const GRACE: Duration = Duration::from_secs(10);
/// How long a connection is quiet before TCP keepalives probe the server's machine.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
/// How long data sent to the server may stay unacknowledged before the connection is dropped.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(60);

/// Opens connections to one server for the pool.
pub struct Manager {
    config: tokio_postgres::Config,
    /// How connections are encrypted; `None` with `sslmode=disable`.
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// How long connecting may take (`None`: for ever), and the server as messages name it.
    connecting: Deadline,
    /// A connection made already, handed out as the next new one ([`Manager::keep`]).
    spare: std::sync::Mutex<Option<Client>>,
}

impl Manager {
    /// A manager for `url`, or why the URL cannot be used.
    pub fn new(url: &str) -> Result<Manager, String> {
        let (library_url, tls) = super::server_tls::split(url)?;
        let mut config: tokio_postgres::Config = library_url.parse().map_err(|e: tokio_postgres::Error| e.to_string())?;
        let given = |key: &str| super::server_tls::query_value(url, key);
        // The library reads 0 as "not given"; libpq reads it as "for ever".
        let connect_timeout = match given("connect_timeout")?.map(|v| v.trim().parse::<u64>()) {
            None => Some(CONNECT_TIMEOUT),
            Some(Ok(0)) => None,
            Some(Ok(secs)) => Some(Duration::from_secs(secs)),
            Some(Err(_)) => return Err("connect_timeout must be a number of seconds".into()),
        };
        if let Some(wait) = connect_timeout {
            config.connect_timeout(wait);
        }
        if given("keepalives_idle")?.is_none() {
            config.keepalives_idle(KEEPALIVE_IDLE);
        }
        if given("keepalives_interval")?.is_none() {
            config.keepalives_interval(Duration::from_secs(5));
        }
        if given("keepalives_retries")?.is_none() {
            config.keepalives_retries(3);
        }
        if given("tcp_user_timeout")?.is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        let why = "is a PostgreSQL server running there, and reachable? connect_timeout=SECONDS in the URL waits longer (0: for ever)".to_owned();
        Ok(Manager { config, tls, connecting: Deadline { server: redacted(url), wait: connect_timeout, why }, spare: Default::default() })
    }

    /// Keeps `client`, a connection this manager made and that is idle (no transaction, no
    /// session lock), to be the next connection the pool asks for: the store's first
    /// connection, which checked the schema, serves its first command, which would otherwise
    /// wait for the server to start a second (a few milliseconds of every command).
    pub fn keep(&self, client: Client) {
        *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = Some(client);
    }
}

/// The settings every connection starts with, in one round trip, and what `statement_timeout`
/// is: the URL's or the server configuration's when either sets it, else [`STATEMENT_TIMEOUT`].
/// Its last two columns: whether the server had its default (none), and its value then (ms).
fn setup() -> String {
    format!(
        "SELECT set_config('TimeZone', 'UTC', false), set_config('lock_timeout', '{}', false), set_config('client_min_messages', 'warning', false),
                source = 'default', setting, CASE WHEN source = 'default' THEN set_config('statement_timeout', '{}', false) END
         FROM pg_settings WHERE name = 'statement_timeout'",
        super::BUSY_TIMEOUT_MS,
        STATEMENT_TIMEOUT.as_millis()
    )
}

/// How long a connection's requests wait, once it has `statement_timeout` (zero: none).
fn requests_deadline(server: String, statement_timeout: Duration) -> Deadline {
    if statement_timeout.is_zero() {
        return Deadline { server, wait: None, why: String::new() };
    }
    let why = format!(
        "it had its statement_timeout, {}, and {} more, so the connection was given up; the server may be stopped, overloaded or cut off: check it, or give statements longer with options=-c%20statement_timeout%3D… in the URL (0: no limit)",
        seconds(statement_timeout),
        seconds(GRACE)
    );
    Deadline { server, wait: Some(statement_timeout + GRACE), why }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Client;
    type Error = Error;

    fn connect(&self) -> Result<Client, Error> {
        if let Some(client) = self.spare.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Ok(client);
        }
        let mut client = match &self.tls {
            Some(tls) => Client::connect(&self.config, tls.clone(), self.connecting.clone())?,
            None => Client::connect(&self.config, postgres::NoTls, self.connecting.clone())?,
        };
        let row = client.first_row_as_text(&setup())?.unwrap_or_default();
        let statement_timeout = match row.get(3..5) {
            Some([Some(default), _]) if default == "t" => STATEMENT_TIMEOUT,
            Some([_, Some(ms)]) => Duration::from_millis(ms.parse().unwrap_or(0)),
            _ => STATEMENT_TIMEOUT,
        };
        client.set_deadline(requests_deadline(self.connecting.server.clone(), statement_timeout));
        Ok(client)
    }

    fn is_valid(&self, conn: &mut Client) -> Result<(), Error> {
        conn.ping(GRACE)
    }

    fn has_broken(&self, conn: &mut Client) -> bool {
        conn.is_broken()
    }
}

/// `url` with its password, if any, replaced by `***`, for messages.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => authority.to_owned(),
    };
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    let query = query.map(|query| {
        let parts: Vec<String> = query
            .split('&')
            .map(|part| match part.split_once('=') {
                Some((key, _)) if key == "password" => format!("{key}=***"),
                _ => part.to_owned(),
            })
            .collect();
        format!("?{}", parts.join("&"))
    });
    format!("{scheme}://{authority}{path}{}", query.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timeouts by default, each as the URL gives it when it does (libpq's names and units).
    #[test]
    fn every_wait_has_a_default_and_the_url_overrides_it() {
        let manager = Manager::new("postgres://me@db.example/x").unwrap();
        assert_eq!(manager.connecting.wait, Some(CONNECT_TIMEOUT));
        assert_eq!(manager.config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(manager.config.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(manager.config.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
        assert!(manager.connecting.why.contains("connect_timeout="));
        let manager = Manager::new("postgres://me@db.example/x?connect_timeout=3&keepalives_idle=100&tcp_user_timeout=7").unwrap();
        assert_eq!(manager.connecting.wait, Some(Duration::from_secs(3)));
        assert_eq!(manager.config.get_keepalives_idle(), Duration::from_secs(100));
        assert_eq!(manager.config.get_tcp_user_timeout(), Some(&Duration::from_secs(7)));
        assert_eq!(Manager::new("postgres://me@db.example/x?connect_timeout=0").unwrap().connecting.wait, None, "0: for ever, as libpq");
        assert!(Manager::new("postgres://me@db.example/x?connect_timeout=soon").is_err());
        let deadline = requests_deadline("postgres://db/x".into(), Duration::from_secs(1));
        assert_eq!(deadline.wait, Some(Duration::from_secs(11)));
        assert!(deadline.why.starts_with("it had its statement_timeout, 1 s, and 10 s more"), "{}", deadline.why);
        assert_eq!(requests_deadline("postgres://db/x".into(), Duration::ZERO).wait, None, "statement_timeout=0: no limit");
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redacted("postgres://me:s3cret@db.example:5432/x"), "postgres://me:***@db.example:5432/x");
        assert_eq!(redacted("postgresql://me@db/x?sslmode=require&password=pw"), "postgresql://me@db/x?sslmode=require&password=***");
        assert_eq!(redacted("postgres://db/x?password=pw"), "postgres://db/x?password=***");
        assert_eq!(redacted("postgres://me@db"), "postgres://me@db");
    }
}
