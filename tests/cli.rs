//! The command line's promises: where the database lives and how it is protected, where gptme's
//! logs are found, and what `list`, `show` and `import --json` print.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::{fixtures, run_ok, sessiondb};
use serde_json::Value;

fn bare() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiondb"));
    for var in ["SESSIONDB_DB", "GPTME_LOGS_HOME", "XDG_DATA_HOME"] {
        cmd.env_remove(var);
    }
    cmd
}

fn conversation(logs: &Path, id: &str, lines: &[&str]) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("conversation.jsonl"), lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

#[test]
fn default_paths_follow_xdg_and_gptme() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    conversation(&data.join("gptme/logs"), "from-xdg", &[r#"{"role": "user", "content": "hi"}"#]);
    run_ok(bare().env("HOME", home.path()).env("XDG_DATA_HOME", &data).arg("import"));
    let db = data.join("sessiondb/sessions.db");
    assert!(db.exists(), "database at $XDG_DATA_HOME/sessiondb/sessions.db");
    assert_eq!(fs::metadata(&db).unwrap().permissions().mode() & 0o777, 0o600);

    // GPTME_LOGS_HOME wins over XDG; without XDG_DATA_HOME, the database goes under ~/.local/share.
    let logs = home.path().join("elsewhere");
    conversation(&logs, "from-gptme-home", &[r#"{"role": "user", "content": "hi"}"#]);
    run_ok(bare().env("HOME", home.path()).env("GPTME_LOGS_HOME", &logs).arg("import"));
    let list = run_ok(bare().env("HOME", home.path()).args(["list", "--json"]));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], "from-gptme-home");
    assert!(home.path().join(".local/share/sessiondb/sessions.db").exists());
}

#[test]
fn sessiondb_db_overrides_and_db_flag_overrides_that() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "c", &[r#"{"role": "user", "content": "hi"}"#]);
    let from_env = work.path().join("env.db");
    let from_flag = work.path().join("flag.db");
    run_ok(bare().env("SESSIONDB_DB", &from_env).arg("import").arg(&logs));
    assert!(from_env.exists());
    run_ok(bare().env("SESSIONDB_DB", &from_env).arg("--db").arg(&from_flag).arg("import").arg(&logs));
    assert!(from_flag.exists());
    assert_eq!(fs::metadata(&from_flag).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn import_json_summary_counts_everything() {
    common::on_each_engine(|work, db| {
        let out = run_ok(sessiondb(db).arg("import").arg(fixtures()).arg("--json"));
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in ["conversations", "unchanged", "failed", "messages", "branches", "views", "events", "attachments", "bytes", "seconds", "warnings"] {
            assert!(s.get(key).is_some(), "summary has {key}: {s}");
        }
        assert_eq!(s["failed"], 0);
        assert!(s["conversations"].as_u64().unwrap() >= 15, "{s}");
        assert!(s["views"].as_u64().unwrap() >= 1 && s["attachments"].as_u64().unwrap() >= 1 && s["events"].as_u64().unwrap() > 100, "{s}");
        let human = run_ok(sessiondb(&work.join("db2")).arg("import").arg(fixtures()));
        let line = String::from_utf8_lossy(&human.stdout);
        assert!(line.starts_with("imported ") && line.contains(" messages, ") && line.contains(" s"), "{line}");
    })
}

#[test]
fn list_hides_test_conversations_unless_all() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        for id in ["real-chat", "tmpabc", "test-x", "run-gptme-evals-1"] {
            conversation(&logs, id, &[r#"{"role": "user", "content": "hi"}"#]);
        }
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let ids = |args: &[&str]| -> Vec<String> {
            let out = run_ok(sessiondb(db).args(args));
            let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
            let mut ids: Vec<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&["list", "--json"]), ["real-chat"]);
        assert_eq!(ids(&["list", "--json", "--all"]), ["real-chat", "run-gptme-evals-1", "test-x", "tmpabc"]);
        assert_eq!(ids(&["list", "--json", "--all", "-n", "2"]).len(), 2);
    })
}

#[test]
fn show_prints_branches_as_gptme_lines() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        let a = r#"{"role": "user", "content": "caf\u00e9", "timestamp": "2026-01-01T00:00:00"}"#;
        let legacy = r#"{"content":"legacy","role":"assistant"}"#;
        conversation(&logs, "c", &[a, "", "{broken", legacy]);
        fs::create_dir_all(logs.join("c/branches")).unwrap();
        fs::write(logs.join("c/branches/alt.jsonl"), format!("{a}\n")).unwrap();
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let main = run_ok(sessiondb(db).args(["show", "c", "--json"]));
        assert_eq!(String::from_utf8_lossy(&main.stdout), format!("{a}\n{legacy}\n"), "messages only, exactly as stored");
        let alt = run_ok(sessiondb(db).args(["show", "c", "--branch", "alt", "--json"]));
        assert_eq!(String::from_utf8_lossy(&alt.stdout), format!("{a}\n"));
        let text = run_ok(sessiondb(db).args(["show", "c"]));
        assert!(String::from_utf8_lossy(&text.stdout).contains("user [2026-01-01T00:00:00]:\ncafé"));
        let missing = sessiondb(db).args(["show", "c", "--branch", "nope"]).output().unwrap();
        assert_eq!(missing.status.code(), Some(1));
        assert_eq!(String::from_utf8_lossy(&missing.stderr).trim(), "sessiondb: conversation \"c\" has no branch \"nope\"; its branches are main, alt");
    })
}

