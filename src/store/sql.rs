//! The one door to the database engines: an SQLite file (rusqlite) or a PostgreSQL server
//! (the `postgres` crate), behind the same statements, parameters, rows and errors.
//!
//! Statements are written once, in the dialect both engines share (numbered parameters `?1`,
//! `ON CONFLICT … DO …`, `RETURNING`), and prepared through a [`super::Connection`]. On
//! PostgreSQL each is rewritten by [`postgres_dialect`] when first prepared (and cached with
//! its server-side statement): `?N` becomes `$N`, `INSERT OR IGNORE` an `ON CONFLICT DO
//! NOTHING`. A write transaction begins through [`super::Connection::begin_write`] (SQLite's
//! `BEGIN IMMEDIATE`; on the server a `BEGIN` that takes the write locks, [`WRITE_LOCK`]). What the engines do differently in ways a
//! rewrite cannot bridge (the word indexes, the schema's triggers) lives in per-engine code of
//! the store's modules, which ask [`super::Connection::engine`].
//!
//! Values cross as SQLite's five storage classes ([`ValueRef`]); on PostgreSQL an integer binds
//! to whatever integer, float or boolean column the server expects, and `numeric` results (the
//! type of a `sum` of integers there) come back as integers when whole.

use std::fmt;

/// A value as both engines hold it: SQLite's storage classes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// An owned [`ValueRef`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl ToSql for Value {
    fn to_sql(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s),
            Value::Blob(b) => ValueRef::Blob(b),
        }
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Integer(i)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Real(f)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl ValueRef<'_> {
    fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "a null",
            ValueRef::Integer(_) => "an integer",
            ValueRef::Real(_) => "a real",
            ValueRef::Text(_) => "a text",
            ValueRef::Blob(_) => "a blob",
        }
    }
}

/// Errors of the engines, and of reading a column as a Rust type.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite's own message is the whole story (its `source()`, the bare result code, would
    /// only repeat it as "Error code 5: …"), so it is worded here and not returned as a cause.
    #[error("{0}")]
    Sqlite(rusqlite::Error),
    #[cfg(feature = "postgres")]
    #[error("{}", postgres_message(.0))]
    Postgres(postgres::Error),
    #[error("the query returned no rows")]
    QueryReturnedNoRows,
    #[error("column {index}: {why}")]
    Column { index: usize, why: String },
    /// The server did not answer a request (or the connection) within `waited`: the
    /// connection is given up ([`pg::Client`]). `why` says why the wait was that long and
    /// what to do.
    #[cfg(feature = "postgres")]
    #[error("{server} did not answer within {}: {why}", seconds(*.waited))]
    NoAnswer { server: String, waited: std::time::Duration, why: String },
    /// The client's own runtime could not be made (no threads or files left).
    #[cfg(feature = "postgres")]
    #[error("cannot start the PostgreSQL client: {0}")]
    Runtime(std::io::Error),
    /// A statement the server would not prepare: a bug of the store's, so the statement is
    /// named (its first line) for the report.
    #[error("{source} (preparing: {statement})")]
    Prepare { statement: String, source: Box<Error> },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        match e {
            rusqlite::Error::QueryReturnedNoRows => Error::QueryReturnedNoRows,
            e => Error::Sqlite(e),
        }
    }
}

#[cfg(feature = "postgres")]
impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        Error::Postgres(e)
    }
}

/// A duration as messages give it: `10 s`, `2.5 s`.
pub fn seconds(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// The server's message with its detail and hint when it sent them, else the client's.
#[cfg(feature = "postgres")]
fn postgres_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = db.message().to_owned();
            if let Some(detail) = db.detail() {
                text.push_str(&format!(" ({detail})"));
            }
            if let Some(hint) = db.hint() {
                text.push_str(&format!("; {hint}"));
            }
            text
        }
        None => {
            use std::error::Error as _;
            match e.source() {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            }
        }
    }
}

impl Error {
    /// The SQLSTATE of a PostgreSQL error, if this is one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "postgres")]
            Error::Postgres(e) => e.code().map(|c| c.code()),
            Error::Prepare { source, .. } => source.sqlstate(),
            _ => None,
        }
    }

    /// The constraint a PostgreSQL error names (a key or check that refused a row), if any.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "postgres")]
            Error::Postgres(e) => e.as_db_error().and_then(|db| db.constraint()),
            Error::Prepare { source, .. } => source.constraint(),
            _ => None,
        }
    }
}

/// A Rust value bound as a parameter.
pub trait ToSql {
    fn to_sql(&self) -> ValueRef<'_>;
}

macro_rules! integer_to_sql {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> ValueRef<'_> {
                ValueRef::Integer(*self as i64)
            }
        }
    )*};
}
integer_to_sql!(i8, i16, i32, i64, u8, u16, u32, isize);

impl ToSql for bool {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Integer(*self as i64)
    }
}

impl ToSql for f64 {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Real(*self)
    }
}

