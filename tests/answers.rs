//! Issue 32, "the first hour" again: what the commands answer, worded so that a person can act
//! on it. Search counts say "20 of 2,000" and name each conversation by the id the other
//! commands take; a match's message number leads `read --start` straight to it; a mistyped
//! flag is named; `stats` leaves a cost that is not a number out, saying so; `recover` tells a
//! healthy conversation from a damaged one; the note about new conversations speaks of the
//! roots the store reads; and refusals follow one rule (exit 2 for a filter naming nothing;
//! "did you mean" for an unknown chat id, the branches there are for an unknown branch, where a
//! path came from).

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixtures, run_ok, sessiondb};
use serde_json::Value;

/// The fixtures copied to `work/logs` and imported into `work/sessions.db`.
fn imported(work: &Path) -> (PathBuf, PathBuf) {
    let logs = work.join("logs");
    run_ok(Command::new("cp").arg("-r").arg(fixtures()).arg(&logs));
    let db = work.join("sessions.db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    (logs, db)
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run_ok(cmd).stdout).unwrap()
}

/// Item 4: the header counts the page among every match, plurals right; `-m` says what it
/// hides. Item 8: each conversation by its id, the name beside it.
#[test]
fn search_counts_the_page_among_every_match_and_names_ids() {
    let work = tempfile::tempdir().unwrap();
    let (_logs, db) = imported(work.path());
    let page: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "the", "--json"])).stdout).unwrap();
    let (conversations, messages) = (page["total"]["conversations"].as_u64().unwrap(), page["total"]["messages"].as_u64().unwrap());
    let text = stdout(sessiondb(&db).args(["search", "the", "-n", "2"]));
    let header = text.lines().next().unwrap();
    assert_eq!(header, format!("Search results for 'the' (2 of {conversations} conversations, {messages} matching messages; `-n 0` shows them all):"), "{text}");
    let next = stdout(sessiondb(&db).args(["search", "the", "-n", "2", "--offset", "2"]));
    assert!(next.starts_with(&format!("Search results for 'the' (3–4 of {conversations} conversations")), "{next}");
    // A conversation with more matches than -m shows says so.
    let many = page["results"].as_array().unwrap().iter().find(|r| r["matches"].as_u64().unwrap() > 1).expect("a conversation with two matches");
    let all = stdout(sessiondb(&db).args(["search", "the", "-n", "0"]));
    let line = all.lines().find(|l| l.contains(&format!(". {} (", many["id"].as_str().unwrap()))).unwrap_or_else(|| panic!("{all}"));
    assert!(line.ends_with(&format!("({} matches, 1 shown; `-m {}` shows them all):", many["matches"], many["matches"])), "{line}");
    // One of each: singular.
    let one = stdout(sessiondb(&db).args(["search", "welcome"]));
    assert!(one.starts_with("Search results for 'welcome' (1 conversation, 1 matching message):"), "{one}");
    assert!(one.contains("\n1. 2026-07-01-basic-chat (1 match):"), "{one}");
    // A named conversation: its id, which `read` takes, then its name.
    let named = stdout(sessiondb(&db).args(["search", "Great", "--chat", "2026-07-09-named-chat"]));
    let row = named.lines().find(|l| l.starts_with("1. ")).unwrap();
    assert!(row.starts_with("1. 2026-07-09-named-chat — Export plan"), "{named}");
    let id = row.trim_start_matches("1. ").split(' ').next().unwrap();
    run_ok(sessiondb(&db).args(["read", id]));
}

