//! 8 processes × 250 appends (`SESSIONDB_CONCURRENCY_APPENDS` for more), over conversations some of them share and some they have alone,
//! while `sessiondb list`, `search` and `sync` run in a loop beside them: no message lost,
//! duplicated or reordered, positions contiguous, no "database is locked" reaching anyone, and
//! listing totals equal to the messages stored. On an SQLite file and on a PostgreSQL store.
//!
//! The appending processes are this test binary run again as children (the
//! `concurrency::concurrency_child` test, which does nothing unless `SESSIONDB_CONCURRENCY_CHILD` is set), so
//! that each append goes through the library as in a long-running tool.

use crate::common;

use std::collections::HashMap;
use std::process::{Command, Stdio};

use common::{run_ok, sessiondb, tree::assert_same_tree};

const PROCESSES: usize = 8;
/// Appends per process: 250, or `SESSIONDB_CONCURRENCY_APPENDS` (inherited by the children).
fn appends() -> usize {
    std::env::var("SESSIONDB_CONCURRENCY_APPENDS").ok().and_then(|n| n.parse().ok()).unwrap_or(250)
}

/// Which conversation process `p` appends to: four share one, two share another, two have
/// one each.
fn conversation_of(p: usize) -> &'static str {
    match p {
        0..=3 => "2026-12-01-shared-by-four",
        4 | 5 => "2026-12-01-shared-by-two",
        6 => "2026-12-01-alone-a",
        _ => "2026-12-01-alone-b",
    }
}

/// The conversations the appending processes write to, each of [`conversation_of`]'s.
const CHATS: [&str; 4] = ["2026-12-01-shared-by-four", "2026-12-01-shared-by-two", "2026-12-01-alone-a", "2026-12-01-alone-b"];

/// Makes the conversations of [`CHATS`] in `logs`, through the store at `db`.
fn new_conversations(db: &std::path::Path, logs: &std::path::Path) {
    for p in [0, 4, 6, 7] {
        run_ok(sessiondb(db).args(["new", conversation_of(p), "--logs-dir"]).arg(logs));
    }
}

