//! Operations checked against real gptme: the resume decision, event-log recovery, the TOML
//! layout; and the operation guarantees: the lock, the editor, all-or-nothing failure.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{gptme_python, run_ok, sessiondb};
use serde_json::{json, Value};

fn python(script: &str, args: &[&Path]) -> String {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(gptme_python())
        .arg("-c")
        .arg(script)
        .args(args)
        .env("HOME", home.path())
        .env("GPTME_LOGS_HOME", home.path())
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn line(v: Value) -> String {
    // Lines as gptme writes them (our encoder is byte-compatible; see interop_gptme.rs).
    let m = sessiondb::codec::message_line::message_from_json(sessiondb::codec::json::from_serde(&v)).unwrap();
    sessiondb::codec::message_line::encode_message(&m)
}

fn write_conversation(logs: &Path, id: &str, messages: &[Value]) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    let text: String = messages.iter().map(|m| line(m.clone()) + "\n").collect();
    fs::write(dir.join("conversation.jsonl"), text).unwrap();
}

fn m(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content, "timestamp": "2026-07-16T10:00:00"})
}

#[test]
fn next_agrees_with_gptme_on_every_rule() {
    common::on_each_engine(|work, db| {
        let with = |mut v: Value, key: &str, value: Value| {
            v[key] = value;
            v
        };
        let cases: Vec<Vec<Value>> = vec![
            vec![],
            vec![m("system", "s"), m("user", "hi")],
            vec![m("system", "s"), m("user", "hi"), m("assistant", "hello")],
            vec![m("user", "hi"), m("assistant", "a"), m("system", "tool output")],
            vec![m("user", "hi"), m("system", "Interrupted by user")],
            vec![m("user", "hi"), m("system", "Interrupted by user"), m("system", "hook output after the interrupt")],
            vec![m("user", "hi"), m("system", "Execution declined by user")],
            vec![m("user", "hi"), m("system", "LLM request failed: 500")],
            vec![m("user", "hi"), with(m("system", "stop"), "metadata", json!({"max_steps_stop": true}))],
            vec![m("system", "Interrupted by user"), m("user", "again")],
            vec![m("user", "hi"), with(m("system", "Interrupted by user"), "call_id", json!("c1"))],
            vec![m("user", "hi"), with(m("user", "pinned"), "pinned", json!(true))],
            vec![m("system", "only system"), m("system", "still")],
            vec![m("user", "hi"), m("assistant", "a"), with(m("system", "budget"), "metadata", json!({"compaction_reminder_view": "v"}))],
            vec![m("user", "hi"), with(with(m("system", "profile"), "pinned", json!(true)), "metadata", json!({"resume_key": "k"}))],
            vec![m("user", "hi"), m("assistant", "a"), with(with(m("system", "profile"), "pinned", json!(true)), "metadata", json!({"resume_key": "k"}))],
        ];
        let logs = work.join("logs");
        for (i, case) in cases.iter().enumerate() {
            write_conversation(&logs, &format!("case-{i:02}"), case);
        }
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let script = "import sys, json, pathlib\nfrom gptme.logmanager import Log\nfrom gptme.chat import _should_prompt_for_input\nout = {}\nfor d in sorted(pathlib.Path(sys.argv[1]).iterdir()):\n    out[d.name] = _should_prompt_for_input(Log.read_jsonl(d / 'conversation.jsonl'))\nprint(json.dumps(out))\n";
        let gptme: Value = serde_json::from_str(&python(script, &[&logs])).unwrap();
        for i in 0..cases.len() {
            let id = format!("case-{i:02}");
            let ours: Value = serde_json::from_slice(&run_ok(sessiondb(db).args(["next", &id, "--json"])).stdout).unwrap();
            let gptme_asks_user = gptme[&id].as_bool().unwrap();
            assert_eq!(ours["next"] == "user", gptme_asks_user, "{id}: sessiondb says {ours}, gptme prompts for input: {gptme_asks_user}");
        }
    })
}

