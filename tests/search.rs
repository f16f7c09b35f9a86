//! `sessiondb search`: ranking, snippets, filters, literal queries with FTS5 syntax characters,
//! CJK, and an index that follows every write.

use crate::common;

use std::fs;
use std::path::Path;

use common::crash::Rng;
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
    search_page(db, args)["results"].as_array().unwrap().clone()
}

/// The whole `search --json` answer: totals, offset, sort and the page of results.
fn search_page(db: &Path, args: &[&str]) -> Value {
    let out = run_ok(sessiondb(db).args(["search", "--json"]).args(args));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ids(results: &[Value]) -> Vec<String> {
    results.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn setup() -> (tempfile::TempDir, Vec<common::TestDb>) {
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
    let dbs = imported(work.path(), &logs);
    (work, dbs)
}

/// `logs` imported into a new store of each engine (`common::databases`).
fn imported(work: &Path, logs: &Path) -> Vec<common::TestDb> {
    let dbs = common::databases(work);
    for store in &dbs {
        run_ok(sessiondb(&store.db).arg("import").arg(logs));
    }
    dbs
}

#[test]
fn ranks_by_relevance_and_groups_by_conversation() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
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
}

#[test]
fn phrases_prefixes_and_booleans() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        assert_eq!(ids(&search(&db, &["\"borrow checker\""])), ["rust-talk"]);
        assert_eq!(ids(&search(&db, &["decorat*"])), ["python-talk"]);
        // Boolean operators apply to each message: python-talk's reply mentions borrowing, not the checker.
        assert_eq!(ids(&search(&db, &["borrow NOT checker"])), ["python-talk"]);
        let mut either = ids(&search(&db, &["decorators OR checker"]));
        either.sort();
        assert_eq!(either, ["python-talk", "rust-talk"]);
    }
}

#[test]
fn fts_syntax_characters_are_searched_literally() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        // (`text*"` is not in the text: a query that is not word syntax is a substring, as in gptme.)
        assert!(search(&db, &["text*\""]).is_empty());
        for q in ["foo-bar", "path/to:file", "(line 3)", "\"quoted\" text*", "text*", "error:", "a AND", "-foo"] {
            let found = ids(&search(&db, &["--", q]));
            assert!(found.iter().any(|id| id == "syntax") || q == "-foo" || q == "a AND", "{q}: {found:?}");
        }
        let out = sessiondb(&db).args(["search", "((("]).output().unwrap();
        assert!(out.status.success(), "never an FTS5 error: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn cjk_text_is_findable() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        assert_eq!(ids(&search(&db, &["数据库"])), ["cjk"]);
        assert_eq!(ids(&search(&db, &["テキスト"])), ["cjk"]);
        assert!(search(&db, &["据数"]).is_empty(), "characters must be consecutive, in order");
        let snippet = search(&db, &["数据库"])[0]["snippets"][0]["highlighted"].as_str().unwrap().to_owned();
        assert!(snippet.contains("**数据库**"), "{snippet}");
    }
}

#[test]
fn filters() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        assert_eq!(ids(&search(&db, &["foo-bar", "--role", "system"])), ["syntax"]);
        assert!(search(&db, &["decorators", "--role", "assistant"]).is_empty());
        assert_eq!(ids(&search(&db, &["borrow", "--chat", "python-talk"])), ["python-talk"]);
        assert!(search(&db, &["borrow", "--since", "2100-01-01"]).is_empty());
        assert_eq!(search(&db, &["borrow", "--since", "3650d"]).len(), 2);
    }
}

/// Issue 15: a filter that names nothing in the store is a usage error (exit 2) that says what
/// was wrong and what there is, not "No results".
#[test]
fn filters_that_name_nothing_are_refused() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        for (args, says) in [
            (&["borrow", "--chat", "no-such"][..], "--chat \"no-such\" names nothing in the store: no such conversation (`sessiondb list` lists them)"),
            (&["borrow", "--role", "robot"], "--role \"robot\" names nothing in the store: no message has this role; roles are system, user and assistant"),
            (&["borrow", "--branch", "nosuch"], "--branch \"nosuch\" names nothing in the store: no conversation has such a branch"),
            (&["borrow", "--branch", "nosuch", "--chat", "rust-talk"], "conversation \"rust-talk\" has the branches main"),
            (&["borrow", "--model", "gpt-99"], "--model \"gpt-99\" names nothing in the store: no message names a model"),
        ] {
            for json in [false, true] {
                let out = sessiondb(&db).arg("search").args(args).args(json.then_some("--json")).output().unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
                assert!(stderr.contains(says), "{args:?}: {stderr}");
                assert!(out.stdout.is_empty(), "{args:?}");
            }
        }
        // Names that exist but hold no match are an answer: nothing found.
        assert!(search(&db, &["decorators", "--role", "system"]).is_empty());
        assert!(search(&db, &["decorators", "--chat", "rust-talk", "--branch", "main"]).is_empty());
    }
}

#[test]
fn the_index_follows_every_write() {
    let (work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
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
        run_ok(sessiondb(&db).args(["rm", "--yes", "live"]));
        assert!(search(&db, &["quokkas"]).is_empty());
    }
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
    for store in &imported(work.path(), &logs) {
        let db = store.db.clone();
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
    }
}

#[test]
fn a_filter_that_passes_everything_changes_nothing() {
    // Filtered searches rank inside one query with the filters; unfiltered ones rank the
    // index first. Both must give the same answer when the filter excludes nothing.
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        for q in ["borrow", "decorat*", "foo-bar", "数据库", "borrow OR decorators"] {
            let plain = search(&db, &[q, "-m", "3"]);
            let filtered = search(&db, &[q, "-m", "3", "--since", "36500d"]);
            let strip = |rs: &[Value]| -> Vec<(String, Value)> { rs.iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r["snippets"].clone())).collect() };
            assert_eq!(strip(&filtered), strip(&plain), "{q}");
        }
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
    for store in &imported(work.path(), &logs) {
        let db = store.db.clone();
        // A word query marks whole words (the Kelvin sign here is a letter of the word İİK); a
        // literal one (-F) every place the text is.
        for (q, mark) in [
            (&["k"][..], "İİ\u{212A} **k**"),
            (&["-F", "k"], "İİ**\u{212A}** **k**"),
            (&["straße"], "**straße**"),
            (&["σασ"], "**ΣΑΣ**"),
            (&["-F", "σας"], "**ΣΑΣ**"),
        ] {
            let found = search(&db, q);
            assert_eq!(ids(&found), ["folding"], "{q:?}");
            let snippet = found[0]["snippets"][0]["highlighted"].as_str().unwrap();
            assert!(snippet.contains(mark), "{q:?}: {snippet}");
            let out = sessiondb(&db).arg("search").args(q).output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{q:?}: {}", String::from_utf8_lossy(&out.stderr));
        }

        let nested = format!("{}k{}", "(".repeat(3000), ")".repeat(3000));
        let out = sessiondb(&db).args(["search", &nested]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "searched literally: {}", String::from_utf8_lossy(&out.stderr));
        // Too deep for FTS5, so a substring: one no message holds.
        assert!(stdout.contains("No results") && stdout.contains("(searched literally)"), "{stdout}");

        for (query, bound) in [
            (["x*"; 20_000].join(" "), "bytes; at most 16384"),
            (["x*"; 9].join(" "), "9 prefixes (`*`); at most 8"),
            (["word"; 65].join(" "), "65 words; at most 64"),
        ] {
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
}

/// Choices from the tests' seeded generator, so that the generated logs are the same every run.
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

/// Pieces of text of every class issue 15 names: words, code with punctuation, Windows paths,
/// emoji (with and without modifiers), CJK, mixed-case non-ASCII whose lowercasing changes
/// lengths, quotes, parentheses.
const PIECES: &[&str] = &[
    "the",
    "about",
    "X.",
    "summary",
    "Thanks!",
    "write",
    "a",
    "borrow",
    "checker",
    "is_locally()",
    "is_local",
    "locally",
    "fn main() {",
    "}",
    "foo(x)",
    "(x",
    "x)",
    "a->b",
    "x == y",
    "C:\\Users\\me",
    "c:\\users",
    "C:\\Program Files",
    "/usr/bin/env",
    "path/to:file",
    "\"quoted\"",
    "\"",
    "'",
    "don't",
    "😀",
    "🎉",
    "🦀",
    "👍🏽",
    "🦀🦀",
    "数据库",
    "日本語のテキスト",
    "한국어",
    "用",
    "ÄÖÜ",
    "äöü",
    "Äpfel",
    "İstanbul",
    "STRASSE",
    "straße",
    "ΟΔΟΣ",
    "σοφός",
    "Kelvin \u{212A}",
    "ﬁle",
    "naïve",
    "café",
    "€5",
    "½",
    "\t",
    "\n",
    "  ",
    "-foo",
    "--all",
    "*.rs",
    "[1]",
    "{}",
    "a_b_c",
    "AND",
    "NOT",
];

/// The text of one generated message: pieces joined by a space, by nothing (so that substrings
/// cross them) or by a newline.
fn generated_text(rng: &mut Rng, pieces: &[&str]) -> String {
    let mut text = String::new();
    for _ in 0..1 + rng.below(12) {
        text.push_str(rng.pick(pieces));
        text.push_str(rng.pick(&[" ", " ", " ", "", "\n", ", "]));
    }
    text
}

/// Writes `n` conversations into `logs`, each with main, some with a branch and a view
/// sharing main's first lines; returns every conversation's distinct lines and their
/// contents (a line several files hold is one message, as the store keeps it).
fn generated_logs(logs: &Path, n: usize, seed: u64) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    generated_logs_of(logs, n, seed, PIECES)
}

