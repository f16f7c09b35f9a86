//! Keeping the full-text index in step with the messages table.
//!
//! Invariant (see `schema/0001_init.sql`): every message with an id at or below the watermark
//! `store_state['fts_indexed_upto']` is in `messages_fts`, and no later one is. Writers call
//! [`index_pending`] inside their transaction, just before committing, so that at every commit
//! the index covers every message; the watermark moves in that same transaction, so a crash
//! can never leave rows indexed twice or not at all.

use super::{Connection, StoreError};

/// Indexes every message row added since the watermark, in one statement (one FTS5 flush), and
/// advances the watermark. Rows without content (blank and damaged lines) are indexed as empty
/// documents, so the index and the table hold the same rows, as FTS5's own integrity check
/// expects of an external-content index. Call inside a write transaction, before it commits.
pub fn index_pending(conn: &Connection) -> Result<u64, StoreError> {
    let upto: i64 = conn.prepare_cached("SELECT value FROM store_state WHERE key = 'fts_indexed_upto'")?.query_row([], |r| r.get(0))?;
    let indexed =
        conn.prepare_cached("INSERT INTO messages_fts (rowid, content) SELECT id, sessiondb_fts_text(content) FROM messages WHERE id > ?1")?.execute([upto])?;
    conn.prepare_cached("UPDATE store_state SET value = (SELECT max(?1, coalesce(max(id), 0)) FROM messages) WHERE key = 'fts_indexed_upto'")?.execute([upto])?;
    Ok(indexed as u64)
}

/// Whether a character belongs to a script written without spaces between words (CJK
/// ideographs, kana, hangul), which unicode61 cannot split into words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FDF | 0x3040..=0x30FF | 0x3100..=0x312F | 0x3190..=0x31FF | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF | 0xA960..=0xA97F | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF66..=0xFF9D
        | 0x20000..=0x3134F)
}

/// The text the index holds for `content`: every CJK character set apart by spaces, so that
/// each is a token and a CJK word can be found as a phrase of consecutive characters.
pub fn fts_text(content: &str) -> String {
    if !content.chars().any(is_cjk) {
        return content.to_owned();
    }
    let mut out = String::with_capacity(content.len() + content.len() / 2);
    for c in content.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// Registers `sessiondb_fts_text(text)` on a connection; migrations and writers use it.
pub fn register_functions(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function("sessiondb_fts_text", 1, FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC, |ctx| {
        Ok(ctx.get::<Option<String>>(0)?.map(|t| fts_text(&t)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_characters_become_tokens() {
        assert_eq!(fts_text("plain text"), "plain text");
        assert_eq!(fts_text("用数据库"), " 用  数  据  库 ");
        assert_eq!(fts_text("SQLite数据库ok"), "SQLite 数  据  库 ok");
    }
}
