//! Writing one whole conversation into the store.
//!
//! A [`ConversationWriter`] holds a savepoint of a [`super::WriteBatch`] from its creation to
//! [`ConversationWriter::finish`]: the previous copy of the conversation (if any) is deleted
//! and the new one inserted inside it, so a failure or a crash at any point leaves the store with
//! the old copy, complete. The writer only writes rows: reading and decoding the files is the
//! caller's job (`sync::ingest` does it on another thread), and lines arrive one at a time.
//! The rows of message lines (their texts, `messages`, `document_lines`) wait in the writer
//! and are sent together, a few statements for up to [`PENDING_LINES`] lines
//! ([`super::rowsets`]: on a server a statement is a round trip), so memory is bounded by
//! [`PENDING_BYTES`] plus the longest line, plus one 32-byte key per distinct message. Every
//! read of the conversation's messages or lines through the writer sends them first
//! ([`ConversationWriter::flush`]). The rows an import shares with live operations — a
//! message, a regular file with its blob — are written by [`super::rows`], the same way for
//! both.

use crate::fs::watermark::Watermark;
use std::collections::{HashMap, HashSet};
use std::io::Read;

use super::sql::{params, OptionalExtension};

use super::rows;
use super::totals::ListingTotals;
use super::{Connection, Savepoint, StoreError};
use crate::codec::bookmarks::BookmarkLine;
use crate::codec::config::ChatConfig;
use crate::codec::events::{EventLine, Payload};
use crate::codec::json;
use crate::codec::message_line::{DecodedLine, LineContent};
use crate::model::Message;

/// What kind of JSONL document a file is (gptme's layout decides it); see the `documents` table.
pub use crate::layout::DocumentKind;

/// A line that gptme would skip, reported as `path:line: reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineWarning {
    pub path: String,
    /// 1-based.
    pub line: u64,
    pub reason: String,
}

/// Counts of what one conversation's import wrote.
#[derive(Debug, Clone, Default)]
pub struct WriteStats {
    pub messages: u64,
    /// Messages the store did not hold before (all of them on a first import).
    pub new_messages: u64,
    pub branches: u64,
    pub views: u64,
    pub events: u64,
    pub attachments: u64,
    pub bytes: u64,
    pub warnings: Vec<LineWarning>,
    /// Warnings beyond the ones kept in `warnings`.
    pub more_warnings: u64,
    /// Messages sessiondb had appended that the directory dropped (gptme rewrote a transcript
    /// from a stale copy), kept as new branches before this read: `(transcript, messages,
    /// kept as)`.
    pub rescued: Vec<(String, u64, String)>,
}

/// Message lines that wait, at most, before their rows are sent ([`ConversationWriter::flush`]).
pub const PENDING_LINES: usize = 1_024;

/// Bytes of lines that wait, at most, before their rows are sent.
pub const PENDING_BYTES: usize = 4 << 20;

/// The rows of message lines not sent yet: new `messages` rows in the order their lines came
/// (each digest once, and none the conversation holds already), and `document_lines` rows that
/// refer to a message by its digest.
#[derive(Default)]
struct Pending {
    rows: Vec<(LineDigest, PendingRow)>,
    /// The digests of `rows`.
    digests: HashSet<LineDigest>,
    /// `(document, line_no, message digest)`.
    lines: Vec<(i64, i64, LineDigest)>,
    bytes: usize,
}

enum PendingRow {
    Message { message: Message, raw: Option<Vec<u8>> },
    Other { line: Vec<u8>, malformed: Option<String> },
}

const DOCUMENT_LINES: super::rowsets::Insert =
    super::rowsets::Insert { head: "INSERT INTO document_lines (document_id, line_no, message_id) VALUES", columns: 3, tail: "" };

/// At most this many warnings are kept per conversation; the rest are only counted.
const MAX_WARNINGS: usize = 100;

/// A document being written: its row id and where its lines go.
#[derive(Debug, Clone, Copy)]
pub struct DocumentId(i64);

pub use super::rows::LineDigest;