/// [`generated_logs`], the texts made of `pieces`.
fn generated_logs_of(logs: &Path, n: usize, seed: u64, pieces: &[&str]) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    use sessiondb::model::{Message, Role};
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    for i in 0..n {
        let id = format!("2026-01-{:02}-generated-{i:03}", 1 + i % 28);
        let dir = logs.join(&id);
        fs::create_dir_all(&dir).unwrap();
        let mut lines = std::collections::BTreeMap::new();
        let mut main = Vec::new();
        for j in 0..3 + rng.below(15) {
            let role = ["user", "assistant", "system"][if j == 0 { 2 } else { 1 - j % 2 }];
            let content = generated_text(&mut rng, pieces);
            let m = Message::new(Role::parse(role), content.clone(), Some(format!("2026-01-01T10:{:02}:{:02}", j / 60, j % 60)));
            let line = sessiondb::codec::message_line::encode_message(&m);
            lines.insert(line.clone(), content);
            main.push(line);
        }
        let write = |rel: &str, file_lines: &[String]| {
            let path = dir.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, file_lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
        };
        write("conversation.jsonl", &main);
        for (rel, wanted) in [("branches/alt.jsonl", i % 3 == 0), ("views/compact.jsonl", i % 4 == 1)] {
            if wanted {
                let mut other: Vec<String> = main[..main.len() / 2].to_vec();
                let content = generated_text(&mut rng, pieces);
                let m = Message::new(Role::parse("assistant"), content.clone(), Some("2026-01-02T10:00:00".into()));
                let line = sessiondb::codec::message_line::encode_message(&m);
                lines.insert(line.clone(), content);
                other.push(line);
                write(rel, &other);
            }
        }
        out.push((id, lines));
    }
    out
}

/// Issue 15, item 1: a literal query finds exactly the conversations whose messages (on any
/// branch or view) contain it, ignoring case as gptme does (`query.lower() in
/// content.lower()`), and counts exactly the messages that do: checked against a brute-force
/// search over every message, for queries of every class.
#[test]
fn literal_search_finds_exactly_what_a_substring_search_finds() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let generated = generated_logs(&logs, 80, 0x5eed_cafe);
    for store in &imported(work.path(), &logs) {
        let db = store.db.clone();

        let mut queries: Vec<String> = [
            "(x",
            "is_locally()",
            "C:\\Users",
            "c:\\USERS\\ME",
            "\\",
            "😀",
            "🎉",
            "🦀",
            "🦀🦀",
            "👍",
            "🏽",
            "\"",
            "'",
            "\"quoted",
            "(",
            ")",
            "()",
            "{}",
            "x)",
            "a->",
            "数据库",
            "据",
            "語の",
            "한",
            "ÄÖ",
            "äö",
            "ÄPFEL",
            "i̇stanbul",
            "İ",
            "STRASSE",
            "strasse",
            "STRAẞE",
            "ς",
            "σ",
            "οδος",
            "ΟΔΟΣ",
            "\u{212A}",
            "k",
            "ﬁ",
            "fi",
            "naïve",
            "€",
            "½",
            "\t",
            "s, ",
            "!\n",
            "x ==",
            "--",
            "-foo",
            "*.",
            "[1",
            "_b",
            ":\\",
            " ",
            "e",
            "zz",
            "no such text at all",
            "about x.",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        // Pieces of stored text, some with their case changed: every query of these is found.
        let mut rng = Rng(7);
        let contents: Vec<&String> = generated.iter().flat_map(|(_, lines)| lines.values()).collect();
        for _ in 0..30 {
            let text: Vec<char> = contents[rng.below(contents.len())].chars().collect();
            if text.is_empty() {
                continue;
            }
            let start = rng.below(text.len());
            let piece: String = text[start..(start + 1 + rng.below(12)).min(text.len())].iter().collect();
            queries.push(if rng.below(2) == 0 { piece.to_uppercase() } else { piece });
        }
        let mut checked = 0;
        for q in queries.iter().filter(|q| !q.trim().is_empty()) {
            let needle = q.to_lowercase();
            let expected: std::collections::BTreeMap<&str, usize> = generated
                .iter()
                .map(|(id, lines)| (id.as_str(), lines.values().filter(|c| c.to_lowercase().contains(&needle)).count()))
                .filter(|(_, n)| *n > 0)
                .collect();
            let results = search(&db, &["-F", "-n", "1000", "--", q]);
            let found: std::collections::BTreeMap<&str, usize> =
                results.iter().map(|r| (r["id"].as_str().unwrap(), r["matches"].as_u64().unwrap() as usize)).collect();
            assert_eq!(found, expected, "query {q:?}: conversations and matches found, against a brute-force substring search");
            // Newest conversation first, and a limit keeps the first ones.
            if results.len() > 2 {
                assert_eq!(ids(&search(&db, &["-F", "-n", "2", "--", q])), ids(&results)[..2], "{q:?}");
            }
            // Without -F, a query that is not word syntax is found the same way.
            // (A query with quotes may be a phrase of words, which is word syntax.)
            if !q.chars().all(|c| c.is_alphanumeric() || c == ' ' || ('\u{300}'..='\u{36f}').contains(&c)) && !q.contains('"') {
                let plain: Vec<String> = ids(&search(&db, &["-n", "1000", "--", q]));
                assert_eq!(plain, ids(&results), "{q:?} without -F");
            }
            for r in &results {
                let highlighted = r["snippets"][0]["highlighted"].as_str().unwrap();
                assert!(highlighted.contains("**") || needle.contains('\n'), "{q:?}: a match is marked: {highlighted}");
            }
            checked += 1;
        }
        assert!(checked >= 50, "{checked} queries");
    }
}

/// The substring index is derived: dropped or emptied, doctor reports it, `doctor --reindex`
/// makes it again from the messages, and literal search is exact again; killed imports leave
/// it consistent with the rows (FTS5's own check, doctor's count, the same answers).
#[test]
fn the_substring_index_is_rebuilt_and_survives_killed_writers() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let generated = generated_logs(&logs, 150, 42);
    let db = work.path().join("db");
    let expected = |q: &str| -> Vec<String> {
        let mut ids: Vec<String> =
            generated.iter().filter(|(_, lines)| lines.values().any(|c| c.to_lowercase().contains(&q.to_lowercase()))).map(|(id, _)| id.clone()).collect();
        ids.sort();
        ids
    };
    let found = |q: &str| -> Vec<String> {
        let mut ids = ids(&search(&db, &["-F", "-n", "1000", "--", q]));
        ids.sort();
        ids
    };
    let doctor = |args: &[&str]| sessiondb(&db).arg("doctor").arg(&logs).args(args).arg("--json").output().unwrap();

    // Imports killed at growing delays, then one that finishes.
    let mut delay = std::time::Duration::from_millis(5);
    for _ in 0..8 {
        let mut child = sessiondb(&db).arg("import").arg(&logs).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        delay = delay.mul_f64(1.6);
        if !db.exists() {
            continue; // killed before it made the database: nothing to check
        }
        let out = doctor(&[]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!report["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().contains("index")), "after a kill: {report}");
    }
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    for q in ["🦀", "(x", "c:\\users", "数据库", "ÄÖ", "\""] {
        assert_eq!(found(q), expected(q), "{q:?} after killed imports");
    }
    let out = doctor(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));

    for damage in ["INSERT INTO texts_substring (texts_substring) VALUES ('delete-all')", "DROP TABLE texts_substring"] {
        rusqlite::Connection::open(&db).unwrap().execute_batch(damage).unwrap();
        let out = doctor(&[]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(1), "{damage}: {report}");
        assert!(report["problems"].to_string().contains("substring index") && report["problems"].to_string().contains("--reindex"), "{damage}: {report}");
        let out = doctor(&["--reindex"]);
        assert_eq!(out.status.code(), Some(0), "{damage}: {}", String::from_utf8_lossy(&out.stdout));
        for q in ["🦀", "(x", "is_locally()", "ÄÖ"] {
            assert_eq!(found(q), expected(q), "{q:?} after {damage} and --reindex");
        }
    }
    // The index follows removals too (the delete trigger was made again with it).
    let gone = &generated[0].0;
    run_ok(sessiondb(&db).args(["rm", "--yes", gone]));
    assert!(!found("the").contains(gone));
    assert_eq!(doctor(&[]).status.code(), Some(0));
}

