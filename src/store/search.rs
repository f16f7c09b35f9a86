//! Search across every conversation: word queries from the FTS5 word index, literal queries
//! from the substring index, answered exactly.
//!
//! A query is a *word query* when it is made only of what the word index can answer: letters
//! and digits, spaces, and FTS5's syntax (`"phrases"` of words and anything between them,
//! `prefix*`, parentheses, AND/OR/NOT/NEAR), and FTS5 accepts it. Word queries are ranked by bm25. Every other query — anything with
//! punctuation, symbols, emoji, `_`, a lone quote — and every query given as literal
//! ([`SearchQuery::literal`]) is a *literal query*: it finds exactly the messages that contain it
//! as a substring, ignoring case as gptme's search does (Python's `str.lower()` on both sides,
//! [`super::fts::lower`]). A literal query of three or more characters is looked up in the
//! substring index (trigrams), which gives a superset of the texts holding it; shorter ones scan
//! the messages. Either way every candidate is checked against the text itself (each text once,
//! however many messages say it), so the answer is exact, never more. Literal results come
//! newest conversation first (as gptme lists them), and the scan stops at the last conversation
//! wanted.
//!
//! Both indexes hold texts, each once ([`super::texts`], `schema/0022_search_by_text.sql`): a
//! match is a text, and stands for every message that says it (found by `messages_by_text`);
//! its relevance is the text's.
//!
//! Results are pages of one ordered list ([`Sort`]: relevance or newest; every order total), so
//! that `offset` pages join up without gap or overlap; [`Totals`] count every match past the page.
//!
//! Snippets mark exactly what matched: the substring, for a literal query; whole words that
//! match a term of the query (a phrase's words only where the whole phrase stands), for a word
//! query — never letters inside another word.
//!
//! On PostgreSQL the same queries get the same answers from other indexes: each text's sets
//! of words and of trigrams ([`super::text_terms`]) give a superset of the texts a query
//! can match, and each is checked — a word query by [`super::word_match`] (FTS5's own rules,
//! ranked by FTS5's bm25 formula), a literal one against the lowered text as here.
//!
//! Invariants: no query and no stored text makes a search panic; a word query reaches FTS5 only
//! within [`MAX_QUERY_BYTES`], [`MAX_QUERY_WORDS`], [`MAX_PREFIXES`] and [`MAX_NESTING`], a literal
//! one with at most [`MAX_TRIGRAMS`] index lookups, so every search is bounded; snippets are cut
//! only at character boundaries of the stored text, whatever case folding does to lengths.
//! Filters that name nothing in the store are refused ([`StoreError::NoSuchFilter`]) rather than
//! answered with nothing. The texts of hits come back with their secrets masked unless the
//! query says to show them ([`SearchQuery::secrets`]).

use std::collections::HashMap;

use super::sql::{params, params_from_iter, OptionalExtension, Value};

use super::fts::is_cjk;
use super::sql::Engine;
use super::word_match::WordMatch;
use super::{Connection, StoreError};
use crate::secrets::Shown;

/// What to search and how many results to return.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub text: String,
    /// Only messages of this role.
    pub role: Option<String>,
    /// Only messages whose metadata names this model.
    pub model: Option<String>,
    /// Only messages of conversations modified at or after this time (epoch seconds).
    pub since: Option<f64>,
    pub chat_id: Option<String>,
    /// Only messages of conversations of this source (its name; see [`super::sources`]).
    pub source: Option<String>,
    /// Only messages on this branch (its name; `main` is conversation.jsonl).
    pub branch: Option<String>,
    /// At most this many conversations; 0 for all of them ([`super::queries::at_most`]).
    pub limit: usize,
    /// At most this many matches per conversation.
    pub matches: usize,
    pub include_test: bool,
    /// Search the text literally, whatever it looks like (`--literal`).
    pub literal: bool,
    /// Leave out this many conversations of the ordered result first (paging).
    pub offset: usize,
    /// The order of conversations.
    pub sort: Sort,
    /// Count the matches ([`SearchResult::totals`]): exactly up to [`COUNTED_UP_TO`] matching
    /// messages, past it as "at least" ([`Totals::exact`] false) unless `exact_totals`.
    pub totals: bool,
    /// Count every match exactly however many there are (`--exact-total`), which reads them all.
    pub exact_totals: bool,
    /// How the hits' texts come back: with every secret masked (the default) or as they are
    /// (`--show-secrets`); see [`crate::secrets`].
    pub secrets: Shown,
}

impl SearchQuery {
    /// How many conversations of the ordered result are read: those left out by the offset and
    /// the page (however large either is asked to be).
    fn wanted(&self) -> usize {
        self.offset.saturating_add(super::queries::at_most(self.limit).unwrap_or(usize::MAX))
    }
}

/// The most best-ranked matches read at once (the ranking index's top-k heap, FTS5's LIMIT):
/// past it a search falls back to one pass over every match, so an offset or a page of any size
/// never asks for memory in proportion to itself.
const MAX_WINDOW: usize = 1 << 20;

/// The first window of best-ranked matches read for `q`: eight matches for each one shown,
/// at least 64, at most [`MAX_WINDOW`].
fn first_window(q: &SearchQuery) -> usize {
    q.wanted().saturating_mul(q.matches.max(1)).saturating_mul(8).clamp(64, MAX_WINDOW)
}

/// The order of the conversations of a search; every order is total (ties broken by chat id or
/// message id), so that pages taken with [`SearchQuery::offset`] join up with no gap or overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sort {
    /// A word query: by the bm25 score of the conversation's best match (then that match's id).
    /// A literal query has no score: its relevance order is [`Sort::Newest`].
    #[default]
    Relevance,
    /// By the conversation's last modification, newest first (then chat id), as `list` orders.
    Newest,
}

/// How many matching messages a search counts one by one for its totals unless asked for the
/// exact figure ([`SearchQuery::exact_totals`]); past it the totals say "at least" (the
/// convention of Elasticsearch's `track_total_hits`), so that a word found everywhere costs
/// about what a rare one costs. A thousand rather than Elasticsearch's 10,000: each match
/// counted here is a few lookups in the store (two microseconds), and 10,000 of them cost twice
/// what the page of a common word costs at 10,000 conversations. A literal query also stops
/// counting once it has read as many candidate messages to check (a needle too short for the
/// substring index has every message for a candidate).
pub const COUNTED_UP_TO: usize = 1_000;

/// Every match of a search, past any page: messages that match (standing in a branch or view,
/// passing the filters) and the conversations holding them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub messages: usize,
    pub conversations: usize,
    /// Whether both figures are exact; else each is a lower bound (more than
    /// [`COUNTED_UP_TO`] messages match, or a literal query read as many candidates, and
    /// counting stopped there).
    pub exact: bool,
}

/// One matching message.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub message_id: i64,
    pub role: String,
    pub content: String,
    /// The document the message is first found in (main preferred) and its line (0-based).
    pub document: String,
    pub line: i64,
    pub rank: f64,
}

/// One conversation with its best matches, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationHits {
    pub chat_id: String,
    /// The name of its source (see [`super::sources`]): a chat id may be in several.
    pub source: String,
    /// Its row id: what tells two sources' conversations of one chat id apart.
    pub conversation_id: i64,
    pub name: String,
    pub modified: f64,
    /// Matching messages that pass the filters and stand in a branch or view: every one,
    /// however the page was ranked.
    pub total: usize,
    pub hits: Vec<Hit>,
}

/// The search, and whether the query was taken literally.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub literal: bool,
    /// The query the index was asked: FTS5 syntax for the word index, or the trigrams looked up
    /// in the substring index (empty when the messages were scanned).
    pub fts_query: String,
    /// What snippets of these results mark ([`snippet`]).
    pub highlight: Highlight,
    /// The page asked for: conversations `offset..offset + limit` of the ordered result.
    pub conversations: Vec<ConversationHits>,
    /// Every match, when [`SearchQuery::totals`] asked for them.
    pub totals: Option<Totals>,
    /// What ordered the matches.
    pub ranked_by: RankedBy,
    /// Messages the search could not look at: stored, but not in the word or substring index
    /// yet, and the search could not index them first (another process, an import, was; or
    /// the database could not be written). Zero but while an import builds the indexes.
    pub unindexed: u64,
}

/// What ordered the matches of a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankedBy {
    /// bm25 from the ranking index (`store::ranking`).
    RankingIndex,
    /// bm25 from the word index (FTS5).
    WordIndex,
    /// bm25 computed from the matches' words and the server's word sets (PostgreSQL,
    /// `store::word_match`).
    ServerWordIndex,
    /// No score: newest conversation first (a literal query).
    Newest,
}

impl RankedBy {
    pub fn name(self) -> &'static str {
        match self {
            RankedBy::RankingIndex => "ranking index",
            RankedBy::WordIndex => "word index",
            RankedBy::ServerWordIndex => "word index (server)",
            RankedBy::Newest => "newest",
        }
    }
}

/// Makes CJK runs phrases: outside quotes `数据库` becomes `"数 据 库"`, inside a quoted
/// phrase the characters are just spaced.
fn cjk_phrases(query: &str) -> String {
    let mut out = String::new();
    let mut in_quotes = false;
    let mut chars = query.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' {
            in_quotes = !in_quotes;
            out.push(c);
        } else if is_cjk(c) {
            let mut run = vec![c];
            while let Some(&n) = chars.peek() {
                if !is_cjk(n) {
                    break;
                }
                run.push(n);
                chars.next();
            }
            let spaced = run.iter().map(char::to_string).collect::<Vec<_>>().join(" ");
            if in_quotes {
                out.push_str(&format!(" {spaced} "));
            } else {
                out.push_str(&format!(" \"{spaced}\" "));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a character is part of a word as the word index splits text: letters, digits,
/// and the combining marks written on them (each CJK character is a word of its own).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c as u32, 0x0300..=0x036F)
}

/// Whether `text` asks the word index something it can answer: only words, spaces, balanced
/// `"phrases"` (of any text holding a word: FTS5 takes a phrase's words and ignores the rest, so
/// `"ack 2026-07-01 0"` is the words in a row), `word*` and `"phrase"*` prefixes, balanced
/// parentheses (the FTS5 keywords are words). Any other character outside a phrase is something
/// to find literally.
fn is_word_query(text: &str) -> bool {
    let (mut in_quotes, mut depth, mut prev) = (false, 0i64, ' ');
    for c in text.chars() {
        let fine = match c {
            '"' => {
                in_quotes = !in_quotes;
                true
            }
            '*' => !in_quotes && (is_word_char(prev) || prev == '"'),
            '(' if !in_quotes => {
                depth += 1;
                true
            }
            ')' if !in_quotes => {
                depth -= 1;
                depth >= 0
            }
            c => in_quotes || c.is_whitespace() || is_word_char(c),
        };
        if !fine {
            return false;
        }
        prev = c;
    }
    // Every phrase must hold a word: `"😀"` or `"()"` would be a phrase of nothing.
    !in_quotes && depth == 0 && text.split('"').skip(1).step_by(2).all(|phrase| phrase.chars().any(is_word_char)) && text.chars().any(is_word_char)
}

/// One term of a word query as snippets mark it: its words (case- and accent-folded, see
/// [`fold_word`]) in a row, the last one a prefix when `prefix`.
#[derive(Debug, Clone, PartialEq)]
pub struct Phrase {
    pub words: Vec<String>,
    pub prefix: bool,
}

/// What a snippet marks: every occurrence of a substring (the query lowercased, see
/// [`super::fts::lower`]), or the whole words where a phrase of a word query stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Highlight {
    Literal(String),
    Words(Vec<Phrase>),
}

impl Highlight {
    /// What to mark for a literal query `text`.
    pub fn literal(text: &str) -> Highlight {
        Highlight::Literal(super::fts::lower(text))
    }

