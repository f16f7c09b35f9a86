//! Answers sized for a model's context and for what MCP clients pass on whole: a page of items
//! that fits a `max_chars` budget, counted in bytes of the compact JSON (UTF-8) the client
//! receives — a character of ASCII is one, any other two to four.
//!
//! Invariant: a page holds at least one item when there is one, so that following the "more"
//! cursor always makes progress and reaches every item; past that first item it never exceeds
//! its budget. (The first item is cut to fit where it can be — a search's snippets, a
//! message's text — and only a listing row, a few hundred bytes, is taken as it is.) No budget
//! is over [`MAX_MAX_CHARS`], so no answer of a page is either, but for such a row.
//!
//! Why bytes, and why 40,000: clients do not hand a long tool result to their model as it is.
//! Claude Code 2.1.332 replaces one over 50,000 characters with a 2 KB preview and the path of
//! a file holding the rest; Codex 0.171.0 (its models' truncation policy: 10,000 tokens) keeps
//! the first and last parts of one over about 48,000 bytes and drops the middle, inside a string, so the JSON still parses and still ends in `"more": null`. Measured in
//! `tests/mcp_agents.rs`. Counting bytes keeps a page of Chinese or Japanese text, three bytes
//! a character, within both.

use serde_json::Value;

/// The default budget: about 4,000 tokens of JSON, a small part of any model's context.
pub const DEFAULT_MAX_CHARS: usize = 16_000;
/// The smallest and largest budgets a call may ask for (others are moved into this range). The
/// largest is what every client measured passes to its model whole, with room to spare (see
/// the module's documentation).
pub const MIN_MAX_CHARS: usize = 500;
pub const MAX_MAX_CHARS: usize = 40_000;
/// Room kept for the cursor that tells the client there is more.
const CURSOR_ROOM: usize = 40;

/// The budget a call asked for, within [`MIN_MAX_CHARS`]..=[`MAX_MAX_CHARS`].
pub fn max_chars(asked: Option<usize>) -> usize {
    asked.unwrap_or(DEFAULT_MAX_CHARS).clamp(MIN_MAX_CHARS, MAX_MAX_CHARS)
}

/// The size of `v` as compact JSON, in bytes of UTF-8: what a budget counts.
pub fn size(v: &Value) -> usize {
    serde_json::to_string(v).expect("JSON values serialise").len()
}

/// What is left of a budget as items go into an answer.
pub struct Budget {
    left: usize,
    taken: usize,
}

impl Budget {
    /// A budget of `max_chars` for an answer that is `envelope` (every field but the items, with
    /// an empty array for them) plus its items.
    pub fn new(max_chars: usize, envelope: &Value) -> Budget {
        Budget { left: max_chars.saturating_sub(size(envelope) + CURSOR_ROOM), taken: 0 }
    }

    /// Bytes left for items.
    pub fn left(&self) -> usize {
        self.left
    }

    /// Whether `item` fits in what is left; if so, it is counted as taken. The first item is
    /// always taken: cut it to [`Budget::left`] first (see [`cut_strings`]) when it is too long.
    pub fn take(&mut self, item: &Value) -> bool {
        let cost = size(item) + usize::from(self.taken > 0); // the comma before it
        if self.taken > 0 && cost > self.left {
            return false;
        }
        self.left = self.left.saturating_sub(cost);
        self.taken += 1;
        true
    }
}

/// Shortens the longest strings of `v` until its compact JSON takes at most `max_size` bytes
/// (or nothing is left to cut), each cut string ending in `…`. For items with no cursor into
/// their text (a search snippet); a message is cut where the cursor can resume.
pub fn cut_strings(v: &mut Value, max_size: usize) {
    for _ in 0..16 {
        let excess = size(v).saturating_sub(max_size);
        if excess == 0 {
            return;
        }
        let Some(longest) = longest_string(v) else { return };
        let len = longest.chars().count();
        if len <= 1 {
            return;
        }
        // Each character dropped is a byte at least; the ellipsis takes three.
        let keep = len.saturating_sub(excess + '…'.len_utf8());
        *longest = longest.chars().take(keep).chain(std::iter::once('…')).collect();
    }
}

fn longest_string(v: &mut Value) -> Option<&mut String> {
    match v {
        Value::String(s) => Some(s),
        Value::Array(items) => items.iter_mut().filter_map(longest_string).max_by_key(|s| s.len()),
        Value::Object(fields) => fields.values_mut().filter_map(longest_string).max_by_key(|s| s.len()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_stays_within_its_budget_and_always_takes_one() {
        let envelope = json!({ "results": [], "more": null });
        let item = json!({ "text": "x".repeat(100) });
        let mut budget = Budget::new(500, &envelope);
        let taken = (0..10).take_while(|_| budget.take(&item)).count();
        let page = json!({ "results": vec![item.clone(); taken], "more": "12345" });
        assert!(size(&page) <= 500, "{}", size(&page));
        assert!(taken >= 3, "{taken}");
        let mut tiny = Budget::new(10, &envelope);
        assert!(tiny.take(&item));
        assert!(!tiny.take(&item));
    }

    #[test]
    fn cut_strings_fits_escapes_and_wide_characters() {
        let mut v = json!({ "a": "\"\n".repeat(500), "b": "数据库".repeat(300), "c": 1 });
        cut_strings(&mut v, 300);
        assert!(size(&v) <= 300, "{}", size(&v));
        assert!(v["a"].as_str().unwrap().ends_with('…') || v["b"].as_str().unwrap().ends_with('…'));
    }
}