/// Issue 15, item 1, against gptme itself: on the logs real gptme wrote, a literal query finds
/// the conversations gptme's own test (`query.lower() in msg.content.lower()`, over every branch
/// and view gptme loads) finds (`tools/oracle/gptme_search.py`).
#[test]
fn literal_search_agrees_with_gptme() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("db");
    let logs = common::fixtures();
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let queries = [
        "😀", "🎉", "🦀", "(", ")", "\"", "'", "\\", "İ", "i\u{307}", "café", "CAFÉ", "☕", "日本", "σ", "ς", "Σ", "```", "$", "ä", "Ä", "\ta", "the", " the ",
        "e", "ab", ": ", "{\"", "->", "naïve", "NAÏVE", "ß", "SS", "\u{212A}", "k", "ﬁ", "fi", "...", "?", "!", "#", "%", "<", ">", "&", "|", "*", "_", "0", "é",
        "e\u{301}", "\u{301}", "Ω", "ω", "ǅ", "ǆ",
    ];
    let out = run_ok(std::process::Command::new(common::gptme_python()).arg(common::tool("gptme_search.py")).arg(&logs).args(queries));
    let oracle: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(oracle["unreadable"], serde_json::json!([]), "gptme loads every fixture conversation");
    for q in queries {
        let mut expected: Vec<&str> = oracle["found"][q].as_object().unwrap().keys().map(String::as_str).collect();
        expected.sort();
        let mut found = ids(&search(&db, &["-F", "--all", "-n", "1000", "--", q]));
        found.sort();
        assert_eq!(found, expected, "query {q:?}: sessiondb against gptme");
    }
}

/// Text holding NUL (JSON's `\u0000`) is found literally through the library (no command line
/// can pass a NUL): trigrams with NUL are left out of the index query, the rest checked exactly.
#[test]
fn literal_text_with_nul_is_found() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let dir = logs.join("nul-chat");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("conversation.jsonl"), "{\"role\": \"user\", \"content\": \"x A\\u0000Bcd y\", \"timestamp\": \"2026-07-16T10:00:00\"}\n").unwrap();
    for store in &imported(work.path(), &logs) {
        let db = store.db.clone();
        let store = sessiondb::store::Store::open(&db).unwrap();
        let conn = store.connection().unwrap();
        for (text, found) in [("a\0b", true), ("A\0BCD Y", true), ("\0", true), ("a\0c", false), ("x a\0bcd y!", false)] {
            let q = sessiondb::store::search::SearchQuery { text: text.into(), limit: 10, matches: 1, literal: true, ..Default::default() };
            let result = sessiondb::store::search::search(&conn, &q).unwrap();
            assert_eq!(result.conversations.len(), usize::from(found), "{text:?}");
        }
    }
}

/// The reference tokenizer of word queries, written from the rules of the word index
/// (`schema/0003_fts_cjk.sql`: FTS5's `unicode61 remove_diacritics 2`, over the text
/// `store::fts::fts_text` gives it), independently of the code that searches:
///
/// - A *word* is a maximal run of word characters: letters and digits (Unicode Alphabetic or
///   Numeric) and the combining diacritical marks U+0300–U+036F. Everything else separates
///   words: spaces, punctuation, `_`, `'`, `-`, symbols, emoji.
/// - Each CJK character (kana, hangul syllables, CJK ideographs) is a word alone, even inside a
///   run of letters.
/// - Words compare folded: each character lowercased alone (so `Σ` is `σ` wherever it stands,
///   and `ς` is `σ` too), combining marks U+0300–U+036F dropped, and the Latin letters with a
///   diacritic that decompose into an ASCII letter replaced by it (`é` is `e`, `Ä` is `a`); `ß`
///   stays `ß`. No stemming: `checkers` is not `checker`.
///
/// Characters beyond the Basic Multilingual Plane (emoji) are not modelled: SQLite's unicode61
/// tables make some of them word characters (🦀) and others not (😀), so the word corpus
/// ([`WORD_PIECES`]) has none; emoji are literal queries, checked by
/// `literal_search_finds_exactly_what_a_substring_search_finds`.
fn reference_words(text: &str) -> Vec<String> {
    written_words(text).iter().map(|w| fold_reference(w)).collect()
}

