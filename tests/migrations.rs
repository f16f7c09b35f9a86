//! Issue 14, item 8: the schema migrations are protected. Every released migration is pinned by
//! the SHA-256 of its file (a database that already ran it never runs it again, so an edit would
//! leave old and new databases with different schemas); and databases written at schema 1 and at
//! schema 3, holding conversations with messages, branches, a view, an event log and a blob, are
//! opened by `Store::open` (which migrates them) and checked against what each migration's
//! backfill must have produced: 0002's first-message totals, 0003's search index (CJK words
//! inside a run of characters found), 0004's per-role counts, 0008's blob chunks.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{run_ok, sessiondb};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The released migrations and the SHA-256 of each file's bytes, in order. Append a row when a
/// new migration is released; never change a row.
const RELEASED: &[(&str, &str)] = &[
    ("0001_init.sql", "f7c38715def086d8a7fa56508c7667b25e07ee23e46a8793ead3d5734f772356"),
    ("0002_live_operations.sql", "c368681bca74b9f02399d36050e79c208c2cfcf88f70a46dc8c5796e70a325c7"),
    ("0003_fts_cjk.sql", "bc160401561a784865aa41e8c1cb59922a50dc8f9b4e532bee801c21d9db9ed7"),
    ("0004_role_counts.sql", "0396eaaa0cb483a4f6d95601d213ea9cdbc445f4cc0a0de4d3a95ee0588fa879"),
    ("0005_sync.sql", "633612e3e2226e7e6b91835683e6876c3c35cd219476706d3608e3ebc6949081"),
    ("0006_listing_order.sql", "bba26c3c24443bcba5c89f093b60f933c8417a08cb988e9c1bf0a0037e881434"),
    ("0007_acknowledged_lines.sql", "46564e8d70604baa3c93062dc2dd760d28c4e44565f02b9c0cef411a6f61c9ed"),
    ("0008_blob_chunks_and_prefix_rewrites.sql", "b57bda3a7089ef2fa577def67b57c67ecf93d9a6a4b838076c87e19ea412c142"),
    ("0009_messages_not_rewritten_unchanged.sql", "83ddc79682432304ff76bc347a77e83a3b374503908f03170ca8088958d1b849"),
    ("0010_shared_line_prefixes.sql", "0ef18cd10ff38c2552f550f0093229c1d10e7ef07f0c74e472468a7c433eacf1"),
    ("0011_substring_index.sql", "8484a46b2309357eab8460d853cc94267ee2c01603f3823c99b1f6933b621433"),
    ("0012_ranking_index.sql", "9e5ad6e4890d55b07c9d4aa68ab8d4c02c8b1bde2e8a9f015ce21069e84ae336"),
    ("0013_distinct_trigrams.sql", "b26d15cdb9698b70a8007f539293a7524a537bb973bbbfdee5a2a429b17fb5d5"),
    ("0014_sources.sql", "19da208e1fb7cc383e29fb92f35c7fb829517c588e0ffb51e8db77fdb24bef5c"),
    ("0015_word_index_hashsize.sql", "93274923801c360bfa89de31e58ea4c80e51202018c75f97bbc3341273b1f1c3"),
    ("0016_server_only_search_sets_and_byte_order.sql", "9eabc26f53758e8ce05657a63564e9496c38afd8e9b283cdf9730c055a6ce407"),
    ("0017_server_only_each_host_writes_its_own.sql", "c1b9d4f266f1fe32eaee6b6f5bf050094b8ccb4db74c0f245a4092ceb33d0e01"),
    ("0018_server_only_writers_of_sources_at_once.sql", "4643a59efb2b50dead38c09976e03815ed54a72806cbc32b76fd3de3e8df155f"),
    ("0019_server_only_attachments_are_what_they_say.sql", "817cf0e9dc4f2920271cc4385f6c8dff09a1f990558a028403fcf3fa57888c78"),
    ("0020_server_only_source_names_per_writer.sql", "1fbeca11566605adbba8128c2206423d9ab62b749406ae81533e5553172c72dc"),
    ("0021_message_texts.sql", "17bcf718c1424dda68328ca97b2644aa88b92e72936c8186b3e1d20ea5218726"),
    ("0022_search_by_text.sql", "6df05b1a78f8092631c9ba6228e9a8c31f19a9990a867df8539f7a1d9b6b882b"),
    ("0023_messages_by_text_with_conversation.sql", "cb58a32c21bca8abff19060dca1a14f9f452fb1f952102389d1d155b71ccb239"),
    ("0024_server_only_texts_found_by_hash.sql", "eb2208a425d6a89f1497d4e6bf06d59ffcc407997ec5c9509fe7f9aa5d67df83"),
    ("0025_compact_message_rows.sql", "84d050210a2b2e3d40dbfbb321666108a4928e5558c660d20dbbab487fa3f0fb"),
    ("0026_archived_conversations.sql", "cbb67dbd370d96a3f9ae21179421889f5ac40346058c95003d82c1602acc91c5"),
    ("0027_messages_by_line_with_text.sql", "686ba50111e335efa2a9805e567bed6da794fc126f6769d430dd4316cd45b585"),
    ("0028_server_only_ranking_index_per_host.sql", "737b6ba6acf97d0b5be6c2c1167d07f79e5ad234f1b82ee490a29b5a23f10fd9"),
];

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema")
}

