//! A PostgreSQL server as the store: connections by URL, pooled like SQLite's.
//!
//! `--db postgres://…` (or `postgresql://…`) names a database on a server; everything after the
//! scheme is libpq's URL syntax (user, password, host, port, database, `?options`), TLS with
//! libpq's `sslmode` and `sslrootcert` (`store::server_tls`). A password in the URL is never
//! printed: [`redacted`] is what errors show. Each connection
//! starts with the settings the store relies on: UTC, and a lock timeout equal to SQLite's busy
//! timeout, so that a writer held up by another host fails with a clear error instead of
//! waiting for ever.

use super::sql::pg::Client;

/// Opens connections to one server for the pool.
pub struct Manager {
    config: postgres::Config,
    /// How connections are encrypted; `None` with `sslmode=disable`.
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
}

impl Manager {
    /// A manager for `url`, or why the URL cannot be used.
    pub fn new(url: &str) -> Result<Manager, String> {
        let (url, tls) = super::server_tls::split(url)?;
        let config: postgres::Config = url.parse().map_err(|e: postgres::Error| e.to_string())?;
        Ok(Manager { config, tls })
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Client;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Client, postgres::Error> {
        let mut client = match &self.tls {
            Some(tls) => self.config.connect(tls.clone())?,
            None => self.config.connect(postgres::NoTls)?,
        };
        client.batch_execute(&format!("SET TIME ZONE 'UTC'; SET lock_timeout = {}; SET client_min_messages = warning", super::BUSY_TIMEOUT_MS))?;
        Ok(Client::new(client))
    }

    fn is_valid(&self, conn: &mut Client) -> Result<(), postgres::Error> {
        conn.ping()
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

    #[test]
    fn passwords_never_show() {
        assert_eq!(redacted("postgres://me:s3cret@db.example:5432/x"), "postgres://me:***@db.example:5432/x");
        assert_eq!(redacted("postgresql://me@db/x?sslmode=require&password=pw"), "postgresql://me@db/x?sslmode=require&password=***");
        assert_eq!(redacted("postgres://db/x?password=pw"), "postgres://db/x?password=***");
        assert_eq!(redacted("postgres://me@db"), "postgres://me@db");
    }
}
