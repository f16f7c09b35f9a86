//! Differential tests of the log operations: the same script runs through real gptme's
//! `LogManager` (`tools/gptme_ops.py`) and through the `sessiondb` binary, and the two
//! conversation directories must be the same file for file, byte for byte — modes and
//! directory layout included — with only the clock masked (events' `ts`).

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use common::tree::{snapshot, Node};
use common::{gptme_python, run_ok, sessiondb, tool};
use sessiondb::codec::toml_log::messages_to_toml;
use sessiondb::model::{Message, Role};
use serde_json::{json, Value};

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
        "branch" => {
            cmd.args(["branch", id, step["name"].as_str().unwrap(), "--from", step["from"].as_str().unwrap_or("main")]);
        }
        other => panic!("unknown op {other}"),
    }
    run_ok(&mut cmd);
}

/// Masks what only the clock decides: every `"ts": "…"` of an event log.
fn mask(path: &str, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes).into_owned();
    if !path.ends_with("events.jsonl") {
        return text;
    }
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("\"ts\": \"") {
        out.push_str(&rest[..i + 7]);
        rest = &rest[i + 7..];
        let end = rest.find('"').unwrap();
        out.push_str("<ts>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn comparable(root: &Path) -> BTreeMap<String, (String, Option<u32>)> {
    snapshot(root, &[".lock"])
        .into_iter()
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
    let work = tempfile::tempdir().unwrap();
    let (theirs, ours) = (work.path().join("gptme/logs"), work.path().join("sessiondb/logs"));
    fs::create_dir_all(&theirs).unwrap();
    let script_file = work.path().join("script.json");
    fs::write(&script_file, serde_json::to_string(script).unwrap()).unwrap();
    let out = Command::new(gptme_python()).arg(tool("gptme_ops.py")).arg(&theirs).arg(&script_file).output().unwrap();
    assert!(out.status.success(), "gptme failed: {}", String::from_utf8_lossy(&out.stderr));
    let db = work.path().join("db");
    for step in script {
        sessiondb_step(&db, &ours, work.path(), step);
    }
    let (a, b) = (comparable(&theirs), comparable(&ours));
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
    assert!(problems.is_empty(), "{}", problems.join("\n"));
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
fn undo_with_and_without_an_undo_command() {
    differential(&[
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
    ]);
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
