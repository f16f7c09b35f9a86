//! Issue 33: message texts stored once per source and compressed (`store::texts`, schema 21).
//! A text a thousand conversations share (gptme's system prompt) is one row; once a store holds
//! enough texts it trains its dictionary and compresses them all with it; export still gives
//! every file back byte for byte. A store of the previous release moves its texts in place. A
//! damaged text, shared or not, is named by `doctor` with every conversation holding it, the
//! other conversations are untouched, and reading the conversation's directory again heals it.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{run_ok, sessiondb};

/// gptme's system prompt stands for what every conversation repeats: long, the same everywhere.
fn system_prompt() -> String {
    let mut prompt = String::from("You are gptme, a general-purpose AI assistant powered by LLMs. ");
    for tool in ["shell", "python", "save", "append", "patch", "read", "browser", "tmux", "gh", "screenshot"] {
        prompt.push_str(&format!(
            "\n\n## {tool}\n\nThe `{tool}` tool lets you run {tool} commands. Use it by writing a codeblock tagged `{tool}`; its output is returned to you as a system message. Prefer small steps, check each result, and explain what you do."
        ));
    }
    prompt
}

/// The prompt of the odd conversations.
fn other_prompt() -> String {
    system_prompt().replace("general-purpose", "careful")
}

fn line(role: &str, content: &str, at: &str) -> String {
    let m = sessiondb::model::Message::new(sessiondb::model::Role::parse(role), content, Some(at.into()));
    sessiondb::codec::message_line::encode_message(&m) + "\n"
}

/// `n` conversations, each a system prompt (the even ones [`system_prompt`], the odd ones
/// [`other_prompt`]) then a question and an answer of its own.
fn logs_sharing_a_prompt(root: &Path, n: usize) {
    for i in 0..n {
        let prompt = if i % 2 == 0 { system_prompt() } else { other_prompt() };
        let dir = root.join(format!("2026-03-{:02}-chat-{i:05}", 1 + i % 28));
        fs::create_dir_all(&dir).unwrap();
        let question = format!("How do I make crate number {i} build faster? It takes {} seconds in CI and my laptop fan spins up.", 30 + i % 90);
        let answer = format!(
            "Crate {i}: try `cargo build --timings` first, then split the {} largest modules, enable incremental builds and cache the target directory between CI runs.",
            1 + i % 7
        );
        let text =
            line("system", &prompt, "2026-03-01T09:00:00") + &line("user", &question, "2026-03-01T09:00:01") + &line("assistant", &answer, "2026-03-01T09:00:02");
        fs::write(dir.join("conversation.jsonl"), text).unwrap();
    }
}

fn bytes_under(root: &Path) -> u64 {
    fs::read_dir(root)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                bytes_under(&e.path())
            } else {
                e.metadata().unwrap().len()
            }
        })
        .sum()
}

/// One integer an SQL query of the store gives (`?1` is `arg`).
fn one(store: &common::TestDb, sql: &str, arg: &str) -> i64 {
    store.query_pair(&format!("SELECT CAST(({sql}) AS BIGINT), CAST(0 AS BIGINT)"), arg).0
}

/// Changes one byte (the 21st, past a compressed text's header) of text `id`'s stored form,
/// directly in the database.
fn damage_text(store: &common::TestDb, id: i64) {
    if store.engine == "sqlite" {
        let conn = rusqlite::Connection::open(&store.db).unwrap();
        let mut data: Vec<u8> = conn.query_row("SELECT data FROM texts WHERE id = ?1", [id], |r| r.get(0)).unwrap();
        data[20] ^= 0xff;
        conn.execute("UPDATE texts SET data = ?2 WHERE id = ?1", rusqlite::params![id, data]).unwrap();
    } else {
        let mut client = postgres::Client::connect(store.db.to_str().unwrap(), postgres::NoTls).unwrap();
        client.execute("UPDATE texts SET data = set_byte(data, 20, get_byte(data, 20) # 255) WHERE id = $1", &[&id]).unwrap();
    }
}

/// The SQL of a text's codec byte, on `store`'s engine.
fn codec(store: &common::TestDb) -> &'static str {
    if store.engine == "sqlite" {
        "CAST(hex(substr(data, 1, 1)) AS INTEGER)"
    } else {
        "get_byte(data, 0)"
    }
}

