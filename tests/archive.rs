//! `sessiondb archive` and `sessiondb restore`: conversations out of gptme's logs root and back,
//! on the committed fixtures and on logs real gptme wrote, on both engines. gptme no longer
//! lists what is archived and resumes what is restored; the store keeps listing, searching and
//! showing it; the root comes back byte for byte (modes and mtimes); a conversation gptme holds
//! or changed since the last sync stays where it is; and archives and restores killed at random
//! moments never leave a partial directory in the root or one gone without the store's mark.

use crate::common;

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::tree::{assert_same_tree, snapshot};
use common::{gptme_python, run_ok, sessiondb};
use serde_json::Value;

/// Names a comparison of a logs root leaves aside: gptme's process lock (a PID, never kept) and
/// the parking folder directories pass through.
const ASIDE: &[&str] = &[".lock", ".sessiondb-archive"];

fn cmd(db: &Path, logs: &Path, home: &Path) -> Command {
    let mut cmd = sessiondb(db);
    cmd.env("GPTME_LOGS_HOME", logs).env("HOME", home);
    cmd
}

fn json(cmd: &mut Command) -> Value {
    serde_json::from_slice(&run_ok(cmd).stdout).unwrap()
}

/// The chat ids gptme itself lists in `logs` (`get_conversations`, what `gptme-util chats list`
/// and gptme-server read).
fn gptme_lists(logs: &Path, home: &Path) -> BTreeSet<String> {
    let script = "import sys, pathlib\nfrom gptme.logmanager.conversations import get_conversations\n\
                  for c in get_conversations(): print(c.id)\n";
    let out = run_ok(Command::new(gptme_python()).args(["-c", script]).env("GPTME_LOGS_HOME", logs).env("HOME", home));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// The conversations of the store's listing (`list --json --all`), each with whether archived.
fn listed(db: &Path, logs: &Path, home: &Path) -> Vec<(String, bool)> {
    let rows = json(cmd(db, logs, home).args(["list", "--json", "--all"]));
    rows.as_array().unwrap().iter().map(|c| (c["id"].as_str().unwrap().to_owned(), c["archived"] == Value::Bool(true))).collect()
}

/// The conversation directories of `logs`, by name.
fn conversation_dirs(logs: &Path) -> BTreeSet<String> {
    fs::read_dir(logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("conversation.jsonl").exists())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// A copy of `from` at `<work>/logs`, and a home directory beside it.
fn logs_copy(from: &Path, work: &Path) -> (PathBuf, PathBuf) {
    let logs = work.join("logs");
    common::tree::copy_tree(from, &logs);
    let home = work.join("home");
    fs::create_dir_all(&home).unwrap();
    (logs, home)
}

#[test]
fn archived_conversations_leave_gptme_stay_in_the_store_and_come_back_byte_for_byte() {
    let (regenerated, _temp) = common::regenerated_fixtures();
    for original in [common::fixtures(), regenerated] {
        common::on_each_engine(|work, db| archive_and_restore(&original, work, db));
    }
}

fn archive_and_restore(original: &Path, work: &Path, db: &Path) {
    let (logs, home) = logs_copy(original, work);
    run_ok(cmd(db, &logs, &home).arg("import").arg(&logs));
    let all = conversation_dirs(&logs);
    let gptme_before = gptme_lists(&logs, &home);
    assert!(!gptme_before.is_empty());
    // gptme's listing makes a `workspace` directory in each conversation without one: a change
    // the store has not read, which archive would refuse; a sync reads them in.
    run_ok(cmd(db, &logs, &home).arg("sync").arg(&logs));
    // What the root holds: the reference for the round trip.
    let before = snapshot(&logs, ASIDE);
    // Half of them, by id; one of those has a word to search for.
    let chosen: Vec<String> = all.iter().step_by(2).cloned().collect();
    let out = json(cmd(db, &logs, &home).arg("archive").args(&chosen).arg("--json"));
    assert_eq!(out["archived"], chosen.len(), "{out}");
    assert_eq!(out["failed"], 0, "{out}");
    for chat in &chosen {
        assert!(!logs.join(chat).exists(), "{chat} left the root");
    }
    assert!(!logs.join(".sessiondb-archive").exists(), "nothing is left parked");
    // gptme lists fewer; the store still lists every one, the archived marked so.
    let gptme_after = gptme_lists(&logs, &home);
    let expected: BTreeSet<String> = gptme_before.iter().filter(|c| !chosen.contains(c)).cloned().collect();
    assert_eq!(gptme_after, expected, "gptme no longer lists what was archived");
    let listing = listed(db, &logs, &home);
    for chat in &all {
        let archived = listing.iter().find(|(id, _)| id == chat).map(|(_, a)| *a);
        assert_eq!(archived, Some(chosen.contains(chat)), "{chat} is listed, marked archived when it is");
    }
    // A sync takes none of them for deleted; reading and searching go on.
    let sync = json(cmd(db, &logs, &home).arg("sync").arg(&logs).arg("--json"));
    assert_eq!(sync["ingest"]["deleted"], 0, "{sync}");
    assert_eq!(listed(db, &logs, &home), listing, "the listing is the same after a sync");
    let shown = run_ok(cmd(db, &logs, &home).args(["show", "--json"]).arg(&chosen[0]));
    let lines = String::from_utf8(shown.stdout).unwrap();
    assert!(lines.lines().count() > 0 && lines.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()), "an archived conversation is shown");
    // A word of its last message finds it.
    let last: Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    let content = last["content"].as_str().unwrap_or_default();
    if let Some(word) = content.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| w.len() >= 4).max_by_key(|w| w.len()) {
        let found = json(cmd(db, &logs, &home).args(["search", "--json", "--chat"]).arg(&chosen[0]).arg(word));
        assert!(found["total"]["messages"].as_u64().unwrap() >= 1, "{word:?} is found in the archived conversation: {found}");
    }
    // Writing to one is refused, naming restore; nothing is written into the root.
    let refused = cmd(db, &logs, &home).args(["append", "--role", "user", "--content", "hello"]).arg(&chosen[0]).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("sessiondb restore"), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(!logs.join(&chosen[0]).exists());
    // Archiving them again does nothing; restoring them gives the root back exactly.
    let again = json(cmd(db, &logs, &home).arg("archive").args(&chosen).arg("--json"));
    assert_eq!(again["found"], 0, "{again}");
    let restored = json(cmd(db, &logs, &home).args(["restore", "--all", "--json"]));
    assert_eq!(restored["restored"], chosen.len(), "{restored}");
    assert_eq!(snapshot(&logs, ASIDE), before, "the root is as it was, byte for byte, modes and mtimes");
    assert!(listed(db, &logs, &home).iter().all(|(_, archived)| !archived));
    assert_eq!(gptme_lists(&logs, &home), gptme_before);
    // gptme resumes a restored conversation, and the store reads what it wrote.
    let resumed = &chosen[0];
    let script = "import sys, pathlib\nfrom gptme.logmanager import LogManager\nfrom gptme.message import Message\n\
                  m = LogManager.load(pathlib.Path(sys.argv[1]))\nm.append(Message('user', 'resumed after restore'))\n";
    run_ok(Command::new(gptme_python()).args(["-c", script]).arg(logs.join(resumed)).env("GPTME_LOGS_HOME", &logs).env("HOME", &home));
    run_ok(cmd(db, &logs, &home).arg("sync").arg(&logs));
    let read = run_ok(cmd(db, &logs, &home).args(["read", "--full"]).arg(resumed));
    assert!(String::from_utf8_lossy(&read.stdout).contains("resumed after restore"));
    let out = run_ok(cmd(db, &logs, &home).arg("doctor"));
    assert!(out.status.success());
}

