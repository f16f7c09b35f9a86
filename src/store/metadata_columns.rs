//! gptme's usual message metadata kept in the message row's own columns instead of as text.
//!
//! gptme writes an assistant message's metadata as `{"model": M, "usage": {...}, "cost": C}`:
//! the model first, then a usage object whose keys are some of four token counts in a fixed
//! order, and a cost, each of the last two optional (older releases put the cost first). The
//! row already holds the model, the four counts and the cost in columns of their own (what the
//! listing's totals and `--model` read), so such metadata is stored as a *shape* — which of
//! those keys it has, in which order, a small integer in `messages.metadata_shape` — with the
//! text column empty, and rebuilt from the columns when the row is read. It was about a third
//! of a message row.
//!
//! Invariant: [`shape`] gives a shape only when [`rebuild`] of it, from the very values the
//! columns hold, is the metadata itself (keys in order, integers as integers, floats bit for
//! bit), so a message reads back as it was written; any other metadata is kept as text.

use crate::model::Json;

/// The metadata has a `usage` object.
const USAGE: i64 = 1;
/// The keys a usage object may have, in the order gptme writes them; key `i` is bit `i + 1`.
const TOKEN_KEYS: [&str; 4] = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"];
/// The metadata has a `cost`.
const COST: i64 = 1 << 5;
/// The cost comes before the usage object.
const COST_FIRST: i64 = 1 << 6;
/// Every bit a shape may have.
const ALL: i64 = (1 << 7) - 1;

/// The columns of a message row that metadata of a shape is rebuilt from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Columns<'a> {
    pub model: Option<&'a str>,
    pub cost: Option<f64>,
    /// Input, output, cache read and cache creation tokens ([`TOKEN_KEYS`]).
    pub tokens: [i64; 4],
}

/// The shape of `meta` when it is gptme's usual metadata and `columns` (the values its row
/// stores) rebuild it exactly; `None` to keep it as text.
pub fn shape(meta: &Json, columns: &Columns<'_>) -> Option<i64> {
    let Json::Object(members) = meta else { return None };
    let ((first, _), rest) = members.split_first()?;
    if first != "model" {
        return None;
    }
    let mut shape = 0;
    for (key, value) in rest {
        match (key.as_str(), value) {
            ("usage", Json::Object(usage)) => {
                shape |= USAGE;
                for (key, _) in usage {
                    shape |= 1 << (1 + TOKEN_KEYS.iter().position(|k| k == key)?);
                }
            }
            ("cost", Json::Float(cost)) if !(*cost == 0.0 && cost.is_sign_negative()) => {
                // A negative zero may come back from a REAL column as a positive one.
                shape |= COST | if shape & USAGE == 0 && rest.len() == 2 { COST_FIRST } else { 0 };
            }
            _ => return None,
        }
    }
    rebuild(shape, columns).is_ok_and(|rebuilt| same(&rebuilt, meta)).then_some(shape)
}

/// The metadata of `shape` from its row's `columns`; why not, for a shape this build does not
/// write or columns that cannot give it (a damaged row).
pub fn rebuild(shape: i64, columns: &Columns<'_>) -> Result<Json, String> {
    let tokens = (shape >> 1) & 0b1111;
    if !(0..=ALL).contains(&shape) || (shape & USAGE == 0 && tokens != 0) || (shape & COST_FIRST != 0 && shape & (USAGE | COST) != USAGE | COST) {
        return Err(format!("its metadata shape {shape} is not one sessiondb writes"));
    }
    let model = columns.model.ok_or("its metadata shape names a model and its model column is empty")?;
    let mut members = vec![("model".to_owned(), Json::Str(model.to_owned()))];
    let usage = (shape & USAGE != 0).then(|| {
        let keys = TOKEN_KEYS.iter().zip(columns.tokens).enumerate().filter(|(i, _)| tokens & (1 << i) != 0);
        ("usage".to_owned(), Json::Object(keys.map(|(_, (key, n))| ((*key).to_owned(), Json::Int(n.to_string()))).collect()))
    });
    let cost = match (shape & COST != 0, columns.cost) {
        (false, _) => None,
        (true, Some(cost)) => Some(("cost".to_owned(), Json::Float(cost))),
        (true, None) => return Err("its metadata shape has a cost and its cost column is empty".into()),
    };
    if shape & COST_FIRST != 0 {
        members.extend(cost.into_iter().chain(usage));
    } else {
        members.extend(usage.into_iter().chain(cost));
    }
    Ok(Json::Object(members))
}

