//! `sessiondb backup DEST`: a consistent copy of an SQLite store, taken while others write.
//!
//! The copy is SQLite's `VACUUM INTO`, which reads in one transaction: it holds the store as it
//! was at one commit (every message acknowledged before the backup began, none half-written), and
//! writers go on meanwhile (in WAL mode a reader holds no one up). It is a store of its own, a
//! single file without its log, compact (no free pages), private (mode 0600), that any
//! sessiondb opens with `--db`; the ranking index is not copied (it is derived: the copy's
//! first search builds it again).
//!
//! Invariants: `DEST` is whole or untouched. The copy is written in a directory made for it
//! beside `DEST` (private, with a name no one else has), synced, and put in place as `DEST`:
//! renamed over what is there when replacing is asked for, else linked in, which fails on a
//! name taken even a moment before. A crash leaves at most that directory, never a partial
//! `DEST`; a link at `DEST` is replaced, never written through. A server's
//! database is not copied here: its own tools (`pg_dump`) do that, and the error says how.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{Store, StoreError};

/// Why a backup was not made (nothing was written at the destination).
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{path} exists: give a path where nothing is, or --force to replace it")]
    Exists { path: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "this store is a PostgreSQL database: back it up with the server's own tools, e.g. `pg_dump --format=custom --file=sessiondb.dump 'URL'`, \
         and restore it with `pg_restore --dbname=NEW_DATABASE sessiondb.dump`; sessiondb opens the restored database as it was"
    )]
    OnServer,
    #[error("the copy could not be made")]
    Store(#[from] StoreError),
}

/// What a backup copied.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub path: PathBuf,
    pub bytes: u64,
    pub conversations: u64,
    pub messages: u64,
    pub seconds: f64,
}

/// Writes a consistent copy of `store` to `dest` (see the module's doc); `replace`: an
/// existing `dest` may be replaced.
pub fn backup(store: &Store, dest: &Path, replace: bool) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    if Store::is_server(store.path()) {
        return Err(BackupError::OnServer);
    }
    let io_at = |path: &Path| {
        let path = path.to_owned();
        move |source| BackupError::Io { path, source }
    };
    if dest.file_name().is_none() {
        return Err(BackupError::Io { path: dest.to_owned(), source: io::Error::other("not a file's path") });
    }
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    if !replace && std::fs::symlink_metadata(dest).is_ok() {
        return Err(BackupError::Exists { path: dest.to_owned() });
    }
    // A directory of its own for the copy, made here (mkdir follows no link and fails on any
    // name already taken), so that nothing can be planted where SQLite writes.
    let work = dir.join(crate::fs::nofollow::temp_name());
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&work).map_err(io_at(&work))?;
    }
    let copy = work.join("store.db");
    let made = (|| -> Result<(u64, u64), BackupError> {
        let target = copy.to_str().ok_or_else(|| BackupError::Io { path: copy.clone(), source: io::Error::other("not a UTF-8 path") })?;
        store.connection()?.execute("VACUUM INTO ?1", [target]).map_err(StoreError::from)?;
        // What the copy holds, read from it: a file SQLite cannot read fails here, not later.
        let counted: (i64, i64) = rusqlite::Connection::open_with_flags(&copy, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages)", (), |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(StoreError::from)?;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&copy).map_err(io_at(&copy))?;
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io_at(&copy))?;
        }
        file.sync_all().map_err(io_at(&copy))?;
        if replace {
            std::fs::rename(&copy, dest).map_err(io_at(dest))?;
        } else {
            // A link fails on any name taken, even one taken since it was looked at above.
            std::fs::hard_link(&copy, dest).map_err(|source| match source.kind() {
                io::ErrorKind::AlreadyExists => BackupError::Exists { path: dest.to_owned() },
                _ => BackupError::Io { path: dest.to_owned(), source },
            })?;
        }
        crate::fs::atomic::sync_dir(&dir).map_err(io_at(&dir))?;
        Ok((counted.0.max(0) as u64, counted.1.max(0) as u64))
    })();
    // The work directory goes: the copy's name there is left after a link, or a failure.
    let _ = std::fs::remove_file(&copy);
    let _ = std::fs::remove_dir(&work);
    let (conversations, messages) = made?;
    let bytes = std::fs::symlink_metadata(dest).map_err(io_at(dest))?.len();
    Ok(BackupReport { path: dest.to_owned(), bytes, conversations, messages, seconds: started.elapsed().as_secs_f64() })
}