#[test]
fn a_conversation_gptme_holds_or_changed_since_the_last_sync_stays_in_the_root() {
    common::on_each_engine(|work, db| {
        let (logs, home) = logs_copy(&common::fixtures(), work);
        run_ok(cmd(db, &logs, &home).arg("import").arg(&logs));
        let held = "2026-07-01-basic-chat";
        let changed = "2026-07-09-named-chat";
        let added = "2026-07-04-attachments";
        let gptme = common::LiveGptme::hold(&logs.join(held), &logs, &home);
        // gptme appended a message since the last sync (its own line format), and a file
        // appeared in another.
        let mut transcript = fs::OpenOptions::new().append(true).open(logs.join(changed).join("conversation.jsonl")).unwrap();
        writeln!(transcript, r#"{{"role": "user", "content": "written after the sync", "timestamp": "2026-12-01T10:00:00.000001"}}"#).unwrap();
        fs::write(logs.join(added).join("notes.txt"), "new").unwrap();
        let before = snapshot(&logs, ASIDE);
        let out = cmd(db, &logs, &home).arg("archive").args([held, changed, added]).arg("--json").output().unwrap();
        assert_eq!(out.status.code(), Some(1), "refusals fail the command");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["failed"], 3, "{report}");
        let errors: Vec<&str> = report["conversations"].as_array().unwrap().iter().map(|c| c["error"].as_str().unwrap()).collect();
        assert!(errors[0].contains(&format!("process {}", gptme.pid())), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("conversation.jsonl") && e.contains("sessiondb sync")), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("notes.txt") && e.contains("is not in the store")), "{errors:?}");
        assert_eq!(snapshot(&logs, ASIDE), before, "nothing in the root changed");
        assert!(listed(db, &logs, &home).iter().all(|(_, archived)| !archived), "none is marked archived");
        // Once gptme lets go and a sync has read the rest, all three go.
        drop(gptme);
        run_ok(cmd(db, &logs, &home).arg("sync").arg(&logs));
        let out = json(cmd(db, &logs, &home).arg("archive").args([held, changed, added]).arg("--json"));
        assert_eq!(out["archived"], 3, "{out}");
        let restored = json(cmd(db, &logs, &home).args(["restore", "--all", "--json"]));
        assert_eq!(restored["restored"], 3, "{restored}");
        let text = fs::read_to_string(logs.join(changed).join("conversation.jsonl")).unwrap();
        assert!(text.contains("written after the sync"));
        assert_eq!(fs::read_to_string(logs.join(added).join("notes.txt")).unwrap(), "new");
    });
}

