//! Changing a stored conversation in place: the row side of live operations.
//!
//! Every function here runs inside the caller's write transaction and touches only rows; the
//! caller writes the matching bytes to the conversation directory before committing. Appending
//! a message costs the same however long the branch is: one message row (or none, when the
//! same line is already stored), one line row, and updated counters. A regular file is stored
//! as import stores it ([`put_file`]: its blob and its entry row together).

use super::sql::{params, OptionalExtension};
use sha2::{Digest, Sha256};

use super::queries::{self, StoredLine};
pub use super::rows::put_file;
use super::rows::{self, LineDigest};
use super::Connection;
use super::{DocumentKind, StoreError};
use crate::codec::bookmarks::Bookmark;
use crate::codec::events::{decode_event_line, encode_event, Event, EventLine, Payload};
use crate::codec::json;
use crate::codec::message_line::encode_message;
use crate::layout::{self, LoadedLog};
use crate::model::Message;

/// A stored conversation being operated on.
#[derive(Debug, Clone)]
pub struct LiveConversation {
    pub id: i64,
    /// Its source's row id (see [`super::sources`]).
    pub source_id: i64,
    pub chat_id: String,
    /// The gptme directory it lives in.
    pub dir: std::path::PathBuf,
    /// Archived out of its logs root ([`set_archived`]): its directory is gone on purpose.
    pub archived: bool,
}

/// The conversation `chat_id` names: a chat id of the connection's source when it is scoped to
/// one, else a chat id or `SOURCE:CHAT` ([`super::sources::resolve`]).
pub fn load_conversation(conn: &Connection, chat_id: &str) -> Result<LiveConversation, StoreError> {
    let id = super::sources::conversation_id(conn, chat_id)?;
    Ok(conn.prepare_cached("SELECT id, source_id, chat_id, source_dir, archived_at IS NOT NULL FROM conversations WHERE id = ?1")?.query_row([id], |r| {
        Ok(LiveConversation { id: r.get(0)?, source_id: r.get(1)?, chat_id: r.get(2)?, dir: std::path::PathBuf::from(r.get::<_, String>(3)?), archived: r.get(4)? })
    })?)
}

/// A stored JSONL document.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub id: i64,
    pub path: String,
    pub kind: DocumentKind,
    pub name: String,
    pub line_count: i64,
    pub ends_with_newline: bool,
    pub mode: u32,
    /// Size on disk when last imported or written, if known.
    pub size: Option<u64>,
}

const DOC_COLUMNS: &str = "d.id, d.path, d.kind, d.name, d.line_count, d.ends_with_newline, e.mode, e.size";

fn doc_from_row(r: &super::sql::Row) -> super::sql::Result<Doc> {
    let kind: String = r.get(2)?;
    Ok(Doc {
        id: r.get(0)?,
        path: r.get(1)?,
        kind: DocumentKind::parse(&kind).unwrap_or(DocumentKind::Branch),
        name: r.get(3)?,
        line_count: r.get(4)?,
        ends_with_newline: r.get(5)?,
        mode: r.get(6)?,
        size: r.get::<_, Option<i64>>(7)?.map(|s| s as u64),
    })
}

/// The document of `kind` named `name`, if the conversation has it: the one at the path gptme
/// keeps it at ([`layout::document_path`]; a store written before `branches/main.jsonl` stopped
/// counting as main may hold a second document named main).
pub fn find_doc(conn: &Connection, conversation_id: i64, kind: DocumentKind, name: &str) -> Result<Option<Doc>, StoreError> {
    let sql = format!(
        "SELECT {DOC_COLUMNS} FROM documents d JOIN entries e ON e.conversation_id = d.conversation_id AND e.path = d.path
         WHERE d.conversation_id = ?1 AND d.path = ?2 AND d.kind = ?3 AND d.name = ?4"
    );
    let path = layout::document_path(kind, name);
    Ok(conn.prepare_cached(&sql)?.query_row(params![conversation_id, path, kind.as_str(), name], doc_from_row).optional()?)
}