/// The migration files in `schema/`, in the order they are applied (by name).
fn migration_files() -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(schema_dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.ends_with(".sql")).collect();
    names.sort();
    names
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn released_migrations_are_unchanged() {
    for (name, pinned) in RELEASED {
        let path = schema_dir().join(name);
        let bytes = fs::read(&path)
            .unwrap_or_else(|e| panic!("schema/{name}: {e}: a released migration must stay as released; add a new migration (schema/NNNN_name.sql) instead"));
        let found = sha256_hex(&bytes);
        assert_eq!(
            &found, pinned,
            "schema/{name} was changed (sha256 {found}, released as {pinned}). Databases that already ran it will never run it \
             again, so editing it gives old and new databases different schemas: undo the change and add a new migration \
             (the next schema/NNNN_name.sql, appended to MIGRATIONS in src/store/schema.rs) instead"
        );
    }
    let files = migration_files();
    let released: Vec<&str> = RELEASED.iter().map(|(n, _)| *n).collect();
    assert!(
        files.len() >= released.len() && files[..released.len()] == released[..],
        "schema/ must begin with the released migrations, in order, unchanged ({released:?}); found {files:?}. \
         Add new migrations after them instead"
    );
    for (i, name) in files.iter().enumerate() {
        assert!(name.starts_with(&format!("{:04}_", i + 1)), "schema/{name}: migration {} must be numbered {:04}", i + 1, i + 1);
    }
    assert_eq!(sessiondb::store::schema::CURRENT_VERSION, files.len() as i64, "every file in schema/ is a migration the store applies");
}

/// Applies migration files 1..=`upto` to an empty database as `src/store/schema.rs` does (one
/// transaction each, then `PRAGMA user_version`).
fn create_at_version(db: &Path, upto: usize) -> Connection {
    let mut conn = Connection::open(db).unwrap();
    // 0003 indexes through this function, as sessiondb registers it on every connection.
    sessiondb::store::fts::register_functions(&conn).unwrap();
    for (i, name) in migration_files().iter().enumerate().take(upto) {
        let sql = fs::read_to_string(schema_dir().join(name)).unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute_batch(&sql).unwrap();
        tx.pragma_update(None, "user_version", (i + 1) as i64).unwrap();
        tx.commit().unwrap();
    }
    conn
}

/// One stored line: a message (role, content, timestamp) or, with role `None`, a damaged line.
struct Line {
    role: Option<&'static str>,
    content: &'static str,
    timestamp: Option<&'static str>,
}

const fn msg(role: &'static str, content: &'static str, timestamp: Option<&'static str>) -> Line {
    Line { role: Some(role), content, timestamp }
}

impl Line {
    fn bytes(&self) -> Vec<u8> {
        match self.role {
            Some(role) => {
                let mut v = json!({"role": role, "content": self.content});
                if let Some(ts) = self.timestamp {
                    v["timestamp"] = json!(ts);
                }
                v.to_string().into_bytes()
            }
            None => self.content.as_bytes().to_vec(),
        }
    }
}