#[test]
fn a_newer_schema_is_refused_untouched() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("db");
    let logs = work.path().join("logs");
    fs::create_dir(&logs).unwrap();
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    let before = fs::read(&db).unwrap();
    let out = sessiondb(&db).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema version 999, newer than this sessiondb supports"));
    assert_eq!(fs::read(&db).unwrap(), before);
}

#[test]
fn diff_rm_and_clean() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).args(["new", "keep", "--logs-dir"]).arg(&logs));
    for (role, content) in [("user", "shared"), ("assistant", "reply")] {
        run_ok(sessiondb(&db).args(["append", "keep", "--role", role, "--content", content]));
    }
    run_ok(sessiondb(&db).args(["branch", "keep", "alt"]));
    run_ok(sessiondb(&db).args(["append", "keep", "--branch", "alt", "--role", "user", "--content", "alt only"]));
    let diff = String::from_utf8(run_ok(sessiondb(&db).args(["diff", "keep", "main", "alt"])).stdout).unwrap();
    assert_eq!(diff, "main and alt differ from message 3\n--- main\n+++ alt\n+ user: alt only\n");

    // clean: a dry run lists the empty conversations; --delete removes directory and rows.
    run_ok(sessiondb(&db).args(["new", "empty", "--logs-dir"]).arg(&logs));
    run_ok(sessiondb(&db).args(["new", "one", "--logs-dir"]).arg(&logs));
    run_ok(sessiondb(&db).args(["append", "one", "--role", "user", "--content", "hi"]));
    let dry: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["clean", "--json"])).stdout).unwrap();
    let mut found: Vec<&str> = dry["conversations"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    found.sort();
    assert_eq!(found, ["empty", "one"]);
    assert_eq!(dry["deleted"], 0);
    assert!(logs.join("empty").exists());
    let done: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["clean", "--json", "--max-messages", "0", "--delete"])).stdout).unwrap();
    assert_eq!(done["deleted"], 1);
    assert!(!logs.join("empty").exists() && logs.join("one").exists());

    run_ok(sessiondb(&db).args(["rm", "--yes", "one"]));
    assert!(!logs.join("one").exists());
    let list: Vec<Value> = serde_json::from_slice(&run_ok(sessiondb(&db).args(["list", "--json", "--all"])).stdout).unwrap();
    assert_eq!(list.iter().map(|c| c["id"].as_str().unwrap()).collect::<Vec<_>>(), ["keep"]);
    let orphans: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orphans, 0);
}