/// Waits (at most 120 s) until every appending process has appended at least once, and returns
/// what each conversation of [`CHATS`] then holds ([`appends_stored`]), in that order.
fn once_all_appended(db: &std::path::Path) -> Vec<HashMap<usize, Vec<usize>>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let now: Vec<HashMap<usize, Vec<usize>>> = CHATS.iter().map(|chat| appends_stored(db, chat)).collect();
        if now.iter().map(|m| m.len()).sum::<usize>() == PROCESSES {
            return now;
        }
        assert!(std::time::Instant::now() < deadline, "the appenders never all appended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Waits for the appending processes to end, failing the test with the stderr of one that failed.
fn all_succeed(appenders: Vec<std::process::Child>) {
    for child in appenders {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "an appender failed: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn concurrency_child() {
    let Ok(spec) = std::env::var("SESSIONDB_CONCURRENCY_CHILD") else { return };
    let (db, p) = spec.split_once('|').unwrap();
    let p: usize = p.parse().unwrap();
    let store = sessiondb::store::Store::open(std::path::Path::new(db)).unwrap();
    for n in 0..appends() {
        let message = sessiondb::model::Message::new(sessiondb::model::Role::User, format!("p{p} {n}"), Some("2026-12-01T10:00:00".into()));
        sessiondb::ops::with_session(&store, conversation_of(p), |s| s.append("main", &message)).unwrap_or_else(|e| panic!("append {n}: {e}"));
    }
}

#[test]
fn eight_processes_appending_lose_and_duplicate_nothing() {
    eight_processes_appending("sqlite");
}

#[test]
fn eight_processes_appending_lose_and_duplicate_nothing_on_postgres() {
    eight_processes_appending("postgres");
}

/// The appending processes, each this test binary again running [`concurrency_child`] on `db`.
fn start_appenders(db: &std::path::Path) -> Vec<std::process::Child> {
    (0..PROCESSES)
        .map(|p| {
            Command::new(std::env::current_exe().unwrap())
                .args(["concurrency::concurrency_child", "--exact", "--nocapture"])
                .env("SESSIONDB_CONCURRENCY_CHILD", format!("{}|{p}", db.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}

fn eight_processes_appending(engine: &str) {
    let work = tempfile::tempdir().unwrap();
    let Some(test_db) = common::TestDb::of(engine, work.path()) else { return };
    let logs = work.path().join("logs");
    let db = test_db.db.clone();
    new_conversations(&db, &logs);
    let started = std::time::Instant::now();
    let appenders = start_appenders(&db);
    // Readers and a syncing process, looping until the appenders are done. If the test fails
    // first, the guard's drop stops them: it kills the loops, since the stop file goes with
    // the temporary directory (a loop that missed it would run on after the test).
    struct Readers {
        stop: std::path::PathBuf,
        children: Vec<std::process::Child>,
    }
    impl Drop for Readers {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.stop, "");
            for child in &mut self.children {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let mut readers = Readers { stop: work.path().join("stop"), children: Vec::new() };
    let mut commands = Vec::new();
    let logs_arg = logs.display().to_string();
    for args in [vec!["list", "--json"], vec!["search", "p3"], vec!["sync", &logs_arg], vec!["stats", "--json"]] {
        let script = "db=\"$1\"; shift; while [ ! -e \"$STOP\" ]; do \"$0\" --db \"$db\" \"$@\" >/dev/null || exit 1; n=$((n+1)); done; echo $n";
        let child = Command::new("sh")
            .args(["-c", script, env!("CARGO_BIN_EXE_sessiondb")])
            .arg(&db)
            .args(&args)
            .env("STOP", &readers.stop)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        readers.children.push(child);
        commands.push(args.join(" "));
    }
    all_succeed(appenders);
    let appending = started.elapsed();
    std::fs::write(&readers.stop, "").unwrap();
    let mut reads = 0;
    for (child, command) in std::mem::take(&mut readers.children).into_iter().zip(&commands) {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("locked"), "`sessiondb {command}`, looping beside the appenders, failed: {err}");
        reads += String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().unwrap_or(0);
    }

    let store = sessiondb::store::Store::open(&db).unwrap();
    let conn = store.connection().unwrap();
    let mut stored_total = 0;
    for chat in CHATS {
        let mut per_process = appends_stored(&db, chat);
        let stored: usize = per_process.values().map(Vec::len).sum();
        for p in (0..PROCESSES).filter(|&p| conversation_of(p) == chat) {
            assert_eq!(per_process.remove(&p).unwrap_or_default(), (0..appends()).collect::<Vec<_>>(), "{chat}: process {p}'s appends, each once, in order");
        }
        assert!(per_process.is_empty(), "{chat}: appends from elsewhere");
        let (lines, last) = test_db.query_pair(
            "SELECT count(*), max(dl.line_no) FROM document_lines dl JOIN documents d ON d.id = dl.document_id
             JOIN conversations c ON c.id = d.conversation_id WHERE c.chat_id = ?1 AND d.path = 'conversation.jsonl'",
            chat,
        );
        assert_eq!(last + 1, lines, "{chat}: positions contiguous");
        let summary = sessiondb::store::queries::conversation_summary(&conn, chat).unwrap();
        assert_eq!(summary.messages as usize, stored, "{chat}: listing totals equal the messages stored");
        stored_total += stored;
        let out = tempfile::tempdir().unwrap();
        run_ok(sessiondb(&db).args(["export", "--to"]).arg(out.path()).arg(chat));
        assert_same_tree(&logs.join(chat), &out.path().join(chat), &[".lock"]);
    }
    assert_eq!(stored_total, PROCESSES * appends());
    test_db.assert_sound("after the appends");
    println!(
        "{engine}: {} appends by {PROCESSES} processes in {:.1} s ({:.0}/s), alongside {reads} list/search/sync/stats runs; lost 0, duplicated 0",
        PROCESSES * appends(),
        appending.as_secs_f64(),
        (PROCESSES * appends()) as f64 / appending.as_secs_f64()
    );
}

/// The contents of `chat`'s main branch in the store at `db`, by appending process: the numbers
/// of its appends, in the order stored.
fn appends_stored(db: &std::path::Path, chat: &str) -> HashMap<usize, Vec<usize>> {
    let store = sessiondb::store::Store::open_existing(db).unwrap();
    let conn = store.connection().unwrap();
    let mut per_process: HashMap<usize, Vec<usize>> = HashMap::new();
    for m in sessiondb::store::queries::branch_messages(&conn, chat, "main").unwrap() {
        let (p, n) = m.content.strip_prefix('p').unwrap().split_once(' ').unwrap();
        per_process.entry(p.parse().unwrap()).or_default().push(n.parse().unwrap());
    }
    per_process
}

/// Issue 36: `sessiondb backup` taken while eight processes append holds every message
/// acknowledged before it began (each process's appends a whole prefix of them, none torn), is
/// a sound store of its own (`doctor`), and restores: opened in place of the store, it syncs the
/// logs root and then holds what the store holds. Nothing is written where the copy goes but
/// the copy (no temporary file left), and an existing file there is replaced only when asked.
#[test]
fn a_backup_taken_while_eight_processes_append_holds_every_acknowledged_message() {
    let work = tempfile::tempdir().unwrap();
    let Some(test_db) = common::TestDb::of("sqlite", work.path()) else { return };
    let logs = work.path().join("logs");
    let db = test_db.db.clone();
    new_conversations(&db, &logs);
    let mut appenders = start_appenders(&db);
    // Once every process has appended, what the store holds is acknowledged: the backup begins.
    let acknowledged = once_all_appended(&db);
    let backups = work.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let copy = backups.join("sessions-copy.db");
    let out = run_ok(sessiondb(&db).args(["backup", "--json"]).arg(&copy));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let still_appending = appenders.iter_mut().map(|c| c.try_wait().unwrap().is_none()).filter(|&running| running).count();
    all_succeed(appenders);
    let entries: Vec<String> = std::fs::read_dir(&backups).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(entries, ["sessions-copy.db"], "only the copy where it goes");
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&copy).unwrap().permissions()) & 0o777, 0o600, "the copy is private");
    let mut copied = 0;
    for (chat, before) in CHATS.iter().zip(&acknowledged) {
        let in_copy = appends_stored(&copy, chat);
        for (p, seen) in before {
            let kept = in_copy.get(p).cloned().unwrap_or_default();
            assert_eq!(kept, (0..kept.len()).collect::<Vec<_>>(), "{chat}: process {p}'s appends in the copy, a whole prefix in order");
            assert!(kept.len() >= seen.len(), "{chat}: process {p} had {} appends acknowledged before the backup, the copy holds {}", seen.len(), kept.len());
        }
        copied += in_copy.values().map(Vec::len).sum::<usize>();
    }
    assert_eq!(report["messages"].as_u64().unwrap() as usize, copied, "{report}");
    assert_eq!(report["conversations"], 4);
    let doctor = run_ok(sessiondb(&copy).arg("doctor"));
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("no problems found"), "{}", String::from_utf8_lossy(&doctor.stdout));
    // Restored: the copy, opened as the store, takes in what was appended after it, and then
    // holds what the store holds.
    run_ok(sessiondb(&copy).arg("sync").arg(&logs));
    for chat in CHATS {
        assert_eq!(appends_stored(&copy, chat), appends_stored(&db, chat), "{chat}: the restored copy after a sync, and the store");
    }
    // A second backup to the same path is refused, the copy left as it was; --force replaces it.
    let before = std::fs::read(&copy).unwrap();
    let refused = sessiondb(&db).arg("backup").arg(&copy).output().unwrap();
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--force"), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    run_ok(sessiondb(&db).args(["backup", "--force"]).arg(&copy));
    assert_eq!(appends_stored(&copy, CHATS[0]), appends_stored(&db, CHATS[0]));
    // A link where the copy goes is replaced by the copy, never written through.
    let elsewhere = work.path().join("elsewhere");
    std::fs::write(&elsewhere, "not to be touched").unwrap();
    let planted = backups.join("planted.db");
    std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
    let refused = sessiondb(&db).arg("backup").arg(&planted).output().unwrap();
    assert!(!refused.status.success(), "a link is something there: replaced only with --force");
    run_ok(sessiondb(&db).args(["backup", "--force"]).arg(&planted));
    assert!(!std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink(), "the link replaced by the copy");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "not to be touched");
    println!("backup taken with {still_appending} of {PROCESSES} processes still appending: {copied} messages copied");
}

/// Writes `count` conversations `2026-11-01-{tag}-{i}` of 20 messages of their own text into
/// `logs` (little shared between them: removing them frees pages).
fn write_distinct_conversations(logs: &std::path::Path, tag: &str, count: usize) -> Vec<String> {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ tag.len() as u64;
    let mut word = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        format!("w{:x}", seed % 100_000)
    };
    (0..count)
        .map(|i| {
            let id = format!("2026-11-01-{tag}-{i}");
            let dir = logs.join(&id);
            std::fs::create_dir_all(&dir).unwrap();
            let lines: String = (0..20)
                .map(|j| {
                    let role = if j % 2 == 0 { "user" } else { "assistant" };
                    let text: Vec<String> = (0..80).map(|_| word()).collect();
                    format!("{}\n", serde_json::json!({"role": role, "content": format!("{tag} {i} {j} {}", text.join(" ")), "timestamp": "2026-11-01T10:00:00"}))
                })
                .collect();
            std::fs::write(dir.join("conversation.jsonl"), lines).unwrap();
            id
        })
        .collect()
}

