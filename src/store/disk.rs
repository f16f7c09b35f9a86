//! What the store takes on disk, by part and by source, beside the bytes of the logs it holds.
//!
//! Invariants: on SQLite the parts add up to the store's whole footprint (the database file,
//! its write-ahead log and shared-memory index, the ranking index's directory): each page of
//! the database is counted once, in the part of the table it belongs to (SQLite's `dbstat`),
//! in free pages, or in `other` (the file's header page, SQLite's own pages), wherever it lies
//! (in the file, or in the log until a checkpoint copies it there), and the log's part is what
//! remains of the log. On a server the parts are sessiondb's own tables, each with its indexes
//! and out-of-line values (`pg_total_relation_size`); another program's tables in the same
//! database are not counted. A table is put in a part by its name alone ([`part_of`]), one rule
//! for both engines.
//!
//! "The logs" are the bytes of the files the store holds, as `export` writes them back (every
//! `conversation.jsonl`, branch, view, attachment and `config.toml`): what the store replaces,
//! whether or not gptme's logs root still has them.

use std::path::Path;

use super::sql::Engine;
use super::{Connection, Store, StoreError};

/// A part of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Conversations, messages (without their text), branches, views, events, files' entries.
    Rows,
    /// The messages' texts, each kept once per source, compressed, with their dictionaries.
    Texts,
    /// The bytes of attachments and other opaque files, each kept once.
    Attachments,
    /// SQLite's word index (FTS5).
    WordIndex,
    /// SQLite's substring index (FTS5 trigrams), for literal search.
    SubstringIndex,
    /// The ranking index (tantivy, beside the database) and its log of deletions.
    RankingIndex,
    /// A server's word and trigram sets (its search index).
    SearchSets,
    /// Pages SQLite keeps for later writes: `sessiondb compact` gives them back.
    Free,
    /// SQLite's write-ahead log and its shared-memory index.
    Log,
    /// SQLite's own pages (the header, the schema).
    Other,
}

impl Part {
    /// Every part, in the order they are shown.
    pub const ALL: [Part; 10] = [
        Part::Rows,
        Part::Texts,
        Part::Attachments,
        Part::WordIndex,
        Part::SubstringIndex,
        Part::RankingIndex,
        Part::SearchSets,
        Part::Free,
        Part::Log,
        Part::Other,
    ];

    /// The part's key in JSON.
    pub fn key(self) -> &'static str {
        match self {
            Part::Rows => "rows",
            Part::Texts => "texts",
            Part::Attachments => "attachments",
            Part::WordIndex => "word_index",
            Part::SubstringIndex => "substring_index",
            Part::RankingIndex => "ranking_index",
            Part::SearchSets => "search_sets",
            Part::Free => "free",
            Part::Log => "write_ahead_log",
            Part::Other => "other",
        }
    }

    /// The part as people read it.
    pub fn label(self) -> &'static str {
        match self {
            Part::Rows => "conversations and messages",
            Part::Texts => "message texts",
            Part::Attachments => "attachments",
            Part::WordIndex => "word index",
            Part::SubstringIndex => "substring index",
            Part::RankingIndex => "ranking index",
            Part::SearchSets => "search sets",
            Part::Free => "free pages",
            Part::Log => "write-ahead log",
            Part::Other => "other",
        }
    }
}

/// The part sessiondb's table `table` belongs to; `None` for a table that is not sessiondb's
/// (SQLite's own `sqlite_*` tables are counted in [`Part::Other`] by the caller).
pub fn part_of(table: &str) -> Option<Part> {
    const ROWS: [&str; 13] = [
        "conversations",
        "messages",
        "documents",
        "document_lines",
        "events",
        "event_messages",
        "conv_checkpoints",
        "entries",
        "acknowledged_lines",
        "pending_paths",
        "sources",
        "store_state",
        "sessiondb_schema",
    ];
    let part = match table {
        t if ROWS.contains(&t) => Part::Rows,
        "texts" | "texts_let_go" | "text_dictionaries" => Part::Texts,
        "blobs" | "blob_chunks" | "blob_vouchers" => Part::Attachments,
        t if t.starts_with("texts_fts") => Part::WordIndex,
        t if t.starts_with("texts_substring") => Part::SubstringIndex,
        "ranking_deletions" => Part::RankingIndex,
        t if t.starts_with("text_terms") || t.starts_with("message_terms") => Part::SearchSets,
        _ => return None,
    };
    Some(part)
}

/// One source's share.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceUse {
    pub label: String,
    pub root: String,
    pub conversations: u64,
    pub messages: u64,
    /// The bytes of the files of its conversations ([`DiskUse::logs_bytes`]).
    pub logs_bytes: u64,
    /// The stored (compressed) bytes of its texts.
    pub texts_bytes: u64,
    /// The bytes of the attachments its conversations hold; one held by several sources is
    /// counted in each.
    pub attachments_bytes: u64,
}