impl ToSql for str {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToSql for String {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToSql for std::borrow::Cow<'_, str> {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Text(self)
    }
}

impl ToSql for [u8] {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl ToSql for Vec<u8> {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<const N: usize> ToSql for [u8; N] {
    fn to_sql(&self) -> ValueRef<'_> {
        ValueRef::Blob(self)
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_sql(&self) -> ValueRef<'_> {
        match self {
            Some(v) => v.to_sql(),
            None => ValueRef::Null,
        }
    }
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_sql(&self) -> ValueRef<'_> {
        (**self).to_sql()
    }
}

/// The parameters of a statement: `()` for none, an array of one type, [`params!`]'s slice,
/// or [`params_from_iter`].
pub trait Params {
    fn values(&self) -> Vec<ValueRef<'_>>;
}

impl Params for () {
    fn values(&self) -> Vec<ValueRef<'_>> {
        Vec::new()
    }
}

impl<T: ToSql, const N: usize> Params for [T; N] {
    fn values(&self) -> Vec<ValueRef<'_>> {
        self.iter().map(ToSql::to_sql).collect()
    }
}

impl Params for &[&dyn ToSql] {
    fn values(&self) -> Vec<ValueRef<'_>> {
        self.iter().map(|v| v.to_sql()).collect()
    }
}

/// Parameters collected from an iterator (a list of ids, a query's terms).
pub struct ParamsFromIter<T>(Vec<T>);

pub fn params_from_iter<I: IntoIterator>(values: I) -> ParamsFromIter<I::Item>
where
    I::Item: ToSql,
{
    ParamsFromIter(values.into_iter().collect())
}

impl<T: ToSql> Params for ParamsFromIter<T> {
    fn values(&self) -> Vec<ValueRef<'_>> {
        self.0.iter().map(ToSql::to_sql).collect()
    }
}

/// Parameters of several types: `params![id, name, &digest[..]]`.
#[macro_export]
#[doc(hidden)]
macro_rules! __store_params {
    () => { () };
    ($($value:expr),+ $(,)?) => {
        &[$(&$value as &dyn $crate::store::sql::ToSql),+] as &[&dyn $crate::store::sql::ToSql]
    };
}
pub use crate::__store_params as params;

/// A column read as a Rust type.
pub trait FromSql: Sized {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String>;
}

fn wrong_type<T>(value: ValueRef<'_>, wanted: &str) -> Result<T, String> {
    Err(format!("{} value where {wanted} was expected", value.kind()))
}

macro_rules! integer_from_sql {
    ($($t:ty),*) => {$(
        impl FromSql for $t {
            fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
                match value {
                    ValueRef::Integer(i) => <$t>::try_from(i).map_err(|_| format!("{i} is out of range for {}", stringify!($t))),
                    v => wrong_type(v, "an integer"),
                }
            }
        }
    )*};
}
integer_from_sql!(i8, i16, i32, i64, u8, u16, u32, u64, usize);

impl FromSql for bool {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Integer(i) => Ok(i != 0),
            v => wrong_type(v, "an integer"),
        }
    }
}

impl FromSql for f64 {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Real(f) => Ok(f),
            ValueRef::Integer(i) => Ok(i as f64),
            v => wrong_type(v, "a number"),
        }
    }
}

impl FromSql for String {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Text(s) => Ok(s.to_owned()),
            v => wrong_type(v, "text"),
        }
    }
}

impl FromSql for Vec<u8> {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            ValueRef::Text(s) => Ok(s.as_bytes().to_vec()),
            v => wrong_type(v, "a blob"),
        }
    }
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Null => Ok(None),
            v => T::from_sql(v).map(Some),
        }
    }
}

/// Which engine a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Sqlite => "SQLite",
            Engine::Postgres => "PostgreSQL",
        })
    }
}

/// The condition that `column` is one of the ids of the JSON array given as parameter `?n`
/// ([`id_list`]), on `engine`: one parameter, and one statement, however many ids.
pub fn among_ids(engine: Engine, column: &str, n: usize) -> String {
    match engine {
        Engine::Postgres => format!("{column} IN (SELECT jsonb_array_elements_text(?{n}::text::jsonb)::bigint)"),
        Engine::Sqlite => format!("{column} IN (SELECT value FROM json_each(?{n}))"),
    }
}

/// What SQLite's planner does with `sql` and its arguments on `conn`, a line a step (the
/// detail column of `EXPLAIN QUERY PLAN`): for tests that a statement is read by an index.
#[cfg(test)]
pub fn sqlite_plan(conn: &rusqlite::Connection, sql: &str, args: &[Value]) -> Vec<String> {
    let mut stmt = Statement::sqlite(conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap());
    stmt.query_map(params_from_iter(args.iter()), |r| r.get::<_, String>(3)).unwrap().collect::<Result<_>>().unwrap()
}