pub struct ConversationWriter<'c> {
    tx: Savepoint<'c>,
    conversation_id: i64,
    /// The conversation's source, whose texts its messages share ([`super::texts`]).
    source_id: i64,
    message_ids: HashMap<LineDigest, i64>,
    /// Extending a stored conversation ([`Self::resume`]) rather than writing it anew: a digest
    /// missing from `message_ids` may still be stored.
    resumed: bool,
    /// The messages the previous copy held, so that a re-import can tell which are new.
    previous_messages: HashSet<LineDigest>,
    /// Blobs the previous copy referred to: removed at the end unless still referred to.
    previous_blobs: Vec<Vec<u8>>,
    pending: Pending,
    stats: WriteStats,
}

impl<'c> ConversationWriter<'c> {
    /// Starts replacing `chat_id` in the store, in a savepoint of the caller's write
    /// transaction (see [`super::WriteBatch`]). Refused with [`StoreError::Queued`] while the
    /// conversation has changes queued for its directory: replacing it would discard them.
    ///
    /// The conversation is the one of `chat_id` in the source of `source_dir`'s logs root (its
    /// parent); only that source's rows are replaced. On a connection scoped to a source
    /// ([`Connection::scope_to`]), a directory outside that source's root is refused
    /// ([`StoreError::OutsideSource`]); on an unscoped one, the root's source is made when new.
    pub(super) fn begin(conn: &'c mut Connection, chat_id: &str, source_dir: &str, fingerprint: &[u8]) -> Result<Self, StoreError> {
        let tx = Savepoint::begin(conn)?;
        let dir = std::path::Path::new(source_dir);
        let source = match tx.scope() {
            Some(id) => {
                let source = super::sources::by_id(&tx, id)?;
                if dir.parent() != Some(source.root.as_path()) {
                    return Err(StoreError::OutsideSource { dir: dir.to_owned(), source_name: source.name, root: source.root });
                }
                source.id
            }
            None => super::sources::of_dir(&tx, dir)?.id,
        };
        let previous: Option<i64> = tx
            .prepare_cached("SELECT id FROM conversations WHERE source_id = ?1 AND chat_id = ?2")?
            .query_row(params![source, chat_id], |r| r.get(0))
            .optional()?;
        let previous = previous.unwrap_or(-1);
        // Checked inside the write transaction, so that no queue committed after the caller
        // looked can be deleted with the old copy (the cascade would take `pending_paths`).
        let queued: bool = tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM pending_paths p WHERE p.conversation_id = ?1)")?.query_row([previous], |r| r.get(0))?;
        if queued {
            return Err(StoreError::Queued(chat_id.to_owned()));
        }
        let previous_blobs = tx
            .prepare_cached("SELECT DISTINCT e.blob_sha256 FROM entries e WHERE e.conversation_id = ?1 AND e.blob_sha256 IS NOT NULL")?
            .query_map([previous], |r| r.get(0))?
            .collect::<Result<Vec<Vec<u8>>, _>>()?;
        let previous_messages = tx
            .prepare_cached("SELECT m.line_sha256 FROM messages m WHERE m.conversation_id = ?1 AND m.role IS NOT NULL")?
            .query_map([previous], |r| r.get::<_, Vec<u8>>(0))?
            .filter_map(|d| d.map(|d| <LineDigest>::try_from(d.as_slice()).ok()).transpose())
            .collect::<Result<HashSet<_>, _>>()?;
        tx.execute("DELETE FROM documents WHERE base_id IS NOT NULL AND conversation_id = ?1", [previous])?; // see modify::delete_borrowers
        tx.execute("DELETE FROM conversations WHERE id = ?1", [previous])?;
        let conversation_id: i64 = tx
            .prepare_cached(
                "INSERT INTO conversations (source_id, chat_id, source_dir, fingerprint, imported_at, created, modified)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0, 0) RETURNING id",
            )?
            .query_row(params![source, chat_id, source_dir, fingerprint, super::sql::now_utc()], |r| r.get(0))?;
        let stats = WriteStats::default();
        Ok(ConversationWriter {
            tx,
            conversation_id,
            source_id: source,
            message_ids: HashMap::new(),
            resumed: false,
            previous_messages,
            previous_blobs,
            pending: Pending::default(),
            stats,
        })
    }

    /// Starts adding lines to the stored conversation `conversation_id` (incremental ingest), in
    /// a savepoint of the caller's write transaction. Nothing is deleted.
    pub(super) fn resume(conn: &'c mut Connection, conversation_id: i64) -> Result<Self, StoreError> {
        let tx = Savepoint::begin(conn)?;
        let stats = WriteStats::default();
        let source_id = tx.prepare_cached("SELECT source_id FROM conversations WHERE id = ?1")?.query_row([conversation_id], |r| r.get(0))?;
        Ok(ConversationWriter {
            tx,
            conversation_id,
            source_id,
            message_ids: HashMap::new(),
            resumed: true,
            previous_messages: HashSet::new(),
            previous_blobs: Vec::new(),
            pending: Pending::default(),
            stats,
        })
    }

    /// The transaction, for reads (of other rows than the conversation's messages and lines,
    /// which may wait to be sent: [`Self::flush`]).
    pub fn conn(&self) -> &Connection {
        &self.tx
    }

    /// Sends the rows of the message lines that wait: their texts and messages, then their
    /// `document_lines`, each table in few statements.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        let pending = std::mem::take(&mut self.pending);
        if !pending.rows.is_empty() {
            let rows: Vec<(LineDigest, rows::NewRow<'_>)> = pending
                .rows
                .iter()
                .map(|(digest, row)| {
                    let row = match row {
                        PendingRow::Message { message, raw } => rows::NewRow::Message { message, raw: raw.as_deref() },
                        PendingRow::Other { line, malformed } => rows::NewRow::Other { line, malformed: malformed.as_deref() },
                    };
                    (*digest, row)
                })
                .collect();
            let ids = rows::insert_messages(&self.tx, self.conversation_id, self.source_id, &rows)?;
            self.message_ids.extend(pending.rows.iter().map(|(digest, _)| *digest).zip(ids));
        }
        let lines: Vec<[i64; 3]> = pending
            .lines
            .iter()
            .map(|(document, line_no, digest)| {
                Ok([*document, *line_no, *self.message_ids.get(digest).ok_or_else(|| StoreError::Corrupt("a line's message has no row".into()))?])
            })
            .collect::<Result<_, StoreError>>()?;
        DOCUMENT_LINES.run(&self.tx, &lines, |[d, n, m], out| out.extend_from_slice(&[d as &dyn super::sql::ToSql, n, m]), |_| Ok(()))?;
        Ok(())
    }

    /// The row of an already stored line with this digest, if any.
    fn stored_message(&mut self, digest: &LineDigest) -> Result<Option<i64>, StoreError> {
        if let Some(&id) = self.message_ids.get(digest) {
            return Ok(Some(id));
        }
        if !self.resumed {
            return Ok(None);
        }
        let found = rows::find_message(&self.tx, self.conversation_id, digest)?;
        if let Some(id) = found {
            self.message_ids.insert(*digest, id);
        }
        Ok(found)
    }

    /// The entry row of a directory, symlink or document (a regular file's is
    /// [`rows::put_file`]'s, with its blob).
    fn entry(&self, path: &str, kind: &str, mode: u32, mtime_ns: i64, link: Option<&[u8]>) -> Result<(), StoreError> {
        self.tx
            .prepare_cached("INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, link_target) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
            .execute(params![self.conversation_id, path, kind, mode, mtime_ns, link])?;
        Ok(())
    }

    pub fn add_dir(&mut self, path: &str, mode: u32, mtime_ns: i64) -> Result<(), StoreError> {
        self.entry(path, "dir", mode, mtime_ns, None)
    }

    pub fn add_symlink(&mut self, path: &str, mode: u32, mtime_ns: i64, target: &[u8]) -> Result<(), StoreError> {
        self.entry(path, "symlink", mode, mtime_ns, Some(target))
    }

    fn count_blob(&mut self, path: &str, size: u64) {
        if crate::layout::is_attachment(path) {
            self.stats.attachments += 1;
        }
        self.stats.bytes += size;
    }

    /// Stores a regular file's bytes as an opaque, content-addressed blob.
    pub fn add_blob(&mut self, path: &str, mode: u32, mtime_ns: i64, sha256: &[u8; 32], data: &[u8]) -> Result<(), StoreError> {
        self.add_blob_stream(path, mode, mtime_ns, sha256, data.len() as u64, data)
    }

    /// Stores a large file as a blob by streaming `size` bytes from `data` in chunks, so that
    /// it never has to be held in memory. `sha256` is the digest of those bytes, computed by
    /// the caller beforehand; `data` yielding other bytes is an error.
    pub fn add_blob_stream(&mut self, path: &str, mode: u32, mtime_ns: i64, sha256: &[u8; 32], size: u64, data: impl Read) -> Result<(), StoreError> {
        rows::put_file(&self.tx, self.conversation_id, path, mode, mtime_ns, sha256, size, data)?;
        self.count_blob(path, size);
        Ok(())
    }

    /// Records the parsed `[chat]` fields of config.toml.
    pub fn set_config(&mut self, config: &ChatConfig) -> Result<(), StoreError> {
        self.tx.execute(
            "UPDATE conversations SET name = ?2, config_model = ?3, workspace = ?4 WHERE id = ?1",
            params![self.conversation_id, config.name, config.model, config.workspace],
        )?;
        Ok(())
    }

    /// Records gptme's default workspace for a conversation without config.toml.
    pub fn set_workspace(&mut self, workspace: &str) -> Result<(), StoreError> {
        self.tx.execute("UPDATE conversations SET workspace = ?2 WHERE id = ?1", params![self.conversation_id, workspace])?;
        Ok(())
    }

    /// Starts a JSONL document; its lines follow through the `add_*_line` methods.
    pub fn start_document(&mut self, path: &str, kind: DocumentKind, name: &str, mode: u32, mtime_ns: i64) -> Result<DocumentId, StoreError> {
        self.entry(path, "document", mode, mtime_ns, None)?;
        let id = self
            .tx
            .prepare_cached(
                "INSERT INTO documents (conversation_id, path, kind, name, ends_with_newline, line_count)
                 VALUES (?1, ?2, ?3, ?4, 1, 0) RETURNING id",
            )?
            .query_row(params![self.conversation_id, path, kind.as_str(), name], |r| r.get(0))?;
        match kind {
            DocumentKind::Branch => self.stats.branches += 1,
            DocumentKind::View => self.stats.views += 1,
            _ => {}
        }
        Ok(DocumentId(id))
    }

    /// Ends a document: how many lines it has, whether its last one ended with a newline, and
    /// what was read of its file (the watermark of the next incremental read).
    pub fn end_document(&mut self, document: DocumentId, path: &str, line_count: i64, ends_with_newline: bool, read: &Watermark) -> Result<(), StoreError> {
        self.tx.prepare_cached("UPDATE documents SET ends_with_newline = ?2, line_count = ?3 WHERE id = ?1")?.execute(params![
            document.0,
            ends_with_newline,
            line_count
        ])?;
        self.tx.prepare_cached("UPDATE entries SET size = ?3, ino = ?4, tail_sha256 = ?5 WHERE conversation_id = ?1 AND path = ?2")?.execute(params![
            self.conversation_id,
            path,
            read.size as i64,
            read.ino as i64,
            &read.tail[..]
        ])?;
        Ok(())
    }

    /// The stored document at `path` of this conversation, to add lines to (incremental ingest):
    /// its id, how many lines it has, and the number its next line gets. The two differ for an
    /// event log that was compacted in place, whose remaining lines keep their numbers.
    pub fn existing_document(&mut self, path: &str) -> Result<(DocumentId, i64, i64), StoreError> {
        self.flush()?;
        let (id, lines, kind): (i64, i64, String) = self
            .tx
            .prepare_cached("SELECT id, line_count, kind FROM documents WHERE conversation_id = ?1 AND path = ?2")?
            .query_row(params![self.conversation_id, path], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        let table = match DocumentKind::parse(&kind) {
            Some(DocumentKind::Events) => "events",
            Some(DocumentKind::Bookmarks) => "conv_checkpoints",
            _ => "document_lines",
        };
        // A document borrowing lines (schema 0010) numbers its own from `base_len` on.
        let next: i64 = self
            .tx
            .prepare_cached(&format!("SELECT coalesce(max(line_no) + 1, (SELECT base_len FROM documents WHERE id = ?1)) FROM {table} WHERE document_id = ?1"))?
            .query_row([id], |r| r.get(0))?;
        Ok((DocumentId(id), lines, next))
    }

    /// Records the file attributes of a document that gained lines (incremental ingest).
    pub fn touch_document(&mut self, path: &str, mode: u32, mtime_ns: i64) -> Result<(), StoreError> {
        self.tx.prepare_cached("UPDATE entries SET mode = ?3, mtime_ns = ?4 WHERE conversation_id = ?1 AND path = ?2")?.execute(params![
            self.conversation_id,
            path,
            mode,
            mtime_ns
        ])?;
        Ok(())
    }

    /// Ends an incremental ingest: main's listing totals when it gained lines, the directory's
    /// new fingerprint (empty when not everything it describes was read), and the savepoint
    /// released.
    pub fn finish_resumed(mut self, main: Option<(&ListingTotals, f64)>, fingerprint: &[u8]) -> Result<WriteStats, StoreError> {
        self.flush()?;
        if let Some((totals, modified)) = main {
            super::totals::save(&self.tx, self.conversation_id, totals, modified)?;
        }
        self.tx.execute(
            "UPDATE conversations SET fingerprint = ?2, deleted_at = NULL, archived_at = NULL, imported_at = ?3 WHERE id = ?1",
            params![self.conversation_id, fingerprint, super::sql::now_utc()],
        )?;
        self.tx.commit()?;
        Ok(self.stats)
    }

    /// Reports a problem with a whole file (shown without a line number).
    pub fn warn_file(&mut self, path: &str, reason: String) {
        self.warn(path, -1, reason);
    }

    fn warn(&mut self, path: &str, line_no: i64, reason: String) {
        if self.stats.warnings.len() < MAX_WARNINGS {
            self.stats.warnings.push(LineWarning { path: path.to_owned(), line: (line_no + 1) as u64, reason });
        } else {
            self.stats.more_warnings += 1;
        }
    }

    /// Whether a message row with this digest was already written (or waits to be) for this
    /// conversation (the caller may then skip decoding the line).
    pub fn knows(&self, digest: &LineDigest) -> bool {
        self.message_ids.contains_key(digest) || self.pending.digests.contains(digest)
    }

    /// Adds line `line_no` of a branch, view or lossless document. `decoded` may be `None` only
    /// when [`Self::knows`] the digest. Its rows wait to be sent with others ([`Self::flush`]).
    pub fn add_message_line(
        &mut self,
        document: DocumentId,
        path: &str,
        line_no: i64,
        digest: &LineDigest,
        line: &[u8],
        decoded: Option<&DecodedLine>,
    ) -> Result<(), StoreError> {
        self.stats.bytes += line.len() as u64 + 1;
        if !self.pending.digests.contains(digest) && self.stored_message(digest)?.is_none() {
            let owned;
            let decoded = match decoded {
                Some(d) => d,
                None => {
                    owned = crate::codec::message_line::decode_line(line);
                    &owned
                }
            };
            let row = match &decoded.content {
                LineContent::Message(m) => {
                    self.count_message(digest);
                    PendingRow::Message { message: m.clone(), raw: (!decoded.canonical).then(|| line.to_vec()) }
                }
                LineContent::Blank => PendingRow::Other { line: line.to_vec(), malformed: None },
                LineContent::Malformed(reason) => {
                    self.warn(path, line_no, reason.clone());
                    PendingRow::Other { line: line.to_vec(), malformed: Some(reason.clone()) }
                }
            };
            self.pending.bytes += line.len();
            self.pending.digests.insert(*digest);
            self.pending.rows.push((*digest, row));
        }
        self.pending.lines.push((document.0, line_no, *digest));
        if self.pending.lines.len() >= PENDING_LINES || self.pending.bytes >= PENDING_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn count_message(&mut self, digest: &LineDigest) {
        self.stats.messages += 1;
        if self.resumed || !self.previous_messages.contains(digest) {
            self.stats.new_messages += 1;
        }
    }

    fn insert_message(&mut self, digest: &LineDigest, m: &Message, raw: Option<&[u8]>) -> Result<i64, StoreError> {
        self.count_message(digest);
        rows::insert_message(&self.tx, self.conversation_id, self.source_id, digest, m, raw)
    }

    /// Adds line `line_no` of an event log, at once (event logs are rare, and short). For a
    /// canonical event carrying messages, `nested_digests` are the digests of those messages'
    /// encodings, in order.
    pub fn add_event_line(
        &mut self,
        document: DocumentId,
        path: &str,
        line_no: i64,
        line: &[u8],
        decoded: &EventLine,
        nested_digests: &[LineDigest],
    ) -> Result<(), StoreError> {
        // Its messages are written a row at a time, found among the lines' own: those first.
        self.flush()?;
        self.stats.bytes += line.len() as u64 + 1;
        let insert = "INSERT INTO events (document_id, line_no, seq, ts, type, payload_form, payload, raw, malformed)
                      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
        match decoded {
            EventLine::Event { event, canonical } => {
                self.stats.events += 1;
                let raw = (!canonical).then_some(line);
                let (form, payload) = match (&event.payload, canonical) {
                    (_, false) => (None, None),
                    (Payload::Message(_), true) => (Some("message"), None),
                    (Payload::Messages(_), true) => (Some("messages"), None),
                    (Payload::Other(json), true) => (Some("json"), Some(json::dump(json))),
                };
                self.tx.prepare_cached(insert)?.execute(params![document.0, line_no, event.seq, event.ts, event.kind, form, payload, raw, None::<String>])?;
                if *canonical {
                    for (position, (message, digest)) in event.payload.messages().iter().zip(nested_digests).enumerate() {
                        let message_id = match self.stored_message(digest)? {
                            Some(id) => id,
                            None => {
                                let id = self.insert_message(digest, message, None)?;
                                self.message_ids.insert(*digest, id);
                                id
                            }
                        };
                        self.tx
                            .prepare_cached("INSERT INTO event_messages (document_id, line_no, position, message_id) VALUES (?1, ?2, ?3, ?4)")?
                            .execute(params![document.0, line_no, position as i64, message_id])?;
                    }
                }
            }
            EventLine::Blank | EventLine::Malformed(_) => {
                let reason = match decoded {
                    EventLine::Malformed(reason) => {
                        self.warn(path, line_no, reason.clone());
                        Some(reason.clone())
                    }
                    _ => None,
                };
                self.tx.prepare_cached(insert)?.execute(params![
                    document.0,
                    line_no,
                    None::<i64>,
                    None::<String>,
                    None::<String>,
                    None::<String>,
                    None::<String>,
                    line,
                    reason
                ])?;
            }
        }
        Ok(())
    }

    /// Adds line `line_no` of `conv-checkpoints.jsonl`.
    pub fn add_bookmark_line(&mut self, document: DocumentId, path: &str, line_no: i64, line: &[u8], decoded: &BookmarkLine) -> Result<(), StoreError> {
        self.stats.bytes += line.len() as u64 + 1;
        let insert = "INSERT INTO conv_checkpoints (document_id, line_no, idx, label, timestamp, raw) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
        match decoded {
            BookmarkLine::Bookmark { bookmark, canonical } => {
                let raw = (!canonical).then_some(line);
                self.tx.prepare_cached(insert)?.execute(params![document.0, line_no, bookmark.index, bookmark.label, bookmark.timestamp, raw])?;
            }
            other => {
                if let BookmarkLine::Malformed(reason) = other {
                    self.warn(path, line_no, reason.clone());
                }
                self.tx.prepare_cached(insert)?.execute(params![document.0, line_no, None::<i64>, None::<String>, None::<String>, line])?;
            }
        }
        Ok(())
    }

    /// Writes the listing totals and releases the savepoint (the batch commits it).
    /// `modified` is the mtime of conversation.jsonl; `branch_count` is gptme's: 1 plus the
    /// number of `branches/*.jsonl` entries.
    /// `complete` is false when not everything the fingerprint describes was read (a line left
    /// for later): the fingerprint is then cleared, so that the directory is looked at again.
    pub fn finish(mut self, totals: &ListingTotals, modified: f64, branch_count: i64, complete: bool) -> Result<WriteStats, StoreError> {
        self.flush()?;
        super::totals::save(&self.tx, self.conversation_id, totals, modified)?;
        if !complete {
            self.tx.execute("UPDATE conversations SET fingerprint = ?2 WHERE id = ?1", params![self.conversation_id, &b""[..]])?;
        }
        self.tx.execute("UPDATE conversations SET branch_count = ?2 WHERE id = ?1", params![self.conversation_id, branch_count])?;
        // Blobs are shared by content across conversations: one goes when nothing refers to it.
        for sha in &self.previous_blobs {
            super::blobs::remove_if_unreferenced(&self.tx, sha)?;
        }
        self.tx.commit()?;
        Ok(self.stats)
    }
}