    /// What to mark for a word query: its barewords and phrases, without the operators and
    /// without what NOT excludes (it is in no matching message).
    pub fn words(query: &str) -> Highlight {
        let mut phrases = Vec::new();
        let mut negated = false;
        let chars: Vec<char> = query.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let (words, end) = if c == '"' {
                let close = chars[i + 1..].iter().position(|&c| c == '"').map_or(chars.len(), |p| i + 1 + p);
                let inside: String = chars[i + 1..close].iter().collect();
                (word_spans(&inside).into_iter().map(|(s, e)| fold_word(&inside[s..e])).collect::<Vec<_>>(), close + 1)
            } else if is_word_char(c) {
                let mut end = i;
                while end < chars.len() && is_word_char(chars[end]) {
                    end += 1;
                }
                let run: String = chars[i..end].iter().collect();
                if matches!(run.as_str(), "AND" | "OR" | "NOT" | "NEAR") {
                    negated = run == "NOT";
                    i = end;
                    continue;
                }
                (word_spans(&run).into_iter().map(|(s, e)| fold_word(&run[s..e])).collect(), end)
            } else {
                i += 1;
                continue;
            };
            let prefix = chars.get(end) == Some(&'*');
            if !words.is_empty() && !std::mem::take(&mut negated) {
                phrases.push(Phrase { words, prefix });
            }
            i = end;
        }
        Highlight::Words(phrases)
    }
}

/// The words of `text` as the word index splits it (byte ranges): runs of word characters,
/// each CJK character a word of its own.
fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        // An ASCII byte is a character of its own, never CJK: classified without decoding
        // (snippets split whole messages, some of them tens of kilobytes, once per match).
        let (len, word, cjk) = match bytes[at] {
            b if b.is_ascii() => (1, b.is_ascii_alphanumeric(), false),
            _ => {
                let c = text[at..].chars().next().expect("at a character boundary");
                (c.len_utf8(), is_word_char(c), is_cjk(c))
            }
        };
        if !word || cjk {
            if let Some(s) = start.take() {
                spans.push((s, at));
            }
        }
        if cjk {
            spans.push((at, at + len));
        } else if word && start.is_none() {
            start = Some(at);
        }
        at += len;
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

/// A word as the word index compares it: lowercased letter by letter, and the accents of Latin letters removed
/// (as unicode61's `remove_diacritics 2` does, for the letters of Latin-1 and Latin Extended-A
/// that decompose into an ASCII letter and marks;
/// other letters keep theirs, so such a word may go unmarked, never a wrong one marked).
pub fn fold_word(word: &str) -> String {
    fold_chars(word).collect()
}

/// Whether `word` folds ([`fold_word`]) to `folded` (or to a word beginning with it, when
/// `prefix`), compared character by character without building the folded word: snippets ask
/// it of every word of a message, some of them tens of kilobytes long.
fn folds_to(word: &str, folded: &str, prefix: bool) -> bool {
    if word.is_ascii() {
        // ASCII folds to its lowercase, byte for byte.
        let (word, folded) = (word.as_bytes(), folded.as_bytes());
        let same = |n: usize| word[..n].iter().zip(&folded[..n]).all(|(w, f)| w.to_ascii_lowercase() == *f);
        return if prefix { word.len() >= folded.len() && same(folded.len()) } else { word.len() == folded.len() && same(word.len()) };
    }
    let mut want = folded.chars();
    for c in fold_chars(word) {
        match want.next() {
            Some(w) if w == c => {}
            Some(_) => return false,
            None => return prefix,
        }
    }
    want.next().is_none()
}

/// The characters of [`fold_word`]`(word)`, one by one.
fn fold_chars(word: &str) -> impl Iterator<Item = char> + '_ {
    const FROM: &str = "àáâãäåçèéêëìíîïñòóôõöùúûüýÿāăąćĉċčďēĕėęěĝğġģĥĩīĭįĵķĺļľńņňōŏőŕŗřśŝşšţťũūŭůűųŵŷźżž";
    const TO: &str = "aaaaaaceeeeiiiinooooouuuuyyaaaccccdeeeeegggghiiiijklllnnnooorrrssssttuuuuuuwyzzz";
    // Each letter lowered alone and ς taken for σ, as unicode61 folds them.
    word.chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == 'ς' { 'σ' } else { c })
        .filter(|c| !matches!(*c as u32, 0x0300..=0x036F))
        // (ASCII is never in FROM: a word of a long message is folded without the table.)
        .map(|c| if c.is_ascii() { c } else { FROM.chars().position(|f| f == c).and_then(|i| TO.chars().nth(i)).unwrap_or(c) })
}

fn is_syntax_error(e: &super::sql::Error) -> bool {
    let text = e.to_string();
    text.contains("fts5: syntax error") || text.contains("unterminated string") || text.contains("no such column") || text.contains("unknown special query")
}

/// The longest query searched, in bytes.
pub const MAX_QUERY_BYTES: usize = 16_384;
/// The most words a query may have (runs of letters and digits, each CJK character one word,
/// as the index splits text; the operators `AND`, `OR`, `NOT` and `NEAR` between them are not
/// words): each is a lookup in the index.
pub const MAX_QUERY_WORDS: usize = 64;
/// The most prefixes (`*`) a query may have: each may expand to every word of the index it
/// begins; 64 `x*` took 1.7 s on 2,000 messages, 20,000 of them seconds more.
pub const MAX_PREFIXES: usize = 8;
/// The deepest nesting of parentheses read as FTS5 syntax; FTS5's parser overflows its stack
/// somewhere between 60 and 100 levels and reports that as an error, not as syntax. A deeper
/// query is searched literally, as other queries FTS5 cannot read are.
pub const MAX_NESTING: usize = 16;

/// The number of words a query looks up, as the index splits text into words: the operators
/// (`AND`, `OR`, `NOT`, `NEAR` outside a quoted phrase, as FTS5 reads them) are not counted.
fn word_count(text: &str) -> usize {
    text.split('"')
        .enumerate()
        .map(|(i, part)| {
            let quoted = i % 2 == 1;
            word_spans(part).into_iter().filter(|&(s, e)| quoted || !matches!(&part[s..e], "AND" | "OR" | "NOT" | "NEAR")).count()
        })
        .sum()
}

/// The deepest nesting of parentheses and the number of prefix marks (`*`), outside quoted
/// phrases.
fn syntax_size(text: &str) -> (usize, usize) {
    let (mut depth, mut deepest, mut prefixes, mut in_quotes) = (0usize, 0usize, 0usize, false);
    for c in text.chars() {
        match c {
            '"' => in_quotes = !in_quotes,
            '(' if !in_quotes => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' if !in_quotes => depth = depth.saturating_sub(1),
            '*' if !in_quotes => prefixes += 1,
            _ => {}
        }
    }
    (deepest, prefixes)
}

/// The most trigrams of a literal query looked up in the substring index; a longer query is
/// found by some of them (a superset, checked exactly like every other).
pub const MAX_TRIGRAMS: usize = 32;

/// Runs a search. An empty query is an error, as in gptme, and so is one longer than
/// [`MAX_QUERY_BYTES`], a word query with more than [`MAX_QUERY_WORDS`] words or
/// [`MAX_PREFIXES`] prefixes, and a filter that names nothing in the store.
pub fn search(conn: &Connection, q: &SearchQuery) -> Result<SearchResult, StoreError> {
    if q.text.trim().is_empty() {
        return Err(StoreError::Query("the search query is empty".into()));
    }
    if q.text.len() > MAX_QUERY_BYTES {
        return Err(StoreError::QueryTooLarge { what: "bytes", found: q.text.len(), limit: MAX_QUERY_BYTES });
    }
    let (chat, source) = check_filters(conn, q)?;
    let unindexed = index_what_is_behind(conn)?;
    // Catching the ranking index up writes: done before the snapshot the search reads on.
    let ranking = if ranking_may_answer(q, chat) { super::ranking::usable(conn) } else { None };
    let resolved = Resolved { q, chat, source, ranking };
    let mut result = conn.on_one_snapshot(|| search_indexed(conn, &resolved))?;
    result.unindexed = unindexed;
    show_texts(&mut result, q.secrets);
    Ok(result)
}

/// The hits' texts made what the caller shows ([`SearchQuery::secrets`]): each distinct text
/// scanned once (a page often holds one text, a system prompt, many times).
fn show_texts(result: &mut SearchResult, shown: Shown) {
    if shown == Shown::AsTheyAre {
        return;
    }
    let mut masked: HashMap<String, Option<String>> = HashMap::new();
    for hit in result.conversations.iter_mut().flat_map(|c| c.hits.iter_mut()) {
        if !masked.contains_key(&hit.content) {
            let text = match shown.text(&hit.content) {
                std::borrow::Cow::Owned(text) => Some(text),
                std::borrow::Cow::Borrowed(_) => None,
            };
            masked.insert(hit.content.clone(), text);
        }
        if let Some(Some(text)) = masked.get(&hit.content) {
            hit.content.clone_from(text);
        }
    }
}

/// Whether the ranking index may rank `q`'s page ([`ranked_by_index`]): a word query
/// ([`is_word_query`]: a literal one never opens the index) by relevance, not narrowed to what
/// a message is (`--chat`, `--role`, `--model`: the index holds texts, and the word index joins
/// the messages as it goes).
fn ranking_may_answer(q: &SearchQuery, chat: Option<i64>) -> bool {
    !q.literal && is_word_query(&q.text) && q.sort == Sort::Relevance && chat.is_none() && q.role.is_none() && q.model.is_none()
}

/// A query whose `--chat` and `--source` are resolved, once, to the row ids of the conversation
/// and the source they name ([`super::sources::conversation_id`]: a chat id, or `SOURCE:CHAT`;
/// [`super::sources::named`]), so that every filter below compares row ids and the rules that
/// find a conversation or a source by name stay in one place each.
struct Resolved<'q> {
    q: &'q SearchQuery,
    chat: Option<i64>,
    source: Option<i64>,
    /// The ranking index, caught up, when it may answer ([`ranking_may_answer`]).
    ranking: Option<std::sync::Arc<super::ranking::RankingIndex>>,
}

impl std::ops::Deref for Resolved<'_> {
    type Target = SearchQuery;

    fn deref(&self) -> &SearchQuery {
        self.q
    }
}

/// How long a search waits for another process's write lock to catch the word and substring
/// indexes up itself, before answering from what they hold: an import indexing takes the lock
/// for a step after another.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Catches the word and substring indexes up to the messages when they are behind (an import
/// is indexing, or was stopped before it was done): as one more writer, waiting at most
/// [`CATCH_UP_WAIT`] for each step's lock. Returns the messages still not indexed: zero unless
/// the catch-up could not write (another process kept the lock; a read-only copy, a full disk),
/// and then the search answers from the indexes as they are.
fn index_what_is_behind(conn: &Connection) -> Result<u64, StoreError> {
    if super::fts::behind(conn)? == 0 {
        return Ok(0);
    }
    conn.set_busy_timeout(CATCH_UP_WAIT)?;
    let caught = super::fts::catch_up(conn, &mut |_, _| {});
    conn.set_busy_timeout(std::time::Duration::from_millis(u64::from(super::BUSY_TIMEOUT_MS)))?;
    match caught {
        Ok(_) => Ok(0),
        Err(StoreError::Database(_) | StoreError::NotAllowed(_)) => super::fts::behind(conn),
        Err(e) => Err(e),
    }
}

