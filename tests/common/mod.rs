//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod crash;
pub mod pg;
pub mod strategies;
pub mod tree;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `sessiondb` binary under test.
pub fn sessiondb(db: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiondb"));
    cmd.arg("--db").arg(db);
    cmd
}

/// Runs a command and returns its output, failing the test with its stderr when it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("command runs");
    assert!(out.status.success(), "{:?} failed: {}\n{}", cmd, String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
    out
}

/// Runs a command to completion and returns (exit code, stderr, peak resident memory in MiB).
/// The child is reaped by `wait4` (which also reports its memory), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
pub fn run_measured(cmd: &mut Command, dir: &Path) -> (i32, String, u64) {
    let err_path = dir.join("stderr.txt");
    let child = cmd.stdout(std::process::Stdio::null()).stderr(std::fs::File::create(&err_path).unwrap()).spawn().unwrap();
    let mut status = 0;
    // SAFETY: wait4 fills `usage` for our own child, which has not been waited for yet.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
    (code, std::fs::read_to_string(&err_path).unwrap(), usage.ru_maxrss as u64 / 1024)
}

/// The committed fixture logs root, written by real gptme.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gptme-logs")
}

/// The Python that has gptme installed: `$GPTME_PYTHON`, else the project's `.venv`.
/// Interop tests need it; `tools/test.sh` creates it.
pub fn gptme_python() -> PathBuf {
    if let Some(p) = std::env::var_os("GPTME_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(venv.exists(), "interop tests need gptme: run tools/oracle/setup-gptme.sh (or set GPTME_PYTHON)");
    venv
}

/// What a test needs from outside the project (a browser, a shell, an agent), `found` or why
/// not: missing, it fails the test under CI (`CI` set), whose `.ci/run` installs it with
/// `setup`, and elsewhere the test is skipped, saying so (`None`). The one rule for every such
/// test.
pub fn needed_or_skip<T>(test: &str, found: Result<T, String>, setup: &str) -> Option<T> {
    match found {
        Ok(found) => Some(found),
        Err(why) if std::env::var_os("CI").is_some() => panic!("{test} cannot run under CI: {why}; run {setup}"),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}; run {setup} to run it");
            None
        }
    }
}

/// A script of the gptme oracle, in `tools/oracle/`.
pub fn tool(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/oracle").join(name)
}

/// A logs root freshly written by the real gptme (`tools/oracle/gen_fixtures.py`):
/// `$SESSIONDB_REGENERATED_FIXTURES` when set (tools/test.sh generates it once for all tests),
/// else generated now into the returned temporary directory.
pub fn regenerated_fixtures() -> (PathBuf, Option<tempfile::TempDir>) {
    if let Some(dir) = std::env::var_os("SESSIONDB_REGENERATED_FIXTURES") {
        return (PathBuf::from(dir), None);
    }
    let temp = tempfile::tempdir().unwrap();
    let logs = temp.path().join("logs");
    run_ok(Command::new(gptme_python()).arg(tool("gen_fixtures.py")).arg(&logs));
    (logs, Some(temp))
}

/// A real gptme process that has loaded a conversation (holding its `.lock`) and keeps it
/// open until dropped.
pub struct LiveGptme(std::process::Child);

