//! Roles on the PostgreSQL test server, for the tests of what one role may do to another's
//! rows: made for one test, named uniquely, and dropped when it ends, whatever happens.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Roles made for one test on the shared test server (roles belong to the server, not to a
/// database), dropped at the end whatever happens.
pub struct Roles {
    pub admin: String,
    pub db: String,
    pub names: Vec<String>,
}

impl Roles {
    /// One login role per name in `names` (made unique to this test: `NAME_PID_NANOS`), each a
    /// host of the store at `owner` (`tools/pg/host-role.sql`); the store's schema must exist.
    /// The roles' URLs are [`Roles::url`].
    pub fn hosts(owner: &str, names: &[&str]) -> Roles {
        let tag = format!("{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
        let roles = Roles { admin: super::postgres_server().unwrap(), db: owner.to_owned(), names: names.iter().map(|n| format!("{n}_{tag}")).collect() };
        let mut client = postgres::Client::connect(owner, postgres::NoTls).unwrap();
        for role in &roles.names {
            client.batch_execute(&format!("CREATE ROLE \"{role}\" LOGIN")).unwrap();
            psql_file(owner, "tools/pg/host-role.sql", &[("role", role)]);
        }
        roles
    }

    /// The role made for `name`, as the server knows it.
    pub fn role(&self, name: &str) -> &str {
        self.names.iter().find(|r| r.strip_prefix(name).is_some_and(|rest| rest.starts_with('_'))).expect("a role made for this test")
    }

    /// The store's URL, logged in as the role made for `name`.
    pub fn url(&self, name: &str) -> PathBuf {
        as_role(&self.db, self.role(name))
    }
}

impl Drop for Roles {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.db, postgres::NoTls) {
            for name in &self.names {
                let _ = client.batch_execute(&format!("DROP OWNED BY \"{name}\""));
            }
        }
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            for name in &self.names {
                let _ = client.batch_execute(&format!("DROP ROLE IF EXISTS \"{name}\""));
            }
        }
    }
}

/// `url` logged in as `role` instead.
pub fn as_role(url: &str, role: &str) -> PathBuf {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    PathBuf::from(format!("{scheme}://{role}@{host}"))
}

/// Runs the SQL file `file` (relative to the repository) with `psql` against `url`, with `psql`
/// variables `vars`, failing the test when it fails.
pub fn psql_file(url: &str, file: &str, vars: &[(&str, &str)]) {
    let mut cmd = Command::new("psql");
    cmd.arg(url).args(["-q", "-f"]).arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(file));
    for (k, v) in vars {
        cmd.arg("-v").arg(format!("{k}={v}"));
    }
    let out = cmd.output().expect("psql runs");
    assert!(out.status.success(), "psql -f {file}: {}", String::from_utf8_lossy(&out.stderr));
}
