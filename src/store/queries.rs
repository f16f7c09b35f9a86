//! Reading from the store: conversation listings, entries, and the lines of documents.
//!
//! Lines come back exactly as they were imported: a row's `raw` bytes when it has them, else
//! the codec's encoding of its typed columns (which import verified to be identical).

use std::collections::HashMap;

use super::sql::{params, OptionalExtension, Row};

use super::writer::DocumentKind;
use super::{Connection, StoreError};
use crate::codec::bookmarks::{encode_bookmark, Bookmark};
use crate::codec::events::{encode_event, Event, Payload};
use crate::codec::json::{self, Json};
use crate::codec::message_line::encode_message;
use crate::fs::watermark::Watermark;
use crate::model::{Message, Role};

/// One row of a listing, with gptme's `ConversationMeta` meanings.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSummary {
    pub chat_id: String,
    /// The name of its source (see [`super::sources`]).
    pub source: String,
    /// Display name: config.toml's `[chat] name`, else the chat id.
    pub name: String,
    pub source_dir: String,
    pub workspace: Option<String>,
    pub created: f64,
    pub modified: f64,
    pub messages: i64,
    pub branches: i64,
    pub model: Option<String>,
    /// `None` when the sum is not a finite number.
    pub total_cost: Option<f64>,
    pub total_input_tokens: i64,
    pub total_output_tokens: i64,
    pub total_cache_read_tokens: i64,
    pub total_cache_creation_tokens: i64,
    /// JSON object text: `{model: {cost, input_tokens, output_tokens, cache_read_tokens}}`.
    pub models_usage: String,
    pub last_message_role: Option<String>,
    /// gptme's preview of the last message, its secrets masked ([`masked_preview`]).
    pub last_message_preview: Option<String>,
    /// Archived out of its logs root (`sessiondb archive`): kept whole in the store only.
    pub archived: bool,
}

/// How many columns [`summary_columns`] gives.
const SUMMARY_COLUMNS: usize = 19;

/// The columns [`summary_from_row`] reads, of `conversations` on `engine` (its source by its
/// label: [`super::sources::Source::label`]).
fn summary_columns(engine: super::sql::Engine) -> String {
    format!(
        "chat_id, coalesce(name, chat_id), source_dir, workspace, created, modified,
         message_count, branch_count, model, total_cost, input_tokens, output_tokens, cache_read_tokens,
         cache_creation_tokens, models_usage, last_role, last_preview, (SELECT {} FROM sources s WHERE s.id = source_id), archived_at IS NOT NULL",
        super::sources::label_sql(engine)
    )
}

/// A stored preview as every surface shows it: with its secrets masked, a secret it cuts short
/// too ([`crate::secrets::mask_preview`]); `--show-secrets` shows whole messages, not previews.
fn masked_preview(preview: String) -> String {
    match crate::secrets::mask_preview(&preview) {
        std::borrow::Cow::Borrowed(_) => preview,
        std::borrow::Cow::Owned(masked) => masked,
    }
}

fn summary_from_row(r: &Row) -> super::sql::Result<ConversationSummary> {
    Ok(ConversationSummary {
        chat_id: r.get(0)?,
        name: r.get(1)?,
        source_dir: r.get(2)?,
        workspace: r.get(3)?,
        created: r.get(4)?,
        modified: r.get(5)?,
        messages: r.get(6)?,
        branches: r.get(7)?,
        model: r.get(8)?,
        total_cost: r.get(9)?,
        total_input_tokens: r.get(10)?,
        total_output_tokens: r.get(11)?,
        total_cache_read_tokens: r.get(12)?,
        total_cache_creation_tokens: r.get(13)?,
        models_usage: r.get(14)?,
        last_message_role: r.get(15)?,
        last_message_preview: r.get::<_, Option<String>>(16)?.map(masked_preview),
        source: r.get(17)?,
        archived: r.get(18)?,
    })
}

/// How to order a listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortBy {
    #[default]
    Modified,
    Created,
    Cost,
    Tokens,
    Messages,
}

/// A limit as people give one (`-n N`, an MCP tool's `limit`): at most `n`, and 0 for no
/// limit at all, whatever is limited (conversations listed or searched, messages read).
pub fn at_most(n: usize) -> Option<usize> {
    (n > 0).then_some(n)
}

/// Which conversations to list, and in what order.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub include_test: bool,
    /// At most this many (`None`: all; see [`at_most`]).
    pub limit: Option<usize>,
    /// Only conversations whose last model matches this, ignoring case: a glob when it has `*`
    /// or `?` (`*sonnet*`), else any part of the name (`gpt-4` finds `openai/gpt-4o`).
    pub model: Option<String>,
    /// Only conversations modified in `[since, until)` (epoch seconds).
    pub since: Option<f64>,
    pub until: Option<f64>,
    /// Only conversations whose display name or id matches this glob.
    pub name: Option<String>,
    /// Only conversations of this source (a row id of `sources`).
    pub source: Option<i64>,
    pub sort: SortBy,
    /// Smallest first instead of largest (oldest first, for times): the exact reverse of the
    /// listing, ties (broken by chat id) included.
    pub reverse: bool,
}

