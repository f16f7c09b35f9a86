//! Sources: the logs roots a store's conversations are read from (schema 0014).
//!
//! A conversation is identified by its source and its chat id; the same chat id may be stored
//! once per source. Each source reads exactly one logs root and each root is read by one
//! source, so the directory a conversation is read from decides its source, and a reader of
//! root R can only ever reach R's rows: a [`Connection`] scoped to a source
//! ([`Connection::scope_to`]) sees, looks up and replaces the conversations of that source only,
//! and the writer refuses a directory outside its root ([`StoreError::OutsideSource`]).
//!
//! A command names a conversation as `SOURCE:CHAT` or by its bare chat id ([`resolve`]).

use std::path::{Path, PathBuf};

use super::sql::{params, OptionalExtension};

use super::{Connection, StoreError};

/// A logs root the store reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub id: i64,
    pub name: String,
    /// The absolute path of the logs root, as sync and import spell it.
    pub root: PathBuf,
}

/// This machine's name, for default source names (`hostname:path`); `localhost` when it has
/// none that can be read.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..len]) {
        Ok(name) if ok && !name.is_empty() => name.to_owned(),
        _ => "localhost".to_owned(),
    }
}

/// The name a logs root's source gets when none is given: `hostname:path`, the path made
/// canonical (symbolic links resolved) when it can be.
pub fn default_name(root: &Path) -> String {
    let path = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    format!("{}:{}", hostname(), path.display())
}

/// Whether `name` can name a source: not empty, no surrounding whitespace, no control
/// characters (it is printed in listings and typed in `SOURCE:CHAT`).
pub fn check_name(name: &str) -> Result<(), StoreError> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.trim() != name {
        "it starts or ends with whitespace"
    } else if name.chars().any(char::is_control) {
        "it has control characters"
    } else {
        return Ok(());
    };
    Err(StoreError::BadSourceName { name: name.to_owned(), why })
}

fn source_from_row(r: &super::sql::Row) -> super::sql::Result<Source> {
    Ok(Source { id: r.get(0)?, name: r.get(1)?, root: PathBuf::from(r.get::<_, String>(2)?) })
}

/// The source with row id `id`.
pub(in crate::store) fn by_id(conn: &Connection, id: i64) -> Result<Source, StoreError> {
    Ok(conn.prepare_cached("SELECT id, name, root FROM sources WHERE id = ?1")?.query_row([id], source_from_row)?)
}

fn by_root(conn: &Connection, root: &Path) -> Result<Option<Source>, StoreError> {
    Ok(conn.prepare_cached("SELECT id, name, root FROM sources WHERE root = ?1")?.query_row([root_text(root)?], source_from_row).optional()?)
}

/// `root` (absolute) as the store knows it: when no source reads that path but one reads the
/// same directory under another (through a link, or with `..` in it), that source's root;
/// else `root`. Callers read the directory by the path this returns, so that one directory is
/// always one source, whatever path names it.
pub fn known_root(conn: &Connection, root: &Path) -> Result<PathBuf, StoreError> {
    Ok(reading(conn, root)?.map_or_else(|| root_key(root), |s| s.root))
}

/// The source that reads logs root `root` (absolute): by that path, or the same directory
/// under another path; `None` when `root` is no logs root the store reads.
pub fn reading(conn: &Connection, root: &Path) -> Result<Option<Source>, StoreError> {
    use std::os::unix::fs::MetadataExt;
    if let Some(source) = by_root(conn, root)? {
        return Ok(Some(source));
    }
    let Ok(here) = std::fs::metadata(root) else { return Ok(None) };
    let same = |there: std::fs::Metadata| (there.dev(), there.ino()) == (here.dev(), here.ino());
    Ok(all(conn)?.into_iter().find(|source| std::fs::metadata(&source.root).is_ok_and(same)))
}

fn by_name(conn: &Connection, name: &str) -> Result<Option<Source>, StoreError> {
    Ok(conn.prepare_cached("SELECT id, name, root FROM sources WHERE name = ?1")?.query_row([name], source_from_row).optional()?)
}

