//! Differential tests of the log operations: the same script runs through real gptme's
//! `LogManager` (`tools/oracle/gptme_ops.py`) and through the `sessiondb` binary, and the two
//! conversation directories must be the same file for file, byte for byte — modes and
//! directory layout included — with only the clock masked (events' `ts`).

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use common::tree::{snapshot, Node};
use common::{gptme_python, run_ok, sessiondb, tool};
use serde_json::{json, Value};
use sessiondb::codec::toml_log::messages_to_toml;
use sessiondb::model::{Message, Role};

/// A message for both sides: role, content, timestamp and optional flags.
fn msg(role: &str, content: &str, i: usize) -> Value {
    json!({"role": role, "content": content, "timestamp": format!("2026-07-16T10:{:02}:{:02}.{:06}", i / 60 % 60, i % 60, i * 7 % 1_000_000)})
}

fn to_message(spec: &Value) -> Message {
    let mut m = Message::new(Role::parse(spec["role"].as_str().unwrap()), spec["content"].as_str().unwrap(), spec["timestamp"].as_str().map(str::to_owned));
    m.pinned = spec["pinned"].as_bool().unwrap_or(false);
    m.hide = spec["hide"].as_bool().unwrap_or(false);
    m.ephemeral_ttl = spec["ttl"].as_i64();
    m.call_id = spec["call_id"].as_str().map(str::to_owned);
    if let Some(meta) = spec.get("metadata") {
        m.metadata = Some(sessiondb::codec::json::from_serde(meta));
    }
    m
}

/// Runs one step through the sessiondb binary.
fn sessiondb_step(db: &Path, logs: &Path, work: &Path, step: &Value) {
    let id = step["id"].as_str().unwrap();
    let branch = step["branch"].as_str().unwrap_or("main");
    let mut cmd = sessiondb(db);
    match step["op"].as_str().unwrap() {
        "new" => {
            cmd.args(["new", id, "--logs-dir"]).arg(logs);
        }
        "append" => {
            cmd.args(["append", id, "--branch", branch, "--role", step["role"].as_str().unwrap()]);
            cmd.args(["--content", step["content"].as_str().unwrap(), "--timestamp", step["timestamp"].as_str().unwrap()]);
            if step["pinned"] == true {
                cmd.arg("--pinned");
            }
            if step["hide"] == true {
                cmd.arg("--hide");
            }
            if let Some(ttl) = step["ttl"].as_i64() {
                cmd.args(["--ttl", &ttl.to_string()]);
            }
            if let Some(c) = step["call_id"].as_str() {
                cmd.args(["--call-id", c]);
            }
            if let Some(meta) = step.get("metadata") {
                cmd.args(["--metadata", &meta.to_string()]);
            }
            for f in step["files"].as_array().into_iter().flatten() {
                cmd.args(["--file", f.as_str().unwrap()]);
            }
        }
        "undo" => {
            cmd.args(["undo", id, "--branch", branch, "-n", &step["n"].as_u64().unwrap_or(1).to_string()]);
        }
        "edit" => {
            let messages: Vec<Message> = step["messages"].as_array().unwrap().iter().map(to_message).collect();
            let file = work.join("edit.toml");
            fs::write(&file, messages_to_toml(&messages)).unwrap();
            cmd.args(["edit", id, "--branch", branch, "--toml"]).arg(&file);
        }
        "edit_unchanged" => {
            // What `edit` would be shown, saved back as it is: nothing happens (no backup), which
            // also shows that the export is of what the edit replaces (the view, when one is
            // active): anything else would replace it.
            let file = work.join("unchanged.toml");
            fs::write(&file, run_ok(sessiondb(db).args(["export", "--format", "toml", id, "--branch", branch])).stdout).unwrap();
            cmd.args(["edit", id, "--branch", branch, "--toml"]).arg(&file);
            let out = run_ok(&mut cmd);
            assert_eq!(String::from_utf8_lossy(&out.stdout), "no changes\n");
            return;
        }
        "edit_replace" => {
            let (old, new) = (step["old"].as_str().unwrap(), step["new"].as_str().unwrap());
            cmd.args(["edit", id, "--branch", branch]).env_remove("EDITOR").env("VISUAL", format!("sed -i 's/{old}/{new}/g'"));
        }
        "branch" => {
            cmd.args(["branch", id, step["name"].as_str().unwrap(), "--from", step["from"].as_str().unwrap_or("main")]);
        }
        "view_create" => {
            let messages: Vec<Message> = step["messages"].as_array().unwrap().iter().map(to_message).collect();
            let file = work.join("view.toml");
            fs::write(&file, messages_to_toml(&messages)).unwrap();
            cmd.args(["view", "create", id, step["name"].as_str().unwrap(), "--toml"]).arg(&file);
        }
        "view_use" => {
            cmd.args(["view", "use", id, step["name"].as_str().unwrap()]);
        }
        "view_off" => {
            cmd.args(["view", "off", id]);
        }
        "mark" => {
            cmd.args(["checkpoint", id, step["label"].as_str().unwrap()]);
        }
        "backtrack" => {
            cmd.args(["backtrack", id, step["target"].as_str().unwrap()]);
        }
        "rename" => {
            cmd.args(["rename", id, step["name"].as_str().unwrap()]);
        }
        "fork" => {
            cmd.args(["fork", id, step["new_id"].as_str().unwrap()]);
        }
        "fork_at_turn" => {
            cmd.args(["fork", id, "--at-turn", &step["turn"].to_string(), "--name", step["new_id"].as_str().unwrap()]);
            // as gptme-util chats fork takes it
        }
        other => panic!("unknown op {other}"),
    }
    run_ok(&mut cmd);
}