/// Refuses a model filter ([`ListFilter::model`]) that no conversation's last model matches,
/// naming some of the models there are: an empty listing would hide a typo (search refuses
/// its filters the same way, [`StoreError::NoSuchFilter`]).
pub fn check_model_filter(conn: &Connection, model: &str) -> Result<(), StoreError> {
    if count_filtered(conn, &ListFilter { model: Some(model.to_owned()), include_test: true, ..ListFilter::default() })? > 0 {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached("SELECT DISTINCT model FROM conversations WHERE model IS NOT NULL ORDER BY model LIMIT 10")?;
    let models = stmt.query_map((), |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    let known = if models.is_empty() {
        "no conversation names a model".to_owned()
    } else {
        format!("no conversation's model matches it; models include {}", models.join(", "))
    };
    Err(StoreError::NoSuchFilter { flag: "--model", value: model.to_owned(), known })
}

/// Every conversation, most recently modified first (gptme's order). Test conversations
/// (`tmp*`, `test-*`, `*gptme-evals-*`) only when `include_test`. Served by the
/// `conversations_by_modified` index; no message is read.
pub fn list_conversations(conn: &Connection, include_test: bool, limit: Option<usize>) -> Result<Vec<ConversationSummary>, StoreError> {
    list_filtered(conn, &ListFilter { include_test, limit, ..ListFilter::default() })
}

/// [`list_conversations`] with filters and another order.
pub fn list_filtered(conn: &Connection, f: &ListFilter) -> Result<Vec<ConversationSummary>, StoreError> {
    let mut out = Vec::new();
    visit_filtered(conn, f, |c| -> Result<(), StoreError> {
        out.push(c);
        Ok(())
    })?;
    Ok(out)
}

/// [`list_filtered`], handing each row to `visit` as it is read instead of collecting them:
/// a listing of ten thousand conversations is written out without being held in memory twice.
/// An error from `visit` stops the listing and is returned.
pub fn visit_filtered<E: From<StoreError>>(conn: &Connection, f: &ListFilter, mut visit: impl FnMut(ConversationSummary) -> Result<(), E>) -> Result<(), E> {
    let (sql, args) = listing_sql(f, conn.engine());
    let mut stmt = conn.prepare(&sql).map_err(StoreError::from)?;
    let mut rows = stmt.query(super::sql::params_from_iter(args)).map_err(StoreError::from)?;
    while let Some(row) = rows.next().map_err(StoreError::from)? {
        visit(summary_from_row(&row).map_err(StoreError::from)?)?;
    }
    Ok(())
}

/// How many conversations [`visit_filtered`] would list without `f.limit`.
pub fn count_filtered(conn: &Connection, f: &ListFilter) -> Result<usize, StoreError> {
    let (sql, args) = listing_sql(&ListFilter { limit: None, ..f.clone() }, conn.engine());
    let n: i64 = conn.query_row(&format!("SELECT count(*) FROM ({sql}) AS listed"), super::sql::params_from_iter(args), |r| r.get(0))?;
    Ok(n as usize)
}

/// What a listing's row is found and ordered by, without the rest of it: for a filter applied
/// row by row in the listing's order (`serve`'s `?q=`), the whole rows are then read for the
/// few kept ([`summaries_by_id`]).
#[derive(Debug, Clone)]
pub struct ListingKey {
    /// The store's id of the conversation.
    pub id: i64,
    pub chat_id: String,
    /// Its name, else its chat id (as [`ConversationSummary::name`]).
    pub name: String,
    pub modified: f64,
    /// As [`ConversationSummary::last_message_preview`].
    pub preview: Option<String>,
}

/// The keys of the rows [`list_filtered`] gives, in its order.
pub fn listing_keys(conn: &Connection, f: &ListFilter) -> Result<Vec<ListingKey>, StoreError> {
    let (sql, args) = listing_sql_of(f, conn.engine(), "id, chat_id, coalesce(name, chat_id), modified, last_preview");
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(super::sql::params_from_iter(args), |r| {
        Ok(ListingKey { id: r.get(0)?, chat_id: r.get(1)?, name: r.get(2)?, modified: r.get(3)?, preview: r.get::<_, Option<String>>(4)?.map(masked_preview) })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The listing rows of the conversations with these store ids, by id (an id no longer
/// stored is left out).
pub fn summaries_by_id(conn: &Connection, ids: &[i64]) -> Result<HashMap<i64, ConversationSummary>, StoreError> {
    // The id after the listing's columns, which `summary_from_row` reads from the first.
    let sql = format!("SELECT {}, id FROM conversations WHERE {}", summary_columns(conn.engine()), super::sql::among_ids(conn.engine(), "id", 1));
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([super::sql::id_list(ids.iter().copied())], |r| Ok((r.get::<_, i64>(SUMMARY_COLUMNS)?, summary_from_row(r)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The listing's statement and its arguments, on `engine`.
fn listing_sql(f: &ListFilter, engine: super::sql::Engine) -> (String, Vec<super::sql::Value>) {
    listing_sql_of(f, engine, &summary_columns(engine))
}

/// [`listing_sql`] giving `columns` of each row.
fn listing_sql_of(f: &ListFilter, engine: super::sql::Engine, columns: &str) -> (String, Vec<super::sql::Value>) {
    let mut filters: Vec<String> = Vec::new();
    let mut args: Vec<super::sql::Value> = Vec::new();
    let mut arg = |v: super::sql::Value| {
        args.push(v);
        format!("?{}", args.len())
    };
    // A conversation whose directory is gone is kept (until `sessiondb rm`) but not listed,
    // as gptme no longer lists it.
    filters.push("deleted_at IS NULL".into());
    if !f.include_test {
        filters.push(format!("NOT {}", crate::layout::test_ids_sql("chat_id")));
    }
    if let Some(m) = &f.model {
        let p = arg(m.to_lowercase().into());
        // SQLite's lower() folds ASCII only, as model names are.
        filters.push(if m.contains(['*', '?']) { format!("glob({p}, lower(model))") } else { format!("instr(lower(model), {p}) > 0") });
    }
    if let Some(t) = f.since {
        filters.push(format!("modified >= {}", arg(t.into())));
    }
    if let Some(t) = f.until {
        filters.push(format!("modified < {}", arg(t.into())));
    }
    if let Some(s) = f.source {
        // Written so that no index serves it (as `list_page` writes it): the listing is then
        // read in order from its sort key's index, stopping at the limit, where SQLite's
        // planner took the source's conversations from the key `(source_id, chat_id)` and
        // sorted them all (the 100 newest of 10,000: 40 ms instead of 0.3).
        let p = arg(s.into());
        filters.push(format!("(source_id = {p} OR {p} IS NULL)"));
    }
    if let Some(g) = &f.name {
        let p = arg(g.clone().into());
        filters.push(format!("(glob({p}, coalesce(name, chat_id)) OR glob({p}, chat_id))"));
    }
    let filter = if filters.is_empty() { String::new() } else { format!("WHERE {}", filters.join(" AND ")) };
    let key = match f.sort {
        SortBy::Modified => "modified",
        SortBy::Created => "created",
        SortBy::Cost => "coalesce(total_cost, 0)",
        // The sort key of each engine's index: counts saturate at i64's maximum, whose sum
        // SQLite makes a float, and PostgreSQL refuses as a bigint (so adds as numeric).
        SortBy::Tokens if engine == super::sql::Engine::Postgres => "(input_tokens::numeric + output_tokens)",
        SortBy::Tokens => "input_tokens + output_tokens",
        SortBy::Messages => "message_count",
    };
    // `--reverse` is the exact reverse of the listing, ties included, so that each sort key's
    // index (schema 0006) serves both directions.
    let (direction, tie) = if f.reverse { ("ASC", "DESC") } else { ("DESC", "ASC") };
    let limit = arg((f.limit.map_or(i64::MAX, |l| l as i64)).into());
    let sql = format!("SELECT {columns} FROM conversations {filter} ORDER BY {key} {direction}, chat_id {tie} LIMIT {limit}");
    (sql, args)
}

/// A page of the listing as gptme-server pages it: newest first, ties by chat id descending,
/// starting after `after` — `(modified, Some(chat_id))` continues after that conversation,
/// `(modified, None)` (a bare timestamp) after everything modified at or after it. Test
/// conversations and those whose directory is gone are left out, as in [`list_conversations`];
/// with `source`, so are other sources' conversations.
pub fn list_page(conn: &Connection, source: Option<i64>, after: Option<(f64, Option<&str>)>, limit: usize) -> Result<Vec<ConversationSummary>, StoreError> {
    let test = crate::layout::test_ids_sql("chat_id");
    let (cursor, args): (&str, Vec<super::sql::Value>) = match after {
        None => ("", vec![]),
        Some((t, None)) => ("AND modified < ?3", vec![t.into()]),
        Some((t, Some(id))) => ("AND (modified < ?3 OR (modified = ?3 AND chat_id < ?4))", vec![t.into(), id.to_owned().into()]),
    };
    let sql = format!(
        "SELECT {} FROM conversations WHERE deleted_at IS NULL AND NOT {test} AND (source_id = ?2 OR ?2 IS NULL) {cursor}
         ORDER BY modified DESC, chat_id DESC LIMIT ?1",
        summary_columns(conn.engine())
    );
    let mut params: Vec<super::sql::Value> = vec![(limit as i64).into(), source.map_or(super::sql::Value::Null, Into::into)];
    params.extend(args);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(super::sql::params_from_iter(params), summary_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The listing row of the conversation `chat_id` names (a chat id, or `SOURCE:CHAT`: see
/// [`super::sources::resolve`]), or an error naming it.
pub fn conversation_summary(conn: &Connection, chat_id: &str) -> Result<ConversationSummary, StoreError> {
    let id = conversation_id(conn, chat_id)?;
    let sql = format!("SELECT {} FROM conversations WHERE id = ?1", summary_columns(conn.engine()));
    Ok(conn.query_row(&sql, [id], summary_from_row)?)
}

/// The store's id of the conversation `chat_id` names ([`super::sources::resolve`]), or an
/// error naming it.
pub fn conversation_id(conn: &Connection, chat_id: &str) -> Result<i64, StoreError> {
    super::sources::conversation_id(conn, chat_id)
}

/// How a command can name every stored conversation, sorted: the chat id, or `SOURCE:CHAT`
/// for a chat id stored in more than one source.
pub fn chat_ids(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT CASE WHEN (SELECT count(*) FROM conversations o WHERE o.chat_id = c.chat_id) > 1 THEN {} || ':' || c.chat_id ELSE c.chat_id END AS named
         FROM conversations c JOIN sources s ON s.id = c.source_id ORDER BY c.chat_id, s.name",
        super::sources::label_sql(conn.engine())
    ))?;
    let rows = stmt.query_map((), |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// How commands name conversation `c`: its chat id, or `SOURCE:CHAT` when that is not one of
/// `names` (the store's names, [`chat_ids`]: qualified where several sources have the chat id).
pub fn name_among(names: &std::collections::HashSet<String>, c: &ConversationSummary) -> String {
    if names.contains(&c.chat_id) {
        c.chat_id.clone()
    } else {
        super::sources::qualified(&c.source, &c.chat_id)
    }
}

/// The conversations with changes queued for their directories (see `sync::pending`).
pub fn queued_chat_ids(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare("SELECT chat_id FROM conversations c WHERE EXISTS (SELECT 1 FROM pending_paths p WHERE p.conversation_id = c.id)")?;
    let rows = stmt.query_map((), |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A filesystem entry of a conversation directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
    pub mode: u32,
    pub mtime_ns: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    Dir,
    Symlink(Vec<u8>),
    Blob([u8; 32]),
    Document { id: i64, kind: DocumentKind, ends_with_newline: bool },
}

/// Every entry of a conversation, in path order (parents before children).
pub fn entries(conn: &Connection, conversation_id: i64) -> Result<Vec<Entry>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT e.path, e.kind, e.mode, e.mtime_ns, e.link_target, e.blob_sha256, d.id, d.kind, d.ends_with_newline
         FROM entries e LEFT JOIN documents d ON d.conversation_id = e.conversation_id AND d.path = e.path
         WHERE e.conversation_id = ?1 ORDER BY e.path",
    )?;
    let mut rows = stmt.query([conversation_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let path: String = r.get(0)?;
        let corrupt = |what: &str| StoreError::Corrupt(format!("entry {path:?}: {what}"));
        let kind: String = r.get(1)?;
        let kind = match kind.as_str() {
            "dir" => EntryKind::Dir,
            "symlink" => EntryKind::Symlink(r.get::<_, Option<Vec<u8>>>(4)?.ok_or_else(|| corrupt("symlink without target"))?),
            "blob" => {
                let sha: Option<Vec<u8>> = r.get(5)?;
                EntryKind::Blob(sha.and_then(|s| s.try_into().ok()).ok_or_else(|| corrupt("blob without a valid digest"))?)
            }
            "document" => {
                let doc_kind: Option<String> = r.get(7)?;
                EntryKind::Document {
                    id: r.get::<_, Option<i64>>(6)?.ok_or_else(|| corrupt("document row missing"))?,
                    kind: doc_kind.as_deref().and_then(DocumentKind::parse).ok_or_else(|| corrupt("unknown document kind"))?,
                    ends_with_newline: r.get(8)?,
                }
            }
            other => return Err(corrupt(&format!("unknown kind {other:?}"))),
        };
        out.push(Entry { kind, mode: r.get(2)?, mtime_ns: r.get(3)?, path });
    }
    Ok(out)
}

/// What sessiondb last knew of one entry of a conversation directory: enough to tell, from a
/// fresh `lstat`, whether the file changed and whether it only grew (see `sync::incremental`).
pub struct StoredEntry {
    pub kind: String,
    pub mode: u32,
    pub mtime_ns: i64,
    pub size: Option<u64>,
    pub link_target: Option<Vec<u8>>,
    /// For documents: the watermark, and whether the stored lines end with a newline.
    pub mark: Option<Watermark>,
    pub ends_with_newline: bool,
}

/// Every entry of a conversation as last read or written, by path.
pub fn stored_entries(conn: &Connection, conversation_id: i64) -> Result<HashMap<String, StoredEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT e.path, e.kind, e.mode, e.mtime_ns, e.size, e.ino, e.tail_sha256, e.link_target, d.ends_with_newline
         FROM entries e LEFT JOIN documents d ON d.conversation_id = e.conversation_id AND d.path = e.path
         WHERE e.conversation_id = ?1",
    )?;
    let rows = stmt.query_map([conversation_id], |r| {
        let size: Option<i64> = r.get(4)?;
        let ino: Option<i64> = r.get(5)?;
        let tail: Option<Vec<u8>> = r.get(6)?;
        let mark = match (size, ino, tail.and_then(|t| <[u8; 32]>::try_from(t.as_slice()).ok())) {
            (Some(size), Some(ino), Some(tail)) => Some(Watermark { size: size as u64, ino: ino as u64, tail }),
            _ => None,
        };
        Ok((
            r.get::<_, String>(0)?,
            StoredEntry {
                kind: r.get(1)?,
                mode: r.get(2)?,
                mtime_ns: r.get(3)?,
                size: size.map(|s| s as u64),
                link_target: r.get(7)?,
                mark,
                ends_with_newline: r.get::<_, Option<bool>>(8)?.unwrap_or(true),
            },
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The size (`None` for a directory) and mtime of every entry of a conversation, by path: the
/// bases a queued operation records (see [`super::pending::queue_paths`]).
pub fn entry_stats(conn: &Connection, conversation_id: i64) -> Result<HashMap<String, (Option<u64>, i64)>, StoreError> {
    Ok(conn
        .prepare("SELECT path, size, mtime_ns FROM entries WHERE conversation_id = ?1")?
        .query_map([conversation_id], |r| Ok((r.get(0)?, (r.get::<_, Option<i64>>(1)?.map(|s| s as u64), r.get(2)?))))?
        .collect::<Result<_, _>>()?)
}

/// What the store last saw of a conversation's main transcript.
#[derive(Debug, Clone)]
pub struct TranscriptSeen {
    /// The conversation's directory.
    pub dir: String,
    pub size: Option<u64>,
    pub mtime_ns: i64,
}

/// The [`TranscriptSeen`] of every conversation of logs root `root`'s source (the one this
/// connection's role reads it into: [`super::sources::reading`]), by chat id. One pass over an
/// index.
pub fn main_transcript_stats(conn: &Connection, root: &std::path::Path) -> Result<HashMap<String, TranscriptSeen>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT c.chat_id, c.source_dir, e.size, e.mtime_ns FROM conversations c JOIN entries e ON e.conversation_id = c.id AND e.path = '{}'
         WHERE c.source_id = {}",
        crate::layout::MAIN_TRANSCRIPT,
        super::sources::root_source_sql(conn)
    ))?;
    let rows = stmt.query_map([super::sources::root_key(root).to_string_lossy()], |r| {
        Ok((r.get(0)?, TranscriptSeen { dir: r.get(1)?, size: r.get::<_, Option<i64>>(2)?.map(|s| s as u64), mtime_ns: r.get(3)? }))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The size of a conversation's main transcript as the store last saw it (`None` when
/// unknown): one indexed lookup, for a listing that needs it for a page of conversations.
pub fn main_transcript_size(conn: &Connection, chat_id: &str) -> Result<Option<u64>, StoreError> {
    let id = match conversation_id(conn, chat_id) {
        Ok(id) => id,
        Err(StoreError::NoConversation(_) | StoreError::Ambiguous { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(conn
        .prepare_cached(&format!("SELECT e.size FROM entries e WHERE e.conversation_id = ?1 AND e.path = '{}'", crate::layout::MAIN_TRANSCRIPT))?
        .query_row([id], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten()
        .map(|s| s as u64))
}

/// The mtime of entry `path` of a conversation, in nanoseconds. Fails when it has no such entry.
pub fn entry_mtime(conn: &Connection, conversation_id: i64, path: &str) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT mtime_ns FROM entries WHERE conversation_id = ?1 AND path = ?2", params![conversation_id, path], |r| r.get(0))?)
}

/// The recorded mtime of every directory of a conversation, by path.
pub fn dir_mtimes(conn: &Connection, conversation_id: i64) -> Result<HashMap<String, i64>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT path, mtime_ns FROM entries WHERE conversation_id = ?1 AND kind = 'dir'")?;
    let rows = stmt.query_map([conversation_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The bytes and mode of file `path` of a conversation as stored; `None` when it has no such
/// file.
pub fn stored_file(conn: &Connection, conversation_id: i64, path: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
    let stored: Option<(Vec<u8>, u32)> = conn
        .query_row("SELECT blob_sha256, mode FROM entries WHERE conversation_id = ?1 AND path = ?2 AND kind = 'blob'", params![conversation_id, path], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let Some((sha, mode)) = stored else { return Ok(None) };
    let sha = <[u8; 32]>::try_from(sha.as_slice()).map_err(|_| StoreError::Corrupt(format!("{path} has an invalid digest")))?;
    Ok(Some((super::blobs::read_all(conn, &sha)?, mode)))
}

/// The fingerprint of a conversation's directory as the store last read or wrote it.
pub fn fingerprint(conn: &Connection, conversation_id: i64) -> Result<Vec<u8>, StoreError> {
    Ok(conn.prepare_cached("SELECT fingerprint FROM conversations WHERE id = ?1")?.query_row([conversation_id], |r| r.get(0))?)
}

/// The timestamp of message row `message_id` as gptme wrote it (`None`: the line has none). For
/// a search hit ([`super::search::Hit::message_id`]). Fails when there is no such row.
pub fn message_timestamp(conn: &Connection, message_id: i64) -> Result<Option<String>, StoreError> {
    Ok(conn.prepare_cached("SELECT timestamp FROM messages WHERE id = ?1")?.query_row([message_id], |r| r.get::<_, super::timestamps::MessageTime>(0))?.0)
}

/// The logs roots the stored conversations of the sources this connection's role reads roots
/// into come from ([`super::sources::usable`]), each once, sorted.
pub fn logs_roots(conn: &Connection) -> Result<Vec<std::path::PathBuf>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT DISTINCT root FROM sources s WHERE EXISTS (SELECT 1 FROM conversations c WHERE c.source_id = s.id) AND {} ORDER BY root",
        super::sources::usable_sql(conn)
    ))?;
    let roots = stmt.query_map((), |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    Ok(roots.into_iter().map(std::path::PathBuf::from).collect())
}

/// Every stored conversation's fingerprint, by chat id: of the connection's source when it is
/// scoped to one ([`Connection::scope_to`]), else of every source.
pub fn fingerprints(conn: &Connection) -> Result<HashMap<String, Vec<u8>>, StoreError> {
    let mut stmt = conn.prepare("SELECT chat_id, fingerprint FROM conversations WHERE source_id = ?1 OR ?1 IS NULL")?;
    let rows = stmt.query_map([conn.scope()], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A stored conversation of one logs root, as a sync sees it.
#[derive(Debug, Clone)]
pub struct RootConversation {
    pub id: i64,
    pub fingerprint: Vec<u8>,
    /// Its directory was found gone (see [`super::modify::mark_deleted`]).
    pub deleted: bool,
    /// Archived out of the root (see [`super::modify::set_archived`]): its directory missing is
    /// no deletion.
    pub archived: bool,
    /// It has changes queued for its directory (see [`super::pending`]).
    pub queued: bool,
    /// The recorded mtime of each of its directories, by path ([`dir_mtimes`]).
    pub dir_mtimes: HashMap<String, i64>,
}

/// The stored conversations of logs root `root`'s source (the one this connection's role reads
/// it into: [`super::sources::reading`]), by chat id (none when there is no such source).
pub fn conversations_in(conn: &Connection, root: &std::path::Path) -> Result<HashMap<String, RootConversation>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT c.id, c.chat_id, c.deleted_at IS NOT NULL,
                EXISTS (SELECT 1 FROM pending_paths p WHERE p.conversation_id = c.id), c.fingerprint, c.archived_at IS NOT NULL
         FROM conversations c WHERE c.source_id = {}",
        super::sources::root_source_sql(conn)
    ))?;
    let root = super::sources::root_key(root).to_string_lossy().into_owned();
    let rows = stmt.query_map([&root], |r| {
        let stored =
            RootConversation { id: r.get(0)?, deleted: r.get(2)?, queued: r.get(3)?, fingerprint: r.get(4)?, archived: r.get(5)?, dir_mtimes: HashMap::new() };
        Ok((r.get::<_, String>(1)?, stored))
    })?;
    let mut found: HashMap<String, RootConversation> = rows.collect::<Result<_, _>>()?;
    // Every directory's mtime in one statement too: a sync compares them for each unchanged
    // conversation, and on a server a question a conversation is a round trip each.
    let mut dirs = conn.prepare(&format!(
        "SELECT c.chat_id, e.path, e.mtime_ns FROM conversations c JOIN entries e ON e.conversation_id = c.id
         WHERE c.source_id = {} AND e.kind = 'dir'",
        super::sources::root_source_sql(conn)
    ))?;
    let rows = dirs.query_map([&root], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?;
    for row in rows {
        let (chat_id, path, mtime) = row?;
        if let Some(c) = found.get_mut(&chat_id) {
            c.dir_mtimes.insert(path, mtime);
        }
    }
    Ok(found)
}

/// The conversation's bookmarks (gptme's `conv-checkpoints.jsonl`), oldest first, damaged
/// lines skipped as gptme skips them.
pub fn bookmarks(conn: &Connection, conversation_id: i64) -> Result<Vec<Bookmark>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT c.idx, c.label, c.timestamp FROM conv_checkpoints c JOIN documents d ON d.id = c.document_id
         WHERE d.conversation_id = ?1 AND c.idx IS NOT NULL ORDER BY c.line_no",
    )?;
    let rows = stmt.query_map([conversation_id], |r| Ok(Bookmark { index: r.get(0)?, label: r.get(1)?, timestamp: r.get(2)? }))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Opens a blob for streaming reads (see [`super::blobs`]).
pub fn open_blob<'c>(conn: &'c Connection, sha256: &[u8; 32]) -> Result<super::blobs::BlobReader<'c>, StoreError> {
    super::blobs::open(conn, sha256)
}

/// A message's columns, over `messages m` and its text `texts t` ([`MESSAGE_TEXT`]); the last
/// seven are those its metadata may be rebuilt from ([`super::metadata_columns`]).
const MESSAGE_COLUMNS: &str =
    "m.role, t.data, m.timestamp, m.files, m.file_hashes, m.call_id, m.pinned, m.hide, m.ui_only, m.ephemeral_ttl, m.metadata, m.extra, m.raw, m.text_id,
     m.metadata_shape, m.model, m.cost, m.input_tokens, m.output_tokens, m.cache_read_tokens, m.cache_creation_tokens";

/// How [`MESSAGE_COLUMNS`] reach a message's text, after `messages m`.
const MESSAGE_TEXT: &str = "LEFT JOIN texts t ON t.id = m.text_id";

/// How many columns [`MESSAGE_COLUMNS`] are.
const MESSAGE_COLUMN_COUNT: usize = 21;

/// A message row: the typed message (absent for blank or malformed lines), its raw bytes, and
/// its text as stored until [`MessageRow::decoded`] reads it into the message, with the shape
/// of its metadata and the columns that rebuild it, when it is kept so.
struct MessageRow {
    message: Option<Message>,
    raw: Option<Vec<u8>>,
    text: Option<(i64, Vec<u8>)>,
    metadata: Option<StoredMetadata>,
}

/// A row's metadata shape and the columns it is rebuilt from: model, cost and token counts.
type StoredMetadata = (i64, Option<String>, Option<f64>, [i64; 4]);

impl MessageRow {
    /// The row with its message's content read from its text, and its metadata rebuilt from
    /// its columns when they hold it.
    fn decoded(mut self, conn: &Connection) -> Result<MessageRow, StoreError> {
        if let (Some(m), Some((id, data))) = (self.message.as_mut(), self.text.take()) {
            m.content = conn.decode_text(id, &data)?;
        }
        if let (Some(m), Some((shape, model, cost, tokens))) = (self.message.as_mut(), self.metadata.take()) {
            let columns = super::metadata_columns::Columns { model: model.as_deref(), cost, tokens };
            m.metadata =
                Some(super::metadata_columns::rebuild(shape, &columns).map_err(|why| StoreError::Corrupt(format!("a message row cannot be read: {why}")))?);
        }
        Ok(self)
    }
}

fn parse_stored_json(text: Option<String>) -> Option<Json> {
    text.and_then(|t| json::parse(&t).ok()).map(|p| p.value)
}

/// Reads [`MESSAGE_COLUMNS`] starting at column `at`.
fn message_from_row(r: &Row, at: usize) -> super::sql::Result<MessageRow> {
    let raw: Option<Vec<u8>> = r.get(at + 12)?;
    let Some(role) = r.get::<_, Option<String>>(at)? else {
        return Ok(MessageRow { message: None, raw, text: None, metadata: None });
    };
    let text = r.get::<_, Option<i64>>(at + 13)?.zip(r.get::<_, Option<Vec<u8>>>(at + 1)?);
    let mut m = Message::new(Role::parse(&role), String::new(), r.get::<_, super::timestamps::MessageTime>(at + 2)?.0);
    if let Some(Json::Array(files)) = parse_stored_json(r.get(at + 3)?) {
        m.files = files.into_iter().filter_map(|f| if let Json::Str(s) = f { Some(s) } else { None }).collect();
    }
    if let Some(Json::Object(hashes)) = parse_stored_json(r.get(at + 4)?) {
        m.file_hashes = hashes.into_iter().filter_map(|(p, h)| if let Json::Str(h) = h { Some((p, h)) } else { None }).collect();
    }
    m.call_id = r.get(at + 5)?;
    m.pinned = r.get(at + 6)?;
    m.hide = r.get(at + 7)?;
    m.ui_only = r.get(at + 8)?;
    m.ephemeral_ttl = r.get(at + 9)?;
    m.metadata = parse_stored_json(r.get(at + 10)?);
    if let Some(Json::Object(extra)) = parse_stored_json(r.get(at + 11)?) {
        m.extra = extra;
    }
    let metadata = match r.get::<_, Option<i64>>(at + 14)? {
        Some(shape) => Some((shape, r.get(at + 15)?, r.get(at + 16)?, [r.get(at + 17)?, r.get(at + 18)?, r.get(at + 19)?, r.get(at + 20)?])),
        None => None,
    };
    Ok(MessageRow { message: Some(m), raw, text, metadata })
}

/// Calls `f` with each line of a document, in order, exactly as imported.
pub fn for_each_line(conn: &Connection, document_id: i64, kind: DocumentKind, mut f: impl FnMut(&[u8]) -> std::io::Result<()>) -> Result<(), StoreError> {
    let mut line = Vec::new();
    for_each_line_in_pieces(conn, document_id, kind, |piece, ends| {
        if ends && line.is_empty() {
            return f(piece);
        }
        line.extend_from_slice(piece);
        if ends {
            f(&line)?;
            line.clear();
        }
        Ok(())
    })
}

/// [`for_each_line`] in pieces, for writing a document out in bounded memory: `f` gets each
/// line whole (`ends` true) or, for an event carrying a list of messages (a checkpoint holds
/// the whole conversation), the line's opening, each message and its close, the last with
/// `ends` true.
pub fn for_each_line_in_pieces(
    conn: &Connection,
    document_id: i64,
    kind: DocumentKind,
    mut f: impl FnMut(&[u8], bool) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let io = |source| StoreError::Io { path: format!("document {document_id}"), source };
    match kind {
        DocumentKind::Branch | DocumentKind::View | DocumentKind::Lossless => {
            with_document_lines(conn, document_id, 0, |lines| lines.map(|l| l.line()).try_for_each(|line| f(&line, true)))?.map_err(io)?;
        }
        DocumentKind::Events => {
            let mut stmt = conn.prepare("SELECT line_no, seq, ts, type, payload_form, payload, raw FROM events WHERE document_id = ?1 ORDER BY line_no")?;
            let sql = format!(
                "SELECT {MESSAGE_COLUMNS} FROM event_messages em JOIN messages m ON m.id = em.message_id {MESSAGE_TEXT}
                 WHERE em.document_id = ?1 AND em.line_no = ?2 ORDER BY em.position"
            );
            let mut nested = conn.prepare(&sql)?;
            let mut rows = stmt.query([document_id])?;
            let mut encoded = String::new();
            while let Some(row) = rows.next()? {
                if let Some(raw) = row.get::<_, Option<Vec<u8>>>(6)? {
                    f(&raw, true).map_err(io)?;
                    continue;
                }
                let line_no: i64 = row.get(0)?;
                let form: Option<String> = row.get(4)?;
                let corrupt = |what: &str| StoreError::Corrupt(format!("event line {} of document {document_id}: {what}", line_no + 1));
                let mut event = Event { seq: row.get(1)?, ts: row.get(2)?, kind: row.get(3)?, payload: Payload::Messages(Vec::new()) };
                match form.as_deref() {
                    Some("message") => {
                        let mut messages = Vec::new();
                        for row in nested.query_map(params![document_id, line_no], |r| message_from_row(r, 0))? {
                            messages.push(row?.decoded(conn)?.message.ok_or_else(|| corrupt("payload refers to a line that is not a message"))?);
                        }
                        if messages.len() != 1 {
                            return Err(corrupt("an append event must carry exactly one message"));
                        }
                        event.payload = Payload::Message(messages.remove(0));
                    }
                    Some("messages") => {
                        // The line with an empty list, split where the messages go.
                        let empty = encode_event(&event);
                        let at = empty.rfind("[]").ok_or_else(|| corrupt("no list of messages"))? + 1;
                        f(&empty.as_bytes()[..at], false).map_err(io)?;
                        for (i, row) in nested.query_map(params![document_id, line_no], |r| message_from_row(r, 0))?.enumerate() {
                            let message = row?.decoded(conn)?.message.ok_or_else(|| corrupt("payload refers to a line that is not a message"))?;
                            encoded.clear();
                            if i > 0 {
                                encoded.push_str(", ");
                            }
                            crate::codec::message_line::encode_message_into(&mut encoded, &message);
                            f(encoded.as_bytes(), false).map_err(io)?;
                        }
                        f(&empty.as_bytes()[at..], true).map_err(io)?;
                        continue;
                    }
                    Some("json") => event.payload = Payload::Other(parse_stored_json(row.get(5)?).ok_or_else(|| corrupt("payload is not JSON"))?),
                    _ => return Err(corrupt("neither typed nor raw")),
                };
                f(encode_event(&event).as_bytes(), true).map_err(io)?;
            }
        }
        DocumentKind::Bookmarks => {
            let mut stmt = conn.prepare("SELECT idx, label, timestamp, raw FROM conv_checkpoints WHERE document_id = ?1 ORDER BY line_no")?;
            let mut rows = stmt.query([document_id])?;
            while let Some(row) = rows.next()? {
                match row.get::<_, Option<Vec<u8>>>(3)? {
                    Some(raw) => f(&raw, true).map_err(io)?,
                    None => {
                        let c = Bookmark { index: row.get(0)?, label: row.get(1)?, timestamp: row.get(2)? };
                        f(encode_bookmark(&c).as_bytes(), true).map_err(io)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// One stored line of a branch, view or lossless document.
#[derive(Debug, Clone)]
pub struct StoredLine {
    /// The message, or `None` for a blank or damaged line.
    pub message: Option<Message>,
    /// The line's bytes when the row keeps them as they are (a line the message's encoding
    /// would not give back); `None` when they are the message's encoding.
    raw: Option<Vec<u8>>,
    /// Its row in `messages`.
    pub message_id: i64,
}

impl StoredLine {
    /// The line's bytes, exactly as imported or written. Made from the message when the row does
    /// not keep them, so only a reader that wants them pays for that (encoding a message took a
    /// tenth of reading one, and most readers want the message alone).
    pub fn line(&self) -> Vec<u8> {
        match (&self.raw, &self.message) {
            (Some(raw), _) => raw.clone(),
            (None, Some(m)) => encode_message(m).into_bytes(),
            // Never as read (a row without either is refused); only once a caller took the
            // message out of the line.
            (None, None) => Vec::new(),
        }
    }
}

/// Every line of a branch, view or lossless document, in order.
pub fn document_lines(conn: &Connection, document_id: i64) -> Result<Vec<StoredLine>, StoreError> {
    with_document_lines(conn, document_id, 0, |lines| lines.collect())
}

/// The lines of a branch, view or lossless document from line `from` (0-based) on, in order,
/// read one row at a time as `f` takes them: memory does not depend on the document's length,
/// and lines `f` does not take are never read. A read error ends the iteration and is
/// returned instead of `f`'s result.
pub fn with_document_lines<T>(conn: &Connection, document_id: i64, from: i64, f: impl FnOnce(&mut DocumentLines<'_>) -> T) -> Result<T, StoreError> {
    lines_of(conn, document_id, ">=", "", from, f)
}

/// [`with_document_lines`] backwards: the lines before line `before`, last first.
pub fn with_document_lines_back<T>(conn: &Connection, document_id: i64, before: i64, f: impl FnOnce(&mut DocumentLines<'_>) -> T) -> Result<T, StoreError> {
    lines_of(conn, document_id, "<", " DESC", before, f)
}

/// The lines whose number is `bound_op` `bound`, in line order (`order` "") or reversed (" DESC").
fn lines_of<T>(conn: &Connection, document_id: i64, bound_op: &str, order: &str, bound: i64, f: impl FnOnce(&mut DocumentLines<'_>) -> T) -> Result<T, StoreError> {
    let sql = lines_sql(bound_op, order);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut lines = DocumentLines { conn, rows: stmt.query(params![document_id, bound])?, error: None };
    let out = f(&mut lines);
    match lines.error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The query of [`lines_of`]: the lines the document borrows (schema 0010), then its own, as two
/// index ranges that SQLite merges in order: rows stream, nothing is sorted or held.
fn lines_sql(bound_op: &str, order: &str) -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS}, m.id, l.line_no AS n FROM documents d JOIN document_lines l ON l.document_id = d.base_id JOIN messages m ON m.id = l.message_id {MESSAGE_TEXT}
          WHERE d.id = ?1 AND l.line_no < d.base_len AND l.line_no {bound_op} ?2
         UNION ALL
         SELECT {MESSAGE_COLUMNS}, m.id, dl.line_no AS n FROM document_lines dl JOIN messages m ON m.id = dl.message_id {MESSAGE_TEXT}
          WHERE dl.document_id = ?1 AND dl.line_no {bound_op} ?2
         ORDER BY n{order}"
    )
}

/// The lines of document `?1` as `(n, message_id)` rows: those it borrows (schema 0010), then
/// its own. For use as a subquery; [`lines_sql`] is the same, read in order.
pub(super) const RESOLVED_LINES: &str = "SELECT l.line_no AS n, l.message_id AS message_id FROM documents d JOIN document_lines l ON l.document_id = d.base_id
     WHERE d.id = ?1 AND l.line_no < d.base_len
     UNION ALL
     SELECT line_no, message_id FROM document_lines WHERE document_id = ?1";

/// The lines [`with_document_lines`] hands out.
pub struct DocumentLines<'s> {
    conn: &'s Connection,
    rows: super::sql::Rows<'s>,
    error: Option<StoreError>,
}

impl Iterator for DocumentLines<'_> {
    type Item = StoredLine;

    fn next(&mut self) -> Option<StoredLine> {
        if self.error.is_some() {
            return None;
        }
        let next = (|| {
            let Some(row) = self.rows.next()? else { return Ok(None) };
            let message_id = row.get(MESSAGE_COLUMN_COUNT)?;
            let row = message_from_row(&row, 0)?.decoded(self.conn)?;
            if row.raw.is_none() && row.message.is_none() {
                return Err(StoreError::Corrupt("a message row has neither columns nor raw bytes".into()));
            }
            Ok(Some(StoredLine { raw: row.raw, message: row.message, message_id }))
        })();
        next.unwrap_or_else(|e: StoreError| {
            self.error = Some(e);
            None
        })
    }
}

/// The messages of one branch (`main` is `conversation.jsonl`), skipping lines that are not
/// messages.
pub fn branch_messages(conn: &Connection, chat_id: &str, branch: &str) -> Result<Vec<Message>, StoreError> {
    let document_id = branch_document(conn, chat_id, branch)?;
    with_document_lines(conn, document_id, 0, |lines| lines.filter_map(|l| l.message).collect())
}

/// The document id of one branch (`main` is `conversation.jsonl`).
pub fn branch_document(conn: &Connection, chat_id: &str, branch: &str) -> Result<i64, StoreError> {
    let conversation_id = conversation_id(conn, chat_id)?;
    let path = crate::layout::branch_path(branch);
    conn.query_row("SELECT id FROM documents WHERE conversation_id = ?1 AND path = ?2 AND kind = 'branch'", params![conversation_id, path], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NoBranch { chat_id: chat_id.to_owned(), branch: branch.to_owned() })
}

/// The names of every conversation's branches, each once, sorted (for shell completion, which
/// does not know the conversation).
pub fn all_branch_names(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare("SELECT DISTINCT name FROM documents WHERE kind = 'branch' ORDER BY name")?;
    let rows = stmt.query_map((), |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Branch names of a conversation, `main` first.
pub fn branch_names(conn: &Connection, chat_id: &str) -> Result<Vec<String>, StoreError> {
    let conversation_id = conversation_id(conn, chat_id)?;
    let mut stmt = conn.prepare("SELECT name FROM documents WHERE conversation_id = ?1 AND kind = 'branch' ORDER BY name != 'main', name")?;
    let rows = stmt.query_map([conversation_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading a document streams: SQLite merges the borrowed range and the document's own
    /// range as they come from their index, in both directions, without a sort that would
    /// hold every line first.
    #[test]
    fn reading_a_document_sorts_nothing() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        for (op, order) in [(">=", ""), ("<", " DESC")] {
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {}", lines_sql(op, order)))
                .unwrap()
                .query_map(rusqlite::params![1, 0], |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(plan.iter().any(|s| s.contains("MERGE")), "{plan:#?}");
            assert!(!plan.iter().any(|s| s.contains("TEMP B-TREE") || s.contains("MATERIALIZE") || s.starts_with("SCAN")), "{plan:#?}");
        }
    }

    /// A listing of one source is read in order from its sort key's index, not sorted: a page
    /// of the newest costs the page, however many conversations the source holds.
    #[test]
    fn a_listing_of_one_source_sorts_nothing() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        for sort in [SortBy::Modified, SortBy::Created, SortBy::Messages] {
            let f = ListFilter { source: Some(1), limit: Some(100), sort, ..ListFilter::default() };
            let (sql, args) = listing_sql(&f, super::super::sql::Engine::Sqlite);
            let plan = super::super::sql::sqlite_plan(&conn, &sql, &args);
            assert!(!plan.iter().any(|s| s.contains("TEMP B-TREE")), "{sort:?}: {plan:#?}");
        }
    }
}
