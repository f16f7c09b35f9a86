//! Issue 32, "the first hour, again": what a new user still trips over, through the real
//! binary. Help and the listing fit the terminal (`COLUMNS`) and the commands are grouped; a sync
//! that changes nothing says so in one short line; `rm` says that it deletes gptme's own
//! directory, and `--store-only` keeps it (the next sync reads it in again); `serve`'s log shows
//! clean values and a conversation without `config.toml` has gptme's default config, written
//! nowhere; the demo script runs the binary cargo reports having built, wherever it is.

use crate::common;
use crate::serve::{copy_fixtures, free_port, http, json};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_ok, sessiondb};
use unicode_width::UnicodeWidthStr;

/// The lines of `text` wider than `width` terminal cells.
fn too_wide(text: &str, width: usize) -> Vec<String> {
    text.lines().filter(|l| l.width() > width).map(str::to_owned).collect()
}

/// `sessiondb ARGS` with `COLUMNS=columns`, written to a pipe; its standard output.
fn at_width(db: &Path, columns: usize, args: &[&str]) -> String {
    let out = run_ok(sessiondb(db).args(args).env("COLUMNS", columns.to_string()));
    String::from_utf8(out.stdout).unwrap()
}

/// The commands sessiondb has, from the man pages it writes (one per command).
fn commands() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    run_ok(Command::new(env!("CARGO_BIN_EXE_sessiondb")).args(["man", "--dir"]).arg(dir.path()));
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("sessiondb-")?.strip_suffix(".1").map(str::to_owned))
        .filter(|n| !n.contains('-') && n != "help")
        .collect();
    names.sort();
    names
}

/// Item 12: `--help` wraps to the terminal and lists the commands in groups, each once; every
/// command's own help fits too, at 80 columns and at 200.
#[test]
fn help_is_grouped_and_fits_the_terminal() {
    let db = Path::new("/nonexistent/db");
    for columns in [80, 200] {
        let help = at_width(db, columns, &["--help"]);
        assert_eq!(too_wide(&help, columns), Vec::<String>::new(), "sessiondb --help at {columns} columns:\n{help}");
        for heading in ["Read:", "Change (store and gptme's directory together):", "Keep in step with gptme's logs:", "Serve:", "Store:", "Options:"] {
            assert!(help.lines().any(|l| l == heading), "no {heading:?} heading:\n{help}");
        }
        for name in commands() {
            let listed = help.lines().filter(|l| l.strip_prefix("  ").and_then(|l| l.split_whitespace().next()) == Some(name.as_str())).count();
            assert_eq!(listed, 1, "{name} listed {listed} times:\n{help}");
        }
        for name in ["list", "sync", "serve", "rm", "completions"] {
            let help = at_width(db, columns, &[name, "--help"]);
            assert_eq!(too_wide(&help, columns), Vec::<String>::new(), "sessiondb {name} --help at {columns} columns:\n{help}");
        }
    }
}

/// The bundled sample imported into a fresh store under `work`.
fn sample(work: &Path) -> (PathBuf, PathBuf) {
    let logs = copy_fixtures(&work.join("logs"));
    let db = work.join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    (logs, db)
}

/// Item 12: `list` of the sample at 80 columns: no row wider than the terminal (the longest id,
/// `2026-07-02-unicode-lone-surrogate`, leaves MODEL 9 cells), and a model cut shows its own
/// name rather than the end of its provider's; at 200 columns models are whole.
#[test]
fn list_of_the_sample_fits_eighty_columns() {
    let work = tempfile::tempdir().unwrap();
    let (_logs, db) = sample(work.path());
    let narrow = at_width(&db, 80, &["list", "--all", "-n", "0"]);
    assert_eq!(too_wide(&narrow, 80), Vec::<String>::new(), "list at 80 columns:\n{narrow}");
    assert!(narrow.contains("2026-07-02-unicode-lone-surrogate"), "ids whole:\n{narrow}");
    let wide = at_width(&db, 200, &["list", "--all", "-n", "0"]);
    assert_eq!(too_wide(&wide, 200), Vec::<String>::new());
    assert!(wide.contains("anthropic/claude-sonnet-4-6"), "whole at 200 columns:\n{wide}");
    let at_100 = at_width(&db, 100, &["list", "--all", "-n", "0"]);
    assert!(at_100.contains(" claude-sonnet-4-6 ") && !at_100.contains("…pic/"), "the provider goes before the model's name is cut:\n{at_100}");
}