/// `ids` as the JSON array [`among_ids`] reads.
pub fn id_list(ids: impl IntoIterator<Item = i64>) -> String {
    format!("[{}]", ids.into_iter().map(|i| i.to_string()).collect::<Vec<_>>().join(","))
}

/// A column's position in a row (0-based).
pub trait RowIndex {
    fn index(self) -> usize;
}

impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

/// One row of a result.
pub struct Row<'a>(RowInner<'a>);

enum RowInner<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    #[cfg(feature = "postgres")]
    Postgres(&'a postgres::Row),
}

impl Row<'_> {
    /// Column `index` (0-based) as a `T`.
    pub fn get<I: RowIndex, T: FromSql>(&self, index: I) -> Result<T> {
        let index = index.index();
        let read = |value: ValueRef<'_>| T::from_sql(value).map_err(|why| Error::Column { index, why });
        match &self.0 {
            RowInner::Sqlite(r) => read(sqlite_value(r, index)?),
            #[cfg(feature = "postgres")]
            RowInner::Postgres(r) => {
                if index >= r.len() {
                    return Err(Error::Column { index, why: format!("the row has {} columns", r.len()) });
                }
                let cell = r.try_get::<_, pg::Cell>(index).map_err(|e| Error::Column { index, why: e.to_string() })?;
                read(cell.value())
            }
        }
    }
}

/// Column `index` of an SQLite row as it is stored.
fn sqlite_value<'r>(row: &'r rusqlite::Row<'_>, index: usize) -> Result<ValueRef<'r>> {
    Ok(match row.get_ref(index)? {
        rusqlite::types::ValueRef::Null => ValueRef::Null,
        rusqlite::types::ValueRef::Integer(i) => ValueRef::Integer(i),
        rusqlite::types::ValueRef::Real(f) => ValueRef::Real(f),
        rusqlite::types::ValueRef::Text(t) => {
            ValueRef::Text(std::str::from_utf8(t).map_err(|e| Error::Column { index, why: format!("text that is not UTF-8: {e}") })?)
        }
        rusqlite::types::ValueRef::Blob(b) => ValueRef::Blob(b),
    })
}

/// Rows of a query, read one at a time.
pub struct Rows<'s>(RowsInner<'s>);

enum RowsInner<'s> {
    Sqlite(rusqlite::Rows<'s>),
    #[cfg(feature = "postgres")]
    Postgres(std::vec::IntoIter<postgres::Row>, Option<postgres::Row>),
}

impl Rows<'_> {
    /// The next row, or `None` past the last.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Row<'_>>> {
        match &mut self.0 {
            RowsInner::Sqlite(rows) => Ok(rows.next()?.map(|r| Row(RowInner::Sqlite(r)))),
            #[cfg(feature = "postgres")]
            RowsInner::Postgres(rows, current) => {
                *current = rows.next();
                Ok(current.as_ref().map(|r| Row(RowInner::Postgres(r))))
            }
        }
    }
}

/// Rows mapped by a function, as an iterator ([`Statement::query_map`]).
pub struct MappedRows<'s, F> {
    rows: Rows<'s>,
    map: F,
}

impl<T, F: FnMut(&Row<'_>) -> Result<T>> Iterator for MappedRows<'_, F> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        match self.rows.next() {
            Ok(Some(row)) => Some((self.map)(&row)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// A prepared statement.
pub struct Statement<'c>(StatementInner<'c>);

enum StatementInner<'c> {
    Sqlite(rusqlite::Statement<'c>),
    SqliteCached(rusqlite::CachedStatement<'c>),
    #[cfg(feature = "postgres")]
    Postgres(&'c pg::Client, postgres::Statement),
}

/// A [`ValueRef`] bound to an SQLite statement.
struct Bind<'a>(ValueRef<'a>);

impl rusqlite::ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef as V;
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match self.0 {
            ValueRef::Null => V::Null,
            ValueRef::Integer(i) => V::Integer(i),
            ValueRef::Real(f) => V::Real(f),
            ValueRef::Text(s) => V::Text(s.as_bytes()),
            ValueRef::Blob(b) => V::Blob(b),
        }))
    }
}

impl<'c> Statement<'c> {
    pub(in crate::store) fn sqlite(stmt: rusqlite::Statement<'c>) -> Self {
        Statement(StatementInner::Sqlite(stmt))
    }

    pub(in crate::store) fn sqlite_cached(stmt: rusqlite::CachedStatement<'c>) -> Self {
        Statement(StatementInner::SqliteCached(stmt))
    }

    #[cfg(feature = "postgres")]
    pub(in crate::store) fn postgres(client: &'c pg::Client, stmt: postgres::Statement) -> Self {
        Statement(StatementInner::Postgres(client, stmt))
    }

