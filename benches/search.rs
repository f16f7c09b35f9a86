//! In-process timings of sessiondb's search, for `tools/bench/bench_search.sh`.
//!
//!     cargo bench --bench search -- DB QUERY... [--runs R] [--limit N]
//!
//! Each run opens the database afresh (`Store::open`, one connection with an empty page cache)
//! and asks one query as `sessiondb search QUERY -n N` does: `store::search::search` (N
//! conversations, one match each, no totals) plus the snippets the CLI prints. Prints one JSON
//! object: for each query, the median and every run's seconds, the conversations found and
//! whether it was searched literally (so a run that found nothing cannot pass for a fast one).

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Map};
use sessiondb::store::search::{search, snippet, Marks, SearchQuery};
use sessiondb::store::Store;

fn main() {
    // `cargo bench` appends `--bench`; it means nothing here.
    let mut rest: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let mut flag = |name: &str, default: usize| -> usize {
        match rest.iter().position(|a| a == name) {
            None => default,
            Some(i) => {
                let value = rest.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| fail(&format!("{name} needs a number")));
                rest.drain(i..=i + 1);
                value
            }
        }
    };
    let (runs, limit) = (flag("--runs", 5).max(1), flag("--limit", 20));
    let Some((db, queries)) = rest.split_first() else { fail("usage: search DB QUERY... [--runs R] [--limit N]") };
    let db = PathBuf::from(db);
    let mut out = Map::new();
    for q in queries {
        let mut times = Vec::with_capacity(runs);
        let (mut found, mut literal) = (0, false);
        for _ in 0..runs {
            let start = Instant::now();
            let store = Store::open(&db).unwrap_or_else(|e| fail(&format!("{}: {e}", db.display())));
            let conn = store.connection().unwrap_or_else(|e| fail(&e.to_string()));
            let query = SearchQuery { text: q.clone(), limit, matches: 1, ..SearchQuery::default() };
            let result = search(&conn, &query).unwrap_or_else(|e| fail(&format!("{q}: {e}")));
            let marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| format!("**{s}**"), numbered: false };
            let bytes: usize = result.conversations.iter().flat_map(|c| &c.hits).map(|h| snippet(&h.content, &result.highlight, 1, 1, &marks).len()).sum();
            std::hint::black_box(bytes);
            times.push(start.elapsed().as_secs_f64());
            (found, literal) = (result.conversations.len(), result.literal);
        }
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        out.insert(q.clone(), json!({"median": sorted[sorted.len() / 2], "runs": times, "found": found, "literal": literal}));
    }
    println!("{}", serde_json::Value::Object(out));
}

fn fail(message: &str) -> ! {
    eprintln!("search bench: {message}");
    std::process::exit(2)
}
