//! Crash injection across sessiondb's writers: `import`, `append`, `edit`, `undo`, `sync` and
//! `export` run in child processes that are killed with SIGKILL at random moments (at least 200
//! kills in the CI form; `SESSIONDB_CRASH_KILLS` for a longer run). After every kill:
//! SQLite's integrity check is `ok`, and every transcript in the conversation directory and in
//! the export target parses, line by line (no file is ever left truncated or half-written).
//! At the end, after one more sync: every operation a child reported as done is there, in the
//! store and in the directory, the store equals the directory, and the store is sound. The
//! same test runs on a PostgreSQL store (with doctor's checks of the rows every tenth kill, the
//! server keeping its pages whole itself).

use crate::common;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_ok, sessiondb, tree::assert_same_tree};

const CHAT: &str = "2026-12-01-crash-ops";

fn store_contents(db: &Path) -> BTreeSet<String> {
    let store = sessiondb::store::Store::open(db).unwrap();
    let conn = store.connection().unwrap();
    let mut out = BTreeSet::new();
    for branch in sessiondb::store::queries::branch_names(&conn, CHAT).unwrap() {
        for m in sessiondb::store::queries::branch_messages(&conn, CHAT, &branch).unwrap() {
            out.insert(m.content);
        }
    }
    out
}

#[test]
fn killed_writers_lose_nothing_and_leave_no_half_written_file() {
    killed_writers("sqlite");
}

#[test]
fn killed_writers_lose_nothing_and_leave_no_half_written_file_on_postgres() {
    killed_writers("postgres");
}

fn killed_writers(engine: &str) {
    let (kills_wanted, mut rng) = common::crash::plan(200);
    let temp = tempfile::tempdir().unwrap();
    let Some(store) = common::TestDb::of(engine, temp.path()) else { return };
    let logs = temp.path().join("logs");
    run_ok(Command::new("cp").arg("-a").arg(common::fixtures()).arg(&logs));
    let db = store.db.clone();
    let out = temp.path().join("exported");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    run_ok(sessiondb(&db).args(["new", CHAT, "--logs-dir"]).arg(&logs));
    let toml = temp.path().join("edit.toml");

    let ops = ["append", "append", "append", "undo", "edit", "sync", "export", "import"];
    let (mut kills, mut done) = (0u32, 0u32);
    let mut kills_by_op = std::collections::BTreeMap::new();
    let mut acknowledged: Vec<String> = Vec::new();
    let mut whole = Duration::from_millis(30);
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut n = 0;
    while kills < kills_wanted {
        assert!(Instant::now() < deadline, "too slow: {kills} kills");
        n += 1;
        let op = ops[(rng.next() % ops.len() as u64) as usize];
        let content = format!("{op} {n}");
        let mut cmd = sessiondb(&db);
        match op {
            "append" => cmd.args(["append", CHAT, "--role", "user", "--content", &content]),
            "undo" => cmd.args(["undo", CHAT]),
            "edit" => {
                fs::write(&toml, format!("[[messages]]\nrole = \"user\"\ncontent = \"{content}\"\ntimestamp = \"2026-12-01T10:00:00\"\n")).unwrap();
                cmd.args(["edit", CHAT, "--toml"]).arg(&toml)
            }
            "sync" => cmd.arg("sync").arg(&logs),
            "export" => cmd.args(["export", "--to"]).arg(&out).arg(CHAT),
            _ => cmd.arg("import").arg(&logs),
        };
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % (whole.as_micros() as u64 * 3 / 2 + 1)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            child.wait().unwrap();
            kills += 1;
            *kills_by_op.entry(op).or_insert(0) += 1;
            whole = whole.mul_f64(1.1);
            // Right after the kill: a sound database, and no transcript cut short anywhere.
            if engine == "sqlite" || kills % 10 == 0 {
                store.assert_sound(&format!("after killing {op}"));
            }
            common::transcript_contents(&logs.join(CHAT));
            if out.join(CHAT).exists() {
                common::transcript_contents(&out.join(CHAT));
            }
        } else {
            let result = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&result.stderr);
            assert!(!err.contains("panicked"), "{op}: {err}");
            if result.status.success() {
                done += 1;
                if op == "append" || op == "edit" {
                    acknowledged.push(content);
                }
            } else {
                // The only refusal expected here: an undo with nothing left to undo.
                assert!(op == "undo", "{op} failed: {err}");
            }
            whole = whole.mul_f64(0.9);
        }
    }
    run_ok(sessiondb(&db).arg("sync").arg(&logs));
    let in_store = store_contents(&db);
    let on_disk = common::transcript_contents(&logs.join(CHAT));
    let lost: Vec<&String> = acknowledged.iter().filter(|a| !in_store.contains(*a) || !on_disk.contains(*a)).collect();
    let check = tempfile::tempdir().unwrap();
    run_ok(sessiondb(&db).args(["export", "--to"]).arg(check.path()).arg(CHAT));
    assert_same_tree(&logs.join(CHAT), &check.path().join(CHAT), &[".lock"]);
    store.assert_sound("at the end");
    println!(
        "{engine}: kills: {kills} ({kills_by_op:?}), operations completed: {done}, appends and edits acknowledged: {}, lost: {}",
        acknowledged.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "acknowledged but missing: {lost:?}");
}

