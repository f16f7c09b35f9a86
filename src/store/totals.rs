//! Per-conversation listing totals, computed the way gptme's `get_conversations(detail=True)`
//! computes them, so `sessiondb list` and `gptme-util chats list` agree figure for figure.
//!
//! gptme derives them from the raw bytes of `conversation.jsonl` (a line counts when it is not
//! blank, the preview line is found by a byte search for `"user"`/`"assistant"`, metadata is
//! read from lines containing `"metadata"`). The accumulator is fed the same bytes, line by line,
//! so totals can be kept up to date on append without re-reading anything.

use super::sql::params;

use super::{Connection, StoreError};
use crate::codec::json::{self, Json};
use crate::codec::message_line::{decode_line, LineContent};
use crate::codec::timestamp;

/// Running totals over the lines of a main branch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListingTotals {
    pub message_count: i64,
    pub model: Option<String>,
    pub total_cost: f64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_creation_tokens: i64,
    /// `{model: {cost, input_tokens, output_tokens, cache_read_tokens}}`, in first-seen order.
    pub models_usage: Vec<(String, ModelUsage)>,
    /// Role and preview parsed from the last line that mentions a user or assistant role, as
    /// gptme picks it (both `None` when that line yields no preview).
    pub last_message: (Option<String>, Option<String>),
    /// The first line gptme would load as a message: `None` before one is seen, `Some(None)`
    /// when it has no timestamp.
    pub first_message_time: Option<Option<f64>>,
    /// Messages (lines gptme loads) by role, sorted by role.
    pub role_counts: std::collections::BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelUsage {
    pub cost: f64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
}

