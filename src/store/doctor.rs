//! `sessiondb doctor`'s checks of the database itself: SQLite's integrity, the schema version,
//! rows that nothing refers to, every blob's bytes against its SHA-256, the search indexes, and
//! listing totals that disagree with the messages they summarise.
//!
//! Everything here only reads. It works on a plain connection, not through [`super::Store`],
//! so that a database that cannot be migrated (a newer schema) or barely opens (a damaged
//! file) can still be examined. On a PostgreSQL server the checks of the file itself (its pages,
//! its foreign keys) are the server's own, always enforced, and are not made; the others are the
//! same, but for the search indexes, which are the server's sets ([`super::text_terms`]).

use std::path::Path;

use super::schema::CURRENT_VERSION;
use super::sql::{params, Engine};
use super::{blobs, modify, Connection, DocumentKind, StoreError};

/// What the database checks found.
#[derive(Debug, Default)]
pub struct DatabaseReport {
    pub schema_version: i64,
    pub supported_version: i64,
    pub conversations: i64,
    pub messages: i64,
    /// Messages not yet in the word or substring index ([`super::fts::behind`]): an import
    /// builds them after its rows, and the next search or write catches up one stopped before
    /// it was done. Not a problem.
    pub unindexed: i64,
    /// Things that are wrong.
    pub problems: Vec<Problem>,
}

/// One thing wrong with the database; shown (`Display`) as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The database cannot be opened or read at all (`detail`: why).
    Unreadable(String),
    /// A schema newer than this sessiondb supports: nothing else was checked.
    NewerSchema { version: i64, supported: i64 },
    /// A schema older than the current one (any other command migrates it): the checks that
    /// need the current schema were not made.
    OlderSchema { version: i64, supported: i64 },
    /// The full-text index fails its own integrity check (`detail`: SQLite's error).
    FullTextIndexCheck(String),
    /// The substring index (derived, rebuilt in place) fails its own integrity check.
    SubstringIndexCheck(String),
    /// One finding of a check that lists what it finds (`detail`: what and where).
    Found { check: Check, detail: String },
    /// Findings of `check` beyond the ones listed one by one, counted.
    More { check: Check, count: usize },
}

/// The checks that list what they find, one [`Problem::Found`] each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// SQLite's `PRAGMA integrity_check`.
    Integrity,
    ForeignKey,
    /// The full-text index's own check.
    FullTextIndex,
    /// The substring index holds another number of messages than its watermark says.
    SubstringIndex,
    /// The ranking index (`store::ranking`, beside the database) does not hold what its mark says.
    RankingIndex,
    /// A server's search sets miss a message, or their totals disagree with their rows.
    SearchSets,
    OrphanedMessage,
    OrphanedBlob,
    /// A blob that is not the file its key names: its chunks do not add up to its size, or its
    /// bytes do not hash to its SHA-256 (read whole, [`blobs::check`]).
    Blob,
    MissingBlob,
    /// A message text that cannot be read (its compressed form damaged, its dictionary
    /// missing), does not hash to its key, or is missing for a message ([`super::texts`]).
    Text,
    /// A message whose metadata is kept in its row's columns ([`super::metadata_columns`]) and
    /// cannot be rebuilt from them: a shape this build does not write, or a column it needs empty.
    MessageMetadata,
    /// A text no message holds (a write stopped before it removed it): harmless, takes room.
    OrphanedText,
    Document,
    ListingTotals,
}

impl Check {
    /// How a finding of this check is introduced.
    pub fn label(self) -> &'static str {
        match self {
            Check::Integrity => "SQLite integrity check",
            Check::ForeignKey => "foreign key",
            Check::FullTextIndex => "full-text index",
            Check::SubstringIndex => "substring index",
            Check::RankingIndex => "ranking index",
            Check::SearchSets => "search index",
            Check::OrphanedMessage => "orphaned message",
            Check::OrphanedBlob => "orphaned blob",
            Check::Blob => "blob",
            Check::MissingBlob => "missing blob",
            Check::Text => "message text",
            Check::MessageMetadata => "message metadata",
            Check::OrphanedText => "orphaned message text",
            Check::Document => "document",
            Check::ListingTotals => "listing totals",
        }
    }
}

