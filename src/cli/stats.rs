//! `sessiondb stats [CHAT_ID]`: figures across conversations, or for one.

use super::term::{self, say};
use super::{dollars, Failure};
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
    json: bool,
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

fn tokens(n: i64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1_000 {
        format!("{:.1}K", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let data = match &args.chat_id {
        Some(id) => stats::conversation(&conn, id)?,
        None => {
            let since = args.since.as_deref().map(|s| super::parse_since(s).map(|t| (t, s.to_owned()))).transpose()?;
            stats::overview(&conn, since, args.all, args.by.map(Breakdown::from))?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&data).expect("serialisable"));
        return Ok(0);
    }
    let n = |v: &serde_json::Value| v.as_i64().unwrap_or(0);
    if args.chat_id.is_some() {
        say!("Conversation Stats: {}", data["name"].as_str().unwrap_or(""));
        say!("  ID:          {}", data["id"].as_str().unwrap_or(""));
        say!("  Model:       {}", data["model"].as_str().unwrap_or("-"));
        say!(
            "  Messages:    {} ({})",
            n(&data["messages"]["total"]),
            data["messages"]["by_role"].as_object().map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")).unwrap_or_default()
        );
        say!("  Tool calls:  {}", n(&data["tool_calls"]["total"]));
        say!("  Started:     {}", data["started"].as_str().unwrap_or(""));
        say!("  Ended:       {}", data["ended"].as_str().unwrap_or(""));
        let u = &data["usage"];
        say!("  Tokens:      {} in / {} out ({} cache read)", tokens(n(&u["input_tokens"])), tokens(n(&u["output_tokens"])), tokens(n(&u["cache_read_tokens"])));
        say!("  Cost:        {}", dollars(u["cost"].as_f64()));
        return Ok(0);
    }
    if n(&data["total_conversations"]) == 0 {
        say!("No conversations found.");
        return Ok(0);
    }
    say!("Conversation Statistics{}", args.since.as_ref().map(|s| format!(" (since {s})")).unwrap_or_default());
    say!("  Conversations:  {}", n(&data["total_conversations"]));
    say!(
        "  Messages:       {} ({} avg, by role: {})",
        n(&data["total_messages"]),
        data["avg_messages_per_conversation"],
        data["by_role"].as_object().map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")).unwrap_or_default()
    );
    say!("  Oldest/newest:  {} / {}", data["oldest"].as_str().unwrap_or(""), data["newest"].as_str().unwrap_or(""));
    say!("  Cost:           {}", dollars(data["total_cost"].as_f64()));
    say!(
        "  Tokens:         {} in / {} out / {} cache read / {} cache creation",
        tokens(n(&data["total_input_tokens"])),
        tokens(n(&data["total_output_tokens"])),
        tokens(n(&data["total_cache_read_tokens"])),
        tokens(n(&data["total_cache_creation_tokens"]))
    );
    // A row: the key, then 49 cells of figures. The key column fits the terminal (or
    // $COLUMNS), 12 to 40 cells, cut in cells; to a pipe or a file it is 40 and nothing is cut.
    let key_width = {
        use std::io::IsTerminal;
        let terminal = std::io::stdout().is_terminal();
        let fit = terminal || std::env::var_os("COLUMNS").is_some();
        if fit {
            super::terminal_width(terminal).saturating_sub(2 + 1 + 49).clamp(12, 40)
        } else {
            usize::MAX
        }
    };
    let row = |key: &str, m: &serde_json::Value| {
        let key = if key_width == usize::MAX { term::pad(key, 40) } else { term::pad(&term::cut(&term::visible_line(key), key_width), key_width) };
        say!(
            "  {key} {:>5} conv  {:>10}  {:>8} in  {:>8} out",
            n(&m["conversations"]),
            dollars(m["cost"].as_f64()),
            tokens(n(&m["input_tokens"])),
            tokens(n(&m["output_tokens"]))
        );
    };
    say!("\nBy model:");
    for (model, m) in data["by_model"].as_object().into_iter().flatten() {
        row(model, m);
    }
    if let Some(rows) = data.get("breakdown").and_then(|b| b.as_object()) {
        say!("\nBreakdown:");
        for (key, m) in rows {
            row(key, m);
        }
    }
    Ok(0)
}
