//! Issue 16, "the first hour": what a new user meets first, one test per item. The listing
//! shows every chat id whole and fits the terminal in cells (CJK, emoji), at 80 and 200
//! columns, in colour and with `NO_COLOR` (on a pseudo-terminal); the errors a first session
//! runs into name the path, what is wrong and what to do.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::{run_ok, sessiondb, without_sgr};
use unicode_width::UnicodeWidthStr;

/// A conversation `id` under `logs`: one user message and one assistant reply by `model`,
/// with `name` as its display name when given.
fn conversation(logs: &Path, id: &str, name: Option<&str>, model: &str, preview: &str) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    let user = serde_json::json!({"role": "user", "content": preview, "timestamp": "2026-07-16T10:00:00"});
    let reply = serde_json::json!({"role": "assistant", "content": format!("reply to {preview}"), "timestamp": "2026-07-16T10:00:05",
        "metadata": {"model": model, "usage": {"input_tokens": 10, "output_tokens": 5, "cost": 0.01}}});
    fs::write(dir.join("conversation.jsonl"), format!("{user}\n{reply}\n")).unwrap();
    if let Some(name) = name {
        fs::write(dir.join("config.toml"), format!("[chat]\nname = {}\n", serde_json::to_string(name).unwrap())).unwrap();
    }
}

/// Ids, names and models a table must cope with: a long gptme-style id with a long name, CJK,
/// emoji, a long model name.
const CHATS: [(&str, Option<&str>, &str, &str); 4] = [
    (
        "2026-07-16-swimming-blue-fish-01",
        Some("A long display name that has to be cut at eighty columns"),
        "anthropic/claude-sonnet-4-20250514",
        "plan the release",
    ),
    ("中文对话", Some("中文名字的对话标题很长很长很长很长很长很长很长很长很长"), "openai/gpt-4o", "你好，世界！这是一个很长的预览很长的预览很长的预览很长的预览"),
    ("emoji-chat", Some("🚀 rocket launch plans 🚀 and more rockets 🚀🚀🚀🚀🚀🚀"), "openai/gpt-4o-mini", "🎉🎉🎉 party 🎉🎉🎉 party 🎉🎉🎉 party 🎉🎉🎉 party"),
    ("plain-id", None, "local/llama", "no display name here"),
];

fn imported() -> (tempfile::TempDir, std::path::PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for (id, name, model, preview) in CHATS {
        conversation(&logs, id, name, model, preview);
    }
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    (work, db)
}

/// `list` on a pseudo-terminal `columns` wide; its lines without colours.
fn list_on_terminal(db: &Path, columns: usize, colour: bool, args: &str) -> Vec<String> {
    let bin = env!("CARGO_BIN_EXE_sessiondb");
    let command = format!("stty cols {columns} rows 50; exec {bin} --db '{}' list {args}", db.display());
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &command, "/dev/null"]).env("TERM", "xterm").env_remove("COLUMNS");
    if colour {
        cmd.env_remove("NO_COLOR");
    } else {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "list: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n");
    assert_eq!(text.contains("\x1b["), colour, "coloured only without NO_COLOR: {text:?}");
    let plain = without_sgr(&text);
    assert!(!plain.contains('\x1b'), "only SGR sequences: {text:?}");
    plain.lines().map(str::to_owned).collect()
}

/// Where `needle` starts in `line`, in cells.
fn cell_offset(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|at| line[..at].width())
}

fn have_script() -> bool {
    let ok = Command::new("script").arg("--version").output().is_ok();
    if !ok {
        eprintln!("SKIPPED: `script` (util-linux) is not installed; no pseudo-terminal to test with");
    }
    ok
}

/// Items 1 and 2: every chat id whole, in one column, on every width; no line wider than the
/// terminal, in cells; MODEL widens with the terminal.
#[test]
fn list_shows_every_id_whole_and_fits_the_terminal_in_cells() {
    if !have_script() {
        return;
    }
    let (_work, db) = imported();
    for columns in [80, 200] {
        for colour in [true, false] {
            let lines = list_on_terminal(&db, columns, colour, "");
            let table = lines.join("\n");
            for line in &lines {
                assert!(line.width() <= columns, "{columns} columns, a line of {} cells: {line:?}\n{table}", line.width());
            }
            let header = &lines[0];
            let id_column = cell_offset(header, "ID").expect("an ID column");
            for (id, name, model, _) in CHATS {
                let row = lines.iter().find(|l| l.contains(id)).unwrap_or_else(|| panic!("{id} whole at {columns} columns:\n{table}"));
                assert_eq!(cell_offset(row, id), Some(id_column), "ids line up under ID at {columns} columns:\n{table}");
                // The name is still shown (cut), beside the id or on the line below.
                if let Some(name) = name {
                    let start: String = name.chars().take(3).collect();
                    assert!(table.contains(&start), "{name:?} shown at {columns} columns:\n{table}");
                }
                if columns == 200 {
                    assert!(row.contains(model), "{model} whole at 200 columns:\n{table}");
                }
            }
            assert_eq!(lines.last().unwrap(), "4 conversations");
        }
    }
    // At 80 columns the long model is cut, in the cells its column has, from the start: its
    // end is what tells models apart.
    let narrow = list_on_terminal(&db, 80, false, "").join("\n");
    assert!(!narrow.contains("anthropic/claude-sonnet-4-20250514"), "{narrow}");
    assert!(narrow.contains("…-20250514 "), "{narrow}");
}

