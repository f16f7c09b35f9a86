//! The queue of changes made in the store only (operations run with `--queue`): the
//! `pending_paths` table, and nothing else.
//!
//! A conversation has changes queued exactly when it has rows here; each row is one path and
//! what the directory held of it when the store last agreed with it (its base). The queue is
//! filled in the transaction of the queued operation and emptied in the transaction that
//! writes it out (`sync::pending`), so a reader inside a write transaction sees either all of a
//! queue or none of it. Whoever decides something from [`has_pending`] must ask inside the
//! write transaction that acts on the answer.

use std::collections::HashMap;

use super::sql::params;

use super::{Connection, StoreError};

/// Whether conversation `conversation_id` has changes queued for its directory.
pub fn has_pending(conn: &Connection, conversation_id: i64) -> Result<bool, StoreError> {
    Ok(conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM pending_paths WHERE conversation_id = ?1)")?.query_row([conversation_id], |r| r.get(0))?)
}

/// One queued path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPath {
    pub path: String,
    /// The size and mtime the directory's copy had when queued; `None` when it had none.
    pub base: Option<(u64, i64)>,
}

/// The queued paths of a conversation, in path order.
pub fn pending_paths(conn: &Connection, conversation_id: i64) -> Result<Vec<PendingPath>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT path, base_size, base_mtime_ns FROM pending_paths WHERE conversation_id = ?1 ORDER BY path")?;
    let rows = stmt.query_map([conversation_id], |r| {
        let size: Option<i64> = r.get(1)?;
        let mtime: Option<i64> = r.get(2)?;
        Ok(PendingPath { path: r.get(0)?, base: size.zip(mtime).map(|(s, m)| (s as u64, m)) })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records that the operation just run on a copy of conversation `conversation_id` changed
/// `paths` in the store only. `bases` is what the store held of each path before (size and
/// mtime of what it read from the directory); a path already queued keeps its first base.
pub fn queue_paths(conn: &Connection, conversation_id: i64, paths: &[String], bases: &HashMap<String, (Option<u64>, i64)>) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached("INSERT OR IGNORE INTO pending_paths (conversation_id, path, base_size, base_mtime_ns) VALUES (?1, ?2, ?3, ?4)")?;
    for path in paths {
        let base = bases.get(path);
        let size = base.and_then(|(s, _)| s.map(|s| s as i64));
        let mtime = base.map(|(_, m)| *m);
        // A directory (size NULL) counts as present: only its absence matters.
        stmt.execute(params![conversation_id, path, size.or(mtime.map(|_| 0)), mtime])?;
    }
    Ok(())
}

/// Empties a conversation's queue: call in the transaction that wrote it out.
pub fn clear(conn: &Connection, conversation_id: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM pending_paths WHERE conversation_id = ?1")?.execute([conversation_id])?;
    Ok(())
}