/// Item 12: a sync that changes nothing prints one short line saying so, with how many
/// conversations it looked at; one that changes something says only what it did.
#[test]
fn a_sync_that_changes_nothing_says_so_in_one_line() {
    let work = tempfile::tempdir().unwrap();
    let (logs, db) = sample(work.path());
    let out = String::from_utf8(run_ok(sessiondb(&db).arg("sync").arg(&logs)).stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    let root = fs::canonicalize(&logs).unwrap();
    assert_eq!(out.trim_end(), format!("nothing new in {} (18 conversations checked)", root.display()));
    let transcript = logs.join("2026-07-01-basic-chat/conversation.jsonl");
    let mut text = fs::read_to_string(&transcript).unwrap();
    text.push_str("{\"role\": \"user\", \"content\": \"And the capital of Norway?\", \"timestamp\": \"2026-07-01T10:00:00\"}\n");
    fs::write(&transcript, text).unwrap();
    let out = String::from_utf8(run_ok(sessiondb(&db).arg("sync").arg(&logs)).stdout).unwrap();
    assert_eq!(out.trim_end(), "took in 1 conversation (0 new), 1 message", "{out}");
}

/// Item 16: `rm` says, in its help, its question and its dry run, that gptme's own directory is
/// deleted; `--store-only` removes the store's copy alone, says that the next sync reads the
/// directory in again, and the next sync does.
#[test]
fn rm_says_it_deletes_gptmes_directory_and_store_only_keeps_it() {
    let work = tempfile::tempdir().unwrap();
    let (logs, db) = sample(work.path());
    let help = String::from_utf8(run_ok(sessiondb(&db).args(["rm", "--help"])).stdout).unwrap();
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("deletes its directory in gptme's logs") && flat.contains("gptme loses it too"), "{help}");
    assert!(flat.contains("--store-only") && flat.contains("the next `sessiondb sync`"), "{help}");

    let chat = "2026-07-01-basic-chat";
    let refused = sessiondb(&db).args(["rm", chat]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("from the store and from gptme: its directory") && said.contains("is deleted (--store-only keeps it)"), "{said}");

    let dry = String::from_utf8(run_ok(sessiondb(&db).args(["rm", "--store-only", "--dry-run", chat])).stdout).unwrap();
    assert!(dry.contains("from the store only: gptme's directory") && dry.contains("the next sync reads it in again"), "{dry}");
    let before = common::transcript_contents(&logs.join(chat));
    let done = String::from_utf8(run_ok(sessiondb(&db).args(["rm", "--store-only", "--yes", chat])).stdout).unwrap();
    assert!(done.contains("removed 2026-07-01-basic-chat from the store") && done.contains("`sessiondb sync` reads it in again"), "{done}");
    assert_eq!(common::transcript_contents(&logs.join(chat)), before, "gptme's directory untouched");
    let listed = || String::from_utf8(run_ok(sessiondb(&db).args(["list", "--json", "--all"])).stdout).unwrap();
    assert!(!listed().contains(chat), "gone from the store");
    run_ok(sessiondb(&db).arg("sync").arg(&logs));
    assert!(listed().contains(chat), "the next sync read it in again");

    run_ok(sessiondb(&db).args(["rm", "--yes", chat]));
    assert!(!logs.join(chat).exists(), "without --store-only the directory goes");
}