/// The words of `text` as written (before folding), by the rules of [`reference_words`].
fn written_words(text: &str) -> Vec<String> {
    let cjk = |c: char| matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF);
    let mark = |c: char| ('\u{300}'..='\u{36f}').contains(&c);
    let mut words = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if (c.is_alphanumeric() || mark(c)) && !cjk(c) {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if cjk(c) {
            words.push(c.to_string());
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A word as [`reference_words`] compares it.
fn fold_reference(word: &str) -> String {
    const FROM: &str = "àáâãäåçèéêëìíîïñòóôõöùúûüýÿ";
    const TO: &str = "aaaaaaceeeeiiiinooooouuuuyy";
    word.chars()
        .flat_map(char::to_lowercase)
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .map(|c| if c == 'ς' { 'σ' } else { c })
        .map(|c| FROM.chars().position(|f| f == c).map_or(c, |i| TO.chars().nth(i).unwrap()))
        .collect()
}

/// One term of a reference word query: words in a row (a phrase), the last a prefix when
/// `prefix`. A query is terms that must all match one message (FTS5's implicit AND).
#[derive(Debug, Clone)]
struct Term {
    /// The words as the query writes them (their case and accents as the text has them).
    written: Vec<String>,
    prefix: bool,
}

impl Term {
    fn matches(&self, words: &[String]) -> bool {
        let want: Vec<String> = self.written.iter().flat_map(|w| reference_words(w)).collect();
        let n = want.len();
        n > 0 && words.windows(n).any(|run| run.iter().zip(&want).enumerate().all(|(k, (w, q))| w == q || (self.prefix && k == n - 1 && w.starts_with(q.as_str()))))
    }

    /// As the query syntax writes it: a bare word, a run of CJK characters (a phrase of them),
    /// or a quoted phrase; `*` after a prefix.
    fn query(&self) -> String {
        let body = if self.written.len() == 1 { self.written[0].clone() } else { format!("\"{}\"", self.written.join(" ")) };
        format!("{body}{}", if self.prefix { "*" } else { "" })
    }
}

/// Pieces of text that probe the word rules: case, accents (composed and combining),
/// separators inside identifiers, digits, stems that must stay apart, CJK runs, emoji.
const WORD_PIECES: &[&str] = &[
    "the",
    "The",
    "of",
    "a",
    "borrow",
    "Borrow",
    "BORROW",
    "checker",
    "checkers",
    "checking",
    "run",
    "running",
    "runs",
    "café",
    "cafe",
    "CAFÉ",
    "cafe\u{301}s",
    "naïve",
    "naive",
    "Äpfel",
    "apfel",
    "résumé",
    "resume",
    "Straße",
    "strasse",
    "a_b_c",
    "don't",
    "foo-bar",
    "x86_64",
    "is_locally()",
    "path/to:file",
    "e.g.",
    "3.14",
    "2026",
    "v2",
    "utf8",
    "数据库",
    "数据",
    "用数据库存储",
    "日本語のテキスト",
    "한국어",
    "SQLite数据库ok",
    "ΟΔΟΣ",
    "οδος",
    "rust",
    "x y",
    "½",
    "error:",
    "Error",
    "errors",
    "summary",
    "write",
    "(x)",
    "\"quoted\"",
];

/// The conversations (and matching messages) a reference query finds in generated logs.
fn reference_found(tokenized: &[(String, Vec<Vec<String>>)], terms: &[Term]) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut messages = 0;
    for (id, messages_words) in tokenized {
        let n = messages_words.iter().filter(|words| terms.iter().all(|t| t.matches(words))).count();
        if n > 0 {
            ids.push(id.clone());
            messages += n;
        }
    }
    ids.sort();
    (ids, messages)
}

/// Every conversation's messages as [`reference_words`] splits them, once for all queries.
fn tokenized(generated: &[(String, std::collections::BTreeMap<String, String>)]) -> Vec<(String, Vec<Vec<String>>)> {
    generated.iter().map(|(id, lines)| (id.clone(), lines.values().map(|c| reference_words(c)).collect())).collect()
}

/// The word queries of [`word_search_finds_what_the_reference_tokenizer_finds`]: words chosen to
/// probe the rules, then words, phrases and prefixes taken from the generated text.
fn word_queries(generated: &[(String, std::collections::BTreeMap<String, String>)]) -> Vec<Vec<Term>> {
    let word = |w: &str| Term { written: vec![w.to_owned()], prefix: false };
    let mut queries: Vec<Vec<Term>> = [
        "checker",
        "checkers",
        "run",
        "cafe",
        "CAFÉ",
        "café",
        "cafes",
        "naive",
        "apfel",
        "ÄPFEL",
        "resume",
        "straße",
        "strasse",
        "b",
        "don",
        "t",
        "x86",
        "64",
        "locally",
        "is",
        "14",
        "2026",
        "v2",
        "utf8",
        "数据",
        "据库",
        "数据库存",
        "한국",
        "テキスト",
        "sqlite",
        "ok",
        "οδοσ",
        "ΟΔΟΣ",
        "rust",
        "x",
        "y",
        "½",
        "error",
        "errors",
        "quoted",
        "file",
        "of",
    ]
    .iter()
    .map(|w| vec![word(w)])
    .collect();
    queries.push(vec![Term { written: vec!["borrow".into(), "checker".into()], prefix: false }]);
    queries.push(vec![Term { written: vec!["foo".into(), "bar".into()], prefix: false }]);
    queries.push(vec![Term { written: vec!["e".into(), "g".into()], prefix: false }]);
    queries.push(vec![word("borrow"), word("summary")]);
    for p in ["check", "run", "caf", "err", "ru", "sum", "utf"] {
        queries.push(vec![Term { written: vec![p.into()], prefix: true }]);
    }
    queries.push(vec![Term { written: vec!["the".into(), "borr".into()], prefix: true }]);
    // Phrases of two and three words, and prefixes, standing somewhere in the text.
    let mut rng = Rng(0x0123_4567);
    let contents: Vec<&String> = generated.iter().flat_map(|(_, lines)| lines.values()).collect();
    let mut taken = 0;
    while taken < 30 {
        let content = contents[rng.below(contents.len())];
        let written = written_words(content);
        let n = 2 + rng.below(2);
        if written.len() < n {
            continue;
        }
        let start = rng.below(written.len() - n + 1);
        let mut phrase: Vec<String> = written[start..start + n].to_vec();
        // FTS5's operators are not words of a phrase here.
        if phrase.iter().any(|w| matches!(w.as_str(), "AND" | "OR" | "NOT" | "NEAR")) {
            continue;
        }
        let prefix = rng.below(3) == 0;
        if prefix {
            let last: String = phrase[n - 1].chars().take(2).collect();
            phrase[n - 1] = last;
        }
        queries.push(vec![Term { written: phrase, prefix }]);
        taken += 1;
    }
    queries
}

/// Searches `store` for word query `terms` and checks the answer against the reference
/// tokenizer over `words`: a word query, ranked by what ranks it on that engine, the same
/// conversations and as many matching messages (every one counted: `--exact-total`). Returns
/// whether it found any.
fn finds_what_the_reference_finds(store: &common::TestDb, words: &[(String, Vec<Vec<String>>)], terms: &[Term]) -> bool {
    let text = terms.iter().map(Term::query).collect::<Vec<_>>().join(" ");
    let page = search_page(&store.db, &["-n", "1000", "--exact-total", "--", &text]);
    assert_eq!(page["literal"], false, "{text:?} is a word query");
    // Words and phrases are ranked by the ranking index (on a server, this host's), prefixes by
    // the word index (on a server, its word sets).
    let by = match (store.engine, terms.iter().any(|t| t.prefix)) {
        (_, false) => "ranking index",
        ("postgres", true) => "word index (server)",
        (_, true) => "word index",
    };
    assert_eq!(page["ranked_by"], by, "{text:?}");
    let mut found = ids(page["results"].as_array().unwrap());
    found.sort();
    let (expected, messages) = reference_found(words, terms);
    assert_eq!(found, expected, "{} query {text:?}: conversations found, against the reference tokenizer", store.engine);
    assert_eq!(page["total"]["messages"].as_u64().unwrap() as usize, messages, "{text:?}: matching messages");
    !expected.is_empty()
}

/// Issue 15, correctness: on generated text (main, branches and views), every word, phrase and
/// prefix query finds exactly the conversations, and counts exactly the messages, that the
/// reference tokenizer ([`reference_words`]) finds over the contents of every message. It fails
/// if the word index's rules change (stemming, accents kept, `_` made a word character, CJK not
/// split, ...).
#[test]
fn word_search_finds_what_the_reference_tokenizer_finds() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let generated = generated_logs_of(&logs, 120, 0xface_b00c, WORD_PIECES);
    for store in &imported(work.path(), &logs) {
        let queries = word_queries(&generated);
        let words = tokenized(&generated);
        assert!(queries.len() >= 50, "{} queries", queries.len());
        let mut found_some = 0;
        for terms in &queries {
            found_some += usize::from(finds_what_the_reference_finds(store, &words, terms));
        }
        assert!(found_some >= 40, "most queries find something: {found_some} of {}", queries.len());
    }
}

/// Issue 15, item 4: `--json` counts every match (messages and conversations, exactly, as a
/// brute-force count does), whatever the page; pages taken with `--offset` join up into the
/// whole ordered result without gap or overlap, for both orders and both kinds of query;
/// `--sort newest` orders conversations as `list` does, by their last modification.
#[test]
fn totals_are_exact_and_pages_join_up() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let generated = generated_logs_of(&logs, 90, 0x7a9e_5eed, WORD_PIECES);
    for store in &imported(work.path(), &logs) {
        let db = store.db.clone();
        let listed: Vec<String> = {
            let out = run_ok(sessiondb(&db).args(["list", "--json"]));
            let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
        };
        let words = tokenized(&generated);
        let word = |w: &str| vec![Term { written: vec![w.to_owned()], prefix: false }];
        let word_cases = [("the", word("the")), ("cafe", word("cafe")), ("run*", vec![Term { written: vec!["run".into()], prefix: true }]), ("数据", word("数据"))];
        let literal_cases = ["x)", "e.g", "_b", "\"q"];
        let mut cases: Vec<(String, (Vec<String>, usize))> = word_cases.iter().map(|(q, terms)| (q.to_string(), reference_found(&words, terms))).collect();
        for q in literal_cases {
            let needle = q.to_lowercase();
            let mut ids = Vec::new();
            let mut messages = 0;
            for (id, lines) in &generated {
                let n = lines.values().filter(|c| c.to_lowercase().contains(&needle)).count();
                if n > 0 {
                    ids.push(id.clone());
                    messages += n;
                }
            }
            ids.sort();
            cases.push((q.to_owned(), (ids, messages)));
        }
        for (q, (expected, messages)) in &cases {
            assert!(expected.len() > 10, "{q:?} is found in enough conversations to page: {}", expected.len());
            for sort in ["relevance", "newest"] {
                let whole = search_page(&db, &["-n", "1000", "--sort", sort, "--", q]);
                assert_eq!(whole["literal"], word_cases.iter().all(|(w, _)| w != q), "{q:?}");
                let all = ids(whole["results"].as_array().unwrap());
                let mut sorted = all.clone();
                sorted.sort();
                assert_eq!(&sorted, expected, "{q:?} --sort {sort}: every conversation");
                for page_size in [6, 31] {
                    let mut joined = Vec::new();
                    let mut offset = 0;
                    loop {
                        let (n, at) = (page_size.to_string(), offset.to_string());
                        let page = search_page(&db, &["-n", &n, "--offset", &at, "--sort", sort, "--", q]);
                        assert_eq!(page["total"]["conversations"].as_u64().unwrap() as usize, expected.len(), "{q:?} --offset {offset}: total conversations");
                        assert_eq!(page["total"]["messages"].as_u64().unwrap() as usize, *messages, "{q:?} --offset {offset}: total messages");
                        assert_eq!(page["offset"], offset);
                        let got = ids(page["results"].as_array().unwrap());
                        if got.is_empty() {
                            break;
                        }
                        assert!(got.len() <= page_size);
                        joined.extend(got);
                        offset += page_size;
                    }
                    assert_eq!(joined, all, "{q:?} --sort {sort}: pages of {page_size} join up into the whole result");
                }
                if sort == "newest" {
                    let in_listing: Vec<String> = listed.iter().filter(|id| expected.contains(id)).cloned().collect();
                    assert_eq!(all, in_listing, "{q:?}: --sort newest is the listing's order (last modification, newest first)");
                }
            }
        }
    }
}

