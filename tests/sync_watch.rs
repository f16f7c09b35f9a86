//! `sessiondb sync --watch`: what gptme writes becomes searchable while it runs, new
//! conversations included, and Ctrl-C stops it cleanly.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{gptme_python, run_ok, sessiondb, tool};

/// Polls `sessiondb search WORD` until it finds a match; returns how long that took.
fn searchable(db: &std::path::Path, word: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let out = run_ok(sessiondb(db).args(["search", word, "--json"]));
        let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if !hits["results"].as_array().unwrap().is_empty() {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{word:?} not searchable after {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_takes_in_what_gptme_writes_and_stops_on_ctrl_c() {
    common::on_each_engine(|dir, db| {
        let logs = dir.join("logs");
        run_ok(Command::new("cp").arg("-a").arg(common::fixtures()).arg(&logs));
        let mut watch = sessiondb(db).arg("sync").arg(&logs).args(["--watch", "--json"]).stdout(Stdio::piped()).spawn().unwrap();
        let mut passes = BufReader::new(watch.stdout.take().unwrap()).lines();
        let first: serde_json::Value = serde_json::from_str(&passes.next().unwrap().unwrap()).unwrap();
        assert_eq!(first["ingest"]["new_conversations"], 18, "the first pass takes in the whole root");

        // gptme appends to an existing conversation, then starts a new one.
        let append = |chat: &str| {
            let ack = dir.join("ack.txt");
            run_ok(Command::new(gptme_python()).arg(tool("gptme_appender.py")).arg(&logs).arg(&ack).arg("1").arg(chat));
        };
        append("2026-07-01-basic-chat");
        let lag = searchable(db, "\"ack 2026-07-01-basic-chat 0\"", Duration::from_secs(10));
        println!("an appended message was searchable {lag:?} after gptme wrote it");
        append("2026-12-01-started-while-watching");
        searchable(db, "\"ack 2026-12-01-started-while-watching 0\"", Duration::from_secs(10));

        // Ctrl-C: a clean stop.
        unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = watch.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "watch did not stop on SIGINT");
            std::thread::sleep(Duration::from_millis(20));
        };
        // On failure, the passes that reported errors say why.
        let rest: Vec<String> = passes.map_while(Result::ok).filter(|l| l.contains("\"errors\":[\"")).collect();
        assert!(status.success(), "{status:?}: {rest:?}");
        // Sound: SQLite's integrity check on a file, the row checks on a server.
        let doctor: serde_json::Value = serde_json::from_slice(&sessiondb(db).args(["doctor", "--json"]).output().unwrap().stdout).unwrap();
        assert_eq!(doctor["problems"], serde_json::json!([]), "{doctor}");
    });
}

/// `sync --watch --source NAME` reads its root into that source, beside another root's
/// conversation of the same chat id; a conversation gptme writes meanwhile lands there too.
#[test]
fn watch_reads_into_the_source_it_is_given() {
    common::on_each_engine(|dir, db| {
        let (home, work) = (dir.join("home"), dir.join("work"));
        for (root, said) in [(&home, "at home"), (&work, "at work")] {
            std::fs::create_dir_all(root.join("same")).unwrap();
            std::fs::write(root.join("same/conversation.jsonl"), format!("{{\"role\": \"user\", \"content\": \"{said}\"}}\n")).unwrap();
        }
        run_ok(sessiondb(db).arg("sync").arg(&home));
        let mut watch = sessiondb(db).arg("sync").arg(&work).args(["--watch", "--json", "--source", "work"]).stdout(Stdio::piped()).spawn().unwrap();
        let mut passes = BufReader::new(watch.stdout.take().unwrap()).lines();
        let first: serde_json::Value = serde_json::from_str(&passes.next().unwrap().unwrap()).unwrap();
        assert_eq!(first["ingest"]["new_conversations"], 1);
        let ack = dir.join("ack.txt");
        run_ok(Command::new(gptme_python()).arg(tool("gptme_appender.py")).arg(&work).arg(&ack).arg("1").arg("started-while-watching"));
        searchable(db, "\"ack started-while-watching 0\"", Duration::from_secs(10));
        unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
        assert!(watch.wait().unwrap().success());
        let show = |name: &str| String::from_utf8_lossy(&run_ok(sessiondb(db).args(["show", name, "--json"])).stdout).into_owned();
        assert!(show("work:same").contains("at work"));
        assert!(show("work:started-while-watching").contains("ack started-while-watching 0"));
        let home_source = format!("{}:{}", sessiondb::store::sources::hostname(), std::fs::canonicalize(&home).unwrap().display());
        assert!(show(&format!("{home_source}:same")).contains("at home"), "the other root's `same` untouched");
    });
}

/// The database moved away while `sync --watch` runs: it stops at its next pass, saying so,
/// and never makes a database anew at the old path (it used to, at every pass).
#[test]
fn watch_stops_when_its_database_is_moved_away() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(logs.join("one")).unwrap();
    std::fs::write(logs.join("one/conversation.jsonl"), "{\"role\": \"user\", \"content\": \"hello\"}\n").unwrap();
    let db = dir.path().join("sessions.db");
    let watch = sessiondb(&db).arg("sync").arg(&logs).args(["--watch", "--rescan", "1"]).stderr(Stdio::piped()).spawn().unwrap();
    while !db.exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    std::fs::rename(&db, dir.path().join("moved.db")).unwrap();
    let out = common::output_within(watch, Duration::from_secs(30), "sync --watch after its database moved");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("moved, removed or replaced"), "{err}");
    assert!(!db.exists(), "a database was made anew at the old path");
}
