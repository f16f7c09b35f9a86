//! The working store: an SQLite file, or a PostgreSQL server's database ([`server`]), behind
//! the same statements ([`sql`]).
//!
//! One database file in WAL mode holds every imported conversation. Connections come from an
//! r2d2 pool; each has foreign keys on and a busy timeout, and every write transaction starts
//! by taking its write lock ([`Connection::begin_write`]) so concurrent writers queue for the
//! lock instead of failing midway.
//! A conversation is always written whole in one transaction: readers see it before or after,
//! never half-imported.
//!
//! A conversation is identified by its source (the logs root it is read from) and its chat id
//! ([`sources`]). A [`Connection`] scoped to a source ([`Connection::scope_to`]) looks up and
//! writes that source's conversations only; an unscoped one finds a conversation as a command
//! names it (`SOURCE:CHAT`, or a chat id only one source has).
//!
//! This module is the only one that holds SQL or touches either engine. The rest of the crate gets a
//! [`Connection`] (or, to write, a [`WriteBatch`] and the [`Connection`] it lends) and calls the
//! named operations of the modules below, each in the module that owns its rows: [`ConversationWriter`] for
//! writing a whole conversation, [`modify`] for changes in place of a stored conversation, [`pending`] for the queue of store-only changes,
//! [`acknowledged`] for acknowledged appends, [`queries`] for reads; the rows the writer and
//! `modify` both write (a message, a regular file with its blob) are written by [`rows`]. A read that must see the
//! same state as the writes after it takes the batch's connection, inside the transaction.

pub mod acknowledged;
pub mod backup;
mod batch;
pub mod blobs;
pub mod compact;
pub mod disk;
pub mod doctor;
pub mod fts;
mod metadata_columns;
pub mod modify;
pub mod pending;
pub mod queries;
pub mod ranking;
pub mod ranking_server;
pub mod rows;
mod rowsets;
pub mod schema;
pub mod search;
#[cfg(feature = "postgres")]
mod server;
#[cfg(feature = "postgres")]
mod server_tls;
pub mod sources;
pub mod sql;
pub mod stats;
mod text_terms;
pub mod texts;
mod timestamps;
pub mod totals;
mod trigram_tokens;
mod word_match;
mod word_tokens;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use r2d2_sqlite::SqliteConnectionManager;