fn py_bytes_strip(line: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = line.iter().position(|b| !ws(b)).unwrap_or(line.len());
    let end = line.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    &line[start..end]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

impl ListingTotals {
    /// Feeds the next line of `conversation.jsonl` (without its newline). `decoded` is the
    /// line's decoding when the caller has it (it saves parsing the line again).
    pub fn feed(&mut self, line: &[u8], decoded: Option<&LineContent>) {
        let stripped = py_bytes_strip(line);
        if stripped.is_empty() {
            return;
        }
        self.message_count += 1;
        let owned;
        let decoded = match decoded {
            Some(d) => d,
            None => {
                owned = decode_line(line).content;
                &owned
            }
        };
        if let LineContent::Message(m) = decoded {
            *self.role_counts.entry(m.role.as_str().to_owned()).or_default() += 1;
        }
        if self.first_message_time.is_none() {
            if let LineContent::Message(m) = decoded {
                self.first_message_time = Some(m.timestamp.as_deref().and_then(timestamp::parse).map(|t| t.epoch_seconds()));
            }
        }
        if contains(stripped, b"\"user\"") || contains(stripped, b"\"assistant\"") {
            self.last_message = match decoded {
                LineContent::Message(m) => preview(m.role.as_str(), &m.content),
                _ => parse_preview(stripped),
            };
        }
        if contains(stripped, b"\"metadata\"") {
            // For a message, its metadata is what json.loads(line)["metadata"] gives; other
            // lines (valid JSON that is not a message) are parsed here, as gptme parses them.
            match decoded {
                LineContent::Message(m) => {
                    if let Some(meta @ Json::Object(members)) = &m.metadata {
                        if !members.is_empty() {
                            self.add_metadata(meta);
                        }
                    }
                }
                _ => {
                    if let Some(meta) = line_metadata(stripped) {
                        self.add_metadata(&meta);
                    }
                }
            }
        }
    }

    fn add_metadata(&mut self, meta: &Json) {
        let msg_model = meta.get("model").and_then(Json::as_str).filter(|m| !m.is_empty()).map(str::to_owned);
        if msg_model.is_some() {
            self.model = msg_model.clone();
        }
        // Python's `x.get(k, 0) or 0`: missing, null, false and zero all count as 0.
        let number = |v: Option<&Json>| -> f64 { v.filter(|v| v.is_truthy()).and_then(Json::as_f64).unwrap_or(0.0) };
        let cost = number(meta.get("cost"));
        let source = match meta.get("usage") {
            Some(u) if u.is_truthy() => u,
            _ => meta,
        };
        // Counts beyond i64 (gptme's Python ints have no bound) stop at its maximum: a total
        // is never allowed to wrap round to a small or negative number.
        let tokens = |k: &str| number(source.get(k)) as i64; // `as` saturates
        let cache_read = tokens("cache_read_tokens");
        let cache_creation = tokens("cache_creation_tokens");
        let input = tokens("input_tokens").saturating_add(cache_read).saturating_add(cache_creation);
        let output = tokens("output_tokens");
        self.total_cost += cost;
        self.input_tokens = self.input_tokens.saturating_add(input);
        self.output_tokens = self.output_tokens.saturating_add(output);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(cache_read);
        self.cache_creation_tokens = self.cache_creation_tokens.saturating_add(cache_creation);
        let target = msg_model.or_else(|| self.model.clone()).unwrap_or_else(|| "unknown".to_owned());
        let index = match self.models_usage.iter().position(|(m, _)| *m == target) {
            Some(i) => i,
            None => {
                self.models_usage.push((target, ModelUsage::default()));
                self.models_usage.len() - 1
            }
        };
        let usage = &mut self.models_usage[index].1;
        usage.cost += cost;
        usage.input_tokens = usage.input_tokens.saturating_add(input);
        usage.output_tokens = usage.output_tokens.saturating_add(output);
        usage.cache_read_tokens = usage.cache_read_tokens.saturating_add(cache_read);
    }

    /// The totals of the same lines without their last ones, worked out from the lines removed
    /// (`removed`, in order) and as few kept lines as needed (`kept_last_first`, read lazily
    /// from the last kept line backwards), so that an undo costs the same however long the
    /// branch. `None` when that cannot be done exactly (a count saturated, a cost not finite, a
    /// model whose every use was removed): then recompute.
    pub fn without_suffix(&self, removed: &[&[u8]], kept_last_first: impl Iterator<Item = Vec<u8>>) -> Option<ListingTotals> {
        // What the kept lines end with: the model in effect (only needed when some line names
        // one) and the last line that sets the preview.
        let (mut model_before, mut last_message, mut kept_any) = (None, None, false);
        let need_model = self.model.is_some();
        for line in kept_last_first {
            kept_any = true;
            let mut one = ListingTotals::default();
            one.feed(&line, None);
            if model_before.is_none() && one.model.is_some() {
                model_before = one.model;
            }
            if contains(&line, b"\"user\"") || contains(&line, b"\"assistant\"") {
                last_message.get_or_insert(one.last_message);
            }
            if last_message.is_some() && (model_before.is_some() || !need_model) {
                break;
            }
        }
        if !kept_any {
            return Some(ListingTotals::default());
        }
        let mut gone = ListingTotals { model: model_before.clone(), ..ListingTotals::default() };
        for line in removed {
            gone.feed(line, None);
        }
        let saturated = [self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_creation_tokens].contains(&i64::MAX);
        if saturated || !self.total_cost.is_finite() || !gone.total_cost.is_finite() || gone.message_count >= self.message_count {
            return None;
        }
        let mut kept = self.clone();
        kept.message_count -= gone.message_count;
        kept.model = model_before;
        kept.last_message = last_message.unwrap_or((None, None));
        kept.total_cost -= gone.total_cost;
        kept.input_tokens = kept.input_tokens.checked_sub(gone.input_tokens).filter(|n| *n >= 0)?;
        kept.output_tokens = kept.output_tokens.checked_sub(gone.output_tokens).filter(|n| *n >= 0)?;
        kept.cache_read_tokens = kept.cache_read_tokens.checked_sub(gone.cache_read_tokens).filter(|n| *n >= 0)?;
        kept.cache_creation_tokens = kept.cache_creation_tokens.checked_sub(gone.cache_creation_tokens).filter(|n| *n >= 0)?;
        for (role, n) in &gone.role_counts {
            let count = kept.role_counts.get_mut(role)?;
            *count -= n;
            match *count {
                0 => {
                    kept.role_counts.remove(role);
                }
                c if c < 0 => return None,
                _ => {}
            }
        }
        for (model, used) in &gone.models_usage {
            let (_, usage) = kept.models_usage.iter_mut().find(|(m, _)| m == model)?;
            usage.cost -= used.cost;
            usage.input_tokens = usage.input_tokens.checked_sub(used.input_tokens)?;
            usage.output_tokens = usage.output_tokens.checked_sub(used.output_tokens)?;
            usage.cache_read_tokens = usage.cache_read_tokens.checked_sub(used.cache_read_tokens)?;
            if *usage == ModelUsage::default() || !usage.cost.is_finite() {
                return None; // perhaps used only by the removed lines: only a recount can tell
            }
        }
        Some(kept)
    }

    /// The first message's time (epoch seconds), falling back to `mtime` as gptme does.
    pub fn created(&self, mtime: f64) -> f64 {
        match self.first_message_time {
            Some(Some(t)) => t,
            _ => mtime,
        }
    }

    /// Restores running totals from their stored form, so that more lines can be fed.
    pub fn restore(models_usage_json: &str, base: ListingTotals) -> ListingTotals {
        let mut totals = base;
        totals.models_usage = match json::parse(models_usage_json).map(|p| p.value) {
            Ok(Json::Object(models)) => models
                .into_iter()
                .map(|(model, u)| {
                    let int = |k: &str| u.get(k).and_then(Json::as_i64).unwrap_or(0);
                    let usage = ModelUsage {
                        cost: u.get("cost").and_then(Json::as_f64).unwrap_or(f64::NAN),
                        input_tokens: int("input_tokens"),
                        output_tokens: int("output_tokens"),
                        cache_read_tokens: int("cache_read_tokens"),
                    };
                    (model, usage)
                })
                .collect(),
            _ => Vec::new(),
        };
        totals
    }

    /// `models_usage` as a JSON object (a cost that is not a finite number is `null`, so that
    /// the text is strict JSON).
    pub fn models_usage_json(&self) -> String {
        let object = Json::Object(
            self.models_usage
                .iter()
                .map(|(model, u)| {
                    (
                        model.clone(),
                        Json::Object(vec![
                            ("cost".into(), if u.cost.is_finite() { Json::Float(u.cost) } else { Json::Null }),
                            ("input_tokens".into(), Json::Int(u.input_tokens.to_string())),
                            ("output_tokens".into(), Json::Int(u.output_tokens.to_string())),
                            ("cache_read_tokens".into(), Json::Int(u.cache_read_tokens.to_string())),
                        ]),
                    )
                })
                .collect(),
        );
        json::dump(&object)
    }
}

/// Writes the totals of conversation `conversation_id` (`modified`: conversation.jsonl's mtime).
/// The totals of a branch's lines, recomputed from the store one line at a time.
pub fn recompute(conn: &Connection, document_id: i64) -> Result<ListingTotals, StoreError> {
    let mut totals = ListingTotals::default();
    super::queries::with_document_lines(conn, document_id, 0, |lines| lines.for_each(|l| totals.feed(&l.line(), None)))?;
    Ok(totals)
}

/// A branch's cost with the costs that are not numbers left out: what `stats` sums where
/// gptme's rule ([`ListingTotals`], `list`) makes a conversation's whole cost NaN because one
/// damaged line says `"cost": NaN`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PricedCosts {
    /// The finite costs, added up.
    pub total: f64,
    /// The same by model, attributed as [`ListingTotals::models_usage`] attributes them.
    pub by_model: Vec<(String, f64)>,
    /// How many lines' costs were left out (NaN or infinite).
    pub left_out: u64,
}

