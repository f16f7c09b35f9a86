//! `sessiondb list [--json] [--all] [-n N]`.
//!
//! Invariant: the table shows every listed chat id whole (it is what every other command
//! takes), and its source whole when the store has more than one (`SOURCE:CHAT` then names it
//! in any case); names, models and previews are what gets cut, in terminal cells.

use std::io::Write;

use super::{term, Failure};
use sessiondb::codec::timestamp::format_utc;
use sessiondb::store::queries::{self, ConversationSummary, ListFilter, SortBy};
use sessiondb::store::{Store, StoreError};

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON with the field names of `gptme-util chats list --json`
    #[arg(long)]
    pub(crate) json: bool,
    /// Include test and eval conversations (ids starting with `tmp` or `test-`, or containing `gptme-evals-`)
    #[arg(long)]
    all: bool,
    /// Show at most N conversations; 0 for all of them [default: 20 in the table, as gptme's
    /// `chats list`; all with --json]
    #[arg(short = 'n', long = "limit", value_name = "N")]
    limit: Option<usize>,
    /// Only conversations whose last model contains M, ignoring case (`gpt-4` finds
    /// `openai/gpt-4o`), or matches M as a glob when it has `*` or `?`
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// Only conversations modified since YYYY-MM-DD, or Nd / Nh ago
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Only conversations modified before DATE
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
    /// Only conversations whose name or id matches this glob
    #[arg(long, value_name = "GLOB")]
    name: Option<String>,
    /// Order by
    #[arg(long, value_enum, default_value_t = Sort::Modified)]
    sort: Sort,
    /// Smallest (or oldest) first: the listing in exactly the reverse order
    #[arg(long)]
    reverse: bool,
    /// Each conversation in full, as gptme's `chats list --metadata`: id, messages, created,
    /// modified, duration, model, tokens, cost, last message
    #[arg(long, conflicts_with = "json")]
    metadata: bool,
    /// Only conversations of this source (the logs root they are read from; `sessiondb list`
    /// shows each one's when there are several)
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
}

/// `--sort`: the command line's names for [`SortBy`].
#[derive(Clone, Copy, clap::ValueEnum)]
enum Sort {
    Modified,
    Created,
    Cost,
    Tokens,
    Messages,
}

impl From<Sort> for SortBy {
    fn from(sort: Sort) -> Self {
        match sort {
            Sort::Modified => SortBy::Modified,
            Sort::Created => SortBy::Created,
            Sort::Cost => SortBy::Cost,
            Sort::Tokens => SortBy::Tokens,
            Sort::Messages => SortBy::Messages,
        }
    }
}

/// `round(x, 4)` as Python computes it (correctly rounded from the exact binary value).
fn round4(x: f64) -> f64 {
    format!("{x:.4}").parse().unwrap_or(x)
}

/// One conversation in gptme's JSON shape (`_conv_to_dict`), plus the other `ConversationMeta`
/// fields gptme computes for it. Serialised directly (no intermediate tree): listing thousands
/// of conversations is mostly this.
#[derive(serde::Serialize)]
pub struct SummaryJson<'a> {
    id: &'a str,
    /// Only when the store has more than one source ([`SummaryJson::with_source`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a str>,
    name: &'a str,
    path: String,
    created: String,
    modified: String,
    messages: i64,
    branches: i64,
    workspace: Option<&'a str>,
    agent_name: Option<&'a str>,
    model: Option<&'a str>,
    total_cost: Option<f64>,
    total_input_tokens: i64,
    total_output_tokens: i64,
    total_cache_read_tokens: i64,
    models_usage: &'a serde_json::value::RawValue,
    last_message_role: Option<&'a str>,
    last_message_preview: Option<&'a str>,
    /// Only when archived out of gptme's logs root (`sessiondb archive`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    archived: bool,
}