/// Replaces the value of every `"key": "…"` in `text` with `<key>`.
fn mask_key(text: &str, key: &str) -> String {
    let needle = format!("\"{key}\": \"");
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(&needle) {
        out.push_str(&rest[..i + needle.len()]);
        rest = &rest[i + needle.len()..];
        let end = rest.find('"').unwrap();
        out.push_str(&format!("<{key}>"));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Masks what only the clock decides: events' `ts`, bookmarks' `timestamp`.
fn mask(path: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes).into_owned();
    if path.ends_with("events.jsonl") {
        return mask_key(&text, "ts");
    }
    if path.ends_with("conv-checkpoints.jsonl") {
        return mask_key(&text, "timestamp");
    }
    text
}

fn comparable(root: &Path) -> BTreeMap<String, (String, Option<u32>)> {
    snapshot(root, &[".lock"])
        .into_iter()
        // gptme's listing code, which its rename runs, creates an empty workspace/ in a
        // conversation without config.toml as a side effect of reading; sessiondb does not.
        .filter(|(path, node)| !(path.ends_with("/workspace") && matches!(node, Node::Dir { .. })))
        .map(|(path, node)| {
            let value = match node {
                Node::File { mode, bytes, .. } => (mask(&path, &bytes), Some(mode)),
                Node::Dir { .. } => ("<dir>".into(), None),
                Node::Link { target, .. } => (format!("<link {}>", target.display()), None),
            };
            (path, value)
        })
        .collect()
}

/// Runs `script` both ways and asserts the directories agree.
fn differential(script: &[Value]) {
    differential_masking(script, false)
}

/// Runs `script` through gptme; returns its logs root.
fn run_gptme(script: &[Value], work: &Path) -> std::path::PathBuf {
    let theirs = work.join("gptme/logs");
    fs::create_dir_all(&theirs).unwrap();
    let script_file = work.join("script.json");
    fs::write(&script_file, serde_json::to_string(script).unwrap()).unwrap();
    let out = Command::new(gptme_python()).arg(tool("gptme_ops.py")).arg(&theirs).arg(&script_file).output().unwrap();
    assert!(out.status.success(), "gptme failed: {}", String::from_utf8_lossy(&out.stderr));
    theirs
}

/// Runs `script` through sessiondb on `db`; returns its logs root.
fn run_sessiondb(script: &[Value], work: &Path, db: &common::TestDb) -> std::path::PathBuf {
    let ours = work.join(format!("sessiondb-{}/logs", db.engine));
    for step in script {
        sessiondb_step(&db.db, &ours, work, step);
    }
    ours
}

/// Runs `script` through gptme and through sessiondb (on SQLite); returns the two logs roots.
fn run_both(script: &[Value], work: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let theirs = run_gptme(script, work);
    let db = common::TestDb::sqlite(work);
    let ours = run_sessiondb(script, work, &db);
    (theirs, ours)
}

/// As [`differential`], leaving out the files in `ignore`.
fn differential_ignoring(script: &[Value], ignore: &[&str]) {
    compare(script, false, ignore)
}

/// As [`differential`]; with `all_timestamps`, message timestamps are masked too (for
/// operations that stamp a message with the current time, as backtrack's summary).
fn differential_masking(script: &[Value], all_timestamps: bool) {
    compare(script, all_timestamps, &[])
}

/// Runs `script` through gptme once and through sessiondb on every engine, comparing each.
fn compare(script: &[Value], all_timestamps: bool, ignore: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let theirs = run_gptme(script, work.path());
    for db in common::databases(work.path()) {
        let ours = run_sessiondb(script, work.path(), &db);
        compare_trees(&theirs, &ours, all_timestamps, ignore, db.engine);
    }
}

fn compare_trees(theirs: &Path, ours: &Path, all_timestamps: bool, ignore: &[&str], engine: &str) {
    let (mut a, mut b) = (comparable(theirs), comparable(ours));
    for path in ignore {
        a.remove(*path);
        b.remove(*path);
    }
    if all_timestamps {
        for v in a.values_mut().chain(b.values_mut()) {
            v.0 = mask_key(&v.0, "timestamp");
        }
    }
    let mut problems = Vec::new();
    for (path, value) in &a {
        match b.get(path) {
            None => problems.push(format!("missing in sessiondb's: {path}")),
            Some(v) if v.1 != value.1 => problems.push(format!("{path}: mode {:o} (gptme) vs {:o}", value.1.unwrap_or(0), v.1.unwrap_or(0))),
            Some(v) if v.0 != value.0 => problems.push(format!("{path} differs:\n gptme:     {}\n sessiondb: {}", value.0, v.0)),
            _ => {}
        }
    }
    for path in b.keys().filter(|p| !a.contains_key(*p)) {
        problems.push(format!("only in sessiondb's: {path}"));
    }
    assert!(problems.is_empty(), "on {engine}:\n{}", problems.join("\n"));
}

fn new(id: &str) -> Value {
    json!({"op": "new", "id": id})
}

fn append(id: &str, m: Value) -> Value {
    let mut step = m;
    step["op"] = json!("append");
    step["id"] = json!(id);
    step
}

#[test]
fn appends_with_flags_metadata_and_unicode() {
    let mut pinned = msg("system", "You are a helpful assistant.", 0);
    pinned["pinned"] = json!(true);
    let mut tool = msg("system", "Ran `ls` \"quoted\" \\ backslash\n\ttab", 3);
    tool["call_id"] = json!("call_1");
    tool["hide"] = json!(true);
    tool["ttl"] = json!(2);
    let mut reply = msg("assistant", "Café 中文 😀 done", 4);
    reply["metadata"] = json!({"model": "anthropic/claude-sonnet-4", "cost": 0.0123456789, "usage": {"input_tokens": 100, "output_tokens": 20}});
    differential(&[
        new("c"),
        append("c", pinned),
        append("c", msg("user", "hello", 1)),
        append("c", msg("assistant", "", 2)),
        append("c", tool),
        append("c", reply),
    ]);
}

#[test]
fn undo_without_an_undo_command() {
    differential(&[
        new("u"),
        append("u", msg("user", "one", 1)),
        append("u", msg("assistant", "two", 2)),
        append("u", msg("user", "three", 3)),
        json!({"op": "undo", "id": "u", "n": 1}),
        append("u", msg("user", "/help", 5)),
        json!({"op": "undo", "id": "u", "n": 2}),
        json!({"op": "undo", "id": "u", "n": 5}),
        json!({"op": "undo", "id": "u", "n": 1}),
    ]);
}

/// Token counts stored flat in the metadata (as older gptme wrote them) are moved under
/// `usage` when gptme reads the file, so its undo rewrites those lines: sessiondb cannot copy
/// a prefix of the file then, and rebuilds the branch as gptme does.
#[test]
fn undo_rewrites_lines_gptme_reads_differently() {
    let mut flat = msg("assistant", "two", 2);
    flat["metadata"] = json!({"model": "m", "input_tokens": 5, "output_tokens": 2, "cost": 0.5});
    differential(&[
        new("u"),
        append("u", msg("user", "one", 1)),
        append("u", flat),
        append("u", msg("user", "three", 3)),
        append("u", msg("assistant", "four", 4)),
        json!({"op": "undo", "id": "u", "n": 1}),
        json!({"op": "undo", "id": "u", "n": 1}),
    ]);
}

/// With a `/undo` command on top, gptme removes it and n more messages but logs `{"n": n}`,
/// so its own event log no longer replays to the transcript. sessiondb logs `n + 1`; that is
/// the one place its directory differs from gptme's, and its replay is the true state.
#[test]
fn undo_with_an_undo_command_logs_what_was_removed() {
    let script = [
        new("u"),
        append("u", msg("user", "one", 1)),
        append("u", msg("assistant", "two", 2)),
        append("u", msg("user", "/undo", 3)),
        json!({"op": "undo", "id": "u", "n": 1}),
    ];
    let work = tempfile::tempdir().unwrap();
    let (theirs, ours) = run_both(&script, work.path());
    let (a, b) = (comparable(&theirs), comparable(&ours));
    for (path, value) in &a {
        if path != "u/events.jsonl" {
            assert_eq!(Some(value), b.get(path), "{path}");
        }
    }
    let (ta, tb) = (&a["u/events.jsonl"].0, &b["u/events.jsonl"].0);
    assert_eq!(ta.replace("\"payload\": {\"n\": 1}", "\"payload\": {\"n\": 2}"), *tb);
    let replay = |dir: &Path| {
        let events = sessiondb::ops::read_event_file(&dir.join("u/events.jsonl")).unwrap().unwrap();
        sessiondb::ops::replay(&events).unwrap().len()
    };
    assert_eq!(replay(&ours), 1, "sessiondb's log replays to the transcript");
    assert_eq!(replay(&theirs), 2, "gptme's log replays to one message too many");
}

#[test]
fn undo_with_and_without_an_undo_command_other_files() {
    differential_ignoring(
        &[
            new("u"),
            append("u", msg("user", "one", 1)),
            append("u", msg("assistant", "two", 2)),
            append("u", msg("user", "three", 3)),
            json!({"op": "undo", "id": "u", "n": 1}),
            append("u", msg("user", "/undo", 4)),
            json!({"op": "undo", "id": "u", "n": 1}),
            append("u", msg("user", "/help", 5)),
            json!({"op": "undo", "id": "u", "n": 2}),
            json!({"op": "undo", "id": "u", "n": 5}),
            json!({"op": "undo", "id": "u", "n": 1}),
        ],
        &["u/events.jsonl"],
    );
}

#[test]
fn edit_replaces_with_a_backup() {
    differential(&[
        new("e"),
        append("e", msg("user", "draft", 1)),
        append("e", msg("assistant", "reply", 2)),
        json!({"op": "edit", "id": "e", "messages": [msg("user", "rewritten \"\"\" with \\n literal", 1), msg("assistant", "new reply\n", 2)]}),
        json!({"op": "edit", "id": "e", "messages": [msg("user", "again", 3)]}),
        append("e", msg("assistant", "after edits", 4)),
    ]);
}

#[test]
fn branch_then_append_on_it() {
    differential(&[
        new("b"),
        append("b", msg("user", "shared", 1)),
        append("b", msg("assistant", "shared reply", 2)),
        json!({"op": "branch", "id": "b", "name": "alt", "from": "main"}),
        append("b", {
            let mut m = msg("user", "only on alt", 3);
            m["branch"] = json!("alt");
            m
        }),
        append("b", msg("user", "only on main", 4)),
        json!({"op": "undo", "id": "b", "n": 1, "branch": "alt"}),
    ]);
}

#[test]
fn long_conversations_checkpoint_and_compact() {
    let mut script = vec![new("long")];
    for i in 0..130 {
        script.push(append("long", msg(if i % 2 == 0 { "user" } else { "assistant" }, &format!("message {i}"), i)));
    }
    script.push(json!({"op": "undo", "id": "long", "n": 2}));
    script.push(json!({"op": "edit", "id": "long", "messages": [msg("user", "short", 200)]}));
    for i in 0..22 {
        script.push(append("long", msg("assistant", &format!("more {i}"), 300 + i)));
    }
    differential(&script);
}

#[test]
fn views_take_appends_with_main() {
    differential(&[
        new("v"),
        append("v", msg("user", "one", 1)),
        append("v", msg("assistant", "two", 2)),
        append("v", msg("user", "three", 3)),
        json!({"op": "view_create", "id": "v", "name": "compacted-001", "messages": [msg("system", "summary of one and two", 4), msg("user", "three", 3)]}),
        json!({"op": "view_use", "id": "v", "name": "compacted-001"}),
        append("v", msg("assistant", "four, in both", 5)),
        json!({"op": "undo", "id": "v", "n": 1}),
        append("v", msg("assistant", "five", 6)),
        json!({"op": "view_off", "id": "v"}),
        append("v", msg("user", "six, main only", 7)),
    ]);
}

/// With a view active, gptme's `log` is the view: an edit (in an editor, or of a TOML file)
/// shows and replaces the view, backs it up as `main-edit-<n>`, and leaves
/// `conversation.jsonl` alone; the TOML export shows the view (saved back unchanged, it
/// changes nothing).
#[test]
fn edit_with_a_view_active_changes_the_view() {
    differential(&[
        new("ve"),
        append("ve", msg("user", "one", 1)),
        append("ve", msg("assistant", "two", 2)),
        append("ve", msg("user", "three", 3)),
        append("ve", msg("assistant", "four", 4)),
        json!({"op": "view_create", "id": "ve", "name": "compacted-001", "messages": [msg("system", "summary of one and two", 5), msg("user", "three", 3), msg("assistant", "four", 4)]}),
        json!({"op": "view_use", "id": "ve", "name": "compacted-001"}),
        json!({"op": "edit_replace", "id": "ve", "old": "four", "new": "FOUR"}),
        append("ve", msg("user", "five", 6)),
        json!({"op": "edit_unchanged", "id": "ve"}),
        json!({"op": "edit", "id": "ve", "messages": [msg("system", "shorter summary", 7), msg("user", "five", 6)]}),
        json!({"op": "edit_unchanged", "id": "ve", "branch": "main-edit-0"}),
    ]);
}

#[test]
fn bookmarks_and_backtrack() {
    let mut script = vec![new("bt")];
    for i in 0..6 {
        script.push(append("bt", msg(if i % 2 == 0 { "user" } else { "assistant" }, &format!("m{i}"), i)));
        if i == 1 {
            script.push(json!({"op": "mark", "id": "bt", "label": "after «first» exchange"}));
        }
    }
    script.push(json!({"op": "mark", "id": "bt", "label": "end"}));
    script.push(json!({"op": "backtrack", "id": "bt", "target": "after «first» exchange", "summary_timestamp": "2026-07-16T11:00:00"}));
    script.push(json!({"op": "backtrack", "id": "bt", "target": "1", "summary_timestamp": "2026-07-16T11:00:01"}));
    differential_masking(&script, true);
}

#[test]
fn rename_keeps_the_rest_of_config() {
    differential(&[
        new("r"),
        append("r", msg("user", "hi", 1)),
        json!({"op": "rename", "id": "r", "name": "First \"name\""}),
        json!({"op": "rename", "id": "r", "name": "Second é\ttab"}),
    ]);
}

#[test]
fn forks_whole_and_at_a_turn() {
    let mut script = vec![new("f")];
    for i in 0..7 {
        script.push(append("f", msg(["user", "assistant", "system"][i % 3], &format!("m{i}"), i)));
    }
    script.push(json!({"op": "branch", "id": "f", "name": "alt"}));
    script.push(append("f", {
        let mut m = msg("user", "alt only", 20);
        m["branch"] = json!("alt");
        m
    }));
    script.push(json!({"op": "fork", "id": "f", "new_id": "f-copy"}));
    script.push(json!({"op": "fork_at_turn", "id": "f", "turn": 1, "new_id": "f-turn1"}));
    script.push(json!({"op": "fork_at_turn", "id": "f", "turn": 0, "new_id": "f-turn0"}));
    script.push(append("f-copy", msg("user", "after the fork", 30)));
    differential(&script);
}

#[test]
fn attachments_are_stored_by_content_as_gptme_stores_them() {
    let files = tempfile::tempdir().unwrap();
    let a = files.path().join("diagram.png");
    let b = files.path().join("notes");
    let c = files.path().join("archive.tar.gz");
    fs::write(&a, b"\x89PNG fake image").unwrap();
    fs::write(&b, "no suffix").unwrap();
    fs::write(&c, "gz").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&a, fs::Permissions::from_mode(0o640)).unwrap();
    let with_files = |m: Value, paths: &[&Path]| {
        let mut m = m;
        m["files"] = json!(paths.iter().map(|p| p.to_str().unwrap()).collect::<Vec<_>>());
        m
    };
    differential(&[
        new("att"),
        append("att", with_files(msg("user", "look at these", 1), &[&a, &b])),
        append("att", with_files(msg("user", "again, and a .tar.gz", 2), &[&a, &c])),
        append("att", msg("assistant", "seen", 3)),
    ]);
}

