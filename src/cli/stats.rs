//! `sessiondb stats [CHAT_ID]`: figures across conversations, or for one.

use super::term::{self, say};
use super::{human_duration, human_tokens, Failure};
use sessiondb::ops::{self, Selection};
use sessiondb::store::disk::{self, DiskUse, Part};
use sessiondb::store::stats::{self, Breakdown};
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// One conversation in detail
    chat_id: Option<String>,
    /// Only conversations modified since YYYY-MM-DD (UTC), or Nd / Nh ago
    #[arg(long, value_name = "DATE", conflicts_with = "chat_id")]
    since: Option<String>,
    /// Also break cost and tokens down by period or by model
    #[arg(long, value_enum, conflicts_with = "chat_id")]
    by: Option<By>,
    /// Include test and eval conversations
    #[arg(long)]
    all: bool,
    /// Print the figures as JSON
    #[arg(long)]
    pub(crate) json: bool,
    /// Only conversations of this source (the logs root they are read from)
    #[arg(long, value_name = "NAME", conflicts_with = "chat_id")]
    source: Option<String>,
    /// What the store takes on disk instead: by part (rows, texts, attachments, each search
    /// index, free pages, write-ahead log) and by source, beside the logs it holds
    #[arg(long, conflicts_with_all = ["chat_id", "since", "by", "all", "source"])]
    disk: bool,
}

/// `--by`: the command line's names for [`Breakdown`].
#[derive(Clone, Copy, clap::ValueEnum)]
enum By {
    Day,
    Week,
    Month,
    Model,
}

impl From<By> for Breakdown {
    fn from(by: By) -> Self {
        match by {
            By::Day => Breakdown::Day,
            By::Week => Breakdown::Week,
            By::Month => Breakdown::Month,
            By::Model => Breakdown::Model,
        }
    }
}

/// A cost of the JSON data, as gptme shows one ([`super::short_dollars`]).
fn cost(v: &serde_json::Value) -> String {
    super::short_dollars(v.as_f64())
}