pub fn summary_json(c: &ConversationSummary) -> SummaryJson<'_> {
    let empty: &serde_json::value::RawValue = serde_json::from_str("{}").expect("valid");
    SummaryJson {
        id: &c.chat_id,
        source: None,
        name: &c.name,
        path: format!("{}/conversation.jsonl", c.source_dir),
        created: format_utc(c.created),
        modified: format_utc(c.modified),
        messages: c.messages,
        branches: c.branches,
        workspace: c.workspace.as_deref(),
        agent_name: None,
        model: c.model.as_deref(),
        total_cost: c.total_cost.map(round4),
        total_input_tokens: c.total_input_tokens,
        total_output_tokens: c.total_output_tokens,
        total_cache_read_tokens: c.total_cache_read_tokens,
        models_usage: serde_json::from_str(&c.models_usage).unwrap_or(empty),
        last_message_role: c.last_message_role.as_deref(),
        last_message_preview: c.last_message_preview.as_deref(),
        archived: c.archived,
    }
}

impl<'a> SummaryJson<'a> {
    /// With a `source` field (after `id`), when `show`: the store has more than one source.
    pub fn with_source(mut self, c: &'a ConversationSummary, show: bool) -> Self {
        self.source = show.then_some(c.source.as_str());
        self
    }
}

/// Whether listings show each conversation's source: the store has more than one.
pub fn shows_sources(conn: &sessiondb::store::Connection) -> Result<bool, StoreError> {
    Ok(sessiondb::store::sources::count_in_use(conn)? > 1)
}

/// The table's default length: a screenful, as gptme's `chats list`.
const SCREENFUL: usize = 20;

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let conn = store.connection()?;
    // A filter naming nothing there is exits 2, as `search`'s do.
    let source = match args.source.as_deref().map(|name| sessiondb::store::sources::named(&conn, name)).transpose() {
        Ok(source) => source,
        Err(e) => return super::refused_filter(e),
    };
    if let Some(model) = &args.model {
        if let Err(e) = queries::check_model_filter(&conn, model) {
            return super::refused_filter(e);
        }
    }
    let filter = ListFilter {
        source: source.map(|s| s.id),
        include_test: args.all,
        limit: match args.limit {
            Some(n) => queries::at_most(n),
            None if args.json => None,
            None => Some(SCREENFUL),
        },
        model: args.model,
        since: args.since.as_deref().map(super::parse_since).transpose()?,
        until: args.until.as_deref().map(super::parse_since).transpose()?,
        name: args.name,
        sort: args.sort.into(),
        reverse: args.reverse,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = if args.json {
        write_json(&mut out, &conn, &filter)
    } else if args.metadata {
        write_metadata(&mut out, &conn, &filter)
    } else {
        write_table(&mut out, &conn, &filter)
    };
    // A reader that went away (`| head`) ends the process by SIGPIPE (see src/main.rs).
    result.and_then(|_| out.flush().map_err(ListError::from))?;
    Ok(0)
}

