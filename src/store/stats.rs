//! Statistics across conversations and for one, with gptme's figures (`gptme-util chats stats
//! --json`) and more. The overview reads the per-conversation totals only; role counts are one
//! indexed aggregate over the main branches.
//!
//! Invariant: a cost that is not a number (a damaged line's `"cost": NaN`) never turns a total
//! into NaN, as it does in gptme's figures and in `list`: it is left out of every sum here, and
//! the answer says so (`costs_left_out`: how many, and in which conversations). Only the
//! conversations whose stored cost is not a number are read again for it.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::queries::{self, ConversationSummary, ListFilter};
use super::{modify, Connection, StoreError};
use crate::codec::timestamp::{self, format_utc};

/// `round(x, 4)` as Python does it.
fn round4(x: f64) -> f64 {
    format!("{x:.4}").parse().unwrap_or(x)
}

fn cost_json(x: f64) -> Value {
    if x.is_finite() {
        json!(round4(x))
    } else {
        Value::Null
    }
}

/// The costs of the conversations whose stored total is not a number, with those that are not
/// numbers left out ([`super::totals::priced_costs`]), by `(source, chat id)`.
type Priced = std::collections::HashMap<(String, String), super::totals::PricedCosts>;

fn priced(conn: &Connection, convs: &[&ConversationSummary]) -> Result<Priced, StoreError> {
    let mut priced = Priced::new();
    for c in convs.iter().filter(|c| c.total_cost.is_none()) {
        let document = queries::branch_document(conn, &super::sources::qualified(&c.source, &c.chat_id), crate::layout::MAIN)?;
        priced.insert((c.source.clone(), c.chat_id.clone()), super::totals::priced_costs(conn, document)?);
    }
    Ok(priced)
}

/// `{"messages": N, "conversations": [ids]}`: the costs left out of the figures, or `None`.
fn left_out(priced: &Priced) -> Option<Value> {
    let messages: u64 = priced.values().map(|p| p.left_out).sum();
    let mut ids: Vec<&str> = priced.iter().filter(|(_, p)| p.left_out > 0).map(|((_, id), _)| id.as_str()).collect();
    ids.sort_unstable();
    (messages > 0).then(|| json!({"messages": messages, "conversations": ids}))
}

fn utc_day(t: f64) -> String {
    format_utc(t).get(..10).unwrap_or_default().to_owned()
}

/// How to break the overview's cost and tokens down, beyond gptme's own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakdown {
    Day,
    Week,
    Month,
    Model,
}

fn period(t: f64, by: Breakdown) -> String {
    let day = utc_day(t);
    match by {
        Breakdown::Month => day[..7].to_owned(),
        Breakdown::Week => {
            let date = chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d").unwrap_or_default();
            let week = chrono::Datelike::iso_week(&date);
            format!("{}-W{:02}", week.year(), week.week())
        }
        _ => day,
    }
}