    fn sqlite_stmt(&mut self) -> Option<&mut rusqlite::Statement<'c>> {
        match &mut self.0 {
            StatementInner::Sqlite(s) => Some(s),
            StatementInner::SqliteCached(s) => Some(s),
            #[cfg(feature = "postgres")]
            StatementInner::Postgres(..) => None,
        }
    }

    /// Runs the statement; returns how many rows it changed.
    pub fn execute<P: Params>(&mut self, params: P) -> Result<usize> {
        let values = params.values();
        #[cfg(feature = "postgres")]
        if let StatementInner::Postgres(client, stmt) = &self.0 {
            return client.execute(stmt, &values);
        }
        let stmt = self.sqlite_stmt().expect("an SQLite statement");
        Ok(stmt.execute(rusqlite::params_from_iter(values.into_iter().map(Bind)))?)
    }

    /// The rows of the query, one at a time.
    pub fn query<P: Params>(&mut self, params: P) -> Result<Rows<'_>> {
        let values = params.values();
        #[cfg(feature = "postgres")]
        if let StatementInner::Postgres(client, stmt) = &self.0 {
            let rows = client.query(stmt, &values)?;
            return Ok(Rows(RowsInner::Postgres(rows.into_iter(), None)));
        }
        let stmt = self.sqlite_stmt().expect("an SQLite statement");
        Ok(Rows(RowsInner::Sqlite(stmt.query(rusqlite::params_from_iter(values.into_iter().map(Bind)))?)))
    }

    /// The rows of the query, each mapped by `map`.
    pub fn query_map<T, P: Params, F: FnMut(&Row<'_>) -> Result<T>>(&mut self, params: P, map: F) -> Result<MappedRows<'_, F>> {
        Ok(MappedRows { rows: self.query(params)?, map })
    }

    /// The first row, mapped by `map`; [`Error::QueryReturnedNoRows`] when there is none.
    pub fn query_row<T, P: Params, F: FnOnce(&Row<'_>) -> Result<T>>(&mut self, params: P, map: F) -> Result<T> {
        let mut rows = self.query(params)?;
        match rows.next()? {
            Some(row) => map(&row),
            None => Err(Error::QueryReturnedNoRows),
        }
    }

    /// Whether the query returns a row.
    pub fn exists<P: Params>(&mut self, params: P) -> Result<bool> {
        Ok(self.query(params)?.next()?.is_some())
    }
}

/// The time now in UTC as SQLite's `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')` writes it
/// (milliseconds), for the times the store records (`imported_at`, `deleted_at`).
pub fn now_utc() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// [`Error::QueryReturnedNoRows`] as `None`.
pub trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The advisory lock (a key of PostgreSQL's `pg_advisory_xact_lock`) that a write transaction
/// on the server holds from its start to its end. A write scoped to one source (a sync, an
/// import, an operation on one conversation) holds it shared, with that source's own lock
/// ([`SOURCE_LOCK`]) exclusive: writers of one source take turns, as SQLite's one writer does,
/// while hosts writing their own sources write at once. Any other write (the search sets'
/// catch-up, a rebuild, registering a source) holds it exclusive, alone. A write transaction
/// reads the rows it changes after taking its locks, so that two writers never work from the
/// same old state (a sync reading in lines while an append adds them). Readers take neither.
pub const WRITE_LOCK: i64 = 0x5e55_10db_0002;

/// The first of the two 32-bit keys of a source's lock (`pg_advisory_xact_lock(SOURCE_LOCK,
/// source id)`); two-key locks never collide with one-key ones such as [`WRITE_LOCK`].
pub const SOURCE_LOCK: i32 = 0x5e55_10db;

/// Which write locks ([`WRITE_LOCK`]) a write transaction on the server takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteLocks {
    /// A write scoped to one source (its id): beside the writers of other sources.
    Source(i64),
    /// A write that takes its rows so that it never meets another writer's (the search sets'
    /// catch-up, `FOR UPDATE SKIP LOCKED`): beside every writer but an exclusive one.
    Shared,
    /// Any other write: alone.
    Exclusive,
}

/// How a write transaction begins on PostgreSQL, taking `locks`.
pub fn begin_write_on_server(locks: WriteLocks) -> String {
    match locks {
        // Source ids past 2^31 share locks (harmlessly) with smaller ones.
        WriteLocks::Source(id) => {
            format!("BEGIN; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK}), pg_advisory_xact_lock({SOURCE_LOCK}, {})", (id & 0x7fff_ffff) as i32)
        }
        WriteLocks::Shared => format!("BEGIN; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK})"),
        WriteLocks::Exclusive => format!("BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"),
    }
}