/// Written to a pipe, nothing is cut: ids, names and models whole.
#[test]
fn list_to_a_pipe_cuts_nothing() {
    let (_work, db) = imported();
    let out = String::from_utf8(run_ok(sessiondb(&db).arg("list").env_remove("COLUMNS")).stdout).unwrap();
    for (id, name, model, _) in CHATS {
        assert!(out.contains(id) && out.contains(model), "{out}");
        if let Some(name) = name {
            assert!(out.contains(name), "{out}");
        }
    }
}

/// Item 1: `--model` matches a part of the name, ignoring case, or a glob.
#[test]
fn list_model_matches_as_users_type_it() {
    let (_work, db) = imported();
    let ids = |model: &str| -> Vec<String> {
        let out = run_ok(sessiondb(&db).args(["list", "--json", "--model", model]));
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let mut ids: Vec<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
        ids.sort();
        ids
    };
    assert_eq!(ids("gpt-4"), ["emoji-chat", "中文对话"]);
    assert_eq!(ids("GPT-4O-MINI"), ["emoji-chat"]);
    assert_eq!(ids("claude"), ["2026-07-16-swimming-blue-fish-01"]);
    assert_eq!(ids("openai/*"), ["emoji-chat", "中文对话"]);
    assert_eq!(ids("*/GPT-4?"), ["中文对话"]);
    assert_eq!(ids("gpt-4"), ids("openai/gpt-4"));
    // A model no conversation has is refused, as `search --model` refuses it (issue 32, item 14).
    let out = sessiondb(&db).args(["list", "--json", "--model", "gpt-5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        ids("gpt-4").len() == 2 && sessiondb(&db).args(["list", "--model", "llama*"]).output().unwrap().status.code() == Some(2),
        "a glob matches the whole name"
    );
}

/// Item 3: the table stops at a screenful (20) and says how to see the rest; `-n 0` lists all;
/// `--json` lists all; `--all` still means test conversations.
#[test]
fn list_defaults_to_a_screenful() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for i in 0..25 {
        conversation(&logs, &format!("chat-{i:02}"), None, "openai/gpt-4o", "hello");
    }
    conversation(&logs, "test-hidden", None, "openai/gpt-4o", "hello");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let rows = |args: &[&str]| -> (usize, String) {
        let out = String::from_utf8(run_ok(sessiondb(&db).arg("list").args(args)).stdout).unwrap();
        (out.lines().filter(|l| l.contains("chat-") || l.contains("test-hidden")).count(), out.lines().last().unwrap().to_owned())
    };
    assert_eq!(rows(&[]), (20, "20 of 25 conversations (`-n 0` lists them all)".to_owned()));
    assert_eq!(rows(&["-n", "0"]), (25, "25 conversations".to_owned()));
    assert_eq!(rows(&["--limit", "5"]), (5, "5 of 25 conversations (`-n 0` lists them all)".to_owned()));
    assert_eq!(rows(&["-n", "0", "--all"]), (26, "26 conversations".to_owned()));
    assert_eq!(rows(&["--all"]), (20, "20 of 26 conversations (`-n 0` lists them all)".to_owned()));
    let json: Vec<serde_json::Value> = serde_json::from_slice(&run_ok(sessiondb(&db).args(["list", "--json"])).stdout).unwrap();
    assert_eq!(json.len(), 25);
}

/// `sessiondb …` with `--db db`; its exit code and standard error, within `seconds`.
fn fails_quickly(cmd: &mut Command, seconds: u64) -> String {
    let started = std::time::Instant::now();
    let out = cmd.output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(seconds), "{cmd:?} took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "{cmd:?}: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8(out.stderr).unwrap()
}

/// Item 7: `--db` naming a directory or a file that is not a database fails at once, naming
/// the path and what is wrong, and leaves it as it was.
#[test]
fn db_that_is_not_a_database_fails_at_once() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "c", None, "m", "hi");
    let dir = work.path().join("a-directory");
    fs::create_dir(&dir).unwrap();
    let text = work.path().join("notes.txt");
    fs::write(&text, "these are my notes, not a database\n".repeat(100)).unwrap();
    for args in [&["list"][..], &["import", logs.to_str().unwrap()], &["sync", logs.to_str().unwrap()], &["search", "hi"], &["doctor"]] {
        let err = fails_quickly(sessiondb(&dir).args(args), 5);
        assert_eq!(err.trim_end(), format!("sessiondb: {} is not a database: it is a directory; give the database file", dir.display()), "{args:?}");
        if args[0] == "doctor" {
            // doctor reports a damaged database (and how to rebuild it) instead of refusing it.
            let out = sessiondb(&text).args(args).output().unwrap();
            assert_eq!(out.status.code(), Some(1));
            assert!(String::from_utf8_lossy(&out.stdout).contains("file is not a database"), "{out:?}");
        } else {
            let err = fails_quickly(sessiondb(&text).args(args), 5);
            assert_eq!(err.trim_end(), format!("sessiondb: {} is not a database: it is not an SQLite database file", text.display()), "{args:?}");
        }
    }
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "nothing written into the directory");
    assert_eq!(fs::read_to_string(&text).unwrap(), "these are my notes, not a database\n".repeat(100));
}

