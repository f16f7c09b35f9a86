//! Keeping the search indexes in step with the texts (`texts`, [`super::texts`]).
//!
//! Two indexes are derived from the texts, each text once however many messages say it:
//! `texts_fts` (words, see `schema/0022_search_by_text.sql`) and `texts_substring` (trigrams of
//! the lowercased text, for literal queries). Invariant, for each with its own watermark
//! (`store_state['fts_indexed_upto']`, `['substring_indexed_upto']`): every text with an id at
//! or below the watermark is in the index, and no later one is. Text ids only grow
//! (AUTOINCREMENT), and a text is never changed in place but recompressed (the same text); each
//! watermark moves in the transaction that indexes up to it, so a crash can never leave texts
//! indexed twice or not at all. Writers index what they added inside their transaction, just
//! before committing ([`index_own`]), so that their commits are searchable at once; only an
//! import defers it ([`super::WriteBatch::begin_unindexed`]), so that its conversations can be
//! listed as soon as their rows are in, and then indexes them in transactions of their own
//! ([`catch_up`]). While an import's texts wait, other writers leave theirs to wait with
//! them (a watermark covers every id below it), so that an append never pays for an import;
//! a few waiting (another writer's, left so) are indexed by the next writer. A
//! search that finds the indexes behind (an import indexing now, or stopped before it was done)
//! catches them up itself first when it can take the write lock, and otherwise says how many
//! texts its answer could not look at ([`behind`]). Both indexes are derived and never the
//! source of truth: [`rebuild_substring_index`] makes the substring index again from the texts.
//!
//! On PostgreSQL both are the sets of `text_terms` ([`super::text_terms`]): the server puts each
//! new text on a waiting list in the transaction that adds it, in place of a watermark, and the
//! same functions here index what waits, by the same rules of who indexes what and when (a
//! writer its own and a few more, an import and a search the rest), in steps of
//! [`super::text_terms::STEP`] texts.

use super::sql::{params, Engine};
use super::{Connection, StoreError};

/// Whether the indexes are `text_terms` (PostgreSQL).
fn kept_by_server(conn: &Connection) -> bool {
    conn.engine() == Engine::Postgres
}

/// How a text is put into an index.
type IndexedForm = fn(&str) -> String;

/// The derived indexes: (table, watermark key, the indexed form of a text).
const INDEXES: [(&str, &str, IndexedForm); 2] = [("texts_fts", "fts_indexed_upto", fts_text), ("texts_substring", "substring_indexed_upto", lower)];

/// The highest text id ever handed out: the texts a transaction adds from here on have higher
/// ones (ids are never reused). For [`index_own`] only, so on PostgreSQL (which indexes every
/// write itself) nothing is asked and the answer is 0.
pub fn text_seq(conn: &Connection) -> Result<i64, StoreError> {
    if kept_by_server(conn) {
        return Ok(0);
    }
    Ok(conn.prepare_cached("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'texts'), 0)")?.query_row((), |r| r.get(0))?)
}

/// The most texts waiting for the indexes that a writer indexes with its own ([`index_own`]):
/// about a tenth of a second of indexing.
pub const INLINE_LAG: i64 = 2_000;

/// Indexes the texts the transaction under way added (ids past `seq`, [`text_seq`] when it
/// began), with those that wait before them when they are few (at most [`INLINE_LAG`]: a
/// writer's that committed while an import was indexing); when more wait (an import's), leaves
/// its own with them to whoever is catching the indexes up (the import, or the next search or
/// `sync`: [`catch_up`]). A write during an import's indexing, or after an import stopped
/// before it, so costs about what it adds, never the whole import. Call inside a write
/// transaction, before it commits.
pub fn index_own(conn: &Connection, seq: i64) -> Result<(), StoreError> {
    if kept_by_server(conn) {
        // The waiting list holds this transaction's texts and those others committed.
        if super::text_terms::waiting_at_most(conn, INLINE_LAG + 1)? <= INLINE_LAG {
            super::text_terms::index_waiting(conn, INLINE_LAG)?;
        }
        return Ok(());
    }
    let waiting: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM (SELECT 1 FROM texts
              WHERE id > (SELECT min(value) FROM store_state WHERE key IN ('fts_indexed_upto', 'substring_indexed_upto')) AND id <= ?1
              LIMIT ?2) AS waiting",
        )?
        .query_row([seq, INLINE_LAG + 1], |r| r.get(0))?;
    if waiting <= INLINE_LAG {
        index_pending(conn)?;
    }
    Ok(())
}

