//! proptest strategies for messages and JSON values in gptme's data model.

use proptest::prelude::*;
use sessiondb::codec::json::Json;
use sessiondb::model::{Message, Role};

/// Any string, weighted towards what breaks codecs: controls, DEL, quotes, backslashes,
/// non-ASCII and astral characters, `\u2028`, and plain text.
pub fn tricky_string() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        4 => proptest::char::range(' ', '~'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => Just('\u{7f}'),
        1 => prop_oneof![Just('"'), Just('\\'), Just('/'), Just('\n'), Just('\u{2028}'), Just('\u{feff}')],
        2 => any::<char>(),
    ];
    proptest::collection::vec(ch, 0..40).prop_map(|cs| cs.into_iter().collect())
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(1e-5),
        Just(1e16),
        (-1000i64..1000).prop_map(|i| i as f64 / 8.0),
    ]
}

fn int() -> impl Strategy<Value = String> {
    prop_oneof![any::<i64>().prop_map(|i| i.to_string()), "[1-9][0-9]{18,40}".prop_map(|s| s), "-[1-9][0-9]{18,40}".prop_map(|s| s),]
}

/// Objects with distinct keys (a repeated key is not representable after parsing).
fn object(inner: impl Strategy<Value = Json> + Clone) -> impl Strategy<Value = Json> {
    proptest::collection::vec((tricky_string(), inner), 0..5).prop_map(|members| {
        let mut seen = std::collections::HashSet::new();
        Json::Object(members.into_iter().filter(|(k, _)| seen.insert(k.clone())).collect())
    })
}

pub fn any_json(depth: u32) -> impl Strategy<Value = Json> + Clone {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        int().prop_map(Json::Int),
        float().prop_map(Json::Float),
        tricky_string().prop_map(Json::Str),
    ];
    leaf.prop_recursive(depth, 64, 5, |inner| prop_oneof![proptest::collection::vec(inner.clone(), 0..5).prop_map(Json::Array), object(inner)])
}

fn timestamp() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        1 => Just(None),
        8 => (2000u32..2100, 1u32..13, 1u32..29, 0u32..24, 0u32..60, 0u32..60, prop_oneof![Just(0u32), 1u32..1_000_000])
            .prop_map(|(y, mo, d, h, mi, s, us)| {
                let base = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
                Some(if us == 0 { base } else { format!("{base}.{us:06}") })
            }),
        1 => Just(Some("2026-07-16T10:00:00+00:00".to_owned())),
    ]
}

const KNOWN: [&str; 12] = ["role", "content", "timestamp", "files", "file_hashes", "call_id", "pinned", "hide", "ui_only", "ephemeral_ttl", "metadata", "quiet"];

pub fn message() -> impl Strategy<Value = Message> {
    let role = prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant), tricky_string().prop_map(|s| Role::parse(&s)),];
    let extra = proptest::collection::vec((tricky_string(), any_json(2)), 0..3).prop_map(|members| {
        let mut seen = std::collections::HashSet::new();
        members.into_iter().filter(|(k, _)| !KNOWN.contains(&k.as_str()) && seen.insert(k.clone())).collect::<Vec<_>>()
    });
    let hashes = proptest::collection::vec((tricky_string(), "[0-9a-f]{16}"), 0..3).prop_map(|pairs| {
        let mut seen = std::collections::HashSet::new();
        pairs.into_iter().filter(|(p, _)| seen.insert(p.clone())).collect::<Vec<_>>()
    });
    let metadata = prop_oneof![Just(None), object(any_json(3)).prop_map(|m| Some(m).filter(|m| !matches!(m, Json::Object(o) if o.is_empty()))),];
    (
        role,
        tricky_string(),
        timestamp(),
        proptest::collection::vec(tricky_string(), 0..3),
        hashes,
        proptest::option::of(tricky_string().prop_filter("empty call ids are not written", |s| !s.is_empty())),
        (any::<bool>(), any::<bool>(), any::<bool>(), proptest::option::of(any::<i64>())),
        metadata,
        extra,
    )
        .prop_map(|(role, content, timestamp, files, file_hashes, call_id, flags, metadata, extra)| {
            let mut m = assemble(Message::new(role, content, timestamp), files, file_hashes, call_id, flags, metadata);
            m.extra = extra;
            m
        })
}