/// How many rows [`compact_sqlite`] reads at a time.
const COMPACT_PAGE: i64 = 4_096;

/// Rewrites every message row of an SQLite store that holds its metadata as text which its
/// columns rebuild: the shape in its place (migration 25, run inside its transaction). Returns
/// how many rows it rewrote. Metadata that does not parse, or that its columns do not give
/// back exactly, stays as it is.
pub(super) fn compact_sqlite(tx: &rusqlite::Transaction<'_>) -> Result<u64, rusqlite::Error> {
    let mut read = tx.prepare(
        "SELECT id, metadata, model, cost, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens FROM messages
         WHERE id > ?1 AND metadata IS NOT NULL AND metadata_shape IS NULL ORDER BY id LIMIT ?2",
    )?;
    let mut write = tx.prepare("UPDATE messages SET metadata = NULL, metadata_shape = ?2 WHERE id = ?1")?;
    let (mut after, mut rewritten) = (i64::MIN, 0);
    loop {
        type Stored = (i64, String, Option<String>, Option<f64>, [i64; 4]);
        let page: Vec<Stored> = read
            .query_map((after, COMPACT_PAGE), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, [r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?])))?
            .collect::<Result<_, _>>()?;
        let Some(&(last, ..)) = page.last() else { return Ok(rewritten) };
        for (id, text, model, cost, tokens) in page {
            // The value the rows' reader makes of the text (`queries`), which the shape must give.
            let Ok(parsed) = crate::codec::json::parse(&text) else { continue };
            if parsed.lossy {
                continue;
            }
            if let Some(shape) = shape(&parsed.value, &Columns { model: model.as_deref(), cost, tokens }) {
                write.execute((id, shape))?;
                rewritten += 1;
            }
        }
        after = last;
    }
}