/// Item 13: `serve`'s log shows paths and milliseconds, not `Some("…")` and float noise; a
/// conversation without `config.toml` answers gptme's default config (200, not 404), and
/// nothing is written into its directory.
#[test]
fn serve_logs_clean_values_and_answers_a_default_config() {
    let work = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&work.path().join("logs"));
    let webui = work.path().join("webui");
    fs::create_dir(&webui).unwrap();
    fs::write(webui.join("index.html"), "<!doctype html><title>ui</title>").unwrap();
    let log = work.path().join("serve.log");
    let port = free_port();
    let mut child = sessiondb(&work.path().join("db"))
        .args(["serve", "--no-auth", "--port", &port.to_string(), "--webui-dir"])
        .arg(&webui)
        .arg(&logs)
        .env("SESSIONDB_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none(), "serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let chat = "2026-07-05-branches";
    assert!(!logs.join(chat).join("config.toml").exists());
    let (status, _, body) = http(port, "GET", &format!("/api/v2/conversations/{chat}/config"), &[], b"");
    let config = json(&body);
    crate::serve::stop(&mut child);
    assert_eq!(status, 200, "{config}");
    let workspace = logs.join(chat).join("workspace");
    assert_eq!(config, serde_json::json!({"chat": {"stream": true, "interactive": true, "workspace": workspace.display().to_string()}, "env": {}}));
    assert!(!logs.join(chat).join("config.toml").exists() && !workspace.exists(), "nothing written");

    let text = fs::read_to_string(&log).unwrap();
    assert!(!text.contains("Some("), "{text}");
    assert!(text.contains(&format!("webui={}", webui.display())), "{text}");
    let durations: Vec<&str> = text.split_whitespace().filter_map(|w| w.strip_prefix("ms=")).collect();
    assert!(durations.len() >= 2, "the first sync and the request give their times: {text}");
    for ms in durations {
        let decimals = ms.split_once('.').map_or(0, |(_, d)| d.len());
        assert!(ms.parse::<f64>().is_ok() && decimals <= 1, "ms={ms}: milliseconds to one decimal\n{text}");
    }
}

/// Item 2: `tools/demo.sh` runs the binary cargo reports having built, wherever that is (with
/// `CARGO_TARGET_DIR` set, it is not `target/release`), never a path of its own. The `cargo` it
/// runs here is a stand-in that reports this test build's binary, as cargo's JSON messages do
/// (a real build inside the suite would rebuild the crate: `tools/demo.sh --debug` with
/// `CARGO_TARGET_DIR` was run against real cargo by hand).
#[test]
fn the_demo_runs_the_binary_cargo_reports() {
    let work = tempfile::tempdir().unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_sessiondb"));
    let args_seen = work.path().join("cargo-args");
    let stand_in = work.path().join("cargo");
    let artifact = serde_json::json!({"reason": "compiler-artifact", "target": {"name": "sessiondb"}, "executable": bin});
    fs::write(&stand_in, format!("#!/bin/sh\necho \"$@\" >> '{}'\necho '{artifact}'\n", args_seen.display())).unwrap();
    fs::set_permissions(&stand_in, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", work.path().display(), std::env::var("PATH").unwrap_or_default());
    let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/demo.sh");
    for (flag, profile) in [(None, "--release"), (Some("--debug"), "")] {
        let out = Command::new("bash")
            .arg(&demo)
            .args(flag)
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", work.path().join("elsewhere"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "tools/demo.sh {flag:?} failed ({:?}):\n{stdout}\n{stderr}", out.status);
        assert!(stdout.contains("imported 18 conversations") && stdout.contains("18 conversations"), "{stdout}");
        assert!(stdout.contains(&format!("Keep using it: {}", bin.display())), "{stdout}");
        let asked = fs::read_to_string(&args_seen).unwrap();
        let last = asked.lines().last().unwrap();
        assert!(last.starts_with("build") && last.contains("--message-format=json") && last.contains(profile), "cargo was asked: {last}");
        assert_eq!(last.contains("--release"), flag.is_none(), "cargo was asked: {last}");
    }
}