/// `--db` (or `SESSIONDB_DB`) given a URL — a team trying the store on its PostgreSQL server —
/// is refused, naming it, by every command; nothing is made where a URL read as a path would
/// point (`./postgres:/…`).
#[test]
fn a_database_url_is_refused_not_taken_for_a_path() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "c", None, "m", "hi");
    let cwd = work.path().join("cwd");
    fs::create_dir(&cwd).unwrap();
    let url = "mysql://me@localhost:5432/sessions";
    let said = format!(
        "sessiondb: {url} is a URL of a kind sessiondb does not open: give an SQLite file's path, or a postgres:// URL; mysql:// databases are not supported"
    );
    // A PostgreSQL URL is a server's database: one that does not answer is said at once.
    let server = "postgres://me:secret@127.0.0.1:1/sessions";
    let unreachable = "sessiondb: cannot connect to postgres://me:***@127.0.0.1:1/sessions: ";
    for args in [&["list"][..], &["import", logs.to_str().unwrap()], &["sync", logs.to_str().unwrap()], &["search", "hi"], &["stats"], &["doctor"], &["new", "x"]] {
        let err = fails_quickly(sessiondb(Path::new(url)).current_dir(&cwd).args(args), 5);
        assert_eq!(err.trim_end(), said, "{args:?}");
        let mut by_env = Command::new(env!("CARGO_BIN_EXE_sessiondb"));
        let err = fails_quickly(by_env.env("SESSIONDB_DB", url).current_dir(&cwd).args(args), 5);
        // Where the path came from is said (issue 32, item 14).
        assert_eq!(err.trim_end(), format!("{said} (the path is from SESSIONDB_DB)"), "SESSIONDB_DB: {args:?}");
        let err = fails_quickly(sessiondb(Path::new(server)).current_dir(&cwd).args(args), 5);
        assert!(err.starts_with(unreachable), "{args:?}: {err}");
        assert!(!err.contains("secret"), "{args:?}: {err}");
    }
    assert_eq!(fs::read_dir(&cwd).unwrap().count(), 0, "nothing made in the working directory");
}

/// Item 8: commands that only read never create a database; they say none is there and how to
/// make one. `import` (and `sync`, `new`) create it.
#[test]
fn reading_commands_never_create_a_database() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "c", None, "m", "hi");
    let db = work.path().join("typo/sessions.db");
    let out = work.path().join("out");
    let reading: &[&[&str]] = &[
        &["list"],
        &["list", "--json"],
        &["search", "hi"],
        &["stats"],
        &["show", "c"],
        &["read", "c"],
        &["doctor"],
        &["export", "--to", out.to_str().unwrap()],
        &["export", "--format", "markdown", "c"],
        &["diff", "c", "main", "other"],
        &["branches", "c"],
        &["checkpoints", "c"],
        &["next", "c"],
        &["clean"],
    ];
    for args in reading {
        let err = fails_quickly(sessiondb(&db).args(*args), 5);
        assert_eq!(err.trim_end(), format!("sessiondb: no database at {}: `sessiondb import` creates one from gptme's logs", db.display()), "{args:?}");
        assert!(!db.exists() && !db.parent().unwrap().exists(), "{args:?} created {}", db.display());
    }
    // Replacing a branch of a stored conversation needs the database it is stored in.
    let toml = work.path().join("c.toml");
    fs::write(&toml, "[[messages]]\nrole = \"user\"\ncontent = \"hi\"\n").unwrap();
    let err = fails_quickly(sessiondb(&db).args(["import", "--toml"]).arg(&toml).arg("c"), 5);
    assert!(err.starts_with("sessiondb: no database at"), "{err}");
    // `recover --dir` reads a directory, not the database: it needs none and makes none.
    run_ok(sessiondb(&db).args(["recover", "--dir"]).arg(logs.join("c")));
    assert!(!db.parent().unwrap().exists());
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    assert!(db.exists());
    let listed = String::from_utf8(run_ok(sessiondb(&db).arg("list")).stdout).unwrap();
    assert!(listed.ends_with("\n1 conversation\n"), "{listed}");
    for (i, creating) in [&["sync", logs.to_str().unwrap()][..], &["new", "fresh", "--logs-dir", logs.to_str().unwrap()]].iter().enumerate() {
        let db = work.path().join(format!("made-by-{i}.db"));
        run_ok(sessiondb(&db).args(*creating));
        assert!(db.exists(), "{creating:?} creates the database");
    }
}

