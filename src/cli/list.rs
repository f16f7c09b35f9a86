//! `sessiondb list [--json] [--all] [-n N]`.

use std::io::Write;

use super::Failure;
use sessiondb::codec::timestamp::format_utc;
use sessiondb::store::queries::{self, ConversationSummary, ListFilter, SortBy};
use sessiondb::store::{Store, StoreError};

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON with the field names of `gptme-util chats list --json`
    #[arg(long)]
    json: bool,
    /// Include test and eval conversations (ids starting with `tmp` or `test-`, or containing `gptme-evals-`)
    #[arg(long)]
    all: bool,
    /// Show at most N conversations (default: all of them; gptme's `chats list` stops at 20)
    #[arg(short = 'n', long = "limit", value_name = "N")]
    limit: Option<usize>,
    /// Only conversations whose last model is M
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
}

pub fn summary_json(c: &ConversationSummary) -> SummaryJson<'_> {
    let empty: &serde_json::value::RawValue = serde_json::from_str("{}").expect("valid");
    SummaryJson {
        id: &c.chat_id,
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
    }
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let filter = ListFilter {
        include_test: args.all,
        limit: args.limit,
        model: args.model,
        since: args.since.as_deref().map(super::parse_since).transpose()?,
        until: args.until.as_deref().map(super::parse_since).transpose()?,
        name: args.name,
        sort: args.sort.into(),
        reverse: args.reverse,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = if args.json { write_json(&mut out, &conn, &filter) } else { write_table(&mut out, &conn, &filter) };
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
    queries::visit_filtered(conn, filter, |c| seq.serialize_element(&summary_json(&c)).map_err(|e| ListError::Io(e.into())))?;
    seq.end().map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// Text for one table cell: control characters (a tab in a name, say) shown escaped so that
/// they cannot break the layout or drive the terminal; cut to `width` characters.
fn cell(text: &str, width: usize) -> String {
    let clean = super::term::visible_line(text);
    if clean.chars().count() <= width {
        clean.into_owned()
    } else {
        clean.chars().take(width.saturating_sub(1)).collect::<String>() + "…"
    }
}

/// The table: fixed columns for time, count, cost and model; the name and the last message's
/// preview take what is left of the terminal's width. Colour only on a terminal, and not with
/// `NO_COLOR`.
fn write_table(out: &mut impl Write, conn: &sessiondb::store::Connection, filter: &ListFilter) -> Result<(), ListError> {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let colour = terminal && std::env::var_os("NO_COLOR").is_none();

    let paint = |code: &str, text: &str| if colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() };
    const FIXED: usize = 16 + 2 + 5 + 2 + 9 + 2 + 22 + 2;
    // Name and preview fit a terminal (or $COLUMNS); written to a pipe or a file, nothing is cut.
    let rest = if terminal || std::env::var_os("COLUMNS").is_some() { super::terminal_width(terminal).max(60).saturating_sub(FIXED).max(12) } else { usize::MAX };
    let header = format!("{:<16}  {:>5}  {:>9}  {:<22}  {}", "MODIFIED (UTC)", "MSGS", "COST", "MODEL", "NAME");
    writeln!(out, "{}", paint("1", &header))?;
    let mut count = 0usize;
    queries::visit_filtered(conn, filter, |c| -> Result<(), ListError> {
        count += 1;
        let modified = format_utc(c.modified);
        let modified = modified.get(..16).unwrap_or(&modified).replace('T', " ");
        let cost = c.total_cost.map_or("NaN".to_owned(), |cost| format!("${cost:.4}"));
        let model = cell(c.model.as_deref().unwrap_or("-"), 22);
        writeln!(out, "{}  {:>5}  {:>9}  {}  {}", paint("2", &modified), c.messages, cost, paint("36", &format!("{model:<22}")), paint("1", &cell(&c.name, rest)))?;
        if let (Some(role), Some(preview)) = (&c.last_message_role, &c.last_message_preview) {
            let line = format!("{}: {}", role, preview);
            writeln!(out, "{:FIXED$}{}", "", paint("2", &cell(&line, rest)))?;
        }
        Ok(())
    })?;
    writeln!(out, "{count} conversations")?;
    Ok(())
}