/// Makes every transcript under `root` one second newer: the store reads each again whole.
fn touch_all(root: &Path) {
    for e in fs::read_dir(root).unwrap() {
        let file = e.unwrap().path().join("conversation.jsonl");
        let mtime = filetime::FileTime::from_last_modification_time(&fs::metadata(&file).unwrap());
        filetime::set_file_mtime(&file, filetime::FileTime::from_unix_time(mtime.unix_seconds() + 1, mtime.nanoseconds())).unwrap();
    }
}

/// 1,100 conversations with gptme's prompt in each: the prompt is one text, the store trains a
/// dictionary and keeps every text compressed with it, and the rows of texts take a small part of
/// what the logs hold; export gives every file back.
#[test]
fn shared_texts_are_stored_once_and_compressed() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    logs_sharing_a_prompt(&logs, 1_100);
    for store in common::databases(work.path()) {
        run_ok(sessiondb(&store.db).arg("import").arg(&logs));
        for prompt in [system_prompt(), other_prompt()] {
            let hash = sessiondb::store::texts::hash(&prompt).to_string();
            assert_eq!(one(&store, "SELECT count(*) FROM texts WHERE hash = CAST(CAST(?1 AS TEXT) AS BIGINT)", &hash), 1, "{}: a prompt is one text", store.engine);
        }
        assert_eq!(one(&store, "SELECT count(*) FROM messages WHERE role IS NOT NULL AND ?1 = ?1", ""), 3_300);
        assert_eq!(one(&store, "SELECT count(*) FROM texts WHERE ?1 = ?1", ""), 2_202, "{}: every other text once", store.engine);
        assert_eq!(one(&store, "SELECT count(*) FROM text_dictionaries WHERE ?1 = ?1", ""), 1, "{}: a dictionary was trained", store.engine);
        let plain = one(&store, &format!("SELECT count(*) FROM texts WHERE {} = 0 AND length(data) > 64 AND ?1 = ?1", codec(&store)), "");
        assert_eq!(plain, 0, "{}: every text worth it is compressed", store.engine);
        let with = one(&store, &format!("SELECT count(*) FROM texts WHERE {} = 2 AND ?1 = ?1", codec(&store)), "");
        assert!(with >= 2_200, "{}: {with} texts compressed with the dictionary", store.engine);
        let stored = one(&store, "SELECT sum(length(data)) FROM texts WHERE ?1 = ?1", "");
        let logs_bytes = bytes_under(&logs);
        assert!(stored * 10 < logs_bytes as i64, "{}: texts take {stored} bytes for {logs_bytes} bytes of logs", store.engine);
        let out = work.path().join(format!("out-{}", store.engine));
        run_ok(sessiondb(&store.db).arg("export").arg("--to").arg(&out));
        common::tree::assert_same_tree(&logs, &out, &[".lock"]);
        let found = run_ok(sessiondb(&store.db).args(["search", "laptop fan", "--json", "-n", "0"]));
        let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
        assert_eq!(found["total"]["conversations"], 1_100, "{}", store.engine);
        store.assert_sound("after the import");
    }
}

/// A store written by the previous release (schema 15, commit 88ea9a1, from the fixture logs at
/// /tmp/fx/logs) moves its messages' texts into `texts` when opened, and reads, searches and
/// exports as before, byte for byte.
#[test]
fn a_store_of_schema_15_moves_its_texts_in_place() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("db");
    fs::copy(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/schema15-by-88ea9a1.sqlite"), &db).unwrap();
    let before = rusqlite::Connection::open(&db).unwrap();
    let (messages, distinct): (i64, i64) = before
        .query_row(
            "SELECT count(*), (SELECT count(*) FROM (SELECT DISTINCT content FROM messages WHERE content IS NOT NULL)) FROM messages WHERE role IS NOT NULL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let with_metadata: i64 = before.query_row("SELECT count(metadata) FROM messages", [], |r| r.get(0)).unwrap();
    drop(before);
    let listed: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["list", "--json", "--all"])).stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 18);
    // Schema 25: gptme's usual metadata moved into the rows' columns, the rest kept as text;
    // rows found by the first bytes of their digest; gptme's own timestamps as integers.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (text, shaped): (i64, i64) = conn.query_row("SELECT count(metadata), count(metadata_shape) FROM messages", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(text + shaped, with_metadata, "each message's metadata is kept one way");
    assert!(shaped > 0 && text > 0, "{shaped} in columns, {text} as text");
    let (integers, texts): (i64, i64) = conn
        .query_row("SELECT count(*) FILTER (WHERE typeof(timestamp) = 'integer'), count(*) FILTER (WHERE typeof(timestamp) = 'text') FROM messages", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert!(integers > 0 && texts > 0, "gptme's own timestamps kept as integers ({integers}), the others as text ({texts})");
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE tbl_name = 'messages' AND type = 'index' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(indexes, ["messages_by_line", "messages_by_text", "messages_not_rewritten_unchanged"]);
    drop(conn);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, sessiondb::store::schema::CURRENT_VERSION);
    let (moved, texts, without): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM messages WHERE role IS NOT NULL), (SELECT count(*) FROM texts),
                    (SELECT count(*) FROM messages WHERE role IS NOT NULL AND text_id IS NULL)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((moved, without), (messages, 0), "every message keeps its text");
    assert!(texts <= distinct, "{texts} texts for {distinct} distinct contents: each once per source");
    drop(conn);
    let out = work.path().join("out");
    run_ok(sessiondb(&db).arg("export").arg("--to").arg(&out));
    // Made from another checkout of the fixtures: the same bytes, not the same mtimes; and from
    // the fixtures as they named their root before issue 32 (tree::neutral_paths).
    common::tree::neutral_paths(&out);
    common::tree::assert_same_contents(&common::fixtures(), &out, &[".lock"]);
    let found: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "capital", "--json"])).stdout).unwrap();
    assert_eq!(found["results"][0]["id"], "2026-07-01-basic-chat");
    let doctor = run_ok(sessiondb(&db).args(["doctor", "--json"]));
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
}

