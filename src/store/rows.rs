//! The rows import and live operations both write, each written in one place: a [`Message`]
//! as a `messages` row and its text ([`insert_message`], [`super::texts`]), and a regular file
//! as its blob and its `entries` row together ([`put_file`]).

use std::io::Read;

use super::rowsets::Insert;
use super::sql::{params, OptionalExtension, ToSql};

use super::{Connection, StoreError};
use crate::codec::json::{self, Json};
use crate::model::Message;

/// The SHA-256 of a line's bytes: the identity of a message row within a conversation.
pub type LineDigest = [u8; 32];

/// A row of `messages` to write: a message (`raw` holds the original line when the encoding of
/// `message` would not reproduce it), or a line that is not one (blank or damaged), only its
/// bytes.
pub enum NewRow<'a> {
    Message { message: &'a Message, raw: Option<&'a [u8]> },
    Other { line: &'a [u8], malformed: Option<&'a str> },
}

/// Inserts a message row of conversation `conversation_id` (of source `source_id`, whose texts
/// it shares); `raw` holds the original line when the encoding of `m` would not reproduce it.
pub fn insert_message(conn: &Connection, conversation_id: i64, source_id: i64, digest: &LineDigest, m: &Message, raw: Option<&[u8]>) -> Result<i64, StoreError> {
    Ok(insert_messages(conn, conversation_id, source_id, &[(*digest, NewRow::Message { message: m, raw })])?[0])
}

/// Inserts a row for a line that is not a message (blank or damaged): only its bytes.
pub fn insert_non_message(conn: &Connection, conversation_id: i64, digest: &LineDigest, line: &[u8], malformed: Option<&str>) -> Result<i64, StoreError> {
    Ok(insert_messages(conn, conversation_id, 0, &[(*digest, NewRow::Other { line, malformed })])?[0])
}

/// The values of a message's row, apart from its conversation and digest.
struct MessageValues<'a> {
    m: &'a Message,
    role: &'a str,
    raw: Option<&'a [u8]>,
    text_id: i64,
    files: Option<String>,
    file_hashes: Option<String>,
    /// The metadata as text, unless its [`super::metadata_columns`] shape is kept instead.
    metadata: Option<String>,
    metadata_shape: Option<i64>,
    timestamp: super::sql::Value,
    extra: Option<String>,
    model: Option<&'a str>,
    cost: Option<f64>,
    usage: crate::model::Usage,
    rewrites_unchanged: bool,
}

