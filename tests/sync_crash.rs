//! Killing `sessiondb sync` at random moments while real gptme keeps appending: afterwards one
//! more sync must leave every message gptme acknowledged in the store exactly once, the store
//! equal to the directories, and the store sound (SQLite's integrity check; doctor's checks on
//! a PostgreSQL store, where the same test runs).
//!
//! The CI form makes at least 60 kills; set `SESSIONDB_CRASH_KILLS` for a longer run.

use crate::common;

use std::collections::HashMap;
use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{gptme_python, run_ok, sessiondb, tool, tree::assert_same_tree};

#[test]
fn killed_syncs_lose_and_duplicate_nothing() {
    killed_syncs("sqlite");
}

#[test]
fn killed_syncs_lose_and_duplicate_nothing_on_postgres() {
    killed_syncs("postgres");
}

fn killed_syncs(engine: &str) {
    let (kills_wanted, mut rng) = common::crash::plan(60);
    let temp = tempfile::tempdir().unwrap();
    let Some(test_db) = common::TestDb::of(engine, temp.path()) else { return };
    let logs = temp.path().join("logs");
    run_ok(Command::new("cp").arg("-a").arg(common::fixtures()).arg(&logs));
    let db = test_db.db.clone();
    let ack = temp.path().join("acknowledged.txt");
    let chats = ["2026-12-01-crash-a", "2026-12-01-crash-b", "2026-07-01-basic-chat"];
    let mut appender =
        Command::new(gptme_python()).arg(tool("gptme_appender.py")).arg(&logs).arg(&ack).arg("100000").args(chats).stdout(Stdio::null()).spawn().unwrap();

    let (mut kills, mut completed) = (0u32, 0u32);
    // Kill delays are spread over one and a half times about the length of a whole sync, so
    // that kills land in every phase and some syncs get to commit. That length follows the
    // runs (the first import is slower than later passes): shorter after a sync that finished
    // in time, longer after a kill.
    let mut whole = Duration::from_millis(100);
    let deadline = Instant::now() + Duration::from_secs(600);
    // sessiondb's side: appends queued in the store, which the syncs being killed write out —
    // to a conversation only sessiondb changes, and to one gptme appends to as well (conflicts).
    let queued_chats = ["2026-07-03-message-flags", "2026-12-01-crash-b"];
    let mut queued: Vec<(String, String)> = Vec::new();
    let mut round = 0u32;
    while kills < kills_wanted {
        assert!(Instant::now() < deadline, "too slow: {kills} kills");
        round += 1;
        if round.is_multiple_of(3) {
            let chat = queued_chats[(round / 3) as usize % 2];
            let content = format!("queued {chat} {round}");
            let out = sessiondb(&db).args(["append", chat, "--queue", "--role", "user", "--content", &content]).output().unwrap();
            if out.status.success() {
                queued.push((chat.to_owned(), content));
            } else {
                // Only before the first sync that took in the conversation (or, every sync so
                // far killed before it made the database, before there is one).
                let said = String::from_utf8_lossy(&out.stderr);
                assert!(said.contains("no conversation") || said.contains("no database at"), "{said}");
            }
        }
        let mut sync = sessiondb(&db).arg("sync").arg(&logs).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % (whole.as_micros() as u64 * 3 / 2 + 1)));
        if sync.try_wait().unwrap().is_none() {
            sync.kill().unwrap(); // SIGKILL
            sync.wait().unwrap();
            kills += 1;
            whole = whole.mul_f64(1.1);
        } else {
            let out = sync.wait_with_output().unwrap();
            whole = whole.mul_f64(0.9);
            assert!(out.status.success(), "a sync failed: {}", String::from_utf8_lossy(&out.stderr));
            completed += 1;
        }
    }
    // SIGTERM: the appender finishes the append in hand and records it.
    unsafe { libc::kill(appender.id() as i32, libc::SIGTERM) };
    assert!(appender.wait().unwrap().success());
    run_ok(sessiondb(&db).arg("sync").arg(&logs));

    let acknowledged: Vec<String> = fs::read_to_string(&ack).unwrap().lines().map(str::to_owned).collect();
    assert!(acknowledged.len() > 10, "gptme appended too little to test anything: {}", acknowledged.len());
    let store = sessiondb::store::Store::open(&db).unwrap();
    let conn = store.connection().unwrap();
    test_db.assert_sound("after the kills");
    let mut lost = 0;
    let mut duplicated = 0;
    // Every queued append reached its directory: in main, or in a conflict branch.
    for (chat, content) in &queued {
        let dir = logs.join(chat);
        let mut transcripts = vec![dir.join("conversation.jsonl")];
        if let Ok(entries) = fs::read_dir(dir.join("branches")) {
            transcripts.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
        let needle = format!("\"content\": \"{content}\"");
        if !transcripts.iter().any(|t| fs::read_to_string(t).unwrap().contains(&needle)) {
            lost += 1;
        }
    }
    let chats: Vec<&str> = chats.iter().copied().chain(["2026-07-03-message-flags"]).collect();
    for &chat in &chats {
        let main = sessiondb::store::queries::branch_messages(&conn, chat, "main").unwrap();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for m in &main {
            *counts.entry(m.content.as_str()).or_default() += 1;
        }
        for a in acknowledged.iter().filter(|a| a.starts_with(&format!("ack {chat} "))) {
            match counts.get(a.as_str()) {
                None => lost += 1,
                Some(&n) if n > 1 => duplicated += 1,
                _ => {}
            }
        }
        let summary = sessiondb::store::queries::conversation_summary(&conn, chat).unwrap();
        assert_eq!(summary.messages as usize, main.len(), "{chat}: listing totals follow the messages");
        // The store's copy, written out, is the directory.
        let out = tempfile::tempdir().unwrap();
        run_ok(sessiondb(&db).args(["export", "--to"]).arg(out.path()).arg(chat));
        assert_same_tree(&logs.join(chat), &out.path().join(chat), &[".lock"]);
    }
    println!(
        "{engine}: kills: {kills}, syncs completed: {completed}, messages acknowledged by gptme: {}, appends queued by sessiondb: {}, lost: {lost}, duplicated: {duplicated}",
        acknowledged.len(),
        queued.len()
    );
    assert_eq!((lost, duplicated), (0, 0));
}
