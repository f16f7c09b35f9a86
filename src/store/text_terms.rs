//! The search indexes on PostgreSQL: each text's words and trigrams, made here by the rules
//! of SQLite's indexes and kept by the server as lexeme sets (`schema/postgres/0016_search_sets_and_byte_order.sql`,
//! keyed by text since `0022_search_by_text.sql`: each text once, however many messages say it).
//!
//! A text's *words* are the tokens FTS5's `unicode61 remove_diacritics 2` makes of it
//! ([`super::word_tokens`]), its *trigrams* those of it lowered as gptme's search lowers
//! it ([`super::trigram_tokens::each_trigram`]): the very rules of `texts_fts` and
//! `texts_substring`, so a query finds on a server what it finds in a file. A set records no
//! positions or counts, so the server answers a query with a superset of its texts
//! ([`words_query`], [`trigrams_query`]), which the search then checks one by one.
//!
//! Invariants: every text has a row in `text_terms` or is waiting in `text_terms_pending` (the
//! server adds it there with the text); a row is written once, in the transaction that takes
//! the text off the waiting list, under the store's write lock ([`index_waiting`]), so a crash
//! leaves nothing indexed twice or lost; a lexeme is at most [`MAX_LEXEME_BYTES`] long on both
//! sides (the stored word and the query's word are cut alike, so a cut word is still found, by
//! exact word or by prefix); a text whose set would not fit in a tsvector gets NULL there and
//! is a candidate of every query.

use super::sql::{params, Engine, ToSql};
use super::{Connection, StoreError};

/// The longest lexeme kept, in bytes (PostgreSQL's limit is 2,047): longer words and query
/// terms are cut to their first characters within it.
pub const MAX_LEXEME_BYTES: usize = 2_000;

/// The most lexeme bytes one text's set may hold (a tsvector holds less than 1 MiB).
const MAX_SET_BYTES: usize = 1_000_000;

/// Texts indexed per transaction: each step holds the store's write lock, so that writers
/// of every host wait a few tens of milliseconds at most.
pub const STEP: i64 = 1_000;

/// `word` cut to at most [`MAX_LEXEME_BYTES`], on a character boundary.
pub fn cut(word: &str) -> &str {
    if word.len() <= MAX_LEXEME_BYTES {
        return word;
    }
    let mut end = MAX_LEXEME_BYTES;
    while !word.is_char_boundary(end) {
        end -= 1;
    }
    &word[..end]
}

/// A lexeme as tsquery's input reads it: quoted, its quotes doubled and backslashes escaped.
pub fn quoted(lexeme: &str) -> String {
    let mut out = String::with_capacity(lexeme.len() + 2);
    push_quoted(&mut out, lexeme);
    out
}

/// [`quoted`], written at the end of `out` (an import quotes millions of lexemes: one buffer
/// for a whole set, not a string each).
fn push_quoted(out: &mut String, lexeme: &str) {
    out.push('\'');
    for c in lexeme.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            c => out.push(c),
        }
    }
    out.push('\'');
}