use batch::Savepoint;
pub use batch::WriteBatch;
pub use totals::ListingTotals;
pub use writer::{ConversationWriter, DocumentId, DocumentKind, LineDigest, LineWarning, WriteStats};

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The engine's message is the whole story ([`sql::Error`]), so it is worded here and not
    /// returned as a cause.
    #[error("database error: {0}")]
    Database(sql::Error),
    #[error("connection pool error")]
    Pool(#[from] r2d2::Error),
    #[error("the database uses schema version {found}, newer than this sessiondb supports ({supported}); upgrade sessiondb")]
    NewerSchema { found: i64, supported: i64 },
    /// The SQLite file this process opened is no longer at its path (moved, removed, or
    /// another file put there): nothing more is read or written through this store, so that
    /// one history never splits over two files.
    #[error("{path}: the database this process opened was moved, removed or replaced while it ran; nothing more was written, there or anywhere else. Run the command again (with --db on its new path, if it was moved)")]
    Moved { path: PathBuf },
    #[error("cannot create the database at {path}")]
    Create { path: PathBuf, source: std::io::Error },
    /// Only commands that write create a database ([`Store::open`]); the others
    /// ([`Store::open_existing`]) say where none was found and how to make one.
    #[error("no database at {path}: `sessiondb import` creates one from gptme's logs")]
    NoDatabase { path: PathBuf },
    /// The path is taken, by something SQLite cannot use as a database.
    #[error("{path} is not a database: {why}")]
    NotADatabase { path: PathBuf, why: String },
    /// `--db` (or `SESSIONDB_DB`, or the config file's `db`) given a URL of another scheme than
    /// PostgreSQL's: a URL taken as a path would make a file under a directory named after its
    /// scheme.
    #[error("{url} is a URL of a kind sessiondb does not open: give an SQLite file's path, or a postgres:// URL; {scheme}:// databases are not supported")]
    Url { url: String, scheme: String },
    /// The server refused a statement to this URL's role.
    #[error("the server does not let this role do that ({0}): a reader's role (tools/pg/reader-role.sql) only reads, and a host's role (tools/pg/host-role.sql) writes only the sources it made")]
    NotAllowed(sql::Error),
    /// A write into a source that another role writes (PostgreSQL, schema 17: `sources.writer`):
    /// refused before anything is written, as the server would refuse each write.
    #[error("source {source_name:?} is written by role {writer:?}, and this connection is role {role:?}: each host writes only its own sources; connect as {writer:?}, or have the store's owner give the source to {role:?} (UPDATE sources SET writer = '{role}' WHERE name = '{source_name}')")]
    NotWriter { source_name: String, writer: String, role: String },
    /// A file whose SHA-256 another role stored other bytes under, which a conversation of
    /// another source holds (PostgreSQL, schema 19): they cannot be replaced, so the file is
    /// refused rather than stored as them ([`blobs::check_held`]).
    #[error(
        "{path}: the store holds other bytes under this file's SHA-256, {}, written by {}, and a conversation of another source holds them, so this file is not stored; `sessiondb doctor` names that conversation, which the store's owner can remove",
        found.sha256,
        found.writer.as_deref().map_or_else(|| "a role not recorded (before schema 19)".to_owned(), |w| format!("role {w:?}"))
    )]
    ForeignBytes { path: String, found: Box<blobs::Foreign> },
    /// A `postgres://` URL that does not parse.
    #[error("{url} is not a usable PostgreSQL URL: {why}")]
    BadUrl { url: String, why: String },
    /// The server did not answer in time ([`sql::Error::NoAnswer`]: its message names the
    /// server, the wait and what to do).
    #[error("{0}")]
    NoAnswer(sql::Error),
    /// A server older than the store's schema needs.
    #[error("the PostgreSQL server is version {version}; sessiondb needs 13 or later (for its 64-bit transaction ids): upgrade the server, or keep the store in an SQLite file")]
    OldServer { version: String },
    /// The server could not be reached, or refused the connection.
    #[error("cannot connect to {url}: {why}")]
    Server { url: String, why: String },
    #[error("{path}")]
    Io { path: String, source: std::io::Error },
    #[error("the store is inconsistent: {0}; run `sessiondb import` again from the gptme directories")]
    Corrupt(String),
    #[error("{0}")]
    Query(String),
    /// A search query past one of the bounds that keep every search quick.
    #[error("the search query has {found} {what}; at most {limit} are allowed")]
    QueryTooLarge { what: &'static str, found: usize, limit: usize },
    /// A search filter that names nothing in the store (`known`: what there is, or where to
    /// look).
    #[error("{flag} {value:?} names nothing in the store: {known}")]
    NoSuchFilter { flag: &'static str, value: String, known: String },
    #[error("no conversation {0:?} in the store")]
    NoConversation(String),
    /// A bare chat id stored in more than one source (or a `SOURCE:CHAT` that can be read two
    /// ways): the candidates, each as `SOURCE:CHAT`.
    #[error("{given:?} names more than one conversation; give one of: {}", candidates.join(", "))]
    Ambiguous { given: String, candidates: Vec<String> },
    /// `--source NAME` where sources of several roles have that name (PostgreSQL, schema 20):
    /// the label of each (`NAME@ROLE`).
    #[error("{given:?} names sources of more than one role; give one of: {}", candidates.join(", "))]
    AmbiguousSource { given: String, candidates: Vec<String> },
    #[error("{name:?} cannot name a source: {why}")]
    BadSourceName { name: String, why: &'static str },
    /// `--source NAME` for a root that another source already reads.
    #[error("{} is read as source {other:?} already; give --source {other:?}, or none", root.display())]
    SourceRoot { name: String, root: PathBuf, other: String },
    /// `--source NAME` where source NAME reads another root.
    #[error("source {name:?} reads {} already, not {}; a source reads one logs root", other.display(), root.display())]
    SourceName { name: String, root: PathBuf, other: PathBuf },
    /// A write scoped to one source was given a conversation directory of another logs root.
    #[error("{} is not in logs root {} of source {source_name:?}; a sync or import of a root writes only that root's conversations", dir.display(), root.display())]
    OutsideSource { dir: PathBuf, source_name: String, root: PathBuf },
    #[error("conversation {chat_id:?} has no branch {branch:?}")]
    NoBranch { chat_id: String, branch: String },
    /// Reading the directory again would replace changes made in the store only (`--queue`):
    /// they must be written out (or kept as conflicts) first, by `sessiondb sync`.
    #[error("conversation {0:?} has changes queued in the store that its directory does not hold yet; run `sessiondb sync` to write them out first")]
    Queued(String),
}

impl StoreError {
    /// Whether the server gave up the statement only for meeting another writer: a deadlock
    /// it broke (40P01), a serialization failure (40001), or an attachment this write came to
    /// hold that another writer removed meanwhile, as no longer held (23503 on the entries'
    /// blob key). Writers of different sources write at once on a server
    /// ([`sql::WRITE_LOCK`]) and can still meet over rows they share (an attachment both hold);
    /// the same write again usually succeeds.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Database(e) => match e.sqlstate() {
                Some("40P01" | "40001") => true,
                Some("23503") => e.constraint() == Some("entries_blob_sha256_fkey"),
                _ => false,
            },
            _ => false,
        }
    }
}