#[test]
fn list_filters_and_sorts() {
    common::on_each_engine(|_work, db| {
        run_ok(sessiondb(db).arg("import").arg(fixtures()));
        let ids = |args: &[&str]| -> Vec<String> {
            let out = run_ok(sessiondb(db).args(["list", "--json", "--all"]).args(args));
            let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
        };
        let costs = |args: &[&str]| -> Vec<f64> {
            let out = run_ok(sessiondb(db).args(["list", "--json", "--all"]).args(args));
            let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            rows.iter().map(|r| r["total_cost"].as_f64().unwrap_or(0.0)).collect()
        };
        let by_cost = costs(&["--sort", "cost"]);
        assert!(by_cost.windows(2).all(|w| w[0] >= w[1]), "{by_cost:?}");
        let reversed = costs(&["--sort", "cost", "--reverse"]);
        assert!(reversed.windows(2).all(|w| w[0] <= w[1]), "{reversed:?}");
        assert_eq!(ids(&["--model", "openai/gpt-4"]), ["2024-01-15-legacy-flat-tokens"]);
        let mut legacy = ids(&["--name", "*legacy*"]);
        legacy.sort();
        assert_eq!(legacy, ["2024-01-15-legacy-flat-tokens", "2025-03-10-legacy-events"]);
        assert!(ids(&["--since", "2999-01-01"]).is_empty());
        assert_eq!(ids(&["--until", "2999-01-01"]).len(), ids(&[]).len());
        let by_messages = ids(&["--sort", "messages", "-n", "1"]);
        assert_eq!(by_messages, ["2026-07-07-long-conversation"]);
        // Every order: --reverse is the listing backwards, ties included, and -n K its first K
        // (SQLite once planned -n 1 and -n 2 differently from larger limits).
        for key in ["modified", "created", "cost", "tokens", "messages"] {
            let all = ids(&["--sort", key]);
            let mut backwards = ids(&["--sort", key, "--reverse"]);
            backwards.reverse();
            assert_eq!(backwards, all, "--sort {key} --reverse");
            for k in [1, 2, 3] {
                assert_eq!(ids(&["--sort", key, "-n", &k.to_string()]), all[..k.min(all.len())], "--sort {key} -n {k}");
            }
        }
    })
}

#[test]
fn html_export_completions_and_man() {
    common::on_each_engine(|work, db| {
        run_ok(sessiondb(db).arg("import").arg(fixtures()));
        let page = work.join("page.html");
        run_ok(sessiondb(db).args(["export", "--format", "html", "2026-07-02-unicode-stress", "-o"]).arg(&page));
        let html = fs::read_to_string(&page).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<style>"));
        assert!(!html.contains("<script") && !html.contains("http://cdn") && !html.contains("src=\"http"), "self-contained, no scripts");
        assert!(html.contains("中文") && html.contains("style=\"color:"), "content and highlighted code");
        for shell in ["bash", "zsh", "fish"] {
            let out = run_ok(sessiondb(db).args(["completions", shell]));
            assert!(String::from_utf8_lossy(&out.stdout).contains("sessiondb"), "{shell}");
        }
        let man = run_ok(std::process::Command::new(env!("CARGO_BIN_EXE_sessiondb")).arg("man"));
        assert!(String::from_utf8_lossy(&man.stdout).contains(".TH sessiondb 1"));
    })
}

