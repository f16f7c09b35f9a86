//! `sessiondb sync`: real gptme and sessiondb taking turns on one logs root, incremental reads,
//! half-written lines, conflicts, deleted directories, locks, dry runs and concurrent
//! processes.

use crate::common;

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use common::{gptme_python, run_ok, sessiondb, store_contents, tool, tree::assert_same_tree, LiveGptme};
use serde_json::Value;

struct Root {
    _temp: tempfile::TempDir,
    logs: PathBuf,
    db: PathBuf,
    home: PathBuf,
    /// "sqlite" or "postgres" ([`roots_with_fixtures`]).
    engine: &'static str,
    /// The PostgreSQL database `db` names, dropped with the root.
    _server: Option<common::TestDb>,
}

fn root_with_fixtures() -> Root {
    let temp = tempfile::tempdir().unwrap();
    let logs = temp.path().join("logs");
    run_ok(Command::new("cp").arg("-a").arg(common::fixtures()).arg(&logs));
    let home = temp.path().join("home");
    fs::create_dir(&home).unwrap();
    Root { db: temp.path().join("db.sqlite"), logs, home, _temp: temp, engine: "sqlite", _server: None }
}

/// A fixtures root on each engine: one with an SQLite file, one with a fresh PostgreSQL
/// database (unless PostgreSQL is left out: [`common::postgres_server`]).
fn roots_with_fixtures() -> Vec<Root> {
    let mut roots = vec![root_with_fixtures()];
    if let Some(server) = common::postgres_db() {
        let mut root = root_with_fixtures();
        root.db = server.db.clone();
        root.engine = server.engine;
        root._server = Some(server);
        roots.push(root);
    }
    roots
}

impl Root {
    fn sessiondb(&self) -> Command {
        let mut cmd = sessiondb(&self.db);
        cmd.env("GPTME_LOGS_HOME", &self.logs).env("HOME", &self.home);
        cmd
    }

