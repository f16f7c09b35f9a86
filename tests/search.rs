//! `sessiondb search`: ranking, snippets, filters, literal queries with FTS5 syntax characters,
//! CJK, and an index that follows every write.

use crate::common;

use std::fs;
use std::path::Path;

use common::{run_ok, sessiondb};
use serde_json::Value;

fn conversation(logs: &Path, id: &str, messages: &[(&str, &str)]) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for (role, content) in messages {
        let m = sessiondb::model::Message::new(sessiondb::model::Role::parse(role), *content, Some("2026-07-16T10:00:00".into()));
        text.push_str(&sessiondb::codec::message_line::encode_message(&m));
        text.push('\n');
    }
    fs::write(dir.join("conversation.jsonl"), text).unwrap();
}

fn search(db: &Path, args: &[&str]) -> Vec<Value> {
    let out = run_ok(sessiondb(db).arg("search").args(args).arg("--json"));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ids(results: &[Value]) -> Vec<String> {
    results.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(
        &logs,
        "rust-talk",
        &[("user", "How do I borrow in Rust? borrow checker, borrow rules"), ("assistant", "The borrow checker enforces one mutable borrow.")],
    );
    conversation(&logs, "python-talk", &[("user", "Python decorators please"), ("assistant", "A decorator wraps a function; you can borrow ideas from Rust too.")]);
    conversation(&logs, "syntax", &[("user", "error: foo-bar failed at path/to:file (line 3) with \"quoted\" text*"), ("system", "system noise about foo-bar")]);
    conversation(&logs, "cjk", &[("user", "我们使用数据库存储会话"), ("assistant", "日本語のテキストも検索できます")]);
    conversation(&logs, "test-hidden", &[("user", "borrow borrow borrow")]);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    (work, db)
}

#[test]
fn ranks_by_relevance_and_groups_by_conversation() {
    let (_work, db) = setup();
    let results = search(&db, &["borrow"]);
    assert_eq!(ids(&results), ["rust-talk", "python-talk"], "the conversation about borrowing ranks first; test ones hidden");
    assert_eq!(results[0]["matches"], 2);
    let snippet = results[0]["snippets"][0]["highlighted"].as_str().unwrap();
    assert!(snippet.contains("**borrow**"), "{snippet}");
    assert!(!results[0]["snippets"][0]["snippet"].as_str().unwrap().contains("**"));
    assert_eq!(ids(&search(&db, &["borrow", "--all"]))[0], "test-hidden");
    assert_eq!(search(&db, &["borrow", "-n", "1"]).len(), 1);
    assert_eq!(search(&db, &["borrow", "-m", "2"])[0]["snippets"].as_array().unwrap().len(), 2);
}

#[test]
fn phrases_prefixes_and_booleans() {
    let (_work, db) = setup();
    assert_eq!(ids(&search(&db, &["\"borrow checker\""])), ["rust-talk"]);
    assert_eq!(ids(&search(&db, &["decorat*"])), ["python-talk"]);
    // Boolean operators apply to each message: python-talk's reply mentions borrowing, not the checker.
    assert_eq!(ids(&search(&db, &["borrow NOT checker"])), ["python-talk"]);
    let mut either = ids(&search(&db, &["decorators OR checker"]));
    either.sort();
    assert_eq!(either, ["python-talk", "rust-talk"]);
}

#[test]
fn fts_syntax_characters_are_searched_literally() {
    let (_work, db) = setup();
    for q in ["foo-bar", "path/to:file", "(line 3)", "\"quoted\" text*", "text*\"", "error:", "a AND", "-foo"] {
        let found = ids(&search(&db, &[q]));
        assert!(found.iter().any(|id| id == "syntax") || q == "-foo" || q == "a AND", "{q}: {found:?}");
    }
    let out = sessiondb(&db).args(["search", "((("]).output().unwrap();
    assert!(out.status.success(), "never an FTS5 error: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn cjk_text_is_findable() {
    let (_work, db) = setup();
    assert_eq!(ids(&search(&db, &["数据库"])), ["cjk"]);
    assert_eq!(ids(&search(&db, &["テキスト"])), ["cjk"]);
    assert!(search(&db, &["据数"]).is_empty(), "characters must be consecutive, in order");
    let snippet = search(&db, &["数据库"])[0]["snippets"][0]["highlighted"].as_str().unwrap().to_owned();
    assert!(snippet.contains("**数据库**"), "{snippet}");
}

#[test]
fn filters() {
    let (_work, db) = setup();
    assert_eq!(ids(&search(&db, &["foo-bar", "--role", "system"])), ["syntax"]);
    assert!(search(&db, &["decorators", "--role", "assistant"]).is_empty());
    assert_eq!(ids(&search(&db, &["borrow", "--chat", "python-talk"])), ["python-talk"]);
    assert!(search(&db, &["borrow", "--since", "2100-01-01"]).is_empty());
    assert_eq!(search(&db, &["borrow", "--since", "3650d"]).len(), 2);
    assert!(search(&db, &["borrow", "--branch", "nope"]).is_empty());
}

#[test]
fn the_index_follows_every_write() {
    let (work, db) = setup();
    let logs = work.path().join("logs");
    run_ok(sessiondb(&db).args(["new", "live", "--logs-dir"]).arg(&logs));
    run_ok(sessiondb(&db).args(["append", "live", "--role", "user", "--content", "zebras are striped"]));
    assert_eq!(ids(&search(&db, &["zebras"])), ["live"]);
    run_ok(sessiondb(&db).args(["undo", "live"]));
    // The undone message lives on in the backup branch, but not on main.
    assert!(search(&db, &["zebras", "--branch", "main"]).is_empty());
    assert_eq!(search(&db, &["zebras", "--branch", "main-undo-0"]).len(), 1);
    let toml = work.path().join("edit.toml");
    fs::write(&toml, "[[messages]]\nrole = \"user\"\ncontent = \"\"\"\nquokkas instead\n\"\"\"\ntimestamp = \"2026-07-16T10:00:00\"\n").unwrap();
    run_ok(sessiondb(&db).args(["edit", "live", "--toml"]).arg(&toml));
    assert_eq!(ids(&search(&db, &["quokkas", "--branch", "main"])), ["live"]);
    run_ok(sessiondb(&db).args(["rm", "live"]));
    assert!(search(&db, &["quokkas"]).is_empty());
}

#[test]
fn a_word_crowded_into_one_conversation_does_not_hide_the_others() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    // 300 short messages outrank everything else, more than the first window of ranked
    // matches holds, so the search has to rank the rest to find four conversations.
    // (Each line distinct: the store keeps identical lines of a conversation once.)
    let texts: Vec<String> = (0..300).map(|i| format!("needle needle {i}")).collect();
    let crowded: Vec<(&str, &str)> = texts.iter().enumerate().map(|(i, t)| (if i % 2 == 0 { "user" } else { "assistant" }, t.as_str())).collect();
    conversation(&logs, "crowded", &crowded);
    for id in ["sparse-a", "sparse-b", "sparse-c"] {
        conversation(&logs, id, &[("user", "a much longer message that mentions the needle only once, among many other words of no interest")]);
    }
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let results = search(&db, &["needle", "-n", "4", "-m", "2"]);
    let found = ids(&results);
    assert_eq!(found[0], "crowded");
    let mut rest = found[1..].to_vec();
    rest.sort();
    assert_eq!(rest, ["sparse-a", "sparse-b", "sparse-c"]);
    assert_eq!(results[0]["matches"], 300, "every match counted");
    assert_eq!(results[0]["snippets"].as_array().unwrap().len(), 2);
    assert_eq!(search(&db, &["needle", "--chat", "crowded"])[0]["matches"], 300);
    assert_eq!(search(&db, &["needle", "--chat", "sparse-b"])[0]["matches"], 1);
    assert_eq!(search(&db, &["needle", "--role", "assistant", "--chat", "crowded"])[0]["matches"], 150);
    assert!(search(&db, &["needle", "--chat", "no-such-chat"]).is_empty());
}

#[test]
fn a_filter_that_passes_everything_changes_nothing() {
    // Filtered searches rank inside one query with the filters; unfiltered ones rank the
    // index first. Both must give the same answer when the filter excludes nothing.
    let (_work, db) = setup();
    for q in ["borrow", "decorat*", "foo-bar", "数据库", "borrow OR decorators"] {
        let plain = search(&db, &[q, "-m", "3"]);
        let filtered = search(&db, &[q, "-m", "3", "--since", "36500d"]);
        let strip = |rs: &[Value]| -> Vec<(String, Value)> { rs.iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r["snippets"].clone())).collect() };
        assert_eq!(strip(&filtered), strip(&plain), "{q}");
    }
}