#[test]
fn role_counts_follow_every_write() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        run_ok(sessiondb(db).args(["new", "r", "--logs-dir"]).arg(&logs));
        for (role, content) in [("system", "s"), ("user", "u"), ("assistant", "a")] {
            run_ok(sessiondb(db).args(["append", "r", "--role", role, "--content", content]));
        }
        let by_role = || -> Value {
            let out = run_ok(sessiondb(db).args(["stats", "--json"]));
            serde_json::from_slice::<Value>(&out.stdout).unwrap()["by_role"].clone()
        };
        assert_eq!(by_role(), serde_json::json!({"assistant": 1, "system": 1, "user": 1}));
        run_ok(sessiondb(db).args(["undo", "r"]));
        assert_eq!(by_role(), serde_json::json!({"system": 1, "user": 1}));
        let detail: Value = serde_json::from_slice(&run_ok(sessiondb(db).args(["stats", "r", "--json"])).stdout).unwrap();
        assert_eq!(detail["messages"]["by_role"], serde_json::json!({"system": 1, "user": 1}));
    })
}

/// `sessiondb list | head -1` and the like: when the reader of standard output goes away, the
/// command ends quietly (by SIGPIPE, as Unix tools do), with nothing on standard error.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let line = format!(r#"{{"role": "user", "content": "needle {}"}}"#, "hay ".repeat(400));
    conversation(&logs, "big", &vec![line.as_str(); 400]);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let commands: &[&[&str]] = &[
        &["list"],
        &["list", "--json"],
        &["read", "big", "--full", "-n", "400"],
        &["search", "needle"],
        &["show", "big"],
        &["export", "--format", "markdown", "big", "-o", "-"],
        &["export", "--format", "html", "big", "-o", "-"],
    ];
    for args in commands {
        let mut child = sessiondb(&db).args(*args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // As `head -c 10`: read a little, then go away.
        let mut first = [0u8; 10];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.stderr.is_empty(), "{args:?} wrote to standard error: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() || out.status.signal() == Some(libc::SIGPIPE), "{args:?} ended with {}", out.status);
    }
}

/// Issue 16, item 6: `doctor` shows what it is checking on a terminal (nothing of it goes to a
/// pipe), and names a count and the first few conversations of each kind rather than hundreds
/// of ids on one line; `--json` lists them all.
#[test]
fn doctor_shows_progress_on_a_terminal_and_lists_a_few_ids() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        let user = r#"{"role": "user", "content": "hello", "timestamp": "2026-12-04T10:00:00"}"#;
        let ids: Vec<String> = (0..12).map(|i| format!("conv-{i:02}")).collect();
        for id in &ids {
            conversation(&logs, id, &[user]);
        }
        run_ok(sessiondb(db).arg("import").arg(&logs));
        for id in &ids {
            let mut f = fs::OpenOptions::new().append(true).open(logs.join(id).join("conversation.jsonl")).unwrap();
            std::io::Write::write_all(&mut f, format!("{user}\n").as_bytes()).unwrap();
        }

        let out = sessiondb(db).arg("doctor").arg(&logs).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().find(|l| l.contains("changed since the last sync")).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            line.trim(),
            "12 changed since the last sync (`sessiondb sync` reads them): conv-00, conv-01, conv-02, conv-03, conv-04, and 7 more (`--json` lists them all)"
        );
        assert!(!String::from_utf8_lossy(&out.stderr).contains("checking"), "no progress drawn into a pipe");
        let json: Value = serde_json::from_slice(&sessiondb(db).arg("doctor").arg(&logs).arg("--json").output().unwrap().stdout).unwrap();
        assert_eq!(json["sync"]["changed"].as_array().unwrap().len(), 12);

        if Command::new("script").arg("--version").output().is_err() {
            eprintln!("SKIPPED (terminal half): `script` (util-linux) is not installed");
            return;
        }
        let command = format!("{} --db '{}' doctor '{}'", env!("CARGO_BIN_EXE_sessiondb"), db.display(), logs.display());
        let out = Command::new("script").args(["-qec", &command, "/dev/null"]).env("TERM", "xterm").output().unwrap();
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(shown.contains("checking"), "progress on a terminal: {shown:?}");
    })
}