impl From<sql::Error> for StoreError {
    fn from(e: sql::Error) -> Self {
        #[cfg(feature = "postgres")]
        if matches!(e, sql::Error::NoAnswer { .. }) {
            return StoreError::NoAnswer(e);
        }
        // 42501: insufficient privilege (a reader's role, or one row-level security keeps out).
        if e.sqlstate() == Some("42501") {
            return StoreError::NotAllowed(e);
        }
        StoreError::Database(e)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Database(e.into())
    }
}

/// A connection to the database: from the pool ([`Store::connection`]) or, for `doctor`, a
/// plain one ([`doctor::open_unmigrated`]).
///
/// Code outside the store reads and writes only through the store's named operations, which
/// take this type (inside a write transaction, [`WriteBatch::conn`] hands out the same type):
/// the SQLite connection within is reachable from `store` alone, so that no SQL is written
/// anywhere else and a second backend has one interface to implement.
pub struct Connection(Inner, std::cell::Cell<Option<i64>>, Arc<texts::Dictionaries>);

enum Inner {
    Pooled(r2d2::PooledConnection<SqliteConnectionManager>),
    Plain(rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Postgres(r2d2::PooledConnection<server::Manager>),
    /// The first connection to a server, made outside the pool ([`Store::open`]).
    #[cfg(feature = "postgres")]
    PostgresPlain(sql::pg::Client),
}

/// The engine's connection within a [`Connection`].
enum EngineConn<'c> {
    Sqlite(&'c rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Postgres(&'c sql::pg::Client),
}

/// The engine's connection, for the store's own modules only; the methods below forward to it
/// so that their SQL reads as it would on `rusqlite::Connection`, and runs on either engine
/// ([`sql`]).
impl Connection {
    /// A connection opened outside the pool (see [`doctor::open_unmigrated`]).
    pub(in crate::store) fn plain(conn: rusqlite::Connection) -> Connection {
        Connection(Inner::Plain(conn), Default::default(), Default::default())
    }

    /// A connection of its own to the PostgreSQL database at `url`, outside any pool and not
    /// migrated: a bad URL is [`StoreError::BadUrl`], a server that cannot be reached
    /// [`StoreError::Server`] with what it said (the password never shown).
    #[cfg(feature = "postgres")]
    pub(in crate::store) fn connect_server(url: &str) -> Result<Connection, StoreError> {
        Ok(Connection::connect_server_with(url)?.1)
    }

    /// [`Connection::connect_server`], and the pool's manager for more connections like it.
    #[cfg(feature = "postgres")]
    fn connect_server_with(url: &str) -> Result<(server::Manager, Connection), StoreError> {
        use r2d2::ManageConnection;
        let shown = server::redacted(url);
        let manager = server::Manager::new(url).map_err(|why| StoreError::BadUrl { url: shown.clone(), why })?;
        let first = manager.connect().map_err(|e| match e {
            e @ sql::Error::NoAnswer { .. } => StoreError::from(e),
            e => StoreError::Server { url: shown, why: e.to_string() },
        })?;
        Ok((manager, Connection(Inner::PostgresPlain(first), Default::default(), Default::default())))
    }

    /// Keeps this connection to the conversations of one source from now on, to write them:
    /// chat ids are looked up in that source only, and conversations written are written into
    /// it (see [`sources`]). For a sync or import of one logs root, and for an operation on one
    /// conversation once it is found. A connection is unscoped when taken from the store.
    /// Refused ([`StoreError::NotWriter`]) when this connection's role may not write the source
    /// ([`sources::check_writer`]).
    pub fn scope_to(&self, source_id: i64) -> Result<(), StoreError> {
        sources::check_writer(self, source_id)?;
        self.1.set(Some(source_id));
        Ok(())
    }

    /// Sets the source this connection is kept to (`None`: none), returning the one before,
    /// for a function that scopes a connection it was lent and must give it back as it was.
    pub fn set_scope(&self, source_id: Option<i64>) -> Option<i64> {
        self.1.replace(source_id)
    }

    /// The source this connection is kept to ([`Connection::scope_to`]), if any.
    pub(in crate::store) fn scope(&self) -> Option<i64> {
        self.1.get()
    }

    /// The text dictionaries of the store this connection is of, as far as read ([`texts`]).
    pub(in crate::store) fn dictionaries(&self) -> &texts::Dictionaries {
        &self.2
    }

