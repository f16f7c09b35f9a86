//! Schema migrations, applied in order and recorded in `PRAGMA user_version`.
//!
//! Migration N (1-based) brings a database from version N-1 to N inside one transaction, so a
//! crash leaves the database at a whole version. A migration is its SQL file, and for 25 a
//! pass over the rows in Rust as well (what SQL cannot decide: [`super::metadata_columns`],
//! [`super::timestamps`]), after which the file is rewritten without the pages the rebuilt
//! table left free ([`reclaim`]). A database whose version is newer than this
//! build knows is refused untouched: an older sessiondb must not write rows it cannot read.
//!
//! Migrations run with foreign keys off, so that one may rebuild a table that others refer to
//! (SQLite's procedure for changing a table's constraints: with them on, dropping the old table
//! would cascade into every row that refers to it). Each checks them before it commits: a
//! migration that leaves more dangling references than the database had before it fails and
//! changes nothing (references a damaged database already had are `doctor`'s to report, and
//! do not stop it from being brought up to date).

use rusqlite::Connection;

use super::StoreError;

/// The SQL files in `schema/`, in order. Append only; never edit a released migration.
const MIGRATIONS: &[&str] = &[
    include_str!("../../schema/0001_init.sql"),
    include_str!("../../schema/0002_live_operations.sql"),
    include_str!("../../schema/0003_fts_cjk.sql"),
    include_str!("../../schema/0004_role_counts.sql"),
    include_str!("../../schema/0005_sync.sql"),
    include_str!("../../schema/0006_listing_order.sql"),
    include_str!("../../schema/0007_acknowledged_lines.sql"),
    include_str!("../../schema/0008_blob_chunks_and_prefix_rewrites.sql"),
    include_str!("../../schema/0009_messages_not_rewritten_unchanged.sql"),
    include_str!("../../schema/0010_shared_line_prefixes.sql"),
    include_str!("../../schema/0011_substring_index.sql"),
    include_str!("../../schema/0012_ranking_index.sql"),
    include_str!("../../schema/0013_distinct_trigrams.sql"),
    include_str!("../../schema/0014_sources.sql"),
    include_str!("../../schema/0015_word_index_hashsize.sql"),
    include_str!("../../schema/0016_server_only_search_sets_and_byte_order.sql"),
    include_str!("../../schema/0017_server_only_each_host_writes_its_own.sql"),
    include_str!("../../schema/0018_server_only_writers_of_sources_at_once.sql"),
    include_str!("../../schema/0019_server_only_attachments_are_what_they_say.sql"),
    include_str!("../../schema/0020_server_only_source_names_per_writer.sql"),
    include_str!("../../schema/0021_message_texts.sql"),
    include_str!("../../schema/0022_search_by_text.sql"),
    include_str!("../../schema/0023_messages_by_text_with_conversation.sql"),
    include_str!("../../schema/0024_server_only_texts_found_by_hash.sql"),
    include_str!("../../schema/0025_compact_message_rows.sql"),
    include_str!("../../schema/0026_archived_conversations.sql"),
    include_str!("../../schema/0027_messages_by_line_with_text.sql"),
    include_str!("../../schema/0028_server_only_ranking_index_per_host.sql"),
];

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// The SQL files in `schema/postgres/`, by the version each brings a database to. A server's
/// store starts at version 15 (its first file makes what SQLite's first fifteen made). Versions
/// are one sequence for both engines: a change to both has a file in each, numbered alike; a
/// change to one engine only (16: the server's search indexes; 17: each source's writer; 18:
/// writers of sources at once; 19: attachments checked against their SHA-256; 20: source names
/// and roots per writer; 24: texts found by hash first; 27, SQLite's: a conversation's texts
/// from its index; 28: texts stamped with the transaction that added them, for each host's
/// ranking index) takes the next number, which the other skips. Append only.
#[cfg(feature = "postgres")]
const POSTGRES_MIGRATIONS: &[(i64, &str)] = &[
    (15, include_str!("../../schema/postgres/0015_init.sql")),
    (16, include_str!("../../schema/postgres/0016_search_sets_and_byte_order.sql")),
    (17, include_str!("../../schema/postgres/0017_each_host_writes_its_own.sql")),
    (18, include_str!("../../schema/postgres/0018_writers_of_sources_at_once.sql")),
    (19, include_str!("../../schema/postgres/0019_attachments_are_what_they_say.sql")),
    (20, include_str!("../../schema/postgres/0020_source_names_per_writer.sql")),
    (21, include_str!("../../schema/postgres/0021_message_texts.sql")),
    (22, include_str!("../../schema/postgres/0022_search_by_text.sql")),
    (23, include_str!("../../schema/postgres/0023_messages_by_text_with_conversation.sql")),
    (24, include_str!("../../schema/postgres/0024_texts_found_by_hash.sql")),
    (25, include_str!("../../schema/postgres/0025_compact_message_rows.sql")),
    (26, include_str!("../../schema/postgres/0026_archived_conversations.sql")),
    (27, include_str!("../../schema/postgres/0027_sqlite_only_messages_by_line_with_text.sql")),
    (28, include_str!("../../schema/postgres/0028_ranking_index_per_host.sql")),
];