/// Writes rows as sessiondb's writer at schema 1 to 3 did (the columns those versions share),
/// returning the conversation's row id. `documents` are (path, kind, name, lines); a line held
/// by several documents is one message row, as sessiondb stores it.
fn insert_conversation(conn: &Connection, chat_id: &str, created: f64, modified: f64, documents: &[(&str, &str, &str, &[&Line])]) -> i64 {
    let main_count = documents.iter().find(|d| d.0 == "conversation.jsonl").map_or(0, |d| d.3.len());
    conn.execute(
        "INSERT INTO conversations (chat_id, source_dir, fingerprint, imported_at, created, modified, message_count) VALUES (?1, ?2, x'00', '2026-01-01T00:00:00', ?3, ?4, ?5)",
        params![chat_id, format!("/logs/{chat_id}"), created, modified, main_count as i64],
    )
    .unwrap();
    let conv = conn.last_insert_rowid();
    for (path, kind, name, lines) in documents {
        conn.execute(
            "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns) VALUES (?1, ?2, 'document', 420, ?3)",
            params![conv, path, (modified * 1e9) as i64],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO documents (conversation_id, path, kind, name, ends_with_newline, line_count) VALUES (?1, ?2, ?3, ?4, 1, ?5)",
            params![conv, path, kind, name, lines.len() as i64],
        )
        .unwrap();
        let doc = conn.last_insert_rowid();
        for (line_no, line) in lines.iter().enumerate() {
            let id = message_id(conn, conv, line);
            conn.execute("INSERT INTO document_lines (document_id, line_no, message_id) VALUES (?1, ?2, ?3)", params![doc, line_no as i64, id]).unwrap();
        }
    }
    conv
}

/// The message row of `line` in conversation `conv`, inserted when new.
fn message_id(conn: &Connection, conv: i64, line: &Line) -> i64 {
    let bytes = line.bytes();
    let sha = Sha256::digest(&bytes).to_vec();
    let existing: Option<i64> =
        conn.query_row("SELECT id FROM messages WHERE conversation_id = ?1 AND line_sha256 = ?2", params![conv, sha], |r| r.get(0)).optional().unwrap();
    if let Some(id) = existing {
        return id;
    }
    match line.role {
        Some(role) => conn.execute(
            "INSERT INTO messages (conversation_id, line_sha256, role, content, timestamp) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![conv, sha, role, line.content, line.timestamp],
        ),
        None => {
            conn.execute("INSERT INTO messages (conversation_id, line_sha256, raw, malformed) VALUES (?1, ?2, ?3, 'not a JSON object')", params![conv, sha, bytes])
        }
    }
    .unwrap();
    conn.last_insert_rowid()
}

const HELLO: Line = msg("user", "How do I borrow in Rust?", Some("2026-01-02T10:00:00"));
const ANSWER: Line = msg("assistant", "The borrow checker allows one mutable borrow.", Some("2026-01-02T10:00:05"));
const CJK: Line = msg("user", "我们使用数据库存储会话", Some("2026-01-02T10:01:00"));
const SYSTEM: Line = msg("system", "Pruned the context.", Some("2026-01-02T10:02:00"));
const DAMAGED: Line = Line { role: None, content: "{not json", timestamp: None };
const ALT_ONLY: Line = msg("assistant", "An alternative answer about lifetimes.", Some("2026-01-02T10:03:00"));
const PLAIN_1: Line = msg("user", "Untimed question about decorators", None);
const PLAIN_2: Line = msg("assistant", "Untimed answer about decorators", None);

/// Created from the first message's timestamp; modified is the transcript's mtime.
const TIMED_CREATED: f64 = 1_767_348_000.0;
const TIMED_MODIFIED: f64 = 1_767_350_000.5;
/// No message had a timestamp: created fell back to modified.
const UNTIMED_AT: f64 = 1_767_360_000.25;
const BLOB: &[u8] = b"an attachment's bytes";