/// Item 6: a mistyped flag is named, with the flag it resembles; a query beginning with `-`
/// comes after `--`.
#[test]
fn a_mistyped_flag_is_named_not_searched_for() {
    let work = tempfile::tempdir().unwrap();
    let (_logs, db) = imported(work.path());
    let out = sessiondb(&db).args(["search", "--lmit", "5", "capital"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unexpected argument '--lmit'") && err.contains("'--limit'"), "{err}");
    run_ok(sessiondb(&db).args(["search", "--", "-foo"]));
}

/// Item 9: a match's message number is where `read --start` finds it; a page that stops early
/// says where the next begins, one past the end says how far the messages go.
#[test]
fn a_match_leads_read_straight_to_its_message() {
    let work = tempfile::tempdir().unwrap();
    let (_logs, db) = imported(work.path());
    for (query, chat) in [("welcome", "2026-07-01-basic-chat"), ("Makefile", "2026-07-01-basic-chat"), ("Continuing", "2026-07-11-manual-compact")] {
        let page: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", query, "--chat", chat, "--json"])).stdout).unwrap();
        let hit = &page["results"][0]["snippets"][0];
        let index = hit["index"].as_u64().unwrap().to_string();
        let text = stdout(sessiondb(&db).args(["search", query, "--chat", chat]));
        assert!(text.contains(&format!("message {index}, ")), "{text}");
        let read = stdout(sessiondb(&db).args(["read", chat, "--system", "-n", "1", "--start", &index]));
        let first = read.lines().nth(1).unwrap_or_else(|| panic!("{query}: read --start {index} shows nothing:\n{read}"));
        let role = hit["role"].as_str().unwrap();
        assert!(first.to_lowercase().starts_with(&format!("{index}. {role}: ")), "{query}: {read}");
    }
    let read = stdout(sessiondb(&db).args(["read", "2026-07-01-basic-chat", "-n", "2"]));
    assert!(read.ends_with("More messages follow: `sessiondb read 2026-07-01-basic-chat --start 3` reads on (`-n 0` reads them all)\n"), "{read}");
    let past = stdout(sessiondb(&db).args(["read", "2026-07-01-basic-chat", "--start", "40"]));
    assert!(past.contains("No message 40: the branch's messages are numbered 0 to 8"), "{past}");
}

/// Item 7: a cost that is not a number is left out of every total of `stats`, which says so.
#[test]
fn stats_leave_a_cost_that_is_not_a_number_out_and_say_so() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for (id, cost) in [("priced", "0.5"), ("damaged", "NaN")] {
        fs::create_dir_all(logs.join(id)).unwrap();
        let lines = [
            r#"{"role": "user", "content": "q", "timestamp": "2026-07-16T10:00:00"}"#.to_owned(),
            format!(
                r#"{{"role": "assistant", "content": "a", "timestamp": "2026-07-16T10:00:05", "metadata": {{"model": "m", "cost": {cost}, "usage": {{"input_tokens": 1}}}}}}"#
            ),
            r#"{"role": "assistant", "content": "b", "timestamp": "2026-07-16T10:00:06", "metadata": {"model": "m", "cost": 0.25}}"#.to_owned(),
        ];
        fs::write(logs.join(id).join("conversation.jsonl"), lines.join("\n") + "\n").unwrap();
    }
    let db = work.path().join("sessions.db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let overview: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["stats", "--json", "--by", "model"])).stdout).unwrap();
    assert_eq!(overview["total_cost"], 1.0, "{overview}");
    assert_eq!(overview["by_model"]["m"]["cost"], 1.0, "{overview}");
    assert_eq!(overview["breakdown"]["m"]["cost"], 1.0, "{overview}");
    assert_eq!(overview["costs_left_out"], serde_json::json!({"messages": 1, "conversations": ["damaged"]}));
    let one: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["stats", "damaged", "--json"])).stdout).unwrap();
    assert_eq!(one["usage"]["cost"], 0.25, "{one}");
    for args in [&["stats"][..], &["stats", "damaged"]] {
        let text = stdout(sessiondb(&db).args(args));
        assert!(!text.contains("$nan"), "{args:?}:\n{text}");
        assert!(text.contains("(left out: 1 cost that is not a number, in damaged)"), "{args:?}:\n{text}");
    }
    // `list` keeps gptme's figure for the conversation itself.
    assert!(stdout(sessiondb(&db).args(["list"])).contains("$nan"));
}

/// Item 10: a healthy conversation (its event log never holds the system prompt) is said to be
/// sound, with no `--apply` suggested; a transcript cut short is, and `--apply` keeps the prompt.
#[test]
fn recover_tells_a_healthy_conversation_from_a_damaged_one() {
    let work = tempfile::tempdir().unwrap();
    let (logs, db) = imported(work.path());
    let healthy = stdout(sessiondb(&db).args(["recover", "2026-07-01-basic-chat"]));
    assert!(healthy.contains("it is sound, nothing to recover") && !healthy.contains("--apply"), "{healthy}");
    let json: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["recover", "2026-07-01-basic-chat", "--json"])).stdout).unwrap();
    assert_eq!((json["equal"].clone(), json["prompt"].clone(), json["standing"].clone()), (Value::Bool(true), 1.into(), "same".into()), "{json}");
    // Cut short, as by a crash: the last two lines lost.
    let transcript = logs.join("2026-07-01-basic-chat/conversation.jsonl");
    let text = fs::read_to_string(&transcript).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    fs::write(&transcript, kept[..kept.len() - 2].join("\n") + "\n").unwrap();
    let short = stdout(sessiondb(&db).args(["recover", "2026-07-01-basic-chat"]));
    assert!(short.contains("the branch stops short") && short.contains("`--apply` restores them"), "{short}");
    run_ok(sessiondb(&db).args(["recover", "2026-07-01-basic-chat", "--apply"]));
    let restored = fs::read_to_string(&transcript).unwrap();
    assert_eq!(restored.lines().count(), kept.len(), "{restored}");
    assert!(restored.starts_with(kept[0]), "the system prompt is kept:\n{restored}");
}

