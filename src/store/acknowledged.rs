//! The rows of `acknowledged_lines`: messages sessiondb appended to a branch, kept by source
//! and chat id until `sync::acknowledged` finds them safe (see migration 0007 for why they
//! exist, 0014 for the source).
//!
//! A chat id here is one of the connection's source when it is scoped to one
//! ([`Connection::scope_to`]: a sync, an operation on one conversation); on an unscoped
//! connection it is looked up as a command names it ([`super::sources::resolve`]), and a chat
//! id the store does not hold has no records.
//!
//! Only this module touches the table. Records are written in the same transaction as the
//! append they describe, so a committed append always has its record.

use super::sql::params;
use sha2::{Digest, Sha256};

use super::{Connection, StoreError};
use crate::model::Message;

/// How a message is recognised in a transcript gptme may have rewritten: its role, content and
/// timestamp (a rewrite can re-encode the line, but keeps these).
pub type MessageKey = [u8; 32];

pub fn message_key(m: &Message) -> MessageKey {
    let mut h = Sha256::new();
    h.update(m.role.as_str().as_bytes());
    h.update([0]);
    h.update(m.content.as_bytes());
    h.update([0]);
    h.update(m.timestamp.as_deref().unwrap_or("").as_bytes());
    h.finalize().into()
}

/// Now, in seconds since the epoch.
pub fn epoch_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// One recorded append.
#[derive(Debug, Clone)]
pub struct Acknowledged {
    pub path: String,
    pub key: MessageKey,
    /// The exact line written, without its newline.
    pub line: Vec<u8>,
    pub event_seq: i64,
    pub appended_at: f64,
}