/// Three conversations: "timed" (main: two user messages, an assistant and a system message and a
/// damaged line; a branch sharing two of them plus one of its own; a view; an event log; an
/// attachment), "untimed" (two messages without timestamps) and "empty" (an empty transcript).
/// Returns the rows' ids: (timed, untimed, empty, events document).
fn insert_rows(conn: &Connection) -> (i64, i64, i64, i64) {
    let timed = insert_conversation(
        conn,
        "2026-01-02-timed",
        TIMED_CREATED,
        TIMED_MODIFIED,
        &[
            ("conversation.jsonl", "branch", "main", &[&HELLO, &ANSWER, &CJK, &SYSTEM, &DAMAGED]),
            ("branches/alt.jsonl", "branch", "alt", &[&HELLO, &ANSWER, &ALT_ONLY]),
            ("views/short.jsonl", "view", "short", &[&HELLO, &ALT_ONLY]),
        ],
    );
    let untimed = insert_conversation(conn, "2026-01-03-untimed", UNTIMED_AT, UNTIMED_AT, &[("conversation.jsonl", "branch", "main", &[&PLAIN_1, &PLAIN_2])]);
    let empty = insert_conversation(conn, "2026-01-04-empty", UNTIMED_AT, UNTIMED_AT, &[("conversation.jsonl", "branch", "main", &[])]);
    // The event log of "timed": an append carrying a message, then an undo.
    conn.execute("INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns) VALUES (?1, 'events.jsonl', 'document', 420, 1767350000000000000)", [timed])
        .unwrap();
    conn.execute(
        "INSERT INTO documents (conversation_id, path, kind, name, ends_with_newline, line_count) VALUES (?1, 'events.jsonl', 'events', 'main', 1, 2)",
        [timed],
    )
    .unwrap();
    let events = conn.last_insert_rowid();
    conn.execute(
        "INSERT INTO events (document_id, line_no, seq, ts, type, payload_form) VALUES (?1, 0, 1, '2026-01-02T10:00:00', 'message_append', 'message')",
        [events],
    )
    .unwrap();
    conn.execute("INSERT INTO event_messages (document_id, line_no, position, message_id) VALUES (?1, 0, 0, ?2)", params![events, message_id(conn, timed, &HELLO)])
        .unwrap();
    conn.execute(
        "INSERT INTO events (document_id, line_no, seq, ts, type, payload_form, payload) VALUES (?1, 1, 2, '2026-01-02T10:04:00', 'undo', 'json', '{\"count\": 1}')",
        [events],
    )
    .unwrap();
    // An attachment, its bytes in `blobs.data` as before 0008.
    let sha = Sha256::digest(BLOB).to_vec();
    conn.execute("INSERT INTO blobs (sha256, size, data) VALUES (?1, ?2, ?3)", params![sha, BLOB.len() as i64, BLOB]).unwrap();
    conn.execute(
        "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, blob_sha256) VALUES (?1, 'files/0123456789abcdef.txt', 'blob', 420, 1767350000000000000, ?2)",
        params![timed, sha],
    )
    .unwrap();
    (timed, untimed, empty, events)
}

/// Indexes every message as the writer of that schema did and moves the watermark past them.
fn index_all(conn: &Connection, version: usize) {
    let text = if version < 3 { "content" } else { "sessiondb_fts_text(content)" };
    conn.execute_batch(&format!(
        "INSERT INTO messages_fts (rowid, content) SELECT id, {text} FROM messages;
         UPDATE store_state SET value = (SELECT max(id) FROM messages) WHERE key = 'fts_indexed_upto';"
    ))
    .unwrap();
}

/// Opens the database as sessiondb does, migrating it, and returns a plain connection to it.
fn open_and_migrate(db: &Path) -> Connection {
    let store = sessiondb::store::Store::open(db).unwrap_or_else(|e| panic!("Store::open migrates {}: {e:?}", db.display()));
    drop(store);
    let conn = Connection::open(db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, migration_files().len() as i64, "migrated to the latest schema");
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(integrity, "ok");
    conn
}

fn role_counts(conn: &Connection, conv: i64) -> Value {
    let text: String = conn.query_row("SELECT role_counts FROM conversations WHERE id = ?1", [conv], |r| r.get(0)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("role_counts {text:?}: {e}"))
}

fn first_message(conn: &Connection, conv: i64) -> (i64, Option<f64>) {
    conn.query_row("SELECT first_message_seen, first_message_time FROM conversations WHERE id = ?1", [conv], |r| Ok((r.get(0)?, r.get(1)?))).unwrap()
}

