//! Answers sized for a model's context: a page of items that fits a `max_chars` budget, counted
//! in characters of the compact JSON the client receives.
//!
//! Invariant: a page holds at least one item when there is one, so that following the "more"
//! cursor always makes progress and reaches every item; past that first item it never exceeds
//! its budget. (The first item is cut to fit where it can be — a search's snippets, a
//! message's text — and only a listing row, a few hundred characters, is taken as it is.)

use serde_json::Value;

/// The default budget: about 4,000 tokens of JSON, a small part of any model's context.
pub const DEFAULT_MAX_CHARS: usize = 16_000;
/// The smallest and largest budgets a call may ask for (others are moved into this range).
pub const MIN_MAX_CHARS: usize = 500;
pub const MAX_MAX_CHARS: usize = 1_000_000;
/// Room kept for the cursor that tells the client there is more.
const CURSOR_ROOM: usize = 40;

/// The budget a call asked for, within [`MIN_MAX_CHARS`]..=[`MAX_MAX_CHARS`].
pub fn max_chars(asked: Option<usize>) -> usize {
    asked.unwrap_or(DEFAULT_MAX_CHARS).clamp(MIN_MAX_CHARS, MAX_MAX_CHARS)
}

/// The characters of `v` as compact JSON.
pub fn chars(v: &Value) -> usize {
    serde_json::to_string(v).expect("JSON values serialise").chars().count()
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
        Budget { left: max_chars.saturating_sub(chars(envelope) + CURSOR_ROOM), taken: 0 }
    }

    /// Characters left for items.
    pub fn left(&self) -> usize {
        self.left
    }

    /// Whether `item` fits in what is left; if so, it is counted as taken. The first item is
    /// always taken: cut it to [`Budget::left`] first (see [`cut_strings`]) when it is too long.
    pub fn take(&mut self, item: &Value) -> bool {
        let cost = chars(item) + usize::from(self.taken > 0); // the comma before it
        if self.taken > 0 && cost > self.left {
            return false;
        }
        self.left = self.left.saturating_sub(cost);
        self.taken += 1;
        true
    }
}

/// Shortens the longest strings of `v` until its compact JSON has at most `max_chars`
/// characters (or nothing is left to cut), each cut string ending in `…`. For items with no
/// cursor into their text (a search snippet); a message is cut where the cursor can resume.
pub fn cut_strings(v: &mut Value, max_chars: usize) {
    for _ in 0..16 {
        let excess = chars(v).saturating_sub(max_chars);
        if excess == 0 {
            return;
        }
        let Some(longest) = longest_string(v) else { return };
        let len = longest.chars().count();
        if len <= 1 {
            return;
        }
        let keep = len.saturating_sub(excess + 1);
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
        assert!(chars(&page) <= 500, "{}", chars(&page));
        assert!(taken >= 3, "{taken}");
        let mut tiny = Budget::new(10, &envelope);
        assert!(tiny.take(&item));
        assert!(!tiny.take(&item));
    }

    #[test]
    fn cut_strings_fits_escapes_and_wide_characters() {
        let mut v = json!({ "a": "\"\n".repeat(500), "b": "数据库".repeat(300), "c": 1 });
        cut_strings(&mut v, 300);
        assert!(chars(&v) <= 300, "{}", chars(&v));
        assert!(v["a"].as_str().unwrap().ends_with('…') || v["b"].as_str().unwrap().ends_with('…'));
    }
}