/// `key=count, …` of a JSON object of counts.
fn counts(v: &serde_json::Value) -> String {
    v.as_object().map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

/// An RFC 3339 time as local `YYYY-MM-DD HH:MM`, as gptme shows the oldest and newest.
fn local_minute(v: &serde_json::Value) -> String {
    let text = v.as_str().unwrap_or("");
    chrono::DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M").to_string()).unwrap_or_else(|_| text.to_owned())
}

/// What share of the input tokens were read from the cache, as a whole percentage.
fn cached_share(input: i64, cache_read: i64) -> i64 {
    if input > 0 {
        (cache_read as f64 / input as f64 * 100.0).round() as i64
    } else {
        0
    }
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    if args.disk {
        let used = disk::disk_use(store)?;
        let outlook = ArchiveOutlook::of(store)?;
        if args.json {
            let mut out = used.to_json();
            out["archive"] = serde_json::json!({
                "archived": outlook.archived,
                "idle_days": IDLE_DAYS,
                "idle_conversations": outlook.idle,
                "idle_bytes": outlook.idle_bytes,
            });
            super::print_json(&out);
        } else {
            print_disk(&used);
            outlook.print();
        }
        return Ok(0);
    }
    let conn = store.connection()?;
    let data = match &args.chat_id {
        Some(id) => stats::conversation(&conn, id)?,
        None => {
            let since = args.since.as_deref().map(|s| super::parse_since(s).map(|t| (t, s.to_owned()))).transpose()?;
            let source = args.source.as_deref().map(|name| sessiondb::store::sources::named(&conn, name)).transpose()?;
            stats::overview(&conn, since, args.all, args.by.map(Breakdown::from), source.map(|s| s.id))?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&data).expect("serialisable"));
        return Ok(0);
    }
    let width = super::terminal_width(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    if args.chat_id.is_some() {
        print_conversation(&data);
    } else {
        print_overview(&data, args.since.as_deref(), width);
    }
    Ok(0)
}

/// The costs that are not numbers, left out of the figures (`costs_left_out`), said below them
/// in at most `width` cells (`None`: whole).
fn left_out(data: &serde_json::Value, width: Option<usize>) {
    let Some(left) = data.get("costs_left_out") else { return };
    let ids: Vec<&str> = left["conversations"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
    let shown = ids.iter().take(3).map(|id| term::visible_line(id).into_owned()).collect::<Vec<_>>().join(", ");
    let more = if ids.len() > 3 { format!(" and {} more", ids.len() - 3) } else { String::new() };
    let line = format!(
        "  (left out: {} that {} not a number, in {shown}{more})",
        super::plural(n(&left["messages"]) as u64, "cost"),
        if n(&left["messages"]) == 1 { "is" } else { "are" }
    );
    say!("{}", width.map_or(line.clone(), |w| term::cut(&line, w)));
}

fn n(v: &serde_json::Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// One conversation: what gptme's `chats stats ID` shows.
fn print_conversation(data: &serde_json::Value) {
    say!("Conversation Stats: {}", data["name"].as_str().unwrap_or(""));
    say!("{}", "=".repeat(40));
    say!("  ID:                   {}", data["id"].as_str().unwrap_or(""));
    if let Some(source) = data["source"].as_str() {
        say!("  Source:               {source}");
    }
    if let Some(agent) = data["agent_name"].as_str() {
        say!("  Agent:                {agent}");
    }
    if let Some(model) = data["model"].as_str() {
        say!("  Model:                {model}");
    }
    say!("  Messages:             {}", n(&data["messages"]["total"]));
    say!("  By role:              {}", counts(&data["messages"]["by_role"]));
    say!("  Tool calls:           {}", n(&data["tool_calls"]["total"]));
    if data["tool_calls"]["by_tool"].as_object().is_some_and(|m| !m.is_empty()) {
        say!("  By tool:              {}", counts(&data["tool_calls"]["by_tool"]));
    }
    say!("  Started:              {}", data["started"].as_str().unwrap_or("-"));
    say!("  Ended:                {}", data["ended"].as_str().unwrap_or("-"));
    say!("  Duration:             {}", human_duration(n(&data["duration_seconds"])));
    say!("  Workspace:            {}", data["workspace"].as_str().unwrap_or("-"));
    let u = &data["usage"];
    if n(&u["total_tokens"]) != 0 || u["cost"].as_f64() != Some(0.0) {
        say!("\nToken Usage & Cost");
        say!("  Input tokens:         {:>8}  ({}% cached)", human_tokens(n(&u["input_tokens"])), cached_share(n(&u["input_tokens"]), n(&u["cache_read_tokens"])));
        say!("  Output tokens:        {:>8}", human_tokens(n(&u["output_tokens"])));
        say!("  Cache writes:         {:>8}", human_tokens(n(&u["cache_creation_tokens"])));
        say!("  Total tokens:         {:>8}", human_tokens(n(&u["total_tokens"])));
        say!("  Total cost:           {:>9}", cost(&u["cost"]));
    }
    left_out(data, None);
    if let Some(last) = data["last_message"].as_object() {
        say!("\nLast Message");
        say!("  {}: {}", last.get("role").and_then(|r| r.as_str()).unwrap_or(""), last.get("preview").and_then(|p| p.as_str()).unwrap_or(""));
    }
}

/// Every conversation (or those since `since`): what gptme's `chats stats` shows, plus the
/// role counts, cache writes and the `--by` breakdown; tables fit `width` columns.
fn print_overview(data: &serde_json::Value, since: Option<&str>, width: usize) {
    if n(&data["total_conversations"]) == 0 {
        say!("No conversations found.");
        return;
    }
    say!("Conversation Statistics{}", since.map(|s| format!(" (since {s})")).unwrap_or_default());
    say!("{}", "=".repeat(40));
    say!("  Total conversations:  {}", n(&data["total_conversations"]));
    say!("  Total messages:       {}  ({})", n(&data["total_messages"]), counts(&data["by_role"]));
    say!("  Avg messages/conv:    {:.1}", data["avg_messages_per_conversation"].as_f64().unwrap_or(0.0));
    say!("  Median messages/conv: {}", data["median_messages_per_conversation"]);
    say!("  Oldest:               {}", local_minute(&data["oldest"]));
    say!("  Newest:               {}", local_minute(&data["newest"]));
    if data.get("conversations_last_7d").is_some() {
        say!("\nRecent Activity");
        say!("  Last 7 days:   {} conversations", n(&data["conversations_last_7d"]));
        say!("  Last 30 days:  {} conversations", n(&data["conversations_last_30d"]));
    }
    let total = n(&data["total_conversations"]).max(1) as f64;
    if let Some(sources) = data["by_source"].as_object() {
        say!("\nBy Source");
        for (name, s) in sources {
            say!("  {}  {:>5} convs  {:>6} msgs  {:>9}", term::visible_line(name), n(&s["conversations"]), n(&s["messages"]), cost(&s["cost"]));
        }
    }
    if let Some(agents) = data["by_agent"].as_object().filter(|a| !a.is_empty()) {
        say!("\nBy Agent");
        for (agent, count) in agents {
            say!("  {:20}  {:>5} ({:>5.1}%)", agent, n(count), n(count) as f64 / total * 100.0);
        }
    }
    // "  MODEL  NNNNN convs  NNNNNN tok  NNNNNNNNN": the model's column takes what is left.
    let figures = 2 + 2 + 5 + 6 + 2 + 6 + 4 + 2 + 9;
    let model_width = width.saturating_sub(figures).clamp(12, 60);
    let row = |label: &str, m: &serde_json::Value| {
        // Cut from the start: a model's name ends with what tells it apart.
        let label = term::pad(&term::cut_start(&term::visible_line(label), model_width), model_width);
        let tok = n(&m["input_tokens"]).saturating_add(n(&m["output_tokens"]));
        say!("  {label}  {:>5} convs  {:>6} tok  {:>9}", n(&m["conversations"]), human_tokens(tok), cost(&m["cost"]));
    };
    say!("\nBy Model");
    for (model, m) in data["by_model"].as_object().into_iter().flatten() {
        row(model, m);
    }
    if let Some(rows) = data.get("breakdown").and_then(|b| b.as_object()) {
        say!("\nBreakdown");
        for (key, m) in rows {
            row(key, m);
        }
    }
    let (input, output) = (n(&data["total_input_tokens"]), n(&data["total_output_tokens"]));
    say!("\nToken Usage & Cost");
    say!("  Input tokens:   {:>8}  ({}% cached)", human_tokens(input), cached_share(input, n(&data["total_cache_read_tokens"])));
    say!("  Output tokens:  {:>8}", human_tokens(output));
    say!("  Cache writes:   {:>8}", human_tokens(n(&data["total_cache_creation_tokens"])));
    say!("  Total tokens:   {:>8}", human_tokens(input.saturating_add(output)));
    say!("  Total cost:     {:>9}", cost(&data["total_cost"]));
    left_out(data, Some(width));
    if let Some(days) = data["by_day"].as_object().filter(|d| !d.is_empty()) {
        say!("\nDaily Activity (last {} days)", days.len());
        let most = days.values().map(n).max().unwrap_or(0).max(1);
        let bar_width = width.saturating_sub(24).clamp(1, 50) as i64;
        for (day, count) in days {
            let weekday = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").map(|d| d.format("%a").to_string()).unwrap_or_default();
            let count = n(count);
            // One mark a conversation, scaled down only when the busiest day would not fit.
            let marks = if most > bar_width { (count * bar_width / most).max(i64::from(count > 0)) } else { count };
            let bar = "#".repeat(marks as usize);
            say!("  {day} ({weekday}): {count:>3} {bar}");
        }
    }
}

/// `stats --disk`: the store's parts, its size against the logs', and each source's share.
/// How long a conversation untouched counts as idle, for what `archive` would free.
const IDLE_DAYS: i64 = 90;

/// What `sessiondb archive` would free in gptme's logs roots on this machine, and what it has
/// taken out already.
struct ArchiveOutlook {
    /// Conversations archived (out of their roots, kept in the store).
    archived: usize,
    /// Conversations in their roots not modified in [`IDLE_DAYS`] days, and their bytes there.
    idle: usize,
    idle_bytes: u64,
}

impl ArchiveOutlook {
    fn of(store: &Store) -> Result<ArchiveOutlook, Failure> {
        let until = chrono::Utc::now().timestamp() - IDLE_DAYS * 86_400;
        let idle = ops::archive_candidates(store, &Selection { until: Some(until as f64), ..Selection::default() })?.found;
        let archived = ops::restore_candidates(store, &Selection::default())?.found.len();
        Ok(ArchiveOutlook { archived, idle: idle.len(), idle_bytes: idle.iter().map(|c| c.bytes).sum() })
    }

    fn print(&self) {
        if self.archived == 0 && self.idle == 0 {
            return;
        }
        let n = |count: usize| super::plural(count as u64, "conversation");
        say!("\ngptme's logs roots");
        if self.archived > 0 {
            say!("  {} archived: out of the roots, kept whole here (`sessiondb restore`)", n(self.archived));
        }
        if self.idle > 0 {
            say!(
                "  {} not modified in {IDLE_DAYS} days hold {} there: `sessiondb archive --before {IDLE_DAYS}d` would free it",
                n(self.idle),
                super::human_bytes(self.idle_bytes)
            );
        }
    }
}

fn print_disk(used: &DiskUse) {
    let size = |b: u64| super::human_bytes(b);
    say!("Store: {}", term::visible_line(&used.store));
    let against = match used.ratio() {
        Some(r) => format!(", {r:.2} of the {} of logs it holds", size(used.logs_bytes)),
        None => String::new(),
    };
    say!("  {}{against}", size(used.total()));
    say!("");
    for (part, bytes) in &used.parts {
        let share = if used.total() > 0 { *bytes as f64 / used.total() as f64 * 100.0 } else { 0.0 };
        say!("  {:28} {:>10}  {share:>5.1}%", part.label(), size(*bytes));
    }
    if used.bytes(Part::Free) > used.total() / 10 {
        say!("\n`sessiondb compact` gives the free pages back to the file system.");
    }
    if used.by_source.is_empty() {
        return;
    }
    say!("\nBy source (logs: the files' bytes; texts: as stored, compressed)");
    let width = used.by_source.iter().map(|s| term::cells(&term::visible_line(&s.label))).max().unwrap_or(0).max(6);
    say!("  {}  {:>6}  {:>8}  {:>10}  {:>10}  {:>11}", term::pad("source", width), "convs", "msgs", "logs", "texts", "attachments");
    for s in &used.by_source {
        say!(
            "  {}  {:>6}  {:>8}  {:>10}  {:>10}  {:>11}",
            term::pad(&term::visible_line(&s.label), width),
            s.conversations,
            s.messages,
            size(s.logs_bytes),
            size(s.texts_bytes),
            size(s.attachments_bytes)
        );
    }
}