/// Every document of `kind`, by name.
pub fn docs(conn: &Connection, conversation_id: i64, kind: DocumentKind) -> Result<Vec<Doc>, StoreError> {
    let sql = format!(
        "SELECT {DOC_COLUMNS} FROM documents d JOIN entries e ON e.conversation_id = d.conversation_id AND e.path = d.path
         WHERE d.conversation_id = ?1 AND d.kind = ?2 ORDER BY d.name"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![conversation_id, kind.as_str()], doc_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The view gptme's `views/.current` marker makes active on main, if it names one that exists.
pub fn active_view(conn: &Connection, conversation_id: i64) -> Result<Option<Doc>, StoreError> {
    Ok(loaded_doc(conn, conversation_id, layout::MAIN)?.filter(|d| d.kind == DocumentKind::View))
}

/// The document gptme has loaded for `branch` — what it shows, edits, undoes and resumes — as
/// [`layout::loaded_log`] decides from the stored `views/.current`: on main the active view when
/// there is one, else the branch. `None` when that branch does not exist. Every command that
/// reads or changes "the conversation" finds its document here.
pub fn loaded_doc(conn: &Connection, conversation_id: i64, branch: &str) -> Result<Option<Doc>, StoreError> {
    let marker = if branch == layout::MAIN { view_marker(conn, conversation_id)? } else { None };
    let mut view = Ok(None);
    let loaded = layout::loaded_log(branch, marker.as_deref(), |name| {
        view = find_doc(conn, conversation_id, DocumentKind::View, name);
        !matches!(view, Ok(None))
    });
    match loaded {
        LoadedLog::View(_) => view,
        LoadedLog::Branch(name) => find_doc(conn, conversation_id, DocumentKind::Branch, &name),
    }
}

/// The stored bytes of `views/.current`, if the conversation has that file.
fn view_marker(conn: &Connection, conversation_id: i64) -> Result<Option<Vec<u8>>, StoreError> {
    rows::entry_blob(conn, conversation_id, layout::VIEW_MARKER)?
        .and_then(|sha| <[u8; 32]>::try_from(sha.as_slice()).ok())
        .map(|sha| super::blobs::read_all(conn, &sha))
        .transpose()
}

/// The lines of a branch, view or lossless document.
pub fn doc_lines(conn: &Connection, doc: &Doc) -> Result<Vec<StoredLine>, StoreError> {
    queries::document_lines(conn, doc.id)
}

/// Creates an empty document (and its entry) at `path`.
pub fn create_doc(conn: &Connection, conversation_id: i64, path: &str, kind: DocumentKind, name: &str, mode: u32) -> Result<Doc, StoreError> {
    conn.execute(
        "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, size) VALUES (?1, ?2, 'document', ?3, 0, 0)",
        params![conversation_id, path, mode],
    )?;
    let id = conn
        .prepare_cached("INSERT INTO documents (conversation_id, path, kind, name, ends_with_newline, line_count) VALUES (?1, ?2, ?3, ?4, 1, 0) RETURNING id")?
        .query_row(params![conversation_id, path, kind.as_str(), name], |r| r.get(0))?;
    Ok(Doc { id, path: path.into(), kind, name: name.into(), line_count: 0, ends_with_newline: true, mode, size: Some(0) })
}

/// Ensures a directory entry exists (gptme creates `branches/` and `files/` on first use).
pub fn ensure_dir(conn: &Connection, conversation_id: i64, path: &str, mode: u32) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT OR IGNORE INTO entries (conversation_id, path, kind, mode, mtime_ns) VALUES (?1, ?2, 'dir', ?3, 0)")?.execute(params![
        conversation_id,
        path,
        mode
    ])?;
    Ok(())
}

/// The row for this message, inserting it when the conversation does not have its line yet.
/// Returns the row id and the line's bytes.
pub fn message_row(conn: &Connection, conversation_id: i64, m: &Message) -> Result<(i64, Vec<u8>), StoreError> {
    let line = encode_message(m).into_bytes();
    let digest: LineDigest = Sha256::digest(&line).into();
    let id = match rows::find_message(conn, conversation_id, &digest)? {
        Some(id) => id,
        None => {
            let source: i64 = conn.prepare_cached("SELECT source_id FROM conversations WHERE id = ?1")?.query_row([conversation_id], |r| r.get(0))?;
            rows::insert_message(conn, conversation_id, source, &digest, m, None)?
        }
    };
    Ok((id, line))
}

/// Appends a message as the document's next line; returns the line's bytes.
pub fn append_line(conn: &Connection, conversation_id: i64, doc: &mut Doc, m: &Message) -> Result<Vec<u8>, StoreError> {
    let (message_id, line) = message_row(conn, conversation_id, m)?;
    conn.prepare_cached("INSERT INTO document_lines (document_id, line_no, message_id) VALUES (?1, ?2, ?3)")?.execute(params![
        doc.id,
        doc.line_count,
        message_id
    ])?;
    doc.line_count += 1;
    doc.ends_with_newline = true;
    conn.prepare_cached("UPDATE documents SET line_count = ?2, ends_with_newline = 1 WHERE id = ?1")?.execute(params![doc.id, doc.line_count])?;
    Ok(line)
}