/// Issue 15, correctness on a realistic root: logs written by
/// `tools/bench/make_realistic_logs.py` (gptme's system prompt, tool calls and outputs, text of
/// this machine's sources, CJK man pages, emoji), and for 70 queries of every class chosen from
/// them — words across the range of frequencies, CJK words, phrases, prefixes, and literal
/// fragments of the text — the conversations found and the matching messages counted equal what
/// the reference tokenizer ([`reference_words`]) or a case-insensitive substring search
/// (`grep -F -i`, as gptme lowercases) finds over every message.
#[test]
fn search_on_a_realistic_root_agrees_with_the_references() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let tool = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/bench/make_realistic_logs.py");
    // Every conversation's distinct lines and their contents, as the store keeps them. The
    // topics are this machine's sources, so which seed brings a CJK man page depends on what is
    // installed: the first of a few seeds whose root holds CJK text is taken.
    let mut generated: Vec<(String, std::collections::BTreeMap<String, String>)> = Vec::new();
    for seed in 2..12 {
        let _ = fs::remove_dir_all(&logs);
        run_ok(std::process::Command::new(common::gptme_python()).arg(&tool).arg(&logs).args([
            "--conversations",
            "60",
            "--messages",
            "30",
            "--seed",
            &seed.to_string(),
        ]));
        generated.clear();
        for entry in fs::read_dir(&logs).unwrap() {
            let dir = entry.unwrap().path();
            let text = fs::read_to_string(dir.join("conversation.jsonl")).unwrap();
            let lines =
                text.lines().map(|l| (l.to_owned(), serde_json::from_str::<Value>(l).unwrap()["content"].as_str().unwrap_or_default().to_owned())).collect();
            generated.push((dir.file_name().unwrap().to_str().unwrap().to_owned(), lines));
        }
        if generated
            .iter()
            .flat_map(|(_, lines)| lines.values())
            .any(|c| c.chars().any(|c| ('\u{3040}'..='\u{9fff}').contains(&c) || ('\u{ac00}'..='\u{d7af}').contains(&c)))
        {
            break;
        }
    }
    for store in &imported(work.path(), &logs) {
        let db = store.db.clone();
        generated.sort();
        let contents: Vec<&String> = generated.iter().flat_map(|(_, lines)| lines.values()).collect();

        // Words by the number of messages holding them: ASCII letters only (other scripts are
        // checked through CJK words and literal queries), not FTS5's operators.
        let mut frequency: std::collections::BTreeMap<String, (usize, String)> = std::collections::BTreeMap::new();
        for content in &contents {
            let mut seen = std::collections::BTreeSet::new();
            for w in written_words(content) {
                if w.len() >= 3
                    && w.chars().all(|c| c.is_ascii_alphabetic())
                    && !matches!(w.as_str(), "AND" | "OR" | "NOT" | "NEAR")
                    && seen.insert(w.to_lowercase())
                {
                    frequency.entry(w.to_lowercase()).or_insert((0, w.clone())).0 += 1;
                }
            }
        }
        let mut by_frequency: Vec<(usize, String)> = frequency.into_values().collect();
        by_frequency.sort();
        let word = |w: &str, prefix| vec![Term { written: vec![w.to_owned()], prefix }];
        let mut word_queries: Vec<Vec<Term>> = Vec::new();
        for k in 0..25 {
            word_queries.push(word(&by_frequency[k * (by_frequency.len() - 1) / 24].1, false));
        }
        for k in 0..8 {
            let w = &by_frequency[(k * 2 + 1) * (by_frequency.len() - 1) / 17].1;
            word_queries.push(word(&w[..3], true));
        }
        let mut rng = Rng(0x00c0_ffee);
        let (mut phrases, mut cjk, mut tries) = (0, 0, 0);
        while (phrases < 15 || cjk < 5) && tries < 100_000 {
            tries += 1;
            let written = written_words(contents[rng.below(contents.len())]);
            if written.len() < 3 {
                continue;
            }
            let start = rng.below(written.len() - 2);
            let run = &written[start..start + 2 + rng.below(2)];
            let is_cjk = |w: &String| w.chars().count() == 1 && w.chars().all(|c| !c.is_ascii() && c.is_alphabetic() && c as u32 >= 0x3040);
            if run.iter().all(is_cjk) && cjk < 5 {
                word_queries.push(word(&run.concat(), false));
                cjk += 1;
            } else if run.iter().all(|w| w.chars().all(|c| c.is_ascii_alphanumeric()) && !matches!(w.as_str(), "AND" | "OR" | "NOT" | "NEAR")) && phrases < 15 {
                word_queries.push(vec![Term { written: run.to_vec(), prefix: false }]);
                phrases += 1;
            }
        }
        assert!(cjk > 0, "the realistic root holds CJK text (man pages in zh_CN, ja, ko)");
        let words = tokenized(&generated);
        let mut checked = 0;
        for terms in &word_queries {
            finds_what_the_reference_finds(store, &words, terms);
            checked += 1;
        }
        // Literal: fragments of the text holding something other than letters and digits (code,
        // paths, punctuation, emoji), some with their case changed, and each class named by hand.
        let mut literals: Vec<String> =
            ["(", "::", "```", "🎉", "😀", "Ran command: `", "```shell", "Saved to `", "->", "$ ", "\"", "\\"].iter().map(|s| s.to_string()).collect();
        while literals.len() < 30 {
            let text: Vec<char> = contents[rng.below(contents.len())].chars().collect();
            if text.len() < 4 {
                continue;
            }
            let start = rng.below(text.len() - 3);
            let piece: String = text[start..(start + 3 + rng.below(10)).min(text.len())].iter().collect();
            if piece.trim().is_empty() || piece.chars().all(|c| c.is_alphanumeric() || c == ' ') {
                continue;
            }
            literals.push(if rng.below(2) == 0 { piece.to_uppercase() } else { piece });
        }
        for q in &literals {
            let needle = q.to_lowercase();
            let mut expected = Vec::new();
            let mut messages = 0;
            for (id, lines) in &generated {
                let n = lines.values().filter(|c| c.to_lowercase().contains(&needle)).count();
                if n > 0 {
                    expected.push(id.clone());
                    messages += n;
                }
            }
            let page = search_page(&db, &["-F", "-n", "1000", "--", q]);
            let mut found = ids(page["results"].as_array().unwrap());
            found.sort();
            assert_eq!(found, expected, "literal query {q:?}: conversations found, against a substring search");
            assert_eq!(page["total"]["messages"].as_u64().unwrap() as usize, messages, "{q:?}: matching messages");
            checked += 1;
        }
        assert!(checked >= 70, "{checked} queries");
    }
}

