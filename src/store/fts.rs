//! Keeping the full-text index in step with the messages table.
//!
//! Invariant (see `schema/0001_init.sql`): every message with an id at or below the watermark
//! `store_state['fts_indexed_upto']` is in `messages_fts`, and no later one is. Writers call
//! [`index_pending`] inside their transaction, just before committing, so that at every commit
//! the index covers every message; the watermark moves in that same transaction, so a crash
//! can never leave rows indexed twice or not at all.

use rusqlite::Connection;

use super::StoreError;

/// Indexes every message row added since the watermark, in one statement (one FTS5 flush), and
/// advances the watermark. Rows without content (blank and damaged lines) are indexed as empty
/// documents, so the index and the table hold the same rows, as FTS5's own integrity check
/// expects of an external-content index. Call inside a write transaction, before it commits.
pub fn index_pending(conn: &Connection) -> Result<u64, StoreError> {
    let upto: i64 = conn.prepare_cached("SELECT value FROM store_state WHERE key = 'fts_indexed_upto'")?.query_row([], |r| r.get(0))?;
    let indexed = conn.prepare_cached("INSERT INTO messages_fts (rowid, content) SELECT id, content FROM messages WHERE id > ?1")?.execute([upto])?;
    conn.prepare_cached("UPDATE store_state SET value = (SELECT max(?1, coalesce(max(id), 0)) FROM messages) WHERE key = 'fts_indexed_upto'")?
        .execute([upto])?;
    Ok(indexed as u64)
}