    fn inner(&self) -> EngineConn<'_> {
        match &self.0 {
            Inner::Pooled(c) => EngineConn::Sqlite(c),
            Inner::Plain(c) => EngineConn::Sqlite(c),
            #[cfg(feature = "postgres")]
            Inner::Postgres(c) => EngineConn::Postgres(c),
            #[cfg(feature = "postgres")]
            Inner::PostgresPlain(c) => EngineConn::Postgres(c),
        }
    }

    /// Which engine this connection talks to.
    pub fn engine(&self) -> sql::Engine {
        match self.inner() {
            EngineConn::Sqlite(_) => sql::Engine::Sqlite,
            #[cfg(feature = "postgres")]
            EngineConn::Postgres(_) => sql::Engine::Postgres,
        }
    }

    /// The SQLite connection within, for what only SQLite has (its pragmas, its FTS5 word
    /// indexes, incremental blob I/O); `None` on PostgreSQL.
    pub(in crate::store) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self.inner() {
            EngineConn::Sqlite(c) => Some(c),
            #[cfg(feature = "postgres")]
            EngineConn::Postgres(_) => None,
        }
    }

    pub(in crate::store) fn prepare(&self, sql: &str) -> sql::Result<sql::Statement<'_>> {
        match self.inner() {
            EngineConn::Sqlite(c) => Ok(sql::Statement::sqlite(c.prepare(sql)?)),
            #[cfg(feature = "postgres")]
            EngineConn::Postgres(c) => Ok(sql::Statement::postgres(c, c.prepare(sql, false)?)),
        }
    }

    pub(in crate::store) fn prepare_cached(&self, sql: &str) -> sql::Result<sql::Statement<'_>> {
        match self.inner() {
            EngineConn::Sqlite(c) => Ok(sql::Statement::sqlite_cached(c.prepare_cached(sql)?)),
            #[cfg(feature = "postgres")]
            EngineConn::Postgres(c) => Ok(sql::Statement::postgres(c, c.prepare(sql, true)?)),
        }
    }

    /// Runs one statement, prepared once per connection: preparing a statement that deletes
    /// conversations compiles every cascade and trigger below them, which was an eighth of an
    /// import's writing thread when done afresh for each conversation.
    pub(in crate::store) fn execute<P: sql::Params>(&self, sql: &str, params: P) -> sql::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    /// How long a statement waits for a lock another connection holds.
    pub(in crate::store) fn set_busy_timeout(&self, wait: std::time::Duration) -> sql::Result<()> {
        match self.inner() {
            EngineConn::Sqlite(c) => Ok(c.busy_timeout(wait)?),
            #[cfg(feature = "postgres")]
            EngineConn::Postgres(c) => c.batch_execute(&format!("SET lock_timeout = {}", wait.as_millis())),
        }
    }

    /// Runs statements separated by `;`, without parameters.
    pub(in crate::store) fn execute_batch(&self, sql: &str) -> sql::Result<()> {
        match self.inner() {
            EngineConn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            #[cfg(feature = "postgres")]
            EngineConn::Postgres(c) => c.batch_execute(sql),
        }
    }

    /// Begins a write transaction, its write lock taken from the start: SQLite's (`BEGIN
    /// IMMEDIATE`), or on the server the locks of this connection's scope ([`sql::WRITE_LOCK`]:
    /// its source's alone when it is scoped to one, every writer's otherwise).
    pub(in crate::store) fn begin_write(&self) -> sql::Result<()> {
        self.begin_write_taking(self.write_locks())
    }

    /// The write locks this connection's writes take on a server: its source's when it is
    /// scoped to one, every writer's otherwise.
    fn write_locks(&self) -> sql::WriteLocks {
        self.scope().map_or(sql::WriteLocks::Exclusive, sql::WriteLocks::Source)
    }

    fn begin_write_taking(&self, locks: sql::WriteLocks) -> sql::Result<()> {
        match self.engine() {
            sql::Engine::Sqlite => self.execute_batch("BEGIN IMMEDIATE"),
            sql::Engine::Postgres => self.execute_batch(&sql::begin_write_on_server(locks)),
        }
    }

    /// Runs `work` in one write transaction ([`Connection::begin_write`]), committed when it
    /// succeeds; rolled back when it or the commit fails (a commit SQLite refuses leaves the
    /// transaction open). Call outside any transaction.
    pub(in crate::store) fn in_transaction<T>(&self, work: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.in_transaction_taking(self.write_locks(), work)
    }

    /// [`Connection::in_transaction`] for a write that takes the rows it changes so that it
    /// never meets another writer's ([`sql::WriteLocks::Shared`]): on a server it runs beside
    /// the writers of every source. SQLite has one writer at a time all the same.
    pub(in crate::store) fn in_transaction_beside_writers<T>(&self, work: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.in_transaction_taking(sql::WriteLocks::Shared, work)
    }

    /// Runs the reads of `read` on one snapshot of the store. On SQLite, outside a transaction,
    /// they are one read transaction: every statement sees the same committed state, and the
    /// WAL's shared lock is taken once instead of once a statement (a fifth of a search that
    /// runs a thousand small queries). Inside a transaction, and on a server (where a statement
    /// costs a round trip either way), `read` runs as it is. `read` must not write.
    pub(in crate::store) fn on_one_snapshot<T>(&self, read: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let Some(sql) = self.sqlite().filter(|c| c.is_autocommit()) else { return read() };
        sql.execute_batch("BEGIN DEFERRED")?;
        let done = read();
        // A read transaction has nothing to keep: ending it cannot lose anything.
        let ended = sql.execute_batch("COMMIT");
        if ended.is_err() {
            let _ = sql.execute_batch("ROLLBACK");
        }
        let done = done?;
        ended?;
        Ok(done)
    }

    fn in_transaction_taking<T>(&self, locks: sql::WriteLocks, work: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.begin_write_taking(locks)?;
        let done = work().and_then(|done| Ok(self.execute_batch("COMMIT").map(|()| done)?));
        if done.is_err() {
            let _ = self.execute_batch("ROLLBACK");
        }
        done
    }

    pub(in crate::store) fn query_row<T, P, F>(&self, sql: &str, params: P, f: F) -> sql::Result<T>
    where
        P: sql::Params,
        F: FnOnce(&sql::Row<'_>) -> sql::Result<T>,
    {
        self.prepare(sql)?.query_row(params, f)
    }
}

