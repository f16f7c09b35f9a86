//! `sessiondb search QUERY`: ranked full-text search across every conversation.

use std::io::{IsTerminal, Write};

use super::term::{visible, visible_line};
use super::Failure;
use sessiondb::codec::timestamp::format_utc;
use sessiondb::store::search::{match_spans, search, snippet, snippet_at, ConversationHits, Highlight, Marks, SearchQuery, SearchResult, Sort};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// Words, "a phrase", prefix*, AND/OR/NOT; anything else (punctuation, symbols, emoji) is
    /// found literally, as a substring ignoring case. A query that begins with `-` comes after
    /// `--` (`search -- -foo`), so that a mistyped flag is named as one, never searched for
    query: String,
    /// Find the query as a substring (ignoring case), whatever it looks like
    #[arg(short = 'F', long)]
    literal: bool,
    /// At most N conversations; 0 for all of them
    #[arg(short = 'n', long = "limit", default_value_t = 20)]
    limit: usize,
    /// Leave out the first N conversations of the ordered result (the next page: N = the
    /// offset plus the limit of the page before)
    #[arg(long, value_name = "N", default_value_t = 0)]
    offset: usize,
    /// relevance: a word query by the bm25 score of each conversation's best match; a literal
    /// query has no score: its relevance order is newest first. newest: by the conversation's
    /// last modification, as `list` orders
    #[arg(long, value_enum, default_value_t = SortArg::Relevance)]
    sort: SortArg,
    /// JSON: {"total": {"messages", "conversations"} (every match, exact), "offset", "sort",
    /// "literal", "results": [the page]}
    #[arg(long)]
    pub(crate) json: bool,
    /// Only messages of this role
    #[arg(long)]
    role: Option<String>,
    /// Only messages answered by this model
    #[arg(long)]
    model: Option<String>,
    /// Only conversations modified since YYYY-MM-DD, or Nd / Nh ago
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Only this conversation
    #[arg(long = "chat", value_name = "ID")]
    chat_id: Option<String>,
    /// Only conversations of this source (the logs root they are read from)
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// Only messages on this branch
    #[arg(long)]
    branch: Option<String>,
    /// Lines of context around each match
    #[arg(short = 'c', long = "context", default_value_t = 1)]
    context: usize,
    /// Matches to show per conversation
    #[arg(short = 'm', long = "matches", default_value_t = 1)]
    matches: usize,
    /// Include test and eval conversations
    #[arg(long)]
    all: bool,
    /// Count every match exactly, however many (by default counting stops past 10,000
    /// matching messages, and the totals say "at least")
    #[arg(long)]
    exact_total: bool,
    #[command(flatten)]
    secrets: super::SecretsArg,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SortArg {
    Relevance,
    Newest,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let query = SearchQuery {
        text: args.query.clone(),
        role: args.role,
        model: args.model,
        since: args.since.as_deref().map(super::parse_since).transpose()?,
        chat_id: args.chat_id,
        source: args.source,
        branch: args.branch,
        limit: args.limit,
        matches: args.matches,
        include_test: args.all,
        literal: args.literal,
        offset: args.offset,
        sort: match args.sort {
            SortArg::Relevance => Sort::Relevance,
            SortArg::Newest => Sort::Newest,
        },
        // The matches are counted, for the header's "20 of 2,000".
        totals: true,
        exact_totals: args.exact_total,
        secrets: args.secrets.shown(),
    };
    let conn = store.connection()?;
    let sources = super::list::shows_sources(&conn)?;
    // An import stopped before its search indexes were built leaves them to this search.
    let spinner = match sessiondb::store::fts::behind(&conn)? {
        0 => None,
        behind => {
            let spinner = indicatif::ProgressBar::new_spinner();
            spinner.set_message(format!("search index: indexing {behind} messages first"));
            spinner.enable_steady_tick(std::time::Duration::from_millis(120));
            Some(spinner)
        }
    };
    let searched = search(&conn, &query);
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    let result = match searched {
        Ok(r) => r,
        Err(e) => return super::refused_filter(e),
    };
    if result.unindexed > 0 {
        super::term::tell!(
            "sessiondb: {} messages are not in the search index yet (another sessiondb process is indexing them, or the database cannot be written); these results leave them out",
            result.unindexed
        );
    }
    let terms = &result.highlight;
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // JSON holds the stored text exactly; the listing shows it visible (see `term`), coloured
    // or starred.
    let shown = Marks {
        text: &|s: &str| visible(s).into_owned(),
        matched: &|s: &str| if colour { format!("\x1b[1;31m{}\x1b[0m", visible(s)) } else { format!("**{}**", visible(s)) },
        numbered: true,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written: std::io::Result<()> = (|| {
        if args.json {
            let page = page_json(&result, args.offset, query.sort, args.context, args.matches, sources);
            writeln!(out, "{}", serde_json::to_string_pretty(&page).expect("serialisable"))?;
            return Ok(());
        }
        let query = visible_line(&args.query);
        let how = if result.literal { " (searched literally)" } else { "" };
        if result.conversations.is_empty() {
            match result.totals.filter(|t| t.conversations > 0) {
                // Only past the last page.
                Some(t) => writeln!(out, "No results for '{query}'{how} past the first {}", super::plural(t.conversations as u64, "conversation"))?,
                None => writeln!(out, "No results found for query: '{query}'{how}")?,
            }
            return Ok(());
        }
        writeln!(out, "Search results for '{query}'{how} ({}):", header_counts(&result, args.offset))?;
        for (i, c) in result.conversations.iter().enumerate() {
            // The id, as `read`, `show` and `export` take it (`SOURCE:CHAT` with several
            // sources), and the name beside it when there is one.
            let id = if sources { format!("{}:{}", c.source, c.chat_id) } else { c.chat_id.clone() };
            let named = if c.name != c.chat_id { format!(" — {}", visible_line(&c.name)) } else { String::new() };
            writeln!(out, "\n{}. {}{named} ({}):", args.offset + i + 1, visible_line(&id), match_counts(c))?;
            for (j, h) in c.hits.iter().enumerate() {
                // Messages numbered from 0, every line of the file counted (the system prompt is
                // 0), as gptme's search numbers them, as `--json`'s `index` and as `read --start`
                // takes them.
                writeln!(out, "\n  Match {} ({}, message {}, {}):", j + 1, visible_line(&h.document), h.line, visible_line(&h.role))?;
                let text = snippet(&h.content, terms, args.context, args.matches, &shown);
                writeln!(out, "     {}", text.replace('\n', "\n     "))?;
            }
        }
        Ok(())
    })();
    // A reader that went away (`| head`) ends the process by SIGPIPE (see src/main.rs).
    written.map(|_| 0).map_err(Failure::from)
}

/// The header's count of conversations: all of them (`3 conversations`), or the page's place
/// among them (`20 of 2,000 conversations`, `21–40 of 2,000 conversations`), and the matches.
fn header_counts(result: &SearchResult, offset: usize) -> String {
    let shown = result.conversations.len();
    let totals = result.totals.expect("asked for");
    // Counting stopped past COUNTED_UP_TO matches: the totals are lower bounds.
    let least = if totals.exact { "" } else { "at least " };
    let all = format!("{least}{}", super::plural(totals.conversations as u64, "conversation"));
    let beyond = shown + offset < totals.conversations || !totals.exact;
    let page = match (offset, beyond) {
        (0, false) => all,
        (0, true) => format!("{} of {all}", super::grouped(shown as u64)),
        _ => format!("{}–{} of {all}", super::grouped(offset as u64 + 1), super::grouped((offset + shown) as u64)),
    };
    let more = if beyond { "; `-n 0` shows them all" } else { "" };
    let exact = if totals.exact { "" } else { ", `--exact-total` counts them all" };
    format!("{page}, {least}{}{more}{exact}", super::plural(totals.messages as u64, "matching message"))
}

/// A conversation's count of matches, and how many are shown when `-m` shows fewer.
fn match_counts(c: &ConversationHits) -> String {
    let all = super::plural(c.total as u64, "match");
    match c.hits.len() {
        shown if shown < c.total => format!("{all}, {shown} shown; `-m {}` shows them all", c.total),
        _ => all,
    }
}

/// The page of `search --json`: `{"total": {"messages", "conversations", "exact"}, "offset", "sort",
/// "literal", "ranked_by", "unindexed", "results"}` (the MCP server's `search_conversations`
/// answers with the same rows); `unindexed` is [`SearchResult::unindexed`].
/// `result` must have been asked for its totals.
/// With `sources` (the store has several), each result has its `source`.
pub(crate) fn page_json(result: &SearchResult, offset: usize, sort: Sort, context: usize, matches: usize, sources: bool) -> serde_json::Value {
    let totals = result.totals.expect("a page is asked for with its totals");
    let mut spans = SpansOf::new();
    serde_json::json!({
        "total": { "messages": totals.messages, "conversations": totals.conversations, "exact": totals.exact },
        "offset": offset,
        "sort": match sort { Sort::Relevance => "relevance", Sort::Newest => "newest" },
        "literal": result.literal,
        "ranked_by": result.ranked_by.name(),
        "unindexed": result.unindexed,
        "results": result.conversations.iter().map(|c| {
            let mut json = conversation_json(c, &result.highlight, context, matches, &mut spans);
            if sources {
                json["source"] = serde_json::json!(c.source);
            }
            json
        }).collect::<Vec<_>>(),
    })
}

/// Where the query matches each text shown on a page ([`match_spans`]), found once per text:
/// a page often shows one text many times (a system prompt every conversation holds), each in
/// two forms.
type SpansOf<'r> = std::collections::HashMap<&'r str, Vec<(usize, usize)>>;

/// One conversation of a search page, as `--json` prints it: its id, name, last modification,
/// how many messages matched, and a snippet of each match shown, exact and with `**` marks.
fn conversation_json<'r>(c: &'r ConversationHits, terms: &Highlight, context: usize, matches: usize, spans: &mut SpansOf<'r>) -> serde_json::Value {
    // Plain text: the message's own lines, without the listing's line numbers.
    let exact = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| s.to_owned(), numbered: false };
    let starred = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| format!("**{s}**"), numbered: false };
    serde_json::json!({
        "id": c.chat_id,
        "name": c.name,
        "modified": format_utc(c.modified),
        "matches": c.total,
        "snippets": c.hits.iter().map(|h| {
            let spans = spans.entry(h.content.as_str()).or_insert_with(|| match_spans(&h.content, terms));
            serde_json::json!({
                "role": h.role,
                "file": h.document,
                "index": h.line,
                "rank": h.rank,
                "snippet": snippet_at(&h.content, spans, context, matches, &exact),
                "highlighted": snippet_at(&h.content, spans, context, matches, &starred),
            })
        }).collect::<Vec<_>>(),
    })
}