/// The overview, as gptme's `conversation_stats(as_json=True)` computes it from the same
/// conversations (test ones only with `include_test`), plus `by_role`,
/// `total_cache_creation_tokens` and, with `by`, a `breakdown`.
///
/// `source`: only the conversations of that source (a row id of `sources`). With more than one
/// source in the store, the figures also go `by_source` (conversations, messages, cost).
pub fn overview(conn: &Connection, since: Option<(f64, String)>, include_test: bool, by: Option<Breakdown>, source: Option<i64>) -> Result<Value, StoreError> {
    let all = queries::list_filtered(conn, &ListFilter { include_test, source, ..ListFilter::default() })?;
    let since_ts = since.as_ref().map(|(t, _)| *t);
    let convs: Vec<&ConversationSummary> = all.iter().take_while(|c| since_ts.is_none_or(|t| c.modified >= t)).collect();
    if convs.is_empty() {
        return Ok(json!({"total_conversations": 0}));
    }
    let display = |c: &ConversationSummary| if since_ts.is_some() { c.modified } else { c.created };
    let total_messages: i64 = convs.iter().map(|c| c.messages).sum();
    let mut counts: Vec<i64> = convs.iter().map(|c| c.messages).collect();
    counts.sort_unstable();
    let n = counts.len();
    let median = if n % 2 == 1 { json!(counts[n / 2]) } else { json!((counts[n / 2 - 1] + counts[n / 2]) as f64 / 2.0) };
    let oldest = convs.iter().map(|c| display(c)).fold(f64::INFINITY, f64::min);
    let newest = convs.iter().map(|c| c.modified).fold(f64::NEG_INFINITY, f64::max);
    let priced = priced(conn, &convs)?;
    let cost = |c: &ConversationSummary| c.total_cost.or_else(|| priced.get(&(c.source.clone(), c.chat_id.clone())).map(|p| p.total)).unwrap_or(0.0);
    let mut by_model: Vec<(String, i64, f64, i64, i64)> = Vec::new();
    let mut daily: BTreeMap<String, i64> = BTreeMap::new();
    for c in &convs {
        let model = c.model.clone().unwrap_or_else(|| "unknown".into());
        match by_model.iter_mut().find(|m| m.0 == model) {
            Some(m) => {
                m.1 += 1;
                m.2 += cost(c);
                m.3 = m.3.saturating_add(c.total_input_tokens);
                m.4 = m.4.saturating_add(c.total_output_tokens);
            }
            None => by_model.push((model, 1, cost(c), c.total_input_tokens, c.total_output_tokens)),
        }
        *daily.entry(utc_day(display(c))).or_default() += 1;
    }
    by_model.sort_by_key(|m| std::cmp::Reverse(m.1)); // stable: ties keep first-seen order
    let now = chrono::Utc::now();
    let days_ago = |day: &str| -> i64 {
        chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").map_or(i64::MAX, |d| (now - d.and_hms_opt(0, 0, 0).unwrap().and_utc()).num_days())
    };
    let hist_days = match since_ts {
        Some(t) => ((now.timestamp() as f64 - t) / 86_400.0).floor().clamp(1.0, 365.0) as i64,
        None => 14,
    };
    let mut by_day = Map::new();
    for i in 0..hist_days {
        let day = (now - chrono::Duration::days(i)).format("%Y-%m-%d").to_string();
        let count = daily.get(&day).copied().unwrap_or(0);
        by_day.insert(day, json!(count));
    }
    let mut data = json!({
        "total_conversations": convs.len(),
        "total_messages": total_messages,
        "avg_messages_per_conversation": (total_messages as f64 / convs.len() as f64 * 10.0).round() / 10.0,
        "median_messages_per_conversation": median,
        "oldest": format_utc(oldest),
        "newest": format_utc(newest),
        "total_cost": cost_json(convs.iter().map(|c| cost(c)).sum()),
        "total_input_tokens": convs.iter().map(|c| c.total_input_tokens).fold(0i64, i64::saturating_add),
        "total_output_tokens": convs.iter().map(|c| c.total_output_tokens).fold(0i64, i64::saturating_add),
        "total_cache_read_tokens": convs.iter().map(|c| c.total_cache_read_tokens).fold(0i64, i64::saturating_add),
        "by_agent": {"interactive": convs.len()},
        "by_model": by_model.iter().map(|(m, n, c, i, o)| (m.clone(), json!({"conversations": n, "cost": cost_json(*c), "input_tokens": i, "output_tokens": o}))).collect::<Map<_, _>>(),
        "by_day": by_day,
        "total_cache_creation_tokens": convs.iter().map(|c| c.total_cache_creation_tokens).fold(0i64, i64::saturating_add),
        "by_role": role_counts(conn, &convs)?,
    });
    if let Some(left_out) = left_out(&priced) {
        data["costs_left_out"] = left_out;
    }
    if super::sources::count_in_use(conn)? > 1 {
        let mut by_source: BTreeMap<&str, (i64, i64, f64)> = BTreeMap::new();
        for c in &convs {
            let s = by_source.entry(c.source.as_str()).or_default();
            s.0 += 1;
            s.1 += c.messages;
            s.2 += cost(c);
        }
        data["by_source"] = by_source
            .into_iter()
            .map(|(name, (n, m, c))| (name.to_owned(), json!({"conversations": n, "messages": m, "cost": cost_json(c)})))
            .collect::<Map<_, _>>()
            .into();
    }
    match &since {
        Some((_, text)) => data["since"] = json!(text),
        None => {
            data["conversations_last_7d"] = json!(daily.iter().filter(|(d, _)| days_ago(d) < 7).map(|(_, n)| n).sum::<i64>());
            data["conversations_last_30d"] = json!(daily.iter().filter(|(d, _)| days_ago(d) < 30).map(|(_, n)| n).sum::<i64>());
        }
    }
    if let Some(by) = by {
        data["breakdown"] = breakdown(&convs, by, display, &priced);
    }
    Ok(data)
}