/// Item 5: the note about conversations not yet synced speaks of the roots the store reads,
/// never of gptme's default root when the store was built from another.
#[test]
fn the_sync_note_speaks_of_the_roots_the_store_reads() {
    let work = tempfile::tempdir().unwrap();
    let (logs, db) = imported(work.path());
    // gptme's default root, never read, holds other conversations.
    let home = work.path().join("home");
    let default_root = home.join(".local/share/gptme/logs");
    fs::create_dir_all(default_root.parent().unwrap()).unwrap();
    run_ok(Command::new("cp").arg("-r").arg(fixtures()).arg(&default_root));
    let run = |args: &[&str]| -> String {
        let out = sessiondb(&db)
            .args(args)
            .env("HOME", &home)
            .env_remove("GPTME_LOGS_HOME")
            .env_remove("XDG_DATA_HOME")
            .env("XDG_CONFIG_HOME", work.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    for args in [&["list"][..], &["search", "capital"], &["stats"]] {
        let err = run(args);
        assert!(!err.contains("gptme/logs") && !err.contains("not included"), "{args:?}: {err}");
    }
    // A conversation new in the root the store reads is noted, with the sync that brings it in.
    fs::create_dir_all(logs.join("brand-new")).unwrap();
    fs::write(logs.join("brand-new/conversation.jsonl"), "{\"role\": \"user\", \"content\": \"hi\"}\n").unwrap();
    let err = run(&["list"]);
    assert!(
        err.contains(&format!("1 new conversation in {} since the last sync is not included; `sessiondb sync {}` brings them in", logs.display(), logs.display())),
        "{err}"
    );
}

/// Item 14: one rule for a filter naming nothing (exit 2, `list` as `search`); JSON snippets
/// are plain text; an unknown chat id gets "did you mean", an unknown branch the branches
/// there are; an error about a path says where the path came from.
#[test]
fn refusals_follow_one_rule_and_say_what_there_is() {
    let work = tempfile::tempdir().unwrap();
    let (_logs, db) = imported(work.path());
    for args in [&["list", "--model", "no-such-model"][..], &["search", "capital", "--model", "no-such-model"]] {
        let out = sessiondb(&db).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--model \"no-such-model\" names nothing in the store"), "{err}");
    }
    let page: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "welcome", "--json"])).stdout).unwrap();
    assert_eq!(page["results"][0]["snippets"][0]["snippet"], "You're welcome!", "{page}");
    assert_eq!(page["results"][0]["snippets"][0]["highlighted"], "You're **welcome**!", "{page}");

    let out = sessiondb(&db).args(["read", "2026-07-01-basic-caht"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("did you mean") && err.contains("2026-07-01-basic-chat"), "{err}");
    let out = sessiondb(&db).args(["show", "2026-07-05-branches", "--branch", "nope"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("has no branch \"nope\"; its branches are main, "), "{err}");

    // A logs root and a database named by the configuration file.
    let config = work.path().join("config/sessiondb/config.toml");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::write(&config, "logs = \"/nonexistent/logs\"\ndb = \"/nonexistent/sessions.db\"\n").unwrap();
    let bare = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiondb"))
            .args(args)
            .env("XDG_CONFIG_HOME", work.path().join("config"))
            .env("HOME", work.path())
            .env_remove("SESSIONDB_DB")
            .env_remove("GPTME_LOGS_HOME")
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let err = bare(&["sync"]);
    assert!(err.contains("/nonexistent/logs: not found") && err.contains(&format!("the `logs` of {}", config.display())), "{err}");
    let err = bare(&["list"]);
    assert!(err.contains("/nonexistent/sessions.db") && err.contains(&format!("the `db` of {}", config.display())), "{err}");
}