/// Issue 36: `sessiondb compact` run while eight processes append gives the store's free pages
/// back (a store made now is in SQLite's incremental mode: in short steps, no rewrite) and
/// changes nothing else: every append kept, in order, the other conversations exported byte for
/// byte as before, search answering as before, `doctor` clean, the file smaller. `stats --disk`
/// shows the free pages before and none after.
#[test]
fn a_compact_while_eight_processes_append_gives_free_pages_back_and_changes_nothing_else() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("sessions.db");
    let logs = work.path().join("logs");
    let kept = write_distinct_conversations(&logs, "kept", 40);
    let gone = write_distinct_conversations(&logs, "gone", 120);
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let store = sessiondb::store::Store::open_existing(&db).unwrap();
    for id in &gone {
        sessiondb::ops::remove_from_store(&store, id, false).unwrap();
    }
    drop(store);
    let disk = |db: &std::path::Path| -> serde_json::Value { serde_json::from_slice(&run_ok(sessiondb(db).args(["stats", "--disk", "--json"])).stdout).unwrap() };
    let before = disk(&db);
    let free = before["parts"]["free"].as_u64().unwrap();
    assert!(free > 1 << 20, "the removed conversations' pages are free: {before}");
    let exported = |to: &str| {
        let out = work.path().join(to);
        let mut cmd = sessiondb(&db);
        cmd.arg("export").arg("--to").arg(&out);
        cmd.args(&kept);
        run_ok(&mut cmd);
        out
    };
    // What a search finds (its ranks move with what the appends add to the corpus).
    let search = || -> Vec<(String, u64, String)> {
        let found: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "kept", "--json", "-n", "100"])).stdout).unwrap();
        let mut found: Vec<_> = found["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["id"].as_str().unwrap().to_owned(), r["matches"].as_u64().unwrap(), r["snippets"][0]["snippet"].as_str().unwrap().to_owned()))
            .collect();
        found.sort();
        found
    };
    let (exported_before, found_before) = (exported("before"), search());
    let transcripts = std::fs::read_dir(&exported_before).unwrap().filter(|e| e.as_ref().unwrap().path().join("conversation.jsonl").is_file()).count();
    assert_eq!(transcripts, 40);
    let file_before = std::fs::metadata(&db).unwrap().len();
    new_conversations(&db, &logs);
    let appenders = start_appenders(&db);
    // Once every process has appended, the compact begins.
    once_all_appended(&db);
    let report: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["compact", "--json"])).stdout).unwrap();
    all_succeed(appenders);
    assert_eq!(report["rewritten"], false, "a store made now is compacted in steps: {report}");
    assert!(report["steps"].as_u64().unwrap() >= 1 && report["free_before"].as_u64().unwrap() > 1 << 20, "{report}");
    for chat in CHATS {
        for (p, seen) in appends_stored(&db, chat) {
            assert_eq!(seen, (0..appends()).collect::<Vec<_>>(), "{chat}: process {p}'s appends, all of them in order");
        }
    }
    common::tree::assert_same_tree(&exported_before, &exported("after"), &[".lock"]);
    assert_eq!(search(), found_before);
    let doctor = run_ok(sessiondb(&db).arg("doctor"));
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("no problems found"), "{}", String::from_utf8_lossy(&doctor.stdout));
    // What the appends took came from the free pages; what was left free is given back.
    run_ok(sessiondb(&db).arg("compact"));
    let after = disk(&db);
    assert_eq!(after["parts"]["free"], 0, "{after}");
    assert!(std::fs::metadata(&db).unwrap().len() < file_before, "the file is smaller than before the compact");
}