/// Replaces every line of a document with `messages`.
pub fn replace_lines(conn: &Connection, conversation_id: i64, doc: &mut Doc, messages: &[Message]) -> Result<(), StoreError> {
    truncate_lines(conn, doc, 0)?;
    for m in messages {
        append_line(conn, conversation_id, doc, m)?;
    }
    conn.execute("UPDATE documents SET line_count = ?2, ends_with_newline = 1 WHERE id = ?1", params![doc.id, doc.line_count])?;
    Ok(())
}

/// Whether gptme, rewriting `doc` from the messages it reads, writes every line back as it is
/// (see `messages.rewrites_unchanged` in schema 0008). Asked from the side of the conversation's
/// messages that gptme may not write back unchanged (an index of them, schema 0009; usually
/// none), each looked up among `doc`'s lines: nothing is decoded, and the time does not grow
/// with the document.
pub fn rewrites_unchanged(conn: &Connection, conversation_id: i64, doc: &Doc) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT NOT EXISTS (SELECT 1 FROM messages m CROSS JOIN document_lines dl
               WHERE m.conversation_id = ?2 AND m.rewrites_unchanged IS DISTINCT FROM 1 AND dl.message_id = m.id AND dl.document_id = ?1)
                AND NOT EXISTS (SELECT 1 FROM documents d CROSS JOIN messages m CROSS JOIN document_lines dl
               WHERE d.id = ?1 AND m.conversation_id = ?2 AND m.rewrites_unchanged IS DISTINCT FROM 1
                 AND dl.message_id = m.id AND dl.document_id = d.base_id AND dl.line_no < d.base_len)",
        )?
        .query_row(params![doc.id, conversation_id], |r| r.get(0))?)
}

/// Gives the empty document `to` the first `count` lines of `from` without copying them: `to`
/// borrows them from `from`'s rows (or from the document `from` itself borrows from, sharing
/// being one level deep), and only the lines `from` holds of its own below `count` are copied
/// (schema 0010). The time does not grow with the lines borrowed. The rows borrowed stay put
/// for as long as `to` borrows them: the database copies them to `to` before they go.
pub fn copy_lines(conn: &Connection, from: &Doc, to: &mut Doc, count: i64) -> Result<(), StoreError> {
    let (base, base_len): (Option<i64>, i64) =
        conn.prepare_cached("SELECT base_id, base_len FROM documents WHERE id = ?1")?.query_row([from.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let (base, borrowed) = match base {
        Some(base) => (base, base_len.min(count)),
        None => (from.id, count),
    };
    if borrowed > 0 {
        conn.prepare_cached("UPDATE documents SET base_id = ?2, base_len = ?3 WHERE id = ?1")?.execute(params![to.id, base, borrowed])?;
    }
    conn.prepare_cached(
        "INSERT INTO document_lines (document_id, line_no, message_id)
         SELECT ?2, line_no, message_id FROM document_lines WHERE document_id = ?1 AND line_no >= ?3 AND line_no < ?4",
    )?
    .execute(params![from.id, to.id, borrowed, count])?;
    to.line_count = count;
    to.ends_with_newline = true;
    conn.prepare_cached("UPDATE documents SET line_count = ?2, ends_with_newline = 1 WHERE id = ?1")?.execute(params![to.id, count])?;
    Ok(())
}

/// Removes the lines of `doc` from line `len` on. Lines other documents borrow from `doc` are
/// copied to them first (by the database, schema 0010); lines `doc` borrows past `len` are
/// simply no longer borrowed.
pub fn truncate_lines(conn: &Connection, doc: &mut Doc, len: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM document_lines WHERE document_id = ?1 AND line_no >= ?2")?.execute(params![doc.id, len])?;
    doc.line_count = len;
    conn.prepare_cached(
        "UPDATE documents SET line_count = ?2, base_len = min(base_len, ?2), base_id = CASE WHEN min(base_len, ?2) = 0 THEN NULL ELSE base_id END
         WHERE id = ?1",
    )?
    .execute(params![doc.id, len])?;
    Ok(())
}

/// Removes these message rows when no line or event refers to them any more.
pub fn remove_messages_if_unreferenced(conn: &Connection, ids: &[i64]) -> Result<(), StoreError> {
    let mut delete = conn.prepare_cached(
        "DELETE FROM messages WHERE id = ?1
           AND NOT EXISTS (SELECT 1 FROM document_lines dl WHERE dl.message_id = ?1)
           AND NOT EXISTS (SELECT 1 FROM event_messages em WHERE em.message_id = ?1)",
    )?;
    for id in ids {
        delete.execute([id])?;
    }
    Ok(())
}

/// Records a file's mode, mtime and size after sessiondb wrote it.
pub fn set_entry_stat(conn: &Connection, conversation_id: i64, path: &str, mode: u32, mtime_ns: i64, size: u64) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE entries SET mode = ?3, mtime_ns = ?4, size = ?5 WHERE conversation_id = ?1 AND path = ?2")?.execute(params![
        conversation_id,
        path,
        mode,
        mtime_ns,
        size as i64
    ])?;
    Ok(())
}