type Flags = (bool, bool, bool, Option<i64>);

/// A message with the drawn fields set (pinned, hide, ui_only, ttl in `flags`).
fn assemble(mut m: Message, files: Vec<String>, file_hashes: Vec<(String, String)>, call_id: Option<String>, flags: Flags, metadata: Option<Json>) -> Message {
    let (pinned, hide, ui_only, ttl) = flags;
    m.files = files;
    m.file_hashes = file_hashes;
    m.call_id = call_id;
    m.pinned = pinned;
    m.hide = hide;
    m.ui_only = ui_only;
    m.ephemeral_ttl = ttl;
    m.metadata = metadata;
    m
}

/// Messages as gptme itself would hold them, so that gptme re-serialises them unchanged: one of
/// the three roles, always a timestamp, attachment paths that are absolute and normalised (gptme
/// resolves them), no unknown fields (gptme drops them), no flat token counts in metadata (gptme
/// moves them under `usage`).
pub fn gptme_native_message() -> impl Strategy<Value = Message> {
    let role = prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant)];
    let path = proptest::collection::vec("[A-Za-z0-9_é中 -]{1,12}", 1..4)
        .prop_filter("no dot components", |parts| parts.iter().all(|p| p.trim() == p && p != "." && p != ".."))
        .prop_map(|parts| format!("/tmp/sessiondb-attachments/{}", parts.join("/")));
    let hashes = proptest::collection::vec((path.clone(), "[0-9a-f]{16}"), 0..2).prop_map(|pairs| {
        let mut seen = std::collections::HashSet::new();
        pairs.into_iter().filter(|(p, _)| seen.insert(p.clone())).collect::<Vec<_>>()
    });
    const TOKEN_KEYS: [&str; 5] = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"];
    let usage = (0i64..100_000, 0i64..10_000, 0i64..50_000).prop_map(|(i, o, c)| {
        Json::Object(vec![
            ("input_tokens".into(), Json::Int(i.to_string())),
            ("output_tokens".into(), Json::Int(o.to_string())),
            ("cache_read_tokens".into(), Json::Int(c.to_string())),
        ])
    });
    let metadata = prop_oneof![
        Just(None),
        (usage, float(), object(any_json(2))).prop_map(|(usage, cost, extra)| {
            let mut members =
                vec![("model".to_owned(), Json::Str("anthropic/claude-sonnet-4".into())), ("cost".to_owned(), Json::Float(cost)), ("usage".to_owned(), usage)];
            if let Json::Object(more) = extra {
                members.extend(more.into_iter().filter(|(k, _)| !TOKEN_KEYS.contains(&k.as_str()) && !["model", "cost", "usage"].contains(&k.as_str())));
            }
            Some(Json::Object(members))
        }),
    ];
    let timestamp =
        (2000u32..2100, 1u32..13, 1u32..29, 0u32..24, 0u32..60, 0u32..60, prop_oneof![Just(0u32), 1u32..1_000_000]).prop_map(|(y, mo, d, h, mi, s, us)| {
            let base = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
            if us == 0 {
                base
            } else {
                format!("{base}.{us:06}")
            }
        });
    (
        role,
        tricky_string(),
        timestamp,
        proptest::collection::vec(path, 0..2),
        hashes,
        proptest::option::of("[a-z0-9_\"'\\\\-]{1,12}"),
        (any::<bool>(), any::<bool>(), any::<bool>(), proptest::option::of(0i64..10)),
        metadata,
    )
        .prop_map(|(role, content, timestamp, files, file_hashes, call_id, flags, metadata)| {
            assemble(Message::new(role, content, Some(timestamp)), files, file_hashes, call_id, flags, metadata)
        })
}

/// Draws `n` values from a strategy with a fixed seed (reproducible test data).
pub fn sample<S: Strategy>(strategy: S, n: usize, seed: u8) -> Vec<S::Value> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    (0..n).map(|_| strategy.new_tree(&mut runner).expect("value").current()).collect()
}