/// What can stop a listing half-way: the store, or the output.
#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The JSON array, written row by row as the store yields them; the same bytes as
/// `serde_json::to_writer_pretty` of the whole list.
fn write_json(out: &mut impl Write, conn: &sessiondb::store::Connection, filter: &ListFilter) -> Result<(), ListError> {
    use serde::ser::{SerializeSeq, Serializer};
    let mut serializer = serde_json::Serializer::pretty(&mut *out);
    let mut seq = serializer.serialize_seq(None).map_err(std::io::Error::from)?;
    let sources = shows_sources(conn)?;
    queries::visit_filtered(conn, filter, |c| seq.serialize_element(&summary_json(&c).with_source(&c, sources)).map_err(|e| ListError::Io(e.into())))?;
    seq.end().map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// One table cell: control characters (a tab in a name, say) shown escaped so that they
/// cannot break the layout or drive the terminal; cut to `width` terminal cells.
fn cell(text: &str, width: usize) -> String {
    term::cut(&term::visible_line(text), width)
}

/// Columns left of MODEL: time (16), messages (5), cost (9), each followed by two spaces.
const LEFT: usize = 16 + 2 + 5 + 2 + 9 + 2;

/// How the table's columns share the width.
struct Layout {
    model: usize,
    id: usize,
    /// Cells for the name on the first line (`usize::MAX`: unbounded); below [`MIN_NAME`], names
    /// go to the second line instead.
    name: usize,
    /// Cells for the second line (name and last message), which starts under the id.
    below: usize,
}

/// Fewer cells than this for a name and it goes to its own line.
const MIN_NAME: usize = 8;

/// The cells MODEL takes with the space after it: none when it is left out (`model` is 0).
fn model_cells(model: usize) -> usize {
    if model == 0 {
        0
    } else {
        model + 2
    }
}

/// A model's name in `width` cells: whole when it fits, else without its provider
/// (`anthropic/claude-sonnet-4-6` → `claude-sonnet-4-6`), cut from the start if still too long.
fn model_cell(model: &str, width: usize) -> String {
    let shown = term::visible_line(model);
    if term::cells(&shown) <= width {
        return term::pad(&shown, width);
    }
    let bare = shown.rsplit_once('/').map_or(&*shown, |(_, name)| name);
    term::pad(&term::cut_start(bare, width), width)
}

impl Layout {
    /// The chat id is never cut: its column is as wide as the widest id shown. MODEL widens with
    /// the terminal (a third of what is right of the cost column, at least 22 cells) up to its
    /// widest value, and gives way to an id that needs the room (left out below 5 cells), so
    /// that no row is wider than the terminal unless an id alone is; the name takes what is
    /// left. `width` is `None` when nothing is to be cut (a pipe or a file).
    fn new(rows: &[ConversationSummary], ids: &[String], id_header: &str, width: Option<usize>) -> Layout {
        let widest = |f: &dyn Fn(&ConversationSummary) -> usize, header: &str| rows.iter().map(f).max().unwrap_or(0).max(term::cells(header));
        let id = ids.iter().map(|id| term::cells(id)).max().unwrap_or(0).max(term::cells(id_header));
        let model = widest(&|c| term::cells(&term::visible_line(c.model.as_deref().unwrap_or("-"))), "MODEL");
        let Some(width) = width else {
            return Layout { model, id, name: usize::MAX, below: usize::MAX };
        };
        let right = width.saturating_sub(LEFT);
        // MODEL gives way to the id entirely; with fewer cells than its header it is left out.
        let model = model.min((right / 3).max(22)).min(right.saturating_sub(id + 2));
        let model = if model < term::cells("MODEL") { 0 } else { model };
        let below = width.saturating_sub(LEFT + model_cells(model)).max(12);
        Layout { model, id, name: below.saturating_sub(id + 2), below }
    }
}

/// The table: time, count, cost, model, then the chat id, whole, and the display name when
/// there is one; the last message's preview below. Colour only on a terminal, and not with
/// `NO_COLOR`.
/// `--metadata`: a block per conversation, with what gptme's `chats list --metadata` shows.
fn write_metadata(out: &mut impl Write, conn: &sessiondb::store::Connection, filter: &ListFilter) -> Result<(), ListError> {
    let rows = queries::list_filtered(conn, filter)?;
    let sources = shows_sources(conn)?;
    writeln!(out, "Recent conversations (showing up to {}):", filter.limit.unwrap_or(rows.len()))?;
    for (i, c) in rows.iter().enumerate() {
        let line = |text: String| term::visible_line(&text).into_owned();
        let (input, output) = (c.total_input_tokens, c.total_output_tokens);
        writeln!(out, "\n{:>2}. {}", i + 1, line(format!("{} (id: {})", c.name, c.chat_id)))?;
        if sources {
            writeln!(out, "     Source:   {}", line(c.source.clone()))?;
        }
        if c.archived {
            writeln!(out, "     Archived: out of gptme's logs root, kept in the store (`sessiondb restore {}`)", line(c.chat_id.clone()))?;
        }
        writeln!(out, "     Messages: {}", c.messages)?;
        writeln!(out, "     Created:  {}", format_utc(c.created).replace('T', " "))?;
        writeln!(out, "     Modified: {}", format_utc(c.modified).replace('T', " "))?;
        writeln!(out, "     Duration: {}", super::human_duration((c.modified - c.created).max(0.0) as i64))?;
        // What gptme leaves out when there is nothing to say: one branch, no model, no tokens,
        // no cost (a cost that is not a number is something to say).
        if c.branches > 1 {
            writeln!(out, "     ({} branches)", c.branches)?;
        }
        if let Some(model) = c.model.as_deref().filter(|m| !m.is_empty()) {
            writeln!(out, "     Model:    {}", line(model.to_owned()))?;
        }
        let total = input.saturating_add(output);
        if total != 0 {
            writeln!(out, "     Tokens:   {} total ({} in / {} out)", super::human_tokens(total), super::human_tokens(input), super::human_tokens(output))?;
        }
        if c.total_cost != Some(0.0) {
            writeln!(out, "     Cost:     {}", super::short_dollars(c.total_cost))?;
        }
        if let Some(preview) = c.last_message_preview.as_deref().filter(|p| !p.is_empty()) {
            writeln!(out, "     Last:     {}", line(format!("{}: {preview}", c.last_message_role.as_deref().unwrap_or("last"))))?;
        }
    }
    Ok(())
}

fn write_table(out: &mut impl Write, conn: &sessiondb::store::Connection, filter: &ListFilter) -> Result<(), ListError> {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let colour = terminal && std::env::var_os("NO_COLOR").is_none();
    let paint = |code: &str, text: &str| if colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() };

    let rows = queries::list_filtered(conn, filter)?;
    // Fit a terminal (or $COLUMNS); written to a pipe or a file, nothing is cut.
    let width = (terminal || std::env::var_os("COLUMNS").is_some()).then(|| super::terminal_width(terminal).max(60));
    // With several sources, each id is preceded by its source, in a column of its own.
    let sources = shows_sources(conn)?;
    let source_width = rows.iter().map(|c| term::cells(&term::visible_line(&c.source))).max().unwrap_or(0).max(term::cells("SOURCE"));
    let ids: Vec<String> = rows
        .iter()
        .map(|c| {
            let id = term::visible_line(&c.chat_id).into_owned();
            if sources {
                format!("{}  {id}", term::pad(&term::visible_line(&c.source), source_width))
            } else {
                id
            }
        })
        .collect();
    let id_header = if sources { format!("{}  ID", term::pad("SOURCE", source_width)) } else { "ID".to_owned() };
    let layout = Layout::new(&rows, &ids, &id_header, width);
    let names = rows.iter().any(|c| c.name != c.chat_id);
    let indent = LEFT + model_cells(layout.model);
    let mut header = format!("{:<16}  {:>5}  {:>9}  ", "MODIFIED (UTC)", "MSGS", "COST");
    if layout.model > 0 {
        header += &format!("{}  ", term::pad("MODEL", layout.model));
    }
    header += &if names && layout.name >= MIN_NAME { format!("{}  NAME", term::pad(&id_header, layout.id)) } else { id_header.clone() };
    writeln!(out, "{}", paint("1", &header))?;
    for (c, id) in rows.iter().zip(ids) {
        let modified = format_utc(c.modified);
        let modified = modified.get(..16).unwrap_or(&modified).replace('T', " ");
        let cost = super::dollars(c.total_cost);
        let named = c.name != c.chat_id;
        let mut line = format!("{}  {:>5}  {:>9}  ", paint("2", &modified), c.messages, cost);
        if layout.model > 0 {
            line += &format!("{}  ", paint("36", &model_cell(c.model.as_deref().unwrap_or("-"), layout.model)));
        }
        let mut second = Vec::new();
        if named && layout.name >= MIN_NAME {
            line += &format!("{}  {}", paint("1", &term::pad(&id, layout.id)), cell(&c.name, layout.name));
        } else {
            line += &paint("1", &id);
            if named {
                second.push(cell(&c.name, layout.below));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
        let archived = if c.archived { "[archived] " } else { "" };
        match (&c.last_message_role, &c.last_message_preview) {
            (Some(role), Some(preview)) => second.push(paint("2", &cell(&format!("{archived}{role}: {preview}"), layout.below))),
            _ if c.archived => second.push(paint("2", archived.trim_end())),
            _ => {}
        }
        for text in second {
            writeln!(out, "{:indent$}{}", "", text)?;
        }
    }
    let total = if filter.limit == Some(rows.len()) { queries::count_filtered(conn, filter)? } else { rows.len() };
    if total > rows.len() {
        writeln!(out, "{} of {} (`-n 0` lists them all)", super::grouped(rows.len() as u64), super::plural(total as u64, "conversation"))?;
    } else {
        writeln!(out, "{}", super::plural(total as u64, "conversation"))?;
    }
    Ok(())
}