/// Issue 16, item 13: `rm` removes a conversation's rows and its directory only once the user
/// has seen what goes: `--dry-run` shows it and removes nothing; without a terminal to ask on,
/// it needs `--yes`; on a terminal it asks, and anything but yes keeps everything.
#[test]
fn rm_shows_what_goes_and_asks_first() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        run_ok(sessiondb(db).args(["new", "doomed", "--logs-dir"]).arg(&logs));
        run_ok(sessiondb(db).args(["append", "doomed", "--role", "user", "--content", "hi"]));
        let present = || logs.join("doomed").exists() && sessiondb(db).args(["show", "doomed"]).output().unwrap().status.success();

        let dry = run_ok(sessiondb(db).args(["rm", "doomed", "--dry-run"]));
        let said = String::from_utf8_lossy(&dry.stdout);
        assert!(said.starts_with("would remove doomed: 1 message, 1 branch, from the store and from gptme: its directory "), "{said}");
        assert!(present());
        // What gptme wrote since the last sync is what goes too, and is shown.
        let transcript = logs.join("doomed/conversation.jsonl");
        let mut text = std::fs::read_to_string(&transcript).unwrap();
        text.push_str("{\"role\": \"assistant\", \"content\": \"written by gptme\", \"timestamp\": \"2026-01-01T00:00:00\"}\n");
        std::fs::write(&transcript, text).unwrap();
        let said = String::from_utf8(run_ok(sessiondb(db).args(["rm", "doomed", "--dry-run"])).stdout).unwrap();
        assert!(said.starts_with("would remove doomed: 2 messages, 1 branch,"), "{said}");
        // A directory the store never read is not read in by `rm`: nothing to remove there.
        let never = logs.join("never-read");
        std::fs::create_dir(&never).unwrap();
        std::fs::write(never.join("conversation.jsonl"), "{\"role\": \"user\", \"content\": \"x\", \"timestamp\": \"2026-01-01T00:00:00\"}\n").unwrap();
        let out = sessiondb(db).args(["rm", "never-read", "--dry-run"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(never.join("conversation.jsonl").exists());
        assert!(!String::from_utf8_lossy(&run_ok(sessiondb(db).args(["list", "--json"])).stdout).contains("never-read"));

        let refused = sessiondb(db).args(["rm", "doomed"]).stdin(std::process::Stdio::null()).output().unwrap();
        assert_eq!(refused.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&refused.stderr).contains("give --yes"), "{}", String::from_utf8_lossy(&refused.stderr));
        assert!(present());

        if Command::new("script").arg("--version").output().is_ok() {
            let command = format!("{} --db '{}' rm doomed", env!("CARGO_BIN_EXE_sessiondb"), db.display());
            let ask = |answer: &str| {
                let mut child = Command::new("script")
                    .args(["-qec", &command, "/dev/null"])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                std::io::Write::write_all(child.stdin.as_mut().unwrap(), format!("{answer}\n").as_bytes()).unwrap();
                let out = child.wait_with_output().unwrap();
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let shown = ask("n");
            assert!(shown.contains("remove doomed: 2 messages,") && shown.contains("[y/N]"), "{shown}");
            assert!(present(), "answered no: {shown}");
            ask("y");
            assert!(!present(), "answered yes");
        } else {
            eprintln!("SKIPPED (terminal half): `script` (util-linux) is not installed");
            run_ok(sessiondb(db).args(["rm", "--yes", "doomed"]));
            assert!(!present());
        }
    })
}