impl Problem {
    /// Whether the problem means the file itself is damaged: then only a rebuild helps, and
    /// its rows cannot be trusted.
    pub fn is_damage(&self) -> bool {
        match self {
            Problem::Unreadable(_) | Problem::FullTextIndexCheck(_) => true,
            Problem::Found { check, .. } | Problem::More { check, .. } => matches!(check, Check::Integrity | Check::FullTextIndex),
            // Derived from the rows and rebuilt in place (`doctor --reindex`): the rows are sound.
            Problem::NewerSchema { .. } | Problem::OlderSchema { .. } | Problem::SubstringIndexCheck(_) => false,
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Unreadable(detail) => write!(f, "the database cannot be read: {detail}"),
            Problem::NewerSchema { version, supported } => write!(
                f,
                "the database uses schema version {version}, newer than this sessiondb supports ({supported}): upgrade sessiondb; nothing else was checked"
            ),
            Problem::OlderSchema { version, supported } => {
                write!(f, "schema version {version} is older than {supported}: any other sessiondb command brings it up to date")
            }
            Problem::FullTextIndexCheck(detail) => write!(f, "full-text index: {detail} (rebuild it with `sessiondb import` into a new database)"),
            Problem::SubstringIndexCheck(detail) => write!(f, "substring index: {detail} (rebuild it with `sessiondb doctor --reindex`)"),
            Problem::Found { check: check @ (Check::SubstringIndex | Check::RankingIndex | Check::SearchSets), detail } => {
                write!(f, "{}: {detail} (rebuild it with `sessiondb doctor --reindex`)", check.label())
            }
            Problem::Found { check, detail } => write!(f, "{}: {detail}", check.label()),
            Problem::More { check, count } => write!(f, "{}: {count} more", check.label()),
        }
    }
}

/// How many problems of one kind are listed one by one; the rest are counted.
const LIST_AT_MOST: usize = 20;

fn push_all(problems: &mut Vec<Problem>, check: Check, items: Vec<String>) {
    let n = items.len();
    for detail in items.into_iter().take(LIST_AT_MOST) {
        problems.push(Problem::Found { check, detail });
    }
    if n > LIST_AT_MOST {
        problems.push(Problem::More { check, count: n - LIST_AT_MOST });
    }
}