/// The advisory lock (a key of PostgreSQL's `pg_advisory_lock`) that migrations hold, so
/// that many hosts starting at once against a new or older database migrate it once.
#[cfg(feature = "postgres")]
const MIGRATION_LOCK: i64 = 0x5e55_10db_0001;

/// Brings the database to [`CURRENT_VERSION`], or refuses a newer one.
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_to(conn, CURRENT_VERSION)
}

/// Brings the database to version `target` (at most [`CURRENT_VERSION`]).
fn migrate_to(conn: &mut Connection, target: i64) -> Result<(), StoreError> {
    let version: i64 = conn.query_row("PRAGMA user_version", (), |r| r.get(0))?;
    if version > CURRENT_VERSION {
        return Err(StoreError::NewerSchema { found: version, supported: CURRENT_VERSION });
    }
    if version >= target {
        return Ok(());
    }
    // 0014 names the sources of stored conversations after this host.
    let host = super::sources::hostname();
    conn.create_scalar_function("sessiondb_hostname", 0, rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC, move |_| Ok(host.clone()))?;
    let foreign_keys: bool = conn.query_row("PRAGMA foreign_keys", (), |r| r.get(0))?;
    conn.pragma_update(None, "foreign_keys", false)?;
    let migrated = apply(conn, version, target);
    conn.pragma_update(None, "foreign_keys", foreign_keys)?;
    migrated?;
    if version < REBUILT_MESSAGES && target >= REBUILT_MESSAGES {
        reclaim(conn)?;
    }
    Ok(())
}

/// The migration that rebuilds `messages`, the largest table, leaving its old pages free; its
/// rows are rewritten after its SQL ([`apply`]) and the file after it ([`reclaim`]).
const REBUILT_MESSAGES: i64 = 25;