/// Inserts rows of `messages` of conversation `conversation_id` (of source `source_id`, whose
/// texts its messages share: [`super::texts::put_all`]), each under its line's digest (distinct,
/// and new to the conversation), in the order given, in few statements ([`super::rowsets`]).
/// Returns their ids, in that order.
pub fn insert_messages(conn: &Connection, conversation_id: i64, source_id: i64, rows: &[(LineDigest, NewRow<'_>)]) -> Result<Vec<i64>, StoreError> {
    let contents: Vec<&str> = rows
        .iter()
        .filter_map(|(_, r)| match r {
            NewRow::Message { message, .. } => Some(message.content.as_str()),
            NewRow::Other { .. } => None,
        })
        .collect();
    let mut text_ids = super::texts::put_all(conn, source_id, &contents)?.into_iter();
    let mut ids: std::collections::HashMap<LineDigest, i64> = std::collections::HashMap::with_capacity(rows.len());
    let returned = |ids: &mut std::collections::HashMap<LineDigest, i64>, r: &super::sql::Row<'_>| -> Result<(), StoreError> {
        let digest: Vec<u8> = r.get(1)?;
        let digest = LineDigest::try_from(digest.as_slice()).map_err(|_| StoreError::Corrupt("a message row's digest is not 32 bytes".into()))?;
        ids.insert(digest, r.get(0)?);
        Ok(())
    };
    // Runs of rows of one kind, each in its statements, so that ids follow the lines' order.
    let mut start = 0;
    while start < rows.len() {
        let is_message = |r: &NewRow<'_>| matches!(r, NewRow::Message { .. });
        let kind = is_message(&rows[start].1);
        let end = rows[start..].iter().position(|(_, r)| is_message(r) != kind).map_or(rows.len(), |n| start + n);
        let run = &rows[start..end];
        if kind {
            let values: Vec<(&LineDigest, MessageValues)> = run
                .iter()
                .map(|(digest, r)| {
                    let NewRow::Message { message: m, raw } = *r else { unreachable!("a run of messages") };
                    let usage = m.usage();
                    let (model, cost) = (m.model(), Some(usage.cost).filter(|c| c.is_finite()));
                    let tokens = [usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_creation_tokens];
                    let metadata_shape =
                        m.metadata.as_ref().and_then(|meta| super::metadata_columns::shape(meta, &super::metadata_columns::Columns { model, cost, tokens }));
                    let values = MessageValues {
                        m,
                        role: m.role.as_str(),
                        raw,
                        text_id: text_ids.next().expect("a text per message"),
                        files: (!m.files.is_empty()).then(|| json::dump(&Json::Array(m.files.iter().cloned().map(Json::Str).collect()))),
                        file_hashes: (!m.file_hashes.is_empty())
                            .then(|| json::dump(&Json::Object(m.file_hashes.iter().map(|(p, h)| (p.clone(), Json::Str(h.clone()))).collect()))),
                        metadata: m.metadata.as_ref().filter(|_| metadata_shape.is_none()).map(json::dump),
                        metadata_shape,
                        timestamp: super::timestamps::stored(conn.engine(), m.timestamp.as_deref()),
                        extra: (!m.extra.is_empty()).then(|| json::dump(&Json::Object(m.extra.clone()))),
                        model,
                        cost,
                        rewrites_unchanged: raw.is_none() && crate::codec::normalise::rewrites_unchanged(m),
                        usage,
                    };
                    (digest, values)
                })
                .collect();
            MESSAGES.run(
                conn,
                &values,
                |(digest, v), out| {
                    let m = v.m;
                    out.extend_from_slice(&[
                        &conversation_id as &dyn ToSql,
                        *digest,
                        &v.role,
                        &v.text_id,
                        &v.timestamp,
                        &v.files,
                        &v.file_hashes,
                        &m.call_id,
                        &m.pinned,
                        &m.hide,
                        &m.ui_only,
                        &m.ephemeral_ttl,
                        &v.metadata,
                        &v.extra,
                        &v.raw,
                        &v.model,
                        &v.cost,
                        &v.usage.input_tokens,
                        &v.usage.output_tokens,
                        &v.usage.cache_read_tokens,
                        &v.usage.cache_creation_tokens,
                        &v.rewrites_unchanged,
                        &v.metadata_shape,
                    ]);
                },
                |r| returned(&mut ids, r),
            )?;
        } else {
            OTHERS.run(
                conn,
                run,
                |(digest, r), out| {
                    let NewRow::Other { line, malformed } = r else { unreachable!("a run of other lines") };
                    out.extend_from_slice(&[&conversation_id as &dyn ToSql, digest, line, malformed]);
                },
                |r| returned(&mut ids, r),
            )?;
        }
        start = end;
    }
    rows.iter().map(|(digest, _)| ids.get(digest).copied().ok_or_else(|| StoreError::Corrupt("a message row written was not returned".into()))).collect()
}

const MESSAGES: Insert = Insert {
    head: "INSERT INTO messages (conversation_id, line_sha256, role, text_id, timestamp, files, file_hashes,
            call_id, pinned, hide, ui_only, ephemeral_ttl, metadata, extra, raw,
            model, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, rewrites_unchanged, metadata_shape) VALUES",
    columns: 23,
    tail: "RETURNING id, line_sha256",
};

const OTHERS: Insert = Insert { head: "INSERT INTO messages (conversation_id, line_sha256, raw, malformed) VALUES", columns: 4, tail: "RETURNING id, line_sha256" };

/// The id of the row holding these line bytes in this conversation, if any.
pub fn find_message(conn: &Connection, conversation_id: i64, digest: &LineDigest) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("SELECT id FROM messages m WHERE m.conversation_id = ?1 AND {}", digest_is(conn.engine(), "?2")))?
        .query_row(params![conversation_id, &digest[..]], |r| r.get(0))
        .optional()?)
}