/// A command that takes in a logs root and would create the database (`import`, `sync`,
/// `serve`, `mcp`) fails on a root that is not there — given, or the default one — before it
/// makes anything: an empty store left behind would answer later commands as an empty history.
#[test]
fn a_missing_logs_root_makes_no_database() {
    let work = tempfile::tempdir().unwrap();
    let home = work.path().join("home");
    fs::create_dir(&home).unwrap();
    let db = work.path().join("data/sessions.db");
    let typo = work.path().join("lgos");
    let default_root = home.join(".local/share/gptme/logs");
    let typo_text = typo.to_str().unwrap();
    let creating: &[(&[&str], &Path)] = &[
        (&["import", typo_text], &typo),
        (&["sync", typo_text], &typo),
        (&["sync", "--watch", typo_text], &typo),
        (&["serve", "--port", "1", typo_text], &typo),
        (&["mcp", typo_text], &typo),
        (&["import"], &default_root),
        (&["sync"], &default_root),
        (&["serve", "--port", "1"], &default_root),
    ];
    for (args, root) in creating {
        let mut cmd = sessiondb(&db);
        cmd.args(*args).env("HOME", &home).env_remove("XDG_DATA_HOME").env_remove("XDG_CONFIG_HOME").env_remove("GPTME_LOGS_HOME");
        let err = fails_quickly(&mut cmd, 5);
        let origin = if *root == default_root { " (the path is gptme's default logs root)" } else { "" };
        if args[0] == "mcp" {
            // An MCP server answers its client all the same and says why (issue 32, item 17):
            // here, with no client, it says so and ends.
            assert!(err.contains(&format!("sessiondb cannot open its store: {}: not found", root.display())), "{args:?}: {err}");
        } else {
            assert_eq!(err.trim_end(), format!("sessiondb: {}: not found{origin}", root.display()), "{args:?}");
        }
        assert!(!db.parent().unwrap().exists(), "{args:?} made {}", db.display());
    }
    // Then `search` still says there is no database, rather than "No results".
    let err = fails_quickly(sessiondb(&db).args(["search", "hi"]), 5);
    assert!(err.starts_with("sessiondb: no database at"), "{err}");
}

/// Item 9: `import DIR` of one conversation's directory imports it; a directory with neither
/// conversations nor a conversation.jsonl fails with the hint; a missing path is "not found".
#[test]
fn import_takes_one_conversation_directory() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "one", Some("The one"), "m", "hello one");
    conversation(&logs, "two", None, "m", "hello two");
    let db = work.path().join("db");
    let out = String::from_utf8(run_ok(sessiondb(&db).arg("import").arg(logs.join("one"))).stdout).unwrap();
    assert!(out.starts_with("imported 1 conversations (0 unchanged, 0 failed)"), "{out}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&run_ok(sessiondb(&db).args(["list", "--json"])).stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], "one");
    assert_eq!(rows[0]["name"], "The one");
    assert_eq!(rows[0]["path"], format!("{}/one/conversation.jsonl", fs::canonicalize(&logs).unwrap().display()));
    // `.` inside it names it too; the logs root then takes the rest, and the first is unchanged.
    run_ok(sessiondb(&db).arg("import").arg(".").current_dir(logs.join("two")));
    let out = String::from_utf8(run_ok(sessiondb(&db).arg("import").arg(&logs)).stdout).unwrap();
    assert!(out.starts_with("imported 0 conversations (2 unchanged, 0 failed)"), "{out}");

    // A conversation's own subdirectory, or another folder with things but no conversation.
    fs::create_dir_all(logs.join("one/branches")).unwrap();
    fs::write(logs.join("one/branches/alt.jsonl"), "").unwrap();
    for wrong in [logs.join("one/branches"), work.path().to_owned()] {
        let err = fails_quickly(sessiondb(&db).arg("import").arg(&wrong), 10);
        assert!(err.starts_with(&format!("sessiondb: {}: no conversation here; give gptme's logs root", wrong.display())), "{err}");
    }
    // An empty logs root (gptme not used yet) imports nothing, successfully.
    let empty = work.path().join("empty");
    fs::create_dir(&empty).unwrap();
    run_ok(sessiondb(&db).arg("import").arg(&empty));
    let missing = work.path().join("no-such-dir");
    let err = fails_quickly(sessiondb(&db).arg("import").arg(&missing), 5);
    assert_eq!(err.trim_end(), format!("sessiondb: {}: not found", missing.display()));
    let file = logs.join("one/conversation.jsonl");
    let err = fails_quickly(sessiondb(&db).arg("import").arg(&file), 5);
    assert!(err.starts_with(&format!("sessiondb: {}: not a directory", file.display())), "{err}");
}