/// `recover --json` against gptme's recover_messages, on a directory gptme wrote.
fn assert_recover_matches(dir: &Path, db: &Path, chat_id: &str) {
    let oracle = Command::new(gptme_python()).arg(common::tool("gptme_check.py")).arg("recover").arg(dir).output().unwrap();
    let oracle: Value = serde_json::from_slice(&oracle.stdout).unwrap();
    for args in [vec!["recover", chat_id, "--json"], vec!["recover", "--dir", dir.to_str().unwrap(), "--json"]] {
        let ours: Value = serde_json::from_slice(&run_ok(sessiondb(db).args(&args)).stdout).unwrap();
        assert_eq!(ours["event_log"], oracle["event_log"], "{args:?}: {ours} vs {oracle}");
        assert_eq!(ours["messages"], oracle["messages"].as_array().unwrap().len(), "{args:?}: {ours} vs {oracle}");
    }
}

#[test]
fn recover_agrees_with_gptme() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        fs::create_dir_all(&logs).unwrap();
        // gptme writes the conversations: appends past two checkpoints, an edit, undos (one with
        // a /undo command on top), and one whose conversation.jsonl is then cut short by a crash.
        let script = r#"
import sys, pathlib
from datetime import datetime
from gptme.logmanager import LogManager
from gptme.message import Message
root = pathlib.Path(sys.argv[1])
def msg(role, text): return Message(role, text, timestamp=datetime(2026, 7, 16, 10, 0, 0))
m = LogManager.load(root / "long", create=True)
for i in range(120): m.append(msg("user" if i % 2 == 0 else "assistant", f"m{i}"))
m.undo(3, quiet=True); m.edit(list(m.log.messages[:40])); m.append(msg("user", "after edit"))
m._release_lock()
m = LogManager.load(root / "short", create=True)
for i in range(5): m.append(msg("user", f"s{i}"))
m.append(msg("user", "/undo")); m.undo(1, quiet=True)
m._release_lock()
m = LogManager.load(root / "crashed", create=True)
for i in range(8): m.append(msg("user", f"c{i}"))
m._release_lock()
p = root / "crashed" / "conversation.jsonl"
p.write_bytes(p.read_bytes()[:-37])
"#;
        python(script, &[&logs]);
        run_ok(sessiondb(db).arg("import").arg(&logs));
        for id in ["long", "short", "crashed"] {
            assert_recover_matches(&logs.join(id), db, id);
        }
        // No event log at all is not the same as one that replays to nothing.
        let plain = logs.join("plain");
        fs::create_dir_all(&plain).unwrap();
        fs::write(plain.join("conversation.jsonl"), line(m("user", "x")) + "\n").unwrap();
        let ours: Value = serde_json::from_slice(&run_ok(sessiondb(db).args(["recover", "--dir"]).arg(&plain).arg("--json")).stdout).unwrap();
        assert_eq!(ours["event_log"], false);

        // --apply rebuilds the truncated transcript from the event log, keeping a backup branch.
        run_ok(sessiondb(db).args(["recover", "crashed", "--apply"]));
        let main = String::from_utf8(run_ok(sessiondb(db).args(["show", "crashed", "--json"])).stdout).unwrap();
        assert_eq!(main.lines().count(), 8, "{main}");
        assert!(logs.join("crashed/branches/main-edit-0.jsonl").exists());
    })
}

#[test]
fn toml_export_reads_in_gptme_and_survives_what_gptme_loses() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        let tricky = ["literal \\n backslash-n and \\\\n", "triple \"\"\" quotes", "trailing spaces   ", "ctrl \u{1} \u{7f} \r\n", "\n\nleading", "ünïcödé 😀"];
        let mut messages: Vec<Value> = tricky.iter().map(|t| m("user", t)).collect();
        messages[0]["ephemeral_ttl"] = json!(3);
        messages[1]["metadata"] = json!({"model": "m", "cost": 0.0123456789, "flag": true});
        write_conversation(&logs, "t", &messages);
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let toml = run_ok(sessiondb(db).args(["export", "--format", "toml", "t"])).stdout;
        let file = work.join("t.toml");
        fs::write(&file, &toml).unwrap();
        // gptme's toml_to_msgs reads it: same roles and contents, exactly.
        let script = "import sys, json\nfrom gptme.message import toml_to_msgs\nms = toml_to_msgs(open(sys.argv[1]).read())\nprint(json.dumps([[m.role, m.content] for m in ms]))\n";
        let gptme: Value = serde_json::from_str(&python(script, &[&file])).unwrap();
        let expected: Vec<Value> = tricky.iter().map(|t| json!(["user", t])).collect();
        assert_eq!(gptme, Value::Array(expected));
        // And our own round trip keeps everything else too (ttl, exact floats, booleans).
        run_ok(sessiondb(db).args(["import", "--toml"]).arg(&file).arg("t"));
        let back = String::from_utf8(run_ok(sessiondb(db).args(["show", "t", "--json"])).stdout).unwrap();
        let original: String = messages.iter().map(|v| line(v.clone()) + "\n").collect();
        assert_eq!(back, original);
    })
}