/// A statement of the shared dialect as PostgreSQL reads it: `?N` as `$N` (a bare `?` as the
/// next number), `INSERT OR IGNORE INTO … ` as `INSERT INTO …
/// ON CONFLICT DO NOTHING`. Quoted text and identifiers, `--` comments and `$$`-quoted bodies
/// are left as they are.
pub fn postgres_dialect(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut next = 0usize;
    let mut chars = sql.char_indices().peekable();
    let mut quote: Option<char> = None;
    while let Some((at, c)) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            let closed = match q {
                '-' => c == '\n',
                '$' => c == '$' && sql[at + 1..].starts_with('$'),
                q => c == q,
            };
            if closed {
                if q == '$' {
                    out.push('$');
                    chars.next();
                }
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '-' if sql[at..].starts_with("--") => {
                quote = Some('-');
                out.push(c);
            }
            '$' if sql[at..].starts_with("$$") => {
                quote = Some('$');
                out.push(c);
                out.push('$');
                chars.next();
            }
            '?' => {
                let mut digits = String::new();
                while let Some(&(_, d)) = chars.peek() {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    digits.push(d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                } else {
                    next = next.max(digits.parse().unwrap_or(0));
                }
                out.push('$');
                out.push_str(&digits);
            }
            c => out.push(c),
        }
    }
    let or_ignore = "INSERT OR IGNORE INTO";
    if out.trim_start().get(..or_ignore.len()).is_some_and(|head| head.eq_ignore_ascii_case(or_ignore)) {
        let start = out.len() - out.trim_start().len();
        out.replace_range(start..start + or_ignore.len(), "INSERT INTO");
        let end = out.trim_end().trim_end_matches(';').len();
        match find_keyword(&out, "RETURNING") {
            Some(at) => out.insert_str(at, "ON CONFLICT DO NOTHING "),
            None => out.insert_str(end, " ON CONFLICT DO NOTHING"),
        }
    }
    out
}

/// Where `keyword` starts as a whole word in `sql`, if it does.
fn find_keyword(sql: &str, keyword: &str) -> Option<usize> {
    let upper = sql.to_ascii_uppercase();
    let mut from = 0;
    while let Some(at) = upper[from..].find(keyword).map(|i| i + from) {
        let before = upper[..at].chars().next_back().is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
        let after = upper[at + keyword.len()..].chars().next().is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
        if before && after {
            return Some(at);
        }
        from = at + keyword.len();
    }
    None
}

/// The PostgreSQL side: a client with its statement cache, and the conversions of values.
#[cfg(feature = "postgres")]
pub(in crate::store) mod pg {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::time::Duration;

    use bytes::BytesMut;
    use postgres::types::{to_sql_checked, FromSql, IsNull, Kind, ToSql, Type};
    use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
    use tokio_postgres::Socket;

    use super::ValueRef;

    /// One connection to the server, used by one thread at a time (the pool hands it out),
    /// with the statements prepared on it so far, by their text in the shared dialect.
    ///
    /// Every request waits for the server's answer at most as long as the connection's
    /// [`Deadline`] says: one not answered in time fails ([`super::Error::NoAnswer`]) and
    /// leaves the connection broken (what the server may still send would answer a request no
    /// one waits for), so that every later request on it fails at once the same way and the pool
    /// makes a new one.
    pub struct Client {
        /// Drives the connection (a task on it) while a request waits for its answer.
        runtime: tokio::runtime::Runtime,
        /// Present until the client is dropped.
        client: Option<tokio_postgres::Client>,
        /// The task that drives the connection.
        connection: Option<tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>>,
        statements: RefCell<HashMap<String, postgres::Statement>>,
        deadline: Deadline,
        /// A request went unanswered: the connection is given up.
        broken: std::cell::Cell<bool>,
    }

    /// How long the requests of a connection wait for the server, and what is said when it
    /// does not answer in time.
    #[derive(Debug, Clone)]
    pub struct Deadline {
        /// The server as messages name it (its URL, the password never).
        pub server: String,
        /// `None`: for ever.
        pub wait: Option<Duration>,
        /// Why the wait is what it is, and what to do (see [`super::Error::NoAnswer`]).
        pub why: String,
    }

    impl Client {
        /// Connects to the server `config` names, encrypted by `tls`, within `deadline` (the
        /// whole of it: the socket, TLS, the startup and authentication), which then holds for
        /// the connection's requests until [`Client::set_deadline`] changes it.
        pub fn connect<T>(config: &tokio_postgres::Config, tls: T, deadline: Deadline) -> super::Result<Client>
        where
            T: MakeTlsConnect<Socket> + 'static + Send,
            T::TlsConnect: Send,
            T::Stream: Send,
            <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
        {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(super::Error::Runtime)?;
            let connecting = async {
                let (client, connection) = config.connect(tls).await?;
                // Runs whenever the runtime does, that is while a request waits; it ends when the
                // client is dropped, or (with the error the next request meets) the server closes.
                Ok((client, tokio::spawn(connection)))
            };
            let (client, connection) = within(&runtime, &deadline, connecting)?;
            Ok(Client {
                runtime,
                client: Some(client),
                connection: Some(connection),
                statements: RefCell::new(HashMap::new()),
                deadline,
                broken: std::cell::Cell::new(false),
            })
        }

        fn client(&self) -> &tokio_postgres::Client {
            self.client.as_ref().expect("a client until it is dropped")
        }