/// A handle on the database: cheap to clone, safe to share between threads.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// The SQLite file, or the server's URL (`postgres://…`).
    path: PathBuf,
    /// The source every connection is scoped to ([`Store::scoped_to`]), if any.
    scope: Option<i64>,
    /// The SQLite file's device and inode when it was opened (none on a server): every
    /// connection is refused once the path names another file or none ([`StoreError::Moved`]).
    identity: Option<(u64, u64)>,
    /// The text dictionaries read so far, shared by every connection ([`texts`]).
    dictionaries: Arc<texts::Dictionaries>,
}

/// The connections of one engine.
#[derive(Clone)]
enum Pool {
    Sqlite(r2d2::Pool<SqliteConnectionManager>),
    #[cfg(feature = "postgres")]
    Postgres(r2d2::Pool<server::Manager>),
}

/// How long a connection waits for another process's write lock before giving up.
pub(in crate::store) const BUSY_TIMEOUT_MS: u32 = 30_000;

/// How long [`Store::flush_wal`] waits to empty the write-ahead log, keeping writers out
/// meanwhile, before it settles for copying what readers allow.
pub const FLUSH_WAIT_MS: u64 = 250;

impl Store {
    /// Opens (creating when absent, with mode 0600) the database at `path` and brings its
    /// schema up to date. For commands that write; the others take [`Store::open_existing`].
    ///
    /// A path that is a `postgres://` (or `postgresql://`) URL opens that server's database
    /// instead ([`server`]), which must exist (a server's databases are made by its
    /// administrator); its schema is created or brought up to date all the same.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        check_usable(path)?;
        #[cfg(feature = "postgres")]
        if let Some(url) = path.to_str().filter(|_| Store::is_server(path)) {
            return Store::open_postgres(url);
        }
        let created = create_private_file(path).map_err(|source| StoreError::Create { path: path.to_owned(), source })?;
        if created {
            // 8 KiB pages suit rows of about a kilobyte (a message): 6% faster imports and an
            // 8% smaller file than SQLite's 4 KiB default. Only settable before WAL is on.
            // Free pages are kept until `sessiondb compact` gives them back in short steps
            // (SQLite's incremental mode, settable only before the first table): see
            // [`compact`].
            let conn = rusqlite::Connection::open(path)?;
            conn.execute_batch("PRAGMA page_size = 8192; PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL;")?;
        }
        probe(path)?;
        let identity = file_identity(path).ok_or_else(|| StoreError::Moved { path: path.to_owned() })?;
        // Each pooled connection is used by one thread at a time, so SQLite's own mutexes are
        // pure overhead (about 5% of an import). The file exists by now, made private above:
        // a pooled connection never creates one (where the file was moved away from, say).
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let manager = SqliteConnectionManager::file(path).with_flags(flags).with_init(|c| {
            c.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS as u64))?;
            c.set_prepared_statement_cache_capacity(128);
            // SQLite checkpoints the WAL into the database (with an fsync) whenever the last
            // connection closes: per CLI run that is most of the cost of a one-message append.
            // Automatic checkpoints during commits already keep the WAL bounded.
            // Reads go through a memory map of the file (`mmap_size`, at most SQLite's own
            // bound of 2 GiB): a page is read in place rather than copied into the page cache,
            // which was the most of a search's time in a fresh process (10–20% of `search`).
            c.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
            fts::register_functions(c)?;
            c.execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA foreign_keys = ON;
                 PRAGMA synchronous = NORMAL;
                 PRAGMA cache_size = -32768;
                 PRAGMA journal_size_limit = 16777216;
                 PRAGMA mmap_size = 2147418112;",
            )
        });
        // Connections open on demand: a CLI run needs one, a long-running process a few.
        let pool = r2d2::Pool::builder().max_size(4).min_idle(Some(0)).build(manager)?;
        let mut conn = pool.get()?;
        schema::migrate(&mut conn)?;
        drop(conn);
        Ok(Store { pool: Pool::Sqlite(pool), path: path.to_owned(), scope: None, identity: Some(identity), dictionaries: Default::default() })
    }

    /// Opens the PostgreSQL database at `url` and brings its schema up to date
    /// ([`schema::migrate_postgres`]). The first connection is made outside the pool, so that
    /// a server that cannot be reached fails at once with what it said, and then given to the
    /// pool.
    #[cfg(feature = "postgres")]
    fn open_postgres(url: &str) -> Result<Store, StoreError> {
        let (manager, conn) = Connection::connect_server_with(url)?;
        schema::migrate_postgres(&conn)?;
        // Idle again (each migration committed, the lock released): the pool's first.
        if let Inner::PostgresPlain(client) = conn.0 {
            manager.keep(client);
        }
        let pool = r2d2::Pool::builder().max_size(4).min_idle(Some(0)).connection_timeout(std::time::Duration::from_secs(30)).build_unchecked(manager);
        Ok(Store { pool: Pool::Postgres(pool), path: PathBuf::from(url), scope: None, identity: None, dictionaries: Default::default() })
    }

    /// [`Store::open`] a database that must exist already: a path where there is none is
    /// [`StoreError::NoDatabase`], and nothing is created (a mistyped `--db` must not look like
    /// an empty history). A server's database always exists once it can be connected to (its
    /// administrator makes it; a mistyped name is refused by the server).
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        check_usable(path)?;
        if !Store::is_server(path) && std::fs::symlink_metadata(path).is_err() {
            return Err(StoreError::NoDatabase { path: path.to_owned() });
        }
        Store::open(path)
    }

    /// Fails with [`StoreError::Moved`] when the SQLite file opened is no longer at its path.
    pub fn check_in_place(&self) -> Result<(), StoreError> {
        match self.identity {
            Some(id) if file_identity(&self.path) != Some(id) => Err(StoreError::Moved { path: self.path.clone() }),
            _ => Ok(()),
        }
    }

    /// The same database opened afresh (new connections, a new look at its schema), for a
    /// process that runs for hours: never created anew, and refused when the path names
    /// another file than the one this store opened ([`StoreError::Moved`]).
    pub fn reopen(&self) -> Result<Store, StoreError> {
        self.check_in_place()?;
        let fresh = match Store::open_existing(&self.path) {
            Err(StoreError::NoDatabase { path }) => return Err(StoreError::Moved { path }),
            opened => opened?,
        };
        if fresh.identity != self.identity {
            return Err(StoreError::Moved { path: self.path.clone() });
        }
        Ok(fresh)
    }

    /// A connection from the pool: unscoped, or scoped to the store's source when it is kept
    /// to one ([`Store::scoped_to`]).
    pub fn connection(&self) -> Result<Connection, StoreError> {
        self.check_in_place()?;
        let inner = match &self.pool {
            Pool::Sqlite(pool) => Inner::Pooled(pool.get()?),
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool) => Inner::Postgres(pool.get()?),
        };
        Ok(Connection(inner, std::cell::Cell::new(self.scope), self.dictionaries.clone()))
    }

    /// This store with every connection it gives scoped to source `source_id`
    /// ([`Connection::scope_to`]): the operations handed it find conversations by chat id in
    /// that source only, and write into it. For a server of one logs root (`serve`), where a
    /// chat id is always one of that root's conversations.
    pub fn scoped_to(&self, source_id: i64) -> Store {
        Store { scope: Some(source_id), ..self.clone() }
    }

    /// The source this store's connections are scoped to ([`Store::scoped_to`]), if any.
    pub fn scope(&self) -> Option<i64> {
        self.scope
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How `db` is shown in messages: a file's path, or a server's URL without its password.
    pub fn shown(db: &Path) -> String {
        #[cfg(feature = "postgres")]
        if Store::is_server(db) {
            return server::redacted(&db.to_string_lossy());
        }
        db.display().to_string()
    }

    /// Whether `db` names a server's database (a `postgres://` or `postgresql://` URL, in a
    /// build with PostgreSQL) rather than an SQLite file.
    pub fn is_server(db: &Path) -> bool {
        cfg!(feature = "postgres") && matches!(url_scheme(db), Some("postgres" | "postgresql"))
    }

    /// Moves what it can of the write-ahead log into the database, and empties the log when no
    /// reader still needs it. Call after a large write (an import, a sync pass): connections do
    /// not checkpoint on close (that would cost every small command an fsync), and a long log
    /// must otherwise be re-read by the next process that opens the database.
    ///
    /// Never holds other processes up for long: emptying the log (SQLite's TRUNCATE
    /// checkpoint) keeps every writer out until the last reader of an older snapshot is done,
    /// so it is only waited for [`FLUSH_WAIT_MS`]; past that, the log is copied as far as
    /// readers allow without taking any lock (PASSIVE), and SQLite empties it at a later write.
    /// A server has no such log: there it does nothing.
    pub fn flush_wal(&self) -> Result<(), StoreError> {
        let conn = self.connection()?;
        let Some(sql) = conn.sqlite() else { return Ok(()) };
        sql.busy_timeout(std::time::Duration::from_millis(FLUSH_WAIT_MS))?;
        let truncated = sql.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
        sql.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS as u64))?;
        if truncated? != 0 {
            sql.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        }
        Ok(())
    }
}