#[test]
fn edit_through_an_editor_and_refuse_bad_toml() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        write_conversation(&logs, "e", &[m("user", "typo hre"), m("assistant", "ok")]);
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let before = fs::read(logs.join("e/conversation.jsonl")).unwrap();
        // An "editor" that breaks the TOML: rejected with line and column, nothing changed.
        let bad = sessiondb(db).args(["edit", "e"]).env("EDITOR", "sed -i 's/^role = /role = = /'").output().unwrap();
        assert_eq!(bad.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(stderr.contains("line 2, column"), "{stderr}");
        assert!(stderr.contains("nothing changed"), "{stderr}");
        assert_eq!(fs::read(logs.join("e/conversation.jsonl")).unwrap(), before);
        assert!(!logs.join("e/branches").exists(), "no backup made");
        // A working editor: the change is applied with a backup branch.
        run_ok(sessiondb(db).args(["edit", "e"]).env("VISUAL", "sed -i 's/typo hre/typo here/'"));
        let now = String::from_utf8(fs::read(logs.join("e/conversation.jsonl")).unwrap()).unwrap();
        assert!(now.contains("typo here") && !now.contains("typo hre"), "{now}");
        assert_eq!(fs::read(logs.join("e/branches/main-edit-0.jsonl")).unwrap(), before);
        // An editor that changes nothing changes nothing.
        let same = fs::read(logs.join("e/conversation.jsonl")).unwrap();
        run_ok(sessiondb(db).args(["edit", "e"]).env("VISUAL", "true"));
        assert_eq!(fs::read(logs.join("e/conversation.jsonl")).unwrap(), same);
    })
}

/// A conversation with a view active (gptme's `views/.current`): six messages on main, the view
/// a summary and the last two.
fn with_active_view(logs: &Path, id: &str) {
    let main: Vec<Value> = ["one", "two", "three", "four", "five", "six"].iter().enumerate().map(|(i, c)| m(["user", "assistant"][i % 2], c)).collect();
    write_conversation(logs, id, &main);
    let view: String = [m("system", "summary of one to four"), m("user", "five"), m("assistant", "six")].into_iter().map(|v| line(v) + "\n").collect();
    fs::create_dir_all(logs.join(id).join("views")).unwrap();
    fs::write(logs.join(id).join("views/compacted-001.jsonl"), view).unwrap();
    fs::write(logs.join(id).join("views/.current"), "compacted-001\n").unwrap();
}

fn contents(file: &Path) -> Vec<String> {
    fs::read_to_string(file).unwrap().lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["content"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn edit_with_a_view_active_edits_the_view_gptme_has_loaded() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        with_active_view(&logs, "v");
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let dir = logs.join("v");
        let main_before = fs::read(dir.join("conversation.jsonl")).unwrap();
        let view_before = fs::read(dir.join("views/compacted-001.jsonl")).unwrap();
        // The editor is shown the view (what gptme's `log` is), and saving replaces the view.
        run_ok(sessiondb(db).args(["edit", "v"]).env_remove("EDITOR").env("VISUAL", "sed -i 's/six/SIX/'"));
        assert_eq!(contents(&dir.join("views/compacted-001.jsonl")), ["summary of one to four", "five", "SIX"]);
        assert_eq!(fs::read(dir.join("conversation.jsonl")).unwrap(), main_before, "main is not what was edited");
        assert_eq!(fs::read(dir.join("branches/main-edit-0.jsonl")).unwrap(), view_before, "the backup is the view before");
        // `export --format toml` is the view too: editing with the unchanged file keeps its messages.
        let toml = work.join("v.toml");
        fs::write(&toml, run_ok(sessiondb(db).args(["export", "--format", "toml", "v"])).stdout).unwrap();
        run_ok(sessiondb(db).args(["edit", "v", "--toml"]).arg(&toml));
        assert_eq!(contents(&dir.join("views/compacted-001.jsonl")), ["summary of one to four", "five", "SIX"]);
        assert_eq!(fs::read(dir.join("conversation.jsonl")).unwrap(), main_before);
    })
}