/// Records the current mode and mtime of every directory entry of a conversation (writing
/// files into a directory moves its mtime, which export restores).
pub fn refresh_dir_entries(conn: &Connection, conversation_id: i64, dir: &std::path::Path) -> Result<(), StoreError> {
    let paths: Vec<String> = conn
        .prepare_cached("SELECT path FROM entries WHERE conversation_id = ?1 AND kind = 'dir'")?
        .query_map([conversation_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut update = conn.prepare_cached("UPDATE entries SET mode = ?3, mtime_ns = ?4 WHERE conversation_id = ?1 AND path = ?2")?;
    for path in paths {
        let abs = if path.is_empty() { dir.to_path_buf() } else { dir.join(&path) };
        if let Ok(m) = std::fs::symlink_metadata(&abs) {
            update.execute(params![conversation_id, path, crate::fs::meta::mode_bits(&m), crate::fs::meta::mtime_ns(&m)])?;
        }
    }
    Ok(())
}

/// Records what the store holds of a file (see [`crate::fs::watermark`]).
pub fn set_watermark(conn: &Connection, conversation_id: i64, path: &str, mark: &crate::fs::watermark::Watermark) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE entries SET size = ?3, ino = ?4, tail_sha256 = ?5 WHERE conversation_id = ?1 AND path = ?2")?.execute(params![
        conversation_id,
        path,
        mark.size as i64,
        mark.ino as i64,
        &mark.tail[..]
    ])?;
    Ok(())
}

/// Removes a document and its entry.
pub fn remove_doc(conn: &Connection, conversation_id: i64, doc: &Doc) -> Result<(), StoreError> {
    conn.execute("DELETE FROM documents WHERE id = ?1", [doc.id])?;
    conn.execute("DELETE FROM entries WHERE conversation_id = ?1 AND path = ?2", params![conversation_id, doc.path])?;
    Ok(())
}

/// One line of a stored event log, as gptme's reader sees it.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub line_no: i64,
    /// The bytes of the line.
    pub line: Vec<u8>,
    /// The decoded event, when the line is one gptme can parse.
    pub event: Option<Event>,
    /// The line parses as JSON (gptme keeps such lines through compaction).
    pub json: Option<json::Json>,
}

/// Every line of an event log, in order.
pub fn events(conn: &Connection, doc: &Doc) -> Result<Vec<StoredEvent>, StoreError> {
    let mut out = Vec::new();
    let mut line_numbers = conn.prepare("SELECT line_no FROM events WHERE document_id = ?1 ORDER BY line_no")?;
    let numbers: Vec<i64> = line_numbers.query_map([doc.id], |r| r.get(0))?.collect::<Result<_, _>>()?;
    let mut i = 0;
    queries::for_each_line(conn, doc.id, DocumentKind::Events, |line| {
        let event = match decode_event_line(line) {
            EventLine::Event { event, .. } => Some(event),
            _ => None,
        };
        let json = std::str::from_utf8(line).ok().and_then(|t| json::parse(t.trim()).ok()).map(|p| p.value);
        out.push(StoredEvent { line_no: numbers[i], line: line.to_vec(), event, json });
        i += 1;
        Ok(())
    })?;
    Ok(out)
}

/// gptme's next sequence number, without reading the log: one past the seq of the last
/// non-blank line, or after a damaged last line one past the highest valid seq (1 when there
/// is none). Costs a few index lookups.
pub fn next_seq(conn: &Connection, doc: &Doc) -> Result<i64, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT seq, raw FROM events WHERE document_id = ?1 ORDER BY line_no DESC")?;
    let mut rows = stmt.query([doc.id])?;
    while let Some(row) = rows.next()? {
        if let Some(seq) = row.get::<_, Option<i64>>(0)? {
            return Ok(seq + 1);
        }
        let raw: Option<Vec<u8>> = row.get(1)?;
        let blank = raw.as_deref().is_none_or(|r| std::str::from_utf8(r).is_ok_and(|t| t.trim().is_empty()));
        if blank {
            continue;
        }
        // A damaged last line: one past the highest valid seq, as gptme falls back to.
        let max: Option<i64> = conn.query_row("SELECT max(seq) FROM events WHERE document_id = ?1", [doc.id], |r| r.get(0))?;
        return Ok(max.map_or(1, |m| m + 1));
    }
    Ok(1)
}