/// The source of the records of `chat_id` (see the module's doc); `None` when there is none.
fn source_of(conn: &Connection, chat_id: &str) -> Result<Option<i64>, StoreError> {
    if let Some(source) = conn.scope() {
        return Ok(Some(source));
    }
    match super::sources::resolve(conn, chat_id) {
        Ok(named) => Ok(Some(named.source_id)),
        Err(StoreError::NoConversation(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Records that sessiondb appended `message` (written as `line`) to transcript `path` of
/// `chat_id`, with event `event_seq`. Call inside the append's transaction.
pub fn record(conn: &Connection, chat_id: &str, path: &str, message: &Message, line: &[u8], event_seq: i64) -> Result<(), StoreError> {
    let now = epoch_seconds();
    let source = source_of(conn, chat_id)?.ok_or_else(|| StoreError::NoConversation(chat_id.to_owned()))?;
    conn.prepare_cached(
        "INSERT INTO acknowledged_lines (source_id, chat_id, path, message_key, line, event_seq, appended_at)
         VALUES (?7, ?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (source_id, chat_id, path, message_key)
         DO UPDATE SET line = excluded.line, event_seq = excluded.event_seq, appended_at = excluded.appended_at",
    )?
    .execute(params![chat_id, path, &message_key(message)[..], line, event_seq, now, source])?;
    Ok(())
}

/// The recorded appends of `chat_id`, in the order of their events (each branch's seqs only grow).
pub fn of_conversation(conn: &Connection, chat_id: &str) -> Result<Vec<Acknowledged>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT path, message_key, line, event_seq, appended_at FROM acknowledged_lines WHERE chat_id = ?1 AND source_id = ?2
         ORDER BY event_seq, appended_at",
    )?;
    let Some(source) = source_of(conn, chat_id)? else { return Ok(Vec::new()) };
    let rows = stmt.query_map(params![chat_id, source], |r| {
        let key: Vec<u8> = r.get(1)?;
        Ok(Acknowledged { path: r.get(0)?, key: key.as_slice().try_into().unwrap_or([0; 32]), line: r.get(2)?, event_seq: r.get(3)?, appended_at: r.get(4)? })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The chat ids that have recorded appends (of the connection's source when it is scoped to
/// one, else of any).
pub fn chat_ids(conn: &Connection) -> Result<std::collections::HashSet<String>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT DISTINCT chat_id FROM acknowledged_lines WHERE source_id = ?1 OR ?1 IS NULL")?;
    let rows = stmt.query_map([conn.scope()], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Whether some recorded append of `chat_id` is in no transcript (branch or view) the store
/// holds for it: a re-read took it away, so the directory must be judged again (see
/// `sync::acknowledged::rescue`).
pub fn any_missing_from_store(conn: &Connection, chat_id: &str) -> Result<bool, StoreError> {
    Ok(!missing_from_store(conn, chat_id)?.is_empty())
}

/// The recorded appends of `chat_id` that no transcript the store holds for it contains. They
/// are looked up by their lines' digests (an index) in one statement, whatever their number
/// (every append asks this, and on a server each statement is a round trip), and those not
/// found so by role, content and timestamp (a rewrite may re-encode a line).
pub fn missing_from_store(conn: &Connection, chat_id: &str) -> Result<Vec<Acknowledged>, StoreError> {
    use crate::codec::message_line::{decode_line, LineContent};
    let conversation_id = match super::sources::conversation_id(conn, chat_id) {
        Ok(id) => id,
        Err(StoreError::NoConversation(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let Some(source) = source_of(conn, chat_id)? else { return Ok(Vec::new()) };
    // `sha256()`: PostgreSQL's own; on SQLite, `store::fts::register_functions`.
    let mut not_by_digest = conn.prepare_cached(&format!(
        "SELECT a.path, a.message_key, a.line, a.event_seq, a.appended_at FROM acknowledged_lines a
         WHERE a.chat_id = ?1 AND a.source_id = ?2
           AND NOT EXISTS (SELECT 1 FROM messages m JOIN document_lines dl ON dl.message_id = m.id
                           WHERE m.conversation_id = ?3 AND {})
         ORDER BY a.event_seq, a.appended_at",
        super::rows::digest_is(conn.engine(), "sha256(a.line)")
    ))?;
    let candidates = not_by_digest
        .query_map(params![chat_id, source, conversation_id], |r| {
            let key: Vec<u8> = r.get(1)?;
            Ok(Acknowledged { path: r.get(0)?, key: key.as_slice().try_into().unwrap_or([0; 32]), line: r.get(2)?, event_seq: r.get(3)?, appended_at: r.get(4)? })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    // Texts of the same hash, each compared whole (a text is found by its hash, never trusted by it).
    let mut by_content = conn.prepare_cached(
        "SELECT DISTINCT t.id, t.data FROM messages m JOIN document_lines dl ON dl.message_id = m.id JOIN texts t ON t.id = m.text_id
          WHERE m.conversation_id = ?1 AND m.role = ?2 AND t.hash = ?3 AND coalesce(m.timestamp, '') = coalesce(?4, '')",
    )?;
    let mut missing = Vec::new();
    for a in candidates {
        let found = match decode_line(&a.line).content {
            LineContent::Message(m) => {
                let same = by_content.query_map(
                    params![conversation_id, m.role.as_str(), super::texts::hash(&m.content), super::timestamps::stored(conn.engine(), m.timestamp.as_deref())],
                    |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)),
                )?;
                let mut found = false;
                for row in same {
                    let (id, data) = row?;
                    if conn.decode_text(id, &data)? == m.content {
                        found = true;
                        break;
                    }
                }
                found
            }
            _ => true,
        };
        if !found {
            missing.push(a);
        }
    }
    Ok(missing)
}

/// Drops the records of the appends an operation of sessiondb's own has just taken out of
/// every transcript (an undo, an edit): `before` is what [`missing_from_store`] said before it.
pub fn forget_removed(conn: &Connection, chat_id: &str, before: &[Acknowledged]) -> Result<(), StoreError> {
    for a in missing_from_store(conn, chat_id)? {
        if !before.iter().any(|b| b.path == a.path && b.key == a.key) {
            forget(conn, chat_id, &a)?;
        }
    }
    Ok(())
}

/// Drops the record of one append: its message is safe, or was removed on purpose.
pub fn forget(conn: &Connection, chat_id: &str, a: &Acknowledged) -> Result<(), StoreError> {
    let Some(source) = source_of(conn, chat_id)? else { return Ok(()) };
    conn.prepare_cached("DELETE FROM acknowledged_lines WHERE source_id = ?4 AND chat_id = ?1 AND path = ?2 AND message_key = ?3")?.execute(params![
        chat_id,
        a.path,
        &a.key[..],
        source
    ])?;
    Ok(())
}

/// Drops the records of `chat_id` older than `settle` seconds. Call only under the
/// conversation's lock, once the store holds what the directory holds (see
/// `sync::acknowledged`).
pub fn forget_settled(conn: &Connection, chat_id: &str, settle: f64) -> Result<(), StoreError> {
    let before = epoch_seconds() - settle;
    let Some(source) = source_of(conn, chat_id)? else { return Ok(()) };
    conn.prepare_cached("DELETE FROM acknowledged_lines WHERE source_id = ?3 AND chat_id = ?1 AND appended_at < ?2")?.execute(params![chat_id, before, source])?;
    Ok(())
}

/// Restarts the settling time of every record of `chat_id`: its queued appends were just
/// written to the directory, where a gptme that read it a moment before may still drop them.
pub fn touch(conn: &Connection, chat_id: &str) -> Result<(), StoreError> {
    let now = epoch_seconds();
    let Some(source) = source_of(conn, chat_id)? else { return Ok(()) };
    conn.prepare_cached("UPDATE acknowledged_lines SET appended_at = ?2 WHERE source_id = ?3 AND chat_id = ?1")?.execute(params![chat_id, now, source])?;
    Ok(())
}

/// Drops every record of `chat_id` (the conversation is removed).
pub fn forget_conversation(conn: &Connection, chat_id: &str) -> Result<(), StoreError> {
    let Some(source) = source_of(conn, chat_id)? else { return Ok(()) };
    conn.prepare_cached("DELETE FROM acknowledged_lines WHERE source_id = ?2 AND chat_id = ?1")?.execute(params![chat_id, source])?;
    Ok(())
}
