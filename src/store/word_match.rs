//! Which of some messages match a word query, and their bm25 scores, decided here rather than by
//! an FTS5 table of every message: for a store whose index holds only each message's set of
//! words (PostgreSQL, [`super::text_terms`]), which gives a superset of the matches.
//!
//! A query of phrases only (barewords, `"phrases"`, `prefix*`: FTS5's implicit AND) matches a
//! message holding every phrase, counted from the message's words as FTS5 splits them
//! ([`super::word_tokens`]). Any other query (AND, OR, NOT, NEAR, parentheses) is put to FTS5
//! itself, over the messages asked about, in a private in-memory table made like the word
//! index: so what matches is exactly what `texts_fts` would match.
//!
//! Scores are FTS5's bm25 (k1 = 1.2, b = 0.75, one column), from the phrases' hits in each
//! message and the whole store's counts given by the caller. Two things differ from FTS5's:
//! a phrase's document frequency is that of messages holding all its words (FTS5 counts those
//! holding the phrase), and hits are counted without a NEAR group's distance.
//!
//! Invariant: a query FTS5 cannot read is refused by [`WordMatch::new`] with FTS5's own error,
//! as the word index would refuse it; no text makes matching panic.

use rusqlite::OptionalExtension as _;

use super::text_terms::Phrase;
use super::StoreError;

/// The phrases of word query `fts` (FTS5 syntax, CJK runs already made phrases) with their
/// words as the word index splits them, and whether the query is phrases only (all required).
/// AND/OR/NOT and a NEAR are operators; a bare `NEAR` is also kept as a word, as FTS5 may read it
/// as one.
pub fn phrases(fts: &str) -> Result<(Vec<Phrase>, bool), StoreError> {
    let words = |text: &str| super::word_tokens::words(text).map_err(|e| StoreError::Query(format!("the word tokenizer: {e}")));
    let chars: Vec<char> = fts.chars().collect();
    let (mut out, mut plain) = (Vec::new(), true);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let (text, end) = if c == '"' {
            // A phrase; `""` inside it is a quote.
            let mut text = String::new();
            let mut j = i + 1;
            while j < chars.len() {
                if chars[j] == '"' {
                    if chars.get(j + 1) == Some(&'"') {
                        text.push('"');
                        j += 2;
                        continue;
                    }
                    break;
                }
                text.push(chars[j]);
                j += 1;
            }
            (text, j + 1)
        } else if c == '(' || c == ')' {
            plain = false;
            i += 1;
            continue;
        } else if c.is_whitespace() || c == '*' {
            i += 1;
            continue;
        } else {
            let mut j = i;
            while j < chars.len() && !chars[j].is_whitespace() && !matches!(chars[j], '"' | '(' | ')' | '*') {
                j += 1;
            }
            let run: String = chars[i..j].iter().collect();
            match run.as_str() {
                "AND" | "OR" | "NOT" => {
                    plain = false;
                    i = j;
                    continue;
                }
                "NEAR" => plain = false,
                _ => {}
            }
            (run, j)
        };
        let prefix = chars.get(end) == Some(&'*');
        out.push(Phrase { words: words(&text)?, prefix });
        i = end;
    }
    Ok((out, plain))
}

/// A word query, ready to be asked of messages.
pub struct WordMatch {
    phrases: Vec<Phrase>,
    /// Whether the query is phrases only.
    plain: bool,
    /// FTS5 over the messages asked about, when the query is more than phrases.
    fts5: Option<(rusqlite::Connection, String)>,
}

/// One matching message: its id, its number of words, and each phrase's hits in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Matched {
    pub id: i64,
    pub length: usize,
    pub hits: Vec<usize>,
}

impl WordMatch {
    /// The query `fts` (FTS5 syntax), checked by FTS5: an error FTS5 gives for it is returned.
    pub fn new(fts: &str) -> Result<WordMatch, StoreError> {
        let (phrases, plain) = phrases(fts)?;
        let conn = rusqlite::Connection::open_in_memory()?;
        conn.execute_batch("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize = 'unicode61 remove_diacritics 2')")?;
        // FTS5 reads the query when it is run, even over no rows.
        conn.prepare("SELECT rowid FROM docs WHERE docs MATCH ?1")?.query_row([fts], |_| Ok(())).optional()?;
        let simple = plain && phrases.iter().all(|p| !p.words.is_empty());
        Ok(WordMatch { phrases, plain, fts5: (!simple).then(|| (conn, fts.to_owned())) })
    }

    pub fn phrases(&self) -> &[Phrase] {
        &self.phrases
    }

    /// The tsquery over the messages' word sets that every match satisfies, `None` when every
    /// message may match ([`super::text_terms::words_query`]).
    pub fn superset(&self) -> Option<String> {
        super::text_terms::words_query(&self.phrases, self.plain)
    }

    /// Those of `messages` (id, content) that match, in the order given.
    pub fn matching(&mut self, messages: &[(i64, String)]) -> Result<Vec<Matched>, StoreError> {
        let by_fts5: Option<std::collections::HashSet<i64>> = match &self.fts5 {
            None => None,
            Some((conn, fts)) => {
                conn.execute_batch("DELETE FROM docs")?;
                let mut insert = conn.prepare_cached("INSERT INTO docs (rowid, content) VALUES (?1, ?2)")?;
                for (id, content) in messages {
                    insert.execute(rusqlite::params![id, super::fts::fts_text(content)])?;
                }
                let mut query = conn.prepare_cached("SELECT rowid FROM docs WHERE docs MATCH ?1")?;
                let ids = query.query_map([fts], |r| r.get::<_, i64>(0))?.collect::<Result<_, _>>()?;
                Some(ids)
            }
        };
        let mut out = Vec::new();
        for (id, content) in messages {
            if by_fts5.as_ref().is_some_and(|ids| !ids.contains(id)) {
                continue;
            }
            let words = super::word_tokens::words(content).map_err(|e| StoreError::Query(format!("the word tokenizer: {e}")))?;
            let hits: Vec<usize> = self.phrases.iter().map(|p| hits(&words, p)).collect();
            if by_fts5.is_none() && hits.contains(&0) {
                continue;
            }
            out.push(Matched { id: *id, length: words.len(), hits });
        }
        Ok(out)
    }
}