/// Appends an event as the log's next line; returns its bytes.
pub fn append_event(conn: &Connection, conversation_id: i64, doc: &mut Doc, event: &Event) -> Result<Vec<u8>, StoreError> {
    let line = encode_event(event).into_bytes();
    let line_no: i64 = conn.prepare_cached("SELECT coalesce(max(line_no) + 1, 0) FROM events WHERE document_id = ?1")?.query_row([doc.id], |r| r.get(0))?;
    let form = match &event.payload {
        Payload::Message(_) => "message",
        Payload::Messages(_) => "messages",
        Payload::Other(_) => "json",
    };
    let payload = match &event.payload {
        Payload::Other(j) => Some(json::dump(j)),
        _ => None,
    };
    conn.prepare_cached("INSERT INTO events (document_id, line_no, seq, ts, type, payload_form, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?
        .execute(params![doc.id, line_no, event.seq, event.ts, event.kind, form, payload])?;
    for (position, m) in event.payload.messages().iter().enumerate() {
        let (message_id, _) = message_row(conn, conversation_id, m)?;
        conn.prepare_cached("INSERT INTO event_messages (document_id, line_no, position, message_id) VALUES (?1, ?2, ?3, ?4)")?.execute(params![
            doc.id,
            line_no,
            position as i64,
            message_id
        ])?;
    }
    doc.line_count += 1;
    conn.prepare_cached("UPDATE documents SET line_count = line_count + 1, ends_with_newline = 1 WHERE id = ?1")?.execute([doc.id])?;
    Ok(line)
}

/// Appends a checkpoint event (gptme's snapshot of the whole list, every 50th event) holding
/// the messages of `source` in order, without reading them: the event's rows refer to the
/// message rows `source`'s lines refer to. Call only when gptme would write every message of
/// `source` back as it is ([`rewrites_unchanged`]); otherwise the snapshot is of the messages
/// as gptme normalises them, and [`append_event`] takes them.
pub fn append_checkpoint_of(conn: &Connection, doc: &mut Doc, seq: i64, ts: &str, source: &Doc) -> Result<(), StoreError> {
    let line_no: i64 = conn.prepare_cached("SELECT coalesce(max(line_no) + 1, 0) FROM events WHERE document_id = ?1")?.query_row([doc.id], |r| r.get(0))?;
    conn.prepare_cached("INSERT INTO events (document_id, line_no, seq, ts, type, payload_form) VALUES (?1, ?2, ?3, ?4, ?5, 'messages')")?.execute(params![
        doc.id,
        line_no,
        seq,
        ts,
        crate::codec::events::CHECKPOINT
    ])?;
    conn.prepare_cached(&format!(
        "INSERT INTO event_messages (document_id, line_no, position, message_id)
         SELECT ?2, ?3, row_number() OVER (ORDER BY r.n) - 1, r.message_id
         FROM ({}) r JOIN messages m ON m.id = r.message_id WHERE m.role IS NOT NULL",
        queries::RESOLVED_LINES
    ))?
    .execute(params![source.id, doc.id, line_no])?;
    doc.line_count += 1;
    conn.prepare_cached("UPDATE documents SET line_count = line_count + 1, ends_with_newline = 1 WHERE id = ?1")?.execute([doc.id])?;
    Ok(())
}

/// gptme's compaction after a checkpoint: the log keeps only the lines that parse as JSON
/// with a seq at or above the checkpoint's, each re-serialised by `json.dumps`; everything else
/// (older events, damaged and blank lines) is dropped.
///
/// A line stored typed is canonical (re-serialising gives its own bytes), so only lines kept
/// as raw bytes are parsed here; that keeps compaction from re-reading the checkpoint it just
/// wrote, which holds the whole conversation.
pub fn compact_events(conn: &Connection, doc: &mut Doc, checkpoint_seq: i64) -> Result<(), StoreError> {
    let mut stmt = conn.prepare("SELECT line_no, seq, raw FROM events WHERE document_id = ?1 ORDER BY line_no")?;
    let rows: Vec<(i64, Option<i64>, Option<Vec<u8>>)> = stmt.query_map([doc.id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?;
    let mut kept = 0;
    for (line_no, seq, raw) in rows {
        let keep = match &raw {
            None => seq.is_some_and(|s| s >= checkpoint_seq),
            Some(bytes) => {
                let parsed = std::str::from_utf8(bytes).ok().and_then(|t| json::parse(t.trim()).ok()).map(|p| p.value);
                match parsed {
                    Some(value) if value.get("seq").and_then(json::Json::as_i64).is_some_and(|s| s >= checkpoint_seq) => {
                        let dumped = json::dump(&value).into_bytes();
                        if &dumped != bytes {
                            conn.execute("UPDATE events SET raw = ?3 WHERE document_id = ?1 AND line_no = ?2", params![doc.id, line_no, &dumped])?;
                        }
                        true
                    }
                    _ => false,
                }
            }
        };
        if keep {
            kept += 1;
        } else {
            conn.execute("DELETE FROM event_messages WHERE document_id = ?1 AND line_no = ?2", params![doc.id, line_no])?;
            conn.execute("DELETE FROM events WHERE document_id = ?1 AND line_no = ?2", params![doc.id, line_no])?;
        }
    }
    doc.line_count = kept;
    doc.ends_with_newline = true;
    conn.execute("UPDATE documents SET line_count = ?2, ends_with_newline = 1 WHERE id = ?1", params![doc.id, doc.line_count])?;
    Ok(())
}

/// Removes message rows that no document line and no event refers to any more (after an
/// undo or edit, the popped messages stay only if a backup branch or an event holds them).
pub fn remove_unreferenced_messages(conn: &Connection, conversation_id: i64) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM messages WHERE conversation_id = ?1
           AND NOT EXISTS (SELECT 1 FROM document_lines dl WHERE dl.message_id = messages.id)
           AND NOT EXISTS (SELECT 1 FROM event_messages em WHERE em.message_id = messages.id)",
        [conversation_id],
    )?;
    Ok(())
}

/// Appends a bookmark (a line of gptme's `conv-checkpoints.jsonl`) to document `doc`'s rows.
pub fn append_bookmark(conn: &Connection, doc: &Doc, bookmark: &Bookmark) -> Result<(), StoreError> {
    let line_no: i64 = conn.query_row("SELECT coalesce(max(line_no) + 1, 0) FROM conv_checkpoints WHERE document_id = ?1", [doc.id], |r| r.get(0))?;
    conn.execute(
        "INSERT INTO conv_checkpoints (document_id, line_no, idx, label, timestamp) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![doc.id, line_no, bookmark.index, bookmark.label, bookmark.timestamp],
    )?;
    conn.execute("UPDATE documents SET line_count = line_count + 1, ends_with_newline = 1 WHERE id = ?1", [doc.id])?;
    Ok(())
}

/// Counts a conversation's branches again from its entries (main and `branches/*.jsonl`),
/// after one was created.
pub fn refresh_branch_count(conn: &Connection, conversation_id: i64) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE conversations SET branch_count = 1 + (SELECT count(*) FROM entries WHERE conversation_id = ?1 AND {}) WHERE id = ?1",
        crate::layout::counts_as_branch_sql("path")
    );
    conn.prepare_cached(&sql)?.execute([conversation_id])?;
    Ok(())
}