fn search_ids(db: &Path, query: &str) -> Vec<(String, u64)> {
    let out = run_ok(sessiondb(db).args(["search", query, "--json"]));
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    page["results"].as_array().unwrap().iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r["matches"].as_u64().unwrap())).collect()
}

/// A message's text as `texts.data` stores it (schema 21: a store this small keeps them plain).
fn text(data: Option<Vec<u8>>) -> Option<String> {
    data.map(|d| sessiondb::store::texts::decode_with(&d, |id| panic!("text compressed with dictionary {id}")).unwrap())
}

/// An event line: seq, type, payload form, payload and the content of the message it carries.
type EventRow = (i64, String, String, Option<String>, Option<String>);

/// What every upgrade must leave as it was: the documents, their lines, the event log (with
/// the message its first event carries) and the attachment's bytes (moved into chunks by 0008).
fn assert_rows_kept(conn: &Connection, timed: i64, events: i64) {
    let documents: Vec<(String, String, String, i64)> = conn
        .prepare("SELECT path, kind, name, line_count FROM documents WHERE conversation_id = ?1 ORDER BY path")
        .unwrap()
        .query_map([timed], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let expected: Vec<(String, String, String, i64)> = [
        ("branches/alt.jsonl", "branch", "alt", 3),
        ("conversation.jsonl", "branch", "main", 5),
        ("events.jsonl", "events", "main", 2),
        ("views/short.jsonl", "view", "short", 2),
    ]
    .iter()
    .map(|(p, k, n, c)| (p.to_string(), k.to_string(), n.to_string(), *c))
    .collect();
    assert_eq!(documents, expected);
    let main: Vec<Option<String>> = conn
        .prepare(
            "SELECT t.data FROM document_lines dl JOIN documents d ON d.id = dl.document_id JOIN messages m ON m.id = dl.message_id LEFT JOIN texts t ON t.id = m.text_id
             WHERE d.conversation_id = ?1 AND d.path = 'conversation.jsonl' ORDER BY dl.line_no",
        )
        .unwrap()
        .query_map([timed], |r| r.get(0))
        .unwrap()
        .map(|r| text(r.unwrap()))
        .collect();
    assert_eq!(main, [Some(HELLO.content), Some(ANSWER.content), Some(CJK.content), Some(SYSTEM.content), None].map(|c| c.map(str::to_owned)));
    let event_rows: Vec<EventRow> = conn
        .prepare(
            "SELECT e.seq, e.type, e.payload_form, e.payload, (SELECT t.data FROM event_messages em JOIN messages m ON m.id = em.message_id JOIN texts t ON t.id = m.text_id
               WHERE em.document_id = e.document_id AND em.line_no = e.line_no)
             FROM events e WHERE e.document_id = ?1 ORDER BY e.line_no",
        )
        .unwrap()
        .query_map([events], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, text(r.get(4)?))))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        event_rows,
        [
            (1, "message_append".to_owned(), "message".to_owned(), None, Some(HELLO.content.to_owned())),
            (2, "undo".to_owned(), "json".to_owned(), Some("{\"count\": 1}".to_owned()), None),
        ]
    );
    let chunks: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT c.seq, c.data FROM blob_chunks c JOIN blobs b ON b.id = c.blob_id WHERE b.sha256 = ?1 ORDER BY c.seq")
        .unwrap()
        .query_map([Sha256::digest(BLOB).to_vec()], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(chunks, [(0, BLOB.to_vec())], "0008 moved the blob's bytes into one chunk");
}

/// What search must find in the upgraded store: a Latin word (in two conversations, the
/// branch-only and view messages counted where they stand), a CJK word inside a run of CJK
/// characters (found only through 0003's index), and nothing for a word no message holds.
fn assert_search_finds(db: &Path) {
    assert_eq!(search_ids(db, "borrow"), [("2026-01-02-timed".to_owned(), 2)]);
    assert_eq!(search_ids(db, "decorators"), [("2026-01-03-untimed".to_owned(), 2)]);
    assert_eq!(search_ids(db, "数据库"), [("2026-01-02-timed".to_owned(), 1)], "a CJK word inside a run is found after 0003");
    assert_eq!(search_ids(db, "lifetimes"), [("2026-01-02-timed".to_owned(), 1)], "a message of a branch only is found");
    assert_eq!(search_ids(db, "zebra"), Vec::<(String, u64)>::new());
    // 0011's substring index holds the messages stored before it (text with punctuation is
    // found literally, through that index).
    assert_eq!(search_ids(db, "ABOUT lifetimes."), [("2026-01-02-timed".to_owned(), 1)], "a substring, found after 0011");
    assert_eq!(search_ids(db, "lifetimes!"), Vec::<(String, u64)>::new(), "a substring no message holds");
}