fn strings(conn: &Connection, sql: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map((), |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Opens the database at `path` for [`check_database`] and other reads (`sync::status`): a plain
/// connection, not through [`super::Store`] and not migrated, that waits up to 30 s for another
/// process's write lock. Fails only when SQLite cannot open the file at all, or the server
/// cannot be reached.
pub fn open_unmigrated(path: &Path) -> Result<Connection, StoreError> {
    #[cfg(feature = "postgres")]
    if super::Store::is_server(path) {
        return Connection::connect_server(&path.to_string_lossy());
    }
    let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    super::fts::register_functions(&conn)?;
    Ok(Connection::plain(conn))
}

/// Where [`check_database_with`] is, for a progress display: the check it starts, and for the
/// checks made conversation by conversation, how many of `total` are `done` (else both 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub check: Check,
    pub done: u64,
    pub total: u64,
}

/// Runs every database check. Fails only when the database cannot be read at all.
pub fn check_database(conn: &Connection) -> Result<DatabaseReport, StoreError> {
    check_database_with(conn, &mut |_| {})
}

/// [`check_database`], telling `progress` each [`Step`] as it is reached.
pub fn check_database_with(conn: &Connection, progress: &mut dyn FnMut(Step)) -> Result<DatabaseReport, StoreError> {
    let mut starting = |check: Check| progress(Step { check, done: 0, total: 0 });
    let server = conn.engine() == Engine::Postgres;
    let supported = supported_version(conn);
    let mut report = DatabaseReport { supported_version: supported, ..DatabaseReport::default() };
    report.schema_version = schema_version(conn)?;
    if report.schema_version > supported {
        report.problems.push(Problem::NewerSchema { version: report.schema_version, supported });
        return Ok(report);
    }
    if server {
        if report.schema_version < supported {
            report.problems.push(Problem::OlderSchema { version: report.schema_version, supported });
            return Ok(report);
        }
        count(conn, &mut report)?;
        starting(Check::SearchSets);
        report.unindexed = super::fts::behind(conn)? as i64;
        push_all(&mut report.problems, Check::SearchSets, strings(conn, SEARCH_SETS_CHECK)?);
    } else {
        if !check_file(conn, &mut report, &mut starting)? {
            return Ok(report);
        }
    }
    check_rows(conn, &mut report, progress)?;
    Ok(report)
}

/// The report's counts of conversations and messages.
fn count(conn: &Connection, report: &mut DatabaseReport) -> Result<(), StoreError> {
    report.conversations = conn.query_row("SELECT count(*) FROM conversations", (), |r| r.get(0))?;
    report.messages = conn.query_row("SELECT count(*) FROM messages WHERE role IS NOT NULL", (), |r| r.get(0))?;
    Ok(())
}

/// What the search sets of a server miss, or count wrong: a message neither in them nor waiting
/// for them, and totals (for bm25) other than their rows add up to.
const SEARCH_SETS_CHECK: &str = "SELECT count(*) || ' texts are neither in it nor waiting for it'
     FROM texts x
     WHERE NOT EXISTS (SELECT 1 FROM text_terms t WHERE t.text_id = x.id)
       AND NOT EXISTS (SELECT 1 FROM text_terms_pending p WHERE p.text_id = x.id)
     HAVING count(*) > 0
     UNION ALL
     SELECT 'its totals count ' || t.documents || ' texts of ' || t.tokens || ' words, its rows ' || r.documents || ' of ' || r.tokens
     FROM text_terms_totals t, (SELECT count(*) AS documents, coalesce(sum(length), 0) AS tokens FROM text_terms) r
     WHERE t.documents != r.documents OR t.tokens != r.tokens";

/// The schema version this sessiondb writes on `conn`'s engine.
fn supported_version(conn: &Connection) -> i64 {
    #[cfg(feature = "postgres")]
    if conn.engine() == Engine::Postgres {
        return super::schema::POSTGRES_VERSION;
    }
    let _ = conn;
    CURRENT_VERSION
}

/// The schema version of `conn`'s database (0 for a server's database sessiondb never used).
fn schema_version(conn: &Connection) -> Result<i64, StoreError> {
    #[cfg(feature = "postgres")]
    if conn.engine() == Engine::Postgres {
        return super::schema::postgres_version(conn);
    }
    Ok(conn.query_row("PRAGMA user_version", (), |r| r.get(0))?)
}

/// The checks of an SQLite file itself, made before its rows are trusted: its integrity, its
/// foreign keys, and (at the current schema) its search indexes. Returns whether the rows can
/// be checked next: not in a damaged file, nor at an older schema.
fn check_file(conn: &Connection, report: &mut DatabaseReport, starting: &mut dyn FnMut(Check)) -> Result<bool, StoreError> {
    let supported = report.supported_version;
    starting(Check::Integrity);
    let integrity = strings(conn, "PRAGMA integrity_check")?;
    if integrity != ["ok"] {
        push_all(&mut report.problems, Check::Integrity, integrity);
        // Nothing else can be trusted in a damaged file.
        return Ok(false);
    }
    starting(Check::ForeignKey);
    push_all(
        &mut report.problems,
        Check::ForeignKey,
        strings(conn, "SELECT \"table\" || ' row ' || coalesce(rowid, '?') || ' refers to a missing ' || parent FROM pragma_foreign_key_check")?,
    );
    if report.schema_version < supported {
        report.problems.push(Problem::OlderSchema { version: report.schema_version, supported });
        return Ok(false);
    }
    count(conn, report)?;
    starting(Check::FullTextIndex);
    if let Err(e) = conn.execute("INSERT INTO texts_fts (texts_fts) VALUES ('integrity-check')", ()) {
        report.problems.push(Problem::FullTextIndexCheck(e.to_string()));
    }
    // Messages past a watermark are not damage: an import builds the indexes after its rows,
    // and the next search or write catches up one stopped before it was done.
    report.unindexed = super::fts::behind(conn)? as i64;
    // The substring index is contentless, so its own check cannot see rows gone missing: its
    // row count (one per text, kept in its docsize table) is compared with the watermark's.
    starting(Check::SubstringIndex);
    match conn.execute("INSERT INTO texts_substring (texts_substring) VALUES ('integrity-check')", ()) {
        Err(e) => report.problems.push(Problem::SubstringIndexCheck(e.to_string())),
        Ok(_) => push_all(
            &mut report.problems,
            Check::SubstringIndex,
            strings(
                conn,
                "SELECT 'it holds ' || indexed || ' texts of the ' || stored || ' it should'
                 FROM (SELECT (SELECT count(*) FROM texts_substring_docsize) AS indexed,
                              (SELECT count(*) FROM texts WHERE id <= (SELECT value FROM store_state WHERE key = 'substring_indexed_upto')) AS stored)
                 WHERE indexed != stored",
            )?,
        ),
    }
    starting(Check::RankingIndex);
    push_all(&mut report.problems, Check::RankingIndex, super::ranking::check(conn)?);
    Ok(true)
}

/// The checks of the rows, on either engine: rows nothing refers to, blobs, documents, and the
/// listing totals.
fn check_rows(conn: &Connection, report: &mut DatabaseReport, progress: &mut dyn FnMut(Step)) -> Result<(), StoreError> {
    progress(Step { check: Check::OrphanedMessage, done: 0, total: 0 });
    push_all(
        &mut report.problems,
        Check::OrphanedMessage,
        strings(
            conn,
            "SELECT c.chat_id || ': message row ' || m.id || ' is in no branch, view or event'
             FROM messages m JOIN conversations c ON c.id = m.conversation_id
             WHERE NOT EXISTS (SELECT 1 FROM document_lines dl WHERE dl.message_id = m.id)
               AND NOT EXISTS (SELECT 1 FROM event_messages em WHERE em.message_id = m.id)",
        )?,
    );
    push_all(
        &mut report.problems,
        Check::OrphanedBlob,
        strings(
            conn,
            "SELECT hex(sha256) || ' is part of no conversation' FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.blob_sha256 = b.sha256)",
        )?,
    );
    push_all(&mut report.problems, Check::Blob, unsound_blobs(conn, progress)?);
    push_all(
        &mut report.problems,
        Check::MissingBlob,
        strings(
            conn,
            "SELECT c.chat_id || ': ' || e.path || ' has no content' FROM entries e JOIN conversations c ON c.id = e.conversation_id
             WHERE e.kind = 'blob' AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = e.blob_sha256)",
        )?,
    );
    push_all(&mut report.problems, Check::Text, unsound_texts(conn, progress)?);
    push_all(&mut report.problems, Check::MessageMetadata, unsound_metadata(conn)?);
    push_all(
        &mut report.problems,
        Check::OrphanedText,
        strings(
            conn,
            "SELECT 'text ' || t.id || ' is held by no message' FROM texts t
             WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.text_id = t.id) AND NOT EXISTS (SELECT 1 FROM texts_let_go g WHERE g.text_id = t.id)",
        )?,
    );
    progress(Step { check: Check::Document, done: 0, total: 0 });
    push_all(
        &mut report.problems,
        Check::Document,
        strings(
            conn,
            "SELECT c.chat_id || ': ' || e.path || ' has no lines record' FROM entries e JOIN conversations c ON c.id = e.conversation_id
             WHERE e.kind = 'document' AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.conversation_id = e.conversation_id AND d.path = e.path)
             UNION ALL
             SELECT c.chat_id || ': ' || d.path || ' has ' || d.line_count || ' lines recorded but ' ||
                    (d.base_len + (SELECT count(*) FROM document_lines dl WHERE dl.document_id = d.id AND dl.line_no >= d.base_len)) || ' stored'
             FROM documents d JOIN conversations c ON c.id = d.conversation_id
             WHERE d.kind IN ('branch', 'view', 'lossless')
               AND d.line_count != d.base_len + (SELECT count(*) FROM document_lines dl WHERE dl.document_id = d.id AND dl.line_no >= d.base_len)
             UNION ALL
             SELECT c.chat_id || ': ' || d.path || ' has ' || (SELECT count(*) FROM document_lines dl WHERE dl.document_id = d.id AND dl.line_no < d.base_len)
                    || ' rows of its own among the ' || d.base_len || ' lines it borrows'
             FROM documents d JOIN conversations c ON c.id = d.conversation_id
             WHERE EXISTS (SELECT 1 FROM document_lines dl WHERE dl.document_id = d.id AND dl.line_no < d.base_len)
             UNION ALL
             SELECT c.chat_id || ': ' || d.path || ' borrows ' || d.base_len || ' lines from ' || coalesce(b.path, 'document ' || coalesce(CAST(d.base_id AS TEXT), 'none')) || ', which ' ||
                    CASE WHEN (d.base_id IS NULL) != (d.base_len = 0) THEN 'cannot be: a base and a length go together'
                         WHEN b.id IS NULL OR b.conversation_id != d.conversation_id THEN 'is not one of its conversation''s documents'
                         WHEN b.base_id IS NOT NULL THEN 'borrows lines itself'
                         ELSE 'holds ' || (SELECT count(*) FROM document_lines dl WHERE dl.document_id = b.id AND dl.line_no < d.base_len) || ' of them' END
             FROM documents d JOIN conversations c ON c.id = d.conversation_id LEFT JOIN documents b ON b.id = d.base_id
             WHERE (d.base_id IS NULL) != (d.base_len = 0)
                OR d.base_id IS NOT NULL AND (b.id IS NULL OR b.conversation_id != d.conversation_id OR b.base_id IS NOT NULL
                    OR d.base_len != (SELECT count(*) FROM document_lines dl WHERE dl.document_id = b.id AND dl.line_no < d.base_len))",
        )?,
    );
    push_all(&mut report.problems, Check::ListingTotals, totals_disagreements(conn, progress)?);
    Ok(())
}