impl LiveGptme {
    /// Starts gptme on `dir` (under `logs`) and waits until it holds the conversation.
    pub fn hold(dir: &Path, logs: &Path, home: &Path) -> LiveGptme {
        let script = "import sys, time\nfrom gptme.logmanager import LogManager\nm = LogManager.load(sys.argv[1])\nprint('loaded', flush=True)\ntime.sleep(60)\n";
        let mut child = Command::new(gptme_python())
            .args(["-c", script])
            .arg(dir)
            .env("GPTME_LOGS_HOME", logs)
            .env("HOME", home)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python runs");
        let mut ready = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().expect("piped")), &mut ready).unwrap();
        assert_eq!(ready.trim(), "loaded", "gptme did not load {}", dir.display());
        LiveGptme(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for LiveGptme {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The contents of every message in a conversation directory's transcripts (main and
/// branches), checking that each file ends whole and every line parses as a message.
pub fn transcript_contents(dir: &Path) -> std::collections::BTreeSet<String> {
    let mut files = vec![dir.join("conversation.jsonl")];
    if let Ok(entries) = std::fs::read_dir(dir.join("branches")) {
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")));
    }
    let mut contents = std::collections::BTreeSet::new();
    for f in files.iter().filter(|f| f.exists()) {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(text.is_empty() || text.ends_with('\n'), "{}: cut short", f.display());
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{}: half-written line ({e}): {line}", f.display()));
            contents.insert(v["content"].as_str().unwrap().to_owned());
        }
    }
    contents
}

/// Every message content in every branch the store holds for a conversation.
pub fn store_contents(store: &sessiondb::store::Store, chat_id: &str) -> std::collections::BTreeSet<String> {
    let conn = store.connection().unwrap();
    let mut out = std::collections::BTreeSet::new();
    for branch in sessiondb::store::queries::branch_names(&conn, chat_id).unwrap() {
        for m in sessiondb::store::queries::branch_messages(&conn, chat_id, &branch).unwrap() {
            out.insert(m.content);
        }
    }
    out
}

/// `text` without SGR sequences (`ESC [` digits and semicolons `m`).
pub fn without_sgr(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after.find(|c: char| !(c.is_ascii_digit() || c == ';')).unwrap_or(after.len());
        if after[params..].starts_with('m') {
            rest = &after[params + 1..];
        } else {
            out.push('\x1b');
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// Waits for `child` to end and returns its output, killing it and failing the test (naming
/// `what`) when it runs longer than `limit`: a hung browser or server must not hang the suite.
/// Its output is read as it comes (a child that writes more than a pipe holds would otherwise
/// wait for a reader that waits for it).
pub fn output_within(mut child: std::process::Child, limit: std::time::Duration, what: &str) -> Output {
    fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} did not finish in {} s", limit.as_secs());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// A database a test runs against: an SQLite file, or a fresh PostgreSQL database on the test
/// server (dropped when this is). Tests of the store's guarantees run once per engine
/// ([`databases`]).
pub struct TestDb {
    /// What `--db` is given: the file's path, or the database's URL.
    pub db: PathBuf,
    /// "sqlite" or "postgres", for messages and directory names.
    pub engine: &'static str,
    server: Option<(String, String)>,
}

impl TestDb {
    /// The SQLite file `sessions.db` in `dir`.
    pub fn sqlite(dir: &Path) -> TestDb {
        TestDb { db: dir.join("sessions.db"), engine: "sqlite", server: None }
    }

    /// The database of `engine` ("sqlite": a file in `dir`; "postgres": a fresh database on
    /// the test server), or `None` when PostgreSQL is left out ([`postgres_server`]).
    pub fn of(engine: &str, dir: &Path) -> Option<TestDb> {
        match engine {
            "sqlite" => Some(TestDb::sqlite(dir)),
            _ => postgres_db(),
        }
    }

    /// Fails the test unless the database is sound: SQLite's integrity check on a file; on a
    /// server (whose pages and keys the server keeps whole) `sessiondb doctor`'s checks of the
    /// rows and search indexes.
    pub fn assert_sound(&self, after: &str) {
        if self.engine == "sqlite" {
            let conn = rusqlite::Connection::open(&self.db).unwrap();
            let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
            assert_eq!(integrity, "ok", "{after}");
        } else {
            let out = sessiondb(&self.db).args(["doctor", "--json"]).output().unwrap();
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            assert_eq!(report["problems"], serde_json::json!([]), "{after}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }

    /// Runs statements on the store's tables directly in the database (SQL both engines read).
    pub fn execute(&self, sql: &str) {
        if self.engine == "sqlite" {
            rusqlite::Connection::open(&self.db).unwrap().execute_batch(sql).unwrap();
        } else {
            postgres::Client::connect(self.db.to_str().unwrap(), postgres::NoTls).unwrap().batch_execute(sql).unwrap();
        }
    }

    /// Two integers a query of the store's tables gives for `arg` (`?1` in it), read directly
    /// from the database.
    pub fn query_pair(&self, sql: &str, arg: &str) -> (i64, i64) {
        if self.engine == "sqlite" {
            let conn = rusqlite::Connection::open(&self.db).unwrap();
            conn.query_row(sql, [arg], |r| Ok((r.get(0)?, r.get(1)?))).unwrap()
        } else {
            let mut client = postgres::Client::connect(self.db.to_str().unwrap(), postgres::NoTls).unwrap();
            let row = client.query_one(&sql.replace("?1", "$1"), &[&arg]).unwrap();
            (row.get(0), row.get(1))
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin, name)) = &self.server {
            if let Ok(mut client) = postgres::Client::connect(admin, postgres::NoTls) {
                let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
            }
        }
    }
}

/// The PostgreSQL server the tests use: `SESSIONDB_TEST_POSTGRES_URL` (`tools/test.sh` starts
/// one and sets it). Unset, the tests fail, saying so, rather than quietly test SQLite alone;
/// `none` leaves PostgreSQL out on purpose.
pub fn postgres_server() -> Option<String> {
    match std::env::var("SESSIONDB_TEST_POSTGRES_URL") {
        Ok(url) if url == "none" => None,
        Ok(url) => Some(url),
        Err(_) => panic!(
            "SESSIONDB_TEST_POSTGRES_URL is not set: run the tests through tools/test.sh (which starts a PostgreSQL server), \
             point it at a server's database whose user may create databases, or set it to `none` to test SQLite alone"
        ),
    }
}

/// A fresh, empty PostgreSQL database on the test server, or `None` when PostgreSQL is left out.
pub fn postgres_db() -> Option<TestDb> {
    let admin = postgres_server()?;
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let name = format!("sessiondb_test_{}_{}_{nanos}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap_or_else(|e| panic!("the test server at {admin}: {e}"));
    client.batch_execute(&format!("CREATE DATABASE \"{name}\"")).unwrap();
    let (base, query) = match admin.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (admin.as_str(), String::new()),
    };
    let server_part = &base[..base.rfind('/').expect("a URL with a database")];
    let url = format!("{server_part}/{name}{query}");
    Some(TestDb { db: PathBuf::from(url), engine: "postgres", server: Some((admin.clone(), name)) })
}

/// Runs `test` once per engine, as [`databases`] lists them, each run with a work directory of
/// its own (`test(work, db)`): for a test that changes its logs root, so that each engine starts
/// from the same files. Which engine a failure is on is said on stderr.
pub fn on_each_engine(test: impl Fn(&Path, &Path)) {
    for engine in ["sqlite", "postgres"] {
        let work = tempfile::tempdir().unwrap();
        let Some(db) = TestDb::of(engine, work.path()) else { continue };
        eprintln!("on {engine}:");
        test(work.path(), &db.db);
    }
}

/// Every database a store test runs against: an SQLite file in `dir`, then (unless left out:
/// [`postgres_server`]) a fresh PostgreSQL database.
pub fn databases(dir: &Path) -> Vec<TestDb> {
    let mut all = vec![TestDb::sqlite(dir)];
    all.extend(postgres_db());
    all
}