/// Messages by role on the main branches of `convs`, from their totals.
fn role_counts(conn: &Connection, convs: &[&ConversationSummary]) -> Result<Value, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {}, c.chat_id, c.role_counts FROM conversations c JOIN sources s ON s.id = c.source_id",
        super::sources::label_sql(conn.engine())
    ))?;
    let stored: std::collections::HashMap<(String, String), String> = stmt.query_map((), |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))?.collect::<Result<_, _>>()?;
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    for c in convs {
        let counts: BTreeMap<String, i64> = stored.get(&(c.source.clone(), c.chat_id.clone())).and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
        for (role, n) in counts {
            *totals.entry(role).or_default() += n;
        }
    }
    Ok(json!(totals))
}

/// Cost and tokens (input, output, cache read, cache creation) per period or per model. Per
/// model uses each message's own model (`models_usage`), not only the conversation's last.
fn breakdown(convs: &[&ConversationSummary], by: Breakdown, display: impl Fn(&ConversationSummary) -> f64, priced: &Priced) -> Value {
    let mut out: BTreeMap<String, (i64, f64, i64, i64, i64, i64)> = BTreeMap::new();
    for c in convs {
        if by == Breakdown::Model {
            let usage: Value = serde_json::from_str(&c.models_usage).unwrap_or_default();
            let repriced = priced.get(&(c.source.clone(), c.chat_id.clone()));
            for (model, u) in usage.as_object().into_iter().flatten() {
                let e = out.entry(model.clone()).or_default();
                e.0 += 1;
                e.1 += match (u["cost"].as_f64(), repriced) {
                    (Some(cost), _) => cost,
                    (None, Some(p)) => p.by_model.iter().find(|(m, _)| m == model).map_or(0.0, |(_, cost)| *cost),
                    (None, None) => f64::NAN,
                };
                e.2 = e.2.saturating_add(u["input_tokens"].as_i64().unwrap_or(0));
                e.3 = e.3.saturating_add(u["output_tokens"].as_i64().unwrap_or(0));
                e.4 = e.4.saturating_add(u["cache_read_tokens"].as_i64().unwrap_or(0));
            }
        } else {
            let e = out.entry(period(display(c), by)).or_default();
            e.0 += 1;
            e.1 += c.total_cost.or_else(|| priced.get(&(c.source.clone(), c.chat_id.clone())).map(|p| p.total)).unwrap_or(f64::NAN);
            e.2 = e.2.saturating_add(c.total_input_tokens);
            e.3 = e.3.saturating_add(c.total_output_tokens);
            e.4 = e.4.saturating_add(c.total_cache_read_tokens);
            e.5 = e.5.saturating_add(c.total_cache_creation_tokens);
        }
    }
    out.into_iter()
        .map(|(k, (n, cost, i, o, cr, cc))| {
            let mut v = json!({"conversations": n, "cost": cost_json(cost), "input_tokens": i, "output_tokens": o, "cache_read_tokens": cr});
            if by != Breakdown::Model {
                v["cache_creation_tokens"] = json!(cc);
            }
            (k, v)
        })
        .collect::<Map<_, _>>()
        .into()
}

/// gptme's tools that a fenced code block can call, by language tag (gptme 0.35.1 with its
/// default tools loaded).
fn tool_for(langtag: &str) -> Option<&'static str> {
    let first = langtag.split_whitespace().next()?;
    Some(match first {
        "py" | "ipython" => "ipython",
        "save" => "save",
        "append" => "append",
        "patch" => "patch",
        "patch_many" => "patch_many",
        "shell" => "shell",
        "tmux" => "tmux",
        "todo" => "todo",
        "memory" => "memory",
        "lessons" => "lessons",
        "recall" => "recall",
        "vision" => "vision",
        "convert" => "convert",
        "chats" => "chats",
        "vent" => "vent",
        "autocommit" => "autocommit",
        "autocompact" => "autocompact",
        "mcp" => "mcp",
        _ => return None,
    })
}

/// Tool calls in an assistant message: fenced blocks whose language tag names a tool.
fn tool_calls(content: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut lines = content.lines();
    while let Some(line) = lines.next() {
        let Some(tag) = line.trim_start().strip_prefix("```") else { continue };
        let tool = tool_for(tag.trim());
        for inner in lines.by_ref() {
            if inner.trim_start() == "```" {
                break;
            }
        }
        if let Some(t) = tool {
            out.push(t);
        }
    }
    out
}