/// Sets the display name of a conversation (after its `config.toml` was written with it).
pub fn rename_conversation(conn: &Connection, conversation_id: i64, name: &str) -> Result<(), StoreError> {
    conn.execute("UPDATE conversations SET name = ?2 WHERE id = ?1", params![conversation_id, name])?;
    Ok(())
}

/// Records the fingerprint of a conversation's directory after sessiondb wrote it.
pub fn set_fingerprint(conn: &Connection, conversation_id: i64, fingerprint: &[u8]) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE conversations SET fingerprint = ?2 WHERE id = ?1")?.execute(params![conversation_id, fingerprint])?;
    Ok(())
}

/// Records that a conversation's directory was found as the store has it (its fingerprint, and
/// that it is not deleted).
pub fn mark_unchanged(conn: &Connection, conversation_id: i64, fingerprint: &[u8]) -> Result<(), StoreError> {
    conn.prepare_cached("UPDATE conversations SET fingerprint = ?2, deleted_at = NULL WHERE id = ?1 AND (fingerprint != ?2 OR deleted_at IS NOT NULL)")?
        .execute(params![conversation_id, fingerprint])?;
    Ok(())
}

/// Marks a conversation as archived out of its logs root (schema 26: its directory is to go, or
/// has gone, on purpose, and a sync does not take it for deleted), or no longer archived.
pub fn set_archived(conn: &Connection, conversation_id: i64, archived: bool) -> Result<(), StoreError> {
    let at = archived.then(super::sql::now_utc);
    conn.prepare_cached("UPDATE conversations SET archived_at = ?2 WHERE id = ?1")?.execute(params![conversation_id, at])?;
    Ok(())
}

/// Marks a conversation whose directory is gone as deleted; its rows stay until it is removed
/// ([`delete_conversation`]), or its directory is found again ([`mark_unchanged`]).
pub fn mark_deleted(conn: &Connection, conversation_id: i64) -> Result<(), StoreError> {
    conn.execute("UPDATE conversations SET deleted_at = ?2 WHERE id = ?1", params![conversation_id, super::sql::now_utc()])?;
    Ok(())
}

