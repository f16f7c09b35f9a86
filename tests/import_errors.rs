//! A bad conversation directory fails alone, with a clear error, and leaves nothing of itself in
//! the store; every other conversation imports normally.

use crate::common;

use std::fs;
use std::path::Path;

use common::{run_ok, sessiondb};

fn good(logs: &Path, id: &str) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("conversation.jsonl"), "{\"role\": \"user\", \"content\": \"hello\", \"timestamp\": \"2026-01-01T00:00:00\"}\n").unwrap();
}

/// Imports `logs`, expecting failure; returns (stderr, listed chat ids).
fn import_expecting_failure(logs: &Path) -> (String, Vec<String>) {
    let db = logs.parent().unwrap().join("db");
    let out = sessiondb(&db).arg("import").arg(logs).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "import should report failure");
    let list = run_ok(sessiondb(&db).args(["list", "--json", "--all"]));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&list.stdout).unwrap();
    let ids = rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    (String::from_utf8_lossy(&out.stderr).into_owned(), ids)
}

#[test]
fn invalid_chat_ids_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    good(&logs, "fine");
    for bad in [" leading-space", "ctrl\u{1}char", "dots..inside"] {
        good(&logs, bad);
    }
    let (stderr, ids) = import_expecting_failure(&logs);
    assert_eq!(ids, ["fine"]);
    assert!(stderr.contains("invalid chat id: conversation name cannot start or end with whitespace"), "{stderr}");
    assert!(stderr.contains("cannot contain control characters"), "{stderr}");
    assert!(stderr.contains("single path component"), "{stderr}");
}

#[test]
fn symlinks_leading_outside_where_a_file_is_expected_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    good(&logs, "fine");
    let outside = work.path().join("secret.jsonl");
    fs::write(&outside, "{\"role\": \"user\", \"content\": \"do not read me\"}\n").unwrap();
    let evil = logs.join("evil");
    fs::create_dir_all(evil.join("files")).unwrap();
    std::os::unix::fs::symlink(&outside, evil.join("conversation.jsonl")).unwrap();
    let evil2 = logs.join("evil2");
    good(&logs, "evil2");
    fs::create_dir_all(evil2.join("files")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", evil2.join("files/0123456789abcdef.txt")).unwrap();
    let evil3 = logs.join("evil3");
    good(&logs, "evil3");
    fs::create_dir_all(evil3.join("branches")).unwrap();
    std::os::unix::fs::symlink("../../fine/conversation.jsonl", evil3.join("branches/x.jsonl")).unwrap();

    let (stderr, ids) = import_expecting_failure(&logs);
    assert_eq!(ids, ["fine"]);
    for (dir, target) in [("evil/conversation.jsonl", outside.display().to_string()), ("evil2/files/0123456789abcdef.txt", "/etc/passwd".into())] {
        assert!(stderr.contains(&format!("{}: symbolic link to \"{}\" leads outside", logs.join(dir).display(), target)), "{stderr}");
    }
    assert!(stderr.contains("evil3/branches/x.jsonl"), "{stderr}");
}

#[test]
fn a_workspace_symlink_anywhere_is_kept_as_a_link() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        good(&logs, "with-workspace");
        std::os::unix::fs::symlink("/", logs.join("with-workspace/workspace")).unwrap();
        run_ok(sessiondb(db).arg("import").arg(&logs));
        run_ok(sessiondb(db).arg("export").arg("--to").arg(work.join("out")));
        assert_eq!(fs::read_link(work.join("out/with-workspace/workspace")).unwrap(), Path::new("/"));
    })
}

#[test]
fn special_files_fail_the_conversation() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    good(&logs, "fine");
    good(&logs, "has-fifo");
    let fifo = logs.join("has-fifo/queue");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let (stderr, ids) = import_expecting_failure(&logs);
    assert_eq!(ids, ["fine"]);
    assert!(stderr.contains(&format!("{}: not a regular file, directory or symlink", fifo.display())), "{stderr}");
}

#[test]
fn a_failed_reimport_keeps_the_previous_copy() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        good(&logs, "chat");
        run_ok(sessiondb(db).arg("import").arg(&logs));
        // Now break it: a FIFO appears. The re-import fails; the first copy must remain whole.
        let status = std::process::Command::new("mkfifo").arg(logs.join("chat/zz-fifo")).status().unwrap();
        assert!(status.success());
        let out = sessiondb(db).arg("import").arg(&logs).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let show = run_ok(sessiondb(db).args(["show", "chat", "--json"]));
        assert_eq!(String::from_utf8_lossy(&show.stdout), "{\"role\": \"user\", \"content\": \"hello\", \"timestamp\": \"2026-01-01T00:00:00\"}\n");
    })
}