/// The role counts 0004 computes: the main branch's messages by role; the damaged line, the
/// branch's own message and the view do not count.
fn assert_role_counts(conn: &Connection, timed: i64, untimed: i64, empty: i64) {
    assert_eq!(role_counts(conn, timed), json!({"assistant": 1, "system": 1, "user": 2}));
    assert_eq!(role_counts(conn, untimed), json!({"assistant": 1, "user": 1}));
    assert_eq!(role_counts(conn, empty), json!({}));
}

#[test]
fn a_schema_1_database_with_rows_upgrades() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("v1.sqlite");
    let conn = create_at_version(&db, 1);
    let (timed, untimed, empty, events) = insert_rows(&conn);
    index_all(&conn, 1);
    drop(conn);

    let conn = open_and_migrate(&db);
    // 0002: where created differs from modified it came from the first message's timestamp.
    assert_eq!(first_message(&conn, timed), (1, Some(TIMED_CREATED)));
    assert_eq!(first_message(&conn, untimed), (0, None));
    assert_eq!(first_message(&conn, empty), (0, None));
    assert_role_counts(&conn, timed, untimed, empty);
    assert_rows_kept(&conn, timed, events);
    drop(conn);
    assert_search_finds(&db);
}

#[test]
fn a_schema_3_database_with_rows_upgrades() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("v3.sqlite");
    let conn = create_at_version(&db, 3);
    let (timed, untimed, empty, events) = insert_rows(&conn);
    // Written at schema 3, the totals 0002 added are the writer's own: "untimed" has a first
    // message (without a timestamp), which 0002's backfill could not tell from no message.
    conn.execute("UPDATE conversations SET first_message_seen = 1, first_message_time = ?2 WHERE id = ?1", params![timed, TIMED_CREATED]).unwrap();
    conn.execute("UPDATE conversations SET first_message_seen = 1, first_message_time = NULL WHERE id = ?1", [untimed]).unwrap();
    conn.execute("UPDATE entries SET size = 100 WHERE kind = 'document'", []).unwrap();
    index_all(&conn, 3);
    drop(conn);

    let conn = open_and_migrate(&db);
    assert_eq!(first_message(&conn, timed), (1, Some(TIMED_CREATED)), "kept as written");
    assert_eq!(first_message(&conn, untimed), (1, None), "kept as written");
    assert_eq!(first_message(&conn, empty), (0, None));
    assert_role_counts(&conn, timed, untimed, empty);
    assert_rows_kept(&conn, timed, events);
    drop(conn);
    assert_search_finds(&db);
}

