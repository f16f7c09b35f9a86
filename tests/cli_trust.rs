//! Issue 31, items 11 to 14: input the command line must not trip on. A FIFO where a file is
//! read is refused at once, naming it; an environment variable set but empty is unset;
//! `AND`/`OR` are not words of the 64-word limit; `-n 0` (an MCP tool's `limit: 0`) means all,
//! for `search` and `read` as for `list`.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{fixtures, output_within, run_ok, sessiondb};

/// A FIFO at `path`.
fn fifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// A command that must end within 10 s (no one writes the FIFOs): its output.
fn quickly(mut cmd: Command) -> std::process::Output {
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    output_within(child, Duration::from_secs(10), "a command reading a FIFO")
}

#[test]
fn a_fifo_where_a_file_is_read_is_refused_at_once() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("sessions.db");
    run_ok(sessiondb(&db).arg("import").arg(fixtures()));
    // sessiondb's own configuration file: every command that needs a path reads it.
    let config_home = work.path().join("config");
    fifo(&config_home.join("sessiondb/config.toml"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiondb"));
    cmd.arg("list").env("XDG_CONFIG_HOME", &config_home).env("HOME", work.path()).env_remove("SESSIONDB_DB");
    let out = quickly(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("config.toml is a FIFO, not a regular file"), "{err}");
    // A TOML file a command is given (`edit --toml`).
    let toml = work.path().join("messages.toml");
    fifo(&toml);
    let mut cmd = sessiondb(&db);
    cmd.args(["edit", "2026-07-01-basic-chat", "--toml"]).arg(&toml);
    let out = quickly(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("is a FIFO, not a regular file"), "{err}");
}

#[test]
fn an_empty_variable_is_unset() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let logs = data.join("gptme/logs");
    std::fs::create_dir_all(logs.parent().unwrap()).unwrap();
    run_ok(Command::new("cp").arg("-r").arg(fixtures()).arg(&logs));
    let bare = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sessiondb"));
        cmd.env("HOME", work.path()).env("XDG_DATA_HOME", &data).env("XDG_CONFIG_HOME", work.path().join("config"));
        cmd.env("SESSIONDB_DB", "").env("GPTME_LOGS_HOME", "").env("GPTME_SERVER_TOKEN", "");
        cmd
    };
    // The default database and gptme's default logs root, as if the variables were not set.
    run_ok(bare().arg("import"));
    assert!(data.join("sessiondb/sessions.db").is_file());
    let listed = String::from_utf8(run_ok(bare().args(["list", "-n", "0"])).stdout).unwrap();
    assert!(listed.contains("2026-07-01-basic-chat"), "{listed}");
    run_ok(bare().args(["--db"]).arg(data.join("sessiondb/sessions.db")).args(["stats"]));
}

#[test]
fn operators_are_not_words_of_the_limit() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("sessions.db");
    run_ok(sessiondb(&db).arg("import").arg(fixtures()));
    let words: Vec<String> = (0..64).map(|i| format!("w{i}")).collect();
    for (joined, ok) in [(words.join(" OR "), true), (words.join(" AND "), true), (format!("{} OR capital", words.join(" OR ")), false)] {
        let out = sessiondb(&db).args(["search", "--", &joined]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), ok, "{joined}: {err}");
        if !ok {
            assert!(err.contains("65 words; at most 64"), "{err}");
        }
    }
}

#[test]
fn limit_zero_means_all() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("sessions.db");
    run_ok(sessiondb(&db).arg("import").arg(fixtures()));
    let page: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "the", "-n", "0", "--json"])).stdout).unwrap();
    let total = page["total"]["conversations"].as_u64().unwrap();
    assert!(total > 1);
    assert_eq!(page["results"].as_array().unwrap().len() as u64, total, "{page}");
    let text = String::from_utf8(run_ok(sessiondb(&db).args(["search", "the", "-n", "0"])).stdout).unwrap();
    assert!(text.starts_with(&format!("Search results for 'the' ({total} conversations")), "{text}");
    assert!(text.contains(&format!("\n{total}. ")), "every conversation listed:\n{text}");
    // `read -n 0`: every message of the branch.
    let shown = String::from_utf8(run_ok(sessiondb(&db).args(["show", "2026-07-07-long-conversation", "--json"])).stdout).unwrap();
    let read = String::from_utf8(run_ok(sessiondb(&db).args(["read", "2026-07-07-long-conversation", "--system", "-n", "0"])).stdout).unwrap();
    let numbered = read.lines().filter(|l| l.split_once(". ").is_some_and(|(n, _)| n.parse::<u32>().is_ok())).count();
    assert_eq!(numbered, shown.lines().count(), "{read}");
    assert!(numbered > 20 && !read.contains("More messages follow"), "{read}");
}