/// The distinct lexemes of `terms` (cut), in byte order, or `None` when they would not fit in
/// a tsvector. (Sorted and deduplicated rather than hashed: the server keeps a tsvector sorted
/// anyway, and a text's trigrams are thousands of short strings.)
fn lexeme_set(terms: impl Iterator<Item = String>) -> Option<Vec<String>> {
    let mut out: Vec<String> = terms
        .filter(|t| !t.is_empty())
        .map(|mut t| {
            let keep = cut(&t).len();
            t.truncate(keep);
            t
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    let bytes: usize = out.iter().map(String::len).sum();
    (bytes <= MAX_SET_BYTES).then_some(out)
}

/// A set of lexemes as tsvector's input reads it (each quoted as [`quoted`] quotes them), or
/// `None` when it would not fit in a tsvector.
fn tsvector(lexemes: Option<Vec<String>>) -> Option<String> {
    lexemes.map(|set| {
        let mut out = String::with_capacity(set.iter().map(|l| l.len() + 3).sum());
        for (i, l) in set.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            push_quoted(&mut out, l);
        }
        out
    })
}

/// One text's row of `text_terms`: `(id, words, trigrams, length)`, the sets as tsvector input.
fn row_of(id: i64, content: &str) -> Result<(i64, Option<String>, Option<String>, i64), StoreError> {
    let words = super::word_tokens::words(content).map_err(|e| StoreError::Query(e.to_string()))?;
    let length = words.len() as i64;
    let words = lexeme_set(words.into_iter());
    // Trigrams come distinct and short: written straight into the set's text.
    let (mut trigrams, mut bytes) = (String::new(), 0);
    super::trigram_tokens::each_trigram(&super::fts::lower(content), &mut |t| {
        if bytes > 0 {
            trigrams.push(' ');
        }
        bytes += t.len();
        push_quoted(&mut trigrams, t);
    });
    Ok((id, tsvector(words), (bytes <= MAX_SET_BYTES).then_some(trigrams), length))
}

/// The rows of `text_terms`, written in few statements: each set sent as tsvector input, which
/// the server reads faster than a JSON array of its lexemes.
const TERMS: super::rowsets::Insert = super::rowsets::Insert {
    head: "INSERT INTO text_terms (text_id, words, trigrams, length)
           SELECT v.id::bigint, v.words::tsvector, v.trigrams::tsvector, v.length::bigint FROM (VALUES",
    columns: 4,
    tail: ") AS v (id, words, trigrams, length) ON CONFLICT (text_id) DO NOTHING",
};

/// Messages waiting for their terms.
pub fn behind(conn: &Connection) -> Result<u64, StoreError> {
    let n: i64 = conn.prepare_cached("SELECT count(*) FROM text_terms_pending")?.query_row((), |r| r.get(0))?;
    Ok(n as u64)
}

/// Messages waiting for their terms, counted up to `limit` at most (a writer asks whether a few
/// or many wait: an import's hundreds of thousands are not counted one by one).
pub fn waiting_at_most(conn: &Connection, limit: i64) -> Result<i64, StoreError> {
    Ok(conn.prepare_cached("SELECT count(*) FROM (SELECT 1 FROM text_terms_pending LIMIT ?1) AS waiting")?.query_row([limit], |r| r.get(0))?)
}

/// Indexes at most `limit` waiting texts, lowest ids first, and takes them off the waiting
/// list. Call inside a write transaction. Writers of different sources index at once, each the
/// waiting texts no other has taken (`FOR UPDATE SKIP LOCKED`: held until it commits), so
/// that none indexes a text twice or waits for another. Returns the texts indexed.
pub fn index_waiting(conn: &Connection, limit: i64) -> Result<u64, StoreError> {
    debug_assert_eq!(conn.engine(), Engine::Postgres);
    let mut stmt = conn.prepare_cached(
        "SELECT p.text_id, t.data FROM text_terms_pending p JOIN texts t ON t.id = p.text_id
         ORDER BY p.text_id LIMIT ?1 FOR UPDATE OF p SKIP LOCKED",
    )?;
    let stored: Vec<(i64, Vec<u8>)> = stmt.query_map([limit], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
    let rows = stored.iter().map(|(id, data)| row_of(*id, &conn.decode_text(*id, data)?)).collect::<Result<Vec<_>, StoreError>>()?;
    if rows.is_empty() {
        return Ok(0);
    }
    TERMS.run(conn, &rows, |(id, words, trigrams, length), out| out.extend_from_slice(&[id as &dyn ToSql, words, trigrams, length]), |_| Ok(()))?;
    let ids: Vec<i64> = rows.iter().map(|(id, ..)| *id).collect();
    conn.prepare_cached(&format!("DELETE FROM text_terms_pending WHERE {}", super::sql::among_ids(Engine::Postgres, "text_id", 1)))?
        .execute(params![super::sql::id_list(ids.iter().copied())])?;
    Ok(ids.len() as u64)
}

/// A tsquery of the trigrams given, all required.
pub fn trigrams_query(trigrams: &[String]) -> String {
    trigrams.iter().map(|t| quoted(cut(t))).collect::<Vec<_>>().join(" & ")
}

/// One phrase of a word query as the word index reads it: its words, the last a prefix when
/// `prefix`.
#[derive(Debug, Clone, PartialEq)]
pub struct Phrase {
    pub words: Vec<String>,
    pub prefix: bool,
}

/// The tsquery (over the `words` sets) that every text matching a word query with these
/// phrases matches: when `all_required` (the query is phrases only, FTS5's implicit AND), every
/// phrase's words; otherwise (operators: OR, NOT, NEAR, parentheses) the words of any one phrase,
/// since a text matches such a query only through some phrase it holds. `None` when the
/// superset is every text (a phrase without words, or no phrase).
pub fn words_query(phrases: &[Phrase], all_required: bool) -> Option<String> {
    let each: Vec<Option<String>> = phrases
        .iter()
        .map(|p| {
            let n = p.words.len();
            let terms: Vec<String> =
                p.words.iter().enumerate().map(|(i, w)| if p.prefix && i == n - 1 { format!("{}:*", quoted(cut(w))) } else { quoted(cut(w)) }).collect();
            (!terms.is_empty()).then(|| format!("({})", terms.join(" & ")))
        })
        .collect();
    if all_required {
        let required: Vec<String> = each.into_iter().flatten().collect();
        (!required.is_empty()).then(|| required.join(" & "))
    } else {
        let any: Option<Vec<String>> = each.into_iter().collect();
        any.filter(|a| !a.is_empty()).map(|a| a.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_words_are_cut_alike_on_both_sides() {
        let long = "é".repeat(1_500);
        let stored = cut(&long);
        assert!(stored.len() <= MAX_LEXEME_BYTES && long.starts_with(stored));
        // A prefix of any length is still a prefix of the cut word.
        for n in [10, 999, 1_000, 1_001, 1_400] {
            let prefix: String = long.chars().take(n).collect();
            assert!(stored.starts_with(cut(&prefix)), "{n}");
        }
    }

    #[test]
    fn lexemes_are_quoted_for_tsquery() {
        assert_eq!(quoted("it's"), "'it''s'");
        assert_eq!(quoted("a\\b"), "'a\\\\b'");
        assert_eq!(quoted("''\\x\\"), "'''''\\\\x\\\\'");
        assert_eq!(tsvector(Some(vec!["a'b".into(), "c".into()])).as_deref(), Some("'a''b' 'c'"));
    }

    #[test]
    fn word_queries_give_a_superset() {
        let p = |w: &[&str], prefix| Phrase { words: w.iter().map(|s| s.to_string()).collect(), prefix };
        assert_eq!(words_query(&[p(&["a", "b"], false), p(&["c"], true)], true).as_deref(), Some("('a' & 'b') & ('c':*)"));
        assert_eq!(words_query(&[p(&["a"], false), p(&["c"], false)], false).as_deref(), Some("('a') | ('c')"));
        // A phrase with no word makes every text a candidate of an OR, and no constraint of an AND.
        assert_eq!(words_query(&[p(&[], false), p(&["c"], false)], false), None);
        assert_eq!(words_query(&[p(&[], false), p(&["c"], false)], true).as_deref(), Some("('c')"));
        let sets = [lexeme_set(["x".repeat(3_000), "x".repeat(3_000)].into_iter()).unwrap(), lexeme_set((0..400_000).map(|i| format!("w{i}"))).unwrap_or_default()];
        assert_eq!(sets[0].len(), 1);
        assert!(sets[1].is_empty(), "a set too large for a tsvector is none");
    }
}