/// Item 10: what only the second branch has is `+`, only the first `-`, every line of it.
#[test]
fn diff_signs_follow_diff_and_git() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).args(["new", "d", "--logs-dir"]).arg(&logs));
    run_ok(sessiondb(&db).args(["append", "d", "--role", "user", "--content", "shared"]));
    run_ok(sessiondb(&db).args(["branch", "d", "alt"]));
    run_ok(sessiondb(&db).args(["append", "d", "--role", "assistant", "--content", "main only\nsecond line"]));
    run_ok(sessiondb(&db).args(["append", "d", "--branch", "alt", "--role", "assistant", "--content", "alt only"]));
    let diff = String::from_utf8(run_ok(sessiondb(&db).args(["diff", "d", "main", "alt"])).stdout).unwrap();
    assert_eq!(diff, "main and alt differ from message 2\n--- main\n+++ alt\n- assistant: main only\n- second line\n+ assistant: alt only\n");
    let diff = String::from_utf8(run_ok(sessiondb(&db).args(["diff", "d", "alt", "main"])).stdout).unwrap();
    assert_eq!(diff, "alt and main differ from message 2\n--- alt\n+++ main\n- assistant: alt only\n+ assistant: main only\n+ second line\n");
}

/// Item 12: `export --format toml -o FILE` writes FILE (and says so), as markdown and html do.
#[test]
fn export_toml_writes_the_output_file() {
    let (work, db) = imported();
    let file = work.path().join("chat.toml");
    let out = run_ok(sessiondb(&db).args(["export", "--format", "toml", "plain-id", "-o"]).arg(&file));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("Exported conversation to {}\n", file.display()));
    let on_stdout = run_ok(sessiondb(&db).args(["export", "--format", "toml", "plain-id"])).stdout;
    assert_eq!(fs::read(&file).unwrap(), on_stdout);
    assert!(String::from_utf8(on_stdout).unwrap().contains("no display name here"));
    // `-o -` is standard output.
    let dash = run_ok(sessiondb(&db).args(["export", "--format", "toml", "plain-id", "-o", "-"])).stdout;
    assert_eq!(dash, fs::read(&file).unwrap());
    // -o without --format is refused, not ignored.
    let out = sessiondb(&db).args(["export", "--to"]).arg(work.path().join("dir")).arg("-o").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Item 18: `read --full` sets a message of several lines apart from its neighbours.
#[test]
fn read_full_separates_multiline_messages() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).args(["new", "r", "--logs-dir"]).arg(&logs));
    for (role, content) in [("user", "first\nof two lines"), ("assistant", "second\nalso two"), ("user", "short"), ("assistant", "short too")] {
        run_ok(sessiondb(&db).args(["append", "r", "--role", role, "--content", content]));
    }
    let out = String::from_utf8(run_ok(sessiondb(&db).args(["read", "r", "--full"]).env("COLUMNS", "40").env("NO_COLOR", "1")).stdout).unwrap();
    let rule = "─".repeat(40);
    assert_eq!(
        out,
        format!("Reading conversation: r (r)\n0. User: \nfirst\nof two lines\n{rule}\n1. Assistant: \nsecond\nalso two\n{rule}\n2. User: short\n3. Assistant: short too\n")
    );
}

/// The subcommands listed in `help` (the output of `-h`), without `help` itself: the entries
/// of every section but the arguments and options (`sessiondb -h` lists its commands in groups,
/// a command's own `-h` under "Commands:").
fn subcommands(help: &str) -> Vec<String> {
    let mut section = "";
    let mut found = Vec::new();
    for line in help.lines() {
        if line.ends_with(':') && !line.starts_with(' ') {
            section = line;
        } else if !matches!(section, "" | "Usage:" | "Arguments:" | "Options:") && line.starts_with("  ") && !line.starts_with("   ") {
            found.extend(line.split_whitespace().next().filter(|name| *name != "help").map(str::to_owned));
        }
    }
    found
}

/// Item 15: every argument and option of every command says what it is (`-h`, whose one-line
/// layout shows an entry without help as the bare flag, or only its default).
#[test]
fn every_argument_has_help_text() {
    let help = |path: &[String]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiondb")).args(path).arg("-h").output().unwrap();
        assert!(out.status.success(), "{path:?} -h");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut missing = Vec::new();
    let mut commands: Vec<Vec<String>> = subcommands(&help(&[])).into_iter().map(|c| vec![c]).collect();
    while let Some(path) = commands.pop() {
        let text = help(&path);
        commands.extend(subcommands(&text).into_iter().map(|c| [path.clone(), vec![c]].concat()));
        // Each entry with its help, which wraps to the terminal: an entry is indented 2 or 6
        // spaces (no short flag); a line indented deeper continues the one before (or is its
        // help, put on the next line).
        let mut entries: Vec<(String, String)> = Vec::new();
        let mut section = "";
        for line in text.lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                section = line;
                continue;
            }
            if !matches!(section, "Arguments:" | "Options:") || !line.starts_with("  ") {
                continue;
            }
            let entry = line.trim();
            match entries.last_mut() {
                Some((_, said)) if line.len() - line.trim_start().len() > 6 => {
                    said.push(' ');
                    said.push_str(entry);
                }
                _ => {
                    let (flag, said) = entry.split_once("  ").map_or((entry, ""), |(f, h)| (f, h.trim()));
                    entries.push((flag.to_owned(), said.to_owned()));
                }
            }
        }
        for (flag, said) in entries {
            let said = said.trim();
            if said.is_empty() || said.starts_with('[') {
                missing.push(format!("{} {flag}", path.join(" ")));
            }
        }
    }
    assert!(missing.is_empty(), "without help text:\n{}", missing.join("\n"));
}