/// `recover` compares the event log with what `--apply` would replace: with a view active, the
/// view (main's event log records the view's edits).
#[test]
fn recover_with_a_view_active_compares_with_the_view() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        with_active_view(&logs, "v");
        run_ok(sessiondb(db).arg("import").arg(&logs));
        run_ok(sessiondb(db).args(["edit", "v"]).env_remove("EDITOR").env("VISUAL", "sed -i 's/six/SIX/'"));
        for args in [vec!["recover", "v", "--json"], vec!["recover", "--dir", logs.join("v").to_str().unwrap(), "--json"]] {
            let out: Value = serde_json::from_slice(&run_ok(sessiondb(db).args(&args)).stdout).unwrap();
            assert_eq!(out["current"], 3, "{args:?}: {out}");
            assert_eq!(out["equal"], true, "{args:?}: {out}");
        }
    })
}

#[test]
fn an_empty_editor_variable_counts_as_unset() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        write_conversation(&logs, "e", &[m("user", "typo hre"), m("assistant", "ok")]);
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let file = logs.join("e/conversation.jsonl");
        // An empty VISUAL falls through to EDITOR.
        run_ok(sessiondb(db).args(["edit", "e"]).env("VISUAL", "").env("EDITOR", "sed -i 's/typo hre/typo here/'"));
        assert_eq!(contents(&file), ["typo here", "ok"]);
        // Both empty: `vi`, found on the PATH.
        let bin = work.join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(bin.join("vi"), "#!/bin/sh\nsed -i 's/typo here/typo fixed/' \"$1\"\n").unwrap();
        fs::set_permissions(bin.join("vi"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        run_ok(sessiondb(db).args(["edit", "e"]).env("VISUAL", "").env("EDITOR", "").env("PATH", path));
        assert_eq!(contents(&file), ["typo fixed", "ok"]);
    })
}

#[test]
fn operations_refuse_a_conversation_a_live_gptme_holds() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        write_conversation(&logs, "busy", &[m("user", "hi")]);
        run_ok(sessiondb(db).arg("import").arg(&logs));
        // A real gptme loads the conversation (taking its lock) and keeps it open.
        let gptme = common::LiveGptme::hold(&logs.join("busy"), &logs, work);
        let before = fs::read(logs.join("busy/conversation.jsonl")).unwrap();
        for args in [vec!["append", "busy", "--role", "user", "--content", "x"], vec!["undo", "busy"], vec!["rename", "busy", "n"]] {
            let out = sessiondb(db).args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}");
            assert!(stderr.contains(&format!("in use by gptme (process {})", gptme.pid())), "{args:?}: {stderr}");
        }
        assert_eq!(fs::read(logs.join("busy/conversation.jsonl")).unwrap(), before);
        drop(gptme);
        run_ok(sessiondb(db).args(["append", "busy", "--role", "user", "--content", "now it works"]));
    })
}

#[test]
fn a_failing_operation_leaves_store_and_directory_as_they_were() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        write_conversation(&logs, "f", &[m("user", "one"), m("assistant", "two")]);
        // The event log cannot be written: a directory stands where its lock sidecar goes (one
        // where events.jsonl goes would fail the import itself).
        fs::create_dir_all(logs.join("f/.events.jsonl.lock")).unwrap();
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let before = fs::read(logs.join("f/conversation.jsonl")).unwrap();
        let shown = run_ok(sessiondb(db).args(["show", "f", "--json"])).stdout;
        let out = sessiondb(db).args(["append", "f", "--role", "user", "--content", "three"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(fs::read(logs.join("f/conversation.jsonl")).unwrap(), before, "the appended line was taken back");
        assert_eq!(run_ok(sessiondb(db).args(["show", "f", "--json"])).stdout, shown, "the store is unchanged");
        let undo = sessiondb(db).args(["undo", "f"]).output().unwrap();
        assert_eq!(undo.status.code(), Some(1));
        assert_eq!(fs::read(logs.join("f/conversation.jsonl")).unwrap(), before, "the rewrite was put back");
        assert!(!logs.join("f/branches/main-undo-0.jsonl").exists(), "the backup branch was removed again");
        let leftovers: Vec<_> = fs::read_dir(logs.join("f"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".sessiondb-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    })
}