/// [`PricedCosts`] of a branch's lines, read from the store one line at a time, each line's
/// cost taken as [`ListingTotals`] takes it.
pub fn priced_costs(conn: &Connection, document_id: i64) -> Result<PricedCosts, StoreError> {
    let mut priced = PricedCosts::default();
    let mut model = None;
    super::queries::with_document_lines(conn, document_id, 0, |lines| {
        for l in lines {
            // One line alone, with the model in effect before it.
            let mut one = ListingTotals { model: model.take(), ..ListingTotals::default() };
            one.feed(&l.line(), None);
            model = one.model.clone();
            for (name, usage) in one.models_usage {
                if !usage.cost.is_finite() {
                    priced.left_out += 1;
                    continue;
                }
                priced.total += usage.cost;
                match priced.by_model.iter_mut().find(|(m, _)| *m == name) {
                    Some(entry) => entry.1 += usage.cost,
                    None => priced.by_model.push((name, usage.cost)),
                }
            }
        }
    })?;
    Ok(priced)
}

pub fn save(conn: &Connection, conversation_id: i64, t: &ListingTotals, modified: f64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE conversations SET created = ?2, modified = ?3, message_count = ?4,
            model = ?5, total_cost = ?6, input_tokens = ?7, output_tokens = ?8, cache_read_tokens = ?9,
            cache_creation_tokens = ?10, models_usage = ?11, last_role = ?12, last_preview = ?13,
            first_message_seen = ?14, first_message_time = ?15, role_counts = ?16
         WHERE id = ?1",
    )?
    .execute(params![
        conversation_id,
        t.created(modified),
        modified,
        t.message_count,
        t.model,
        Some(t.total_cost).filter(|c| c.is_finite()),
        t.input_tokens,
        t.output_tokens,
        t.cache_read_tokens,
        t.cache_creation_tokens,
        t.models_usage_json(),
        t.last_message.0,
        t.last_message.1,
        t.first_message_time.is_some(),
        t.first_message_time.flatten(),
        serde_json::to_string(&t.role_counts).expect("serialisable"),
    ])?;
    Ok(())
}