/// 0014 puts every conversation of a schema 12 store under the source of the logs root it was
/// read from (its directory's parent), keeping every row and row id, and moves acknowledged
/// appends under their conversation's source; the store then reads as before.
#[test]
fn a_schema_12_database_gets_a_source_per_logs_root() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("v12.sqlite");
    // The rows as the writer of schema 7 wrote them (blobs' bytes in `blobs.data`), brought to
    // schema 12 by its migrations.
    let mut conn = create_at_version(&db, 7);
    let (timed, untimed, empty, events) = insert_rows(&conn);
    index_all(&conn, 7);
    for (i, name) in migration_files().iter().enumerate().take(12).skip(7) {
        let tx = conn.transaction().unwrap();
        tx.execute_batch(&fs::read_to_string(schema_dir().join(name)).unwrap()).unwrap();
        tx.pragma_update(None, "user_version", (i + 1) as i64).unwrap();
        tx.commit().unwrap();
    }
    conn.execute("UPDATE conversations SET source_dir = '/other/' || chat_id WHERE id = ?1", [untimed]).unwrap();
    conn.execute(
        "INSERT INTO acknowledged_lines (chat_id, path, message_key, line, event_seq, appended_at) VALUES ('2026-01-02-timed', 'conversation.jsonl', x'01', x'02', 7, 1.5)",
        [],
    )
    .unwrap();
    // Every column 0014 copies, as text (JSON of the row), by row id.
    const EVERY_COLUMN: &str = "SELECT id, chat_id, json_array(source_dir, hex(fingerprint), imported_at, name, config_model, workspace, created, modified,
        message_count, branch_count, model, total_cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, models_usage,
        last_role, last_preview, first_message_seen, first_message_time, role_counts, deleted_at) FROM conversations ORDER BY id";
    let before: Vec<(i64, String, String)> =
        conn.prepare(EVERY_COLUMN).unwrap().query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(|r| r.unwrap()).collect();
    drop(conn);

    let conn = open_and_migrate(&db);
    let host = sessiondb::store::sources::hostname();
    let sources: Vec<(i64, String, String)> = conn
        .prepare("SELECT id, name, root FROM sources ORDER BY root")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let names: Vec<(&str, &str)> = sources.iter().map(|(_, n, r)| (n.as_str(), r.as_str())).collect();
    assert_eq!(names, [(format!("{host}:/logs").as_str(), "/logs"), (format!("{host}:/other").as_str(), "/other")]);
    let after: Vec<(i64, String, String)> =
        conn.prepare(EVERY_COLUMN).unwrap().query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(after, before, "every conversation kept, with its row id");
    let source_of = |id: i64| -> String {
        conn.query_row("SELECT s.root FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.id = ?1", [id], |r| r.get(0)).unwrap()
    };
    assert_eq!((source_of(timed), source_of(untimed), source_of(empty)), ("/logs".into(), "/other".into(), "/logs".into()));
    let acknowledged: (String, i64) =
        conn.query_row("SELECT s.root, a.event_seq FROM acknowledged_lines a JOIN sources s ON s.id = a.source_id", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(acknowledged, ("/logs".into(), 7));
    assert_rows_kept(&conn, timed, events);
    let fk: Option<String> = conn.query_row("PRAGMA foreign_key_check", [], |r| r.get(0)).optional().unwrap();
    assert_eq!(fk, None);
    drop(conn);
    assert_search_finds(&db);
    // Two logs roots: listings name each conversation's source.
    let listed: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["list", "--json", "--all"])).stdout).unwrap();
    let untimed_source = listed.as_array().unwrap().iter().find(|c| c["id"] == "2026-01-03-untimed").map(|c| c["source"].clone());
    assert_eq!(untimed_source, Some(json!(format!("{host}:/other"))));
}