/// The word queries ranked by the ranking index (plain words and phrases) over generated logs,
/// and whether a search of each gives what the same search gives from the word index alone:
/// the same conversations, with the same counts of matches.
fn same_answers_with_and_without_the_ranking_index(db: &Path, queries: &[String]) {
    let answer = |q: &str| -> (Vec<(String, u64)>, Value) {
        let page = search_page(db, &["-n", "1000", "--", q]);
        let mut found: Vec<(String, u64)> =
            page["results"].as_array().unwrap().iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r["matches"].as_u64().unwrap())).collect();
        found.sort();
        (found, page["ranked_by"].clone())
    };
    let with: Vec<_> = queries.iter().map(|q| answer(q)).collect();
    // A small page of a word in many texts is past the first window of ranked texts (64): its
    // conversations' counts are made whole (by the ranking index, asked for the page's texts;
    // by the word index, from the page's conversations), and are those of the whole answer,
    // where the window held every match.
    let small_pages_count_every_match = |by: &str| {
        let mut past_the_window = 0;
        for (q, (found, _)) in queries.iter().zip(&with) {
            let page = search_page(db, &["-n", "3", "-m", "1", "--", q]);
            assert_eq!(page["ranked_by"], by, "{q:?}");
            for r in page["results"].as_array().unwrap() {
                let id = r["id"].as_str().unwrap();
                let whole = found.iter().find(|(f, _)| f == id).map(|(_, n)| *n);
                assert_eq!(Some(r["matches"].as_u64().unwrap()), whole, "{q:?} by the {by}: {id}'s matches on a page of 3 and in the whole answer");
            }
            past_the_window += usize::from(found.iter().map(|(_, n)| n).sum::<u64>() > 100);
        }
        assert!(past_the_window > 0, "some query ({queries:?}) is found in more texts than the first window");
    };
    small_pages_count_every_match("ranking index");
    // A file where the index directory would be: the index cannot be used, the word index answers.
    let dir = ranking_dir(db);
    let aside = dir.with_extension("ranking-aside");
    fs::rename(&dir, &aside).unwrap();
    fs::write(&dir, "not an index").unwrap();
    for (q, (found, by)) in queries.iter().zip(&with) {
        assert_eq!(by, "ranking index", "{q:?}");
        let (without, by) = answer(q);
        assert_eq!(by, "word index", "{q:?} without the ranking index");
        assert_eq!(&without, found, "{q:?}: the ranking index finds what the word index finds, with the same counts");
    }
    small_pages_count_every_match("word index");
    fs::remove_file(&dir).unwrap();
    fs::rename(&aside, &dir).unwrap();
}

fn ranking_dir(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".ranking");
    name.into()
}

/// An import of many batches builds the ranking index as its batches commit (on a thread of its
/// own) and ends with every message in it and in the word and substring indexes: doctor finds
/// them whole, and the ranking index answers as the word index alone does. (Batches of 8 KiB
/// here, of 64 MiB in `sessiondb import`.)
#[test]
fn an_import_of_many_batches_ends_with_the_ranking_index_whole() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    generated_logs_of(&logs, 120, 0x5eed_b47c, WORD_PIECES);
    for i in (0..120).step_by(17) {
        conversation(&logs, &format!("zebracorn-{i}"), &[("user", "a zebracorn"), ("assistant", "the zebracorn, again")]);
    }
    let db = work.path().join("db");
    let store = sessiondb::store::Store::open(&db).unwrap();
    let report = sessiondb::sync::import::import_root_in_batches(&store, &logs, None, 8 << 10, &mut |_| {}).unwrap();
    assert!(report.bytes > 16 * (8 << 10), "many batches: {} bytes", report.bytes);
    assert_eq!((report.failed, report.conversations), (0, 120 + 8));
    assert!(ranking_dir(&db).join("meta.json").exists(), "the index followed the batches");
    // The batches committed unindexed; the import built the word and substring indexes after.
    assert_eq!(store.search_indexes_behind().unwrap(), 0);
    assert!(report.listable_seconds <= report.seconds);
    drop(store);
    let out = sessiondb(&db).arg("doctor").arg(&logs).arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let queries: Vec<String> = ["the", "zebracorn", "borrow checker", "\"the borrow\""].iter().map(|s| s.to_string()).collect();
    same_answers_with_and_without_the_ranking_index(&db, &queries);
    assert_eq!(search(&db, &["-n", "1000", "zebracorn"]).len(), 8);
}

/// On a server the search sets follow an import's batches as they commit (a thread indexing
/// each beside the import, the import indexing what is left at its end, both taking waiting
/// texts no other has taken): after an import of many batches none waits, and every query
/// answers as on SQLite.
#[test]
fn an_import_of_many_batches_on_a_server_ends_with_its_search_sets_whole() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    generated_logs_of(&logs, 120, 0x5eed_b47d, WORD_PIECES);
    for i in (0..120).step_by(17) {
        conversation(&logs, &format!("zebracorn-{i}"), &[("user", "a zebracorn"), ("assistant", "the zebracorn, again")]);
    }
    let store = sessiondb::store::Store::open(&pg.db).unwrap();
    let report = sessiondb::sync::import::import_root_in_batches(&store, &logs, None, 8 << 10, &mut |_| {}).unwrap();
    assert!(report.bytes > 16 * (8 << 10), "many batches: {} bytes", report.bytes);
    assert_eq!((report.failed, report.conversations), (0, 120 + 8));
    assert_eq!(store.search_indexes_behind().unwrap(), 0);
    drop(store);
    let sqlite = work.path().join("db");
    run_ok(sessiondb(&sqlite).arg("import").arg(&logs));
    // Each conversation found, with its count of matches (the order of equal scores is the
    // engine's).
    let found = |db: &Path, query: &[&str]| {
        let mut found: Vec<(String, Value)> = search(db, query).iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r["matches"].clone())).collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    };
    for query in
        [&["-n", "1000", "zebracorn"][..], &["-n", "1000", "the"], &["-n", "1000", "\"the borrow\""], &["-n", "1000", "-F", "orrow c"], &["-n", "1000", "borr*"]]
    {
        let on_server = found(&pg.db, query);
        assert!(!on_server.is_empty(), "{query:?}");
        assert_eq!(on_server, found(&sqlite, query), "{query:?}");
    }
    assert_eq!(search(&pg.db, &["-n", "1000", "zebracorn"]).len(), 8);
}