/// One conversation's detail, as gptme's `chats stats ID --json` reports it.
pub fn conversation(conn: &Connection, chat_id: &str) -> Result<Value, StoreError> {
    let summary = queries::conversation_summary(conn, chat_id)?;
    let conv = modify::load_conversation(conn, chat_id)?;
    // gptme counts its loaded log: the active view when there is one, else main.
    let main = modify::loaded_doc(conn, conv.id, crate::layout::MAIN)?
        .ok_or_else(|| StoreError::NoBranch { chat_id: chat_id.to_owned(), branch: crate::layout::MAIN.into() })?;
    // Streamed: memory does not grow with the conversation (only its first and last times are kept).
    let mut total = 0usize;
    let mut by_role: BTreeMap<String, i64> = BTreeMap::new();
    let mut by_tool: Vec<(&str, i64)> = Vec::new();
    let (mut first, mut last_time) = (None, None);
    queries::with_document_lines(conn, main.id, 0, |lines| {
        for m in lines.filter_map(|l| l.message) {
            total += 1;
            *by_role.entry(m.role.as_str().to_owned()).or_default() += 1;
            // gptme treats naive times as UTC here; a missing one is the file's mtime.
            let t = m.timestamp.as_deref().and_then(timestamp::parse).map_or(summary.modified, |t| {
                let utc = timestamp::Timestamp { offset_seconds: Some(t.offset_seconds.unwrap_or(0)), ..t };
                utc.epoch_seconds()
            });
            first.get_or_insert(t);
            last_time = Some(t);
            if m.role == crate::model::Role::Assistant {
                for tool in tool_calls(&m.content) {
                    match by_tool.iter_mut().find(|(t, _)| *t == tool) {
                        Some(e) => e.1 += 1,
                        None => by_tool.push((tool, 1)),
                    }
                }
            }
        }
    })?;
    by_tool.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let started = first.unwrap_or(summary.created);
    let ended = last_time.unwrap_or(summary.modified);
    let last = match (&summary.last_message_role, &summary.last_message_preview) {
        (role, Some(preview)) => json!({"role": role, "preview": preview}),
        _ => Value::Null,
    };
    let mut data = json!({
        "id": summary.chat_id,
        "name": summary.name,
        "workspace": summary.workspace,
        "agent_name": Value::Null,
        "model": summary.model,
        "started": format_utc(started),
        "ended": format_utc(ended),
        "duration_seconds": (ended - started).max(0.0) as i64,
        "messages": {"total": total, "by_role": by_role},
        "tool_calls": {"total": by_tool.iter().map(|(_, n)| n).sum::<i64>(), "by_tool": by_tool.iter().map(|(t, n)| ((*t).to_owned(), json!(n))).collect::<Map<_, _>>()},
        "usage": {
            "input_tokens": summary.total_input_tokens,
            "output_tokens": summary.total_output_tokens,
            "cache_read_tokens": summary.total_cache_read_tokens,
            "cache_creation_tokens": summary.total_cache_creation_tokens,
            "total_tokens": summary.total_input_tokens.saturating_add(summary.total_output_tokens),
            "cost": cost_json(summary.total_cost.unwrap_or(f64::NAN)),
        },
        "last_message": last,
    });
    if summary.total_cost.is_none() {
        let priced = priced(conn, &[&summary])?;
        data["usage"]["cost"] = cost_json(priced.values().map(|p| p.total).sum());
        if let Some(left_out) = left_out(&priced) {
            data["costs_left_out"] = left_out;
        }
    }
    // With more than one source, which one (`SOURCE:CHAT` names the conversation).
    if super::sources::count_in_use(conn)? > 1 {
        data["source"] = json!(summary.source);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_are_fenced_blocks_naming_tools() {
        let content = "Let me run it:\n```shell\nls\n```\nand save:\n```save hello.py\nprint(1)\n```\n```python\nnot a tool\n```\n```py\n1+1\n```";
        assert_eq!(tool_calls(content), ["shell", "save", "ipython"]);
    }

    #[test]
    fn periods() {
        assert_eq!(period(0.0, Breakdown::Day), "1970-01-01");
        assert_eq!(period(0.0, Breakdown::Month), "1970-01");
        assert_eq!(period(0.0, Breakdown::Week), "1970-W01");
    }
}
