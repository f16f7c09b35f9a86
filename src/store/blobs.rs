//! The bytes of opaque files (attachments, config.toml, markers), stored by content in chunks.
//!
//! Invariant: a blob is one `blobs` row (its SHA-256 and size) and the `blob_chunks` rows
//! whose `data`, concatenated in `seq` order from 0, are exactly `size` bytes with that
//! SHA-256. sessiondb writes chunks of at most [`CHUNK`] bytes (a chunk migrated from schema
//! version 7 may be larger), so no single SQLite value comes near SQLite's limit of
//! 1,000,000,000 bytes and a file of any size can be stored. Writing and reading both go
//! through fixed-size buffers: memory does not depend on the file's size. Every write and read
//! of blob bytes goes through this module; nothing else knows the chunks exist.
//!
//! The key is a claim, checked wherever it could be false. Every read checks it: a blob read to
//! its end whose bytes are not its size or do not hash to its key fails at its last read
//! ([`Damaged`]), so a caller that writes what it reads through a temporary file (an export)
//! never puts such bytes in place. A file whose blob is stored already is stored by holding that
//! blob; whether the blob is the file is decided per engine ([`check_held`]):
//! - On SQLite one process writes at a time and every row is this module's, hashed as it was
//!   written: a blob found stored is the file, and nothing is read again.
//! - On a server, blobs are shared by the sources of every role (schema 17), and any role may
//!   store bytes under any key. A blob found stored is trusted only when this connection's role
//!   wrote it (`blobs.writer`) or vouched for it before (`blob_vouchers`, schema 19); otherwise
//!   it is read back whole once, hashed, and vouched for. Vouchers are kept per role, and the
//!   server lets a role write only its own: no role vouches for another, and a role's syncs read
//!   back only the blobs of other roles that it has not read before, each once. The check runs
//!   once the caller's entry holds the blob: the entry's key locks the blob's row until the
//!   transaction ends, and the server keeps a blob's chunks as the transaction that made it
//!   wrote them (schema 19), so the bytes checked are the bytes held. A blob found to hold other
//!   bytes is removed and the file's own stored in its place when no other conversation holds
//!   it; when one does, the file is refused ([`StoreError::ForeignBytes`]).

use std::io::Read;

use super::sql::{params, Engine, OptionalExtension};
use sha2::{Digest, Sha256};

use super::{Connection, StoreError};

/// Why a stored blob is not the file its key names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsound {
    /// Its chunks do not add up to its size (one is missing, or there are more).
    #[error("{stored} bytes stored of its {size}")]
    Size { stored: u64, size: u64 },
    /// Its bytes are another file's.
    #[error("its bytes do not hash to its address")]
    Digest,
}

/// The error the last read of a blob that is not the file its key names returns (inside an
/// `std::io::Error`, as [`BlobReader`] is a reader).
#[derive(Debug, thiserror::Error)]
#[error("the store's copy is damaged: blob {sha256}: {why}; `sessiondb doctor` names the conversations that hold it")]
pub struct Damaged {
    pub sha256: String,
    pub why: Unsound,
}

/// A blob [`check_held`] found to hold other bytes than its key names.
#[derive(Debug)]
pub struct Foreign {
    /// Its key, in hexadecimal.
    pub sha256: String,
    /// The role that wrote it (`None`: written before schema 19, by a role not recorded).
    pub writer: Option<String>,
    pub why: Unsound,
}

/// The most bytes one chunk holds: small enough to keep buffers modest, large enough that a
/// gigabyte is a few hundred rows.
pub const CHUNK: usize = 4 << 20;

/// How [`put`] found blob `sha256`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// Not there: it was written from the caller's bytes, which hash to its key.
    Written,
    /// There already, and not read: once an entry of the caller's transaction holds it,
    /// [`check_held`] says whether it is the file.
    Found,
}

/// Stores `size` bytes read from `data` as blob `sha256`, unless a blob with that digest is
/// stored already (then `data` is not read). `data` yielding other bytes (a file changing while
/// it is read) is an error naming `path`, and nothing is stored.
pub fn put(conn: &Connection, sha256: &[u8; 32], size: u64, data: impl Read, path: &str) -> Result<Stored, StoreError> {
    put_chunked(conn, sha256, size, data, path, CHUNK)
}