impl Store {
    /// Brings the ranking index ([`ranking`]) up to the store, waiting for another process's
    /// catch-up if one runs: for commands that write many messages (`import`, `sync`), after
    /// they commit, so that the searches after them need not. `progress` is told the messages
    /// added so far, every 10,000. Returns how many were added.
    pub fn catch_up_ranking(&self, progress: &mut dyn FnMut(u64)) -> Result<u64, ranking::RankingError> {
        let conn = self.connection()?;
        let Some(index) = ranking::RankingIndex::of(&conn)? else { return Ok(0) };
        Ok(index.catch_up(&conn, std::time::Duration::from_secs(600), progress)?.unwrap_or(0))
    }

    /// Brings the word and substring indexes up to the messages (see [`fts::catch_up`]): after
    /// an import's unindexed batches, or one killed before it indexed them. `progress` is told
    /// (messages indexed so far, messages behind at the start) after each step. Returns how many
    /// were indexed.
    pub fn catch_up_search_indexes(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<u64, StoreError> {
        fts::catch_up(&self.connection()?, progress)
    }

    /// Messages stored but not yet in the word or substring index ([`fts::behind`]): zero but
    /// while an import builds them, or after one was stopped before it was done.
    pub fn search_indexes_behind(&self) -> Result<u64, StoreError> {
        fts::behind(&self.connection()?)
    }

    /// A thread that catches up, each time it is told a batch has committed
    /// ([`IndexFollower::committed`]), the derived indexes that can be built beside a writer, so
    /// that a long writer (an import, a sync pass reading many conversations) builds them on the
    /// other core as it goes rather than after: on SQLite the ranking index (the word and
    /// substring indexes are written under SQLite's one write lock, so by the writer itself); on
    /// a server the word and trigram sets, which are written beside the writers. The thread
    /// starts at the first commit: a writer that commits once (most sync passes) starts none.
    pub fn follow_indexes(&self) -> IndexFollower {
        IndexFollower { store: self.clone(), committed: None, thread: None }
    }
}

/// See [`Store::follow_indexes`]. Dropped, it lets its thread finish the catch-up under way
/// and waits for it (what was committed after is left to the writer's own catch-up).
pub struct IndexFollower {
    store: Store,
    committed: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl IndexFollower {
    /// Tells the thread a batch has committed, starting it the first time.
    pub fn committed(&mut self) {
        let committed = self.committed.get_or_insert_with(|| {
            let (committed, commits) = std::sync::mpsc::channel::<()>();
            let store = self.store.clone();
            self.thread = Some(std::thread::spawn(move || {
                while commits.recv().is_ok() {
                    while commits.try_recv().is_ok() {}
                    // The indexes are derived: a failure here is met again, and told, by the
                    // writer's own catch-up at its end, and searches answer meanwhile (from the
                    // word index, or saying what they could not look at).
                    if Store::is_server(&store.path) {
                        let _ = store.catch_up_search_indexes(&mut |_, _| {});
                    } else {
                        let _ = store.catch_up_ranking(&mut |_| {});
                    }
                }
            }));
            committed
        });
        let _ = committed.send(());
    }
}

impl Drop for IndexFollower {
    fn drop(&mut self) {
        drop(self.committed.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Fails at once, naming `path`, when it cannot name a database: a URL of another kind than a
/// server's ([`Store::is_server`]; `mysql://…`, which as a path would create `./mysql:/…`), or
/// a directory (the pool would otherwise retry
/// opening it for its whole connection timeout).
pub fn check_usable(path: &Path) -> Result<(), StoreError> {
    if Store::is_server(path) {
        return Ok(());
    }
    if let Some(scheme) = url_scheme(path) {
        return Err(StoreError::Url { url: path.display().to_string(), scheme: scheme.to_owned() });
    }
    if path.is_dir() {
        return Err(StoreError::NotADatabase { path: path.to_owned(), why: "it is a directory; give the database file".into() });
    }
    Ok(())
}

/// The scheme of a path written as a URL (`SCHEME://…`, the scheme a letter then letters,
/// digits, `+`, `-` or `.`, as RFC 3986 has it), if it is one.
fn url_scheme(path: &Path) -> Option<&str> {
    let (scheme, _) = path.to_str()?.split_once("://")?;
    let mut chars = scheme.chars();
    let url = chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    url.then_some(scheme)
}

/// Opens `path` once, outside the pool, and reads its header, so that a file SQLite cannot
/// use fails at once with what is wrong, instead of the pool retrying it until its timeout.
fn probe(path: &Path) -> Result<(), StoreError> {
    let not_a_database = |e: rusqlite::Error| {
        let why = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => "it is not an SQLite database file".to_owned(),
            _ => e.to_string(),
        };
        StoreError::NotADatabase { path: path.to_owned(), why }
    };
    let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(not_a_database)?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS as u64)).map_err(not_a_database)?;
    conn.query_row("PRAGMA schema_version", [], |_| Ok(())).map_err(not_a_database)
}

/// The device and inode of the file at `path` (links followed), if there is one.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Creates the database file (and its parent directories) readable by the owner only; an
/// existing file is left as it is. Returns whether it created the file.
fn create_private_file(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.exists() {
        return Ok(false);
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// The default database path: `$XDG_DATA_HOME/sessiondb/sessions.db`, else
/// `~/.local/share/sessiondb/sessions.db`.
pub fn default_db_path() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("sessiondb").join("sessions.db"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flush while a reader holds an old snapshot (a long `search`, a `list` piped to a pager)
    /// neither waits for that reader nor keeps writers out meanwhile; the log is emptied by a
    /// later flush once the reader is gone. (SQLite's TRUNCATE checkpoint alone waited the
    /// whole busy timeout, 30 s, with every writer held off.)
    #[test]
    fn a_flush_never_holds_writers_behind_a_long_reader() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let write = |n: i64| {
            store
                .connection()
                .unwrap()
                .execute("INSERT INTO store_state (key, value) VALUES ('test', ?1) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [n])
                .unwrap()
        };
        write(1);
        let reader = store.connection().unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader.query_row("SELECT count(*) FROM conversations", (), |r| r.get(0)).unwrap();
        write(2); // the reader's snapshot is now an old one
        let started = std::time::Instant::now();
        let flushing = std::thread::scope(|scope| {
            let flush = scope.spawn(|| store.flush_wal());
            std::thread::sleep(std::time::Duration::from_millis(50));
            let writer_started = std::time::Instant::now();
            write(3);
            let writer_waited = writer_started.elapsed();
            flush.join().unwrap().unwrap();
            writer_waited
        });
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(10), "the flush waited {took:?} for a reader");
        assert!(flushing < std::time::Duration::from_secs(10), "a writer waited {flushing:?} behind the flush");
        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        store.flush_wal().unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("db-wal")).map(|m| m.len()).unwrap_or(0), 0, "emptied once no reader needs it");
    }

