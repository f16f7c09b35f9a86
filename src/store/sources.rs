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
//!
//! On a server each source has a writer, a role (schema 17), and a name or a root is unique
//! among one writer's sources only (schema 20): no role can stand in another's way by making a
//! source of the name or the root it is going to need, and two hosts whose logs roots have one
//! path each have theirs. So every lookup asks whose source it wants:
//! - A root is read into a source this connection's role may use ([`usable_sql`]): its own,
//!   else one of the store's owner (made before hosts had roles of their own: refused, naming
//!   both roles, until the owner hands it over), never another role's.
//! - A name a command gives (`--source NAME`, `SOURCE:CHAT`, a bare chat id) is looked up in
//!   this role's own sources first, then in every source; several roles' sources of one name
//!   are each named `NAME@ROLE` too, and shown so ([`Source::label`]), so that every source has
//!   a name that finds it.
//!
//! SQLite has no roles: there every source is the connection's own, and its label its name.

use std::path::{Path, PathBuf};

use super::sql::{params, Engine, OptionalExtension};

use super::{Connection, StoreError};

/// A logs root the store reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub id: i64,
    pub name: String,
    /// The absolute path of the logs root, as sync and import spell it.
    pub root: PathBuf,
    /// The role that writes it, on a server; `None` on SQLite.
    pub writer: Option<String>,
    /// Whether this connection's role writes it (always on SQLite).
    pub mine: bool,
    /// How it is shown, and a name that finds it: its name, or on a server `NAME@ROLE` when
    /// another role's source has the same name.
    pub label: String,
}

/// How source `s` is shown on a server ([`Source::label`]), in SQL.
macro_rules! server_label {
    () => {
        "CASE WHEN EXISTS (SELECT 1 FROM sources o WHERE o.name = s.name AND o.writer <> s.writer) THEN s.name || '@' || s.writer ELSE s.name END"
    };
}

/// How source `s` (a query's alias for `sources`) is shown and named, in SQL: see
/// [`Source::label`].
pub(in crate::store) fn label_sql(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => server_label!(),
        Engine::Sqlite => "s.name",
    }
}

/// Whether this connection's role writes source `s`, in SQL.
fn mine_sql(conn: &Connection) -> &'static str {
    match conn.engine() {
        Engine::Postgres => "(s.writer = current_user)",
        Engine::Sqlite => "(1 = 1)",
    }
}

/// Whether this connection's role may read a logs root into source `s`, in SQL: its own, or
/// the store's owner's (see the module's doc).
pub(in crate::store) fn usable_sql(conn: &Connection) -> &'static str {
    match conn.engine() {
        Engine::Postgres => "(s.writer = current_user OR s.writer = (SELECT pg_get_userbyid(t.relowner)::text FROM pg_class t WHERE t.oid = 'sources'::regclass))",
        Engine::Sqlite => "(1 = 1)",
    }
}

/// The columns [`source_from_row`] reads, of source `s`.
fn columns(conn: &Connection) -> &'static str {
    match conn.engine() {
        Engine::Postgres => concat!("s.id, s.name, s.root, s.writer, s.writer = current_user, ", server_label!()),
        Engine::Sqlite => "s.id, s.name, s.root, NULL, 1, s.name",
    }
}

/// SQL for the id of the source this connection's role reads logs root `?1` into (its own,
/// else the owner's), for a query of that root's conversations.
pub(in crate::store) fn root_source_sql(conn: &Connection) -> String {
    format!("(SELECT s.id FROM sources s WHERE s.root = ?1 AND {} ORDER BY {} DESC LIMIT 1)", usable_sql(conn), mine_sql(conn))
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
    Ok(Source { id: r.get(0)?, name: r.get(1)?, root: PathBuf::from(r.get::<_, String>(2)?), writer: r.get(3)?, mine: r.get(4)?, label: r.get(5)? })
}