/// How many blobs [`unsound_blobs`] lists per query: its memory does not grow with the store.
const BLOB_PAGE: i64 = 256;

/// Every blob that is not the file its key names: its chunks do not add up to its size (or
/// skip a number), or, read whole, its bytes do not hash to its key ([`blobs::check`]). Each is
/// named with the conversations that hold it and, on a server, the role that wrote it. Reads
/// every blob's bytes, a page of blobs and a chunk at a time.
fn unsound_blobs(conn: &Connection, progress: &mut dyn FnMut(Step)) -> Result<Vec<String>, StoreError> {
    let total: i64 = conn.query_row("SELECT count(*) FROM blobs", (), |r| r.get(0))?;
    let mut out = Vec::new();
    let (mut after, mut done) = (i64::MIN, 0u64);
    loop {
        progress(Step { check: Check::Blob, done, total: total as u64 });
        let page: Vec<(i64, Vec<u8>, i64, i64, bool)> = conn
            .prepare_cached(
                "SELECT b.id, b.sha256, b.size, coalesce(sum(length(c.data)), 0), count(c.id) = coalesce(max(c.seq) + 1, 0)
                 FROM blobs b LEFT JOIN blob_chunks c ON c.blob_id = b.id WHERE b.id > ?1 GROUP BY b.id ORDER BY b.id LIMIT ?2",
            )?
            .query_map(params![after, BLOB_PAGE], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
            .collect::<Result<_, _>>()?;
        let Some(&(last, ..)) = page.last() else { return Ok(out) };
        for (id, sha256, size, stored, in_order) in page {
            done += 1;
            let why = match <[u8; 32]>::try_from(sha256.as_slice()) {
                Err(_) => format!("its key is {} bytes long, not a SHA-256", sha256.len()),
                Ok(_) if stored != size || !in_order => blobs::Unsound::Size { stored: stored as u64, size: size as u64 }.to_string(),
                Ok(key) => match blobs::check(conn, &key)? {
                    Ok(()) => continue,
                    Err(why) => why.to_string(),
                },
            };
            let holders: Vec<String> = conn
                .prepare_cached(&format!(
                    "SELECT DISTINCT {} AS source, c.chat_id FROM entries e JOIN conversations c ON c.id = e.conversation_id JOIN sources s ON s.id = c.source_id
                     WHERE e.blob_sha256 = ?1 ORDER BY source, c.chat_id",
                    super::sources::label_sql(conn.engine())
                ))?
                .query_map([&sha256], |r| Ok(super::sources::qualified(&r.get::<_, String>(0)?, &r.get::<_, String>(1)?)))?
                .collect::<Result<_, _>>()?;
            let held = if holders.is_empty() { "no conversation".to_owned() } else { holders.join(", ") };
            let writer = blobs::writer(conn, id)?.map(|w| format!(" (written by role {w:?})")).unwrap_or_default();
            out.push(format!("{}: {why}; held by {held}{writer}", blobs::hex(&sha256)));
        }
        after = last;
    }
}

/// How many texts [`unsound_texts`] reads per query.
const TEXT_PAGE: i64 = 1_000;

/// Every message text that cannot be read, or reads as another text than its key says, each
/// named with the conversations (and message rows) that hold it; and every message that should
/// have a text and has none. Reads every text, a page at a time.
fn unsound_texts(conn: &Connection, progress: &mut dyn FnMut(Step)) -> Result<Vec<String>, StoreError> {
    let mut out: Vec<String> = strings(
        conn,
        "SELECT c.chat_id || ': message row ' || m.id || ' has no text' FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE m.role IS NOT NULL AND (m.text_id IS NULL OR NOT EXISTS (SELECT 1 FROM texts t WHERE t.id = m.text_id))",
    )?;
    let total: i64 = conn.query_row("SELECT count(*) FROM texts", (), |r| r.get(0))?;
    let (mut after, mut done) = (i64::MIN, 0u64);
    loop {
        progress(Step { check: Check::Text, done, total: total as u64 });
        let page: Vec<(i64, i64, Vec<u8>)> = conn
            .prepare_cached("SELECT id, hash, data FROM texts WHERE id > ?1 ORDER BY id LIMIT ?2")?
            .query_map(params![after, TEXT_PAGE], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        let Some(&(last, ..)) = page.last() else { return Ok(out) };
        for (id, hash, data) in page {
            done += 1;
            let why = match conn.decode_text(id, &data) {
                Err(e) => crate::cause::chain(&e),
                Ok(text) if super::texts::hash(&text) != hash => format!("text {id} does not hash to its key"),
                Ok(_) => continue,
            };
            let holders: Vec<String> = conn
                .prepare_cached(&format!(
                    "SELECT {} AS source, c.chat_id, min(m.id) FROM messages m JOIN conversations c ON c.id = m.conversation_id JOIN sources s ON s.id = c.source_id
                     WHERE m.text_id = ?1 GROUP BY source, c.chat_id ORDER BY source, c.chat_id",
                    super::sources::label_sql(conn.engine())
                ))?
                .query_map([id], |r| {
                    Ok(format!("{} (message row {})", super::sources::qualified(&r.get::<_, String>(0)?, &r.get::<_, String>(1)?), r.get::<_, i64>(2)?))
                })?
                .collect::<Result<_, _>>()?;
            let held = if holders.is_empty() { "no message".to_owned() } else { holders.join(", ") };
            out.push(format!("{why}; held by {held} (`sessiondb import` of those conversations' directories stores it again)"));
        }
        after = last;
    }
}

/// Every message row whose metadata is kept as a shape ([`super::metadata_columns`]) that its
/// columns cannot rebuild, or that holds its metadata as text as well, each named with its
/// conversation. Reads those rows a page at a time.
fn unsound_metadata(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let mut after = i64::MIN;
    loop {
        type Shaped = (i64, String, i64, bool, Option<String>, Option<f64>, [i64; 4]);
        let page: Vec<Shaped> = conn
            .prepare_cached(&format!(
                "SELECT m.id, {} || ':' || c.chat_id, m.metadata_shape, m.metadata IS NOT NULL, m.model, m.cost,
                        m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_creation_tokens
                 FROM messages m JOIN conversations c ON c.id = m.conversation_id JOIN sources s ON s.id = c.source_id
                 WHERE m.id > ?1 AND m.metadata_shape IS NOT NULL ORDER BY m.id LIMIT ?2",
                super::sources::label_sql(conn.engine())
            ))?
            .query_map(params![after, TEXT_PAGE], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, [r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?]))
            })?
            .collect::<Result<_, _>>()?;
        let Some(&(last, ..)) = page.last() else { return Ok(out) };
        for (id, chat, shape, as_text, model, cost, tokens) in page {
            let columns = super::metadata_columns::Columns { model: model.as_deref(), cost, tokens };
            let why = match super::metadata_columns::rebuild(shape, &columns) {
                Err(why) => why,
                Ok(_) if as_text => "it holds its metadata both as text and as a shape".to_owned(),
                Ok(_) => continue,
            };
            out.push(format!("{chat}: message row {id}: {why} (`sessiondb import` of the conversation's directory stores it again)"));
        }
        after = last;
    }
}