/// Issue 15, item 3: the ranking index is derived and follows the store through every kind of
/// change: messages appended, a conversation removed, an undo and an edit (each deletes rows);
/// an index left behind (as a process killed before its catch-up would leave it) is caught up,
/// deletions included; an index of another database, or one claiming more than this store ever
/// held, is rebuilt; doctor sees both and `doctor --reindex` makes it again. Every answer is
/// checked against the word index alone.
#[test]
fn the_ranking_index_follows_the_store_and_is_never_trusted_blindly() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    generated_logs_of(&logs, 40, 0x5eed_0015, WORD_PIECES);
    conversation(&logs, "keeper", &[("user", "zebracorn appears here"), ("assistant", "and zebracorn again")]);
    conversation(&logs, "goner", &[("user", "zebracorn in a conversation removed later")]);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    assert!(ranking_dir(&db).join("meta.json").exists(), "import builds the ranking index");
    let queries: Vec<String> = ["the", "zebracorn", "cafe", "数据", "\"the cafe\"", "run tests"].iter().map(|s| s.to_string()).collect();
    same_answers_with_and_without_the_ranking_index(&db, &queries);
    let found = |q: &str| -> Vec<String> {
        let mut v = ids(&search(&db, &["-n", "1000", "--", q]));
        v.sort();
        v
    };
    assert_eq!(found("zebracorn"), ["goner", "keeper"]);
    // A copy of the index as it is now: later, it stands for one that missed what follows.
    let old = work.path().join("old.ranking");
    copy_dir(&ranking_dir(&db), &old);
    run_ok(sessiondb(&db).args(["rm", "--yes", "goner"]));
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "a fresh quokkaberry", "keeper"]));
    run_ok(sessiondb(&db).args(["undo", "keeper"]));
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "quokkaberry, once more", "keeper"]));
    assert_eq!(found("zebracorn"), ["keeper"], "the removed conversation's messages are gone from the index");
    assert_eq!(found("quokkaberry"), ["keeper"]);
    assert_eq!(search(&db, &["quokkaberry"])[0]["matches"], 2, "main's message, and the undone one in undo's backup branch");
    assert_eq!(search(&db, &["quokkaberry", "--branch", "main"])[0]["matches"], 1, "the undone message is gone from main");
    same_answers_with_and_without_the_ranking_index(&db, &queries);
    // Behind, as a process killed before its catch-up leaves it: the next catch-up applies the
    // deletions it missed (still in the log) and adds what is new. Doctor counts what it holds,
    // so a deleted message left in it would be reported.
    let behind = work.path().join("behind.ranking");
    copy_dir(&ranking_dir(&db), &behind);
    run_ok(sessiondb(&db).args(["rm", "--yes", "keeper"]));
    run_ok(sessiondb(&db).args(["new", "--logs-dir"]).arg(&logs).arg("newcomer"));
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "zebracorn is back", "newcomer"]));
    fs::remove_dir_all(ranking_dir(&db)).unwrap();
    copy_dir(&behind, &ranking_dir(&db));
    assert_eq!(found("zebracorn"), ["newcomer"], "a behind index is caught up");
    assert_eq!(search_page(&db, &["zebracorn"])["ranked_by"], "ranking index");
    run_ok(sessiondb(&db).arg("doctor"));
    same_answers_with_and_without_the_ranking_index(&db, &queries);
    // An older copy put back, which missed deletions the log no longer holds: doctor says so,
    // and the next search rebuilds it.
    fs::remove_dir_all(ranking_dir(&db)).unwrap();
    copy_dir(&old, &ranking_dir(&db));
    let doctor = sessiondb(&db).arg("doctor").output().unwrap();
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("ranking index: it belongs to another database, or to another state of this one"));
    assert_eq!(found("zebracorn"), ["newcomer"], "an older copy of the index is rebuilt");
    assert_eq!(search_page(&db, &["zebracorn"])["ranked_by"], "ranking index");
    run_ok(sessiondb(&db).arg("doctor"));
    same_answers_with_and_without_the_ranking_index(&db, &queries);
    // Another database's index: doctor says so, a search rebuilds it and answers right.
    let other_logs = work.path().join("other-logs");
    conversation(&other_logs, "elsewhere", &[("user", "nothing about the animals")]);
    let other = work.path().join("other-db");
    run_ok(sessiondb(&other).arg("import").arg(&other_logs));
    fs::remove_dir_all(ranking_dir(&other)).unwrap();
    copy_dir(&ranking_dir(&db), &ranking_dir(&other));
    let doctor = sessiondb(&other).arg("doctor").output().unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout).to_string() + &String::from_utf8_lossy(&doctor.stderr);
    assert!(said.contains("ranking index: it belongs to another database"), "{said}");
    let page = search_page(&other, &["zebracorn"]);
    assert_eq!(page["results"].as_array().unwrap().len(), 0, "nothing of the other database is found");
    assert_eq!(page["ranked_by"], "ranking index");
    assert_eq!(ids(&search(&other, &["animals"])), ["elsewhere"]);
    run_ok(sessiondb(&other).arg("doctor"));
    // Damaged (a segment file lost): doctor reports it, searches still answer, --reindex mends.
    let segment = fs::read_dir(ranking_dir(&db)).unwrap().flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "idx")).unwrap();
    fs::remove_file(&segment).unwrap();
    assert!(!sessiondb(&db).arg("doctor").output().unwrap().status.success(), "doctor reports a damaged ranking index");
    assert_eq!(found("zebracorn"), ["newcomer"], "a damaged index never fails a search");
    run_ok(sessiondb(&db).args(["doctor", "--reindex"]));
    assert_eq!(search_page(&db, &["zebracorn"])["ranked_by"], "ranking index");
    same_answers_with_and_without_the_ranking_index(&db, &queries);
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap().flatten() {
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A link planted where the ranking index goes is never followed: searches answer from the word
/// index and nothing is written where it points; `doctor --reindex` removes the link (not what
/// it points to) and makes a real index.
#[test]
fn a_link_planted_at_the_ranking_index_is_never_followed() {
    let (work, dbs) = setup();
    // The ranking index is SQLite's (a directory beside the file).
    let db = dbs[0].db.clone();
    fs::remove_dir_all(ranking_dir(&db)).unwrap();
    let target = work.path().join("elsewhere");
    fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, ranking_dir(&db)).unwrap();
    let page = search_page(&db, &["borrow"]);
    assert_eq!(ids(page["results"].as_array().unwrap()), ["rust-talk", "python-talk"]);
    assert_eq!(page["ranked_by"], "word index");
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0, "nothing written through the link");
    run_ok(sessiondb(&db).args(["doctor", "--reindex"]));
    assert!(fs::symlink_metadata(ranking_dir(&db)).unwrap().is_dir(), "a real directory now");
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0, "what the link pointed to is untouched");
    assert_eq!(search_page(&db, &["borrow"])["ranked_by"], "ranking index");
}

/// Searches in many processes at once, while the index is behind: each answers right (one
/// catches the index up, the others wait for it or answer from the word index), and the index
/// ends up whole, as doctor checks.
#[test]
fn concurrent_searches_of_a_behind_index_all_answer_right() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    generated_logs_of(&logs, 30, 0xc0c0_0015, WORD_PIECES);
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    for i in 0..30 {
        let chat = format!("extra-{i:02}");
        run_ok(sessiondb(&db).args(["new", "--logs-dir"]).arg(&logs).arg(&chat));
        run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "the wombatfruit arrives", &chat]));
    }
    let children: Vec<_> =
        (0..6).map(|_| sessiondb(&db).args(["search", "--json", "-n", "100", "wombatfruit"]).stdout(std::process::Stdio::piped()).spawn().unwrap()).collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let page: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(page["results"].as_array().unwrap().len(), 30, "every conversation holding it");
    }
    run_ok(sessiondb(&db).arg("doctor"));
}

/// Pages, offsets and match counts of any size are answered, never an allocation in proportion
/// to them: `--offset 4294967295` made the ranking index ask for a 275 GB heap and the process
/// abort; `usize::MAX` overflowed the window's arithmetic.
#[test]
fn huge_offsets_limits_and_match_counts_are_answered() {
    let (_work, dbs) = setup();
    for store in &dbs {
        let db = store.db.clone();
        let max = usize::MAX.to_string();
        for q in ["borrow", "decorat*", "foo-bar", "\"borrow checker\"", "数据库"] {
            for (offset, limit, matches) in
                [("4294967295", "20", "1"), (max.as_str(), max.as_str(), max.as_str()), ("0", max.as_str(), max.as_str()), ("1", "4294967295", "4294967295")]
            {
                for sort in ["relevance", "newest"] {
                    let page = search_page(&db, &["--offset", offset, "-n", limit, "-m", matches, "--sort", sort, "--", q]);
                    let results = page["results"].as_array().unwrap();
                    if offset == "0" {
                        assert!(!results.is_empty(), "{q:?} -n {limit}: found");
                    } else if offset != "1" {
                        assert!(results.is_empty(), "{q:?} --offset {offset}: nothing that far");
                    }
                }
            }
        }
    }
}