/// A damaged text — one conversation's own, and the prompt half the conversations share — is
/// named by `doctor` with the conversations holding it; the conversations holding neither still
/// export byte for byte, one holding a damaged text fails saying which text, and reading the
/// directories again heals the store.
#[test]
fn a_damaged_text_is_named_and_nothing_else_is_lost() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    logs_sharing_a_prompt(&logs, 1_050);
    for store in common::databases(work.path()) {
        run_ok(sessiondb(&store.db).arg("import").arg(&logs));
        let id_of =
            |text: &str| one(&store, "SELECT id FROM texts WHERE hash = CAST(CAST(?1 AS TEXT) AS BIGINT)", &sessiondb::store::texts::hash(text).to_string());
        // Conversation 7's answer (it has the other prompt), and the prompt of the even ones.
        let own = id_of("Crate 7: try `cargo build --timings` first, then split the 1 largest modules, enable incremental builds and cache the target directory between CI runs.");
        let shared = id_of(&system_prompt());
        damage_text(&store, own);
        damage_text(&store, shared);
        let doctor = sessiondb(&store.db).args(["doctor", "--json"]).output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
        let problems: Vec<String> = report["problems"].as_array().unwrap().iter().map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned)).collect();
        let named = |id: i64, chats: &[&str]| problems.iter().any(|p| p.contains(&format!("text {id} ")) && chats.iter().all(|c| p.contains(c)));
        assert!(named(own, &["2026-03-08-chat-00007"]), "{}: {problems:?}", store.engine);
        assert!(named(shared, &["2026-03-01-chat-00000", "2026-03-03-chat-00002"]), "{}: the shared text names its holders: {problems:?}", store.engine);
        // The odd conversations but 7 hold neither: each exported as it is.
        let out = work.path().join(format!("out-{}", store.engine));
        let sound = ["2026-03-02-chat-00001", "2026-03-04-chat-00003", "2026-03-10-chat-00009"];
        run_ok(sessiondb(&store.db).arg("export").arg("--to").arg(&out).args(sound));
        for chat in sound {
            common::tree::assert_same_tree(&logs.join(chat), &out.join(chat), &[".lock"]);
        }
        for (chat, text) in [("2026-03-08-chat-00007", own), ("2026-03-01-chat-00000", shared)] {
            let refused = sessiondb(&store.db).arg("export").arg("--to").arg(work.path().join("refused")).arg(chat).output().unwrap();
            let err = String::from_utf8_lossy(&refused.stderr);
            assert!(!refused.status.success() && err.contains(&format!("text {text} cannot be read")), "{}: {chat}: {err}", store.engine);
        }
        // Reading the directories again stores both texts again, soundly; the damaged rows go.
        touch_all(&logs);
        run_ok(sessiondb(&store.db).arg("import").arg(&logs));
        let healed = work.path().join(format!("healed-{}", store.engine));
        run_ok(sessiondb(&store.db).arg("export").arg("--to").arg(&healed));
        common::tree::assert_same_tree(&logs, &healed, &[".lock"]);
        for id in [own, shared] {
            assert_eq!(
                one(&store, "SELECT count(*) FROM texts WHERE id = CAST(CAST(?1 AS TEXT) AS BIGINT)", &id.to_string()),
                0,
                "{}: the damaged row went",
                store.engine
            );
        }
        let doctor = run_ok(sessiondb(&store.db).args(["doctor", "--json"]));
        let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
        assert_eq!(report["problems"], serde_json::json!([]), "{}: {report}", store.engine);
    }
}