/// Stores bytes held in memory; returns their SHA-256.
pub fn put_bytes(conn: &Connection, data: &[u8], path: &str) -> Result<[u8; 32], StoreError> {
    let sha: [u8; 32] = Sha256::digest(data).into();
    put(conn, &sha, data.len() as u64, data, path)?;
    Ok(sha)
}

/// [`put`] with the chunk size as a parameter (tests use tiny chunks to cross boundaries).
fn put_chunked(conn: &Connection, sha256: &[u8; 32], size: u64, data: impl Read, path: &str, chunk: usize) -> Result<Stored, StoreError> {
    let io = |source| StoreError::Io { path: path.to_owned(), source };
    let size_sql = i64::try_from(size).map_err(|_| io(std::io::Error::other("file too large")))?;
    let inserted: Option<i64> = conn
        .prepare_cached("INSERT OR IGNORE INTO blobs (sha256, size) VALUES (?1, ?2) RETURNING id")?
        .query_row(params![&sha256[..], size_sql], |r| r.get(0))
        .optional()?;
    let Some(blob_id) = inserted else { return Ok(Stored::Found) };
    let mut insert = conn.prepare_cached("INSERT INTO blob_chunks (blob_id, seq, data) VALUES (?1, ?2, ?3)")?;
    let mut reader = data.take(size);
    let mut hasher = Sha256::new();
    let mut buf = vec![0; chunk.min(usize::try_from(size).unwrap_or(chunk)).max(1)];
    let (mut seq, mut written) = (0i64, 0u64);
    loop {
        let n = fill(&mut reader, &mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        insert.execute(params![blob_id, seq, &buf[..n]])?;
        seq += 1;
        written += n as u64;
    }
    let digest: [u8; 32] = hasher.finalize().into();
    if written != size || &digest != sha256 {
        return Err(io(std::io::Error::other("file changed while it was being read")));
    }
    Ok(Stored::Written)
}

/// Whether blob `sha256`, which [`put`] found stored, is the file its key names, as far as this
/// connection's role can know (see the module's doc). Call once an entry written in the
/// caller's transaction holds it. On a server, a blob this role neither wrote nor vouched for is
/// read back whole and hashed (then vouched for, when sound); on SQLite nothing is read.
/// `Err(Foreign)`: it holds other bytes.
pub fn check_held(conn: &Connection, sha256: &[u8; 32]) -> Result<Result<(), Foreign>, StoreError> {
    if conn.engine() != Engine::Postgres {
        return Ok(Ok(()));
    }
    let (blob_id, writer, trusted): (i64, Option<String>, bool) = conn
        .prepare_cached(
            "SELECT b.id, b.writer,
                    coalesce(b.writer = current_user, false)
                    OR EXISTS (SELECT 1 FROM blob_vouchers v WHERE v.blob_id = b.id AND v.role_name = current_user)
             FROM blobs b WHERE b.sha256 = ?1",
        )?
        .query_row([&sha256[..]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    if trusted {
        return Ok(Ok(()));
    }
    if let Err(why) = check(conn, sha256)? {
        return Ok(Err(Foreign { sha256: hex(sha256), writer, why }));
    }
    conn.prepare_cached("INSERT OR IGNORE INTO blob_vouchers (blob_id) VALUES (?1)")?.execute([blob_id])?;
    Ok(Ok(()))
}

/// Reads blob `sha256` whole, hashing it (in pieces: memory does not depend on its size).
/// `Ok(Err(why))`: it is not the file its key names.
pub fn check(conn: &Connection, sha256: &[u8; 32]) -> Result<Result<(), Unsound>, StoreError> {
    match std::io::copy(&mut open(conn, sha256)?, &mut std::io::sink()) {
        Ok(_) => Ok(Ok(())),
        Err(e) => match e.get_ref().and_then(|inner| inner.downcast_ref::<Damaged>()) {
            Some(damaged) => Ok(Err(damaged.why.clone())),
            None => Err(StoreError::Io { path: format!("blob {}", hex(sha256)), source: e }),
        },
    }
}

/// The role that wrote blob `blob_id`, on a server (schema 19); `None` on SQLite, or for a blob
/// written before.
pub fn writer(conn: &Connection, blob_id: i64) -> Result<Option<String>, StoreError> {
    if conn.engine() != Engine::Postgres {
        return Ok(None);
    }
    Ok(conn.prepare_cached("SELECT writer FROM blobs WHERE id = ?1")?.query_row([blob_id], |r| r.get(0)).optional()?.flatten())
}

/// Reads until `buf` is full or `r` ends; returns how many bytes it read.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A stored blob, read in order in pieces of the caller's buffer size, and checked against its
/// key as it is read: the read that reaches its end fails ([`Damaged`]) when its bytes are not
/// its size or do not hash to its key.
pub struct BlobReader<'c> {
    conn: &'c Connection,
    blob_id: i64,
    sha256: [u8; 32],
    size: u64,
    read: u64,
    hasher: Sha256,
    next_seq: i64,
    current: Option<Chunk<'c>>,
    /// Its end was reached, and its bytes found to be its key's.
    checked: bool,
}

/// The chunk being read: on SQLite opened in place, on PostgreSQL fetched whole (a chunk is
/// at most [`CHUNK`] bytes).
enum Chunk<'c> {
    Sqlite(rusqlite::blob::Blob<'c>),
    Fetched(std::io::Cursor<Vec<u8>>),
}

impl Read for Chunk<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Chunk::Sqlite(blob) => blob.read(buf),
            Chunk::Fetched(bytes) => bytes.read(buf),
        }
    }
}