/// Issue 15: an import commits its conversations before it indexes them, so that they can be
/// listed at once; a search never misses what was stored. Left as an import stopped right after
/// its rows leaves it (nothing in the word and substring indexes): every conversation is listed,
/// doctor finds nothing wrong and counts what is not indexed; an append meanwhile leaves its
/// message waiting with the rest (it does not pay for the import); a search while another
/// process holds the write lock answers from the indexes as they are and says how many messages
/// it could not look at; the next search indexes them first, and then answers as a store that
/// was indexed as it went; with nothing waiting, an append is indexed as it commits, and with
/// a few waiting it indexes them too; and `sync` finishes what a stopped import left.
#[test]
fn an_import_is_listed_before_it_is_indexed_and_no_search_misses_what_it_stored() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    generated_logs_of(&logs, 260, 0x5eed_0016, WORD_PIECES);
    conversation(&logs, "late-quokka", &[("user", "a quokkaberry pie, please"), ("assistant", "Quokkaberry (pie) it is: C:\\Users\\pie")]);
    let (db, indexed) = (work.path().join("db"), work.path().join("indexed"));
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    run_ok(sessiondb(&indexed).arg("import").arg(&logs));
    // The database as another SQLite program sees it, with the functions its indexes need.
    let raw = |db: &Path| -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(db).unwrap();
        sessiondb::store::fts::register_functions(&conn).unwrap();
        conn
    };
    // The state an import stopped right after its rows leaves: nothing indexed. Returns the
    // texts stored.
    let unindex = |db: &Path| -> i64 {
        let conn = raw(db);
        conn.execute_batch(
            "INSERT INTO texts_fts (texts_fts) VALUES ('delete-all');
             INSERT INTO texts_substring (texts_substring) VALUES ('delete-all');
             UPDATE store_state SET value = 0 WHERE key IN ('fts_indexed_upto', 'substring_indexed_upto');",
        )
        .unwrap();
        conn.query_row("SELECT count(*) FROM texts", [], |r| r.get(0)).unwrap()
    };
    let stored = unindex(&db);
    assert!(stored > sessiondb::store::fts::INLINE_LAG, "more waiting than a write indexes with its own: {stored}");
    let listed = run_ok(sessiondb(&db).args(["list", "--json", "-n", "1000"]));
    assert_eq!(serde_json::from_slice::<Value>(&listed.stdout).unwrap().as_array().unwrap().len(), 261, "every conversation is listed");
    let doctor = |db: &Path| -> Value {
        let out = sessiondb(db).args(["doctor", "--json"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(doctor(&db)["unindexed"], stored, "doctor counts what is not indexed, and it is not a problem");
    // A write meanwhile leaves its message to wait with the others: it never pays for the import.
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "a wombatberry, then", "late-quokka"]));
    // (Both stores read the same logs root: the other takes the append in from there.)
    run_ok(sessiondb(&indexed).arg("sync").arg(&logs));
    let stored = stored + 1;
    assert_eq!(doctor(&db)["unindexed"], stored);
    // Word queries the ranking index does not answer (a prefix, a boolean), and literal ones.
    let queries = ["quokkaber*", "quokkaberry OR borrow", "(pie", "c:\\users", "quokkaberry (pie)", "wombatber*"];
    {
        // Another process holds the write lock: the search answers from what is indexed, and says so.
        let holder = rusqlite::Connection::open(&db).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        for q in queries {
            let out = sessiondb(&db).args(["search", "--json", "--", q]).output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{q:?}: {}", String::from_utf8_lossy(&out.stderr));
            let page: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(page["unindexed"], stored, "{q:?}");
            assert_eq!(page["results"].as_array().unwrap().len(), 0, "{q:?}: nothing is indexed yet");
            let told = String::from_utf8_lossy(&out.stderr);
            assert!(told.contains(&format!("{stored} messages are not in the search index yet")), "{q:?}: {told}");
        }
        holder.execute_batch("ROLLBACK").unwrap();
    }
    // The next search indexes them first, and every answer is whole.
    for q in queries {
        let page = search_page(&db, &["-n", "1000", "--", q]);
        assert_eq!(page["unindexed"], 0, "{q:?}");
        let expected = search_page(&indexed, &["-n", "1000", "--", q]);
        assert_eq!(ids(page["results"].as_array().unwrap()), ids(expected["results"].as_array().unwrap()), "{q:?}");
        assert_eq!(page["total"], expected["total"], "{q:?}");
    }
    assert_eq!(ids(&search(&db, &["quokkaber*"])), ["late-quokka"]);
    assert_eq!(ids(&search(&db, &["-F", "wombatberry,"])), ["late-quokka"]);
    assert_eq!(doctor(&db)["unindexed"], 0);
    // And with nothing waiting, a write is searchable as soon as it is committed; with a few
    // waiting (a writer's own, left while an import was indexing), the next write indexes them.
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "a numbatberry now", "late-quokka"]));
    assert_eq!(doctor(&db)["unindexed"], 0);
    raw(&db)
        .execute_batch(
            "UPDATE store_state SET value = (SELECT max(id) - 3 FROM texts) WHERE key IN ('fts_indexed_upto', 'substring_indexed_upto');
             DELETE FROM texts_fts WHERE rowid > (SELECT value FROM store_state WHERE key = 'fts_indexed_upto');
             DELETE FROM texts_substring WHERE rowid > (SELECT value FROM store_state WHERE key = 'fts_indexed_upto');",
        )
        .unwrap();
    assert_eq!(doctor(&db)["unindexed"], 3);
    run_ok(sessiondb(&db).args(["append", "--role", "user", "--content", "and a bilbyberry", "late-quokka"]));
    assert_eq!(doctor(&db)["unindexed"], 0);
    // `sync` finishes what a stopped import left, too.
    assert!(unindex(&db) > 0);
    run_ok(sessiondb(&db).arg("sync").arg(&logs));
    assert_eq!(doctor(&db)["unindexed"], 0);
    assert_eq!(ids(&search(&db, &["-F", "numbatberry"])), ["late-quokka"]);
}

/// Past 1,000 matching messages a search stops counting and says "at least" (`exact: false`,
/// the text header's "at least"), for word and literal queries alike, and a literal query past
/// 1,000 candidates read; `--exact-total` counts every one, on both engines.
#[test]
fn totals_past_a_thousand_matches_or_candidates_say_at_least_unless_asked_for_every_one() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    // More conversations than a page (20), so that counting goes on past it.
    for c in 0..30 {
        let lines: Vec<(&str, String)> = (0..40)
            .map(|i| {
                (if i % 2 == 0 { "user" } else { "assistant" }, format!("numbat {c} sighting {i}: a numbat-like marsupial{}", if i % 20 == 1 { " 🦘" } else { "" }))
            })
            .collect();
        let lines: Vec<(&str, &str)> = lines.iter().map(|(r, t)| (*r, t.as_str())).collect();
        conversation(&logs, &format!("numbats-{c:02}"), &lines);
    }
    for store in imported(work.path(), &logs) {
        for query in [&["numbat"][..], &["-F", "numbat-like"][..]] {
            let counted = search_page(&store.db, query);
            let exact = search_page(&store.db, &[query, &["--exact-total"][..]].concat());
            assert_eq!(exact["total"], serde_json::json!({"messages": 1_200, "conversations": 30, "exact": true}), "{}: {query:?}", store.engine);
            assert_eq!(counted["total"]["exact"], false, "{}: {query:?}: {}", store.engine, counted["total"]);
            let (messages, conversations) = (counted["total"]["messages"].as_u64().unwrap(), counted["total"]["conversations"].as_u64().unwrap());
            assert!((1_000..1_200).contains(&messages) && (1..=30).contains(&conversations), "{query:?}: {}", counted["total"]);
            assert_eq!(counted["results"], exact["results"], "{query:?}: the page is the same");
            let text = run_ok(sessiondb(&store.db).arg("search").args(query));
            let header = String::from_utf8_lossy(&text.stdout).lines().next().unwrap_or_default().to_owned();
            assert!(header.contains("at least") && header.contains("--exact-total"), "{query:?}: {header}");
        }
        // A needle too short for the substring index has every message for a candidate: past
        // 1,000 read, counting stops though only 60 match, and the page is the same.
        let query = &["-F", "🦘"][..];
        let (counted, exact) = (search_page(&store.db, query), search_page(&store.db, &[query, &["--exact-total"][..]].concat()));
        assert_eq!(exact["total"], serde_json::json!({"messages": 60, "conversations": 30, "exact": true}), "{}", store.engine);
        assert_eq!(counted["total"]["exact"], false, "{}: {}", store.engine, counted["total"]);
        assert!(counted["total"]["messages"].as_u64().unwrap() < 60, "{}", counted["total"]);
        assert_eq!(counted["results"], exact["results"], "the page is the same");
    }
}

/// A text holding control characters (U+0001, tab, bell) is indexed whole on both engines: its
/// literal pieces across them and the words they separate are found, and a text without them
/// beside it too. (A server's sets are tsvector input: a lexeme holding a control character
/// must reach it as it is, whatever a faster way of sending sets splits them by.)
#[test]
fn control_characters_in_a_text_are_indexed_like_any_other() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation(&logs, "controls", &[("user", "tab\tsep\u{1}arated q\u{1}\u{1}x bell\u{7}ring unique-wordzz"), ("assistant", "plain answer")]);
    conversation(&logs, "plain", &[("user", "separated by nothing")]);
    for store in imported(work.path(), &logs) {
        for literal in ["p\u{1}ar", "q\u{1}\u{1}x", "\u{1}", "l\u{7}r", "wordzz"] {
            assert_eq!(ids(&search(&store.db, &[literal, "--literal"])), ["controls"], "{}: {literal:?}", store.engine);
        }
        assert_eq!(ids(&search(&store.db, &["arated"])), ["controls"], "{}: a word beside the separator", store.engine);
        assert_eq!(ids(&search(&store.db, &["separated"])), ["plain"], "{}", store.engine);
        assert_eq!(ids(&search(&store.db, &["answer"])), ["controls"], "{}", store.engine);
        store.assert_sound("after the import");
    }
}