/// Deletes a conversation's rows (its entries, documents, messages and queue go with it). Its
/// blobs stay until [`super::blobs::remove_all_unreferenced`].
pub fn delete_conversation(conn: &Connection, conversation_id: i64) -> Result<(), StoreError> {
    delete_borrowers(conn, conversation_id)?;
    conn.execute("DELETE FROM conversations WHERE id = ?1", [conversation_id])?;
    Ok(())
}

/// Deletes the conversation's documents that borrow lines (schema 0010), ahead of deleting the
/// whole conversation: deleted after the documents they borrow from, they would first be given
/// copies of every line they borrow, for nothing.
pub fn delete_borrowers(conn: &Connection, conversation_id: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM documents WHERE conversation_id = ?1 AND base_id IS NOT NULL")?.execute([conversation_id])?;
    Ok(())
}

/// Records the mtimes directories have now (`(path, mtime_ns)`; files coming and going in a
/// directory move its mtime, which export restores).
pub fn set_dir_mtimes(conn: &Connection, conversation_id: i64, mtimes: &[(String, i64)]) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached("UPDATE entries SET mtime_ns = ?3 WHERE conversation_id = ?1 AND path = ?2 AND kind = 'dir'")?;
    for (rel, mtime_ns) in mtimes {
        stmt.execute(params![conversation_id, rel, mtime_ns])?;
    }
    Ok(())
}

/// Sets entry `path` of a conversation to a file holding `data` (see [`put_file`]).
pub fn set_blob_entry(conn: &Connection, conversation_id: i64, path: &str, mode: u32, mtime_ns: i64, data: &[u8]) -> Result<(), StoreError> {
    let sha: [u8; 32] = Sha256::digest(data).into();
    put_file(conn, conversation_id, path, mode, mtime_ns, &sha, data.len() as u64, data)
}