#[test]
fn killed_archives_and_restores_never_leave_a_partial_directory_or_lose_one() {
    common::on_each_engine(|work, db| {
        let (logs, home) = logs_copy(&common::fixtures(), work);
        run_ok(cmd(db, &logs, &home).arg("import").arg(&logs));
        let reference = work.join("reference");
        common::tree::copy_tree(&logs, &reference);
        let all = conversation_dirs(&logs);
        // How long a whole run takes here, on this engine: kills land anywhere within it.
        let started = std::time::Instant::now();
        run_ok(cmd(db, &logs, &home).args(["archive", "--all"]));
        run_ok(cmd(db, &logs, &home).args(["restore", "--all"]));
        let span = (started.elapsed().as_micros() as u64 / 2).max(1);
        // Kills that found the root part archived: the moments in between were reached.
        let mut in_between = 0;
        let (kills, mut rng) = common::crash::plan(if db.to_string_lossy().starts_with("postgres") { 20 } else { 40 });
        for kill in 0..kills {
            let way = if rng.next() % 2 == 0 { "archive" } else { "restore" };
            let mut child = cmd(db, &logs, &home).arg(way).arg("--all").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
            std::thread::sleep(Duration::from_micros(rng.next() % span));
            let _ = child.kill();
            let _ = child.wait();
            // Each conversation is whole in the root, or marked archived in the store.
            let listing = listed(db, &logs, &home);
            let out = all.iter().filter(|chat| !logs.join(chat).exists()).count();
            in_between += usize::from(out > 0 && out < all.len());
            for chat in &all {
                let archived = listing.iter().find(|(id, _)| id == chat).map(|(_, a)| *a).unwrap_or_else(|| panic!("kill {kill}: {chat} is listed"));
                if logs.join(chat).exists() {
                    assert_same_tree(&reference.join(chat), &logs.join(chat), ASIDE);
                } else {
                    assert!(archived, "kill {kill} ({way}): {chat} left the root without the store's mark");
                }
            }
        }
        println!("{kills} kills, {in_between} with the root part archived");
        // Finished, both ways: everything out, then everything back as it was.
        run_ok(cmd(db, &logs, &home).args(["archive", "--all"]));
        assert!(conversation_dirs(&logs).is_empty());
        assert!(!logs.join(".sessiondb-archive").exists(), "the parking folder is cleared");
        // What a run killed after its last move leaves parked is cleared by the next, even one
        // with nothing left to move.
        let first = all.iter().next().unwrap();
        let parked = logs.join(".sessiondb-archive").join(format!("{first}.1-2"));
        fs::create_dir_all(parked.parent().unwrap()).unwrap();
        common::tree::copy_tree(&reference.join(first), &parked);
        run_ok(cmd(db, &logs, &home).args(["archive", "--all"]));
        assert!(!logs.join(".sessiondb-archive").exists(), "a run with nothing to move clears the parking folder");
        run_ok(cmd(db, &logs, &home).args(["restore", "--all"]));
        assert_same_tree(&reference, &logs, ASIDE);
        assert!(run_ok(cmd(db, &logs, &home).arg("doctor")).status.success());
    });
}