/// Issue 13, item 9: text whose case folding changes byte lengths (`İ` grows, the Kelvin sign
/// `\u{212A}` shrinks) made `search` panic (exit 101); 3,000 nested parentheses gave "parser stack
/// overflow" instead of a literal search; 20,000 `x*` took seconds. Every query is answered
/// quickly: found, searched literally, or refused with a clear error.
#[test]
fn hostile_text_and_queries_are_answered_without_panics() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "folding", &[("user", "İİ\u{212A} k"), ("assistant", "ΣΑΣ straße STRASSE ǅ")]);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    for (q, mark) in [("k", "İİ**\u{212A}** **k**"), ("straße", "**straße**"), ("σασ", "**ΣΑΣ**")] {
        let found = search(&db, &[q]);
        assert_eq!(ids(&found), ["folding"], "{q}");
        let snippet = found[0]["snippets"][0]["highlighted"].as_str().unwrap();
        assert!(snippet.contains(mark), "{q}: {snippet}");
        let out = sessiondb(&db).args(["search", q]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{q}: {}", String::from_utf8_lossy(&out.stderr));
    }

    let nested = format!("{}k{}", "(".repeat(3000), ")".repeat(3000));
    let out = sessiondb(&db).args(["search", &nested]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "searched literally: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("(searched literally)") && stdout.contains("folding"), "{stdout}");

    for (query, bound) in
        [(["x*"; 20_000].join(" "), "bytes; at most 16384"), (["x*"; 9].join(" "), "9 prefixes (`*`); at most 8"), (["word"; 65].join(" "), "65 words; at most 64")]
    {
        let started = std::time::Instant::now();
        let out = sessiondb(&db).args(["search", &query]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(bound), "a clear error: {stderr}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "refused before any work");
    }
    // Within the bounds, the most complex queries still run.
    for query in [["x*"; 8].join(" "), ["word"; 64].join(" "), format!("{}k{}", "(".repeat(16), ")".repeat(16))] {
        let out = sessiondb(&db).args(["search", &query]).output().unwrap();
        assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
