//! Property: whatever lines a gptme file holds — messages, damaged lines, random bytes, blank
//! lines, a missing final newline — import then export gives back the very same bytes, and the
//! store keeps each distinct line once; on an SQLite file and on a PostgreSQL server.

use crate::common;

use std::fs;

use common::strategies::message;
use proptest::prelude::*;
use sessiondb::codec::message_line::encode_message;
use sessiondb::store::{Store, WriteBatch};
use sessiondb::sync::ingest::{import_conversation, Outcome, ReadMode};
use sessiondb::sync::materialise::export_conversation;

fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => message().prop_map(|m| encode_message(&m).into_bytes()),
        1 => (message(), any::<prop::sample::Index>(), any::<u8>()).prop_map(|(m, at, b)| {
            let mut bytes = encode_message(&m).into_bytes();
            let i = at.index(bytes.len());
            bytes[i] = b;
            bytes.retain(|&c| c != b'\n');
            bytes
        }),
        1 => proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..40),
        1 => Just(Vec::new()),
    ]
}

fn file() -> impl Strategy<Value = Vec<u8>> {
    (proptest::collection::vec(line(), 0..12), any::<bool>(), any::<bool>()).prop_map(|(lines, repeat, final_newline)| {
        let mut lines = lines;
        if repeat && !lines.is_empty() {
            lines.push(lines[0].clone());
        }
        let mut out = lines.join(&b'\n');
        if final_newline && !lines.is_empty() {
            out.push(b'\n');
        }
        out
    })
}

/// The conversation directory `work/logs/chat`: `main`, branch `b`, an event log, and
/// `attachment` twice under `files/`.
fn chat_dir(work: &std::path::Path, main: &[u8], branch: &[u8], events: &[u8], attachment: &[u8]) -> std::path::PathBuf {
    let dir = work.join("logs/chat");
    fs::create_dir_all(dir.join("branches")).unwrap();
    fs::write(dir.join("conversation.jsonl"), main).unwrap();
    fs::write(dir.join("branches/b.jsonl"), branch).unwrap();
    fs::write(dir.join("events.jsonl"), events).unwrap();
    fs::create_dir_all(dir.join("files")).unwrap();
    fs::write(dir.join("files/0123456789abcdef.bin"), attachment).unwrap();
    fs::write(dir.join("files/copy.bin"), attachment).unwrap();
    dir
}

/// gptme rewrites branch `b` (its bytes reversed, returned) and one attachment is replaced.
fn rewrite(dir: &std::path::Path, branch: &[u8]) -> Vec<u8> {
    let rewritten: Vec<u8> = branch.iter().rev().copied().collect();
    fs::write(dir.join("branches/b.jsonl"), &rewritten).unwrap();
    fs::write(dir.join("files/0123456789abcdef.bin"), b"replaced").unwrap();
    rewritten
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_file_roundtrips_through_the_store(main in file(), branch in file(), events in file(), attachment in proptest::collection::vec(any::<u8>(), 0..64)) {
        let work = tempfile::tempdir().unwrap();
        let dir = chat_dir(work.path(), &main, &branch, &events, &attachment);

        let store = Store::open(&work.path().join("db")).unwrap();
        let mut conn = store.connection().unwrap();
        let mut batch = WriteBatch::begin(&mut conn).unwrap();
        let outcome = import_conversation(&mut batch, &dir, ReadMode::Whole).unwrap();
        prop_assert!(matches!(outcome, Outcome::Imported(_)));
        batch.finish().unwrap();

        let out = work.path().join("out");
        export_conversation(&conn, "chat", &out).unwrap();
        // A plain connection to look at the rows (the store's own is the store's alone).
        let raw = rusqlite::Connection::open(work.path().join("db")).unwrap();
        sessiondb::store::fts::register_functions(&raw).unwrap();
        prop_assert_eq!(&fs::read(out.join("chat/conversation.jsonl")).unwrap(), &main);
        prop_assert_eq!(&fs::read(out.join("chat/branches/b.jsonl")).unwrap(), &branch);
        prop_assert_eq!(fs::read(out.join("chat/events.jsonl")).unwrap(), events);

        // Each distinct line is one row, however many files repeat it.
        let distinct: i64 = raw.query_row("SELECT count(*) FROM messages", [], |r| r.get(0)).unwrap();
        let referenced: i64 = raw
            .query_row("SELECT count(DISTINCT message_id) FROM document_lines", [], |r| r.get(0))
            .unwrap();
        let from_events: i64 = raw
            .query_row("SELECT count(DISTINCT message_id) FROM event_messages WHERE message_id NOT IN (SELECT message_id FROM document_lines)", [], |r| r.get(0))
            .unwrap();
        prop_assert_eq!(distinct, referenced + from_events);
        let ok: String = raw.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        prop_assert_eq!(ok, "ok");
        // FTS5's own check that the index matches the content table, row for row.
        let fts = raw.execute("INSERT INTO texts_fts(texts_fts, rank) VALUES('integrity-check', 1)", []);
        prop_assert!(fts.is_ok(), "{:?}", fts);

        // gptme rewrites the branch; importing again replaces the stored copy entirely.
        let rewritten = rewrite(&dir, &branch);
        let mut batch = WriteBatch::begin(&mut conn).unwrap();
        prop_assert!(matches!(import_conversation(&mut batch, &dir, ReadMode::Whole).unwrap(), Outcome::Imported(_)));
        prop_assert!(matches!(import_conversation(&mut batch, &dir, ReadMode::Whole).unwrap(), Outcome::Unchanged));
        batch.finish().unwrap();
        let out2 = work.path().join("out2");
        export_conversation(&conn, "chat", &out2).unwrap();
        prop_assert_eq!(fs::read(out2.join("chat/branches/b.jsonl")).unwrap(), rewritten);
        prop_assert_eq!(fs::read(out2.join("chat/conversation.jsonl")).unwrap(), main);
        let fts = raw.execute("INSERT INTO texts_fts(texts_fts, rank) VALUES('integrity-check', 1)", []);
        prop_assert!(fts.is_ok(), "after re-import: {:?}", fts);
        prop_assert_eq!(fs::read(out2.join("chat/files/0123456789abcdef.bin")).unwrap(), b"replaced");
        prop_assert_eq!(&fs::read(out2.join("chat/files/copy.bin")).unwrap(), &attachment);
        let blobs: i64 = raw.query_row("SELECT count(*) FROM blobs", [], |r| r.get(0)).unwrap();
        prop_assert_eq!(blobs, if attachment == b"replaced" { 1 } else { 2 });
        let orphans: i64 = raw.query_row("SELECT count(*) FROM blobs WHERE sha256 NOT IN (SELECT blob_sha256 FROM entries WHERE blob_sha256 IS NOT NULL)", [], |r| r.get(0)).unwrap();
        prop_assert_eq!(orphans, 0);
    }
}

