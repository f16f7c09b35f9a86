//! `sessiondb import` then `sessiondb export` reproduces gptme directories exactly: bytes,
//! modes, modification times, symlinks and empty directories (gptme's `.lock` aside), on
//! every engine ([`common::databases`]).

use crate::common;

use std::fs;
use std::path::Path;

use common::tree::copy_tree;

use common::tree::assert_same_tree;
use common::{fixtures, run_ok, sessiondb};

fn roundtrip(logs: &Path) {
    let work = tempfile::tempdir().unwrap();
    for test_db in common::databases(work.path()) {
        let db = &test_db.db;
        let out = work.path().join(format!("out-{}", test_db.engine));
        let import = run_ok(sessiondb(db).arg("import").arg(logs).arg("--json"));
        let summary: serde_json::Value = serde_json::from_slice(&import.stdout).unwrap();
        assert_eq!(summary["failed"], 0, "{}: {summary}", test_db.engine);
        run_ok(sessiondb(db).arg("export").arg("--to").arg(&out));
        assert_same_tree(logs, &out, &[".lock"]);

        // Importing the same directories again changes nothing.
        let again = run_ok(sessiondb(db).arg("import").arg(logs).arg("--json"));
        let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
        assert_eq!(again["conversations"], 0, "{}: {again}", test_db.engine);
        assert_eq!(again["unchanged"], summary["conversations"], "{}: {again}", test_db.engine);
    }
}

#[test]
fn committed_fixtures_roundtrip_exactly() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    copy_tree(&fixtures(), &logs);
    roundtrip(&logs);
}

/// CI regenerates the fixtures with the current gptme and points this at them.
#[test]
fn regenerated_fixtures_roundtrip_exactly() {
    let (dir, _guard) = common::regenerated_fixtures();
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    copy_tree(Path::new(&dir), &logs);
    roundtrip(&logs);
}

#[test]
fn edge_shapes_roundtrip() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let conv = logs.join("edge-shapes");
    fs::create_dir_all(conv.join("branches")).unwrap();
    fs::create_dir_all(conv.join("deep/er/empty")).unwrap();
    // Empty file, cut-off last line, CRLF, invalid UTF-8, NUL bytes, a lone surrogate escape.
    fs::write(conv.join("conversation.jsonl"), b"").unwrap();
    fs::write(conv.join("branches/cut.jsonl"), b"{\"role\": \"user\", \"content\": \"a\"}\n{\"role\": \"us").unwrap();
    fs::write(
        conv.join("branches/odd.jsonl"),
        b"{\"role\": \"user\", \"content\": \"crlf\"}\r\n\xff\xfe\n\0\0\n{\"role\": \"user\", \"content\": \"\\ud800\"}\n\n\n",
    )
    .unwrap();
    fs::write(conv.join("events.jsonl"), b"{\"seq\": 1}\n\n").unwrap();
    fs::write(conv.join("binary.bin"), (0..=255u8).collect::<Vec<_>>()).unwrap();
    std::os::unix::fs::symlink("/nonexistent/target", conv.join("workspace")).unwrap();
    std::os::unix::fs::symlink("binary.bin", conv.join("alias")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(conv.join("binary.bin"), fs::Permissions::from_mode(0o751)).unwrap();
    fs::set_permissions(conv.join("deep"), fs::Permissions::from_mode(0o700)).unwrap();
    let old = filetime::FileTime::from_unix_time(1_000_000_000, 123);
    filetime::set_file_mtime(conv.join("branches/odd.jsonl"), old).unwrap();
    filetime::set_file_mtime(conv.join("deep/er"), old).unwrap();
    roundtrip(&logs);
}

#[test]
fn malformed_lines_are_reported_with_path_and_line() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let conv = logs.join("bad-lines");
    fs::create_dir_all(&conv).unwrap();
    fs::write(conv.join("conversation.jsonl"), "{\"role\": \"user\", \"content\": \"ok\"}\n{not json}\n[1, 2]\n").unwrap();
    let db = work.path().join("db");
    let out = run_ok(sessiondb(&db).arg("import").arg(&logs));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = conv.join("conversation.jsonl");
    assert!(stderr.contains(&format!("{}:2: invalid JSON", file.display())), "{stderr}");
    assert!(stderr.contains(&format!("{}:3: expected a JSON object", file.display())), "{stderr}");
}