/// Whether this connection may write source `source_id`, as the server judges it (schema 17):
/// on PostgreSQL a role writes a source when it is the source's `writer`, or owns the tables
/// (PostgreSQL never holds a table's owner by its row policies), or is a superuser or a role
/// that bypasses row security. [`StoreError::NotWriter`] otherwise, naming both roles. A role
/// that may not write at all (a reader's) is left to the server, whose refusal says so. SQLite
/// has no roles: always allowed there.
pub fn check_writer(conn: &Connection, source_id: i64) -> Result<(), StoreError> {
    if conn.engine() != super::sql::Engine::Postgres {
        return Ok(());
    }
    let found = conn
        .prepare_cached(
            "SELECT s.name, s.writer, current_user::text,
                    s.writer = current_user
                    OR NOT has_table_privilege('messages', 'INSERT')
                    OR (SELECT r.rolsuper OR r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user)
                    OR (SELECT c.relowner FROM pg_class c WHERE c.oid = 'conversations'::regclass) = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user)
             FROM sources s WHERE s.id = ?1",
        )?
        .query_row([source_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, bool>(3)?)))
        .optional()?;
    match found {
        Some((source_name, writer, role, false)) => Err(StoreError::NotWriter { source_name, writer, role }),
        _ => Ok(()), // allowed, or a source not (or not yet) there: the write decides
    }
}

/// A logs root as `sources.root` holds it: absolute, as given, without `.` components or a
/// trailing `/` (so that `logs/` and `logs` are one root). Symbolic links are not resolved:
/// conversation directories are recorded under the root as it was given.
pub fn root_key(root: &Path) -> PathBuf {
    root.components().collect()
}

fn root_text(root: &Path) -> Result<String, StoreError> {
    root_key(root).into_os_string().into_string().map_err(|_| StoreError::Query(format!("{}: a logs root's path must be UTF-8", root.display())))
}

/// The source that reads logs root `root` (absolute), named `name` when given. `None` when
/// the store has none yet (then [`register`] makes it). Fails when `name` names another root's
/// source, or `root` is already read under another name: one root, one source.
pub fn find(conn: &Connection, root: &Path, name: Option<&str>) -> Result<Option<Source>, StoreError> {
    let found = by_root(conn, root)?;
    let Some(name) = name else { return Ok(found) };
    check_name(name)?;
    match (found, by_name(conn, name)?) {
        (Some(s), _) if s.name == name => Ok(Some(s)),
        (Some(s), _) => Err(StoreError::SourceRoot { name: name.to_owned(), root: root.to_owned(), other: s.name }),
        (None, Some(other)) => Err(StoreError::SourceName { name: name.to_owned(), root: root.to_owned(), other: other.root }),
        (None, None) => Ok(None),
    }
}

/// Scopes `conn` ([`Connection::scope_to`]) to the source that reads logs root `root` (named
/// `name` when given), made as [`register`] makes it when there is none, in a transaction of its
/// own. Call before the write transaction that writes the root's conversations begins, so that
/// it takes that source's write lock alone (on a server: hosts syncing their own sources write
/// at once; see [`super::sql::WRITE_LOCK`]).
pub fn scope_to_root(conn: &Connection, root: &Path, name: Option<&str>) -> Result<Source, StoreError> {
    let source = match find(conn, root, name)? {
        Some(found) => found,
        None => conn.in_transaction(|| register(conn, root, name))?,
    };
    conn.scope_to(source.id)?;
    Ok(source)
}

/// [`find`], making the source when there is none (named `name`, else [`default_name`]). Call
/// inside a write transaction: the one that will write its conversations (so that a dry run
/// leaves no source behind), or one of its own ([`scope_to_root`]).
pub fn register(conn: &Connection, root: &Path, name: Option<&str>) -> Result<Source, StoreError> {
    if let Some(found) = find(conn, root, name)? {
        return Ok(found);
    }
    let name = name.map_or_else(|| default_name(root), str::to_owned);
    if let Some(other) = by_name(conn, &name)? {
        return Err(StoreError::SourceName { name, root: root.to_owned(), other: other.root });
    }
    let id = conn.prepare_cached("INSERT INTO sources (name, root) VALUES (?1, ?2) RETURNING id")?.query_row(params![name, root_text(root)?], |r| r.get(0))?;
    Ok(Source { id, name, root: root_key(root) })
}

/// The source whose root holds conversation directory `dir` (its parent), registered under
/// the default name when new. For writers that are not scoped to a source (a conversation
/// made by `new` or `fork`).
pub fn of_dir(conn: &Connection, dir: &Path) -> Result<Source, StoreError> {
    let root = dir.parent().ok_or_else(|| StoreError::Query(format!("{}: not inside a logs root", dir.display())))?;
    register(conn, root, None)
}