/// Item 15: one meaning per flag. `clean` takes `--all` for test conversations, as `list`,
/// `search` and `stats` do (`--include-test` stays as an alias), and no longer gives `-n`, a
/// limit everywhere else, the meaning of its `--max-messages`.
#[test]
fn clean_flags_mean_what_they_mean_elsewhere() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let db = work.path().join("db");
    for id in ["empty-chat", "test-empty"] {
        run_ok(sessiondb(&db).args(["new", id, "--logs-dir"]).arg(&logs));
    }
    let found = |args: &[&str]| -> Vec<String> {
        let out: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["clean", "--json"]).args(args)).stdout).unwrap();
        let mut ids: Vec<String> = out["conversations"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect();
        ids.sort();
        ids
    };
    assert_eq!(found(&[]), ["empty-chat"]);
    assert_eq!(found(&["--all"]), ["empty-chat", "test-empty"]);
    assert_eq!(found(&["--include-test"]), ["empty-chat", "test-empty"]);
    assert_eq!(found(&["--all", "--max-messages", "0"]), ["empty-chat", "test-empty"]);
    let out = sessiondb(&db).args(["clean", "-n", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Item 6 (in part): doctor names a few conversations per state and counts the rest; --json
/// lists them all.
#[test]
fn doctor_names_a_few_ids_and_counts_the_rest() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "imported", None, "m", "hi");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    for i in 0..8 {
        conversation(&logs, &format!("new-{i}"), None, "m", "hi");
    }
    let out = sessiondb(&db).arg("doctor").arg(&logs).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.lines().find(|l| l.contains("not imported yet")).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(line, "  8 not imported yet: new-0, new-1, new-2, new-3, new-4, and 3 more (`--json` lists them all)");
    let out = sessiondb(&db).args(["doctor", "--json"]).arg(&logs).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["sync"]["not_imported"].as_array().map(Vec::len), Some(8), "{json}");
}

/// Item 13 (in part): saving an emptied file in the editor gives the edit up, as git takes
/// an emptied commit message; it does not empty the branch.
#[test]
fn an_emptied_editor_file_changes_nothing() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).args(["new", "e", "--logs-dir"]).arg(&logs));
    for (role, content) in [("user", "hello"), ("assistant", "hi there")] {
        run_ok(sessiondb(&db).args(["append", "e", "--role", role, "--content", content]));
    }
    let files = || common::tree::snapshot(&logs.join("e"), &[]);
    let before = files();
    // Emptied, and blanked to whitespace only.
    for emptied in ["truncate -s 0", "sed -i 's/.*/ /'"] {
        let out = run_ok(sessiondb(&db).args(["edit", "e"]).env_remove("EDITOR").env("VISUAL", emptied));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "the edited file is empty; nothing changed\n", "{emptied}");
    }
    assert_eq!(files(), before);
    let branches = String::from_utf8(run_ok(sessiondb(&db).args(["branches", "e"])).stdout).unwrap();
    assert_eq!(branches, "main\t2 messages\n");
}

/// Item 4 (in part): a conversation gptme started since the last sync is taken in when a
/// command names it, with a word on standard error; one never written is still "no
/// conversation".
#[test]
fn a_command_naming_a_new_conversation_takes_it_in() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "old", None, "m", "from before");
    let db = work.path().join("db");
    let cmd = |args: &[&str]| {
        let mut cmd = sessiondb(&db);
        cmd.args(args).env("GPTME_LOGS_HOME", &logs);
        cmd
    };
    run_ok(&mut cmd(&["import"]));
    conversation(&logs, "started-since", None, "m", "brand new question");
    let out = run_ok(&mut cmd(&["read", "started-since"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("brand new question"));
    assert_eq!(String::from_utf8(out.stderr).unwrap(), format!("sessiondb: started-since is new since the last sync; took it in from {}\n", logs.display()));
    // Taken in once: the next command says nothing more, and it is listed.
    let out = run_ok(&mut cmd(&["show", "started-since"]));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    conversation(&logs, "another", None, "m", "hi");
    run_ok(&mut cmd(&["append", "another", "--role", "user", "--content", "more"]));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&run_ok(&mut cmd(&["list", "--json"])).stdout).unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    let out = cmd(&["read", "never-written"]).output().unwrap();
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "sessiondb: no conversation \"never-written\" in the store; `sessiondb list` lists them\n");
}

