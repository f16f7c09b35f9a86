//! Writing one whole conversation into the store.
//!
//! A [`ConversationWriter`] holds a `BEGIN IMMEDIATE` transaction from [`ConversationWriter::begin`]
//! to [`ConversationWriter::finish`]: the previous copy of the conversation (if any) is deleted
//! and the new one inserted inside it, so a failure or a crash at any point leaves the store with
//! the old copy, complete. Lines are streamed: memory is bounded by the longest line plus one
//! 32-byte key per distinct message of the conversation.

use std::collections::HashMap;
use std::io::{BufRead, Read, Seek, SeekFrom};

use rusqlite::{params, Transaction, TransactionBehavior};
use sha2::{Digest, Sha256};

use super::totals::ListingTotals;
use super::StoreError;
use crate::codec::config::ChatConfig;
use crate::codec::conv_checkpoints::{decode_checkpoint_line, CheckpointLine};
use crate::codec::events::{decode_event_line, EventLine, Payload};
use crate::codec::json::{self, Json};
use crate::codec::lines::LineReader;
use crate::codec::message_line::{decode_line, encode_message, LineContent};
use crate::model::Message;

/// What kind of JSONL document a file is; see the `documents` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    Branch,
    View,
    Lossless,
    Events,
    ConvCheckpoints,
}

impl DocumentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Branch => "branch",
            DocumentKind::View => "view",
            DocumentKind::Lossless => "lossless",
            DocumentKind::Events => "events",
            DocumentKind::ConvCheckpoints => "conv_checkpoints",
        }
    }

    pub fn parse(s: &str) -> Option<DocumentKind> {
        Some(match s {
            "branch" => DocumentKind::Branch,
            "view" => DocumentKind::View,
            "lossless" => DocumentKind::Lossless,
            "events" => DocumentKind::Events,
            "conv_checkpoints" => DocumentKind::ConvCheckpoints,
            _ => return None,
        })
    }
}

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
    pub branches: u64,
    pub views: u64,
    pub events: u64,
    pub attachments: u64,
    pub bytes: u64,
    pub warnings: Vec<LineWarning>,
    /// Warnings beyond the ones kept in `warnings`.
    pub more_warnings: u64,
}

/// At most this many warnings are kept per conversation; the rest are only counted.
const MAX_WARNINGS: usize = 100;

/// Files up to this size are hashed and stored from memory; larger ones are streamed twice
/// (once to hash, once into an incremental blob) so memory stays bounded.
const IN_MEMORY_BLOB: u64 = 8 << 20;

pub struct ConversationWriter<'c> {
    tx: Transaction<'c>,
    conversation_id: i64,
    message_ids: HashMap<[u8; 32], i64>,
    totals: ListingTotals,
    modified: Option<f64>,
    stats: WriteStats,
}

/// Modification time of an entry in nanoseconds → epoch seconds, as Python's `st_mtime`.
pub fn mtime_seconds(mtime_ns: i64) -> f64 {
    mtime_ns as f64 / 1e9
}