/// The source named `name`, or an error listing the names there are.
pub fn named(conn: &Connection, name: &str) -> Result<Source, StoreError> {
    by_name(conn, name)?.ok_or_else(|| StoreError::NoSuchFilter {
        flag: "--source",
        value: name.to_owned(),
        known: {
            let names: Vec<String> = all(conn).map(|all| all.into_iter().map(|s| s.name).collect()).unwrap_or_default();
            if names.is_empty() {
                "the store has no sources yet".to_owned()
            } else {
                format!("the sources are {}", names.join(", "))
            }
        },
    })
}

/// Every source, by name.
pub fn all(conn: &Connection) -> Result<Vec<Source>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT id, name, root FROM sources ORDER BY name")?;
    let rows = stmt.query_map((), source_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How many sources have conversations: listings show the source only when there are two or
/// more.
pub fn count_in_use(conn: &Connection) -> Result<usize, StoreError> {
    let n: i64 = conn.query_row("SELECT count(*) FROM sources s WHERE EXISTS (SELECT 1 FROM conversations c WHERE c.source_id = s.id)", (), |r| r.get(0))?;
    Ok(n as usize)
}

/// Every conversation of source `source_id`, as `SOURCE:CHAT`, by chat id.
pub fn qualified_chat_ids(conn: &Connection, source_id: i64) -> Result<Vec<String>, StoreError> {
    let mut stmt =
        conn.prepare("SELECT s.name || ':' || c.chat_id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.source_id = ?1 ORDER BY c.chat_id")?;
    let rows = stmt.query_map([source_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A conversation a command names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its row id.
    pub id: i64,
    pub source_id: i64,
    pub source: String,
    pub chat_id: String,
}

impl Named {
    /// `SOURCE:CHAT`.
    pub fn qualified(&self) -> String {
        qualified(&self.source, &self.chat_id)
    }
}

/// How a conversation is named whatever other sources hold: `SOURCE:CHAT`.
pub fn qualified(source: &str, chat_id: &str) -> String {
    format!("{source}:{chat_id}")
}

/// The conversation `text` names. On a connection scoped to a source, `text` is a chat id of
/// that source. Otherwise it is `SOURCE:CHAT` first, for each source whose name `text` starts
/// with; failing that, a bare chat id (chat ids may contain `:`), which must be stored in one
/// source only. The qualified reading comes first so that every conversation has a name that
/// finds it: were the bare reading first, a conversation whose chat id is `w:x` would hide
/// source `w`'s `x` behind the very name the ambiguity error offers for it, while the one of
/// chat id `w:x` is still found as `w:w:x`. Fails with [`StoreError::NoConversation`] when
/// nothing matches and [`StoreError::Ambiguous`] (listing each as `SOURCE:CHAT`) when more than
/// one does.
pub fn resolve(conn: &Connection, text: &str) -> Result<Named, StoreError> {
    if let Some(source) = conn.scope() {
        return conn
            .prepare_cached(
                "SELECT c.id, c.source_id, s.name, c.chat_id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.source_id = ?1 AND c.chat_id = ?2",
            )?
            .query_row(params![source, text], named_from_row)
            .optional()?
            .ok_or_else(|| StoreError::NoConversation(text.to_owned()));
    }
    let mut qualified = Vec::new();
    if text.contains(':') {
        for source in all(conn)? {
            let Some(chat_id) = text.strip_prefix(&source.name).and_then(|rest| rest.strip_prefix(':')) else { continue };
            let found = conn
                .prepare_cached("SELECT c.id, c.source_id, s.name, c.chat_id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.source_id = ?1 AND c.chat_id = ?2")?
                .query_row(params![source.id, chat_id], named_from_row)
                .optional()?;
            qualified.extend(found);
        }
    }
    let candidates = if !qualified.is_empty() {
        qualified
    } else {
        conn.prepare_cached(
            "SELECT c.id, c.source_id, s.name, c.chat_id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.chat_id = ?1 ORDER BY s.name",
        )?
        .query_map([text], named_from_row)?
        .collect::<Result<_, _>>()?
    };
    match <[Named; 1]>::try_from(candidates) {
        Ok([one]) => Ok(one),
        Err(none) if none.is_empty() => Err(StoreError::NoConversation(text.to_owned())),
        Err(many) => Err(StoreError::Ambiguous { given: text.to_owned(), candidates: many.iter().map(Named::qualified).collect() }),
    }
}

fn named_from_row(r: &super::sql::Row) -> super::sql::Result<Named> {
    Ok(Named { id: r.get(0)?, source_id: r.get(1)?, source: r.get(2)?, chat_id: r.get(3)? })
}

/// The row id of the conversation `text` names ([`resolve`]).
pub fn conversation_id(conn: &Connection, text: &str) -> Result<i64, StoreError> {
    resolve(conn, text).map(|n| n.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, WriteBatch};

    /// The writer of a connection scoped to a source refuses a directory of another root, and
    /// replaces only its own source's conversation of a chat id.
    #[test]
    fn a_scoped_write_stays_in_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let mut conn = store.connection().unwrap();
        let (a, b) = (Path::new("/logs/a"), Path::new("/logs/b"));
        let mut batch = WriteBatch::begin(&mut conn).unwrap();
        let source_a = register(batch.conn(), a, Some("a")).unwrap();
        let source_b = register(batch.conn(), b, None).unwrap();
        assert_eq!(source_b.name, default_name(b));
        batch.conversation("c", "/logs/b/c", b"fp").unwrap().finish(&Default::default(), 0.0, 1, true).unwrap();
        batch.conn().scope_to(source_a.id).unwrap();
        match batch.conversation("c", "/logs/b/c", b"fp") {
            Err(StoreError::OutsideSource { source_name, .. }) => assert_eq!(source_name, "a"),
            other => panic!("expected OutsideSource, got {:?}", other.map(|_| ())),
        }
        batch.conversation("c", "/logs/a/c", b"fp").unwrap().finish(&Default::default(), 0.0, 1, true).unwrap();
        batch.conversation("c", "/logs/a/c", b"fp2").unwrap().finish(&Default::default(), 0.0, 1, true).unwrap();
        batch.finish().unwrap();
        let conn = store.connection().unwrap();
        let rows: Vec<(String, String)> = conn
            .prepare("SELECT s.name, c.source_dir FROM conversations c JOIN sources s ON s.id = c.source_id ORDER BY s.name")
            .unwrap()
            .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows, [("a".to_owned(), "/logs/a/c".to_owned()), (default_name(b), "/logs/b/c".to_owned())]);
        assert!(matches!(resolve(&conn, "c"), Err(StoreError::Ambiguous { .. })));
        assert_eq!(resolve(&conn, "a:c").unwrap().source, "a");
        conn.scope_to(source_b.id).unwrap();
        assert_eq!(resolve(&conn, "c").unwrap().source_id, source_b.id, "scoped: the chat id of that source");
    }

    /// Every conversation has a name that finds it, and each name the ambiguity error offers
    /// finds the conversation it is offered for, even where a chat id holds `:` and reads as
    /// `SOURCE:CHAT` of another (source `w`'s `w:x` and `x`, and another source's `x`).
    #[test]
    fn every_conversation_has_a_name_that_finds_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let mut conn = store.connection().unwrap();
        let mut batch = WriteBatch::begin(&mut conn).unwrap();
        register(batch.conn(), Path::new("/logs/w"), Some("w")).unwrap();
        register(batch.conn(), Path::new("/logs/w:w"), Some("w:w")).unwrap();
        register(batch.conn(), Path::new("/logs/v"), Some("v")).unwrap();
        for dir in ["/logs/w/x", "/logs/w/w:x", "/logs/v/x", "/logs/w/only:here"] {
            let chat = Path::new(dir).file_name().unwrap().to_str().unwrap();
            batch.conversation(chat, dir, b"fp").unwrap().finish(&Default::default(), 0.0, 1, true).unwrap();
        }
        batch.finish().unwrap();
        let conn = store.connection().unwrap();
        let found = |text: &str| resolve(&conn, text).map(|n| format!("{}/{}", n.source, n.chat_id));
        assert_eq!(found("w:x").unwrap(), "w/x", "SOURCE:CHAT first");
        assert_eq!(found("w:w:x").unwrap(), "w/w:x");
        assert_eq!(found("v:x").unwrap(), "v/x");
        assert_eq!(found("only:here").unwrap(), "w/only:here", "a bare chat id with `:` that no source name starts");
        match resolve(&conn, "x") {
            Err(StoreError::Ambiguous { candidates, .. }) => {
                assert_eq!(candidates, ["v:x", "w:x"]);
                assert_eq!(candidates.iter().map(|c| found(c).unwrap()).collect::<Vec<_>>(), ["v/x", "w/x"], "each offered name finds its own");
            }
            other => panic!("expected Ambiguous, got {other:?}"),
        }
        assert!(matches!(resolve(&conn, "w:nothing"), Err(StoreError::NoConversation(_))));
    }
}