/// Item 5: doctor and sync agree on "changed". An event log that gained only part of a line
/// (gptme writing it, or cut off) gives sync nothing to read, so doctor does not call it
/// changed (which it did forever): it names it as ending in an unfinished line, until the line
/// ends and sync reads it.
#[test]
fn doctor_and_sync_agree_on_an_unfinished_line() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "c", None, "m", "hi");
    let events = logs.join("c/events.jsonl");
    fs::write(&events, "{\"seq\": 1, \"ts\": \"2026-07-16T10:00:00\", \"type\": \"message_append\", \"payload\": {}}\n").unwrap();
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let state = || -> serde_json::Value {
        let out = sessiondb(&db).args(["doctor", "--json"]).arg(&logs).output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["sync"].clone()
    };
    let mut file = fs::OpenOptions::new().append(true).open(&events).unwrap();
    std::io::Write::write_all(&mut file, b"{\"seq\": 2, \"ts\": \"2026-07-16T10:0").unwrap();
    for _ in 0..2 {
        let s = state();
        assert_eq!((s["changed"].clone(), s["unfinished"].clone()), (serde_json::json!([]), serde_json::json!(["c"])), "{s}");
        let out = String::from_utf8(run_ok(sessiondb(&db).arg("sync").arg(&logs)).stdout).unwrap();
        assert!(out.starts_with("nothing new in "), "{out}");
    }
    let text = String::from_utf8(sessiondb(&db).arg("doctor").arg(&logs).output().unwrap().stdout).unwrap();
    assert!(text.contains("  1 ending in an unfinished line (gptme is writing it, or it was cut off"), "{text}");
    // gptme ends the line: now it is a change, and sync reads it.
    std::io::Write::write_all(&mut file, b"1:00\", \"type\": \"message_append\", \"payload\": {}}\n").unwrap();
    assert_eq!(state()["changed"], serde_json::json!(["c"]));
    run_ok(sessiondb(&db).arg("sync").arg(&logs));
    let s = state();
    assert_eq!((s["in_step"].clone(), s["unfinished"].clone()), (serde_json::json!(1), serde_json::json!([])), "{s}");
}

/// Item 14 (in part): a cost that is not a number prints as gptme prints it, `$nan` (not
/// `$NaN`), in `list`; `stats` leaves it out of its sums and says so (issue 32, item 7);
/// `stats`' rows by model fit 80 columns, in cells.
#[test]
fn stats_fit_the_terminal_and_spell_nan_as_gptme() {
    if !have_script() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for (id, name, model, preview) in CHATS {
        conversation(&logs, id, name, model, preview);
    }
    let dir = logs.join("not-a-number");
    fs::create_dir_all(&dir).unwrap();
    let reply = r#"{"role": "assistant", "content": "x", "timestamp": "2026-07-16T10:00:05", "metadata": {"model": "openrouter/some-provider/a-model-with-a-very-long-name-indeed", "cost": NaN, "usage": {"input_tokens": 1, "output_tokens": 1}}}"#;
    fs::write(dir.join("conversation.jsonl"), format!("{{\"role\": \"user\", \"content\": \"q\"}}\n{reply}\n")).unwrap();
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let bin = env!("CARGO_BIN_EXE_sessiondb");
    let on_terminal = |args: &str| -> String {
        let command = format!("stty cols 80 rows 50; exec {bin} --db '{}' {args}", db.display());
        let out = Command::new("script").args(["-qec", &command, "/dev/null"]).env("NO_COLOR", "1").env_remove("COLUMNS").output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n")
    };
    // Tables fit; one conversation's page shows its model whole (the terminal wraps it).
    for args in ["stats --by model", "stats --by month", "stats not-a-number", "list"] {
        let text = on_terminal(args);
        for line in text.lines().filter(|_| args != "stats not-a-number") {
            assert!(line.width() <= 80, "{args}: a line of {} cells: {line:?}\n{text}", line.width());
        }
        if args == "list" {
            assert!(text.contains("$nan") && !text.contains("NaN"), "{args}:\n{text}");
        } else {
            assert!(!text.contains("$nan") && text.contains("(left out: 1 cost that is not a number, in not-a-number)"), "{args}:\n{text}");
        }
    }
    let by_model = on_terminal("stats --by model");
    let row = by_model.lines().find(|l| l.contains("long-name-indeed")).unwrap_or_else(|| panic!("{by_model}"));
    assert!(row.trim_start().starts_with('…') && row.trim_end().ends_with("$0.0000"), "cut from its start, the cost that is a number: {row:?}");
}

/// Item 15 (in part): every `--json` answer is printed the same way, pretty (`next`, `append`,
/// `clean` and `recover` printed one line where the rest print indented JSON).
#[test]
fn every_json_answer_is_pretty() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let db = work.path().join("db");
    run_ok(sessiondb(&db).args(["new", "j", "--logs-dir"]).arg(&logs));
    let answers: &[&[&str]] = &[
        &["append", "j", "--role", "user", "--content", "hi", "--json"],
        &["next", "j", "--json"],
        &["clean", "--json"],
        &["recover", "j", "--json"],
        &["branches", "j", "--json"],
        &["checkpoints", "j", "--json"],
        &["list", "--json"],
        &["stats", "--json"],
    ];
    for args in answers {
        let out = String::from_utf8(run_ok(sessiondb(&db).args(*args)).stdout).unwrap();
        let value: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"));
        assert_eq!(out, serde_json::to_string_pretty(&value).unwrap() + "\n", "{args:?}");
    }
}