/// Opens blob `sha256` for streaming reads.
pub fn open<'c>(conn: &'c Connection, sha256: &[u8; 32]) -> Result<BlobReader<'c>, StoreError> {
    let (blob_id, size): (i64, i64) = conn
        .prepare_cached("SELECT id, size FROM blobs WHERE sha256 = ?1")?
        .query_row([&sha256[..]], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .ok_or_else(|| StoreError::Corrupt(format!("blob {} is missing", hex(sha256))))?;
    Ok(BlobReader { conn, blob_id, sha256: *sha256, size: size.max(0) as u64, read: 0, hasher: Sha256::new(), next_seq: 0, current: None, checked: false })
}

/// The whole of a (small) blob: config.toml, a marker.
pub fn read_all(conn: &Connection, sha256: &[u8; 32]) -> Result<Vec<u8>, StoreError> {
    let mut bytes = Vec::new();
    open(conn, sha256)?.read_to_end(&mut bytes).map_err(|source| StoreError::Io { path: format!("blob {}", hex(sha256)), source })?;
    Ok(bytes)
}

/// A digest as the store shows it: lowercase hexadecimal.
pub fn hex(sha256: &[u8]) -> String {
    sha256.iter().map(|b| format!("{b:02x}")).collect()
}

impl BlobReader<'_> {
    /// Called at the end of the blob: whether what was read is the file its key names.
    fn check_end(&mut self) -> std::io::Result<()> {
        let why = if self.read != self.size {
            Unsound::Size { stored: self.read, size: self.size }
        } else if <[u8; 32]>::from(std::mem::take(&mut self.hasher).finalize()) != self.sha256 {
            Unsound::Digest
        } else {
            self.checked = true;
            return Ok(());
        };
        Err(std::io::Error::other(Damaged { sha256: hex(&self.sha256), why }))
    }
}

impl Read for BlobReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() || self.checked {
            return Ok(0);
        }
        loop {
            if let Some(chunk) = &mut self.current {
                let n = chunk.read(buf)?;
                if n > 0 {
                    self.read += n as u64;
                    self.hasher.update(&buf[..n]);
                    return Ok(n);
                }
                self.current = None;
            }
            let rowid: Option<i64> = self
                .conn
                .prepare_cached("SELECT id FROM blob_chunks WHERE blob_id = ?1 AND seq = ?2")
                .and_then(|mut s| s.query_row(params![self.blob_id, self.next_seq], |r| r.get(0)).optional())
                .map_err(std::io::Error::other)?;
            let Some(rowid) = rowid else {
                self.check_end()?;
                return Ok(0);
            };
            self.current = Some(match self.conn.sqlite() {
                Some(sql) => Chunk::Sqlite(sql.blob_open(rusqlite::MAIN_DB, "blob_chunks", "data", rowid, true).map_err(std::io::Error::other)?),
                None => Chunk::Fetched(std::io::Cursor::new(
                    self.conn
                        .prepare_cached("SELECT data FROM blob_chunks WHERE id = ?1")
                        .and_then(|mut s| s.query_row([rowid], |r| r.get(0)))
                        .map_err(std::io::Error::other)?,
                )),
            });
            self.next_seq += 1;
        }
    }
}