/// `sessiondb backup DEST --force` over an earlier backup, killed at random moments within a
/// backup's length: `DEST` is after each kill either the earlier copy, byte for byte, or a
/// whole new one (SQLite's integrity check `ok`, every conversation and message of the store);
/// never a file cut short. What a killed backup leaves beside `DEST` is its own work directory.
#[test]
fn a_killed_backup_leaves_its_destination_whole_or_untouched() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("store.db");
    let logs = work.path().join("logs");
    common::tree::copy_tree(&common::fixtures(), &logs);
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let dest = work.path().join("backups").join("copy.db");
    fs::create_dir(dest.parent().unwrap()).unwrap();
    // The earlier copy: the store before one more conversation, so the two copies differ.
    run_ok(sessiondb(&db).args(["backup", "--force"]).arg(&dest));
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "after the first copy", "2026-07-01-basic-chat"]).env("GPTME_LOGS_HOME", &logs));
    let earlier = fs::read(&dest).unwrap();
    let counts = |path: &Path| -> (i64, i64, String) {
        let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let integrity: String = conn.query_row("PRAGMA integrity_check", (), |r| r.get(0)).unwrap();
        conn.query_row("SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages)", (), |r| Ok((r.get(0)?, r.get(1)?, integrity))).unwrap()
    };
    let (conversations, messages, _) = counts(&db);
    let started = Instant::now();
    run_ok(sessiondb(&db).args(["backup", "--force"]).arg(work.path().join("timing.db")));
    let span = (started.elapsed().as_micros() as u64).max(1);
    let (kills, mut rng) = common::crash::plan(30);
    let (mut untouched, mut replaced) = (0, 0);
    for kill in 0..kills {
        fs::write(&dest, &earlier).unwrap();
        let mut child = sessiondb(&db).args(["backup", "--force"]).arg(&dest).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % span));
        let _ = child.kill();
        let _ = child.wait();
        let now = fs::read(&dest).unwrap();
        if now == earlier {
            untouched += 1;
        } else {
            assert_eq!(counts(&dest), (conversations, messages, "ok".to_owned()), "kill {kill}: a new DEST is a whole copy");
            replaced += 1;
        }
    }
    println!("{kills} kills: DEST untouched after {untouched}, a whole new copy after {replaced}");
    // Nothing but the copy and what killed backups left in their own work directories.
    for entry in fs::read_dir(dest.parent().unwrap()).unwrap() {
        let entry = entry.unwrap();
        assert!(entry.path() == dest || entry.file_type().unwrap().is_dir(), "{}: left beside DEST", entry.path().display());
    }
}