    /// A URL given as the database is refused before anything is created (it would otherwise
    /// make `./postgres:/…`); paths that merely hold `://` further in, or no scheme, are paths.
    #[test]
    fn a_url_is_not_taken_for_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        for url in ["sqlite:///tmp/x.db", "file://x", "mysql://me@localhost/x"] {
            let e = Store::open(Path::new(url)).err().expect(url);
            assert!(matches!(&e, StoreError::Url { .. }), "{url}: {e}");
            let scheme = url.split("://").next().unwrap();
            assert_eq!(
                e.to_string(),
                format!(
                    "{url} is a URL of a kind sessiondb does not open: give an SQLite file's path, or a postgres:// URL; {scheme}:// databases are not supported"
                )
            );
            assert!(!cwd.join(format!("{scheme}:")).exists(), "{url} made a directory");
        }
        // A PostgreSQL URL is a server's database: one that cannot be reached is said at once,
        // without the password, and nothing is made on disk.
        for url in ["postgres://me:pw@127.0.0.1:1/sessions", "postgresql://me:pw@127.0.0.1:1/x?connect_timeout=5"] {
            let e = Store::open(Path::new(url)).err().expect(url);
            assert!(matches!(&e, StoreError::Server { .. }), "{url}: {e}");
            assert!(e.to_string().starts_with("cannot connect to "), "{e}");
            assert!(!e.to_string().contains("pw"), "{e}");
            assert!(!cwd.join(url.split("://").next().unwrap().to_owned() + ":").exists(), "{url} made a directory");
        }
        let e = Store::open(Path::new("postgres://me@127.0.0.1:1/x?sslmode=bogus")).err().expect("a bad option");
        assert!(matches!(&e, StoreError::BadUrl { .. }), "{e}");
        for path in [dir.path().join("a://b"), dir.path().join("plain.db")] {
            assert_eq!(url_scheme(&path), None, "{}", path.display());
        }
        assert_eq!(url_scheme(Path::new("1x://y")), None);
        assert!(Store::is_server(Path::new("postgresql://x")) && Store::is_server(Path::new("postgres://x")));
        assert!(!Store::is_server(Path::new("/tmp/postgres.db")) && !Store::is_server(Path::new("mysql://x")));
        assert_eq!(url_scheme(Path::new("://y")), None);
    }

    /// SQLite's message is worded once, without rusqlite's bare result code after it.
    #[test]
    fn a_database_error_is_worded_once() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let e = StoreError::from(conn.execute("INSERT INTO missing VALUES (1)", []).unwrap_err());
        assert_eq!(crate::cause::chain(&e), "database error: no such table: missing");
    }
}