    fn sync(&self) -> Value {
        let out = run_ok(self.sessiondb().arg("sync").arg(&self.logs).arg("--json"));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Runs a gptme_ops.py script (real gptme's LogManager) on the logs root.
    fn gptme(&self, script: Value) {
        let path = self.home.join("script.json");
        fs::write(&path, script.to_string()).unwrap();
        run_ok(Command::new(gptme_python()).arg(tool("gptme_ops.py")).arg(&self.logs).arg(&path));
    }

    fn store(&self) -> sessiondb::store::Store {
        sessiondb::store::Store::open(&self.db).unwrap()
    }
}

fn user(content: &str) -> Value {
    serde_json::json!({"role": "user", "content": content, "timestamp": "2026-12-01T10:00:00+00:00"})
}

/// The store's copy of a conversation, written out, equals its directory (gptme's `.lock`
/// aside, which holds a process id).
fn assert_store_matches_directory(root: &Root, chat_id: &str) {
    let out = tempfile::tempdir().unwrap();
    run_ok(root.sessiondb().args(["export", "--to"]).arg(out.path()).arg(chat_id));
    assert_same_tree(&root.logs.join(chat_id), &out.path().join(chat_id), &[".lock"]);
}

fn conflicts(report: &Value) -> Vec<(String, String, String)> {
    report["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["chat_id"].as_str().unwrap().into(), c["path"].as_str().unwrap().into(), c["kept_as"].as_str().unwrap_or("").into()))
        .collect()
}

#[test]
fn gptme_and_sessiondb_taking_turns_lose_nothing() {
    for root in roots_with_fixtures() {
        eprintln!("on {}", root.engine);
        let chat = "2026-12-01-sync-turns";
        let first = root.sync();
        assert_eq!(first["ingest"]["new_conversations"], 18);

        // gptme: a new conversation, appends, an edit, an undo, a branch.
        root.gptme(serde_json::json!([
            {"op": "new", "id": chat},
            {"op": "append", "id": chat, "role": "user", "content": "u1", "timestamp": "2026-12-01T10:00:00+00:00"},
            {"op": "append", "id": chat, "role": "assistant", "content": "u2", "timestamp": "2026-12-01T10:00:01+00:00"},
            {"op": "append", "id": chat, "role": "user", "content": "u3", "timestamp": "2026-12-01T10:00:02+00:00"},
            {"op": "edit", "id": chat, "messages": [user("u1"), user("e1")]},
            {"op": "append", "id": chat, "role": "user", "content": "u4", "timestamp": "2026-12-01T10:00:03+00:00"},
            {"op": "undo", "id": chat, "n": 1},
            {"op": "branch", "id": chat, "name": "side"},
            {"op": "append", "id": chat, "branch": "side", "role": "user", "content": "s1", "timestamp": "2026-12-01T10:00:04+00:00"},
        ]));
        let report = root.sync();
        assert_eq!(report["ingest"]["new_conversations"], 1, "{report}");
        assert!(conflicts(&report).is_empty());
        assert_store_matches_directory(&root, chat);

        // sessiondb writes through; gptme loads what it wrote and appends again.
        run_ok(root.sessiondb().args(["append", chat, "--role", "user", "--content", "sd1"]));
        run_ok(root.sessiondb().args(["append", chat, "--branch", "side", "--role", "user", "--content", "sd2"]));
        root.gptme(serde_json::json!([{"op": "append", "id": chat, "role": "assistant", "content": "g1", "timestamp": "2026-12-01T10:00:05+00:00"}]));
        let report = root.sync();
        assert_eq!(report["ingest"]["conversations"], 1, "{report}");
        assert_eq!(report["ingest"]["messages"], 1, "only gptme's new message is new to the store: {report}");
        assert_store_matches_directory(&root, chat);

        // Both sides change main: sessiondb queues an append, gptme appends meanwhile.
        run_ok(root.sessiondb().args(["append", chat, "--queue", "--role", "user", "--content", "sq1"]));
        assert!(!common::transcript_contents(&root.logs.join(chat)).contains("sq1"), "a queued change waits for sync");
        root.gptme(serde_json::json!([{"op": "append", "id": chat, "role": "user", "content": "g2", "timestamp": "2026-12-01T10:00:06+00:00"}]));
        let report = root.sync();
        let found = conflicts(&report);
        assert_eq!(
            found,
            vec![
                (chat.into(), "conversation.jsonl".into(), "branches/main-conflict-1.jsonl".into()),
                (chat.into(), "events.jsonl".into(), "branches/main-conflict-1/events.jsonl".into()),
            ],
            "{report}"
        );
        let main: Vec<String> = fs::read_to_string(root.logs.join(chat).join("conversation.jsonl")).unwrap().lines().map(str::to_owned).collect();
        assert!(main.last().unwrap().contains("\"g2\""), "the directory's version stays the branch");
        let kept = fs::read_to_string(root.logs.join(chat).join("branches/main-conflict-1.jsonl")).unwrap();
        assert!(kept.lines().last().unwrap().contains("\"sq1\""), "the store's version is kept: {kept}");
        assert_store_matches_directory(&root, chat);

        // Both sides edit the same branch: a queued undo against gptme's edit of `side`.
        run_ok(root.sessiondb().args(["undo", chat, "--branch", "side", "--queue"]));
        root.gptme(serde_json::json!([{"op": "edit", "id": chat, "branch": "side", "messages": [user("u1"), user("side edited by gptme")]}]));
        let report = root.sync();
        let found = conflicts(&report);
        assert!(found.iter().any(|(_, path, kept)| path == "branches/side.jsonl" && kept == "branches/side-conflict-1.jsonl"), "{report}");
        assert_store_matches_directory(&root, chat);

        // A further pass finds nothing to do, and every acknowledged message is on both sides.
        let report = root.sync();
        assert_eq!(report["ingest"]["conversations"], 0, "{report}");
        assert_eq!(report["materialise"]["conversations"], 0, "{report}");
        let acknowledged = ["u1", "u2", "u3", "e1", "u4", "s1", "sd1", "sd2", "g1", "sq1", "g2", "side edited by gptme"];
        let on_disk = common::transcript_contents(&root.logs.join(chat));
        let in_store = store_contents(&root.store(), chat);
        for m in acknowledged {
            assert!(on_disk.contains(m), "{m} missing from the directory: {on_disk:?}");
            assert!(in_store.contains(m), "{m} missing from the store: {in_store:?}");
        }
        assert_eq!(on_disk, in_store);
        // And real gptme reads every file of the result.
        let out = Command::new(gptme_python()).arg(tool("gptme_check.py")).arg("reads").arg(&root.logs).output().unwrap();
        let check: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(check["ok"], true, "{check}");
    }
}

#[test]
fn appended_lines_are_read_from_the_watermark_and_half_lines_wait() {
    let root = root_with_fixtures();
    let chat = "2026-07-01-basic-chat";
    root.sync();
    let path = root.logs.join(chat).join("conversation.jsonl");
    let line = |content: &str| format!("{{\"role\": \"user\", \"content\": \"{content}\", \"timestamp\": \"2026-12-01T10:00:00\"}}\n");

    // A line gptme is still writing: not taken in until its newline arrives.
    let full = line("quetzal arrives whole");
    let (head, tail) = full.split_at(20);
    fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(head.as_bytes()).unwrap();
    let report = root.sync();
    assert_eq!(report["ingest"]["messages"], 0, "{report}");
    fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(tail.as_bytes()).unwrap();
    let report = root.sync();
    assert_eq!((report["ingest"]["conversations"].as_u64(), report["ingest"]["messages"].as_u64()), (Some(1), Some(1)), "{report}");
    let hits = run_ok(root.sessiondb().args(["search", "quetzal", "--json"]));
    let hits: Value = serde_json::from_slice(&hits.stdout).unwrap();
    assert_eq!(hits["results"].as_array().unwrap().len(), 1, "{hits}");
    assert_store_matches_directory(&root, chat);

    // Only the new bytes are read: a change before the watermark that keeps the inode, the size
    // and the last 4 KiB is not looked at again (gptme never writes so; it rewrites through a
    // new file), which shows the reread did not happen.
    let long = root.logs.join("2026-07-07-long-conversation/conversation.jsonl");
    let mut bytes = fs::read(&long).unwrap();
    assert!(bytes.len() > 3 * 4096);
    let at = bytes.iter().position(|&b| b == b':').unwrap() + 3;
    bytes[at] = if bytes[at] == b'x' { b'y' } else { b'x' };
    let mut f = fs::OpenOptions::new().write(true).open(&long).unwrap();
    f.write_all(&bytes).unwrap();
    f.write_all(line("second append").as_bytes()).unwrap();
    drop(f);
    let report = root.sync();
    assert_eq!(report["ingest"]["messages"], 1, "only the appended line is new: {report}");
    let stored = store_contents(&root.store(), "2026-07-07-long-conversation");
    assert!(stored.contains("second append"));

    // A rewrite through a new file (as gptme's edit and undo write) is read again whole.
    let rewritten = root.logs.join(chat).join("rewrite.tmp");
    fs::write(&rewritten, line("only line after a rewrite")).unwrap();
    fs::rename(&rewritten, &path).unwrap();
    let report = root.sync();
    assert_eq!(report["ingest"]["conversations"], 1, "{report}");
    let conn = root.store().connection().unwrap();
    let main = sessiondb::store::queries::branch_messages(&conn, chat, "main").unwrap();
    assert_eq!(main.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["only line after a rewrite"]);
    drop(conn);
    assert_store_matches_directory(&root, chat);
}

#[test]
fn deleted_directories_are_marked_not_purged() {
    for root in roots_with_fixtures() {
        eprintln!("on {}", root.engine);
        let chat = "2026-07-09-named-chat";
        root.sync();
        let aside = root.home.join("aside");
        fs::rename(root.logs.join(chat), &aside).unwrap();
        let report = root.sync();
        assert_eq!(report["ingest"]["deleted"], 1, "{report}");
        let list = String::from_utf8(run_ok(root.sessiondb().args(["list", "--all", "--json"])).stdout).unwrap();
        assert!(!list.contains(chat), "a deleted conversation is not listed");
        run_ok(root.sessiondb().args(["show", chat])); // but it is still there
        assert_eq!(root.sync()["ingest"]["deleted"], 0, "marked once");

        fs::rename(&aside, root.logs.join(chat)).unwrap();
        root.sync();
        let list = String::from_utf8(run_ok(root.sessiondb().args(["list", "--all", "--json"])).stdout).unwrap();
        assert!(list.contains(chat), "back when the directory is back");

        fs::rename(root.logs.join(chat), &aside).unwrap();
        root.sync();
        run_ok(root.sessiondb().args(["rm", "--yes", chat]));
        assert!(!root.sessiondb().args(["show", chat]).output().unwrap().status.success(), "rm purges it");
    }
}

#[test]
fn dry_run_changes_nothing() {
    for root in roots_with_fixtures() {
        eprintln!("on {}", root.engine);
        let chat = "2026-07-01-basic-chat";
        root.sync();
        run_ok(root.sessiondb().args(["append", chat, "--queue", "--role", "user", "--content", "queued"]));
        fs::OpenOptions::new()
            .append(true)
            .open(root.logs.join("2026-07-03-message-flags/conversation.jsonl"))
            .unwrap()
            .write_all(b"{\"role\": \"user\", \"content\": \"by hand\", \"timestamp\": \"2026-12-01T10:00:00\"}\n")
            .unwrap();
        let before = common::tree::snapshot(&root.logs, &[]);
        let out = run_ok(root.sessiondb().args(["sync", "--dry-run", "--json"]).arg(&root.logs));
        let dry: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(common::tree::snapshot(&root.logs, &[]), before, "the directories are untouched");
        assert_eq!(dry["materialise"]["messages"], 1, "{dry}");
        assert_eq!(dry["ingest"]["messages"], 1, "{dry}");
        let real = root.sync();
        assert_eq!(real["ingest"], dry["ingest"], "the dry run reported what the sync did");
        assert_eq!(real["materialise"], dry["materialise"]);
    }
}

#[test]
fn a_conversation_gptme_holds_is_read_but_never_written() {
    for root in roots_with_fixtures() {
        eprintln!("on {}", root.engine);
        let chat = "2026-07-01-basic-chat";
        let other = "2026-07-04-attachments";
        root.sync();
        let gptme = LiveGptme::hold(&root.logs.join(other), &root.logs, &root.home);
        let held = LiveGptme::hold(&root.logs.join(chat), &root.logs, &root.home);
        run_ok(root.sessiondb().args(["append", chat, "--queue", "--role", "user", "--content", "waits for gptme to close"]));
        let refused = root.sessiondb().args(["append", chat, "--role", "user", "--content", "x"]).output().unwrap();
        assert!(!refused.status.success(), "written through only when gptme lets go");
        let before = fs::read(root.logs.join(chat).join("conversation.jsonl")).unwrap();
        // While held, gptme's own appends are still taken in (here: written by hand, as gptme would).
        fs::OpenOptions::new()
            .append(true)
            .open(root.logs.join(other).join("conversation.jsonl"))
            .unwrap()
            .write_all(b"{\"role\": \"user\", \"content\": \"gptme wrote this\", \"timestamp\": \"2026-12-01T10:00:00\"}\n")
            .unwrap();
        let report = root.sync();
        assert_eq!(report["materialise"]["skipped_locked"], 1, "{report}");
        assert_eq!(report["ingest"]["messages"], 1, "{report}");
        assert_eq!(fs::read(root.logs.join(chat).join("conversation.jsonl")).unwrap(), before, "never written while held");
        drop(held);
        drop(gptme);
        let report = root.sync();
        assert_eq!(report["materialise"]["conversations"], 1, "{report}");
        assert!(common::transcript_contents(&root.logs.join(chat)).contains("waits for gptme to close"));
        assert_store_matches_directory(&root, chat);
    }
}

#[test]
fn an_operation_refused_because_gptme_holds_the_conversation_suggests_queue() {
    let root = root_with_fixtures();
    let chat = "2026-07-01-basic-chat";
    root.sync();
    let _held = LiveGptme::hold(&root.logs.join(chat), &root.logs, &root.home);
    let out = root.sessiondb().args(["append", chat, "--role", "user", "--content", "x"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--queue") && err.contains("in use by gptme"), "{err}");
    run_ok(root.sessiondb().args(["append", chat, "--queue", "--role", "user", "--content", "x"]));
}

/// Runs `sessiondb ARGS` `times` times in a row in a child process, stopping at the first
/// failure; stderr is kept.
fn repeat(root: &Root, times: u32, args: &[String]) -> std::process::Child {
    let script = format!("db=\"$1\"; shift; for n in $(seq 1 {times}); do \"$0\" --db \"$db\" \"$@\" >/dev/null || exit 1; done");
    Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_sessiondb")])
        .arg(&root.db)
        .args(args)
        .env("GPTME_LOGS_HOME", &root.logs)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn concurrent_processes_never_report_a_locked_database() {
    for root in roots_with_fixtures() {
        eprintln!("on {}", root.engine);
        root.sync();
        let chats = ["2026-07-01-basic-chat", "2026-07-03-message-flags", "2026-07-09-named-chat"];
        let writers = |i: usize| if i == 0 { 2 } else { 1 }; // two appenders share the first
        const APPENDS: u32 = 15;
        let mut children = Vec::new();
        for (i, chat) in chats.iter().enumerate() {
            for k in 0..writers(i) {
                // Each append's content is numbered by the shell loop: "c<k> <n>".
                let script = format!(
                    "db=\"$1\"; for n in $(seq 1 {APPENDS}); do \"$0\" --db \"$db\" append {chat} --role user --content \"c{k} $n\" >/dev/null || exit 1; done"
                );
                let child =
                    Command::new("sh").args(["-c", &script, env!("CARGO_BIN_EXE_sessiondb")]).arg(&root.db).stderr(std::process::Stdio::piped()).spawn().unwrap();
                children.push(child);
            }
        }
        let logs = root.logs.display().to_string();
        for args in [vec!["sync", &logs], vec!["list", "--json"], vec!["search", "c0"]] {
            children.push(repeat(&root, 10, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
        }
        for child in children {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && !err.contains("locked"), "a process failed: {err}");
        }
        let report = root.sync();
        assert_eq!(report["ingest"]["messages"], 0, "the store already held every append: {report}");
        let conn = root.store().connection().unwrap();
        for (i, chat) in chats.iter().enumerate() {
            let main = sessiondb::store::queries::branch_messages(&conn, chat, "main").unwrap();
            let contents: Vec<&str> = main.iter().map(|m| m.content.as_str()).collect();
            for k in 0..writers(i) {
                let mine: Vec<String> = contents.iter().filter(|c| c.starts_with(&format!("c{k} "))).map(|c| c.to_string()).collect();
                let expected: Vec<String> = (1..=APPENDS).map(|n| format!("c{k} {n}")).collect();
                assert_eq!(mine, expected, "{chat}: each append once, in order");
            }
            let summary = sessiondb::store::queries::conversation_summary(&conn, chat).unwrap();
            assert_eq!(summary.messages as usize, main.len(), "{chat}: listing totals equal the messages stored");
        }
    }
}

#[test]
fn lines_gptme_appends_after_a_compaction_keep_their_place() {
    // sessiondb compacts the event log in place at its 50th event (as gptme does): the lines
    // left keep their numbers, and lines appended after them must still come after them.
    let root = root_with_fixtures();
    let chat = "2026-12-01-compacted";
    run_ok(root.sessiondb().args(["new", chat, "--logs-dir"]).arg(&root.logs));
    for i in 0..52 {
        run_ok(root.sessiondb().args(["append", chat, "--role", "user", "--content", &format!("m{i}")]));
    }
    root.sync();
    root.gptme(serde_json::json!([{"op": "append", "id": chat, "role": "user", "content": "after the compaction", "timestamp": "2026-12-01T10:00:00+00:00"}]));
    let report = root.sync();
    assert_eq!(report["ingest"]["messages"], 1, "{report}");
    assert_store_matches_directory(&root, chat);
}

#[test]
fn directory_mtimes_stay_true_through_backups_and_debris() {
    let root = root_with_fixtures();
    run_ok(root.sessiondb().arg("import").arg(&root.logs));
    let chat = "2026-07-05-branches";
    // An edit replaces conversation.jsonl, keeping the old one as a backup until it commits.
    let toml = root.home.join("edit.toml");
    fs::write(&toml, "[[messages]]\nrole = \"user\"\ncontent = \"edited\"\ntimestamp = \"2026-12-01T10:00:00\"\n").unwrap();
    run_ok(root.sessiondb().args(["edit", chat, "--toml"]).arg(&toml));
    assert_store_matches_directory(&root, chat);
    // What a killed writer leaves behind: the next sync removes it under the lock, which
    // moves the directory's mtime after the pass has looked at the directory.
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(root.logs.join(chat).join("branches/.sessiondb-tmp-killed"), "half").unwrap();
    root.sync();
    assert!(!root.logs.join(chat).join("branches/.sessiondb-tmp-killed").exists());
    assert_store_matches_directory(&root, chat);
}

/// A directory whose files came and went, leaving the conversation as it was: the sync finds
/// nothing to read, and records the directory's new mtime (read with every other directory's
/// at the start of the pass), so that export gives it back.
#[test]
fn a_directory_whose_files_came_and_went_keeps_its_new_mtime() {
    let root = root_with_fixtures();
    run_ok(root.sessiondb().arg("import").arg(&root.logs));
    let chat = "2026-07-05-branches";
    std::thread::sleep(std::time::Duration::from_millis(20));
    let passing = root.logs.join(chat).join("branches/passing-through");
    fs::write(&passing, "here a moment").unwrap();
    fs::remove_file(&passing).unwrap();
    let report = root.sync();
    assert_eq!(report["ingest"]["messages"], 0, "{report}");
    assert_store_matches_directory(&root, chat);
    // And again, with nothing moved since: still the same.
    root.sync();
    assert_store_matches_directory(&root, chat);
}

/// The documents of a conversation as the store keeps them: (name, lines borrowed, own rows).
fn line_sharing(root: &Root, chat: &str) -> Vec<(String, i64, i64)> {
    let conn = rusqlite::Connection::open(&root.db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT d.name, d.base_len, (SELECT count(*) FROM document_lines dl WHERE dl.document_id = d.id)
             FROM documents d JOIN conversations c ON c.id = d.conversation_id WHERE c.chat_id = ?1 AND d.kind = 'branch' ORDER BY d.name",
        )
        .unwrap();
    let rows = stmt.query_map([chat], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// An undo's backup borrows the lines it shares with its branch (schema 0010) instead of
/// copying them; whatever then happens to the branch — more undos cutting below what the
/// backup borrows, an append, an undo of the backup itself, an edit replacing the branch,
/// gptme rewriting it, removing the conversation — every backup reads back exactly as its file,
/// doctor finds nothing wrong, and gptme reads every file.
#[test]
fn undo_backups_share_lines_and_survive_whatever_their_branch_goes_through() {
    let root = root_with_fixtures();
    let chat = "2026-12-04-shared-backups";
    let mut script = vec![serde_json::json!({"op": "new", "id": chat})];
    for i in 0..12 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        script
            .push(serde_json::json!({"op": "append", "id": chat, "role": role, "content": format!("m{i}"), "timestamp": format!("2026-12-04T10:00:{i:02}+00:00")}));
    }
    root.gptme(Value::Array(script));
    root.sync();
    let doctor_ok = |when: &str| {
        let out = root.sessiondb().arg("doctor").arg(&root.logs).output().unwrap();
        assert!(out.status.success(), "doctor after {when}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    };

    run_ok(root.sessiondb().args(["undo", chat]));
    assert_eq!(
        line_sharing(&root, chat),
        vec![("main".into(), 0, 11), ("main-undo-0".into(), 11, 1)],
        "the backup borrows the 11 lines it shares with main and holds only the one undone"
    );
    run_ok(root.sessiondb().args(["undo", chat, "-n", "2"]));
    assert_eq!(
        line_sharing(&root, chat),
        vec![("main".into(), 0, 9), ("main-undo-0".into(), 9, 3), ("main-undo-1".into(), 9, 2)],
        "the lines main gave up were handed to the backup that borrowed them"
    );
    assert_store_matches_directory(&root, chat);
    doctor_ok("two undos");

    run_ok(root.sessiondb().args(["append", chat, "--role", "user", "--content", "after the undos"]));
    run_ok(root.sessiondb().args(["undo", chat, "--branch", "main-undo-0", "-n", "4"]));
    assert_store_matches_directory(&root, chat);
    doctor_ok("an undo of a backup");

    // An edit replaces main whole: every line borrowed from it is handed over first.
    let toml = root.home.join("main.toml");
    let out = run_ok(root.sessiondb().args(["export", "--format", "toml", chat]));
    let edited = String::from_utf8(out.stdout).unwrap().replace("after the undos", "after the undos, edited");
    fs::write(&toml, edited).unwrap();
    run_ok(root.sessiondb().args(["edit", chat, "--toml"]).arg(&toml));
    assert!(line_sharing(&root, chat).iter().any(|(name, _, _)| name == "main-edit-0"));
    assert_store_matches_directory(&root, chat);
    doctor_ok("an edit");

    run_ok(root.sessiondb().args(["undo", chat, "-n", "3"]));
    root.gptme(serde_json::json!([{"op": "undo", "id": chat, "n": 1}, {"op": "append", "id": chat, "role": "user", "content": "gptme again", "timestamp": "2026-12-04T11:00:00+00:00"}]));
    root.sync();
    assert_store_matches_directory(&root, chat);
    doctor_ok("gptme rewrote main");
    let out = Command::new(gptme_python()).arg(tool("gptme_check.py")).arg("reads").arg(&root.logs).output().unwrap();
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(check["ok"], true, "{check}");

    run_ok(root.sessiondb().args(["rm", "--yes", "--force", chat]));
    doctor_ok("rm");
}

/// Issue 16, item 5: a last line left unterminated (a write cut short) is not waited for
/// forever. While it is fresh it may be a write in progress and waits (doctor calls the
/// ending in an unfinished line); once its file has not changed for `CUT_LINE_SETTLE`, sync takes it in
/// as it is, as import does, and doctor and sync agree that the directory is in step. If the
/// rest of the line arrives after all, the conversation is read again whole.
#[test]
fn a_cut_last_line_is_taken_in_once_settled_and_doctor_agrees() {
    let root = root_with_fixtures();
    let chat = "2026-07-01-basic-chat";
    root.sync();
    let events = root.logs.join(chat).join("events.jsonl");
    let changed = || -> Vec<String> {
        let out = root.sessiondb().arg("doctor").arg(&root.logs).arg("--json").output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        report["sync"]["changed"].as_array().unwrap_or_else(|| panic!("{report}")).iter().map(|c| c.as_str().unwrap().to_owned()).collect()
    };
    let unfinished = || -> Vec<String> {
        let out = root.sessiondb().arg("doctor").arg(&root.logs).arg("--json").output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["sync"]["unfinished"].as_array().unwrap_or_else(|| panic!("{report}")).iter().map(|c| c.as_str().unwrap().to_owned()).collect()
    };
    let cut = "{\"seq\": 99, \"ts\": \"2026-12-04T10:00:";
    fs::OpenOptions::new().append(true).open(&events).unwrap().write_all(cut.as_bytes()).unwrap();
    root.sync();
    assert!(changed().is_empty(), "a fresh unterminated line may be a write in progress: not a change sync would take");
    assert_eq!(unfinished(), [chat], "doctor names it as what it is");

    let old = filetime::FileTime::from_system_time(std::time::SystemTime::now() - std::time::Duration::from_secs(60));
    filetime::set_file_mtime(&events, old).unwrap();
    let report = root.sync();
    assert_eq!(report["ingest"]["conversations"], 1, "{report}");
    assert!(changed().is_empty() && unfinished().is_empty(), "sync took the cut line in, and doctor agrees");
    assert_store_matches_directory(&root, chat);

    // The rest arrives after all: the line is whole, and so is the store's copy.
    fs::OpenOptions::new().append(true).open(&events).unwrap().write_all(b"00+00:00\", \"type\": \"message_append\", \"payload\": {}}\n").unwrap();
    root.sync();
    assert!(changed().is_empty());
    assert_store_matches_directory(&root, chat);
}

/// Issue 16, item 4: a command that names a conversation first reads in what gptme wrote to it
/// since the last sync: a conversation gptme created (found under gptme's logs root), and new
/// messages of one the store has. A conversation with changes queued keeps the store's copy
/// (its queue goes out with `sync`), and nothing is written to any directory.
#[test]
fn commands_that_name_a_conversation_see_what_gptme_wrote_since_the_last_sync() {
    let root = root_with_fixtures();
    root.sync();
    let fresh = "2026-12-04-created-after-the-sync";
    root.gptme(serde_json::json!([
        {"op": "new", "id": fresh},
        {"op": "append", "id": fresh, "role": "user", "content": "written by gptme alone", "timestamp": "2026-12-04T10:00:00+00:00"},
        {"op": "append", "id": "2026-07-01-basic-chat", "role": "user", "content": "appended by gptme later", "timestamp": "2026-12-04T10:00:01+00:00"},
    ]));
    let before = common::tree::snapshot(&root.logs, &[]);
    let out = run_ok(root.sessiondb().args(["read", fresh]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("written by gptme alone"));
    let out = run_ok(root.sessiondb().args(["show", "2026-07-01-basic-chat"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("appended by gptme later"));
    assert_eq!(common::tree::snapshot(&root.logs, &[]), before, "catching up writes nothing to the logs");
    let out = run_ok(root.sessiondb().args(["export", "--format", "markdown", fresh]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("written by gptme alone"));
    run_ok(root.sessiondb().args(["append", fresh, "--role", "assistant", "--content", "answered by sessiondb"]));
    assert!(common::transcript_contents(&root.logs.join(fresh)).contains("answered by sessiondb"));
    assert_store_matches_directory(&root, fresh);

    // Queued in the store, then changed by gptme: `read` shows the store's copy and leaves the
    // directory alone; `sync` keeps both versions.
    let chat = "2026-07-01-basic-chat";
    run_ok(root.sessiondb().args(["append", chat, "--queue", "--role", "user", "--content", "queued in the store"]));
    root.gptme(serde_json::json!([{"op": "append", "id": chat, "role": "user", "content": "gptme meanwhile", "timestamp": "2026-12-04T10:00:02+00:00"}]));
    let out = run_ok(root.sessiondb().args(["read", chat]));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("queued in the store") && !shown.contains("gptme meanwhile"), "{shown}");
    assert!(!common::transcript_contents(&root.logs.join(chat)).contains("queued in the store"));
    let report = root.sync();
    assert_eq!(conflicts(&report).len(), 2, "{report}");
    let in_store = store_contents(&root.store(), chat);
    assert!(in_store.contains("queued in the store") && in_store.contains("gptme meanwhile"));
}

/// Issue 16, item 4, the other half: `list`, `search` and `stats` cannot show what gptme wrote
/// since the last sync, and say so on stderr (how many, and that `sessiondb sync` brings them
/// in), unless asked for JSON; after the sync they say nothing.
#[test]
fn listings_say_how_many_conversations_the_store_is_behind_on() {
    let root = root_with_fixtures();
    root.sync();
    let note = |args: &[&str]| -> String {
        let out = run_ok(root.sessiondb().args(args));
        String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains("since the last sync")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(note(&["list"]), "", "in step: nothing to say");
    root.gptme(serde_json::json!([
        {"op": "new", "id": "2026-12-04-brand-new"},
        {"op": "append", "id": "2026-12-04-brand-new", "role": "user", "content": "hello", "timestamp": "2026-12-04T10:00:00+00:00"},
        {"op": "append", "id": "2026-07-01-basic-chat", "role": "user", "content": "more", "timestamp": "2026-12-04T10:00:01+00:00"},
    ]));
    for args in [&["list"][..], &["search", "hello"], &["stats"]] {
        let said = note(args);
        assert!(said.contains("1 new and 1 changed conversations") && said.contains("`sessiondb sync` brings them in"), "{args:?}: {said:?}");
    }
    // The note is for people: JSON, a tool's, neither says it nor pays for counting it.
    for args in [&["list", "--json"][..], &["search", "hello", "--json"], &["stats", "--json"]] {
        assert_eq!(note(args), "", "{args:?}");
    }
    root.sync();
    assert_eq!(note(&["list"]), "");
}

/// Catching up costs no write lock when nothing changed: a command that names an unchanged
/// conversation answers at once while another process holds the database's write lock (it
/// would otherwise wait out the 30 s busy timeout).
#[test]
fn catching_up_an_unchanged_conversation_takes_no_write_lock() {
    let root = root_with_fixtures();
    root.sync();
    let conn = rusqlite::Connection::open(&root.db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let out = run_ok(root.sessiondb().args(["read", "2026-07-01-basic-chat"]));
    assert!(!out.stdout.is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "read waited {:?} for the write lock", started.elapsed());
    conn.execute_batch("ROLLBACK").unwrap();
}