/// 0025 on a store the previous release wrote (schema 24, commit c6270f3, from the fixture logs
/// at /tmp/fx/logs): when opened, gptme's usual metadata moves into the rows' columns, gptme's
/// own timestamps become integers and rows are found by the first bytes of their digest, and the
/// file gives back the old rows' pages; the store then lists, searches and exports as before,
/// byte for byte, and `doctor` finds nothing.
#[test]
fn a_schema_24_store_takes_compact_message_rows_in_place() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("v24.sqlite");
    fs::copy(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/schema24-by-c6270f3.sqlite"), &db).unwrap();
    let counts = |conn: &Connection, sql: &str| -> (i64, i64) { conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap() };
    let before = Connection::open(&db).unwrap();
    let version: i64 = before.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 24);
    let (rows, with_metadata) = counts(&before, "SELECT count(*), count(metadata) FROM messages");
    let (timed, max_id) = counts(&before, "SELECT count(timestamp), max(id) FROM messages");
    drop(before);
    let listed: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["list", "--json", "--all"])).stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 18);
    let conn = Connection::open(&db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, sessiondb::store::schema::CURRENT_VERSION);
    assert_eq!(counts(&conn, "SELECT count(*), max(id) FROM messages"), (rows, max_id), "every row kept, ids and all");
    let (text, shaped) = counts(&conn, "SELECT count(metadata), count(metadata_shape) FROM messages");
    assert_eq!(text + shaped, with_metadata, "each message's metadata is kept one way");
    assert!(shaped > 0 && text > 0, "{shaped} in columns, {text} as text");
    let (integers, texts) =
        counts(&conn, "SELECT count(*) FILTER (WHERE typeof(timestamp) = 'integer'), count(*) FILTER (WHERE typeof(timestamp) = 'text') FROM messages");
    assert_eq!(integers + texts, timed);
    assert!(integers > 0 && texts > 0, "gptme's own timestamps kept as integers ({integers}), the others as text ({texts})");
    let sequence: i64 = conn.query_row("SELECT seq FROM sqlite_sequence WHERE name = 'messages'", [], |r| r.get(0)).unwrap();
    assert!(sequence >= max_id, "ids go on from where they were");
    // The old table's pages given back: the file is smaller than before, not larger.
    let (free, pages) = counts(&conn, "SELECT (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_count FROM pragma_page_count)");
    assert!(free * 10 <= pages, "{free} of {pages} pages free");
    drop(conn);
    let size = |path: PathBuf| fs::metadata(path).map_or(0, |m| m.len());
    let fixture = size(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/schema24-by-c6270f3.sqlite"));
    assert!(size(db.clone()) + size(db.with_extension("sqlite-wal")) <= fixture, "{} and its log against {fixture} bytes", size(db.clone()));
    let out = work.path().join("out");
    run_ok(sessiondb(&db).arg("export").arg("--to").arg(&out));
    common::tree::assert_same_contents(&common::fixtures(), &out, &[".lock"]);
    let found: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["search", "capital", "--json"])).stdout).unwrap();
    assert_eq!(found["results"][0]["id"], "2026-07-01-basic-chat");
    let report: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["doctor", "--json"])).stdout).unwrap();
    assert_eq!(report["problems"], json!([]), "{report}");
    // Appended to after it (in the store alone: the fixture's logs root is not here), the new
    // row takes the new form.
    let metadata = r#"{"model": "openai/gpt-4o", "usage": {"input_tokens": 3, "output_tokens": 1}, "cost": 0.25}"#;
    run_ok(sessiondb(&db).args(["append", "--queue", "--role", "assistant", "--content", "Rome.", "--metadata", metadata, "2026-07-01-basic-chat"]));
    let newest = "FROM messages WHERE id = (SELECT max(id) FROM messages)";
    assert_eq!(counts(&Connection::open(&db).unwrap(), &format!("SELECT typeof(timestamp) = 'integer', metadata_shape IS NOT NULL {newest}")), (1, 1));
    let shown = run_ok(sessiondb(&db).args(["show", "2026-07-01-basic-chat", "--json"]));
    let last = String::from_utf8(shown.stdout).unwrap().lines().last().unwrap().to_owned();
    assert!(last.contains(&format!(r#""metadata": {metadata}"#)), "{last}");
}

/// Issue 36: a store made before stores were made in SQLite's incremental mode (the schema 24
/// fixture) is rewritten by its first `compact` and switched to that mode on the way, so that
/// every later compact works in short steps; nothing it holds changes (export byte for byte,
/// `doctor` clean).
#[test]
fn the_first_compact_of_an_older_store_rewrites_it_once_and_the_next_ones_work_in_steps() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("v24.sqlite");
    fs::copy(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/schema24-by-c6270f3.sqlite"), &db).unwrap();
    let mode = || -> i64 { Connection::open(&db).unwrap().query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).unwrap() };
    assert_eq!(mode(), 0, "the fixture predates the incremental mode");
    let compact = || -> Value { serde_json::from_slice(&run_ok(sessiondb(&db).args(["compact", "--json"])).stdout).unwrap() };
    let first = compact();
    assert_eq!(first["rewritten"], true, "{first}");
    assert_eq!(mode(), 2, "switched to the incremental mode");
    let second = compact();
    assert_eq!(second["rewritten"], false, "{second}");
    assert_eq!(second["free_after"], 0, "{second}");
    let out = work.path().join("out");
    run_ok(sessiondb(&db).arg("export").arg("--to").arg(&out));
    common::tree::assert_same_contents(&common::fixtures(), &out, &[".lock"]);
    let report: Value = serde_json::from_slice(&run_ok(sessiondb(&db).args(["doctor", "--json"])).stdout).unwrap();
    assert_eq!(report["problems"], json!([]), "{report}");
}