/// Rewrites the file without its free pages (`VACUUM`) when they are more than a tenth of
/// it: a migration that rebuilt a table leaves the old table's pages free, as many as its rows
/// took, and a store should be smaller after an upgrade, not larger. Another process reading
/// the store at that moment keeps it from running (SQLite's lock, after the busy timeout);
/// the free pages are then reused by the rows written next, as they would be anyway.
fn reclaim(conn: &Connection) -> Result<(), StoreError> {
    let (free, pages): (i64, i64) =
        conn.query_row("SELECT (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_count FROM pragma_page_count)", (), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    if free * 10 <= pages {
        return Ok(());
    }
    match conn.execute_batch("VACUUM") {
        Err(rusqlite::Error::SqliteFailure(e, _)) if matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => Ok(()),
        Err(e) => Err(e.into()),
        // The file rewritten went through the write-ahead log, as large as the file: folded in
        // and emptied now, or it would stay that large until the next checkpoint.
        Ok(()) => Ok(conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", (), |_| Ok(()))?),
    }
}

/// How many rows refer to a row that is not there (SQLite's foreign key check).
fn dangling(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT count(*) FROM pragma_foreign_key_check", (), |r| r.get(0))?)
}

/// Applies migrations `from + 1 ..= target`, each in its own transaction (foreign keys off:
/// see the module's doc).
fn apply(conn: &mut Connection, from: i64, target: i64) -> Result<(), StoreError> {
    for (i, sql) in MIGRATIONS.iter().enumerate().take(target as usize).skip(from as usize) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the write lock.
        let now: i64 = tx.query_row("PRAGMA user_version", (), |r| r.get(0))?;
        if now > i as i64 {
            continue;
        }
        let before = dangling(&tx)?;
        tx.execute_batch(sql)?;
        if i as i64 + 1 == REBUILT_MESSAGES {
            super::metadata_columns::compact_sqlite(&tx)?;
            super::timestamps::compact_sqlite(&tx)?;
        }
        if dangling(&tx)? > before {
            return Err(StoreError::Corrupt(format!("migration {} would leave rows referring to nothing", i + 1)));
        }
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

/// The schema version of a PostgreSQL database, from `sessiondb_schema`.
#[cfg(feature = "postgres")]
const READ_VERSION: &str = "SELECT coalesce((SELECT max(version) FROM sessiondb_schema), 0)";

/// The schema version of the PostgreSQL database of `conn`: 0 for one sessiondb never used.
#[cfg(feature = "postgres")]
pub fn postgres_version(conn: &super::Connection) -> Result<i64, StoreError> {
    // 42P01: no such table (a new database).
    match conn.query_row(READ_VERSION, (), |r| r.get::<_, i64>(0)) {
        Ok(found) => Ok(found),
        Err(e) if e.sqlstate() == Some("42P01") => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// The schema version this build writes on PostgreSQL.
#[cfg(feature = "postgres")]
pub const POSTGRES_VERSION: i64 = POSTGRES_MIGRATIONS[POSTGRES_MIGRATIONS.len() - 1].0;

/// Brings a PostgreSQL database to [`POSTGRES_VERSION`], or refuses a newer one. The version
/// lives in `sessiondb_schema` (PostgreSQL has no `user_version`). A database that is up to
/// date is only read; otherwise the migrations run holding [`MIGRATION_LOCK`] (a session-level
/// advisory lock), each in its own transaction, after reading the version again: a host that
/// waited behind another finds the work done, and two hosts never race in the catalog.
#[cfg(feature = "postgres")]
pub fn migrate_postgres(conn: &super::Connection) -> Result<(), StoreError> {
    let found = postgres_version(conn)?;
    if found > POSTGRES_VERSION {
        return Err(StoreError::NewerSchema { found, supported: POSTGRES_VERSION });
    }
    if found == POSTGRES_VERSION {
        return Ok(());
    }
    conn.query_row("SELECT pg_advisory_lock(?1)", [MIGRATION_LOCK], |_| Ok(()))?;
    let migrated = migrate_postgres_locked(conn, READ_VERSION);
    let unlocked = conn.query_row("SELECT pg_advisory_unlock(?1)", [MIGRATION_LOCK], |_| Ok(()));
    migrated?;
    Ok(unlocked?)
}

/// [`migrate_postgres`] once the lock is held.
#[cfg(feature = "postgres")]
fn migrate_postgres_locked(conn: &super::Connection, read: &str) -> Result<(), StoreError> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS sessiondb_schema (version BIGINT NOT NULL)")?;
    let found: i64 = conn.query_row(read, (), |r| r.get(0))?;
    if found > POSTGRES_VERSION {
        return Err(StoreError::NewerSchema { found, supported: POSTGRES_VERSION });
    }
    // 28 stamps texts with `xid8` transaction ids, which PostgreSQL has from 13 on.
    let (number, version): (i64, String) =
        conn.query_row("SELECT current_setting('server_version_num')::bigint, current_setting('server_version')", (), |r| Ok((r.get(0)?, r.get(1)?)))?;
    if number < 130_000 {
        return Err(StoreError::OldServer { version });
    }
    for &(target, sql) in POSTGRES_MIGRATIONS.iter().filter(|(target, _)| *target > found) {
        conn.in_transaction(|| {
            conn.execute_batch(sql)?;
            conn.execute("DELETE FROM sessiondb_schema", ())?;
            conn.execute("INSERT INTO sessiondb_schema (version) VALUES (?1)", [target])?;
            Ok(())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_once_and_refuses_newer() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn.query_row("PRAGMA user_version", (), |r| r.get(0)).unwrap();
        assert_eq!(v, CURRENT_VERSION);
        conn.pragma_update(None, "user_version", CURRENT_VERSION + 1).unwrap();
        assert!(matches!(migrate(&mut conn), Err(StoreError::NewerSchema { .. })));
    }

    /// A database that already holds a dangling reference (damage `doctor` reports) is still
    /// brought up to date; the check stops only a migration that adds one.
    #[test]
    fn a_dangling_reference_from_before_does_not_stop_a_migration() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        migrate_to(&mut conn, 12).unwrap();
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        conn.execute("INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns) VALUES (99, 'x', 'dir', 448, 0)", ()).unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        migrate(&mut conn).unwrap();
        let on: bool = conn.query_row("PRAGMA foreign_keys", (), |r| r.get(0)).unwrap();
        assert!(on, "foreign keys back as they were");
        let v: i64 = conn.query_row("PRAGMA user_version", (), |r| r.get(0)).unwrap();
        assert_eq!(v, CURRENT_VERSION);
        assert_eq!(dangling(&conn).unwrap(), 1, "as it was");
    }

    /// 0008 moves each blob's bytes from `blobs.data` into one chunk, and a blob written by
    /// version 7 reads back the same afterwards.
    #[test]
    fn blobs_of_version_7_survive_the_move_to_chunks() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        migrate_to(&mut conn, 7).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        use sha2::Digest;
        let sha: [u8; 32] = sha2::Sha256::digest(&data).into();
        let empty: [u8; 32] = sha2::Sha256::digest(b"").into();
        conn.execute("INSERT INTO blobs (sha256, size, data) VALUES (?1, ?2, ?3)", rusqlite::params![&sha[..], data.len() as i64, data]).unwrap();
        conn.execute("INSERT INTO blobs (sha256, size, data) VALUES (?1, 0, x'')", [&empty[..]]).unwrap();
        migrate(&mut conn).unwrap();
        let conn = super::super::Connection::plain(conn);
        assert_eq!(super::super::blobs::read_all(&conn, &sha).unwrap(), data);
        assert_eq!(super::super::blobs::read_all(&conn, &empty).unwrap(), b"");
        let columns: Vec<String> =
            conn.prepare("SELECT name FROM pragma_table_info('blobs')").unwrap().query_map((), |r| r.get(0)).unwrap().map(|c| c.unwrap()).collect();
        assert_eq!(columns, ["id", "sha256", "size"], "the bytes live only in chunks");
        conn.execute("DELETE FROM blobs", ()).unwrap();
        let chunks: i64 = conn.query_row("SELECT count(*) FROM blob_chunks", (), |r| r.get(0)).unwrap();
        assert_eq!(chunks, 0, "chunks go with their blob");
    }
}