/// Removes entry `path` of a conversation, and its blob when nothing else refers to it.
pub fn remove_entry(conn: &Connection, conversation_id: i64, path: &str) -> Result<(), StoreError> {
    let old = rows::entry_blob(conn, conversation_id, path)?;
    conn.prepare_cached("DELETE FROM entries WHERE conversation_id = ?1 AND path = ?2")?.execute(params![conversation_id, path])?;
    if let Some(old) = old {
        super::blobs::remove_if_unreferenced(conn, &old)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Shared line prefixes (schema 0010) against a model: whatever documents borrow from
    //! which, and whatever is then appended, truncated, replaced or deleted, every document
    //! reads back exactly the lines it was given, and doctor finds nothing.
    use super::*;
    use crate::model::Role;
    use proptest::prelude::*;

    fn store() -> Connection {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        let conn = Connection::plain(conn);
        conn.execute("INSERT INTO sources (name, root) VALUES ('s', '/')", ()).unwrap();
        conn.execute(
            "INSERT INTO conversations (source_id, chat_id, source_dir, fingerprint, imported_at, created, modified) VALUES (1, 'c', '/c', x'', '', 0, 0)",
            (),
        )
        .unwrap();
        conn
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A new document of this many new lines.
        New(usize),
        /// A new document given the first lines of a live one (`copy_lines`, an undo's backup).
        Borrow(prop::sample::Index, usize),
        Append(prop::sample::Index),
        Truncate(prop::sample::Index, usize),
        Replace(prop::sample::Index, usize),
        Delete(prop::sample::Index),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            1 => (0usize..6).prop_map(Op::New),
            3 => (any::<prop::sample::Index>(), 0usize..8).prop_map(|(i, n)| Op::Borrow(i, n)),
            2 => any::<prop::sample::Index>().prop_map(Op::Append),
            3 => (any::<prop::sample::Index>(), 0usize..8).prop_map(|(i, n)| Op::Truncate(i, n)),
            1 => (any::<prop::sample::Index>(), 0usize..4).prop_map(|(i, n)| Op::Replace(i, n)),
            1 => any::<prop::sample::Index>().prop_map(Op::Delete),
        ]
    }

    struct World {
        conn: Connection,
        docs: Vec<(Doc, Vec<i64>)>,
        next_doc: usize,
        next_message: usize,
    }

    impl World {
        fn message(&mut self) -> Message {
            self.next_message += 1;
            Message::new(Role::User, format!("message {}", self.next_message), None)
        }

        fn new_doc(&mut self) -> Doc {
            self.next_doc += 1;
            let path = format!("branches/b{}.jsonl", self.next_doc);
            create_doc(&self.conn, 1, &path, DocumentKind::Branch, &format!("b{}", self.next_doc), 0o644).unwrap()
        }

        fn append(&mut self, at: usize) {
            let m = self.message();
            append_line(&self.conn, 1, &mut self.docs[at].0, &m).unwrap();
            let (id, _) = message_row(&self.conn, 1, &m).unwrap();
            self.docs[at].1.push(id);
        }

        fn apply(&mut self, op: Op) {
            let pick = |i: &prop::sample::Index, docs: &Vec<(Doc, Vec<i64>)>| i.index(docs.len());
            match op {
                Op::New(n) => {
                    let doc = self.new_doc();
                    self.docs.push((doc, Vec::new()));
                    let at = self.docs.len() - 1;
                    (0..n).for_each(|_| self.append(at));
                }
                _ if self.docs.is_empty() => {}
                Op::Borrow(i, n) => {
                    let from = pick(&i, &self.docs);
                    let count = n.min(self.docs[from].1.len());
                    let mut to = self.new_doc();
                    copy_lines(&self.conn, &self.docs[from].0, &mut to, count as i64).unwrap();
                    let lines = self.docs[from].1[..count].to_vec();
                    self.docs.push((to, lines));
                }
                Op::Append(i) => self.append(pick(&i, &self.docs)),
                Op::Truncate(i, n) => {
                    let at = pick(&i, &self.docs);
                    let len = n.min(self.docs[at].1.len());
                    truncate_lines(&self.conn, &mut self.docs[at].0, len as i64).unwrap();
                    self.docs[at].1.truncate(len);
                }
                Op::Replace(i, n) => {
                    let at = pick(&i, &self.docs);
                    let messages: Vec<Message> = (0..n).map(|_| self.message()).collect();
                    replace_lines(&self.conn, 1, &mut self.docs[at].0, &messages).unwrap();
                    self.docs[at].1 = messages.iter().map(|m| message_row(&self.conn, 1, m).unwrap().0).collect();
                }
                Op::Delete(i) => {
                    let at = pick(&i, &self.docs);
                    let (doc, _) = self.docs.remove(at);
                    remove_doc(&self.conn, 1, &doc).unwrap();
                }
            }
        }

        fn check(&self) -> Result<(), TestCaseError> {
            for (doc, lines) in &self.docs {
                let stored: Vec<i64> = doc_lines(&self.conn, doc).unwrap().iter().map(|l| l.message_id).collect();
                prop_assert_eq!(&stored, lines, "{}", doc.path);
                let back: Vec<i64> = queries::with_document_lines_back(&self.conn, doc.id, lines.len() as i64, |l| l.map(|l| l.message_id).collect()).unwrap();
                prop_assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), lines.clone());
                let count: i64 = self.conn.query_row("SELECT line_count FROM documents WHERE id = ?1", [doc.id], |r| r.get(0)).unwrap();
                prop_assert_eq!(count as usize, lines.len());
            }
            use super::super::doctor::{check_database, Check, Problem};
            let report = check_database(&self.conn).unwrap();
            // The checks of documents and references (this store keeps no listing totals, no
            // full-text index, and leaves messages no line refers to any more).
            let documents: Vec<_> =
                report.problems.iter().filter(|p| matches!(p, Problem::Found { check: Check::Document | Check::ForeignKey | Check::Integrity, .. })).collect();
            prop_assert!(documents.is_empty(), "doctor: {documents:?}");
            Ok(())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn borrowed_lines_read_back_whatever_happens_to_their_lender(ops in proptest::collection::vec(op(), 1..40)) {
            let mut world = World { conn: store(), docs: Vec::new(), next_doc: 0, next_message: 0 };
            for op in ops {
                world.apply(op);
                world.check()?;
            }
            delete_conversation(&world.conn, 1).unwrap();
            let left: i64 = world.conn.query_row("SELECT (SELECT count(*) FROM document_lines) + (SELECT count(*) FROM documents)", (), |r| r.get(0)).unwrap();
            prop_assert_eq!(left, 0);
        }
    }

    #[test]
    fn an_undo_backup_borrows_instead_of_copying() {
        let mut world = World { conn: store(), docs: Vec::new(), next_doc: 0, next_message: 0 };
        world.apply(Op::New(1000));
        let (branch, _) = world.docs[0].clone();
        let mut backup = world.new_doc();
        copy_lines(&world.conn, &branch, &mut backup, 1000).unwrap();
        let rows = |id: i64| -> i64 { world.conn.query_row("SELECT count(*) FROM document_lines WHERE document_id = ?1", [id], |r| r.get(0)).unwrap() };
        assert_eq!((rows(branch.id), rows(backup.id)), (1000, 0));
        let mut branch = branch;
        truncate_lines(&world.conn, &mut branch, 998).unwrap();
        // Only the two lines the branch gave up were copied to the backup.
        assert_eq!((rows(branch.id), rows(backup.id)), (998, 2));
        assert_eq!(doc_lines(&world.conn, &backup).unwrap().len(), 1000);
    }
}