/// Issue 16, item 13: an edit is checked whole before it starts. A new message with a role
/// `append` would refuse is refused (`edit --toml` and `import --toml` alike); a TOML saved
/// back unchanged changes nothing (no backup branch); one with no messages would empty the
/// branch, so without a terminal to ask on it needs `--allow-empty`.
#[test]
fn edits_are_checked_before_they_change_anything() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        run_ok(sessiondb(db).args(["new", "e", "--logs-dir"]).arg(&logs));
        run_ok(sessiondb(db).args(["append", "e", "--role", "user", "--content", "hello"]));
        let branches = || String::from_utf8(run_ok(sessiondb(db).args(["branches", "e"])).stdout).unwrap();
        let before = branches();
        let toml = work.join("e.toml");
        let shown = run_ok(sessiondb(db).args(["export", "--format", "toml", "e"])).stdout;

        fs::write(&toml, &shown).unwrap();
        for args in [&["edit", "e", "--toml"][..], &["import", "e", "--toml"]] {
            let out = run_ok(sessiondb(db).args(args).arg(&toml));
            assert_eq!(String::from_utf8_lossy(&out.stdout), "no changes\n", "{args:?}");
        }
        assert_eq!(branches(), before, "no backup of an unchanged edit");

        fs::write(&toml, [&shown[..], b"\n[[messages]]\nrole = \"robot\"\ncontent = \"beep\"\n"].concat()).unwrap();
        for args in [&["edit", "e", "--toml"][..], &["import", "e", "--toml"]] {
            let out = sessiondb(db).args(args).arg(&toml).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && err.contains("message 2: role must be system, user or assistant, not \"robot\"; nothing changed"), "{args:?}: {err}");
        }

        fs::write(&toml, "").unwrap();
        let out = sessiondb(db).args(["edit", "e", "--toml"]).arg(&toml).stdin(std::process::Stdio::null()).output().unwrap();
        assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--allow-empty"), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(branches(), before, "refusals change nothing");
        run_ok(sessiondb(db).args(["edit", "e", "--allow-empty", "--toml"]).arg(&toml));
        assert!(String::from_utf8_lossy(&run_ok(sessiondb(db).args(["show", "e"])).stdout).trim().is_empty());
    })
}

/// Issue 16, item 16: completion knows the store. The shell asks sessiondb itself (clap's
/// dynamic engine, here through fish's protocol: one `value<TAB>help` line each): chat ids
/// complete wherever a command takes one (a conversation's name as the help, on one line),
/// branch names wherever it takes a branch, and `search --role` offers roles, never file
/// names. `completions bash` prints the script that asks.
#[test]
fn completion_offers_chat_ids_and_branches_from_the_store() {
    common::on_each_engine(|_work, db| {
        run_ok(sessiondb(db).arg("import").arg(fixtures()));
        let complete = |line: &[&str]| -> Vec<String> {
            let out = run_ok(bare().env("COMPLETE", "fish").env("SESSIONDB_DB", db).arg("--").args(line));
            String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
        };
        let ids = complete(&["sessiondb", "read", "2026-07-0"]);
        assert!(ids.iter().any(|l| l == "2026-07-01-basic-chat"), "{ids:?}");
        let named = ids.iter().find(|l| l.starts_with("2026-07-09-named-chat\t")).unwrap_or_else(|| panic!("{ids:?}"));
        assert_eq!(named.matches('\t').count(), 1, "the help is one field: {named:?}");
        for line in [
            &["sessiondb", "export", "--format", "toml", "2026-07-0"][..],
            &["sessiondb", "search", "x", "--chat", "2026-07-0"],
            &["sessiondb", "undo", "2026-07-0"],
        ] {
            assert!(complete(line).iter().any(|l| l == "2026-07-01-basic-chat"), "{line:?}");
        }
        let branches = complete(&["sessiondb", "show", "2026-07-05-branches", "--branch", ""]);
        assert!(branches.iter().any(|l| l == "main") && branches.len() > 1, "{branches:?}");
        let roles = complete(&["sessiondb", "search", "x", "--role", ""]);
        assert!(roles.iter().any(|l| l.starts_with("user")) && !roles.iter().any(|l| l.contains('/')), "{roles:?}");
        let script = String::from_utf8(run_ok(bare().args(["completions", "bash"])).stdout).unwrap();
        assert!(script.contains("COMPLETE=\"bash\"") || script.contains("COMPLETE=bash"), "{script}");
    })
}