        /// How long this connection's requests wait from now on.
        pub fn set_deadline(&mut self, deadline: Deadline) {
            self.deadline = deadline;
        }

        /// Waits for `request`'s answer as long as the deadline allows.
        fn answer<T>(&self, request: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>) -> super::Result<T> {
            self.answer_within(&self.deadline, request)
        }

        /// [`Client::answer`] under `deadline`.
        fn answer_within<T>(&self, deadline: &Deadline, request: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>) -> super::Result<T> {
            if self.broken.get() {
                return Err(no_answer(&self.deadline));
            }
            within(&self.runtime, deadline, request).inspect_err(|e| {
                if matches!(e, super::Error::NoAnswer { .. }) {
                    self.broken.set(true);
                }
            })
        }

        /// Prepares `sql` (in the shared dialect), once per connection when `cached`.
        pub fn prepare(&self, sql: &str, cached: bool) -> super::Result<postgres::Statement> {
            if let Some(stmt) = self.statements.borrow().get(sql) {
                return Ok(stmt.clone());
            }
            let stmt = self.answer(self.client().prepare(&super::postgres_dialect(sql))).map_err(|e| match e {
                e @ super::Error::NoAnswer { .. } => e,
                e => super::Error::Prepare { statement: sql.trim().lines().next().unwrap_or_default().to_owned(), source: Box::new(e) },
            })?;
            if cached {
                self.statements.borrow_mut().insert(sql.to_owned(), stmt.clone());
            }
            Ok(stmt)
        }

        pub fn execute(&self, stmt: &postgres::Statement, values: &[ValueRef<'_>]) -> super::Result<usize> {
            Ok(self.answer(self.client().execute(stmt, &bound(values)))? as usize)
        }

        pub fn query(&self, stmt: &postgres::Statement, values: &[ValueRef<'_>]) -> super::Result<Vec<postgres::Row>> {
            self.answer(self.client().query(stmt, &bound(values)))
        }

        /// Runs statements separated by `;`, none with parameters (in the shared dialect).
        pub fn batch_execute(&self, sql: &str) -> super::Result<()> {
            self.answer(self.client().batch_execute(&super::postgres_dialect(sql)))
        }

        /// The first row `sql` (statements without parameters, as PostgreSQL writes them) gives,
        /// its columns as text, in one round trip.
        pub fn first_row_as_text(&self, sql: &str) -> super::Result<Option<Vec<Option<String>>>> {
            let messages = self.answer(self.client().simple_query(sql))?;
            Ok(messages.into_iter().find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => Some((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect()),
                _ => None,
            }))
        }

        /// Asks the server whether the connection still works (for the pool), waiting at most
        /// `wait` for its answer: an empty statement, which a working server answers at once.
        pub fn ping(&self, wait: Duration) -> super::Result<()> {
            let why = "a working server answers an empty statement at once, so the connection was given up; check the server".to_owned();
            let deadline = Deadline { server: self.deadline.server.clone(), wait: Some(wait), why };
            self.answer_within(&deadline, self.client().batch_execute(""))
        }

        pub fn is_broken(&self) -> bool {
            self.broken.get() || self.client().is_closed()
        }
    }

    impl Drop for Client {
        /// Closes the connection as a client should (it sends the server its goodbye once the
        /// client is gone), waiting a moment at most, and not at all for a server that did not
        /// answer.
        fn drop(&mut self) {
            drop(self.client.take());
            if let Some(connection) = self.connection.take().filter(|_| !self.broken.get()) {
                let _ = self.runtime.block_on(async { tokio::time::timeout(Duration::from_secs(1), connection).await });
            }
        }
    }

    /// `request`'s answer, run on `runtime`, or [`super::Error::NoAnswer`] once `deadline`'s
    /// wait has passed without one.
    fn within<T>(
        runtime: &tokio::runtime::Runtime,
        deadline: &Deadline,
        request: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> super::Result<T> {
        let answered = runtime.block_on(async {
            match deadline.wait {
                Some(wait) => tokio::time::timeout(wait, request).await.ok(),
                None => Some(request.await),
            }
        });
        Ok(answered.ok_or_else(|| no_answer(deadline))??)
    }

    fn no_answer(deadline: &Deadline) -> super::Error {
        super::Error::NoAnswer { server: deadline.server.clone(), waited: deadline.wait.unwrap_or_default(), why: deadline.why.clone() }
    }

    /// `values` as the `postgres` crate takes parameters.
    fn bound<'v>(values: &'v [ValueRef<'_>]) -> Vec<&'v (dyn ToSql + Sync)> {
        values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
    }

    fn mismatch(value: &ValueRef<'_>, ty: &Type) -> Box<dyn std::error::Error + Sync + Send> {
        format!("cannot bind {} value to a parameter of type {ty}", value.kind()).into()
    }

    impl ToSql for ValueRef<'_> {
        fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
            match *self {
                ValueRef::Null => Ok(IsNull::Yes),
                ValueRef::Integer(i) => match *ty {
                    Type::INT8 => i.to_sql(ty, out),
                    Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
                    Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
                    Type::FLOAT8 => (i as f64).to_sql(ty, out),
                    Type::BOOL => (i != 0).to_sql(ty, out),
                    Type::TEXT | Type::VARCHAR | Type::UNKNOWN => i.to_string().to_sql(&Type::TEXT, out),
                    _ => Err(mismatch(self, ty)),
                },
                ValueRef::Real(f) => match *ty {
                    Type::FLOAT8 => f.to_sql(ty, out),
                    Type::FLOAT4 => (f as f32).to_sql(ty, out),
                    _ => Err(mismatch(self, ty)),
                },
                ValueRef::Text(s) => match *ty {
                    Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => escape_nul(s).as_ref().to_sql(&Type::TEXT, out),
                    Type::BYTEA => s.as_bytes().to_sql(ty, out),
                    _ => Err(mismatch(self, ty)),
                },
                ValueRef::Blob(b) => match *ty {
                    Type::BYTEA => b.to_sql(ty, out),
                    _ => Err(mismatch(self, ty)),
                },
            }
        }

        fn accepts(_: &Type) -> bool {
            true
        }

        to_sql_checked!();
    }

