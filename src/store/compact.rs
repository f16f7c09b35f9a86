//! `sessiondb compact`: gives the store's free pages back to the file system, while other
//! processes read and write.
//!
//! On SQLite, pages freed by what was removed (conversations deleted, texts no longer held,
//! rows rewritten by a migration) stay in the file for later writes. A store in SQLite's
//! incremental mode (`auto_vacuum = INCREMENTAL`) gives them back in steps of
//! [`STEP_PAGES`] pages, each its own short write transaction: writers go on between steps,
//! readers are not held up. A store in another mode is rewritten once (`VACUUM`), switched to the
//! incremental mode on the way, so that every later compact works in steps; that one rewrite
//! keeps writers waiting for its length (they wait up to the busy timeout, [`super::BUSY_TIMEOUT_MS`]), and readers
//! go on. The write-ahead log is then emptied when no reader needs it ([`Store::flush_wal`]).
//! On a server, `VACUUM (ANALYZE)` of sessiondb's tables marks their dead rows' space for reuse
//! and refreshes the planner's statistics; it holds no one up, and the server keeps the space
//! in its files (only `VACUUM FULL`, which locks each table, gives it back).
//!
//! Invariant: compacting changes where pages lie, never what any row holds: every answer, and
//! every byte `export` writes, is the same after it.

use std::time::Instant;

use super::disk::{self, Part};
use super::sql::Engine;
use super::{Store, StoreError};

/// Pages given back by one step of an incremental compact (8 MiB of 8 KiB pages).
pub const STEP_PAGES: i64 = 1024;

/// SQLite's `auto_vacuum` value of the incremental mode.
const INCREMENTAL: i64 = 2;

/// Why a compact stopped (what it gave back until then stays given back).
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(
        "another process held the store's write lock for {} s: the compact stopped there (free pages given back before it stay given back, nothing else changed); run `sessiondb compact` again later",
        super::BUSY_TIMEOUT_MS / 1000
    )]
    Busy,
    #[error("the store could not be compacted")]
    Store(#[from] StoreError),
}

/// What a compact did.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactReport {
    /// The store's footprint before and after, all parts ([`disk::DiskUse::total`]).
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Free pages before and after, in bytes (always 0 on a server, which does not say).
    pub free_before: u64,
    pub free_after: u64,
    /// The file was rewritten whole (the first compact of a store not in incremental mode).
    pub rewritten: bool,
    /// Incremental steps taken.
    pub steps: u64,
    pub seconds: f64,
}

/// Compacts `store` (see the module's doc).
pub fn compact(store: &Store) -> Result<CompactReport, CompactError> {
    let started = Instant::now();
    let before = disk::disk_use(store)?;
    let conn = store.connection()?;
    let (rewritten, steps) = match conn.engine() {
        Engine::Sqlite => {
            let sql = conn.sqlite().expect("an SQLite connection");
            let mode: i64 = sql.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map_err(StoreError::from)?;
            if mode == INCREMENTAL {
                (false, in_steps(sql)?)
            } else {
                // The mode can only change with a rewrite: set, then taken by the VACUUM.
                busy_is(sql.execute_batch("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;"))?;
                (true, 0)
            }
        }
        Engine::Postgres => {
            // The names are sessiondb's own ([`disk::part_of`]): plain identifiers.
            for (table, _) in disk::server_tables(&conn)? {
                conn.execute_batch(&format!("VACUUM (ANALYZE) {table}")).map_err(StoreError::from)?;
            }
            (false, 0)
        }
    };
    drop(conn);
    store.flush_wal()?;
    let after = disk::disk_use(store)?;
    Ok(CompactReport {
        bytes_before: before.total(),
        bytes_after: after.total(),
        free_before: before.bytes(Part::Free),
        free_after: after.bytes(Part::Free),
        rewritten,
        steps,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Gives the free pages back [`STEP_PAGES`] at a time, each step its own write transaction;
/// returns how many steps it took.
fn in_steps(sql: &rusqlite::Connection) -> Result<u64, CompactError> {
    let mut steps = 0;
    loop {
        let free: i64 = sql.query_row("PRAGMA freelist_count", [], |r| r.get(0)).map_err(StoreError::from)?;
        if free == 0 {
            return Ok(steps);
        }
        busy_is(sql.execute_batch("BEGIN IMMEDIATE"))?;
        // The pragma gives back a page each time it is stepped: run to its end.
        let step = || -> rusqlite::Result<()> {
            let mut stmt = sql.prepare_cached(&format!("PRAGMA incremental_vacuum({STEP_PAGES})"))?;
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            drop(rows);
            sql.execute_batch("COMMIT")
        };
        busy_is(step()).inspect_err(|_| {
            let _ = sql.execute_batch("ROLLBACK");
        })?;
        steps += 1;
    }
}

/// SQLite's answer, with a lock not had in the busy timeout as [`CompactError::Busy`].
fn busy_is(done: rusqlite::Result<()>) -> Result<(), CompactError> {
    match done {
        Err(rusqlite::Error::SqliteFailure(e, _)) if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            Err(CompactError::Busy)
        }
        other => Ok(other.map_err(StoreError::from)?),
    }
}