/// Reads back what [`save`] wrote, ready to be fed more lines.
pub fn load(conn: &Connection, conversation_id: i64) -> Result<ListingTotals, StoreError> {
    let (base, models_usage) = conn.query_row(
        "SELECT message_count, model, total_cost, input_tokens, output_tokens, cache_read_tokens,
                cache_creation_tokens, models_usage, last_role, last_preview, first_message_seen, first_message_time, role_counts
         FROM conversations WHERE id = ?1",
        [conversation_id],
        |r| {
            let seen: bool = r.get(10)?;
            let base = ListingTotals {
                message_count: r.get(0)?,
                model: r.get(1)?,
                total_cost: r.get::<_, Option<f64>>(2)?.unwrap_or(f64::NAN),
                input_tokens: r.get(3)?,
                output_tokens: r.get(4)?,
                cache_read_tokens: r.get(5)?,
                cache_creation_tokens: r.get(6)?,
                models_usage: Vec::new(),
                last_message: (r.get(8)?, r.get(9)?),
                first_message_time: seen.then(|| r.get::<_, Option<f64>>(11)).transpose()?,
                role_counts: serde_json::from_str(&r.get::<_, String>(12)?).unwrap_or_default(),
            };
            Ok((base, r.get::<_, String>(7)?))
        },
    )?;
    Ok(ListingTotals::restore(&models_usage, base))
}

/// `json.loads(line).get("metadata")` when truthy and an object.
fn line_metadata(line: &[u8]) -> Option<Json> {
    let text = std::str::from_utf8(line).ok()?;
    let Json::Object(members) = json::parse(text).ok()?.value else { return None };
    let (_, meta) = members.into_iter().find(|(k, _)| k == "metadata")?;
    matches!(meta, Json::Object(ref m) if !m.is_empty()).then_some(meta)
}

/// gptme's `_parse_preview` of a line that is not a decodable message.
fn parse_preview(line: &[u8]) -> (Option<String>, Option<String>) {
    let Some(value) = std::str::from_utf8(line).ok().and_then(|t| json::parse(t).ok()).map(|p| p.value) else {
        return (None, None);
    };
    let Some(role) = value.get("role").and_then(Json::as_str) else {
        return (None, None);
    };
    preview(role, value.get("content").and_then(Json::as_str).unwrap_or(""))
}

/// The characters of a preview; a longer one is cut there and ends in `...`.
const PREVIEW_CHARS: usize = 100;

