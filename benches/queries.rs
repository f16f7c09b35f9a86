//! In-process timings of sessiondb's listing, search and stats, the counterpart of
//! `tools/bench/bench_gptme_queries.py` (which times gptme's own functions in-process).
//!
//!     cargo bench --bench queries -- DB COMMON_WORD RARE_WORD [--runs R] [--limit N]
//!
//! Each run opens the database afresh (`Store::open`, schema check, one connection with an
//! empty page cache) and then does one operation, all inside the timing: what a tool linking
//! the library pays for one question. The OS page cache is warm, as it is for gptme's runs.
//! Prints one JSON object: the best seconds of each operation, every run's seconds, and the
//! result sizes (so a run that found nothing cannot pass for a fast one).
//!
//!   list_detail     queries::list_filtered, every conversation (test ones too), with totals
//!   list_default    the newest N
//!   search:WORD     store::search::search (N conversations, one match each) plus the
//!                   snippets the CLI prints, plain and marked
//!   stats           stats::overview, as `sessiondb stats --json`
//!
//! tools/bench/bench_queries.sh runs it beside the whole-process timings.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Map, Value};
use sessiondb::store::queries::{self, ListFilter};
use sessiondb::store::search::{search, snippet, Marks, SearchQuery};
use sessiondb::store::{stats, Store};

/// One timed question: asks it of a store, returns the size of the answer.
type Op = Box<dyn Fn(&Store) -> Result<usize, String>>;

struct Args {
    db: PathBuf,
    common: String,
    rare: String,
    runs: usize,
    limit: usize,
}

fn parse_args() -> Result<Args, String> {
    // `cargo bench` appends `--bench`; it means nothing here.
    let mut rest: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let mut take_flag = |name: &str, default: usize| -> Result<usize, String> {
        match rest.iter().position(|a| a == name) {
            None => Ok(default),
            Some(i) => {
                let value = rest.get(i + 1).ok_or(format!("{name} needs a value"))?.clone();
                rest.drain(i..=i + 1);
                value.parse().map_err(|_| format!("{name}: not a number: {value}"))
            }
        }
    };
    let runs = take_flag("--runs", 5)?;
    let limit = take_flag("--limit", 20)?;
    let [db, common, rare]: [String; 3] = rest.try_into().map_err(|_| "usage: queries DB COMMON_WORD RARE_WORD [--runs R] [--limit N]".to_owned())?;
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(Args { db: PathBuf::from(db), common, rare, runs, limit })
}

/// Best and every time of `runs` calls of `op` on a freshly opened store, and the size of the
/// last result.
fn time(args: &Args, op: &dyn Fn(&Store) -> Result<usize, String>) -> Result<(f64, Vec<f64>, usize), String> {
    let mut times = Vec::with_capacity(args.runs);
    let mut size = 0;
    for _ in 0..args.runs {
        let start = Instant::now();
        let store = Store::open(&args.db).map_err(|e| format!("{}: {e}", args.db.display()))?;
        size = op(&store)?;
        times.push(start.elapsed().as_secs_f64());
    }
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    Ok((best, times, size))
}

/// A search as `sessiondb search WORD --json -n N` does it, snippets included; returns the
/// number of conversations found.
fn search_with_snippets(store: &Store, word: &str, limit: usize) -> Result<usize, String> {
    let conn = store.connection().map_err(|e| e.to_string())?;
    let q = SearchQuery { text: word.to_owned(), limit, matches: 1, ..SearchQuery::default() };
    let result = search(&conn, &q).map_err(|e| e.to_string())?;
    let terms = &result.highlight;
    let exact = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| s.to_owned(), numbered: false };
    let starred = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| format!("**{s}**"), numbered: false };
    let mut bytes = 0;
    for c in &result.conversations {
        for h in &c.hits {
            bytes += snippet(&h.content, terms, 1, 1, &exact).len();
            bytes += snippet(&h.content, terms, 1, 1, &starred).len();
        }
    }
    std::hint::black_box(bytes);
    Ok(result.conversations.len())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("queries: {e}");
            std::process::exit(2);
        }
    };
    if !args.db.is_file() {
        eprintln!("queries: {}: no such database", args.db.display());
        std::process::exit(2);
    }
    let limit = args.limit;
    let ops: Vec<(String, Op)> = vec![
        (
            "list_detail".into(),
            Box::new(|s: &Store| {
                let conn = s.connection().map_err(|e| e.to_string())?;
                Ok(queries::list_filtered(&conn, &ListFilter { include_test: true, ..ListFilter::default() }).map_err(|e| e.to_string())?.len())
            }),
        ),
        (
            "list_default".into(),
            Box::new(move |s: &Store| {
                let conn = s.connection().map_err(|e| e.to_string())?;
                Ok(queries::list_filtered(&conn, &ListFilter { include_test: true, limit: Some(limit), ..ListFilter::default() }).map_err(|e| e.to_string())?.len())
            }),
        ),
        (format!("search:{}", args.common), {
            let w = args.common.clone();
            Box::new(move |s: &Store| search_with_snippets(s, &w, limit))
        }),
        (format!("search:{}", args.rare), {
            let w = args.rare.clone();
            Box::new(move |s: &Store| search_with_snippets(s, &w, limit))
        }),
        (
            "stats".into(),
            Box::new(|s: &Store| {
                let conn = s.connection().map_err(|e| e.to_string())?;
                let v = stats::overview(&conn, None, false, None, None).map_err(|e| e.to_string())?;
                Ok(v.get("total_conversations").and_then(Value::as_u64).unwrap_or(0) as usize)
            }),
        ),
    ];
    let (mut best, mut all, mut sizes) = (Map::new(), Map::new(), Map::new());
    for (name, op) in &ops {
        match time(&args, op.as_ref()) {
            Ok((b, times, size)) => {
                eprintln!("   sessiondb in-process {name}: best {b:.6} s, result size {size}");
                best.insert(name.clone(), json!(b));
                all.insert(name.clone(), json!(times));
                sizes.insert(name.clone(), json!(size));
            }
            Err(e) => {
                eprintln!("queries: {name}: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("{}", json!({"seconds": best, "runs": all, "sizes": sizes}));
}
