//! Database faults: a full disk, a corrupted page, a newer schema. Each is reported clearly,
//! leaves what was committed intact, and `sessiondb doctor` says what is wrong and how to
//! restore from gptme's directories.

use crate::common;

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::process::Command;

use common::{run_ok, sessiondb};
use serde_json::Value;

fn fixtures_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let logs = dir.join("logs");
    run_ok(Command::new("cp").arg("-a").arg(common::fixtures()).arg(&logs));
    logs
}

fn doctor(db: &std::path::Path, logs: &std::path::Path) -> (bool, Value) {
    let out = sessiondb(db).arg("doctor").arg(logs).arg("--json").output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.success(), report["ok"] == true, "exit code follows the verdict");
    (out.status.success(), report)
}

#[test]
fn a_full_disk_fails_the_write_cleanly_and_keeps_what_was_committed() {
    let work = tempfile::tempdir().unwrap();
    let logs = fixtures_copy(work.path());
    let db = work.path().join("db.sqlite");
    run_ok(sessiondb(&db).args(["append", "--help"])); // the binary runs at all
                                                       // First a small store, then an import of a big conversation with the file size limit just
                                                       // above what the database has: the writes fail with EFBIG (SIGXFSZ ignored), as on a full disk.
    let small = work.path().join("small");
    fs::create_dir(&small).unwrap();
    run_ok(Command::new("cp").arg("-a").arg(logs.join("2026-07-01-basic-chat")).arg(&small));
    run_ok(sessiondb(&db).args(["import", "--source", "small"]).arg(&small));
    run_ok(sessiondb(&db).arg("list").arg("--json")); // checkpointed and readable
                                                      // Named with its source: the import below may commit its rows (another source's) before
                                                      // its search indexes fail to fit.
    let before = run_ok(sessiondb(&db).args(["show", "small:2026-07-01-basic-chat", "--json"])).stdout;
    let size_kb = fs::metadata(&db).unwrap().len() / 1024 + 64;
    let script = format!("trap '' XFSZ; ulimit -f {}; exec \"$0\" --db \"$1\" import \"$2\"", size_kb * 1024 / 512);
    let out = Command::new("sh").args(["-c", &script, env!("CARGO_BIN_EXE_sessiondb")]).arg(&db).arg(&logs).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the import cannot have fitted in {size_kb} KB");
    assert!(!err.contains("panicked") && err.contains("sessiondb:"), "a plain error: {err}");
    assert!(err.to_lowercase().contains("full") || err.contains("too large") || err.contains("disk") || err.contains("I/O"), "says why: {err}");
    // What was committed before is intact, the database sound.
    let after = run_ok(sessiondb(&db).args(["show", "small:2026-07-01-basic-chat", "--json"])).stdout;
    assert_eq!(before, after);
    let (ok, report) = doctor(&db, &small);
    assert!(ok, "{report}");
    // And with room again, the import completes.
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    assert_eq!(doctor(&db, &logs).1["sync"]["in_step"], 18);
}

#[test]
fn a_corrupted_page_is_detected_and_doctor_says_how_to_restore() {
    let work = tempfile::tempdir().unwrap();
    let logs = fixtures_copy(work.path());
    let db = work.path().join("db.sqlite");
    run_ok(sessiondb(&db).arg("import").arg(&logs)); // ends with a WAL checkpoint
    let (ok, report) = doctor(&db, &logs);
    assert!(ok, "{report}");
    assert_eq!(report["sync"]["in_step"], 18);
    // Overwrite two whole pages of the messages table with garbage. They are chosen through
    // dbstat, not by their place in the file: a page picked by position can be a free page or
    // the unused middle of a B-tree page, which no check can tell from data.
    let (page_size, pages): (u64, Vec<u64>) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let size: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        let mut stmt = conn.prepare("SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' ORDER BY pageno").unwrap();
        let leaves: Vec<u64> = stmt.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
        assert!(leaves.len() >= 3, "{leaves:?}");
        (size, vec![leaves[leaves.len() / 3], leaves[leaves.len() / 2]])
    };
    let mut f = fs::OpenOptions::new().write(true).open(&db).unwrap();
    for pageno in pages {
        f.seek(SeekFrom::Start((pageno - 1) * page_size)).unwrap();
        f.write_all(&vec![0xA5; page_size as usize]).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    let (ok, report) = doctor(&db, &logs);
    assert!(!ok, "{report}");
    let problems = report["problems"].to_string();
    assert!(problems.contains("integrity") || problems.contains("cannot be read") || problems.contains("malformed"), "{report}");
    let advice = report["advice"].as_str().unwrap_or_else(|| panic!("no advice: {report}"));
    assert!(advice.contains("sessiondb import") && advice.contains(&logs.display().to_string()), "{advice}");
    // Following the advice restores everything from the directories.
    fs::rename(&db, work.path().join("damaged.sqlite")).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", db.display()));
    }
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let (ok, report) = doctor(&db, &logs);
    assert!(ok && report["sync"]["in_step"] == 18, "{report}");
}

#[test]
fn doctor_finds_rows_and_totals_that_disagree() {
    let work = tempfile::tempdir().unwrap();
    let logs = fixtures_copy(work.path());
    let db = work.path().join("db.sqlite");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("UPDATE conversations SET message_count = message_count + 5 WHERE chat_id = '2026-07-05-branches'", []).unwrap();
        conn.execute("INSERT INTO blobs (sha256, size) VALUES (x'00112233', 0)", []).unwrap();
    }
    let (ok, report) = doctor(&db, &logs);
    assert!(!ok);
    let problems = report["problems"].to_string();
    assert!(problems.contains("2026-07-05-branches") && problems.contains("messages stored"), "{report}");
    assert!(problems.contains("orphaned blob"), "{report}");
    assert!(report["advice"].is_null(), "not damage: no restore needed");
    // And it tells where the store stands against the logs root.
    fs::remove_dir_all(logs.join("2026-07-09-named-chat")).unwrap();
    let (_, report) = doctor(&db, &logs);
    assert_eq!(report["sync"]["deleted"], serde_json::json!(["2026-07-09-named-chat"]), "{report}");
}

#[test]
fn a_newer_schema_is_reported_and_left_untouched() {
    let work = tempfile::tempdir().unwrap();
    let logs = fixtures_copy(work.path());
    let db = work.path().join("db.sqlite");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    rusqlite::Connection::open(&db).unwrap().execute_batch("PRAGMA user_version = 99; PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    let before = fs::read(&db).unwrap();
    let (ok, report) = doctor(&db, &logs);
    assert!(!ok && report["schema_version"] == 99 && report["problems"].to_string().contains("newer"), "{report}");
    let out = sessiondb(&db).args(["sync"]).arg(&logs).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("newer"));
    assert_eq!(fs::read(&db).unwrap(), before, "not a byte changed");
}

#[test]
fn a_read_only_file_system_gets_a_plain_error() {
    // /proc refuses new files even to root (who writes through permission bits): a read-only
    // file system for the database and for an export target alike.
    let work = tempfile::tempdir().unwrap();
    let logs = fixtures_copy(work.path());
    let out = sessiondb(std::path::Path::new("/proc/sessiondb-test.db")).arg("import").arg(&logs).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.starts_with("sessiondb: cannot create the database at /proc/sessiondb-test.db"), "{err}");
    let db = work.path().join("db.sqlite");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let out = sessiondb(&db).args(["export", "--to", "/proc/sessiondb-export", "2026-07-01-basic-chat"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/proc/sessiondb-export") && !err.contains("panicked"), "{err}");
    let (ok, report) = doctor(&db, &logs);
    assert!(ok, "{report}");
}