#[test]
fn appending_after_a_cut_off_last_line_rewrites_as_gptme_does() {
    // Both sides start from the same damaged transcript: its last line cut off mid-write.
    let work = tempfile::tempdir().unwrap();
    let (theirs, ours) = run_both(&[new("cut"), append("cut", msg("user", "one", 1)), append("cut", msg("assistant", "two", 2))], work.path());
    for root in [&theirs, &ours] {
        let path = root.join("cut/conversation.jsonl");
        let mut bytes = fs::read(&path).unwrap();
        bytes.truncate(bytes.len() - 20);
        fs::write(&path, bytes).unwrap();
    }
    let step = [append("cut", msg("user", "three", 3))];
    let script_file = work.path().join("step.json");
    fs::write(&script_file, serde_json::to_string(&step).unwrap()).unwrap();
    let out = Command::new(gptme_python()).arg(tool("gptme_ops.py")).arg(&theirs).arg(&script_file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    sessiondb_step(&work.path().join("sessions.db"), &ours, work.path(), &step[0]);
    let (a, b) = (comparable(&theirs), comparable(&ours));
    assert_eq!(a.get("cut/conversation.jsonl"), b.get("cut/conversation.jsonl"));
    assert!(a["cut/conversation.jsonl"].0.lines().count() == 2, "gptme dropped the damaged line: {:?}", a["cut/conversation.jsonl"]);
}
