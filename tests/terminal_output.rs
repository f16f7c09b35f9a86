//! Issue 13, item 8: stored text never drives the terminal. A conversation whose name, roles,
//! contents, model names, branch name and checkpoint label carry control sequences
//! (an OSC 52 clipboard write, a screen clear, a C1 CSI, a carriage return) goes through every
//! command that prints stored text for people: their output has no control character but
//! newlines and tabs, and shows the sequences escaped. `--json` and `show --json` stay exact.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::{run_ok, sessiondb, without_sgr};

/// Writes the clipboard (OSC 52), clears the screen, homes the cursor, a C1 CSI, CR, BS, DEL.
const H: &str = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[H\u{9b}31m\r\x08\x7f";
/// How the clipboard write shows once escaped.
const SHOWN: &str = "\\u{1b}]52;c;cHduZWQ=\\u{7}";

fn line(role: &str, content: &str, timestamp: &str, model: Option<&str>) -> String {
    let mut v = serde_json::json!({"role": role, "content": content, "timestamp": timestamp});
    if let Some(m) = model {
        v["metadata"] = serde_json::json!({"model": m, "usage": {"input_tokens": 10, "output_tokens": 5, "cost": 0.01}});
    }
    v.to_string() + "\n"
}

fn hostile_logs(logs: &Path) -> String {
    let dir = logs.join("hostile");
    fs::create_dir_all(dir.join("branches")).unwrap();
    // A JSON string of H is a TOML basic string too (the same escapes; C1 is allowed raw),
    // once DEL, which TOML does not allow raw, is escaped.
    let name = serde_json::to_string(&format!("name {H}")).unwrap().replace('\u{7f}', "\\u007F");
    fs::write(dir.join("config.toml"), format!("[chat]\nname = {name}\n")).unwrap();
    let main = [
        line("user", &format!("find the needle {H}\nsecond line {H}\tend"), "2026-07-16T10:00:00", None),
        line("assistant", &format!("```sh {H}\necho {H}\n```\nneedle {H}"), "2026-07-16T10:00:05", Some(&format!("model {H}"))),
        line(&format!("role {H}"), &format!("odd role {H}"), "2026-07-16T10:00:06", None),
        line("system", &format!("Saved {H}"), "2026-07-16T10:00:07", None),
    ]
    .concat();
    fs::write(dir.join("conversation.jsonl"), &main).unwrap();
    let branch = format!("b{H}");
    fs::write(
        dir.join("branches").join(format!("{branch}.jsonl")),
        [main.lines().next().unwrap(), "\n", &line("assistant", &format!("other {H}"), "2026-07-16T10:01:00", None)].concat(),
    )
    .unwrap();
    branch
}

/// Control characters other than newline and tab in `text`, as escaped text.
fn controls(text: &str) -> String {
    text.chars().filter(|c| c.is_control() && !matches!(c, '\n' | '\t')).flat_map(char::escape_default).collect()
}

fn check(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    assert_eq!(controls(&stdout), "", "{what} printed control characters raw:\n{stdout}");
    assert_eq!(controls(&stderr), "", "{what} printed control characters raw on stderr:\n{stderr}");
    stdout
}

#[test]
fn stored_control_sequences_are_shown_escaped() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let branch = hostile_logs(&logs);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    run_ok(sessiondb(&db).args(["checkpoint", "hostile", &format!("label {H}")]));

    let shows_it: &[&[&str]] = &[
        &["read", "hostile", "--system"],
        &["read", "hostile", "--system", "--full"],
        &["show", "hostile"],
        &["search", "needle"],
        &["search", "needle", "-c", "3", "-m", "3"],
        &["search", "cHduZWQ"],
        &["stats", "--by", "model"],
        &["stats", "hostile"],
        &["list"],
        &["branches", "hostile"],
        &["diff", "hostile", "main", &branch],
        &["checkpoints", "hostile"],
    ];
    for args in shows_it {
        let stdout = check(&args.join(" "), &run_ok(sessiondb(&db).args(*args)));
        assert!(stdout.contains(SHOWN) || stdout.contains("\\u{1b}"), "{args:?} shows the sequence escaped:\n{stdout}");
    }
    for args in [&["next", "hostile"][..], &["stats"], &["search", "absent-word"]] {
        check(&args.join(" "), &run_ok(sessiondb(&db).args(args)));
    }
    check("doctor", &sessiondb(&db).arg("doctor").arg(&logs).output().unwrap());
    check("sync", &sessiondb(&db).arg("sync").arg(&logs).output().unwrap());
    // A failure naming stored text (here the branch) is escaped too.
    let out = sessiondb(&db).args(["show", "hostile", "--branch", &format!("x{H}")]).output().unwrap();
    assert!(!out.status.success());
    check("a failure", &out);

    // JSON stays exact: the stored line, and the stored text inside JSON strings.
    let shown = run_ok(sessiondb(&db).args(["show", "hostile", "--json"])).stdout;
    assert_eq!(String::from_utf8(shown).unwrap(), fs::read_to_string(logs.join("hostile/conversation.jsonl")).unwrap());
    let found: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "needle", "--json"])).stdout).unwrap();
    let found = &found["results"];
    assert_eq!(found[0]["name"], format!("name {H}"));
    assert!(found[0]["snippets"][0]["snippet"].as_str().unwrap().contains(H), "{found}");
    let stats: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["stats", "--by", "model", "--json"])).stdout).unwrap();
    assert!(stats["by_model"].get(format!("model {H}")).is_some(), "{stats}");
    // A document written to a pipe or a file is exact as well.
    let markdown = String::from_utf8(run_ok(sessiondb(&db).args(["export", "--format", "markdown", "hostile"])).stdout).unwrap();
    assert!(markdown.contains(&format!("find the needle {H}")), "{markdown}");
}

/// On a terminal (a pseudo-terminal from `script`), colour is on: the only escape sequences
/// written are sessiondb's own colours (SGR, `ESC [ … m`).
#[test]
fn on_a_terminal_only_our_colours_are_written() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: `script` (util-linux) is not installed; no pseudo-terminal to test with");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    hostile_logs(&logs);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let bin = env!("CARGO_BIN_EXE_sessiondb");
    for args in ["read hostile --system --full", "search needle", "list", "show hostile"] {
        let command = format!("{bin} --db '{}' {args}", db.display());
        // Wide enough for list to show the hostile name whole (at 80 columns it is cut).
        let columns = if args == "list" { "200" } else { "80" };
        let out =
            Command::new("script").args(["-qec", &command, "/dev/null"]).env_remove("NO_COLOR").env("TERM", "xterm").env("COLUMNS", columns).output().unwrap();
        assert!(out.status.success(), "{args}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        assert!(text.contains("\\u{1b}]52;c;cHd"), "{args}: {text}");
        let colours = ["read", "search", "list"].iter().any(|c| args.starts_with(c));
        assert_eq!(text.contains("\x1b["), colours, "{args} is coloured on a terminal: {text:?}");
        assert_eq!(controls(&without_sgr(&text)), "", "{args} on a terminal: {text:?}");
    }
}
