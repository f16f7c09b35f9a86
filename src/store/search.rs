//! Full-text search across every conversation, from the FTS5 index (never a scan of messages).
//!
//! A query is first tried as FTS5 syntax (phrases, `foo*` prefixes, AND/OR/NOT, NEAR), with
//! every CJK run made a phrase of its characters (see [`super::fts::fts_text`]). When FTS5
//! rejects it as syntax — a plain query with `-`, `"`, `:`, `(` and the like — it is searched
//! literally instead: each word a quoted phrase, all of them required. Results are ranked by
//! bm25 and grouped by conversation; snippets are cut from the stored text with the matched
//! words marked.
//!
//! Invariants: no query and no stored text makes a search panic; a query reaches FTS5 only
//! within [`MAX_QUERY_BYTES`], [`MAX_QUERY_WORDS`], [`MAX_PREFIXES`] and, as syntax,
//! [`MAX_NESTING`] (deeper parentheses are searched literally), so every search is bounded; snippets are cut only at
//! character boundaries of the stored text, whatever case folding does to lengths.

use rusqlite::{params_from_iter, types::Value};

use super::fts::is_cjk;
use super::{Connection, StoreError};

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
    /// Only messages on this branch (its name; `main` is conversation.jsonl).
    pub branch: Option<String>,
    /// At most this many conversations.
    pub limit: usize,
    /// At most this many matches per conversation.
    pub matches: usize,
    pub include_test: bool,
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
    pub name: String,
    pub modified: f64,
    /// Matching messages: every one when the search was filtered or had to rank past its
    /// first window, else those among the best-ranked window (a lower bound for very common
    /// words).
    pub total: usize,
    pub hits: Vec<Hit>,
}

/// The search, and whether the query had to be taken literally.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub literal: bool,
    pub fts_query: String,
    pub conversations: Vec<ConversationHits>,
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