/// Item 17 (in part): `$XDG_CONFIG_HOME/sessiondb/config.toml` names the database and gptme's
/// logs root; flags and environment variables win over it; a broken file is named with its line.
#[test]
fn a_config_file_names_the_database_and_the_logs() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("my logs");
    conversation(&logs, "configured", None, "m", "hi");
    let config = work.path().join("config");
    fs::create_dir_all(config.join("sessiondb")).unwrap();
    let db = work.path().join("home/elsewhere/sessions.db");
    fs::create_dir_all(db.parent().unwrap()).unwrap();
    fs::write(config.join("sessiondb/config.toml"), format!("# where things are\ndb = \"~/elsewhere/sessions.db\"\nlogs = {:?}\n", logs.display().to_string()))
        .unwrap();
    let bare = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiondb"));
        for var in ["SESSIONDB_DB", "GPTME_LOGS_HOME", "XDG_DATA_HOME"] {
            cmd.env_remove(var);
        }
        cmd.env("XDG_CONFIG_HOME", &config).env("HOME", work.path().join("home"));
        cmd
    };
    run_ok(bare().arg("import"));
    assert!(db.exists(), "the database where config.toml says");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&run_ok(bare().args(["list", "--json"])).stdout).unwrap();
    assert_eq!(rows[0]["id"], "configured");
    // A flag, or the environment, wins.
    let flagged = work.path().join("flag.db");
    run_ok(bare().arg("--db").arg(&flagged).arg("import"));
    assert!(flagged.exists());
    let other = work.path().join("other logs");
    conversation(&other, "from-env", None, "m", "hi");
    let out = String::from_utf8(run_ok(bare().env("GPTME_LOGS_HOME", &other).arg("import")).stdout).unwrap();
    assert!(out.starts_with("imported 1 conversations"), "{out}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&run_ok(bare().args(["list", "--json"])).stdout).unwrap();
    assert_eq!(rows.len(), 2);
    // A broken file stops the command, naming it and the line.
    let file = config.join("sessiondb/config.toml");
    fs::write(&file, "db = \"x\"\nlogs_dir = \"y\"\n").unwrap();
    let err = fails_quickly(bare().arg("list"), 5);
    assert!(err.starts_with(&format!("sessiondb: {}:2: unknown field `logs_dir`", file.display())), "{err}");
}

/// Item 16 (in part): every page `sessiondb(1)` refers to (`sessiondb-import(1)`, …) exists:
/// `man COMMAND` prints it, `man --dir DIR` writes them all.
#[test]
fn every_man_page_referred_to_exists() {
    let man = |args: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_sessiondb")).arg("man").args(args).output().unwrap();
        assert!(out.status.success(), "man {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let top = man(&[]);
    let referred: Vec<String> = top
        .split("sessiondb\\-")
        .skip(1)
        .filter_map(|rest| rest.split_once("(1)").map(|(name, _)| name.replace("\\-", "-")))
        .filter(|name| !name.contains(char::is_whitespace))
        .collect();
    assert!(referred.len() > 20 && referred.iter().any(|r| r == "import"), "{referred:?}");
    for name in &referred {
        let page = man(&[name]);
        assert!(page.contains(&format!(".TH sessiondb-{name} 1")), "{name}: {}", &page[..page.len().min(200)]);
    }
    assert!(man(&["view", "create"]).contains(".TH sessiondb-view-create 1"));
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("man1");
    man(&["--dir", dir.to_str().unwrap()]);
    for name in referred.iter().map(|r| format!("sessiondb-{r}.1")).chain(["sessiondb.1".to_owned(), "sessiondb-view-create.1".to_owned()]) {
        assert!(dir.join(&name).is_file(), "{name} written");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sessiondb")).args(["man", "imprt"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stderr), "sessiondb: no command \"imprt\"; `sessiondb --help` lists them\n");
}

/// Item 6 (in part): comparing the store with the logs root tells how far it is (doctor shows
/// it as a progress bar on a terminal): once per conversation directory, in order, to the end.
#[test]
fn doctor_comparison_reports_progress() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for i in 0..7 {
        conversation(&logs, &format!("c{i}"), None, "m", "hi");
    }
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let store = sessiondb::store::Store::open_existing(&db).unwrap();
    let conn = store.connection().unwrap();
    let mut seen = Vec::new();
    let state = sessiondb::sync::status::sync_state_with_progress(&conn, &logs, &mut |done, total| seen.push((done, total))).unwrap();
    assert_eq!(state.in_step, 7);
    assert_eq!(seen, (0..=7).map(|d| (d, 7)).collect::<Vec<_>>());
}