proptest! {
    // A fresh server database each case: fewer cases than on a file.
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// The same property on a PostgreSQL server's store: the bytes back, each distinct line
    /// one row, attachments stored once, and a re-import replacing the stored copy; the
    /// server's rows checked by doctor (in place of SQLite's integrity and FTS5 checks).
    #[test]
    fn any_file_roundtrips_through_a_server_store(main in file(), branch in file(), events in file(), attachment in proptest::collection::vec(any::<u8>(), 0..64)) {
        let Some(pg) = common::postgres_db() else { return Ok(()) };
        let work = tempfile::tempdir().unwrap();
        let dir = chat_dir(work.path(), &main, &branch, &events, &attachment);

        let store = Store::open(&pg.db).unwrap();
        let mut conn = store.connection().unwrap();
        let mut batch = WriteBatch::begin(&mut conn).unwrap();
        prop_assert!(matches!(import_conversation(&mut batch, &dir, ReadMode::Whole).unwrap(), Outcome::Imported(_)));
        batch.finish().unwrap();
        let out = work.path().join("out");
        export_conversation(&conn, "chat", &out).unwrap();
        prop_assert_eq!(&fs::read(out.join("chat/conversation.jsonl")).unwrap(), &main);
        prop_assert_eq!(&fs::read(out.join("chat/branches/b.jsonl")).unwrap(), &branch);
        prop_assert_eq!(fs::read(out.join("chat/events.jsonl")).unwrap(), events);
        prop_assert_eq!(&fs::read(out.join("chat/files/copy.bin")).unwrap(), &attachment);

        let mut raw = postgres::Client::connect(pg.db.to_str().unwrap(), postgres::NoTls).unwrap();
        let count = |raw: &mut postgres::Client, sql: &str| -> i64 { raw.query_one(sql, &[]).unwrap().get(0) };
        let distinct = count(&mut raw, "SELECT count(*) FROM messages");
        let referenced = count(&mut raw, "SELECT count(DISTINCT message_id) FROM document_lines");
        let from_events = count(&mut raw, "SELECT count(DISTINCT message_id) FROM event_messages WHERE message_id NOT IN (SELECT message_id FROM document_lines)");
        prop_assert_eq!(distinct, referenced + from_events);
        pg.assert_sound("after the import");

        let rewritten = rewrite(&dir, &branch);
        let mut batch = WriteBatch::begin(&mut conn).unwrap();
        prop_assert!(matches!(import_conversation(&mut batch, &dir, ReadMode::Whole).unwrap(), Outcome::Imported(_)));
        prop_assert!(matches!(import_conversation(&mut batch, &dir, ReadMode::Whole).unwrap(), Outcome::Unchanged));
        batch.finish().unwrap();
        let out2 = work.path().join("out2");
        export_conversation(&conn, "chat", &out2).unwrap();
        prop_assert_eq!(fs::read(out2.join("chat/branches/b.jsonl")).unwrap(), rewritten);
        prop_assert_eq!(fs::read(out2.join("chat/conversation.jsonl")).unwrap(), main);
        prop_assert_eq!(fs::read(out2.join("chat/files/0123456789abcdef.bin")).unwrap(), b"replaced");
        prop_assert_eq!(&fs::read(out2.join("chat/files/copy.bin")).unwrap(), &attachment);
        prop_assert_eq!(count(&mut raw, "SELECT count(*) FROM blobs"), if attachment == b"replaced" { 1 } else { 2 });
        pg.assert_sound("after the re-import");
    }
}
