//! Hostile logs directories: names, links, sizes and contents chosen to break a naive importer.
//! Each case gets a clear error or is handled; memory stays bounded; nothing outside the logs
//! root is read; the other conversations import normally and round-trip.

use crate::common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use common::{run_measured, run_ok, sessiondb, tree::assert_same_tree};

fn conversation(logs: &Path, id: &str, lines: &[&[u8]]) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend_from_slice(l);
        bytes.push(b'\n');
    }
    fs::write(dir.join("conversation.jsonl"), bytes).unwrap();
}

const GOOD: &[u8] = br#"{"role": "user", "content": "an ordinary message", "timestamp": "2026-12-01T10:00:00"}"#;

/// Imports `logs`, expecting `failed` conversations to fail; checks every other conversation
/// round-trips, and that nothing of /etc/passwd reached the database.
fn import_and_check(logs: &Path, work: &Path, failed: &[&str]) -> (String, u64) {
    let db = work.join("db.sqlite");
    let (code, stderr, rss) = run_measured(sessiondb(&db).arg("import").arg(logs), work);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, i32::from(!failed.is_empty()), "{stderr}");
    for f in failed {
        // Named as people see it: a control character in the name is shown escaped.
        let shown = sessiondb::render::terminal::visible(f);
        assert!(stderr.contains(&*shown), "the failure names {shown}: {stderr}");
    }
    let out = work.join("out");
    run_ok(sessiondb(&db).args(["export", "--to"]).arg(&out));
    for entry in fs::read_dir(logs).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if failed.iter().all(|f| !name.contains(f)) && logs.join(&name).join("conversation.jsonl").exists() {
            assert_same_tree(&logs.join(&name), &out.join(&name), &[".lock"]);
        }
    }
    let passwd = fs::read("/etc/passwd").unwrap();
    let db_bytes = fs::read(&db).unwrap();
    let wal = fs::read(work.join("db.sqlite-wal")).unwrap_or_default();
    let first_line = &passwd[..passwd.iter().position(|&b| b == b'\n').unwrap_or(passwd.len())];
    for bytes in [&db_bytes, &wal] {
        assert!(!bytes.windows(first_line.len()).any(|w| w == first_line), "/etc/passwd was read into the store");
    }
    (stderr, rss)
}

#[test]
fn hostile_names_and_links() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "good", &[GOOD]);
    // A chat id gptme refuses (control character) and one at the file-name limit (255 bytes).
    conversation(&logs, "bad\x01id", &[GOOD]);
    let long = "a".repeat(255);
    conversation(&logs, &long, &[GOOD]);
    // Links out of the logs root where gptme expects files.
    conversation(&logs, "links-out", &[GOOD]);
    fs::create_dir(logs.join("links-out/files")).unwrap();
    symlink("/etc/passwd", logs.join("links-out/files/passwd")).unwrap();
    conversation(&logs, "branch-out", &[GOOD]);
    fs::create_dir(logs.join("branch-out/branches")).unwrap();
    symlink("../../good/conversation.jsonl", logs.join("branch-out/branches/stolen.jsonl")).unwrap();
    // A workspace link loop: kept as links, never followed.
    conversation(&logs, "loop", &[GOOD]);
    symlink("workspace", logs.join("loop/workspace")).unwrap();
    symlink("b", logs.join("loop/a")).unwrap();
    symlink("a", logs.join("loop/b")).unwrap();
    let (stderr, _) = import_and_check(&logs, work.path(), &["bad\x01id", "links-out", "branch-out"]);
    assert!(stderr.contains("invalid chat id"), "{stderr}");
    assert!(stderr.contains("leads outside"), "{stderr}");

    // Chat ids given on the command line are checked before any path is built from them.
    let db = work.path().join("db.sqlite");
    for id in ["../escape", "a/b", "..", &"x".repeat(300)] {
        let out = sessiondb(&db).args(["new", id, "--logs-dir"]).arg(&logs).output().unwrap();
        assert!(!out.status.success(), "{id:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("sessiondb: ") && !err.contains("panicked"), "{err}");
    }
    assert!(!work.path().join("escape").exists() && !logs.join("a").exists());
}

#[test]
fn huge_files_fail_alone_with_bounded_memory() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "good", &[GOOD]);
    // A 2 GiB sparse conversation.jsonl: zeros, no newline at all.
    conversation(&logs, "sparse", &[]);
    fs::OpenOptions::new().write(true).open(logs.join("sparse/conversation.jsonl")).unwrap().set_len(2 << 30).unwrap();
    // A 50 MB line: one long message, which imports and comes back unchanged.
    let content = "0123456789abcdef".repeat(50 << 16);
    let line = format!(r#"{{"role": "assistant", "content": "{content}", "timestamp": "2026-12-01T10:00:00"}}"#);
    conversation(&logs, "long-line", &[GOOD, line.as_bytes()]);
    let (stderr, rss) = import_and_check(&logs, work.path(), &["sparse"]);
    assert!(stderr.contains("longer than 64 MiB"), "{stderr}");
    println!("peak memory of the import: {rss} MiB");
    assert!(rss < 1024, "memory is bounded by the longest line it accepts, not the file: {rss} MiB");
}

#[test]
fn hostile_contents_are_kept_verbatim_and_reported() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let deep = format!(r#"{{"role": "user", "content": "deep", "metadata": {}{}}}"#, "[".repeat(10_000), "]".repeat(10_000));
    let lines: Vec<Vec<u8>> = vec![
        GOOD.to_vec(),
        b"{\"role\": \"user\", \"content\": \"invalid \xff\xfe UTF-8\"}".to_vec(),
        b"{\"role\": \"user\", \"content\": \"nul \x00 byte\"}".to_vec(),
        deep.into_bytes(),
        br#"{"role": "user", "role": "assistant", "content": "duplicate keys", "content": "the last one wins"}"#.to_vec(),
        br#"{"role": "assistant", "content": "huge numbers", "metadata": {"cost": 1e400, "n": 123456789012345678901234567890, "neg": -1e400}}"#.to_vec(),
    ];
    let refs: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
    conversation(&logs, "contents", &refs);
    conversation(&logs, "good", &[GOOD]);
    import_and_check(&logs, work.path(), &[]);
    let db = work.path().join("db.sqlite");
    // gptme's reading of the duplicate keys (the last wins); the numbers do not break statistics.
    let shown = String::from_utf8(run_ok(sessiondb(&db).args(["show", "contents"])).stdout).unwrap();
    assert!(shown.contains("the last one wins"), "{shown}");
    run_ok(sessiondb(&db).args(["stats", "--json"]));
    run_ok(sessiondb(&db).args(["list", "--json"]));
    run_ok(sessiondb(&db).args(["stats", "contents", "--json"]));
    let doctor = run_ok(sessiondb(&db).arg("doctor").arg(&logs));
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("no problems"));
}