/// SQL that is true when the line digest of message row `m` (of a conversation the query
/// names) is `digest`, an SQL expression: on SQLite by the first eight bytes of the digest,
/// the index `messages_by_line` (schema 25), then the whole; on a server by its unique index.
pub(super) fn digest_is(engine: super::sql::Engine, digest: &str) -> String {
    match engine {
        super::sql::Engine::Sqlite => format!("substr(m.line_sha256, 1, 8) = substr({digest}, 1, 8) AND m.line_sha256 = {digest}"),
        super::sql::Engine::Postgres => format!("m.line_sha256 = {digest}"),
    }
}

/// Stores regular file `path` of a conversation: its `size` bytes, read from `data` (whose
/// SHA-256 is `sha256`), as a blob by content ([`super::blobs::put`]), and its entry row,
/// replacing what the entry was. The blob the entry held before goes when nothing else refers
/// to it any more.
///
/// A blob found stored under `sha256` is held only once it is found to be the file
/// ([`super::blobs::check_held`]): one that holds other bytes (another role's, on a server) is
/// let go, removed when no other conversation holds it and the file's own bytes stored in its
/// place; when another conversation holds it, the file is refused
/// ([`StoreError::ForeignBytes`]) and the caller's conversation with it.
#[allow(clippy::too_many_arguments)]
pub fn put_file(
    conn: &Connection,
    conversation_id: i64,
    path: &str,
    mode: u32,
    mtime_ns: i64,
    sha256: &[u8; 32],
    size: u64,
    data: impl Read,
) -> Result<(), StoreError> {
    use super::blobs::{self, Stored};
    let old = entry_blob(conn, conversation_id, path)?;
    let mut data = data;
    let stored = blobs::put(conn, sha256, size, &mut data, path)?;
    hold_blob(conn, conversation_id, path, mode, mtime_ns, sha256, size)?;
    if stored == Stored::Found {
        if let Err(foreign) = blobs::check_held(conn, sha256)? {
            conn.execute("DELETE FROM entries WHERE conversation_id = ?1 AND path = ?2", params![conversation_id, path])?;
            blobs::remove_if_unreferenced(conn, sha256)?;
            if blobs::put(conn, sha256, size, &mut data, path)? == Stored::Found {
                return Err(StoreError::ForeignBytes { path: path.to_owned(), found: Box::new(foreign) });
            }
            hold_blob(conn, conversation_id, path, mode, mtime_ns, sha256, size)?;
        }
    }
    if let Some(old) = old.filter(|o| o[..] != sha256[..]) {
        super::blobs::remove_if_unreferenced(conn, &old)?;
    }
    Ok(())
}

/// Makes entry `path` of a conversation the regular file of blob `sha256`, replacing the entry
/// whole: what a blob has not (a link's target, the tail and inode a document's entry records)
/// is cleared. On a server the entry's key locks the blob's row until the transaction ends.
fn hold_blob(conn: &Connection, conversation_id: i64, path: &str, mode: u32, mtime_ns: i64, sha256: &[u8; 32], size: u64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, blob_sha256, size) VALUES (?1, ?2, 'blob', ?3, ?4, ?5, ?6)
         ON CONFLICT (conversation_id, path) DO UPDATE SET kind = excluded.kind, mode = excluded.mode, mtime_ns = excluded.mtime_ns,
             blob_sha256 = excluded.blob_sha256, size = excluded.size, link_target = NULL, ino = NULL, tail_sha256 = NULL",
    )?
    .execute(params![conversation_id, path, mode, mtime_ns, &sha256[..], size as i64])?;
    Ok(())
}

/// The blob entry `path` of a conversation refers to, if any.
pub(super) fn entry_blob(conn: &Connection, conversation_id: i64, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT blob_sha256 FROM entries WHERE conversation_id = ?1 AND path = ?2")?
        .query_row(params![conversation_id, path], |r| r.get::<_, Option<Vec<u8>>>(0))
        .optional()?
        .flatten())
}