    /// What stands for U+0000 in text on the server, which cannot hold it (gptme writes it as
    /// `\u0000` in JSON, and a message may carry it): U+10FFFF then `0`. U+10FFFF itself is
    /// written twice. Every text bound is escaped so and every text read unescaped, so that
    /// a text comes back as it went in and equal texts compare equal on the server.
    const ESCAPE: char = '\u{10FFFF}';

    pub(super) fn escape_nul(s: &str) -> std::borrow::Cow<'_, str> {
        if !s.contains(['\0', ESCAPE]) {
            return std::borrow::Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len() + 8);
        for c in s.chars() {
            match c {
                '\0' => out.extend([ESCAPE, '0']),
                ESCAPE => out.extend([ESCAPE, ESCAPE]),
                c => out.push(c),
            }
        }
        std::borrow::Cow::Owned(out)
    }

    fn unescape_nul(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match (c, c == ESCAPE) {
                (_, true) => match chars.next() {
                    Some('0') => out.push('\0'),
                    Some(other) => out.push(other),
                    None => out.push(ESCAPE),
                },
                (c, false) => out.push(c),
            }
        }
        out
    }

    /// A column as [`ValueRef`]: integers, floats and booleans as SQLite holds them, `numeric`
    /// as an integer when whole (else a float), text (unescaped: [`escape_nul`]) and `bytea` as
    /// they are.
    pub enum Cell<'a> {
        Value(ValueRef<'a>),
        Unescaped(String),
    }

    impl Cell<'_> {
        pub fn value(&self) -> ValueRef<'_> {
            match self {
                Cell::Value(v) => *v,
                Cell::Unescaped(s) => ValueRef::Text(s),
            }
        }
    }

    impl<'a> FromSql<'a> for Cell<'a> {
        fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
            Ok(Cell::Value(match *ty {
                Type::INT8 => ValueRef::Integer(i64::from_sql(ty, raw)?),
                Type::INT4 => ValueRef::Integer(i32::from_sql(ty, raw)? as i64),
                Type::INT2 => ValueRef::Integer(i16::from_sql(ty, raw)? as i64),
                Type::OID => ValueRef::Integer(u32::from_sql(ty, raw)? as i64),
                Type::BOOL => ValueRef::Integer(bool::from_sql(ty, raw)? as i64),
                Type::FLOAT8 => ValueRef::Real(f64::from_sql(ty, raw)?),
                Type::FLOAT4 => ValueRef::Real(f32::from_sql(ty, raw)? as f64),
                Type::NUMERIC => numeric(raw)?,
                Type::BYTEA => ValueRef::Blob(raw),
                _ if matches!(ty.kind(), Kind::Simple | Kind::Enum(_)) => {
                    let text = std::str::from_utf8(raw)?;
                    if text.contains(ESCAPE) {
                        return Ok(Cell::Unescaped(unescape_nul(text)));
                    }
                    ValueRef::Text(text)
                }
                _ => return Err(format!("a column of type {ty}, which the store does not read").into()),
            }))
        }

        fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
            Ok(Cell::Value(ValueRef::Null))
        }

        fn accepts(_: &Type) -> bool {
            true
        }
    }

    /// PostgreSQL's binary `numeric`: a count of base-10,000 digits, the weight of the first,
    /// a sign and a display scale, then the digits.
    fn numeric(raw: &[u8]) -> Result<ValueRef<'static>, Box<dyn std::error::Error + Sync + Send>> {
        let word = |i: usize| -> Result<u16, Box<dyn std::error::Error + Sync + Send>> {
            raw.get(i * 2..i * 2 + 2).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or_else(|| "a numeric value cut short".into())
        };
        let (ndigits, weight, sign) = (word(0)? as usize, word(1)? as i16, word(2)?);
        if sign == 0xC000 {
            return Ok(ValueRef::Real(f64::NAN));
        }
        let mut whole: i128 = 0;
        let mut fraction = 0f64;
        for i in 0..ndigits {
            let digit = word(4 + i)? as i128;
            let power = weight as i32 - i as i32;
            if power >= 0 {
                let place = 10_000i128.checked_pow(power as u32).and_then(|p| p.checked_mul(digit));
                whole = place.and_then(|p| whole.checked_add(p)).ok_or("a numeric value too large")?;
            } else {
                fraction += digit as f64 * 10_000f64.powi(power);
            }
        }
        let negative = sign == 0x4000;
        if fraction == 0.0 {
            let whole = if negative { -whole } else { whole };
            return Ok(match i64::try_from(whole) {
                Ok(i) => ValueRef::Integer(i),
                Err(_) => ValueRef::Real(whole as f64),
            });
        }
        let value = whole as f64 + fraction;
        Ok(ValueRef::Real(if negative { -value } else { value }))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn encode(ndigits: u16, weight: i16, sign: u16, digits: &[u16]) -> Vec<u8> {
            let mut raw = Vec::new();
            for w in [ndigits, weight as u16, sign, 0] {
                raw.extend_from_slice(&w.to_be_bytes());
            }
            for d in digits {
                raw.extend_from_slice(&d.to_be_bytes());
            }
            raw
        }

        #[test]
        fn nul_and_the_escape_survive_the_server() {
            for text in ["plain", "a\0b", "\0", "x\u{10FFFF}y", "\u{10FFFF}0", "\u{10FFFF}", "\0\u{10FFFF}\0"] {
                let escaped = escape_nul(text);
                assert!(!escaped.contains('\0'), "{text:?}");
                assert_eq!(unescape_nul(&escaped), text, "{text:?} as {escaped:?}");
            }
            assert!(matches!(escape_nul("plain"), std::borrow::Cow::Borrowed(_)));
        }

        #[test]
        fn numerics_read_as_integers_when_whole() {
            assert_eq!(numeric(&encode(0, 0, 0, &[])).unwrap(), ValueRef::Integer(0));
            assert_eq!(numeric(&encode(1, 0, 0, &[42])).unwrap(), ValueRef::Integer(42));
            assert_eq!(numeric(&encode(2, 1, 0, &[12, 3456])).unwrap(), ValueRef::Integer(123_456));
            assert_eq!(numeric(&encode(1, 2, 0x4000, &[7])).unwrap(), ValueRef::Integer(-700_000_000));
            assert_eq!(numeric(&encode(2, 0, 0, &[1, 5000])).unwrap(), ValueRef::Real(1.5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_read_in_postgres_dialect() {
        assert_eq!(postgres_dialect("SELECT a FROM t WHERE b = ?1 AND c = ?2"), "SELECT a FROM t WHERE b = $1 AND c = $2");
        assert_eq!(postgres_dialect("SELECT '?1', \"a?\" FROM t WHERE x = ?"), "SELECT '?1', \"a?\" FROM t WHERE x = $1");
        assert_eq!(postgres_dialect("INSERT OR IGNORE INTO blobs (a, b) VALUES (?1, ?2)"), "INSERT INTO blobs (a, b) VALUES ($1, $2) ON CONFLICT DO NOTHING");
        assert_eq!(
            postgres_dialect("INSERT OR IGNORE INTO blobs (a) VALUES (?1) RETURNING id"),
            "INSERT INTO blobs (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id"
        );
        assert_eq!(find_keyword("SELECT returning_x FROM t", "RETURNING"), None);
        assert_eq!(postgres_dialect("-- it's\nSELECT ?1"), "-- it's\nSELECT $1");
        assert_eq!(
            postgres_dialect("CREATE FUNCTION f() AS $$ SELECT '?' $$; SELECT ?1 -- ?\n, ?2"),
            "CREATE FUNCTION f() AS $$ SELECT '?' $$; SELECT $1 -- ?\n, $2"
        );
        assert_eq!(postgres_dialect("SELECT $$ it's ? $$, ?1"), "SELECT $$ it's ? $$, $1");
    }

    #[test]
    fn values_cross_as_storage_classes() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut stmt = Statement::sqlite(conn.prepare("SELECT ?1, ?2, ?3, ?4, ?5").unwrap());
        let row: (i64, Option<String>, f64, Vec<u8>, bool) =
            stmt.query_row(params![7i64, None::<String>, 1.5f64, &[1u8, 2][..], true], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))).unwrap();
        assert_eq!(row, (7, None, 1.5, vec![1, 2], true));
        let e = stmt.query_row(params![1, 2, 3, 4, 5], |r| r.get::<_, String>(0)).unwrap_err();
        assert_eq!(e.to_string(), "column 0: an integer value where text was expected");
    }
}