/// What the store takes, by part and by source.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskUse {
    /// The database file, or the server's URL without its password.
    pub store: String,
    pub engine: Engine,
    /// Bytes by part, every part of [`Part::ALL`] this engine has, in that order.
    pub parts: Vec<(Part, u64)>,
    /// The bytes of every file the store holds, as `export` writes them (see the module's doc).
    pub logs_bytes: u64,
    pub by_source: Vec<SourceUse>,
}

impl DiskUse {
    /// The whole store: its parts added up.
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|(_, b)| b).sum()
    }

    /// The bytes of part `part` (0 when this engine has none).
    pub fn bytes(&self, part: Part) -> u64 {
        self.parts.iter().find(|(p, _)| *p == part).map_or(0, |(_, b)| *b)
    }

    /// The store's size as a share of the logs' (`None` when it holds no file).
    pub fn ratio(&self) -> Option<f64> {
        (self.logs_bytes > 0).then(|| self.total() as f64 / self.logs_bytes as f64)
    }

    pub fn to_json(&self) -> serde_json::Value {
        let parts: serde_json::Map<String, serde_json::Value> = self.parts.iter().map(|(p, b)| (p.key().to_owned(), (*b).into())).collect();
        let sources: Vec<serde_json::Value> = self
            .by_source
            .iter()
            .map(|s| {
                serde_json::json!({
                    "source": s.label,
                    "root": s.root,
                    "conversations": s.conversations,
                    "messages": s.messages,
                    "logs_bytes": s.logs_bytes,
                    "texts_bytes": s.texts_bytes,
                    "attachments_bytes": s.attachments_bytes,
                })
            })
            .collect();
        serde_json::json!({
            "store": self.store,
            "engine": match self.engine { Engine::Sqlite => "sqlite", Engine::Postgres => "postgres" },
            "total_bytes": self.total(),
            "parts": parts,
            "logs_bytes": self.logs_bytes,
            "store_per_logs": self.ratio(),
            "by_source": sources,
        })
    }
}

/// What `store` takes on disk (see the module's doc). Reads every page of an SQLite file once
/// (`dbstat`): about a second for a few gigabytes.
pub fn disk_use(store: &Store) -> Result<DiskUse, StoreError> {
    let conn = store.connection()?;
    let parts = match conn.engine() {
        Engine::Sqlite => sqlite_parts(&conn, store.path())?,
        Engine::Postgres => server_parts(&conn)?,
    };
    let by_source = by_source(&conn)?;
    let logs_bytes = by_source.iter().map(|s| s.logs_bytes).sum();
    Ok(DiskUse { store: Store::shown(store.path()), engine: conn.engine(), parts, logs_bytes, by_source })
}

/// The parts of an SQLite store at `db`, read in one snapshot.
fn sqlite_parts(conn: &Connection, db: &Path) -> Result<Vec<(Part, u64)>, StoreError> {
    let sql = conn.sqlite().expect("an SQLite connection");
    let mut sizes = std::collections::HashMap::<Part, u64>::new();
    let database_bytes = conn.on_one_snapshot(|| -> Result<u64, StoreError> {
        // An index counts with its table (`tbl_name`); SQLite's own b-trees (the schema) and
        // the pages dbstat does not list fall to `Other` below.
        let mut stmt =
            sql.prepare("SELECT coalesce(s.tbl_name, d.name), sum(d.pgsize) FROM dbstat AS d LEFT JOIN sqlite_schema AS s ON s.name = d.name GROUP BY 1")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        for row in rows {
            let (table, bytes) = row?;
            *sizes.entry(part_of(&table).unwrap_or(Part::Other)).or_default() += bytes as u64;
        }
        let (free, pages, page_size): (i64, i64, i64) = sql.query_row(
            "SELECT (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_count FROM pragma_page_count), (SELECT page_size FROM pragma_page_size)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        *sizes.entry(Part::Free).or_default() += (free * page_size) as u64;
        Ok((pages * page_size) as u64)
    })?;
    let counted: u64 = sizes.values().sum();
    *sizes.entry(Part::Other).or_default() += database_bytes.saturating_sub(counted);
    let sidecar = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        std::fs::symlink_metadata(name).map_or(0, |m| m.len())
    };
    // The pages above are the database as SQLite reads it. Those written since the last
    // checkpoint are in the log and not yet in the file: counted in their tables, so the log's
    // part is the rest of it (the log holds each such page at least once, with a frame header).
    // The file may also still hold pages past the database's end, until a checkpoint cuts them.
    let on_disk = std::fs::metadata(db).map_or(0, |m| m.len());
    let log = sidecar("-wal") + sidecar("-shm");
    *sizes.entry(Part::Log).or_default() += log.saturating_sub(database_bytes.saturating_sub(on_disk));
    *sizes.entry(Part::Other).or_default() += on_disk.saturating_sub(database_bytes);
    *sizes.entry(Part::RankingIndex).or_default() += crate::fs::walk::tree_bytes(&super::ranking::dir_for(db));
    Ok(Part::ALL.iter().filter(|p| **p != Part::SearchSets).map(|p| (*p, sizes.get(p).copied().unwrap_or(0))).collect())
}

