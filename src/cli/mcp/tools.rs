//! The four tools of `sessiondb mcp`, over the store: `search_conversations`,
//! `read_conversation`, `list_conversations` and `conversation_stats`.
//!
//! Invariant: each tool answers with what the command line's `--json` gives for the same
//! question — the rows are built by the same functions (`search --json`'s, `list --json`'s,
//! `stats --json`'s; `read_conversation` has the messages `show --json` has) — paged to fit the
//! call's `max_chars` ([`super::budget`]), with a `more` cursor that is null exactly when
//! nothing is left. Before answering, the store reads in what gptme wrote since it last looked
//! (the conversation named, else what changed under the logs root: [`Follower`]); if that
//! fails, the answer is the store's
//! as it stood, with a `note` saying so. Whatever a call holds, it is answered: bad arguments
//! and failures are tool errors (`isError`) whose text says what was wrong. Secrets in what the
//! tools answer are masked ([`sessiondb::secrets`]) unless the server runs with
//! `--show-secrets`: an agent's context is no place for a pasted key.

use std::cell::RefCell;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::budget::{self, Budget};
use super::rpc::Tools;
use crate::cli::{list::summary_json, search::page_json};
use sessiondb::secrets::Shown;
use sessiondb::store::queries::{self, ListFilter};
use sessiondb::store::search::{search, SearchQuery, Sort};
use sessiondb::store::{stats, Store, StoreError};
use sessiondb::sync::follow::Follower;

/// The most conversations one search returns (`limit` is brought down to it, but for 0: all,
/// as on the command line, the answer's length bounded by `max_chars`).
const MAX_SEARCH_LIMIT: usize = 100;
/// The most matches shown per conversation.
const MAX_MATCHES: usize = 20;
/// The most conversations one listing returns.
const MAX_LIST_LIMIT: usize = 1_000;
/// The most messages one read returns.
const MAX_READ_LIMIT: usize = 1_000;
/// The furthest position a cursor or `start` names (past every real one, and far from
/// overflowing the arithmetic of a page).
const MAX_POSITION: usize = u32::MAX as usize;
/// Lines of context around each match in a search snippet (the command line's default).
const CONTEXT: usize = 1;