/// Metadata kept in a message row's columns (schema 25) that they cannot give back — a shape
/// this build does not write, the model column emptied — is named by `doctor` with its
/// conversation; every other conversation exports byte for byte, the damaged one is refused
/// saying why rather than written with other metadata, and reading its directory again heals it.
#[test]
fn a_damaged_metadata_row_is_named_and_nothing_else_is_lost() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for i in 0..3 {
        let dir = logs.join(format!("2026-04-0{}-chat-{i}", i + 1));
        fs::create_dir_all(&dir).unwrap();
        let meta = format!(
            r#"{{"model": "anthropic/claude-sonnet-4", "usage": {{"input_tokens": {}, "output_tokens": 7, "cache_read_tokens": 0}}, "cost": 0.0{i}3}}"#,
            10 + i
        );
        let text = line("user", "hello there", "2026-04-01T09:00:00")
            + &format!(r#"{{"role": "assistant", "content": "hi {i}", "timestamp": "2026-04-01T09:00:01", "metadata": {meta}}}"#)
            + "\n";
        fs::write(dir.join("conversation.jsonl"), text).unwrap();
    }
    for store in common::databases(work.path()) {
        run_ok(sessiondb(&store.db).arg("import").arg(&logs));
        assert_eq!(one(&store, "SELECT count(metadata_shape) FROM messages WHERE ?1 = ?1", ""), 3, "{}: kept in the columns", store.engine);
        let out = work.path().join(format!("whole-{}", store.engine));
        run_ok(sessiondb(&store.db).arg("export").arg("--to").arg(&out));
        common::tree::assert_same_tree(&logs, &out, &[".lock"]);
        let row_of = |chat: &str| {
            one(&store, "SELECT m.id FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE c.chat_id = ?1 AND m.metadata_shape IS NOT NULL", chat)
        };
        let (unknown, emptied) = (row_of("2026-04-01-chat-0"), row_of("2026-04-02-chat-1"));
        store.execute(&format!("UPDATE messages SET metadata_shape = 1000 WHERE id = {unknown}"));
        store.execute(&format!("UPDATE messages SET model = NULL WHERE id = {emptied}"));
        let doctor = sessiondb(&store.db).args(["doctor", "--json"]).output().unwrap();
        assert!(!doctor.status.success(), "{}", store.engine);
        let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
        let problems: Vec<String> = report["problems"].as_array().unwrap().iter().map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned)).collect();
        let named = |chat: &str, id: i64, why: &str| {
            problems.iter().any(|p| p.contains("message metadata") && p.contains(chat) && p.contains(&format!("message row {id}:")) && p.contains(why))
        };
        assert!(named("2026-04-01-chat-0", unknown, "shape 1000 is not one sessiondb writes"), "{}: {problems:?}", store.engine);
        assert!(named("2026-04-02-chat-1", emptied, "model column is empty"), "{}: {problems:?}", store.engine);
        let out = work.path().join(format!("sound-{}", store.engine));
        run_ok(sessiondb(&store.db).arg("export").arg("--to").arg(&out).arg("2026-04-03-chat-2"));
        common::tree::assert_same_tree(&logs.join("2026-04-03-chat-2"), &out.join("2026-04-03-chat-2"), &[".lock"]);
        let refused =
            sessiondb(&store.db).arg("export").arg("--to").arg(work.path().join(format!("refused-{}", store.engine))).arg("2026-04-01-chat-0").output().unwrap();
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && err.contains("metadata shape 1000"), "{}: {err}", store.engine);
        // The conversations' directories hold everything: imported again, the store is whole.
        for chat in ["2026-04-01-chat-0", "2026-04-02-chat-1"] {
            let file = logs.join(chat).join("conversation.jsonl");
            let mut text = fs::read_to_string(&file).unwrap();
            text.push_str(&line("user", "thanks", "2026-04-01T09:00:02"));
            fs::write(&file, text).unwrap();
        }
        run_ok(sessiondb(&store.db).arg("import").arg(&logs));
        let healed = work.path().join(format!("healed-{}", store.engine));
        run_ok(sessiondb(&store.db).arg("export").arg("--to").arg(&healed));
        common::tree::assert_same_tree(&logs, &healed, &[".lock"]);
        store.assert_sound("after the conversations were read again");
    }
}