/// How many times `phrase` stands in `words` (overlapping instances each counted, as FTS5 does).
fn hits(words: &[String], phrase: &Phrase) -> usize {
    let n = phrase.words.len();
    if n == 0 || words.len() < n {
        return 0;
    }
    (0..=words.len() - n)
        .filter(|&start| {
            phrase.words.iter().enumerate().all(|(k, w)| {
                let word = &words[start + k];
                if phrase.prefix && k == n - 1 {
                    word.starts_with(w.as_str())
                } else {
                    word == w
                }
            })
        })
        .count()
}

/// The store-wide counts bm25 weighs hits with.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// Messages indexed.
    pub documents: u64,
    /// Their words, all told.
    pub tokens: u64,
    /// For each phrase of the query, the messages holding it (see the module's doc).
    pub holding: Vec<u64>,
}

/// FTS5's bm25 of a message: lower is better, as FTS5 orders it.
pub fn bm25(m: &Matched, corpus: &Corpus) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let n = corpus.documents.max(1) as f64;
    let average = (corpus.tokens as f64 / n).max(f64::MIN_POSITIVE);
    let mut score = 0.0;
    for (i, &tf) in m.hits.iter().enumerate() {
        let held = corpus.holding.get(i).copied().unwrap_or(0) as f64;
        let mut idf = ((n - held + 0.5) / (held + 0.5)).ln();
        if idf <= 0.0 {
            idf = 1e-6;
        }
        let tf = tf as f64;
        score += idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * m.length as f64 / average));
    }
    -score
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(list: &[&str]) -> Vec<(i64, String)> {
        list.iter().enumerate().map(|(i, t)| (i as i64 + 1, t.to_string())).collect()
    }

    /// What FTS5 matches of `texts` for `query`, from a table made like the word index.
    fn fts5(texts: &[(i64, String)], query: &str) -> Option<Vec<i64>> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(content, tokenize = 'unicode61 remove_diacritics 2')").unwrap();
        for (id, text) in texts {
            conn.execute("INSERT INTO t (rowid, content) VALUES (?1, ?2)", rusqlite::params![id, super::super::fts::fts_text(text)]).unwrap();
        }
        let mut stmt = conn.prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rowid").ok()?;
        let rows = stmt.query_map([query], |r| r.get(0)).ok()?.collect::<Result<Vec<i64>, _>>().ok()?;
        Some(rows)
    }

    #[test]
    fn matches_what_fts5_matches() {
        let docs = texts(&[
            "Café au lait, example.com and foo_bar",
            "the quick brown fox",
            "quick fox, brown",
            "NEAR the fox",
            "数据库 and databases",
            "",
            "foxes and quickly",
        ]);
        for query in [
            "cafe",
            "quick fox",
            "\"quick fox\"",
            "\"brown fox\"",
            "qui*",
            "\"the qu\"*",
            "example com",
            "foo",
            "quick OR cafe",
            "quick NOT brown",
            "(quick OR foxes) AND brown",
            "NEAR(quick fox)",
            "NEAR",
            "\"数 据 库\"",
            "fox*",
            "absent",
        ] {
            let want = fts5(&docs, query).unwrap();
            let mut m = WordMatch::new(query).unwrap();
            let got: Vec<i64> = m.matching(&docs).unwrap().into_iter().map(|m| m.id).collect();
            assert_eq!(got, want, "{query}");
            // Whatever the server's sets give as candidates includes every match.
            let (phrases, plain) = phrases(query).unwrap();
            if let Some(tsquery) = super::super::text_terms::words_query(&phrases, plain) {
                for id in &want {
                    let words = super::super::word_tokens::words(&docs[*id as usize - 1].1).unwrap();
                    assert!(holds(&words, &tsquery), "{query}: message {id} is a candidate of {tsquery}");
                }
            }
        }
        for bad in ["a AND", "()", "x NOT", "a OR"] {
            assert!(WordMatch::new(bad).is_err(), "{bad}");
        }
    }

    /// Whether a set of `words` satisfies a tsquery made by `words_query` (ANDs of ORs of ANDs).
    fn holds(words: &[String], tsquery: &str) -> bool {
        let has = |lexeme: &str| {
            let (word, prefix) = match lexeme.strip_suffix(":*") {
                Some(w) => (w, true),
                None => (lexeme, false),
            };
            let word = word.trim_matches('\'').replace("''", "'");
            words.iter().any(|w| if prefix { w.starts_with(&word) } else { *w == word })
        };
        tsquery.split(" | ").any(|any| any.split(" & ").all(|t| has(t.trim_matches(|c| c == '(' || c == ')'))))
    }

    #[test]
    fn bm25_prefers_more_hits_and_rarer_words() {
        let corpus = Corpus { documents: 100, tokens: 1_000, holding: vec![5, 50] };
        let few = Matched { id: 1, length: 10, hits: vec![1, 0] };
        let more = Matched { id: 2, length: 10, hits: vec![3, 0] };
        let common = Matched { id: 3, length: 10, hits: vec![0, 1] };
        assert!(bm25(&more, &corpus) < bm25(&few, &corpus));
        assert!(bm25(&few, &corpus) < bm25(&common, &corpus));
    }
}