/// What a tool call can fail with; its text (with causes) is the tool error the client sees.
#[derive(Debug, thiserror::Error)]
enum ToolError {
    #[error("invalid arguments for {tool}")]
    Arguments { tool: &'static str, source: serde_json::Error },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The tools, over one store, caught up from one logs root.
pub struct Server {
    store: Store,
    /// gptme's logs root, read in before each answer; `None` when there is none to read.
    logs_root: Option<PathBuf>,
    /// What changed under the logs root since the last answer.
    follower: Option<RefCell<Follower>>,
    /// Whether answers mask secrets (the default) or show them (`--show-secrets`).
    shown: Shown,
}

impl Server {
    /// The tools over `store`, caught up from `logs_root` before each answer (when there is one).
    /// The root's source is named `source` when the store has none for it yet. Texts are
    /// answered as `shown` says (secrets masked, or as they are).
    pub fn new(store: Store, logs_root: Option<PathBuf>, source: Option<String>, shown: Shown) -> Server {
        let follower = logs_root.as_deref().map(|root| RefCell::new(Follower::new(root).with_source(source)));
        Server { store, logs_root, follower, shown }
    }

    /// Whether the logs root is followed by notifications (else each answer over every
    /// conversation walks the whole root first).
    pub fn notified(&self) -> bool {
        self.follower.as_ref().is_some_and(|f| f.borrow().notified())
    }
}

impl Tools for Server {
    fn list(&self) -> Vec<Value> {
        tool_specs()
    }

    fn call(&self, name: &str, arguments: &Map<String, Value>) -> Option<Value> {
        let spec = tool_specs().into_iter().find(|t| t["name"] == name)?;
        let args = match check_arguments(&spec["inputSchema"], arguments) {
            Ok(checked) => Value::Object(checked),
            Err(problem) => return Some(tool_answer(Err(ToolError::Invalid(format!("{name}: {problem}"))))),
        };
        let outcome = match name {
            "search_conversations" => parse("search_conversations", args).and_then(|a| self.search(a)),
            "read_conversation" => parse("read_conversation", args).and_then(|a| self.read(a)),
            "list_conversations" => parse("list_conversations", args).and_then(|a| self.list(a)),
            "conversation_stats" => parse("conversation_stats", args).and_then(|a| self.stats(a)),
            _ => return None,
        };
        Some(tool_answer(outcome))
    }

    fn instructions(&self) -> &str {
        INSTRUCTIONS
    }
}

/// What `initialize` tells the client (and through it the model) about the tools.
pub const INSTRUCTIONS: &str = "sessiondb holds every past gptme conversation, the current one included, in a database. \
     search_conversations finds where something was discussed or done (a word, a phrase, an error message, a code fragment); \
     read_conversation reads a conversation around a hit; list_conversations browses conversations by date; \
     conversation_stats gives costs and token use. Answers are JSON; an answer whose \"more\" is not null \
     continues when the same tool is called again with \"cursor\" set to it.";

/// A `CallToolResult`: the answer as JSON text, or the error as a tool error.
fn tool_answer(outcome: Result<Value, ToolError>) -> Value {
    match outcome {
        Ok(answer) => json!({ "content": [{ "type": "text", "text": answer.to_string() }], "isError": false }),
        Err(e) => tool_error(&sessiondb::cause::chain(&e)),
    }
}

/// A tool error (`isError`) saying `text`.
pub fn tool_error(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

/// Checks a call's arguments against the tool's input schema (the one the client was given):
/// every argument is one the tool has, of its type, and every required one is there. Says
/// which argument is wrong and what it should be. The arguments as the tools read them: an
/// integer written as a whole-number float (`5.0`, which JSON Schema counts as an integer, and
/// which clients in Rust or Python pass on as the model wrote it) becomes that integer.
fn check_arguments(schema: &Value, arguments: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let properties = schema["properties"].as_object().expect("every tool has properties");
    let mut checked = Map::new();
    for (name, value) in arguments {
        let Some(spec) = properties.get(name) else {
            let known: Vec<&str> = properties.keys().map(String::as_str).collect();
            return Err(format!("unknown argument {name:?}; the arguments are {}", known.join(", ")));
        };
        let fits = match spec["type"].as_str() {
            Some("string") => value.is_string() && spec["enum"].as_array().is_none_or(|choices| choices.contains(value)),
            Some("integer") => whole_number(value).is_some(),
            Some("boolean") => value.is_boolean(),
            _ => true,
        };
        if !fits {
            let wanted = match (spec["type"].as_str(), spec["enum"].as_array()) {
                (_, Some(choices)) => format!("one of {}", choices.iter().map(Value::to_string).collect::<Vec<_>>().join(", ")),
                (Some("integer"), _) if value.as_f64().is_some_and(|f| f.fract() == 0.0 && f > 0.0) => {
                    format!("a whole number, 0 or more, at most {}", u64::MAX)
                }
                (Some("integer"), _) => "a whole number, 0 or more".to_owned(),
                (Some(t), _) => format!("a {t}"),
                _ => "something else".to_owned(),
            };
            let shown = value.to_string();
            let shown = if shown.chars().count() > 80 { format!("{}…", shown.chars().take(80).collect::<String>()) } else { shown };
            return Err(format!("argument {name:?} is {shown}, expected {wanted}"));
        }
        let value = match (spec["type"].as_str(), whole_number(value)) {
            (Some("integer"), Some(n)) => json!(n),
            _ => value.clone(),
        };
        checked.insert(name.clone(), value);
    }
    for required in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if !arguments.contains_key(required) {
            return Err(format!("the argument {required:?} is required"));
        }
    }
    Ok(checked)
}

/// `value` as an integer argument (every one is 0 or more): a whole number however it is
/// written (`5`, `5.0`, `5e0`) that fits in a `u64`; `None` for anything else (`5.5`, `-1`,
/// `"5"`, `1e300`).
fn whole_number(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    // `u64::MAX as f64` is 2^64, the first whole number past the range.
    (f.fract() == 0.0 && f >= 0.0 && f < u64::MAX as f64).then_some(f as u64)
}

/// A tool's arguments, checked against its struct (unknown fields refused).
fn parse<T: for<'de> Deserialize<'de>>(tool: &'static str, args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|source| ToolError::Arguments { tool, source })
}

/// `since`, as the command line's `--since` reads it.
fn since(text: Option<&str>) -> Result<Option<f64>, ToolError> {
    text.map(|t| {
        crate::cli::parse_since(t).map_err(|_| ToolError::Invalid(format!("since {t:?}: expected a date YYYY-MM-DD (UTC), or Nd or Nh (days or hours ago)")))
    })
    .transpose()
}

/// A cursor this server gave: a position, or a position and a character offset into it.
fn cursor(text: Option<&str>) -> Result<Option<(usize, usize)>, ToolError> {
    let Some(text) = text else { return Ok(None) };
    let bad = || ToolError::Invalid(format!("cursor {text:?} is not one this tool gave; pass the \"more\" of the previous answer unchanged"));
    let (at, within) = text.split_once(':').unwrap_or((text, "0"));
    let (at, within): (usize, usize) = (at.parse().map_err(|_| bad())?, within.parse().map_err(|_| bad())?);
    Ok(Some((at.min(MAX_POSITION), within.min(MAX_POSITION))))
}

/// A store error as a tool error, worded for a call's arguments rather than for flags.
fn store_error(e: StoreError) -> ToolError {
    match e {
        StoreError::NoSuchFilter { flag, value, known } => {
            ToolError::Invalid(format!("{} {value:?} names nothing in the store: {known}", flag.trim_start_matches('-')))
        }
        other => ToolError::Store(other),
    }
}

/// The row id of the source named `name`, if one is named; an unknown name is refused with the
/// names there are.
fn source_id(conn: &sessiondb::store::Connection, name: Option<&str>) -> Result<Option<i64>, ToolError> {
    name.map(|name| sessiondb::store::sources::named(conn, name).map(|s| s.id)).transpose().map_err(store_error)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    limit: Option<usize>,
    chat: Option<String>,
    source: Option<String>,
    role: Option<String>,
    model: Option<String>,
    since: Option<String>,
    branch: Option<String>,
    literal: Option<bool>,
    sort: Option<SortName>,
    matches: Option<usize>,
    cursor: Option<String>,
    max_chars: Option<usize>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum SortName {
    Relevance,
    Newest,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    chat_id: String,
    start: Option<usize>,
    limit: Option<usize>,
    branch: Option<String>,
    cursor: Option<String>,
    max_chars: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    limit: Option<usize>,
    since: Option<String>,
    source: Option<String>,
    model: Option<String>,
    query: Option<String>,
    cursor: Option<String>,
    max_chars: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatsArgs {
    chat_id: Option<String>,
    since: Option<String>,
    source: Option<String>,
}

impl Server {
    /// Reads into the store what gptme wrote since it last looked: conversation `chat` (when the
    /// call names one), else the conversations of the logs root that changed. A note when that
    /// failed (the answer is then the store's as it stood), else `None`.
    fn catch_up(&self, chat: Option<&str>) -> Option<String> {
        let outcome = match (chat, &self.logs_root) {
            (Some(chat), root) => sessiondb::sync::catch_up::catch_up(&self.store, chat, root.as_deref()),
            (None, _) => match &self.follower {
                Some(follower) => follower.borrow_mut().catch_up(&self.store),
                None => Ok(None),
            },
        };
        // Much read in (the first call, on a fresh store): the ranking index is brought up now,
        // or searches would rank from the word index until it is.
        if let Ok(Some(report)) = &outcome {
            if report.ingest.messages > sessiondb::store::ranking::SEARCH_CATCH_UP as u64 {
                let _ = self.store.catch_up_ranking(&mut |_| {});
            }
        }
        let problem = match outcome {
            Ok(Some(report)) if !report.errors.is_empty() => {
                let first = sessiondb::cause::chain(&report.errors[0]);
                format!("{} conversation(s) could not be read in ({first}{})", report.errors.len(), if report.errors.len() > 1 { ", …" } else { "" })
            }
            Ok(_) => return None,
            Err(e) => sessiondb::cause::chain(&e),
        };
        Some(format!("the store could not read in everything gptme wrote since the last sync: {problem}; this answer may miss the newest messages"))
    }

    fn search(&self, a: SearchArgs) -> Result<Value, ToolError> {
        let note = self.catch_up(a.chat.as_deref());
        let conn = self.store.connection()?;
        // Past the last conversation there is nothing to page to: an offset beyond it is brought
        // back to it (searches size their work by the offset).
        let conversations = queries::count_filtered(&conn, &ListFilter { include_test: true, ..ListFilter::default() })?;
        let (offset, _) = cursor(a.cursor.as_deref())?.unwrap_or((0, 0));
        let offset = offset.min(conversations);
        let matches = a.matches.unwrap_or(3).clamp(1, MAX_MATCHES);
        let query = SearchQuery {
            text: a.query,
            role: a.role,
            model: a.model,
            since: since(a.since.as_deref())?,
            chat_id: a.chat,
            source: a.source,
            branch: a.branch,
            limit: a.limit.unwrap_or(10).min(MAX_SEARCH_LIMIT),
            matches,
            include_test: false,
            literal: a.literal.unwrap_or(false),
            offset,
            sort: match a.sort.unwrap_or(SortName::Relevance) {
                SortName::Relevance => Sort::Relevance,
                SortName::Newest => Sort::Newest,
            },
            totals: true,
            exact_totals: false,
            secrets: self.shown,
        };
        let result = search(&conn, &query).map_err(store_error)?;
        let sources = crate::cli::list::shows_sources(&conn).map_err(store_error)?;
        let mut page = page_json(&result, offset, query.sort, CONTEXT, matches, sources);
        let Value::Array(rows) = page["results"].take() else { unreachable!("results are an array") };
        page["more"] = Value::Null;
        if let Some(note) = note {
            page["note"] = json!(note);
        }
        let mut budget = Budget::new(budget::max_chars(a.max_chars), &page);
        let mut taken = Vec::new();
        for (mut row, c) in rows.into_iter().zip(&result.conversations) {
            // For a model, the snippet with its matches marked is enough; each match gets the
            // time of its message.
            for (s, hit) in row["snippets"].as_array_mut().into_iter().flatten().zip(&c.hits) {
                s.as_object_mut().map(|s| s.remove("snippet"));
                s["timestamp"] = json!(queries::message_timestamp(&conn, hit.message_id)?);
            }
            if taken.is_empty() {
                // Too long alone (a match in a line of megabytes): its snippets are cut, never
                // its id; and when even cut they do not fit (their numbers and keys), the last
                // are left out (the row's `matches` still counts them).
                let room = budget.left().saturating_sub(budget::size(&row) - budget::size(&row["snippets"]));
                budget::cut_strings(&mut row["snippets"], room);
                while budget::size(&row["snippets"]) > room && row["snippets"].as_array().is_some_and(|s| s.len() > 1) {
                    row["snippets"].as_array_mut().expect("checked").pop();
                    budget::cut_strings(&mut row["snippets"], room);
                }
            }
            if !budget.take(&row) {
                break;
            }
            taken.push(row);
        }
        let next = offset + taken.len();
        // Counting stopped past COUNTED_UP_TO matches: more may follow however many were counted.
        let (total, exact) = result.totals.map_or((0, true), |t| (t.conversations, t.exact));
        if next < total || (!exact && !taken.is_empty()) {
            page["more"] = json!(next.to_string());
        }
        page["results"] = Value::Array(taken);
        Ok(page)
    }

    fn read(&self, a: ReadArgs) -> Result<Value, ToolError> {
        let note = self.catch_up(Some(&a.chat_id));
        let conn = self.store.connection()?;
        let branch = a.branch.as_deref().unwrap_or(sessiondb::layout::MAIN);
        let (_, doc) = sessiondb::sync::document::loaded(&conn, &a.chat_id, branch)?;
        let name = queries::conversation_summary(&conn, &a.chat_id)?.name;
        let (start, within) = cursor(a.cursor.as_deref())?.unwrap_or((a.start.unwrap_or(0).min(MAX_POSITION), 0));
        let limit = queries::at_most(a.limit.unwrap_or(20)).map_or(usize::MAX, |l| l.min(MAX_READ_LIMIT));
        let mut answer = json!({ "id": a.chat_id, "name": name, "branch": branch, "file": doc.path, "lines": doc.line_count, "messages": [], "more": null });
        if let Some(note) = note {
            answer["note"] = json!(note);
        }
        let mut budget = Budget::new(budget::max_chars(a.max_chars), &answer);
        // One message at a time from the store, until the page is full: a long conversation
        // costs no more than the page.
        let (messages, more) = queries::with_document_lines(&conn, doc.id, start as i64, |lines| {
            let mut taken = Vec::new();
            for (index, line) in (start..).zip(lines) {
                let Some(mut m) = line.message else { continue };
                if taken.len() == limit {
                    return (taken, Some(index.to_string()));
                }
                // Masked before the cursor counts in it: a cursor inside a message counts the
                // characters of the text as answered.
                self.shown.apply(&mut m.content);
                let from = if index == start { within } else { 0 };
                let mut item = json!({ "index": index, "role": m.role.as_str(), "timestamp": m.timestamp });
                if m.hide {
                    item["hidden"] = json!(true);
                }
                if m.pinned {
                    item["pinned"] = json!(true);
                }
                if !m.files.is_empty() && from == 0 {
                    item["files"] = json!(m.files);
                }
                let rest: String = m.content.chars().skip(from).collect();
                if from > 0 {
                    item["content_from"] = json!(from);
                }
                item["content"] = json!(rest);
                if taken.is_empty() && budget::size(&item) > budget.left() {
                    // Too long for the page on its own: as much as fits, and the cursor goes on
                    // from there inside the message.
                    item["content"] = json!("");
                    let room = budget.left().saturating_sub(budget::size(&item) - 2);
                    let (kept, count) = fitting_prefix(&rest, room);
                    item["content"] = json!(kept);
                    // Whole after all (what did not fit was the rest of the message: its
                    // attachments' names), else cut, the cursor going on inside it.
                    if count < rest.chars().count() {
                        item["cut"] = json!(true);
                        budget.take(&item);
                        taken.push(item);
                        return (taken, Some(format!("{index}:{}", from + count)));
                    }
                    budget.take(&item);
                    taken.push(item);
                    continue;
                }
                if !budget.take(&item) {
                    return (taken, Some(index.to_string()));
                }
                taken.push(item);
            }
            (taken, None)
        })?;
        answer["messages"] = Value::Array(messages);
        answer["more"] = json!(more);
        Ok(answer)
    }

    fn list(&self, a: ListArgs) -> Result<Value, ToolError> {
        let note = self.catch_up(None);
        let (offset, _) = cursor(a.cursor.as_deref())?.unwrap_or((0, 0));
        let limit = queries::at_most(a.limit.unwrap_or(20)).map(|l| l.min(MAX_LIST_LIMIT));
        let name = a.query.map(|q| if q.contains(['*', '?', '[']) { q } else { format!("*{q}*") });
        let conn = self.store.connection()?;
        let source = source_id(&conn, a.source.as_deref())?;
        let filter =
            ListFilter { limit: limit.map(|l| offset.saturating_add(l)), model: a.model, since: since(a.since.as_deref())?, name, source, ..ListFilter::default() };
        let total = queries::count_filtered(&conn, &filter)?;
        let sources = crate::cli::list::shows_sources(&conn)?;
        let mut answer = json!({ "total": total, "offset": offset, "conversations": [], "more": null });
        if let Some(note) = note {
            answer["note"] = json!(note);
        }
        let mut budget = Budget::new(budget::max_chars(a.max_chars), &answer);
        let mut rows = Vec::new();
        let mut full = false;
        let mut seen = 0;
        queries::visit_filtered(&conn, &filter, |c| {
            seen += 1;
            if seen <= offset || full {
                return Ok::<_, StoreError>(());
            }
            // A row is a few hundred bytes: the first is taken whatever its length.
            let row = serde_json::to_value(summary_json(&c).with_source(&c, sources)).expect("serialisable");
            if budget.take(&row) {
                rows.push(row);
            } else {
                full = true;
            }
            Ok(())
        })?;
        let next = offset + rows.len();
        if next < total {
            answer["more"] = json!(next.to_string());
        }
        answer["conversations"] = Value::Array(rows);
        Ok(answer)
    }

    fn stats(&self, a: StatsArgs) -> Result<Value, ToolError> {
        let note = self.catch_up(a.chat_id.as_deref());
        let conn = self.store.connection()?;
        let mut data = match &a.chat_id {
            Some(id) => {
                if a.since.is_some() {
                    return Err(ToolError::Invalid("since applies to the overview; leave it out with chat_id".into()));
                }
                if a.source.is_some() {
                    return Err(ToolError::Invalid("source applies to the overview; with chat_id, name the conversation as SOURCE:CHAT".into()));
                }
                stats::conversation(&conn, id)?
            }
            None => {
                let from = since(a.since.as_deref())?.map(|t| (t, a.since.clone().unwrap_or_default()));
                let source = source_id(&conn, a.source.as_deref())?;
                stats::overview(&conn, from, false, None, source)?
            }
        };
        if let Some(note) = note {
            data["note"] = json!(note);
        }
        Ok(data)
    }
}

/// The longest prefix of `text` whose JSON string takes at most `room` bytes, and how many
/// characters of `text` it holds (at least one, so that a cursor always moves on).
fn fitting_prefix(text: &str, room: usize) -> (String, usize) {
    // Bytes as serde_json writes them in a string: two for the short escapes, six for the
    // other control characters, the UTF-8 of any other.
    let cost = |c: char| match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    };
    let mut used = 2; // the quotes
    let mut kept = String::new();
    let mut count = 0;
    for c in text.chars() {
        if used + cost(c) > room && count > 0 {
            break;
        }
        used += cost(c);
        kept.push(c);
        count += 1;
    }
    (kept, count)
}

/// The tools as `tools/list` gives them: names, descriptions for a model to choose well, and
/// the JSON schemas of their arguments.
pub fn tool_specs() -> Vec<Value> {
    let max_chars = json!({ "type": "integer", "minimum": 1, "description": format!("Budget for the answer in bytes of JSON, about its characters (default {}, at most {}: what MCP clients give their model whole); past it, the answer stops early and \"more\" continues it", budget::DEFAULT_MAX_CHARS, budget::MAX_MAX_CHARS) });
    let cursor = json!({ "type": "string", "description": "The \"more\" of the previous answer of this tool with the same other arguments: the next page" });
    let since =
        json!({ "type": "string", "description": "Only conversations modified since this date: YYYY-MM-DD (UTC), or Nd / Nh (days or hours ago, e.g. 7d)" });
    let source = json!({ "type": "string", "description": "Only conversations of this source: a logs root, named as answers name it in \"source\" (given only when the store holds several)" });
    let read_only = json!({ "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false });
    vec![
        json!({
            "name": "search_conversations",
            "title": "Search past conversations",
            "description": "Full-text search over every past gptme conversation (all branches and views, the current conversation included). \
        Use it to find where something was discussed, decided or done before: an error message, a command, a file name, a code fragment, a phrase. \
        Plain words are ranked by relevance (bm25; \"a phrase\" in double quotes, prefix*, AND/OR/NOT work); any query with punctuation or symbols \
        (a path, `foo(`, an error text) is matched literally as a substring ignoring case; Chinese, Japanese and Korean text is found inside longer runs. \
        Returns conversations, best first, each with its id, name, last modification, how many messages matched, and the best matches: \
        role, file, message index and timestamp, and a snippet with the matching words marked **like this**. \
        Read around a match with read_conversation(chat_id=id, start=index). \"total\" counts every match; when \"more\" is not null, pass it as cursor for more conversations.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What to find: words, \"a phrase\", prefix*, or any text to match literally" },
                    "limit": { "type": "integer", "minimum": 0, "maximum": MAX_SEARCH_LIMIT, "description": "At most this many conversations (default 10); 0 for all of them (as many as max_chars holds, \"more\" for the rest)" },
                    "chat": { "type": "string", "description": "Only this conversation (its id)" },
                    "source": source,
                    "role": { "type": "string", "description": "Only messages of this role: user, assistant or system (tool output is system)" },
                    "model": { "type": "string", "description": "Only messages answered by this model (part of its name, e.g. sonnet)" },
                    "since": since,
                    "branch": { "type": "string", "description": "Only messages on this branch (main is the conversation itself)" },
                    "literal": { "type": "boolean", "description": "Match the query as a substring (ignoring case) even when it is plain words (default false)" },
                    "sort": { "type": "string", "enum": ["relevance", "newest"], "description": "relevance (default; literal queries: newest first) or newest (last modified first)" },
                    "matches": { "type": "integer", "minimum": 1, "maximum": MAX_MATCHES, "description": "Matches shown per conversation (default 3)" },
                    "cursor": cursor,
                    "max_chars": max_chars,
                },
                "required": ["query"],
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "read_conversation",
            "title": "Read a conversation",
            "description": "Reads the messages of one past gptme conversation in order, from message index start (0-based, as search_conversations numbers them; \
        the first message is usually gptme's system prompt, so start at 1 to skip it). Each message has its index, role (system messages include tool output), \
        timestamp and content; hidden messages are marked \"hidden\": true, pinned ones \"pinned\": true. \
        A message too long for the budget is cut (\"cut\": true) and the cursor continues inside it. When \"more\" is not null, pass it as cursor to read on.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "chat_id": { "type": "string", "description": "The conversation's id (as search_conversations and list_conversations give it)" },
                    "start": { "type": "integer", "minimum": 0, "description": "Index of the first message to read (default 0)" },
                    "limit": { "type": "integer", "minimum": 0, "maximum": MAX_READ_LIMIT, "description": "At most this many messages (default 20); 0 for all of them (as many as max_chars holds, \"more\" for the rest)" },
                    "branch": { "type": "string", "description": "The branch (default main: the conversation as gptme has it loaded)" },
                    "cursor": cursor,
                    "max_chars": max_chars,
                },
                "required": ["chat_id"],
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "list_conversations",
            "title": "List conversations",
            "description": "Lists past gptme conversations, most recently modified first: id, name, created and modified times, number of messages, \
        branches, model, cost, tokens, workspace and a preview of the last message. Use it to browse recent work or to find a conversation by name or date; \
        use search_conversations to find one by what was said in it. \"total\" counts every conversation that passes the filters.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "limit": { "type": "integer", "minimum": 0, "maximum": MAX_LIST_LIMIT, "description": "At most this many conversations (default 20); 0 for all of them (as many as max_chars holds, \"more\" for the rest)" },
                    "since": since,
                    "model": { "type": "string", "description": "Only conversations whose last model contains this (ignoring case), or matches it as a glob with * or ?" },
                    "query": { "type": "string", "description": "Only conversations whose name or id contains this (case-sensitive), or matches it as a glob with * or ?" },
                    "source": source,
                    "cursor": cursor,
                    "max_chars": max_chars,
                },
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
        json!({
            "name": "conversation_stats",
            "title": "Conversation statistics",
            "description": "gptme's statistics: across all conversations (count, messages, cost, tokens, models used, activity by day, by role), \
        or with chat_id for one conversation (its messages, duration, cost, tokens, model, workspace and last message).",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "chat_id": { "type": "string", "description": "One conversation's id; without it, the overview of all" },
                    "since": since,
                    "source": source,
                },
                "additionalProperties": false,
            },
            "annotations": read_only,
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_are_checked_against_the_schema_the_client_was_given() {
        let specs = tool_specs();
        let search = &specs[0]["inputSchema"];
        let given = args(json!({ "query": "x", "limit": 5, "sort": "newest", "literal": true }));
        assert_eq!(check_arguments(search, &given), Ok(given.clone()));
        // A whole number written as a float is that integer (JSON Schema's "integer" is any
        // whole number); a fraction is refused.
        for whole in [json!(5.0), json!(5e0), json!(-0.0)] {
            let checked = check_arguments(search, &args(json!({ "query": "x", "limit": whole }))).unwrap();
            assert!(checked["limit"].is_u64(), "{whole}: {checked:?}");
            assert_eq!(checked["limit"].as_u64(), whole_number(&whole), "{whole}");
        }
        assert_eq!(whole_number(&json!(5.0)), Some(5));
        let wrong = [
            (json!({}), "the argument \"query\" is required"),
            (json!({ "query": 3 }), "argument \"query\" is 3, expected a string"),
            (json!({ "query": "x", "limit": -1 }), "argument \"limit\" is -1, expected a whole number, 0 or more"),
            (json!({ "query": "x", "limit": 2.5 }), "argument \"limit\" is 2.5, expected a whole number, 0 or more"),
            (json!({ "query": "x", "limit": -3.0 }), "argument \"limit\" is -3.0, expected a whole number, 0 or more"),
            (json!({ "query": "x", "limit": 1e300 }), "expected a whole number, 0 or more, at most 18446744073709551615"),
            (json!({ "query": "x", "sort": "oldest" }), "expected one of \"relevance\", \"newest\""),
            (json!({ "query": "x", "literal": "yes" }), "expected a boolean"),
            (json!({ "query": "x", "limti": 1 }), "unknown argument \"limti\""),
        ];
        for (given, said) in wrong {
            let problem = check_arguments(search, &args(given.clone())).unwrap_err();
            assert!(problem.contains(said), "{given}: {problem}");
        }
        // A long value is shown cut, not whole.
        let problem = check_arguments(search, &args(json!({ "query": "x", "limit": "y".repeat(10_000) }))).unwrap_err();
        assert!(problem.chars().count() < 200, "{problem}");
    }

    #[test]
    fn a_prefix_fits_its_room_as_json_and_always_moves_on() {
        for text in ["plain text here", "quotes \" and \\ and \n new lines", "\u{1}\u{2} controls", "数据库 and 😀"] {
            for room in 0..40 {
                let (kept, count) = fitting_prefix(text, room);
                assert_eq!(kept.chars().count(), count);
                assert!(text.starts_with(&kept));
                assert!(count >= 1, "{text:?} {room}");
                assert!(count == 1 || budget::size(&json!(kept)) <= room, "{text:?} {room}: {kept:?}");
                if count < text.chars().count() {
                    let one_more: String = text.chars().take(count + 1).collect();
                    assert!(budget::size(&json!(one_more)) > room, "{text:?} {room}: stopped early");
                }
            }
        }
    }
}