/// Indexes every text added since the watermarks, and advances them. Call inside a write
/// transaction, before it commits. Returns the texts added to the index that was further
/// behind.
pub fn index_pending(conn: &Connection) -> Result<u64, StoreError> {
    index_up_to(conn, i64::MAX)
}

/// [`index_pending`] for at most `limit` texts past each watermark.
fn index_up_to(conn: &Connection, limit: i64) -> Result<u64, StoreError> {
    if kept_by_server(conn) {
        return super::text_terms::index_waiting(conn, limit);
    }
    // Each index from its own watermark to the `limit`-th text past it (or the last there is);
    // each text read once for both.
    let mut steps = Vec::new();
    for (table, key, form) in INDEXES {
        let upto: i64 = conn.prepare_cached(&format!("SELECT value FROM store_state WHERE key = '{key}'"))?.query_row((), |r| r.get(0))?;
        let last: i64 = conn
            .prepare_cached("SELECT coalesce(max(id), ?1) FROM (SELECT id FROM texts WHERE id > ?1 ORDER BY id LIMIT ?2)")?
            .query_row([upto, limit], |r| r.get(0))?;
        steps.push((table, key, form, upto, last, 0u64));
    }
    let from = steps.iter().map(|s| s.3).min().unwrap_or(0);
    let to = steps.iter().map(|s| s.4).max().unwrap_or(0);
    let mut texts = conn.prepare_cached("SELECT id, data FROM texts WHERE id > ?1 AND id <= ?2 ORDER BY id")?;
    let mut rows = texts.query([from, to])?;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let text = conn.decode_text(id, &r.get::<_, Vec<u8>>(1)?)?;
        for (table, _, form, upto, last, added) in steps.iter_mut() {
            if id > *upto && id <= *last {
                conn.prepare_cached(&format!("INSERT INTO {table} (rowid, content) VALUES (?1, ?2)"))?.execute(params![id, form(&text)])?;
                *added += 1;
            }
        }
    }
    let mut most = 0;
    for (_, key, _, _, last, added) in steps {
        conn.prepare_cached(&format!("UPDATE store_state SET value = ?1 WHERE key = '{key}'"))?.execute([last])?;
        most = most.max(added);
    }
    Ok(most)
}

/// Texts in the store that one of the two indexes does not hold yet (the more of the two).
pub fn behind(conn: &Connection) -> Result<u64, StoreError> {
    if kept_by_server(conn) {
        return super::text_terms::behind(conn);
    }
    let behind: i64 = conn
        .prepare_cached("SELECT count(*) FROM texts WHERE id > (SELECT min(value) FROM store_state WHERE key IN ('fts_indexed_upto', 'substring_indexed_upto'))")?
        .query_row((), |r| r.get(0))?;
    Ok(behind as u64)
}

/// Texts indexed per transaction by [`catch_up`]: about 60 MB of text in gptme's logs, so that
/// each commit writes a few large segments and a killed catch-up loses little.
pub const CATCH_UP_STEP: i64 = 40_000;

/// Brings both indexes up to the texts, in transactions of [`CATCH_UP_STEP`] texts each,
/// telling `progress` (texts indexed so far, texts behind at the start) after each. Another
/// process catching up meanwhile is no harm: each step starts from the watermarks as its
/// transaction finds them (on a server, from the waiting texts no other writer has taken,
/// beside the writers of every source). Call outside any transaction. Returns the texts
/// indexed.
pub fn catch_up(conn: &Connection, progress: &mut dyn FnMut(u64, u64)) -> Result<u64, StoreError> {
    let of = behind(conn)?;
    if of == 0 {
        return Ok(0);
    }
    let step = if kept_by_server(conn) { super::text_terms::STEP } else { CATCH_UP_STEP };
    let mut done = 0;
    loop {
        match conn.in_transaction_beside_writers(|| index_up_to(conn, step))? {
            0 => return Ok(done),
            n => done += n,
        }
        progress(done, of.max(done));
    }
}