/// The sources `condition` (over alias `s`, with parameters `params`) selects, this role's own
/// first, then by name.
fn select<P: super::sql::Params>(conn: &Connection, condition: &str, params: P) -> Result<Vec<Source>, StoreError> {
    let sql = format!("SELECT {} FROM sources s WHERE {condition} ORDER BY {} DESC, s.name, s.id", columns(conn), mine_sql(conn));
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params, source_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The source with row id `id`.
pub(in crate::store) fn by_id(conn: &Connection, id: i64) -> Result<Source, StoreError> {
    select(conn, "s.id = ?1", [id])?.into_iter().next().ok_or(StoreError::Database(super::sql::Error::QueryReturnedNoRows))
}

/// The source this connection's role reads logs root `root` (by that path) into, if any.
fn by_root(conn: &Connection, root: &Path) -> Result<Option<Source>, StoreError> {
    Ok(select(conn, &format!("s.root = ?1 AND {}", usable_sql(conn)), [root_text(root)?])?.into_iter().next())
}

/// `root` (absolute) as the store knows it: when no source reads that path but one reads the
/// same directory under another (through a link, or with `..` in it), that source's root;
/// else `root`. Callers read the directory by the path this returns, so that one directory is
/// always one source, whatever path names it.
pub fn known_root(conn: &Connection, root: &Path) -> Result<PathBuf, StoreError> {
    Ok(reading(conn, root)?.map_or_else(|| root_key(root), |s| s.root))
}

/// The source this connection's role reads logs root `root` (absolute) into: by that path, or
/// the same directory under another path; `None` when it has none for `root` (then a sync or
/// import of it makes one). Other roles' sources of that root are not its (see the module's doc).
pub fn reading(conn: &Connection, root: &Path) -> Result<Option<Source>, StoreError> {
    if let Some(source) = by_root(conn, root)? {
        return Ok(Some(source));
    }
    Ok(same_directory(root, usable(conn)?))
}

/// A source of any role that reads logs root `root` (absolute), by that path or another path
/// to the same directory: for an export, which leaves alone what gptme wrote in any logs root
/// the store reads.
pub fn reading_any(conn: &Connection, root: &Path) -> Result<Option<Source>, StoreError> {
    let all = all(conn)?;
    let text = root_text(root)?;
    if let Some(source) = all.iter().find(|s| s.root.to_str() == Some(text.as_str())) {
        return Ok(Some(source.clone()));
    }
    Ok(same_directory(root, all))
}

/// The first of `sources` whose root is directory `root` under another path.
fn same_directory(root: &Path, sources: Vec<Source>) -> Option<Source> {
    use std::os::unix::fs::MetadataExt;
    let here = std::fs::metadata(root).ok()?;
    let same = |there: std::fs::Metadata| (there.dev(), there.ino()) == (here.dev(), here.ino());
    sources.into_iter().find(|source| std::fs::metadata(&source.root).is_ok_and(same))
}

/// This connection's role's own source named `name`, if it has one.
fn own_by_name(conn: &Connection, name: &str) -> Result<Option<Source>, StoreError> {
    Ok(select(conn, &format!("s.name = ?1 AND {}", mine_sql(conn)), [name])?.into_iter().next())
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

/// The source this connection's role reads logs root `root` (absolute) into ([`reading`] by
/// that path), named `name` when given. `None` when there is none yet (then [`register`] makes
/// it). Fails when `name` names another root's source of this role, or `root` is already read
/// under another name: one root, one source. Other roles' names and roots are no obstacle.
pub fn find(conn: &Connection, root: &Path, name: Option<&str>) -> Result<Option<Source>, StoreError> {
    let found = by_root(conn, root)?;
    let Some(name) = name else { return Ok(found) };
    check_name(name)?;
    match (found, own_by_name(conn, name)?) {
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
    if let Some(other) = own_by_name(conn, &name)? {
        return Err(StoreError::SourceName { name, root: root.to_owned(), other: other.root });
    }
    let id = conn.prepare_cached("INSERT INTO sources (name, root) VALUES (?1, ?2) RETURNING id")?.query_row(params![name, root_text(root)?], |r| r.get(0))?;
    by_id(conn, id)
}

/// The source whose root holds conversation directory `dir` (its parent), registered under
/// the default name when new. For writers that are not scoped to a source (a conversation
/// made by `new` or `fork`).
pub fn of_dir(conn: &Connection, dir: &Path) -> Result<Source, StoreError> {
    let root = dir.parent().ok_or_else(|| StoreError::Query(format!("{}: not inside a logs root", dir.display())))?;
    register(conn, root, None)
}

/// The source `name` names (`--source NAME`): this role's own of that name, else the one of any
/// role that has it, or the one whose label it is (`NAME@ROLE`). Fails listing the names there
/// are when none has it, and the labels of each when several roles' sources do.
pub fn named(conn: &Connection, name: &str) -> Result<Source, StoreError> {
    let all = all(conn)?;
    let by_label: Vec<&Source> = all.iter().filter(|s| s.label == name && s.name != name).collect();
    let by_name: Vec<&Source> = all.iter().filter(|s| s.name == name).collect();
    let candidates = preferred(if by_label.is_empty() { by_name } else { by_label }, |s| s.mine);
    match candidates[..] {
        [one] => Ok(one.clone()),
        [] => Err(StoreError::NoSuchFilter {
            flag: "--source",
            value: name.to_owned(),
            known: if all.is_empty() {
                "the store has no sources yet".to_owned()
            } else {
                format!("the sources are {}", all.iter().map(|s| s.label.as_str()).collect::<Vec<_>>().join(", "))
            },
        }),
        _ => Err(StoreError::AmbiguousSource { given: name.to_owned(), candidates: candidates.iter().map(|s| s.label.clone()).collect() }),
    }
}

/// The items of `items` that `prefer` holds for, when there are any; else all of them.
fn preferred<T>(items: Vec<T>, prefer: impl Fn(&T) -> bool) -> Vec<T> {
    if items.iter().any(&prefer) {
        items.into_iter().filter(|item| prefer(item)).collect()
    } else {
        items
    }
}

/// Every source this connection may read, this role's own first, then by name.
pub fn all(conn: &Connection) -> Result<Vec<Source>, StoreError> {
    select(conn, "(1 = 1)", ())
}

/// Every source this connection's role may read logs roots into (see the module's doc).
pub fn usable(conn: &Connection) -> Result<Vec<Source>, StoreError> {
    select(conn, usable_sql(conn), ())
}

/// How many sources have conversations: listings show the source only when there are two or
/// more.
pub fn count_in_use(conn: &Connection) -> Result<usize, StoreError> {
    let n: i64 = conn.query_row("SELECT count(*) FROM sources s WHERE EXISTS (SELECT 1 FROM conversations c WHERE c.source_id = s.id)", (), |r| r.get(0))?;
    Ok(n as usize)
}

/// Every conversation of source `source_id`, as `SOURCE:CHAT`, by chat id.
pub fn qualified_chat_ids(conn: &Connection, source_id: i64) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {} || ':' || c.chat_id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE c.source_id = ?1 ORDER BY c.chat_id",
        label_sql(conn.engine())
    ))?;
    let rows = stmt.query_map([source_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A conversation a command names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// Its row id.
    pub id: i64,
    pub source_id: i64,
    /// Its source's label ([`Source::label`]).
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
/// that source. Otherwise it is `SOURCE:CHAT` first, for each source whose name (or label,
/// `NAME@ROLE`) `text` starts with; failing that, a bare chat id (chat ids may contain `:`).
/// The qualified reading comes first so that every conversation has a name that finds it: were
/// the bare reading first, a conversation whose chat id is `w:x` would hide source `w`'s `x`
/// behind the very name the ambiguity error offers for it, while the one of chat id `w:x` is
/// still found as `w:w:x`. Among the conversations a reading finds, a label's (`NAME@ROLE`)
/// come before a name's, and this role's own sources' before others'. Fails with
/// [`StoreError::NoConversation`] when nothing matches and [`StoreError::Ambiguous`] (listing
/// each as `SOURCE:CHAT`, by its label) when more than one does.
pub fn resolve(conn: &Connection, text: &str) -> Result<Named, StoreError> {
    let found = |condition: &str, values: &[&dyn super::sql::ToSql]| -> Result<Vec<(Named, bool)>, StoreError> {
        let sql = format!(
            "SELECT c.id, c.source_id, {}, c.chat_id, {} FROM conversations c JOIN sources s ON s.id = c.source_id WHERE {condition} ORDER BY 3, c.id",
            label_sql(conn.engine()),
            mine_sql(conn)
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(values, |r| Ok((named_from_row(r)?, r.get::<_, bool>(4)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    };
    if let Some(source) = conn.scope() {
        return found("c.source_id = ?1 AND c.chat_id = ?2", params![source, text])?
            .pop()
            .map(|(named, _)| named)
            .ok_or_else(|| StoreError::NoConversation(text.to_owned()));
    }
    let (mut by_label, mut by_name) = (Vec::new(), Vec::new());
    if text.contains(':') {
        for source in all(conn)? {
            let labelled = (source.label != source.name).then_some((source.label.as_str(), &mut by_label));
            for (prefix, into) in labelled.into_iter().chain([(source.name.as_str(), &mut by_name)]) {
                let Some(chat_id) = text.strip_prefix(prefix).and_then(|rest| rest.strip_prefix(':')) else { continue };
                into.extend(found("c.source_id = ?1 AND c.chat_id = ?2", params![source.id, chat_id])?);
            }
        }
    }
    let candidates = match (by_label.is_empty(), by_name.is_empty()) {
        (false, _) => by_label,
        (true, false) => by_name,
        (true, true) => found("c.chat_id = ?1", params![text])?,
    };
    let candidates: Vec<Named> = preferred(candidates, |(_, mine)| *mine).into_iter().map(|(named, _)| named).collect();
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