impl<'c> ConversationWriter<'c> {
    /// Starts replacing `chat_id` in the store. Takes the write lock at once.
    pub fn begin(
        conn: &'c mut rusqlite::Connection,
        chat_id: &str,
        source_dir: &str,
        fingerprint: &[u8],
    ) -> Result<Self, StoreError> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM conversations WHERE chat_id = ?1", [chat_id])?;
        tx.execute(
            "INSERT INTO conversations (chat_id, source_dir, fingerprint, imported_at, created, modified)
             VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 0, 0)",
            params![chat_id, source_dir, fingerprint],
        )?;
        let conversation_id = tx.last_insert_rowid();
        Ok(ConversationWriter {
            tx,
            conversation_id,
            message_ids: HashMap::new(),
            totals: ListingTotals::default(),
            modified: None,
            stats: WriteStats::default(),
        })
    }

    fn entry(&self, path: &str, kind: &str, mode: u32, mtime_ns: i64, blob: Option<&[u8]>, link: Option<&[u8]>) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, blob_sha256, link_target)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![self.conversation_id, path, kind, mode, mtime_ns, blob, link])?;
        Ok(())
    }

    pub fn add_dir(&mut self, path: &str, mode: u32, mtime_ns: i64) -> Result<(), StoreError> {
        self.entry(path, "dir", mode, mtime_ns, None, None)
    }

    pub fn add_symlink(&mut self, path: &str, mode: u32, mtime_ns: i64, target: &[u8]) -> Result<(), StoreError> {
        self.entry(path, "symlink", mode, mtime_ns, None, Some(target))
    }

    /// Stores a regular file as an opaque, content-addressed blob.
    pub fn add_blob<F: Read + Seek>(&mut self, path: &str, mode: u32, mtime_ns: i64, file: &mut F, size: u64) -> Result<(), StoreError> {
        let io = |source| StoreError::Io { path: path.to_owned(), source };
        let sha = if size <= IN_MEMORY_BLOB {
            let mut data = Vec::with_capacity(size as usize);
            file.read_to_end(&mut data).map_err(io)?;
            let sha: [u8; 32] = Sha256::digest(&data).into();
            self.tx
                .prepare_cached("INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?1, ?2, ?3)")?
                .execute(params![&sha[..], data.len() as i64, data])?;
            sha
        } else {
            let mut hasher = Sha256::new();
            let copied = std::io::copy(file, &mut hasher).map_err(io)?;
            let sha: [u8; 32] = hasher.finalize().into();
            let inserted = self
                .tx
                .prepare_cached("INSERT OR IGNORE INTO blobs (sha256, size, data) VALUES (?1, ?2, zeroblob(?2))")?
                .execute(params![&sha[..], copied as i64])?;
            if inserted == 1 {
                let rowid = self.tx.last_insert_rowid();
                let mut blob = self.tx.blob_open(rusqlite::MAIN_DB, "blobs", "data", rowid, false)?;
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                let written = std::io::copy(&mut file.take(copied), &mut blob).map_err(io)?;
                if written != copied {
                    return Err(io(std::io::Error::other("file changed size while it was being read")));
                }
            }
            sha
        };
        if path.starts_with("files/") {
            self.stats.attachments += 1;
        }
        self.stats.bytes += size;
        self.entry(path, "blob", mode, mtime_ns, Some(&sha), None)
    }

    /// Records the parsed `[chat]` fields of config.toml.
    pub fn set_config(&mut self, config: &ChatConfig) -> Result<(), StoreError> {
        self.tx.execute(
            "UPDATE conversations SET name = ?2, config_model = ?3, workspace = ?4 WHERE id = ?1",
            params![self.conversation_id, config.name, config.model, config.workspace],
        )?;
        Ok(())
    }

    /// Streams a JSONL document into its rows.
    pub fn add_document<R: BufRead>(
        &mut self,
        path: &str,
        kind: DocumentKind,
        name: &str,
        mode: u32,
        mtime_ns: i64,
        reader: R,
    ) -> Result<(), StoreError> {
        self.entry(path, "document", mode, mtime_ns, None, None)?;
        self.tx
            .prepare_cached(
                "INSERT INTO documents (conversation_id, path, kind, name, ends_with_newline, line_count)
                 VALUES (?1, ?2, ?3, ?4, 1, 0)",
            )?
            .execute(params![self.conversation_id, path, kind.as_str(), name])?;
        let document_id = self.tx.last_insert_rowid();
        let is_main = kind == DocumentKind::Branch && name == "main";
        if is_main {
            self.modified = Some(mtime_seconds(mtime_ns));
        }
        match kind {
            DocumentKind::Branch => self.stats.branches += 1,
            DocumentKind::View => self.stats.views += 1,
            _ => {}
        }
        let mut lines = LineReader::new(reader);
        let mut line_no: i64 = 0;
        loop {
            let line = match lines.next_line() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(source) => return Err(StoreError::Io { path: path.to_owned(), source }),
            };
            self.stats.bytes += line.len() as u64 + 1;
            let line = line.to_vec();
            match kind {
                DocumentKind::Branch | DocumentKind::View | DocumentKind::Lossless => {
                    if is_main {
                        self.totals.feed(&line);
                    }
                    let message_id = self.message_line(path, line_no, &line)?;
                    self.tx
                        .prepare_cached("INSERT INTO document_lines (document_id, line_no, message_id) VALUES (?1, ?2, ?3)")?
                        .execute(params![document_id, line_no, message_id])?;
                }
                DocumentKind::Events => self.event_line(document_id, path, line_no, &line)?,
                DocumentKind::ConvCheckpoints => self.checkpoint_line(document_id, path, line_no, &line)?,
            }
            line_no += 1;
        }
        self.tx.execute(
            "UPDATE documents SET ends_with_newline = ?2, line_count = ?3 WHERE id = ?1",
            params![document_id, lines.ends_with_newline(), line_no],
        )?;
        Ok(())
    }

    /// Reports a problem with a whole file (line 0), e.g. a config.toml that is not TOML.
    pub fn warn_file(&mut self, path: &str, reason: String) {
        self.warn(path, -1, reason);
    }

    /// Records gptme's default workspace for a conversation without config.toml.
    pub fn set_workspace(&mut self, workspace: &str) -> Result<(), StoreError> {
        self.tx.execute("UPDATE conversations SET workspace = ?2 WHERE id = ?1", params![self.conversation_id, workspace])?;
        Ok(())
    }

    fn warn(&mut self, path: &str, line_no: i64, reason: String) {
        if self.stats.warnings.len() < MAX_WARNINGS {
            self.stats.warnings.push(LineWarning { path: path.to_owned(), line: line_no as u64 + 1, reason });
        } else {
            self.stats.more_warnings += 1;
        }
    }

    /// The id of the message row for this line's bytes, inserting it when new.
    fn message_line(&mut self, path: &str, line_no: i64, line: &[u8]) -> Result<i64, StoreError> {
        let sha: [u8; 32] = Sha256::digest(line).into();
        if let Some(&id) = self.message_ids.get(&sha) {
            return Ok(id);
        }
        let decoded = decode_line(line);
        let id = match decoded.content {
            LineContent::Message(m) => {
                let raw = (!decoded.canonical).then_some(line);
                self.insert_message(&sha, &m, raw)?
            }
            LineContent::Blank => self.insert_non_message(&sha, line, None)?,
            LineContent::Malformed(reason) => {
                self.warn(path, line_no, reason.clone());
                self.insert_non_message(&sha, line, Some(&reason))?
            }
        };
        self.message_ids.insert(sha, id);
        Ok(id)
    }

    /// The id of the row for a message nested in an event payload (its bytes are its encoding).
    fn nested_message(&mut self, message: &Message) -> Result<i64, StoreError> {
        let line = encode_message(message);
        let sha: [u8; 32] = Sha256::digest(line.as_bytes()).into();
        if let Some(&id) = self.message_ids.get(&sha) {
            return Ok(id);
        }
        let id = self.insert_message(&sha, message, None)?;
        self.message_ids.insert(sha, id);
        Ok(id)
    }

    fn insert_message(&mut self, sha: &[u8; 32], m: &Message, raw: Option<&[u8]>) -> Result<i64, StoreError> {
        let files = (!m.files.is_empty())
            .then(|| json::dump(&Json::Array(m.files.iter().cloned().map(Json::Str).collect())));
        let file_hashes = (!m.file_hashes.is_empty()).then(|| {
            json::dump(&Json::Object(m.file_hashes.iter().map(|(p, h)| (p.clone(), Json::Str(h.clone()))).collect()))
        });
        let metadata = m.metadata.as_ref().map(json::dump);
        let extra = (!m.extra.is_empty()).then(|| json::dump(&Json::Object(m.extra.clone())));
        let usage = m.usage();
        self.tx
            .prepare_cached(
                "INSERT INTO messages (conversation_id, line_sha256, role, content, timestamp, files, file_hashes,
                    call_id, pinned, hide, ui_only, ephemeral_ttl, metadata, extra, raw,
                    model, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
            )?
            .execute(params![
                self.conversation_id,
                &sha[..],
                m.role.as_str(),
                m.content,
                m.timestamp,
                files,
                file_hashes,
                m.call_id,
                m.pinned,
                m.hide,
                m.ui_only,
                m.ephemeral_ttl,
                metadata,
                extra,
                raw,
                m.model(),
                Some(usage.cost).filter(|c| c.is_finite()),
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_creation_tokens,
            ])?;
        self.stats.messages += 1;
        Ok(self.tx.last_insert_rowid())
    }

    fn insert_non_message(&mut self, sha: &[u8; 32], line: &[u8], malformed: Option<&str>) -> Result<i64, StoreError> {
        self.tx
            .prepare_cached("INSERT INTO messages (conversation_id, line_sha256, raw, malformed) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![self.conversation_id, &sha[..], line, malformed])?;
        Ok(self.tx.last_insert_rowid())
    }

    fn event_line(&mut self, document_id: i64, path: &str, line_no: i64, line: &[u8]) -> Result<(), StoreError> {
        let insert = "INSERT INTO events (document_id, line_no, seq, ts, type, payload_form, payload, raw, malformed)
                      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
        match decode_event_line(line) {
            EventLine::Event { event, canonical } => {
                self.stats.events += 1;
                let raw = (!canonical).then_some(line);
                let (form, payload) = match (&event.payload, canonical) {
                    (_, false) => (None, None),
                    (Payload::Message(_), true) => (Some("message"), None),
                    (Payload::Messages(_), true) => (Some("messages"), None),
                    (Payload::Other(json), true) => (Some("json"), Some(json::dump(json))),
                };
                self.tx.prepare_cached(insert)?.execute(params![
                    document_id, line_no, event.seq, event.ts, event.kind, form, payload, raw, None::<String>
                ])?;
                if canonical {
                    let nested: Vec<&Message> = match &event.payload {
                        Payload::Message(m) => vec![m],
                        Payload::Messages(ms) => ms.iter().collect(),
                        Payload::Other(_) => vec![],
                    };
                    for (position, message) in nested.into_iter().enumerate() {
                        let message_id = self.nested_message(message)?;
                        self.tx
                            .prepare_cached(
                                "INSERT INTO event_messages (document_id, line_no, position, message_id) VALUES (?1, ?2, ?3, ?4)",
                            )?
                            .execute(params![document_id, line_no, position as i64, message_id])?;
                    }
                }
            }
            EventLine::Blank => {
                self.tx.prepare_cached(insert)?.execute(params![
                    document_id, line_no, None::<i64>, None::<String>, None::<String>, None::<String>, None::<String>, line, None::<String>
                ])?;
            }
            EventLine::Malformed(reason) => {
                self.warn(path, line_no, reason.clone());
                self.tx.prepare_cached(insert)?.execute(params![
                    document_id, line_no, None::<i64>, None::<String>, None::<String>, None::<String>, None::<String>, line, reason
                ])?;
            }
        }
        Ok(())
    }

    fn checkpoint_line(&mut self, document_id: i64, path: &str, line_no: i64, line: &[u8]) -> Result<(), StoreError> {
        let insert = "INSERT INTO conv_checkpoints (document_id, line_no, idx, label, timestamp, raw) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
        match decode_checkpoint_line(line) {
            CheckpointLine::Checkpoint { checkpoint, canonical } => {
                let raw = (!canonical).then_some(line);
                self.tx.prepare_cached(insert)?.execute(params![
                    document_id, line_no, checkpoint.index, checkpoint.label, checkpoint.timestamp, raw
                ])?;
            }
            other => {
                if let CheckpointLine::Malformed(reason) = other {
                    self.warn(path, line_no, reason);
                }
                self.tx.prepare_cached(insert)?.execute(params![
                    document_id, line_no, None::<i64>, None::<String>, None::<String>, line
                ])?;
            }
        }
        Ok(())
    }

    /// Writes the listing totals and commits. `branch_count` is gptme's: 1 plus the number of
    /// `branches/*.jsonl` entries.
    pub fn finish(self, branch_count: i64) -> Result<WriteStats, StoreError> {
        let modified = self.modified.unwrap_or(0.0);
        let t = &self.totals;
        let (last_role, last_preview) = t.last_message();
        self.tx.execute(
            "UPDATE conversations SET created = ?2, modified = ?3, message_count = ?4, branch_count = ?5,
                model = ?6, total_cost = ?7, input_tokens = ?8, output_tokens = ?9, cache_read_tokens = ?10,
                cache_creation_tokens = ?11, models_usage = ?12, last_role = ?13, last_preview = ?14
             WHERE id = ?1",
            params![
                self.conversation_id,
                t.created(modified),
                modified,
                t.message_count,
                branch_count,
                t.model,
                Some(t.total_cost).filter(|c| c.is_finite()),
                t.input_tokens,
                t.output_tokens,
                t.cache_read_tokens,
                t.cache_creation_tokens,
                t.models_usage_json(),
                last_role,
                last_preview,
            ],
        )?;
        self.tx.commit()?;
        Ok(self.stats)
    }
}