/// Makes the substring index again from the texts, in one write transaction: dropped
/// (whatever state it was in, even gone), created as `schema/0022_search_by_text.sql` creates
/// it, filled with every text, its watermark at the last one. For an index that was lost or
/// damaged (`doctor` reports it; `doctor --reindex` calls this). A crash midway leaves the old
/// index as it was. On a server, both sets of every text are made again (emptied and every
/// text put back on the waiting list in one transaction, then caught up). Call outside any
/// transaction.
pub fn rebuild_substring_index(conn: &Connection) -> Result<(), StoreError> {
    if kept_by_server(conn) {
        // The sets made again from the rows: every text back on the waiting list.
        conn.in_transaction(|| {
            conn.execute_batch(
                "DELETE FROM text_terms;
                 DELETE FROM text_terms_counts;
                 INSERT INTO text_terms_pending (text_id) SELECT id FROM texts ON CONFLICT DO NOTHING",
            )?;
            Ok(())
        })?;
        catch_up(conn, &mut |_, _| {})?;
        return Ok(());
    }
    conn.in_transaction(|| {
        conn.execute_batch(SUBSTRING_INDEX)?;
        index_pending(conn)?;
        Ok(())
    })
}

/// The substring index made anew and empty, as `schema/0022_search_by_text.sql` made it,
/// whatever state it was in, its watermark at nothing indexed ([`index_pending`] then fills
/// it from the texts).
const SUBSTRING_INDEX: &str = "
    DROP TRIGGER IF EXISTS texts_substring_delete;
    DROP TABLE IF EXISTS texts_substring;
    CREATE VIRTUAL TABLE texts_substring USING fts5(content, content = '', contentless_delete = 1, detail = 'none', tokenize = 'sessiondb_trigram');
    INSERT INTO texts_substring (texts_substring, rank) VALUES ('hashsize', 16777216);
    INSERT OR REPLACE INTO store_state (key, value) VALUES ('substring_indexed_upto', 0);
    CREATE TRIGGER texts_substring_delete AFTER DELETE ON texts
    WHEN old.id <= (SELECT value FROM store_state WHERE key = 'substring_indexed_upto')
    BEGIN
        DELETE FROM texts_substring WHERE rowid = old.id;
    END;";

/// `text` lowercased as Python's `str.lower()` does, which gptme's search applies to both the
/// query and each message: full mappings (`İ` becomes `i̇`), and the whole text at once, so
/// that a capital sigma ending a word becomes `ς`. (Rust's tables may be of a newer Unicode
/// version than the Python's.) Runs of ASCII, most of any history, are lowered byte by byte,
/// other characters one by one: the same answer as `str::to_lowercase` (whose only mapping
/// that depends on the text around it is the final sigma, left to it), without its table
/// lookup for every character after the first that is not ASCII.
pub fn lower(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    if text.contains('Σ') {
        return text.to_lowercase();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let ascii = rest.bytes().position(|b| !b.is_ascii()).unwrap_or(rest.len());
        let start = out.len();
        out.push_str(&rest[..ascii]);
        out[start..].make_ascii_lowercase();
        rest = &rest[ascii..];
        if let Some(c) = rest.chars().next() {
            out.extend(c.to_lowercase());
            rest = &rest[c.len_utf8()..];
        }
    }
    out
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

/// Registers `sessiondb_fts_text(text)`, `sessiondb_lower(text)` ([`lower`]) and `sha256(blob)`, which
/// migrations and writers use, and the substring index's tokenizer
/// ([`super::trigram_tokens`]), without which the index cannot be opened, on a connection.
pub fn register_functions(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    use rusqlite::functions::FunctionFlags;
    super::trigram_tokens::register(conn)?;
    super::texts::register_functions(conn)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("sessiondb_fts_text", 1, flags, |ctx| Ok(ctx.get::<Option<String>>(0)?.map(|t| fts_text(&t))))?;
    // PostgreSQL's sha256(bytea), so that a statement asking for digests is one for both engines.
    conn.create_scalar_function("sha256", 1, flags, |ctx| {
        use sha2::Digest;
        Ok(ctx.get::<Option<Vec<u8>>>(0)?.map(|b| sha2::Sha256::digest(&b).to_vec()))
    })?;
    conn.create_scalar_function("sessiondb_lower", 1, flags, |ctx| Ok(ctx.get::<Option<String>>(0)?.map(|t| lower(&t))))
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