/// [`search`] once the query is checked, from the indexes as they are.
fn search_indexed(conn: &Connection, q: &Resolved) -> Result<SearchResult, StoreError> {
    if !q.literal && is_word_query(&q.text) {
        let words = word_count(&q.text);
        if words > MAX_QUERY_WORDS {
            return Err(StoreError::QueryTooLarge { what: "words", found: words, limit: MAX_QUERY_WORDS });
        }
        let (depth, prefixes) = syntax_size(&q.text);
        if prefixes > MAX_PREFIXES {
            return Err(StoreError::QueryTooLarge { what: "prefixes (`*`)", found: prefixes, limit: MAX_PREFIXES });
        }
        if depth <= MAX_NESTING {
            let fts = cjk_phrases(&q.text);
            let answered = run(conn, q, &fts);
            match answered {
                Ok((conversations, totals, ranked_by)) => {
                    return Ok(SearchResult {
                        literal: false,
                        fts_query: fts,
                        highlight: Highlight::words(&q.text),
                        conversations,
                        totals,
                        ranked_by,
                        unindexed: 0,
                    });
                }
                Err(StoreError::Database(e)) if is_syntax_error(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let highlight = Highlight::literal(&q.text);
    let Highlight::Literal(needle) = &highlight else { unreachable!("a literal highlight") };
    let trigrams = needle_trigrams(needle);
    let index_query = match conn.engine() {
        Engine::Sqlite => trigrams.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" AND "),
        Engine::Postgres => super::text_terms::trigrams_query(&trigrams),
    };
    let (conversations, totals) = run_literal(conn, q, needle, &index_query)?;
    Ok(SearchResult { literal: true, fts_query: index_query, highlight, conversations, totals, ranked_by: RankedBy::Newest, unindexed: 0 })
}

/// The trigrams of `needle` (lowercased) the substring index is asked for: distinct, at most
/// [`MAX_TRIGRAMS`], all required; none for a needle of fewer than three characters, which the
/// index cannot answer.
fn needle_trigrams(needle: &str) -> Vec<String> {
    let chars: Vec<char> = needle.chars().collect();
    let mut seen = std::collections::HashSet::new();
    let mut terms = Vec::new();
    // A trigram with NUL is left out (FTS5 may read its query text only up to a NUL); the
    // others still give a superset, and a needle with none left is scanned for.
    for w in chars.windows(3).filter(|w| !w.contains(&'\0')) {
        let t: String = w.iter().collect();
        if seen.insert(t.clone()) {
            terms.push(t);
        }
    }
    // Spread over the whole needle when it has more than the lookups allowed.
    let step = terms.len().div_ceil(MAX_TRIGRAMS).max(1);
    terms.into_iter().step_by(step).collect()
}

/// Whether lowercasing leaves `c` as it is and makes it of no other character: neither a
/// letter nor a digit nor a combining mark (`İ` lowers to `i` and U+0307). The test
/// `caseless_characters_come_only_from_themselves` checks this against every character.
fn is_caseless(c: char) -> bool {
    !is_word_char(c) && !(0x0300..=0x036F).contains(&(c as u32)) && c.to_lowercase().eq([c])
}

/// The most candidates a literal search looks up and sorts by themselves (see [`run_literal`]).
const FEW_CANDIDATES: usize = 5_000;

/// A conversation a literal search found: its chat id, how many of its messages match, and the
/// first of them (ids, with no rank).
type Found = (i64, usize, Vec<(i64, f64)>);

/// The scan of a literal search (see [`run_literal`]): (message id, conversation id, text id)
/// of the candidates passing the filters, in the listing's order, newest conversation first.
/// Candidates are `few` texts when the substring index gave at most [`FEW_CANDIDATES`], else
/// those the index gives for `trigrams` (an index query), else (no trigrams) every message.
/// Conversations are the outer loop, read in order from the listing's index (never sorted
/// whole, whatever the filters), unless the candidates are few.
fn literal_scan_sql(engine: Engine, q: &Resolved, few: Option<&[i64]>, trigrams: &str) -> (String, Vec<Value>) {
    let server = engine == Engine::Postgres;
    let (mut filters, mut args) = filter_sql(q, 2, false);
    match few {
        Some(ids) => {
            args.insert(0, Value::Text(super::sql::id_list(ids.iter().copied())));
            filters.push(super::sql::among_ids(engine, "m.text_id", 1));
        }
        None if !trigrams.is_empty() => {
            args.insert(0, Value::Text(trigrams.to_owned()));
            filters.push(
                if server {
                    "m.text_id IN (SELECT text_id FROM text_terms WHERE trigrams @@ ?1::text::tsquery OR trigrams IS NULL)"
                } else {
                    // `+`: the candidates are checked as each conversation's messages go by (the
                    // listing order is the outer loop), not looked up text by text within each
                    // conversation through `messages_by_text`, a plan SQLite picks otherwise.
                    "+m.text_id IN (SELECT rowid FROM texts_substring WHERE texts_substring MATCH ?1)"
                }
                .into(),
            );
        }
        None => {
            // Every message is a candidate (the argument is unused, but numbered as the others).
            args.insert(0, Value::Text(String::new()));
            filters.push("?1 = ''".into());
        }
    }
    let few = few.is_some();
    // CROSS JOIN keeps conversations the outer loop, read by the listing index in its order
    // (SQLite's planner; PostgreSQL's has no such hint, nor takes one).
    let from = if few {
        "messages m JOIN conversations c ON c.id = m.conversation_id"
    } else if server {
        "conversations c JOIN messages m ON m.conversation_id = c.id"
    } else {
        "conversations c CROSS JOIN messages m ON m.conversation_id = c.id"
    };
    let sql = format!("SELECT m.id, c.id, m.text_id FROM {from} WHERE {} ORDER BY c.modified DESC, c.chat_id, c.id, m.id", filters.join(" AND "));
    (sql, args)
}

/// The conversations holding `needle` (lowercased) in a message, newest first (the relevance
/// order of a literal query too), every match checked against the text: candidates from the
/// substring index when `trigrams` is not empty, else every message. Each conversation is read
/// whole (so its count of matches is exact), in listing order, until `offset + limit` have
/// matched — or to the end, counting, when totals are asked for. With many candidates, conversations are read one
/// after another from the listing index, so that nothing is sorted but one conversation's
/// messages and a query found everywhere stops after the first few; with at most
/// [`FEW_CANDIDATES`], the candidates alone are looked up and sorted.
fn run_literal(conn: &Connection, q: &Resolved, needle: &str, trigrams: &str) -> Result<(Vec<ConversationHits>, Option<Totals>), StoreError> {
    let server = conn.engine() == Engine::Postgres;
    // The index is asked once: up to one more candidate than "few", which are then looked up
    // by id (a list of them, as JSON) rather than by asking the index again.
    let few: Option<Vec<i64>> = if trigrams.is_empty() {
        None
    } else {
        let sql = if server {
            // A text whose set was too large to keep is a candidate of every query.
            "SELECT text_id FROM text_terms WHERE trigrams @@ ?1::text::tsquery
             UNION ALL SELECT text_id FROM text_terms WHERE trigrams IS NULL LIMIT ?2"
        } else {
            "SELECT rowid FROM texts_substring WHERE texts_substring MATCH ?1 LIMIT ?2"
        };
        let ids = conn.prepare_cached(sql)?.query_map(params![trigrams, FEW_CANDIDATES as i64 + 1], |r| r.get::<_, i64>(0))?.collect::<Result<Vec<_>, _>>()?;
        (ids.len() <= FEW_CANDIDATES).then_some(ids)
    };
    let (sql, args) = literal_scan_sql(conn.engine(), q, few.as_deref(), trigrams);
    // The text is read for candidates only, and kept out of the sort; a text many messages
    // share (a system prompt, a tool's output) is read and checked once.
    let mut text_of = conn.prepare_cached("SELECT data FROM texts WHERE id = ?1")?;
    let mut checked: HashMap<i64, bool> = HashMap::new();
    // Whether a match stands in a branch or view (the `--branch` one): asked of matches only.
    let mut stands = Stands::new(conn, q)?;
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params_from_iter(args.iter()))?;
    let (wanted, per) = (q.wanted(), q.matches.max(1));
    // A needle of caseless characters is in the lowered text exactly where it is in the text.
    let caseless = needle.chars().all(is_caseless);
    let holds = |t: &str| if caseless { t.contains(needle) } else { super::fts::lower(t).contains(needle) };
    let mut found: Vec<Found> = Vec::new();
    // Past the last conversation wanted, matches are only counted: (messages, conversations, the last one's chat id).
    let mut beyond: (usize, usize, Option<i64>) = (0, 0, None);
    // Whether counting stopped at COUNTED_UP_TO.
    let mut stopped = false;
    // Candidates read so far: past the page, counting stops once COUNTED_UP_TO were read (a
    // needle of fewer than three characters has every message for a candidate).
    let mut read = 0usize;
    while let Some(r) = rows.next()? {
        let (id, conversation, text_id): (i64, i64, Option<i64>) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let current = found.last().is_some_and(|f| f.0 == conversation);
        let past = !current && found.len() == wanted;
        if past && !q.totals {
            break;
        }
        if past && !q.exact_totals && read >= COUNTED_UP_TO {
            stopped = true;
            break;
        }
        read += 1;
        let Some(text_id) = text_id else { continue };
        let held = match checked.get(&text_id) {
            Some(&held) => held,
            None => {
                let Some(data) = text_of.query_row([text_id], |r| r.get::<_, Vec<u8>>(0)).optional()? else { continue };
                let held = holds(&conn.decode_text(text_id, &data)?);
                checked.insert(text_id, held);
                held
            }
        };
        if !held {
            continue;
        }
        if stands.conversation(id)?.is_none() {
            continue;
        }
        if past {
            beyond.0 += 1;
            if beyond.2.as_ref() != Some(&conversation) {
                beyond.1 += 1;
                beyond.2 = Some(conversation);
            }
            // Counted far enough: the totals are "at least" from here.
            if !q.exact_totals && found.iter().map(|f| f.1).sum::<usize>() + beyond.0 >= COUNTED_UP_TO {
                stopped = true;
                break;
            }
            continue;
        }
        if !current {
            found.push((conversation, 0, Vec::new()));
        }
        let last = found.last_mut().expect("pushed above");
        last.1 += 1;
        if last.2.len() < per {
            last.2.push((id, 0.0));
        }
    }
    let totals = q.totals.then(|| Totals { messages: found.iter().map(|f| f.1).sum::<usize>() + beyond.0, conversations: found.len() + beyond.1, exact: !stopped });
    let chosen: Vec<(i64, i64, f64)> = found.iter().skip(q.offset).flat_map(|f| f.2.iter().map(|&(id, score)| (id, f.0, score))).collect();
    let mut out = place(conn, q, &chosen, 0, usize::MAX)?;
    for c in &mut out {
        c.total = found.iter().find(|f| f.0 == c.conversation_id).map_or(c.total, |f| f.1);
    }
    Ok((out, totals))
}

/// Refuses filters that name nothing in the store: a conversation, a branch (of that
/// conversation, with `--chat`), a role or a model no message has. Saying "no results" for
/// them would hide a typo. Returns the row ids of the conversation `--chat` names and of the
/// source `--source` names, resolved here once ([`super::sources::conversation_id`],
/// [`super::sources::named`]).
fn check_filters(conn: &Connection, q: &SearchQuery) -> Result<(Option<i64>, Option<i64>), StoreError> {
    let exists = |sql: &str, value: &str| -> Result<bool, StoreError> { Ok(conn.prepare_cached(sql)?.exists([value])?) };
    let listed = |sql: &str| -> Result<String, StoreError> {
        let mut stmt = conn.prepare_cached(sql)?;
        let names = stmt.query_map((), |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
        Ok(names.join(", "))
    };
    let chat_row = match &q.chat_id {
        Some(chat) => match super::sources::conversation_id(conn, chat) {
            Ok(id) => Some(id),
            Err(StoreError::NoConversation(_)) => {
                return Err(StoreError::NoSuchFilter { flag: "--chat", value: chat.clone(), known: "no such conversation (`sessiondb list` lists them)".into() })
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let source_row = q.source.as_deref().map(|source| super::sources::named(conn, source).map(|s| s.id)).transpose()?;
    if let Some(branch) = &q.branch {
        let path = crate::layout::branch_path(branch);
        let (found, known) = match (&q.chat_id, chat_row) {
            (Some(chat), Some(conversation)) => {
                let mut stmt = conn.prepare_cached("SELECT d.path FROM documents d WHERE d.kind = 'branch' AND d.conversation_id = ?1 ORDER BY d.path")?;
                let paths = stmt.query_map([conversation], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
                let names: Vec<&str> =
                    paths
                        .iter()
                        .map(|p| {
                            if p == crate::layout::MAIN_TRANSCRIPT {
                                "main"
                            } else {
                                p.strip_prefix("branches/").and_then(|n| n.strip_suffix(".jsonl")).unwrap_or(p)
                            }
                        })
                        .collect();
                (paths.contains(&path), format!("conversation {chat:?} has the branches {}", names.join(", ")))
            }
            _ => (
                exists("SELECT 1 FROM documents WHERE kind = 'branch' AND path = ?1", &path)?,
                "no conversation has such a branch (`sessiondb branches CHAT` lists a conversation's)".into(),
            ),
        };
        if !found {
            return Err(StoreError::NoSuchFilter { flag: "--branch", value: branch.clone(), known });
        }
    }
    if let Some(role) = &q.role {
        if !matches!(role.as_str(), "system" | "user" | "assistant") && !exists("SELECT 1 FROM messages WHERE role = ?1", role)? {
            let stored = listed("SELECT DISTINCT role FROM messages WHERE role IS NOT NULL AND role NOT IN ('system', 'user', 'assistant') LIMIT 10")?;
            let known = if stored.is_empty() {
                "no message has this role; roles are system, user and assistant".to_owned()
            } else {
                format!("no message has this role; roles are system, user, assistant and {stored}")
            };
            return Err(StoreError::NoSuchFilter { flag: "--role", value: role.clone(), known });
        }
    }
    if let Some(model) = &q.model {
        if !exists("SELECT 1 FROM messages WHERE model = ?1", model)? {
            let stored = listed("SELECT DISTINCT model FROM messages WHERE model IS NOT NULL LIMIT 10")?;
            return Err(StoreError::NoSuchFilter {
                flag: "--model",
                value: model.clone(),
                known: if stored.is_empty() { "no message names a model".into() } else { format!("no message names this model; models named include {stored}") },
            });
        }
    }
    Ok((chat_row, source_row))
}

/// Two ways to the same answer. Without a narrowing filter (role, model, since, chat,
/// branch) nearly every match qualifies, so the best `window` matches of the whole index are
/// ranked (FTS5 keeps only those, however many match) and only they are looked up. When they
/// yield too few conversations, or a filter would have most of them rejected, the filters go
/// into the ranking query instead and one pass ranks exactly the qualifying matches: growing
/// a window and ranking again took seconds for a common word in one conversation. Both order
/// matches by (score, message id), so the first conversations of a window are the first of
/// the whole ranking and pages join up. [`Sort::Newest`] takes the one pass, ordered by the
/// conversation first. Totals, when asked for and not counted by the pass, are counted apart
/// ([`count_word_matches`]; on a server, whose word sets rank only what the ranking index does
/// not ([`run_on_server`]), from the ranking index: [`count_by_index`]).
fn run(conn: &Connection, q: &Resolved, fts: &str) -> Result<(Vec<ConversationHits>, Option<Totals>, RankedBy), StoreError> {
    // On a server, FTS5 (in memory) reads the query first, so that one it refuses is refused
    // whichever way it is answered.
    let matcher = match conn.engine() {
        Engine::Sqlite => None,
        Engine::Postgres => Some(WordMatch::new(fts)?),
    };
    let (out, mut totals, ranked_by) = match (ranked_by_index(conn, q, fts)?, matcher) {
        (Some(page), _) => (page, None, RankedBy::RankingIndex),
        (None, None) => {
            let (out, totals) = run_ranked(conn, q, fts)?;
            (out, totals, RankedBy::WordIndex)
        }
        (None, Some(matcher)) => run_on_server(conn, q, matcher)?,
    };
    if q.totals && totals.is_none() {
        totals = Some(match conn.engine() {
            Engine::Sqlite => count_word_matches(conn, q, fts)?,
            Engine::Postgres => match count_by_index(conn, q, fts)? {
                Some(totals) => totals,
                None => run_on_server(conn, q, WordMatch::new(fts)?)?.1.expect("a server's search counts every match"),
            },
        });
    }
    if let Some(t) = totals.as_mut().filter(|t| !t.exact) {
        // Counting stopped at its bound: the page's own conversations and matches are as sure
        // a lower bound, and may be more (a page of every conversation, `-n 0`).
        t.conversations = t.conversations.max(q.offset + out.len());
        t.messages = t.messages.max(out.iter().map(|c| c.total).sum::<usize>());
    }
    Ok((out, totals.filter(|_| q.totals), ranked_by))
}

/// Every match of word query `fts` that passes the filters and stands in a branch or view, as
/// [`count_word_matches`] counts them, from the ranking index (which answered the page): the
/// texts it matches, then the messages saying them, up to [`COUNTED_UP_TO`] unless every one
/// is asked for. For a server, which has no word index to count from. `None` when the index
/// fails now.
fn count_by_index(conn: &Connection, q: &Resolved, fts: &str) -> Result<Option<Totals>, StoreError> {
    let Some(index) = q.ranking.as_deref() else { return Ok(None) };
    let Some(terms) = plain_terms(fts) else { return Ok(None) };
    let Ok(words) = terms.iter().map(|t| super::word_tokens::words(t)).collect::<Result<Vec<Vec<String>>, _>>() else { return Ok(None) };
    let Ok(mut texts) = index.all_matching(&super::ranking::RankQuery { terms: words }) else { return Ok(None) };
    texts.sort_unstable();
    let bound = if q.exact_totals { usize::MAX } else { COUNTED_UP_TO };
    let (filters, mut args) = filter_sql(q, 3, true);
    args.splice(0..0, [Value::Null, Value::Null]);
    let sql = format!(
        // By text, as FTS5 gives its matches, and each text's by conversation (their index), so
        // that a bound reached counts the conversations SQLite's count does.
        "SELECT m.conversation_id FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE {} AND {} ORDER BY m.text_id, m.conversation_id, m.id LIMIT ?2",
        super::sql::among_ids(conn.engine(), "m.text_id", 1),
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let (mut messages, mut conversations) = (0usize, std::collections::HashSet::new());
    // Chunks growing from a few texts, so that a common word, whose first texts are said by
    // the bound's messages already (a system prompt), stops after a small question.
    let (mut at, mut size) = (0, 64);
    while at < texts.len() && messages < bound {
        let chunk = &texts[at..(at + size).min(texts.len())];
        (at, size) = (at + chunk.len(), (size * 4).min(SERVER_CHUNK));
        args[0] = Value::Text(super::sql::id_list(chunk.iter().copied()));
        args[1] = Value::Integer((bound - messages).min(i64::MAX as usize) as i64);
        for conversation in stmt.query_map(params_from_iter(args.iter()), |r| r.get::<_, i64>(0))? {
            conversations.insert(conversation?);
            messages += 1;
        }
    }
    Ok(Some(Totals { messages, conversations: conversations.len(), exact: messages < bound }))
}

/// The page of conversations (`limit` past the first `offset`) by the word index, and the
/// totals when every match was read.
fn run_ranked(conn: &Connection, q: &Resolved, fts: &str) -> Result<(Vec<ConversationHits>, Option<Totals>), StoreError> {
    let wanted = q.wanted();
    let narrowed = q.role.is_some() || q.model.is_some() || q.since.is_some() || q.chat_id.is_some() || q.branch.is_some() || q.source.is_some();
    if !narrowed && q.sort == Sort::Relevance {
        let window = first_window(q);
        // bm25() spelled out rather than FTS5's `rank` column (the same default bm25): with
        // `ORDER BY rank` FTS5 evaluates the ranking twice per match, which doubled the time of
        // a word found in half of all messages.
        let mut ranked = conn.prepare_cached("SELECT rowid, bm25(texts_fts) AS score FROM texts_fts WHERE texts_fts MATCH ?1 ORDER BY score, rowid LIMIT ?2")?;
        let texts: Vec<(i64, f64)> = ranked.query_map(params![fts, window as i64], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        let exhausted = texts.len() < window;
        let out = place(conn, q, &holders(conn, &texts)?, q.offset, wanted - q.offset)?;
        if out.len() >= wanted - q.offset || exhausted {
            let mut out: Vec<ConversationHits> = out.into_iter().take(wanted - q.offset).collect();
            if !exhausted {
                // The window holds some of a conversation's matches, not always all of them:
                // each count of the page is made whole, as `run_filtered` counts.
                let mut matches = TextMatches::new(fts)?;
                for hits in &mut out {
                    hits.total = matches_in_conversation(conn, q, &mut matches, hits.conversation_id, true)?.len();
                }
            }
            return Ok((out, None));
        }
    }
    run_filtered(conn, q, fts)
}

/// The terms of word query `fts` (FTS5 syntax, after [`cjk_phrases`]) when it is only
/// barewords and `"phrases"`, all required (FTS5's implicit AND): what the ranking index
/// answers. `None` for anything else FTS5 reads (prefixes, parentheses, AND/OR/NOT/NEAR, a
/// doubled quote inside a phrase).
fn plain_terms(fts: &str) -> Option<Vec<String>> {
    if fts.contains("\"\"") {
        return None;
    }
    let mut terms = Vec::new();
    let mut rest = fts.trim_start();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('"') {
            let end = after.find('"')?;
            terms.push(after[..end].to_owned());
            rest = &after[end + 1..];
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
            let word = &rest[..end];
            if word.contains(['*', '(', ')']) || matches!(word, "AND" | "OR" | "NOT" | "NEAR") {
                return None;
            }
            terms.push(word.to_owned());
            rest = &rest[end..];
        }
        if rest.starts_with('*') {
            return None;
        }
        rest = rest.trim_start();
    }
    Some(terms)
}

/// The page of conversations (`limit` of them past the first `offset`) of word query `fts`
/// ranked by the ranking index (`store::ranking`: bm25 over the whole history without scoring
/// every match), grouped as
/// [`place`] groups them; `None` when the query is not one it answers ([`plain_terms`]) or the
/// index is not usable now, and FTS5 answers instead; so does a query narrowed to what a
/// message is (`--chat`, `--role`, `--model`), while the other filters are answered by
/// [`place`]. The best matches are read in windows growing eightfold until they hold enough
/// conversations or every match; each conversation's count of matches is then made exactly:
/// from the window when it holds every match, else by asking the index which of the
/// page's texts match ([`count_in_conversations`]).
fn ranked_by_index(conn: &Connection, q: &Resolved, fts: &str) -> Result<Option<Vec<ConversationHits>>, StoreError> {
    let Some(index) = q.ranking.as_deref() else { return Ok(None) };
    let Some(terms) = plain_terms(fts) else { return Ok(None) };
    let Ok(words) = terms.iter().map(|t| super::word_tokens::words(t)).collect::<Result<Vec<Vec<String>>, _>>() else { return Ok(None) };
    if words.is_empty() || words.iter().any(Vec::is_empty) {
        return Ok(None);
    }
    let query = super::ranking::RankQuery { terms: words };
    let (wanted, per) = (q.wanted(), q.matches.max(1));
    // The conversations before the offset are only counted: whether one of their matches stands
    // in a branch or view is all that is asked of them (no text, no count), so that a deep page
    // costs about what its place in the order costs, not that many pages' answers.
    let mut stands = Stands::new(conn, q)?;
    let mut window = first_window(q);
    loop {
        let Ok(top) = index.top(&query, window) else { return Ok(None) };
        let exhausted = top.len() < window;
        let top: Vec<(i64, f64)> = top.into_iter().map(|(text, score)| (text, -f64::from(score))).collect();
        // Conversations in the order of their best match, each with its matches in the window.
        let mut order: Vec<i64> = Vec::new();
        let mut matches: HashMap<i64, Vec<(i64, f64)>> = HashMap::new();
        for (id, conversation, score) in holders(conn, &top)? {
            matches
                .entry(conversation)
                .or_insert_with(|| {
                    order.push(conversation);
                    Vec::new()
                })
                .push((id, score));
        }
        let mut out: Vec<ConversationHits> = Vec::new();
        let mut skipped = 0;
        for conversation in &order {
            if skipped + out.len() == wanted {
                break;
            }
            let found = &matches[conversation];
            // A few more than shown, in case some stand in no branch or view.
            let found = &found[..found.len().min(per.saturating_mul(4))];
            if skipped < q.offset {
                let mut placed = false;
                for &(id, _) in found {
                    if stands.conversation(id)?.is_some() {
                        placed = true;
                        break;
                    }
                }
                skipped += usize::from(placed);
                continue;
            }
            let found: Vec<(i64, i64, f64)> = found.iter().map(|&(id, score)| (id, *conversation, score)).collect();
            if let Some(mut hits) = place(conn, q, &found, 0, 1)?.pop() {
                hits.total = if exhausted {
                    // Every match is in the window: those that stand are the conversation's.
                    let mut standing = 0;
                    for &(id, _) in &matches[conversation] {
                        standing += usize::from(stands.conversation(id)?.is_some());
                    }
                    standing
                } else {
                    // Counted below, with the other conversations of the page.
                    0
                };
                out.push(hits);
            }
        }
        if skipped + out.len() == wanted || exhausted {
            if !exhausted {
                let Some(counts) = count_in_conversations(conn, q, index, &query, &out)? else { return Ok(None) };
                for hits in &mut out {
                    hits.total = counts.get(&hits.conversation_id).copied().unwrap_or(0);
                }
            }
            return Ok(Some(out));
        }
        if window >= MAX_WINDOW {
            return Ok(None);
        }
        window = window.saturating_mul(8).min(MAX_WINDOW);
    }
}

/// The messages saying each of `texts` (text id, score), in that order, each text's by message
/// id: (message id, conversation id, score). A text many conversations share (a system prompt)
/// is found once by the index and stands for every message that says it.
fn holders(conn: &Connection, texts: &[(i64, f64)]) -> Result<Vec<(i64, i64, f64)>, StoreError> {
    // A chunk of texts a question (one each was a round trip each on a server).
    let mut stmt =
        conn.prepare_cached(&format!("SELECT text_id, id, conversation_id FROM messages WHERE {}", super::sql::among_ids(conn.engine(), "text_id", 1)))?;
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(SERVER_CHUNK) {
        let mut saying: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for row in stmt.query_map([Value::Text(super::sql::id_list(chunk.iter().map(|&(text, _)| text)))], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })? {
            let (text, id, conversation) = row?;
            saying.entry(text).or_default().push((id, conversation));
        }
        for &(text, score) in chunk {
            let Some(mut messages) = saying.remove(&text) else { continue };
            messages.sort_unstable();
            out.extend(messages.into_iter().map(|(id, conversation)| (id, conversation, score)));
        }
    }
    Ok(out)
}

/// Which texts match a word query, each decided once per search ([`WordMatch`]: FTS5's own
/// rules, as the word index applies them) however many messages and conversations say it.
struct TextMatches {
    matcher: WordMatch,
    known: HashMap<i64, bool>,
}

impl TextMatches {
    fn new(fts: &str) -> Result<TextMatches, StoreError> {
        Ok(TextMatches { matcher: WordMatch::new(fts)?, known: HashMap::new() })
    }

    /// Those of `messages` (message id, text id) whose text matches, in the order given. The
    /// texts not yet decided are read and checked a few at a time ([`TEXTS_AT_ONCE`]), so that
    /// a long conversation's texts are never all in memory.
    fn keep(&mut self, conn: &Connection, messages: Vec<(i64, i64)>) -> Result<Vec<(i64, i64)>, StoreError> {
        let mut waiting: Vec<(i64, String)> = Vec::new();
        let mut bytes = 0;
        for &(_, text) in &messages {
            if self.known.contains_key(&text) || waiting.iter().any(|(t, _)| *t == text) {
                continue;
            }
            let content = super::texts::get(conn, text)?;
            bytes += content.len();
            waiting.push((text, content));
            if waiting.len() >= TEXTS_AT_ONCE || bytes >= TEXT_BYTES_AT_ONCE {
                self.decide(&mut waiting)?;
                bytes = 0;
            }
        }
        self.decide(&mut waiting)?;
        Ok(messages.into_iter().filter(|(_, text)| self.known.get(text).copied().unwrap_or(false)).collect())
    }

    /// Checks `waiting` (text id, text) and remembers the answers; empties it.
    fn decide(&mut self, waiting: &mut Vec<(i64, String)>) -> Result<(), StoreError> {
        let matched: std::collections::HashSet<i64> = self.matcher.matching(waiting)?.into_iter().map(|m| m.id).collect();
        for (text, _) in waiting.drain(..) {
            self.known.insert(text, matched.contains(&text));
        }
        Ok(())
    }
}

/// At most this many texts, or about [`TEXT_BYTES_AT_ONCE`] of them, are checked at once by
/// [`TextMatches`].
const TEXTS_AT_ONCE: usize = 16;
const TEXT_BYTES_AT_ONCE: usize = 4 << 20;

/// The messages of conversation `conversation` (its row id) that match the query and pass
/// the filters, standing in a branch or view, with their texts: the conversation's messages
/// read by the index on it, each text checked once ([`TextMatches`]), so that the work follows
/// the conversation's length, not the whole index's matches (a lookup of a common word's
/// long list of texts in the word index for each message, as it was, took milliseconds).
fn matches_in_conversation(conn: &Connection, q: &Resolved, texts: &mut TextMatches, conversation: i64, passed: bool) -> Result<Vec<(i64, i64)>, StoreError> {
    texts.keep(conn, messages_in_conversation(conn, q, conversation, passed)?)
}

/// How many messages of each of `page`'s conversations match `query` and pass the filters,
/// standing in a branch or view, as [`matches_in_conversation`] counts them, by conversation
/// row id: the conversations' messages read by the index on them, their texts asked of the
/// ranking index all at once ([`super::ranking::RankingIndex::matching_among`]), so that no
/// text is read or split into words, and only the messages whose text matches asked where they
/// stand. `None` when the index fails now, and FTS5 answers.
fn count_in_conversations(
    conn: &Connection,
    q: &Resolved,
    index: &super::ranking::RankingIndex,
    query: &super::ranking::RankQuery,
    page: &[ConversationHits],
) -> Result<Option<HashMap<i64, usize>>, StoreError> {
    let mut messages: Vec<(i64, i64, i64)> = Vec::new();
    for hits in page {
        let found = messages_of(conn, q, hits.conversation_id, true, false)?;
        messages.extend(found.into_iter().map(|(id, text)| (id, hits.conversation_id, text)));
    }
    let mut texts: Vec<i64> = messages.iter().map(|&(_, _, text)| text).collect();
    texts.sort_unstable();
    texts.dedup();
    let Ok(matching) = index.matching_among(query, &texts) else { return Ok(None) };
    let matching: std::collections::HashSet<i64> = matching.into_iter().collect();
    let conversation_of: HashMap<i64, i64> =
        messages.into_iter().filter(|(_, _, text)| matching.contains(text)).map(|(id, conversation, _)| (id, conversation)).collect();
    // Where the matching messages stand, asked a chunk at a time: one question each was a round
    // trip each on a server (a page of a common word's conversations, hundreds of them).
    let mut args = vec![Value::Null];
    let mut arg = |value| {
        args.push(value);
        args.len()
    };
    let sql = format!("SELECT m.id FROM messages m WHERE {} AND {}", super::sql::among_ids(conn.engine(), "m.id", 1), placement_sql(q, "m.id", &mut arg));
    let mut standing = conn.prepare_cached(&sql)?;
    let mut ids: Vec<i64> = conversation_of.keys().copied().collect();
    ids.sort_unstable();
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for chunk in ids.chunks(SERVER_CHUNK) {
        args[0] = Value::Text(super::sql::id_list(chunk.iter().copied()));
        for id in standing.query_map(params_from_iter(args.iter()), |r| r.get::<_, i64>(0))? {
            *counts.entry(conversation_of[&id?]).or_default() += 1;
        }
    }
    Ok(Some(counts))
}

/// The messages (id, text id) of conversation `conversation` that pass the filters and stand
/// in a branch or view, by id: read by the index on the conversation. `passed`: the
/// conversation is known to pass the filters on conversations (one a page holds), and only
/// those on messages are asked ([`message_filter_sql`]).
fn messages_in_conversation(conn: &Connection, q: &Resolved, conversation: i64, passed: bool) -> Result<Vec<(i64, i64)>, StoreError> {
    messages_of(conn, q, conversation, passed, true)
}

/// [`messages_in_conversation`], where the messages stand asked only with `placed`.
fn messages_of(conn: &Connection, q: &Resolved, conversation: i64, passed: bool, placed: bool) -> Result<Vec<(i64, i64)>, StoreError> {
    let (mut filters, mut args) = if passed { message_filter_sql(q, 2, placed) } else { filter_sql(q, 2, placed) };
    args.insert(0, Value::Integer(conversation));
    filters.push("m.conversation_id = ?1".to_owned());
    let from = if passed { "messages m" } else { "messages m JOIN conversations c ON c.id = m.conversation_id" };
    let sql = format!("SELECT m.id, m.text_id FROM {from} WHERE m.text_id IS NOT NULL AND {} ORDER BY m.id", filters.join(" AND "));
    let mut stmt = conn.prepare_cached(&sql)?;
    let messages = stmt.query_map(params_from_iter(args.iter()), |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<Vec<(i64, i64)>, _>>()?;
    Ok(messages)
}

/// Every match of word query `fts` that passes the filters and stands in a branch or view, as
/// [`run_filtered`] counts them, without ranking any: up to [`COUNTED_UP_TO`] of them, unless
/// every one is asked for.
fn count_word_matches(conn: &Connection, q: &Resolved, fts: &str) -> Result<Totals, StoreError> {
    let (filters, mut args) = filter_sql(q, 3, true);
    let bound = if q.exact_totals { i64::MAX } else { COUNTED_UP_TO as i64 };
    args.splice(0..0, [Value::Text(fts.to_owned()), Value::Integer(bound)]);
    let sql = format!(
        "SELECT count(*), count(DISTINCT conversation) FROM (
             SELECT m.conversation_id AS conversation
             FROM texts_fts JOIN messages m ON m.text_id = texts_fts.rowid JOIN conversations c ON c.id = m.conversation_id
             WHERE texts_fts MATCH ?1 AND {} LIMIT ?2) AS counted",
        filters.join(" AND ")
    );
    let (messages, conversations): (i64, i64) = conn.prepare_cached(&sql)?.query_row(params_from_iter(args.iter()), |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(Totals { messages: messages as usize, conversations: conversations as usize, exact: messages < bound })
}

/// The documents that hold message `m` as one of their lines, `d`, with the line, `dl`: as its
/// own row, or borrowed from the document it shares lines with (schema 0010). Found from the
/// message's rows (an index), whatever the documents' lengths.
const HOLDERS: &str = "document_lines dl JOIN documents d
      ON d.conversation_id = m.conversation_id AND (d.id = dl.document_id OR (d.base_id = dl.document_id AND dl.line_no < d.base_len))
      WHERE dl.message_id = m.id";

/// The filters of `q` as SQL over `messages m` and `conversations c`, with their arguments
/// numbered from `?{first}`. `placed` requires the message to stand in a branch or view (the
/// `--branch` one, if given), as [`place`] does.
fn filter_sql(q: &Resolved, first: usize, placed: bool) -> (Vec<String>, Vec<Value>) {
    filters_of(q, first, placed, true)
}

/// The filters of `q` on a message alone, as SQL over `messages m` (see [`filter_sql`]): for
/// the messages of a conversation already found to pass the filters on conversations (one a
/// page holds), which are then not asked again of each of its messages.
fn message_filter_sql(q: &Resolved, first: usize, placed: bool) -> (Vec<String>, Vec<Value>) {
    filters_of(q, first, placed, false)
}

/// [`filter_sql`], with the filters on conversations or without them.
fn filters_of(q: &Resolved, first: usize, placed: bool, on_conversations: bool) -> (Vec<String>, Vec<Value>) {
    let mut filters: Vec<String> = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    let mut arg = |value: Value| {
        args.push(value);
        first + args.len() - 1
    };
    if let Some(role) = &q.role {
        filters.push(format!("m.role = ?{}", arg(Value::Text(role.clone()))));
    }
    if let Some(model) = &q.model {
        filters.push(format!("m.model = ?{}", arg(Value::Text(model.clone()))));
    }
    if on_conversations {
        if let Some(since) = q.since {
            filters.push(format!("c.modified >= ?{}", arg(Value::Real(since))));
        }
        if let Some(chat) = q.chat {
            filters.push(format!("c.id = ?{}", arg(Value::Integer(chat))));
        }
        if let Some(source) = q.source {
            // Written so that no index on the source is used for it (as `queries` lists one
            // source): a search read in the listing's order keeps that order from its index,
            // rather than finding the source's conversations and sorting all their messages.
            let n = arg(Value::Integer(source));
            filters.push(format!("(c.source_id = ?{n} OR ?{n} IS NULL)"));
        }
        if q.chat_id.is_none() {
            filters.push("c.deleted_at IS NULL".into());
        }
        if !q.include_test && q.chat_id.is_none() {
            filters.push(format!("NOT {}", crate::layout::test_ids_sql("c.chat_id")));
        }
    }
    if placed {
        filters.push(placement_sql(q, "m.id", &mut arg));
    }
    (filters, args)
}

/// That the message whose id is `message` (SQL: `m.id`, or a parameter) stands in a branch or
/// view (the `--branch` one, if given), as SQL; `arg` numbers the argument it takes. With a
/// branch, it is SQL over the message's row `m` (its documents are its conversation's), and
/// `message` is `m.id`.
fn placement_sql(q: &Resolved, message: &str, arg: &mut impl FnMut(Value) -> usize) -> String {
    match &q.branch {
        Some(b) => format!("EXISTS (SELECT 1 FROM {HOLDERS} AND d.kind = 'branch' AND d.path = ?{})", arg(Value::Text(crate::layout::branch_path(b)))),
        None => format!("EXISTS (SELECT 1 FROM document_lines dl WHERE dl.message_id = {message})"),
    }
}

/// Ranks exactly the matches that pass the filters, in one pass, and keeps the first
/// `offset + limit` conversations (by best match, or newest first) with exact match counts, and
/// the totals. With `--chat`, the matches are found from that conversation's messages
/// ([`matches_in_conversation`]) and their texts scored in one pass of the index over the range
/// of their ids.
fn run_filtered(conn: &Connection, q: &Resolved, fts: &str) -> Result<(Vec<ConversationHits>, Option<Totals>), StoreError> {
    // Conversations in the order of their best match, with every match counted and the best
    // `matches` kept; the matches stream by (best first, or newest conversation first), none is
    // held beyond that.
    let per = q.matches.max(1);
    let mut order: Vec<i64> = Vec::new();
    let mut seen: HashMap<i64, (usize, Vec<(i64, f64)>)> = HashMap::new();
    let mut take = |id: i64, score: f64, conversation: i64| {
        let entry = seen.entry(conversation).or_insert_with_key(|k| {
            order.push(*k);
            (0, Vec::new())
        });
        entry.0 += 1;
        if entry.1.len() < per {
            entry.1.push((id, score));
        }
    };
    match q.chat {
        Some(conversation) => {
            let found = matches_in_conversation(conn, q, &mut TextMatches::new(fts)?, conversation, false)?;
            let texts: std::collections::HashSet<i64> = found.iter().map(|&(_, t)| t).collect();
            let mut scores: HashMap<i64, f64> = HashMap::new();
            if let (Some(&lo), Some(&hi)) = (texts.iter().min(), texts.iter().max()) {
                let mut stmt = conn.prepare_cached("SELECT rowid, bm25(texts_fts) FROM texts_fts WHERE texts_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3")?;
                for row in stmt.query_map(params![fts, lo, hi], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?)))? {
                    let (text, score) = row?;
                    if texts.contains(&text) {
                        scores.insert(text, score);
                    }
                }
            }
            let mut ranked: Vec<(i64, f64)> = found.into_iter().map(|(id, text)| (id, scores.get(&text).copied().unwrap_or(0.0))).collect();
            ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            for (id, score) in ranked {
                take(id, score, conversation);
            }
        }
        None => {
            let (filters, mut args) = filter_sql(q, 2, true);
            args.insert(0, Value::Text(fts.to_owned()));
            let sql = format!(
                "SELECT m.id, bm25(texts_fts) AS score, c.id
                 FROM texts_fts JOIN messages m ON m.text_id = texts_fts.rowid JOIN conversations c ON c.id = m.conversation_id
                 WHERE texts_fts MATCH ?1 AND {}
                 ORDER BY {}score, m.id",
                filters.join(" AND "),
                if q.sort == Sort::Newest { "c.modified DESC, c.chat_id, c.id, " } else { "" }
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut rows = stmt.query(params_from_iter(args.iter()))?;
            while let Some(r) = rows.next()? {
                take(r.get(0)?, r.get(1)?, r.get(2)?);
            }
        }
    }
    let totals = Totals { messages: seen.values().map(|s| s.0).sum(), conversations: seen.len(), exact: true };
    // Every match here stands in a branch or view (the filters ask it), so the page is the
    // conversations past the offset.
    order.truncate(q.wanted());
    order.drain(..q.offset.min(order.len()));
    let chosen: Vec<(i64, i64, f64)> = order.iter().flat_map(|&c| seen[&c].1.iter().map(move |&(id, score)| (id, c, score))).collect();
    let mut out = place(conn, q, &chosen, 0, usize::MAX)?;
    for c in &mut out {
        c.total = seen[&c.conversation_id].0;
    }
    Ok((out, Some(totals)))
}

/// Candidates of a server search fetched and checked at once.
const SERVER_CHUNK: usize = 1_000;

/// A word query on a server (PostgreSQL), ranked and counted exactly as [`run_filtered`] does
/// on SQLite: the messages whose word sets can match ([`WordMatch::superset`]) are read in
/// chunks of [`SERVER_CHUNK`], those passing the filters and standing in a branch or view are
/// checked ([`WordMatch::matching`]) and scored ([`super::word_match::bm25`]), and the page
/// is the first conversations by their best match (or newest first). Every match is read, so
/// the totals are always exact.
fn run_on_server(conn: &Connection, q: &Resolved, mut matcher: WordMatch) -> Result<(Vec<ConversationHits>, Option<Totals>, RankedBy), StoreError> {
    use super::word_match::{bm25, Corpus};
    let superset = matcher.superset();
    let count = |tsquery: &str| -> Result<u64, StoreError> {
        let n: i64 = conn.prepare_cached("SELECT count(*) FROM text_terms WHERE words @@ ?1::text::tsquery")?.query_row([tsquery], |r| r.get(0))?;
        Ok(n as u64)
    };
    let (documents, tokens): (i64, i64) = conn.prepare_cached("SELECT documents, tokens FROM text_terms_totals")?.query_row((), |r| Ok((r.get(0)?, r.get(1)?)))?;
    let (documents, tokens) = (documents.max(0) as u64, tokens.max(0) as u64);
    let holding = matcher
        .phrases()
        .iter()
        .map(|p| match super::text_terms::words_query(std::slice::from_ref(p), true) {
            Some(t) => count(&t),
            None => Ok(documents),
        })
        .collect::<Result<Vec<u64>, _>>()?;
    let corpus = Corpus { documents, tokens, holding };
    // The texts the sets say may match.
    let mut ids: Vec<i64> = match &superset {
        Some(t) => conn
            .prepare_cached(
                "SELECT text_id FROM text_terms WHERE words @@ ?1::text::tsquery
                 UNION ALL SELECT text_id FROM text_terms WHERE words IS NULL",
            )?
            .query_map([t], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
        None => conn.prepare_cached("SELECT text_id FROM text_terms")?.query_map((), |r| r.get(0))?.collect::<Result<_, _>>()?,
    };
    ids.sort_unstable();
    let mut texts_of = conn.prepare_cached(&format!("SELECT id, data FROM texts WHERE {}", super::sql::among_ids(Engine::Postgres, "id", 1)))?;
    let (filters, mut args) = filter_sql(q, 2, true);
    args.insert(0, Value::Null);
    let sql = format!(
        "SELECT m.id, m.text_id, c.id, c.modified, c.chat_id FROM messages m JOIN conversations c ON c.id = m.conversation_id
         WHERE {} AND {}",
        super::sql::among_ids(Engine::Postgres, "m.text_id", 1),
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    /// A conversation's matches: how many, the best `matches` (score, id), its listing order.
    struct Seen {
        count: usize,
        best: Vec<(f64, i64)>,
        modified: f64,
        chat_id: String,
    }
    let per = q.matches.max(1);
    let mut seen: HashMap<i64, Seen> = HashMap::new();
    let list = |ids: &mut dyn Iterator<Item = i64>| Value::Text(super::sql::id_list(ids));
    for chunk in ids.chunks(SERVER_CHUNK) {
        // Each candidate text, checked (and scored) once, however many messages say it.
        let mut texts: Vec<(i64, String)> = Vec::new();
        for row in texts_of.query_map([list(&mut chunk.iter().copied())], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))? {
            let (id, data) = row?;
            texts.push((id, conn.decode_text(id, &data)?));
        }
        let scores: HashMap<i64, f64> = matcher.matching(&texts)?.iter().map(|m| (m.id, bm25(m, &corpus))).collect();
        if scores.is_empty() {
            continue;
        }
        args[0] = list(&mut scores.keys().copied());
        for row in stmt.query_map(params_from_iter(args.iter()), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))? {
            let (id, text, conversation, modified, chat_id): (i64, i64, i64, f64, String) = row?;
            let entry = seen.entry(conversation).or_insert_with(|| Seen { count: 0, best: Vec::new(), modified, chat_id });
            entry.count += 1;
            entry.best.push((scores[&text], id));
            if entry.best.len() > per {
                entry.best.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                entry.best.truncate(per);
            }
        }
    }
    for s in seen.values_mut() {
        s.best.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    }
    let totals = Totals { messages: seen.values().map(|s| s.count).sum(), conversations: seen.len(), exact: true };
    let mut order: Vec<i64> = seen.keys().copied().collect();
    match q.sort {
        Sort::Relevance => order.sort_by(|a, b| {
            let (x, y) = (seen[a].best[0], seen[b].best[0]);
            x.0.total_cmp(&y.0).then(x.1.cmp(&y.1))
        }),
        Sort::Newest => order.sort_by(|a, b| {
            let (x, y) = (&seen[a], &seen[b]);
            y.modified.total_cmp(&x.modified).then_with(|| x.chat_id.cmp(&y.chat_id)).then(a.cmp(b))
        }),
    }
    order.truncate(q.wanted());
    order.drain(..q.offset.min(order.len()));
    let chosen: Vec<(i64, i64, f64)> = order.iter().flat_map(|&c| seen[&c].best.iter().map(move |&(score, id)| (id, c, score))).collect();
    let mut out = place(conn, q, &chosen, 0, usize::MAX)?;
    for c in &mut out {
        c.total = seen[&c.conversation_id].count;
    }
    Ok((out, Some(totals), RankedBy::ServerWordIndex))
}

/// Asks, of one message at a time, whether it passes `q`'s filters and stands in a branch or
/// view (the `--branch` one, if given), as [`place`] places a match, and if so gives its
/// conversation's row id. The cheap question a search asks of matches it only counts or skips.
struct Stands<'c> {
    stmt: super::sql::Statement<'c>,
    args: Vec<Value>,
}

impl<'c> Stands<'c> {
    fn new(conn: &'c Connection, q: &Resolved) -> Result<Stands<'c>, StoreError> {
        let (filters, args) = filter_sql(q, 2, true);
        let sql = format!("SELECT c.id FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.id = ?1 AND {}", filters.join(" AND "));
        Ok(Stands { stmt: conn.prepare_cached(&sql)?, args: std::iter::once(Value::Null).chain(args).collect() })
    }

    /// The conversation of message `id` when it passes and stands somewhere.
    fn conversation(&mut self, id: i64) -> Result<Option<i64>, StoreError> {
        self.args[0] = Value::Integer(id);
        Ok(self.stmt.query_row(params_from_iter(self.args.iter()), |r| r.get(0)).optional()?)
    }
}

/// The ranked candidates (message id, its conversation's row id, score) that pass the filters,
/// with where each stands, grouped by conversation in rank order: the `limit` conversations
/// after the first `skip`. Of the skipped ones only whether a candidate passes and stands
/// somewhere is asked, and once `limit` are found a candidate of another conversation is
/// passed over unread, so that a deep page costs little more than its own conversations and a
/// text thousands of conversations share costs nothing past the page.
fn place(conn: &Connection, q: &Resolved, candidates: &[(i64, i64, f64)], skip: usize, limit: usize) -> Result<Vec<ConversationHits>, StoreError> {
    let mut skipped: std::collections::HashSet<i64> = std::collections::HashSet::new();
    let mut stands = Stands::new(conn, q)?;
    let (mut filters, mut args) = filter_sql(q, 2, false);
    filters.insert(0, "m.id = ?1".to_owned());
    args.insert(0, Value::Null);
    let mut arg = |value: Value| {
        args.push(value);
        args.len()
    };
    // Where the message stands: its first line in main, else in any branch or view; with
    // --branch, in that branch only. Messages held only by an event log are not shown.
    // (`filter_sql` with `placed` asks the same as a cheaper EXISTS, once per match.)
    let placement = match &q.branch {
        Some(b) => format!(
            "(SELECT d.path || ':' || dl.line_no FROM {HOLDERS} AND d.kind = 'branch' AND d.path = ?{} ORDER BY dl.line_no LIMIT 1)",
            arg(Value::Text(crate::layout::branch_path(b)))
        ),
        None => {
            format!("(SELECT d.path || ':' || dl.line_no FROM {HOLDERS} ORDER BY d.path != '{}', d.path, dl.line_no LIMIT 1)", crate::layout::MAIN_TRANSCRIPT)
        }
    };
    let sql = format!(
        "SELECT c.chat_id, coalesce(c.name, c.chat_id), c.modified, m.role, t.data, {placement}, c.id,
                (SELECT {} FROM sources s WHERE s.id = c.source_id), m.text_id
         FROM messages m JOIN conversations c ON c.id = m.conversation_id LEFT JOIN texts t ON t.id = m.text_id WHERE {}",
        super::sources::label_sql(conn.engine()),
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut out: Vec<ConversationHits> = Vec::new();
    // Where each conversation is in `out`.
    let mut at: HashMap<i64, usize> = HashMap::new();
    for &(id, conversation, rank) in candidates {
        if skipped.len() < skip {
            skipped.extend(stands.conversation(id)?);
            continue;
        }
        if out.len() >= limit && !at.contains_key(&conversation) {
            // Only more matches of the conversations found count now.
            continue;
        }
        args[0] = Value::Integer(id);
        let mut rows = stmt.query(params_from_iter(args.iter()))?;
        let Some(r) = rows.next()? else { continue };
        let Some(place): Option<String> = r.get(5)? else { continue };
        let conversation_id: i64 = r.get(6)?;
        if skipped.contains(&conversation_id) {
            continue;
        }
        let chat_id: String = r.get(0)?;
        // `path:line`; the line has no colon, the path may.
        let (document, line) = place.rsplit_once(':').unwrap_or((&place, "0"));
        let hit = Hit {
            message_id: id,
            role: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            content: r.get::<_, Option<i64>>(8)?.zip(r.get::<_, Option<Vec<u8>>>(4)?).map(|(t, d)| conn.decode_text(t, &d)).transpose()?.unwrap_or_default(),
            document: document.to_owned(),
            line: line.parse().unwrap_or(0),
            rank,
        };
        match at.get(&conversation_id) {
            Some(&i) => {
                let c = &mut out[i];
                c.total += 1;
                if c.hits.len() < q.matches.max(1) {
                    c.hits.push(hit);
                }
            }
            None => {
                at.insert(conversation_id, out.len());
                out.push(ConversationHits { chat_id, source: r.get(7)?, conversation_id, name: r.get(1)?, modified: r.get(2)?, total: 1, hits: vec![hit] });
            }
        }
    }
    Ok(out)
}

/// Where `highlight` matches `content`: byte ranges of `content` on its character boundaries,
/// in order, not overlapping (touching ranges joined).
///
/// A literal needle is found in the lowercased text ([`super::fts::lower`]), whose every byte
/// remembers the character of `content` it came from: lowercasing changes lengths (`İ` becomes
/// three bytes, the Kelvin sign one), so offsets in the lowered text are never used on the
/// original; a match is widened to the whole characters it touches. A word query marks whole
/// words ([`word_spans`]) where one of its phrases stands.
pub fn match_spans(content: &str, highlight: &Highlight) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut add = |s: usize, e: usize| match spans.last_mut() {
        Some(last) if s <= last.1 => last.1 = last.1.max(e),
        _ => spans.push((s, e)),
    };
    match highlight {
        Highlight::Literal(needle) if needle.is_empty() => {}
        Highlight::Literal(needle) if content.is_ascii() => {
            // Lowering ASCII keeps every byte where it was.
            for (at, m) in super::fts::lower(content).match_indices(needle.as_str()) {
                add(at, at + m.len());
            }
        }
        Highlight::Literal(needle) => {
            for (s, e) in literal_spans(content, needle) {
                add(s, e);
            }
        }
        Highlight::Words(phrases) => {
            let words = word_spans(content);
            let mut marked = vec![false; words.len()];
            for phrase in phrases.iter().filter(|p| !p.words.is_empty()) {
                let n = phrase.words.len();
                for start in 0..words.len().saturating_sub(n - 1) {
                    let fits = phrase.words.iter().enumerate().all(|(k, w)| {
                        let (s, e) = words[start + k];
                        folds_to(&content[s..e], w, phrase.prefix && k == n - 1)
                    });
                    if fits {
                        marked[start..start + n].iter_mut().for_each(|m| *m = true);
                    }
                }
            }
            for (&(s, e), _) in words.iter().zip(&marked).filter(|(_, m)| **m) {
                add(s, e);
            }
        }
    }
    spans
}

/// Where lowered `needle` stands in `content` lowered, as ranges of `content` widened to whole
/// characters: any text, each match's bytes in the lowered text traced back to the characters
/// they came from ([`Origins`]). For [`match_spans`]'s literal highlights; ASCII text takes a
/// shorter way there.
fn literal_spans(content: &str, needle: &str) -> Vec<(usize, usize)> {
    let lowered = super::fts::lower(content);
    let mut origins = Origins { content, at: 0, lowered_at: 0 };
    let char_end = |at: usize| at + content[at..].chars().next().map_or(0, char::len_utf8);
    let matches: Vec<(usize, usize)> = lowered.match_indices(needle).map(|(at, m)| (at, at + m.len() - 1)).collect();
    matches.into_iter().map(|(first, last)| (origins.of(first), char_end(origins.of(last)))).collect()
}

/// Which character of `content` each byte of its lowered form ([`super::fts::lower`]) came
/// from, asked in order. Each character lowers alone as in the whole text but for a final
/// sigma (ς, as long as σ), so the lengths add up the same; a run of ASCII lowers byte for byte
/// and is crossed at once.
struct Origins<'a> {
    content: &'a str,
    /// A character boundary of `content`, and where the lowered text is there.
    at: usize,
    lowered_at: usize,
}

impl Origins<'_> {
    /// The start of the character of `content` that byte `lowered` of the lowered text came
    /// from; `lowered` never less than asked before. Past the end, the end.
    fn of(&mut self, lowered: usize) -> usize {
        loop {
            // Only as far as `lowered`: a long run of ASCII is not scanned again for each match.
            let rest = &self.content.as_bytes()[self.at..];
            let wanted = rest.len().min(lowered.saturating_sub(self.lowered_at) + 1);
            let ascii = rest[..wanted].iter().position(|b| !b.is_ascii()).unwrap_or(wanted);
            if lowered < self.lowered_at + ascii {
                self.at += lowered - self.lowered_at;
                self.lowered_at = lowered;
                return self.at;
            }
            self.at += ascii;
            self.lowered_at += ascii;
            let Some(c) = self.content[self.at..].chars().next() else { return self.at };
            let len: usize = c.to_lowercase().map(char::len_utf8).sum();
            if lowered < self.lowered_at + len {
                return self.at;
            }
            self.at += c.len_utf8();
            self.lowered_at += len;
        }
    }
}

/// One line of `content` around the first thing `highlight` matches ([`match_spans`]): every
/// run of whitespace a single space, at most `around` characters either side of the match, `…`
/// where the text goes on. For a result's one-line label; `None` when nothing matches.
pub fn excerpt(content: &str, highlight: &Highlight, around: usize) -> Option<String> {
    let &(start, end) = match_spans(content, highlight).first()?;
    let squash = |text: &str| {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if !c.is_whitespace() {
                out.push(c);
            } else if !out.ends_with(' ') {
                out.push(' ');
            }
        }
        out
    };
    let (before, matched, after) = (squash(&content[..start]), squash(&content[start..end]), squash(&content[end..]));
    let before = before.trim_start();
    let after = after.trim_end();
    let kept_before: String = before.chars().skip(before.chars().count().saturating_sub(around)).collect();
    let kept_after: String = after.chars().take(around).collect();
    let open = if kept_before.len() < before.len() { "…" } else { "" };
    let close = if kept_after.len() < after.len() { "…" } else { "" };
    Some(format!("{open}{kept_before}{matched}{kept_after}{close}"))
}

/// How a snippet shows text: `text` for the stored text around matches, `matched` for a match.
pub struct Marks<'a> {
    pub text: &'a dyn Fn(&str) -> String,
    pub matched: &'a dyn Fn(&str) -> String,
    /// Each line after its number in the message (`   3| `), as a listing for people shows
    /// it; without, the lines are the text's own (what JSON carries).
    pub numbered: bool,
}

/// A snippet of `content` around what `highlight` matches ([`match_spans`]), gptme-style: the
/// first `max_matches` matching lines with `context` lines around them (numbered, with
/// [`Marks::numbered`]; `...` where lines are left out), every match
/// in them passed to `marks.matched` and the rest of the text to `marks.text` (a match across
/// lines is marked on each). Without a match, the first 100 characters.
pub fn snippet(content: &str, highlight: &Highlight, context: usize, max_matches: usize, marks: &Marks) -> String {
    snippet_at(content, &match_spans(content, highlight), context, max_matches, marks)
}

/// [`snippet`] with the matches of `content` found already (`spans`, as [`match_spans`] gives
/// them): for a caller that shows one text several times, or in several forms.
pub fn snippet_at(content: &str, spans: &[(usize, usize)], context: usize, max_matches: usize, marks: &Marks) -> String {
    // Each line with its byte offset in `content`.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for line in content.split('\n') {
        lines.push((at, line));
        at += line.len() + 1;
    }
    let wanted = max_matches.max(1);
    // The matching lines, with their spans clipped to the line (in line offsets). A line
    // matches when a span starts on it or covers some of it.
    let mut matched: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
    let mut next = 0;
    for (i, &(start, line)) in lines.iter().enumerate() {
        if matched.len() == wanted {
            break;
        }
        let end = start + line.len();
        while next < spans.len() && spans[next].1 <= start && spans[next].0 < start {
            next += 1;
        }
        let on_line: Vec<(usize, usize)> = spans[next..]
            .iter()
            .take_while(|&&(s, _)| s <= end)
            .filter(|&&(s, e)| s >= start || e > start)
            .map(|&(s, e)| (s.max(start) - start, e.min(end) - start))
            .collect();
        if !on_line.is_empty() {
            matched.push((i, on_line));
        }
    }
    if matched.is_empty() {
        let first: String = content.chars().take(100).collect();
        let more = if content.chars().nth(100).is_some() { "..." } else { "" };
        return format!("{}{more}", (marks.text)(&first));
    }
    let mut windows: Vec<(usize, usize)> = Vec::new();
    for &(i, _) in &matched {
        let (cs, ce) = (i.saturating_sub(context), i.saturating_add(context).saturating_add(1).min(lines.len()));
        match windows.last_mut() {
            Some(last) if cs <= last.1 => last.1 = last.1.max(ce),
            _ => windows.push((cs, ce)),
        }
    }
    let mut blocks = Vec::new();
    for (cs, ce) in windows {
        let mut block = Vec::new();
        if cs > 0 {
            block.push("...".to_owned());
        }
        for (i, &(_, line)) in lines.iter().enumerate().take(ce).skip(cs) {
            let spans = matched.iter().find(|(li, _)| *li == i).map_or(&[][..], |(_, spans)| spans.as_slice());
            let mut marked = String::new();
            let mut prev = 0;
            for &(s, e) in spans.iter().filter(|(s, e)| e > s) {
                marked.push_str(&(marks.text)(&line[prev..s]));
                marked.push_str(&(marks.matched)(&line[s..e]));
                prev = e;
            }
            marked.push_str(&(marks.text)(&line[prev..]));
            block.push(if marks.numbered { format!("{:4}| {marked}", i + 1) } else { marked });
        }
        if ce < lines.len() {
            block.push("...".to_owned());
        }
        blocks.push(block.join("\n"));
    }
    blocks.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words(q: &str) -> Highlight {
        Highlight::words(q)
    }

    #[test]
    fn query_forms() {
        assert_eq!(cjk_phrases("use 数据库 now"), "use  \"数 据 库\"  now");
        assert_eq!(cjk_phrases("\"数据\""), "\" 数 据 \"");
        let phrase = |w: &[&str], prefix| Phrase { words: w.iter().map(|s| s.to_string()).collect(), prefix };
        assert_eq!(words("\"Hello World\" OR foo* NOT bar"), Highlight::Words(vec![phrase(&["hello", "world"], false), phrase(&["foo"], true)]));
        assert_eq!(words("数据 Café"), Highlight::Words(vec![phrase(&["数", "据"], false), phrase(&["cafe"], false)]));
        for q in [
            "borrow",
            "\"borrow checker\"",
            "decorat*",
            "a OR (b AND c)",
            "\"ab cd\"*",
            "数据库",
            "Straße ÄÖ",
            "\"a.b\"",
            "(\"a\" OR \"b\")",
            "\"ack 2026-07-01-x 0\"",
        ] {
            assert!(is_word_query(q), "{q}");
        }
        for q in ["(x", "is_locally()", "C:\\Users", "😀", "\"", "foo-bar", "e.g.", "don't", "*x", "a)", "x * y", "\"😀\"", "\"()\" x", "\"a\" - \"b\""] {
            assert!(!is_word_query(q), "{q}");
        }
        assert_eq!(needle_trigrams("abcab"), ["abc", "bca", "cab"]);
        assert_eq!(needle_trigrams("a\"b"), ["a\"b"]);
        assert!(needle_trigrams("ab").is_empty());
        assert_eq!(needle_trigrams("a\0bcd"), ["bcd"]);
        assert!(needle_trigrams("a\0b").is_empty());
        let long: String = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
        assert!(needle_trigrams(&long).len() <= MAX_TRIGRAMS);
    }

    const STARS: Marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| format!("**{s}**"), numbered: true };

    #[test]
    fn excerpts_show_the_first_match_on_one_line() {
        let text = "The capital of Sweden\n\n  is Stockholm, a city on islands.";
        assert_eq!(excerpt(text, &Highlight::literal("STOCK"), 10).as_deref(), Some("…Sweden is Stockholm, a ci…"));
        assert_eq!(excerpt(text, &Highlight::literal("the"), 100).as_deref(), Some("The capital of Sweden is Stockholm, a city on islands."));
        assert_eq!(excerpt(text, &Highlight::literal("oslo"), 10), None);
    }

    #[test]
    fn snippets_mark_matches_with_context() {
        let content = "line one\nthe Needle here\nline three\nline four\nneedle again";
        let s = snippet(content, &words("needle"), 1, 1, &STARS);
        assert_eq!(s, "   1| line one\n   2| the **Needle** here\n   3| line three\n...");
        let s = snippet(content, &words("needle"), 0, 5, &STARS);
        assert_eq!(s, "...\n   2| the **Needle** here\n...\n...\n   5| **needle** again");
        let s = snippet("Code fence: here", &words("fence code"), 0, 1, &STARS);
        assert_eq!(s, "   1| **Code** **fence**: here");
        let s = snippet("a\nb(x\nc", &Highlight::literal("B(X\nC"), 0, 5, &STARS);
        assert_eq!(s, "...\n   2| **b(x**\n   3| **c**", "a match across lines is marked on each");
    }

    /// Issue 15, item 2: a word query marks whole words, where its phrases stand; a literal
    /// query marks exactly the substring.
    #[test]
    fn marks_whole_words_or_exactly_the_substring() {
        let text = "Thanks! Now write a summary, a short one";
        assert_eq!(snippet(text, &words("\"write a summary\""), 0, 1, &STARS), "   1| Thanks! Now **write** **a** **summary**, a short one");
        assert_eq!(snippet(text, &words("summ*"), 0, 1, &STARS), "   1| Thanks! Now write a **summary**, a short one");
        assert_eq!(snippet("about X. (x)", &Highlight::literal("(x"), 0, 1, &STARS), "   1| about X. **(x**)");
        assert_eq!(snippet("cd C:\\Users\\me", &Highlight::literal("C:\\users"), 0, 1, &STARS), "   1| cd **C:\\Users**\\me");
        assert_eq!(snippet("ok 😀🎉 go", &Highlight::literal("😀"), 0, 1, &STARS), "   1| ok **😀**🎉 go");
        assert_eq!(snippet("SQLite数据库ok", &words("数据库"), 0, 1, &STARS), "   1| SQLite**数据库**ok");
        assert_eq!(snippet("un café crème", &words("cafe"), 0, 1, &STARS), "   1| un **café** crème");
    }

    #[test]
    fn folding_that_changes_lengths_marks_whole_characters() {
        // `İ` lowers to three bytes and the Kelvin sign (U+212A) to one: every offset after them
        // moves (this panicked, exit 101).
        let lit = Highlight::literal;
        assert_eq!(snippet("İİ\u{212A} k", &lit("k"), 0, 1, &STARS), "   1| İİ**\u{212A}** **k**");
        assert_eq!(snippet("İİ\u{212A} k", &words("k"), 0, 1, &STARS), "   1| İİ\u{212A} **k**", "a word, not a letter of one");
        assert_eq!(snippet("İstanbul", &lit("i"), 0, 1, &STARS), "   1| **İ**stanbul");
        assert_eq!(snippet("STRASSE straße", &lit("straße"), 0, 1, &STARS), "   1| STRASSE **straße**");
        assert_eq!(snippet("ΟΔΟΣ σ", &lit("ς"), 0, 1, &STARS), "   1| ΟΔΟ**Σ** σ", "Python lowers a final sigma to ς");
        assert_eq!(snippet("ΟΔΟΣ σ", &lit("σ"), 0, 1, &STARS), "   1| ΟΔΟΣ **σ**");
        assert_eq!(snippet("xx", &lit(""), 0, 1, &STARS), "xx", "an empty needle matches nothing");
        let text = Marks { text: &|s: &str| format!("<{s}>"), matched: &|s: &str| format!("[{s}]"), numbered: true };
        assert_eq!(snippet("a \u{212A} b", &lit("k"), 0, 1, &text), "   1| <a >[\u{212A}]< b>");
    }

    #[test]
    fn caseless_characters_come_only_from_themselves() {
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            for lower in c.to_lowercase() {
                assert!(!is_caseless(lower) || lower == c, "{c:?} lowers to {lower:?}, taken as caseless");
            }
        }
        assert!("😀\"()\\€ ".chars().all(is_caseless));
        assert!(!"xX\u{307}İ数".chars().any(is_caseless));
    }

    /// A literal search of many candidates, or of every message, reads conversations in the
    /// listing's order from its index, with any filter: only each conversation's messages are
    /// sorted, never the whole answer (a search of one source, as `serve` asks, sorted every
    /// message of the source first).
    #[test]
    fn a_literal_scan_sorts_only_within_a_conversation() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        super::super::fts::register_functions(&conn).unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        let query = |since: Option<f64>, branch: Option<&str>| SearchQuery { since, branch: branch.map(str::to_owned), limit: 10, ..SearchQuery::default() };
        for (source, since, branch) in [(None, None, None), (Some(1), None, None), (Some(1), Some(1.0e9), None), (None, None, Some("main"))] {
            for trigrams in ["\"abc\"", ""] {
                let q = query(since, branch);
                let (sql, args) = literal_scan_sql(Engine::Sqlite, &Resolved { q: &q, chat: None, source, ranking: None }, None, trigrams);
                let plan = super::super::sql::sqlite_plan(&conn, &sql, &args);
                assert!(plan.iter().any(|s| s.contains("conversations_by_modified")), "{source:?} {trigrams:?}: {plan:#?}");
                assert!(!plan.iter().any(|s| s.contains("TEMP B-TREE FOR ORDER BY")), "{source:?} {trigrams:?}: {plan:#?}");
            }
        }
    }

    #[test]
    fn query_bounds() {
        // Operators are not words; inside a phrase they are.
        assert_eq!(word_count("foo-bar x* 数据 (a OR b)"), 7);
        assert_eq!(word_count("a AND b NOT c NEAR(d e) \"x OR y\""), 8);
        let words: Vec<String> = (0..MAX_QUERY_WORDS).map(|i| format!("w{i}")).collect();
        assert_eq!(word_count(&words.join(" OR ")), MAX_QUERY_WORDS);
        assert_eq!(syntax_size("((a*) (b)) \"(((**\" c*"), (2, 2));
        assert_eq!(syntax_size(&format!("{}x{}", "(".repeat(3000), ")".repeat(3000))), (3000, 0));
    }

    /// Characters whose case folding changes their length or count, mixed with plain ones.
    fn tricky_text() -> impl Strategy<Value = String> {
        let chars = prop::sample::select(vec!['İ', '\u{212A}', 'K', 'ß', 'Σ', 'ς', 'ﬁ', 'ŉ', 'Ⱥ', 'ȿ', 'i', 'k', 's', 'a', ' ', '\n', '\u{307}', 'ǅ', 'ΐ', '数']);
        prop::collection::vec(chars, 0..40).prop_map(|v| v.into_iter().collect())
    }

    fn any_text() -> impl Strategy<Value = String> {
        prop_oneof![tricky_text(), any::<String>()]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn ascii_text_is_highlighted_as_any_text(content in "[ -~\n]{0,80}", needle in "[a-z0-9 .(_]{1,4}") {
            // The way for ASCII and the way for any text find the same ranges.
            let mut general: Vec<(usize, usize)> = Vec::new();
            for (s, e) in literal_spans(&content, &needle) {
                match general.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => general.push((s, e)),
                }
            }
            prop_assert_eq!(match_spans(&content, &Highlight::Literal(needle.clone())), general);
            prop_assert_eq!(crate::store::fts::lower(&content), content.to_lowercase());
        }

        #[test]
        fn any_text_lowers_as_the_standard_library_lowers_it(content in any_text()) {
            prop_assert_eq!(crate::store::fts::lower(&content), content.to_lowercase());
        }

        /// Any text and any query: no panic; the marks only wrap text (removing them gives the
        /// numbered lines back). A literal query's marks cover every occurrence of it and
        /// nothing else (their text lowered holds it, or continues it across a line); a word
        /// query's marks are whole words.
        #[test]
        fn snippets_never_panic_and_keep_the_text(content in any_text(), query in any_text(), literal in any::<bool>(), context in 0usize..3, max in 0usize..4) {
            let highlight = if literal { Highlight::literal(&query) } else { Highlight::words(&query) };
            let pieces = std::cell::RefCell::new(Vec::new());
            let marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| { pieces.borrow_mut().push(s.to_owned()); s.to_owned() }, numbered: true };
            let out = snippet(&content, &highlight, context, max, &marks);
            let lines: Vec<&str> = content.split('\n').collect();
            if match_spans(&content, &highlight).is_empty() {
                prop_assert!(pieces.borrow().is_empty());
                prop_assert!(content.starts_with(out.trim_end_matches("...")), "without a match, the start: {:?}", out);
            } else {
                for shown in out.split('\n').filter(|l| *l != "...") {
                    let (number, line) = shown.split_once("| ").expect("a numbered line");
                    prop_assert_eq!(line, lines[number.trim().parse::<usize>().expect("a line number") - 1]);
                }
            }
            for (s, e) in match_spans(&content, &highlight) {
                prop_assert!(content.is_char_boundary(s) && content.is_char_boundary(e) && s < e);
                match &highlight {
                    Highlight::Literal(needle) => {
                        // Alone, a final sigma lowers to σ.
                        let sigma = |t: &str| t.replace('ς', "σ");
                        prop_assert!(sigma(&crate::store::fts::lower(&content[s..e])).contains(&sigma(needle)), "{:?} does not hold {:?}", &content[s..e], needle);
                    }
                    Highlight::Words(_) => {
                        let before = content[..s].chars().next_back();
                        let after = content[e..].chars().next();
                        let first = content[s..].chars().next().unwrap();
                        let last = content[..e].chars().next_back().unwrap();
                        prop_assert!(is_cjk(first) || !before.is_some_and(|c| is_word_char(c) && !is_cjk(c)), "{:?} starts inside a word", &content[s..e]);
                        prop_assert!(is_cjk(last) || !after.is_some_and(|c| is_word_char(c) && !is_cjk(c)), "{:?} ends inside a word", &content[s..e]);
                    }
                }
            }
        }
    }
}