/// Conversations whose stored listing totals are not what their main branch's lines add up to.
fn totals_disagreements(conn: &Connection, progress: &mut dyn FnMut(Step)) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let ids: Vec<(i64, String)> =
        conn.prepare("SELECT id, chat_id FROM conversations ORDER BY chat_id")?.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
    let total = ids.len() as u64;
    for (done, (id, chat_id)) in ids.into_iter().enumerate() {
        progress(Step { check: Check::ListingTotals, done: done as u64, total });
        let Some(main) = modify::find_doc(conn, id, DocumentKind::Branch, crate::layout::MAIN)? else {
            out.push(format!("{chat_id}: no main branch (conversation.jsonl)"));
            continue;
        };
        let computed = match super::totals::recompute(conn, main.id) {
            Ok(computed) => computed,
            // A text that cannot be read is the texts check's finding; the totals wait for it.
            Err(e @ StoreError::Corrupt(_)) => {
                out.push(format!("{chat_id}: not added up, a message cannot be read ({})", crate::cause::chain(&e)));
                continue;
            }
            Err(e) => return Err(e),
        };
        let stored = super::totals::load(conn, id)?;
        let same_cost = computed.total_cost == stored.total_cost
            || (!computed.total_cost.is_finite() && !stored.total_cost.is_finite())
            || (computed.total_cost - stored.total_cost).abs() <= 1e-9 * computed.total_cost.abs().max(1.0);
        let mut differs = Vec::new();
        if computed.message_count != stored.message_count {
            differs.push(format!("{} messages stored, {} counted", stored.message_count, computed.message_count));
        }
        if !same_cost {
            differs.push(format!("cost {} stored, {} summed", stored.total_cost, computed.total_cost));
        }
        if (computed.input_tokens, computed.output_tokens, computed.cache_read_tokens) != (stored.input_tokens, stored.output_tokens, stored.cache_read_tokens) {
            differs.push("token totals differ".into());
        }
        if computed.role_counts != stored.role_counts {
            differs.push(format!("messages by role {:?} stored, {:?} counted", stored.role_counts, computed.role_counts));
        }
        if !differs.is_empty() {
            out.push(format!("{chat_id}: {}", differs.join("; ")));
        }
    }
    Ok(out)
}