/// Whether two values are the same, floats compared bit for bit (`0.0` is not `-0.0`).
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Float(x), Json::Float(y)) => x.to_bits() == y.to_bits(),
        (Json::Object(x), Json::Object(y)) => x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same(vx, vy)),
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(vx, vy)| same(vx, vy)),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json::{dump, parse};
    use crate::model::{Message, Role};
    use proptest::prelude::*;

    /// The columns a row of a message with this metadata holds, as `store::rows` writes them.
    fn columns_of(m: &Message) -> (Option<String>, Option<f64>, [i64; 4]) {
        let u = m.usage();
        (m.model().map(str::to_owned), Some(u.cost).filter(|c| c.is_finite()), [u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_creation_tokens])
    }

    /// The shape of metadata text `text`, and the metadata rebuilt from it when it has one.
    fn round_trip(text: &str) -> Option<String> {
        let mut m = Message::new(Role::Assistant, "hi", None);
        m.metadata = Some(parse(text).unwrap().value);
        let (model, cost, tokens) = columns_of(&m);
        let columns = Columns { model: model.as_deref(), cost, tokens };
        let shape = shape(m.metadata.as_ref().unwrap(), &columns)?;
        Some(dump(&rebuild(shape, &columns).unwrap()))
    }

    #[test]
    fn gptmes_metadata_is_rebuilt_exactly_and_anything_else_is_kept_as_text() {
        for text in [
            r#"{"model": "openai/gpt-4o-mini", "usage": {"input_tokens": 5889, "output_tokens": 50, "cache_read_tokens": 138, "cache_creation_tokens": 0}, "cost": 0.0009154199999999999}"#,
            r#"{"model": "anthropic/claude", "usage": {"input_tokens": 3, "cache_read_tokens": 9}}"#,
            r#"{"model": "m"}"#,
            r#"{"model": "m", "usage": {}}"#,
            r#"{"model": "m", "cost": 1e-05, "usage": {"output_tokens": 2}}"#,
            r#"{"model": "m", "cost": 2.5}"#,
        ] {
            assert_eq!(round_trip(text).as_deref(), Some(text), "{text}");
        }
        for text in [
            r#"{"usage": {"input_tokens": 3}, "model": "m"}"#,
            r#"{"model": ""}"#,
            r#"{"model": "m", "usage": {"output_tokens": 2, "input_tokens": 3}}"#,
            r#"{"model": "m", "usage": {"input_tokens": 3.0}}"#,
            r#"{"model": "m", "usage": {"input_tokens": 123456789012345678901234567890}}"#,
            r#"{"model": "m", "cost": 0}"#,
            r#"{"model": "m", "cost": -0.0}"#,
            r#"{"model": "m", "cost": NaN}"#,
            r#"{"model": "m", "cost": 1.0, "other": 1}"#,
            r#"{"model": "m", "usage": {"input_tokens": 1, "reasoning_tokens": 2}}"#,
            r#"{"model": 3}"#,
        ] {
            assert_eq!(round_trip(text), None, "{text}");
        }
    }

    #[test]
    fn a_damaged_shape_or_its_columns_is_an_error_never_other_metadata() {
        let columns = Columns { model: Some("m"), cost: Some(0.5), tokens: [1, 2, 3, 4] };
        for shape in [-1, ALL + 1, 0b10, COST_FIRST | COST, COST_FIRST | USAGE] {
            assert!(rebuild(shape, &columns).is_err(), "{shape}");
        }
        assert!(rebuild(USAGE, &Columns { model: None, ..columns }).is_err());
        assert!(rebuild(COST, &Columns { cost: None, ..columns }).is_err());
        assert_eq!(dump(&rebuild(COST_FIRST | COST | USAGE | 0b100, &columns).unwrap()), r#"{"model": "m", "cost": 0.5, "usage": {"output_tokens": 2}}"#);
    }

    fn value() -> impl Strategy<Value = Json> {
        let leaf = prop_oneof![
            any::<i64>().prop_map(|n| Json::Int(n.to_string())),
            any::<f64>().prop_map(Json::Float),
            prop::sample::select(vec![0.0, -0.0, 0.1, 1e-5]).prop_map(Json::Float),
            "[a-z/.-]{0,8}".prop_map(Json::Str),
            Just(Json::Null),
        ];
        let key = prop::sample::select(vec!["model", "usage", "cost", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "x"]);
        leaf.prop_recursive(2, 12, 5, move |inner| {
            prop::collection::vec((key.clone(), inner), 0..5).prop_map(|members| {
                let mut seen = std::collections::HashSet::new();
                Json::Object(members.into_iter().filter(|(k, _)| seen.insert(*k)).map(|(k, v)| (k.to_owned(), v)).collect())
            })
        })
    }

    proptest! {
        /// Whatever the metadata, a shape given rebuilds it bit for bit from its row's columns.
        #[test]
        fn a_shape_always_rebuilds_the_metadata(meta in value()) {
            let mut m = Message::new(Role::Assistant, "hi", None);
            m.metadata = Some(meta.clone());
            let (model, cost, tokens) = columns_of(&m);
            let columns = Columns { model: model.as_deref(), cost, tokens };
            if let Some(shape) = shape(&meta, &columns) {
                let rebuilt = rebuild(shape, &columns).unwrap();
                prop_assert!(same(&rebuilt, &meta));
                prop_assert_eq!(dump(&rebuilt), dump(&meta));
            }
        }
    }
}