/// The parts of a server's store: sessiondb's tables in this connection's schema.
fn server_parts(conn: &Connection) -> Result<Vec<(Part, u64)>, StoreError> {
    let mut sizes = std::collections::HashMap::<Part, u64>::new();
    for (table, bytes) in server_tables(conn)? {
        *sizes.entry(part_of(&table).expect("one of sessiondb's tables")).or_default() += bytes;
    }
    let server_has = |p: &Part| !matches!(p, Part::WordIndex | Part::SubstringIndex | Part::RankingIndex | Part::Free | Part::Log | Part::Other);
    Ok(Part::ALL.iter().filter(|p| server_has(p)).map(|p| (*p, sizes.get(p).copied().unwrap_or(0))).collect())
}

/// sessiondb's tables in this connection's schema on a server (those [`part_of`] knows;
/// another program's are left out), by name, each with its bytes: its rows, indexes and
/// out-of-line values.
pub(in crate::store) fn server_tables(conn: &Connection) -> Result<Vec<(String, u64)>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT c.relname::text, pg_total_relation_size(c.oid) FROM pg_class c \
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1",
    )?;
    let tables = stmt.query_map((), |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<Vec<_>, _>>()?;
    Ok(tables.into_iter().filter(|(name, _)| part_of(name).is_some()).map(|(name, bytes)| (name, bytes as u64)).collect())
}

/// Each source this connection may read, with its share.
fn by_source(conn: &Connection) -> Result<Vec<SourceUse>, StoreError> {
    let mut out = Vec::new();
    for source in super::sources::all(conn)? {
        let (conversations, messages): (i64, i64) =
            conn.query_row("SELECT count(*), CAST(coalesce(sum(message_count), 0) AS BIGINT) FROM conversations WHERE source_id = ?1", [source.id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let logs: i64 = conn.query_row(
            "SELECT CAST(coalesce(sum(e.size), 0) AS BIGINT) FROM entries e JOIN conversations c ON c.id = e.conversation_id \
             WHERE c.source_id = ?1 AND e.kind IN ('blob', 'document')",
            [source.id],
            |r| r.get(0),
        )?;
        let texts: i64 = conn.query_row("SELECT CAST(coalesce(sum(length(data)), 0) AS BIGINT) FROM texts WHERE source_id = ?1", [source.id], |r| r.get(0))?;
        let attachments: i64 = conn.query_row(
            "SELECT CAST(coalesce(sum(b.size), 0) AS BIGINT) FROM blobs b WHERE b.sha256 IN \
             (SELECT e.blob_sha256 FROM entries e JOIN conversations c ON c.id = e.conversation_id WHERE c.source_id = ?1 AND e.kind = 'blob')",
            [source.id],
            |r| r.get(0),
        )?;
        out.push(SourceUse {
            label: source.label,
            root: source.root.display().to_string(),
            conversations: conversations as u64,
            messages: messages as u64,
            logs_bytes: logs as u64,
            texts_bytes: texts as u64,
            attachments_bytes: attachments as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store made now: every table it has is in a part, and the parts add up to the files.
    #[test]
    fn every_table_of_a_new_store_has_a_part_and_the_parts_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let store = Store::open(&db).unwrap();
        let conn = store.connection().unwrap();
        let mut stmt = conn.sqlite().unwrap().prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").unwrap();
        let tables: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
        assert!(tables.len() > 20, "{tables:?}");
        for table in tables {
            assert!(part_of(&table).is_some(), "table {table} has no part");
        }
        let used = disk_use(&store).unwrap();
        let file = std::fs::metadata(&db).unwrap().len();
        let wal = std::fs::metadata(dir.path().join("db-wal")).map_or(0, |m| m.len()) + std::fs::metadata(dir.path().join("db-shm")).map_or(0, |m| m.len());
        assert_eq!(used.total(), file + wal + crate::fs::walk::tree_bytes(&super::super::ranking::dir_for(&db)), "{used:?}");
        assert!(used.bytes(Part::Log) <= wal);
        assert_eq!(used.logs_bytes, 0);
        assert_eq!(used.ratio(), None);
    }
}