/// The literal form: every whitespace-separated word as a quoted phrase, all required.
fn literal_query(text: &str) -> String {
    text.split_whitespace()
        .map(|word| {
            let spaced: String = word.chars().flat_map(|c| if is_cjk(c) { vec![' ', c, ' '] } else { vec![c] }).collect();
            format!("\"{}\"", spaced.replace('"', "\"\""))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words to mark in snippets: the query's words without FTS5 syntax, case-folded.
pub fn highlight_terms(text: &str) -> Vec<String> {
    let cleaned: String = text.chars().map(|c| if "\"*()^:+".contains(c) { ' ' } else { c }).collect();
    let mut terms: Vec<String> = cleaned
        .split_whitespace()
        .filter(|w| !matches!(*w, "AND" | "OR" | "NOT" | "NEAR"))
        .map(|w| fold_case(w.trim_matches('-')))
        .filter(|w| !w.is_empty())
        .collect();
    terms.sort_by_key(|t| std::cmp::Reverse(t.len()));
    terms.dedup();
    terms
}

fn is_syntax_error(e: &rusqlite::Error) -> bool {
    let text = e.to_string();
    text.contains("fts5: syntax error") || text.contains("unterminated string") || text.contains("no such column") || text.contains("unknown special query")
}

/// The longest query searched, in bytes.
pub const MAX_QUERY_BYTES: usize = 16_384;
/// The most words a query may have (runs of letters and digits, each CJK character one word,
/// as the index splits text): each is a lookup in the index.
pub const MAX_QUERY_WORDS: usize = 64;
/// The most prefixes (`*`) a query may have: each may expand to every word of the index it
/// begins; 64 `x*` took 1.7 s on 2,000 messages, 20,000 of them seconds more.
pub const MAX_PREFIXES: usize = 8;
/// The deepest nesting of parentheses read as FTS5 syntax; FTS5's parser overflows its stack
/// somewhere between 60 and 100 levels and reports that as an error, not as syntax. A deeper
/// query is searched literally, as other queries FTS5 cannot read are.
pub const MAX_NESTING: usize = 16;

/// The number of words in a query, as the index splits text into words.
fn word_count(text: &str) -> usize {
    let mut count = 0;
    let mut in_word = false;
    for c in text.chars() {
        if is_cjk(c) {
            count += 1;
            in_word = false;
        } else if c.is_alphanumeric() {
            count += usize::from(!in_word);
            in_word = true;
        } else {
            in_word = false;
        }
    }
    count
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

/// Runs a search. An empty query is an error, as in gptme, and so is one longer than
/// [`MAX_QUERY_BYTES`], with more than [`MAX_QUERY_WORDS`] words or [`MAX_PREFIXES`] prefixes.
pub fn search(conn: &Connection, q: &SearchQuery) -> Result<SearchResult, StoreError> {
    if q.text.trim().is_empty() {
        return Err(StoreError::Query("the search query is empty".into()));
    }
    if q.text.len() > MAX_QUERY_BYTES {
        return Err(StoreError::QueryTooLarge { what: "bytes", found: q.text.len(), limit: MAX_QUERY_BYTES });
    }
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
        match run(conn, q, &fts) {
            Ok(conversations) => return Ok(SearchResult { literal: false, fts_query: fts, conversations }),
            Err(StoreError::Sqlite(e)) if is_syntax_error(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let literal = literal_query(&q.text);
    let conversations = run(conn, q, &literal)?;
    Ok(SearchResult { literal: true, fts_query: literal, conversations })
}

/// Two ways to the same answer. Without a narrowing filter (role, model, since, chat,
/// branch) nearly every match qualifies, so the best `window` matches of the whole index are
/// ranked (FTS5 keeps only those, however many match) and only they are looked up. When they
/// yield too few conversations, or a filter would have most of them rejected, the filters go
/// into the ranking query instead and one pass ranks exactly the qualifying matches: growing
/// a window and ranking again took seconds for a common word in one conversation.
fn run(conn: &Connection, q: &SearchQuery, fts: &str) -> Result<Vec<ConversationHits>, StoreError> {
    let wanted = q.limit.max(1);
    let narrowed = q.role.is_some() || q.model.is_some() || q.since.is_some() || q.chat_id.is_some() || q.branch.is_some();
    if !narrowed {
        let window = (wanted * q.matches.max(1) * 8).max(64);
        // bm25() spelled out rather than FTS5's `rank` column (the same default bm25): with
        // `ORDER BY rank` FTS5 evaluates the ranking twice per match, which doubled the time of
        // a word found in half of all messages.
        let mut ranked = conn.prepare_cached("SELECT rowid, bm25(messages_fts) AS score FROM messages_fts WHERE messages_fts MATCH ?1 ORDER BY score LIMIT ?2")?;
        let candidates: Vec<(i64, f64)> = ranked.query_map(rusqlite::params![fts, window as i64], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        let exhausted = candidates.len() < window;
        let out = place(conn, q, &candidates)?;
        if out.len() >= wanted || exhausted {
            return Ok(out.into_iter().take(wanted).collect());
        }
    }
    run_filtered(conn, q, fts)
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
fn filter_sql(q: &SearchQuery, first: usize, placed: bool) -> (Vec<String>, Vec<Value>) {
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
    if let Some(since) = q.since {
        filters.push(format!("c.modified >= ?{}", arg(Value::Real(since))));
    }
    if let Some(chat) = &q.chat_id {
        filters.push(format!("c.chat_id = ?{}", arg(Value::Text(chat.clone()))));
    }
    if q.chat_id.is_none() {
        filters.push("c.deleted_at IS NULL".into());
    }
    if !q.include_test && q.chat_id.is_none() {
        filters.push(format!("NOT {}", crate::layout::test_ids_sql("c.chat_id")));
    }
    if placed {
        filters.push(match &q.branch {
            Some(b) => format!("EXISTS (SELECT 1 FROM {HOLDERS} AND d.kind = 'branch' AND d.path = ?{})", arg(Value::Text(crate::layout::branch_path(b)))),
            None => "EXISTS (SELECT 1 FROM document_lines dl WHERE dl.message_id = m.id)".to_owned(),
        });
    }
    (filters, args)
}

/// Ranks exactly the matches that pass the filters, in one pass, and keeps the best
/// conversations with exact match counts. With `--chat`, the index is read over that
/// conversation's message ids only.
fn run_filtered(conn: &Connection, q: &SearchQuery, fts: &str) -> Result<Vec<ConversationHits>, StoreError> {
    let (mut filters, mut args) = filter_sql(q, 2, true);
    args.insert(0, Value::Text(fts.to_owned()));
    if let Some(chat) = &q.chat_id {
        // One rowid range rather than `rowid IN (...)`: FTS5 restarts its cursor, and bm25 its
        // document-frequency count, for each value of an IN list.
        let range: (Option<i64>, Option<i64>) =
            conn.query_row("SELECT min(m.id), max(m.id) FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE c.chat_id = ?1", [chat], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let (Some(lo), Some(hi)) = range else { return Ok(Vec::new()) };
        filters.push(format!("messages_fts.rowid BETWEEN {lo} AND {hi}"));
    }
    let sql = format!(
        "SELECT messages_fts.rowid, bm25(messages_fts) AS score, c.chat_id
         FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid JOIN conversations c ON c.id = m.conversation_id
         WHERE messages_fts MATCH ?1 AND {}
         ORDER BY score, messages_fts.rowid",
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params_from_iter(args.iter()))?;
    // Conversations in the order of their best match, with every match counted and the best
    // `matches` kept; the rows stream by, none is held beyond that.
    let per = q.matches.max(1);
    let mut order: Vec<String> = Vec::new();
    let mut seen: std::collections::HashMap<String, (usize, Vec<(i64, f64)>)> = std::collections::HashMap::new();
    while let Some(r) = rows.next()? {
        let (id, score, chat_id): (i64, f64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let entry = seen.entry(chat_id).or_insert_with_key(|k| {
            order.push(k.clone());
            (0, Vec::new())
        });
        entry.0 += 1;
        if entry.1.len() < per {
            entry.1.push((id, score));
        }
    }
    order.truncate(q.limit.max(1));
    let chosen: Vec<(i64, f64)> = order.iter().flat_map(|c| seen[c].1.iter().copied()).collect();
    let mut out = place(conn, q, &chosen)?;
    for c in &mut out {
        c.total = seen[&c.chat_id].0;
    }
    Ok(out)
}

/// The ranked candidates that pass the filters, with where each stands, grouped by
/// conversation in rank order.
fn place(conn: &Connection, q: &SearchQuery, candidates: &[(i64, f64)]) -> Result<Vec<ConversationHits>, StoreError> {
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
            "(SELECT d.path || char(0) || dl.line_no FROM {HOLDERS} AND d.kind = 'branch' AND d.path = ?{} ORDER BY dl.line_no LIMIT 1)",
            arg(Value::Text(crate::layout::branch_path(b)))
        ),
        None => {
            format!("(SELECT d.path || char(0) || dl.line_no FROM {HOLDERS} ORDER BY d.path != '{}', d.path, dl.line_no LIMIT 1)", crate::layout::MAIN_TRANSCRIPT)
        }
    };
    let sql = format!(
        "SELECT c.chat_id, coalesce(c.name, c.chat_id), c.modified, m.role, m.content, {placement}
         FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE {}",
        filters.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut out: Vec<ConversationHits> = Vec::new();
    for &(id, rank) in candidates {
        args[0] = Value::Integer(id);
        let mut rows = stmt.query(params_from_iter(args.iter()))?;
        let Some(r) = rows.next()? else { continue };
        let Some(place): Option<String> = r.get(5)? else { continue };
        let chat_id: String = r.get(0)?;
        let (document, line) = place.split_once('\0').unwrap_or((&place, "0"));
        let hit = Hit {
            message_id: id,
            role: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            content: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
            document: document.to_owned(),
            line: line.parse().unwrap_or(0),
            rank,
        };
        match out.iter_mut().find(|c| c.chat_id == chat_id) {
            Some(c) => {
                c.total += 1;
                if c.hits.len() < q.matches.max(1) {
                    c.hits.push(hit);
                }
            }
            None => out.push(ConversationHits { chat_id, name: r.get(1)?, modified: r.get(2)?, total: 1, hits: vec![hit] }),
        }
    }
    Ok(out)
}

/// The one case folding of terms and text: each character's own lowercase, so that a
/// character folds the same wherever it stands.
fn fold_char(c: char) -> std::char::ToLowercase {
    c.to_lowercase()
}

/// `text` case-folded character by character ([`fold_char`]).
pub fn fold_case(text: &str) -> String {
    text.chars().flat_map(fold_char).collect()
}

/// The spans (byte ranges of `line`, on its character boundaries) where `terms` occur,
/// ignoring case, in order and not overlapping; an earlier term wins an overlap. Matching is
/// done on the folded line, whose every byte remembers the original character it came from:
/// folding changes lengths (`İ` becomes three bytes, the Kelvin sign one), so offsets in the
/// folded text are never used on the original.
fn line_matches(line: &str, terms: &[String]) -> Vec<(usize, usize)> {
    let mut folded = String::with_capacity(line.len());
    let mut origin: Vec<usize> = Vec::with_capacity(line.len());
    for (at, c) in line.char_indices() {
        for lower in fold_char(c) {
            folded.push(lower);
            origin.resize(folded.len(), at);
        }
    }
    let char_end = |at: usize| at + line[at..].chars().next().map_or(0, char::len_utf8);
    let mut spans: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    for term in terms.iter().map(|t| fold_case(t)).filter(|t| !t.is_empty()) {
        let mut from = 0;
        while let Some(at) = folded[from..].find(term.as_str()) {
            let (fs, fe) = (from + at, from + at + term.len());
            let (s, e) = (origin[fs], char_end(origin[fe - 1]));
            let overlaps = spans.range(..e).next_back().is_some_and(|(_, &end)| end > s);
            if !overlaps {
                spans.insert(s, e);
            }
            from = fe;
        }
    }
    spans.into_iter().collect()
}

/// How a snippet shows text: `text` for the stored text around matches, `matched` for a match.
pub struct Marks<'a> {
    pub text: &'a dyn Fn(&str) -> String,
    pub matched: &'a dyn Fn(&str) -> String,
}

/// A snippet of `content` around its matches of `terms` (ignoring case), gptme-style: the
/// first `max_matches` matching lines with `context` lines around them, numbered, every match
/// in them passed to `marks.matched` and the rest of the text to `marks.text`. Without a match,
/// the first 100 characters.
pub fn snippet(content: &str, terms: &[String], context: usize, max_matches: usize, marks: &Marks) -> String {
    let lines: Vec<&str> = content.split('\n').collect();
    let wanted = max_matches.max(1);
    let mut matched: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if matched.len() == wanted {
            break;
        }
        let spans = line_matches(line, terms);
        if !spans.is_empty() {
            matched.push((i, spans));
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
        for (i, line) in lines.iter().enumerate().take(ce).skip(cs) {
            let spans = matched.iter().find(|(li, _)| *li == i).map_or(&[][..], |(_, spans)| spans.as_slice());
            let mut marked = String::new();
            let mut prev = 0;
            for &(s, e) in spans {
                marked.push_str(&(marks.text)(&line[prev..s]));
                marked.push_str(&(marks.matched)(&line[s..e]));
                prev = e;
            }
            marked.push_str(&(marks.text)(&line[prev..]));
            block.push(format!("{:4}| {marked}", i + 1));
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

    #[test]
    fn query_forms() {
        assert_eq!(cjk_phrases("use 数据库 now"), "use  \"数 据 库\"  now");
        assert_eq!(cjk_phrases("\"数据\""), "\" 数 据 \"");
        assert_eq!(literal_query("foo-bar \"x\" 数据"), "\"foo-bar\" \"\"\"x\"\"\" \" 数  据 \"");
        assert_eq!(highlight_terms("\"Hello World\" OR foo*"), vec!["hello", "world", "foo"]);
    }

    const STARS: Marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| format!("**{s}**") };

    #[test]
    fn snippets_mark_matches_with_context() {
        let content = "line one\nthe Needle here\nline three\nline four\nneedle again";
        let s = snippet(content, &["needle".into()], 1, 1, &STARS);
        assert_eq!(s, "   1| line one\n   2| the **Needle** here\n   3| line three\n...");
        let s = snippet(content, &["needle".into()], 0, 5, &STARS);
        assert_eq!(s, "...\n   2| the **Needle** here\n...\n...\n   5| **needle** again");
        let s = snippet("Code fence: here", &["fence".into(), "code".into()], 0, 1, &STARS);
        assert_eq!(s, "   1| **Code** **fence**: here");
    }

    #[test]
    fn folding_that_changes_lengths_marks_whole_characters() {
        // `İ` folds to three bytes and the Kelvin sign (U+212A) to one: the line keeps its length
        // when folded, but every offset after them moves (this panicked, exit 101).
        assert_eq!(snippet("İİ\u{212A} k", &highlight_terms("k"), 0, 1, &STARS), "   1| İİ**\u{212A}** **k**");
        assert_eq!(snippet("İİK k", &highlight_terms("k"), 0, 1, &STARS), "   1| İİ**K** **k**");
        assert_eq!(snippet("İstanbul", &highlight_terms("i"), 0, 1, &STARS), "   1| **İ**stanbul");
        assert_eq!(snippet("STRASSE straße", &highlight_terms("straße"), 0, 1, &STARS), "   1| STRASSE **straße**");
        assert_eq!(snippet("xx", &["".into()], 0, 1, &STARS), "xx", "an empty term matches nothing");
        let text = Marks { text: &|s: &str| format!("<{s}>"), matched: &|s: &str| format!("[{s}]") };
        assert_eq!(snippet("a \u{212A} b", &["k".into()], 0, 1, &text), "   1| <a >[\u{212A}]< b>");
    }

    #[test]
    fn query_bounds() {
        assert_eq!(word_count("foo-bar x* 数据 (a OR b)"), 8);
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

        /// Any text and any terms: no panic; the marks only wrap text (removing them gives the
        /// numbered lines back), and each marked piece folds to a text holding a term.
        #[test]
        fn snippets_never_panic_and_keep_the_text(content in any_text(), query in any_text(), raw in prop::collection::vec(any_text(), 0..4), context in 0usize..3, max in 0usize..4) {
            let mut terms = highlight_terms(&query);
            terms.extend(raw);
            let pieces = std::cell::RefCell::new(Vec::new());
            let marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| { pieces.borrow_mut().push(s.to_owned()); s.to_owned() } };
            let out = snippet(&content, &terms, context, max, &marks);
            let lines: Vec<&str> = content.split('\n').collect();
            if pieces.borrow().is_empty() {
                prop_assert!(content.starts_with(out.trim_end_matches("...")), "without a match, the start: {:?}", out);
            } else {
                for shown in out.split('\n').filter(|l| *l != "...") {
                    let (number, line) = shown.split_once("| ").expect("a numbered line");
                    prop_assert_eq!(line, lines[number.trim().parse::<usize>().expect("a line number") - 1]);
                }
            }
            let folded: Vec<String> = terms.iter().map(|t| fold_case(t)).filter(|t| !t.is_empty()).collect();
            for piece in pieces.into_inner() {
                let f = fold_case(&piece);
                prop_assert!(folded.iter().any(|t| f.contains(t.as_str())), "{:?} holds no term of {:?}", piece, folded);
            }
        }
    }
}