/// gptme's preview: only for user and assistant messages; think blocks removed, runs of
/// whitespace collapsed to one space and the ends trimmed (Python's `" ".join(text.split())`),
/// cut at [`PREVIEW_CHARS`] characters + `...`. Built only as far as the cut (one character
/// past it tells that there is one): every message of a conversation is previewed as it is
/// read, and making each one from its whole text was a fifth of an import's reading thread.
fn preview(role: &str, content: &str) -> (Option<String>, Option<String>) {
    if role != "user" && role != "assistant" {
        return (None, None);
    }
    let mut out = String::new();
    let (mut chars, mut gap) = (0, false);
    'kept: for piece in kept_pieces(content) {
        for c in piece.chars() {
            if crate::codec::pystr::is_space(c) {
                gap = chars > 0;
                continue;
            }
            if gap {
                out.push(' ');
                chars += 1;
                gap = false;
            }
            out.push(c);
            chars += 1;
            if chars > PREVIEW_CHARS {
                break 'kept;
            }
        }
    }
    if chars == 0 {
        return (None, None);
    }
    if chars > PREVIEW_CHARS {
        out = out.chars().take(PREVIEW_CHARS).collect();
        out.push_str("...");
    }
    (Some(role.to_owned()), Some(out))
}

/// The text of `content` that is not in `<think>…</think>` / `<thinking>…</thinking>` blocks
/// (shortest match, either tag closing either) nor after an unclosed opening tag, in pieces,
/// each found only when the one before it has been taken.
fn kept_pieces(content: &str) -> impl Iterator<Item = &str> {
    const OPEN: [&str; 2] = ["<thinking>", "<think>"];
    const CLOSE: [&str; 2] = ["</thinking>", "</think>"];
    let find_first = |s: &str, tags: &[&str]| -> Option<(usize, usize)> { tags.iter().filter_map(|t| s.find(t).map(|i| (i, t.len()))).min_by_key(|(i, _)| *i) };
    let mut rest = Some(content);
    std::iter::from_fn(move || {
        let text = rest?;
        let Some((open_at, open_len)) = find_first(text, &OPEN) else {
            rest = None;
            return Some(text);
        };
        let after_open = &text[open_at + open_len..];
        rest = find_first(after_open, &CLOSE).map(|(close_at, close_len)| &after_open[close_at + close_len..]);
        Some(&text[..open_at])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals_of(lines: &[&[u8]]) -> ListingTotals {
        let mut t = ListingTotals::default();
        for l in lines {
            t.feed(l, None);
        }
        t
    }

    /// Removing any suffix gives the totals of a recount (cost within rounding), or `None`.
    #[test]
    fn without_a_suffix_is_a_recount_of_the_rest() {
        let lines: Vec<&[u8]> = vec![
            br#"{"role": "system", "content": "setup"}"#,
            br#"{"role": "user", "content": "hi", "timestamp": "2026-07-01T10:00:00"}"#,
            br#"{"role": "assistant", "content": "a", "metadata": {"model": "m1", "cost": 0.1, "usage": {"input_tokens": 3, "output_tokens": 1}}}"#,
            br#"{"role": "assistant", "content": "b", "metadata": {"cost": 0.2, "usage": {"input_tokens": 5}}}"#,
            br#"{"role": "system", "content": "tool output"}"#,
            br#"{"role": "assistant", "content": "c", "metadata": {"model": "m2", "cost": 0.3, "usage": {"output_tokens": 7}}}"#,
            br#"{"role": "user", "content": "more"}"#,
            br#"{"role": "assistant", "content": "d", "metadata": {"model": "m1", "cost": 0.4, "usage": {"input_tokens": 1}}}"#,
            br#"{"role": "system", "content": "done"}"#,
        ];
        let all = totals_of(&lines);
        let mut worked_out = 0;
        for cut in 0..lines.len() {
            let expected = totals_of(&lines[..cut]);
            let kept = lines[..cut].iter().rev().map(|l| l.to_vec());
            let Some(got) = all.without_suffix(&lines[cut..], kept) else { continue };
            worked_out += 1;
            assert!((got.total_cost - expected.total_cost).abs() < 1e-12, "cut {cut}");
            for ((m, u), (em, eu)) in got.models_usage.iter().zip(&expected.models_usage) {
                assert!(m == em && (u.cost - eu.cost).abs() < 1e-12, "cut {cut}");
            }
            let exact = |t: &ListingTotals| ListingTotals {
                total_cost: 0.0,
                models_usage: t.models_usage.iter().map(|(m, u)| (m.clone(), ModelUsage { cost: 0.0, ..u.clone() })).collect(),
                ..t.clone()
            };
            assert_eq!(exact(&got), exact(&expected), "cut {cut}");
        }
        // Cuts 1 to 5 remove every use of a model (m2, or m1 with it): those need a recount.
        assert_eq!(worked_out, 4, "the other cuts are worked out without a recount");
    }

    /// gptme's preview spelled out whole: every kept piece joined, split on whitespace, joined
    /// with spaces, then cut.
    fn preview_whole(role: &str, content: &str) -> (Option<String>, Option<String>) {
        if role != "user" && role != "assistant" {
            return (None, None);
        }
        let kept: String = kept_pieces(content).collect();
        let collapsed = crate::codec::pystr::split(&kept).collect::<Vec<_>>().join(" ");
        if collapsed.is_empty() {
            return (None, None);
        }
        let cut = if collapsed.chars().count() > PREVIEW_CHARS { format!("{}...", collapsed.chars().take(PREVIEW_CHARS).collect::<String>()) } else { collapsed };
        (Some(role.to_owned()), Some(cut))
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// The preview built only as far as its cut is the whole one's, for texts of words,
        /// whitespace of every kind and think tags, around the cut and far past it.
        #[test]
        fn the_bounded_preview_is_the_whole_ones(
            parts in proptest::collection::vec(proptest::prop_oneof![
                "[a-zé数]{1,12}",
                proptest::sample::select(vec![" ", "  ", "\n", "\t", "\u{3000}", "\u{1f}", "\u{a0}", "<think>", "</think>", "<thinking>", "</thinking>"]).prop_map(str::to_owned),
            ], 0..80),
            assistant in proptest::bool::ANY,
        ) {
            let content = parts.concat();
            let role = if assistant { "assistant" } else { "user" };
            proptest::prop_assert_eq!(preview(role, &content), preview_whole(role, &content));
        }
    }

    #[test]
    fn preview_rules() {
        let line = br#"{"role": "assistant", "content": "<think>hidden</think>  shown\n\n text"}"#;
        assert_eq!(parse_preview(line), (Some("assistant".into()), Some("shown text".into())));
        let long = format!(r#"{{"role": "user", "content": "{}"}}"#, "é".repeat(150));
        let (_, p) = parse_preview(long.as_bytes());
        assert_eq!(p.unwrap().chars().count(), 103);
        assert_eq!(parse_preview(br#"{"role": "system", "content": "x"}"#), (None, None));
        assert_eq!(kept_pieces("a<thinking>b").collect::<String>(), "a");
        assert_eq!(kept_pieces("a<think>b</thinking>c<thinking>d</think>e").collect::<String>(), "ace");
    }

    #[test]
    fn totals_follow_gptme() {
        let mut t = ListingTotals::default();
        t.feed(br#"{"role": "user", "content": "hi", "timestamp": "2026-01-01T00:00:00+00:00"}"#, None);
        t.feed(b"   ", None);
        t.feed(b"not json", None);
        t.feed(br#"{"role": "assistant", "content": "yo", "metadata": {"model": "a", "cost": 0.25, "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 5}}}"#, None);
        let old = br#"{"role": "assistant", "content": "old", "metadata": {"model": "b", "input_tokens": 1, "output_tokens": 1, "cost": null}}"#;
        t.feed(old, Some(&decode_line(old).content));
        assert_eq!(t.message_count, 4);
        assert_eq!(t.model.as_deref(), Some("b"));
        assert_eq!((t.input_tokens, t.output_tokens, t.cache_read_tokens), (16, 3, 5));
        assert_eq!(t.total_cost, 0.25);
        assert_eq!(t.created(9.0), 1767225600.0);
        assert_eq!(t.last_message, (Some("assistant".into()), Some("old".into())));
        assert_eq!(t.models_usage.len(), 2);
    }
}