/// Removes blob `sha256` when no entry refers to it any more (its chunks go with it).
pub fn remove_if_unreferenced(conn: &Connection, sha256: &[u8]) -> Result<(), StoreError> {
    keeping_blobs_in_use(conn, || {
        conn.prepare_cached("DELETE FROM blobs WHERE sha256 = ?1 AND NOT EXISTS (SELECT 1 FROM entries WHERE blob_sha256 = ?1)")?.execute([sha256])?;
        Ok(())
    })
}

/// Removes every blob no entry refers to.
pub fn remove_all_unreferenced(conn: &Connection) -> Result<(), StoreError> {
    keeping_blobs_in_use(conn, || {
        conn.execute("DELETE FROM blobs WHERE NOT EXISTS (SELECT 1 FROM entries WHERE blob_sha256 = blobs.sha256)", ())?;
        Ok(())
    })
}

/// Runs `remove`, a removal of blobs no entry refers to, inside a write transaction. On a
/// server, writers of other sources write at the same time: one may have just come to hold a
/// blob this transaction finds unreferenced (its entry not committed when the removal looked).
/// The server then refuses the removal on the entries' foreign key once that writer commits;
/// the blobs are in use after all, so they stay, and the transaction goes on (the removal is
/// undone to a savepoint). SQLite has one writer at a time: no such writer can be there.
fn keeping_blobs_in_use(conn: &Connection, remove: impl FnOnce() -> Result<(), StoreError>) -> Result<(), StoreError> {
    if conn.engine() != super::sql::Engine::Postgres {
        return remove();
    }
    conn.execute_batch("SAVEPOINT blob_removal")?;
    match remove() {
        Ok(()) => Ok(conn.execute_batch("RELEASE SAVEPOINT blob_removal")?),
        Err(StoreError::Database(e)) if e.sqlstate() == Some("23503") => {
            Ok(conn.execute_batch("ROLLBACK TO SAVEPOINT blob_removal; RELEASE SAVEPOINT blob_removal")?)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK TO SAVEPOINT blob_removal; RELEASE SAVEPOINT blob_removal");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Connection {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        Connection::plain(conn)
    }

    #[test]
    fn every_size_round_trips_across_chunk_boundaries() {
        let conn = store();
        for size in [0usize, 1, 6, 7, 8, 13, 14, 15, 100] {
            let data: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            let sha: [u8; 32] = Sha256::digest(&data).into();
            put_chunked(&conn, &sha, size as u64, &data[..], "f", 7).unwrap();
            let chunks: i64 =
                conn.query_row("SELECT count(*) FROM blob_chunks c JOIN blobs b ON b.id = c.blob_id WHERE b.sha256 = ?1", [&sha[..]], |r| r.get(0)).unwrap();
            assert_eq!(chunks as usize, size.div_ceil(7), "size {size}");
            let longest: i64 = conn.query_row("SELECT coalesce(max(length(data)), 0) FROM blob_chunks", (), |r| r.get(0)).unwrap();
            assert!(longest <= 7);
            assert_eq!(read_all(&conn, &sha).unwrap(), data, "size {size}");
            // Read back in pieces smaller than, equal to and larger than a chunk.
            for piece in [1, 7, 9] {
                let mut reader = open(&conn, &sha).unwrap();
                let (mut out, mut buf) = (Vec::new(), vec![0; piece]);
                loop {
                    let n = reader.read(&mut buf).unwrap();
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
                assert_eq!(out, data, "size {size}, pieces of {piece}");
            }
        }
    }

    #[test]
    fn bytes_that_change_while_read_store_nothing() {
        let conn = store();
        let sha: [u8; 32] = Sha256::digest(b"expected").into();
        conn.execute_batch("SAVEPOINT s").unwrap();
        assert!(matches!(put_chunked(&conn, &sha, 8, &b"changed!"[..], "f", 3), Err(StoreError::Io { .. })));
        conn.execute_batch("ROLLBACK TO s; RELEASE s").unwrap();
        assert!(open(&conn, &sha).is_err());
        // Too few bytes is the same failure.
        assert!(put_chunked(&conn, &sha, 9, &b"expected"[..], "f", 3).is_err());
    }

    #[test]
    fn a_removed_blob_takes_its_chunks() {
        let conn = store();
        let sha = put_bytes(&conn, b"some bytes", "f").unwrap();
        remove_if_unreferenced(&conn, &sha).unwrap();
        let left: i64 = conn.query_row("SELECT count(*) FROM blob_chunks", (), |r| r.get(0)).unwrap();
        assert_eq!(left, 0);
    }
}
