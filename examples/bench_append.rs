//! Times sessiondb's library append, one message at a time (the library side of
//! `tools/bench/bench_append.sh`).
//!
//!     cargo run --release --example bench_append -- DB CHAT_ID REPEATS
//!
//! Opens the store at DB once (not timed), then makes REPEATS calls of
//! `ops::with_session(&store, CHAT_ID, |s| s.append("main", &message))`, each timed on its own
//! with `Instant`. One call is the whole acknowledged append: gptme's directory lock taken, the
//! write transaction opened, the directory fingerprint checked, the row inserted, the line
//! appended to `conversation.jsonl` and the event to `events.jsonl` (each fsynced), the store
//! committed and the directory synced. Every 50th event also writes gptme's checkpoint (a
//! snapshot of the whole conversation, O(n) by the design of gptme's format): the median
//! leaves those out, the max shows them, and `checkpoint_samples` says which samples they were.
//!
//! Prints one JSON object: median/min/p90/max/mean ms, the first call's ms, the samples, and
//! the number of lines in `conversation.jsonl` before and after.

use std::path::PathBuf;
use std::time::Instant;

use sessiondb::model::{Message, Role};
use sessiondb::ops::with_session;
use sessiondb::store::Store;

fn usage() -> ! {
    eprintln!("usage: bench_append DB CHAT_ID REPEATS");
    std::process::exit(2);
}

fn count_lines(path: &std::path::Path) -> usize {
    match std::fs::read(path) {
        Ok(bytes) => bytes.iter().filter(|&&b| b == b'\n').count(),
        Err(e) => {
            eprintln!("bench_append: {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let k = ((p / 100.0 * sorted.len() as f64).ceil() as usize).max(1);
    sorted[k - 1]
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// `2026-07-16T10:00:00` plus `i` seconds, naive, as gptme writes timestamps.
fn timestamp(i: usize) -> String {
    let total = 10 * 3600 + i;
    let (h, m, s) = (total / 3600 % 24, total / 60 % 60, total % 60);
    format!("2026-07-16T{h:02}:{m:02}:{s:02}")
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 3 {
        usage();
    }
    let db = PathBuf::from(&args[0]);
    let chat_id = args[1].as_str();
    let repeats: usize = args[2].parse().unwrap_or_else(|_| usage());
    if repeats == 0 {
        usage();
    }

    let store = Store::open(&db).unwrap_or_else(|e| {
        eprintln!("bench_append: opening {}: {e}", db.display());
        std::process::exit(1);
    });
    let dir = {
        let conn = store.connection().expect("a connection");
        sessiondb::store::modify::load_conversation(&conn, chat_id)
            .unwrap_or_else(|e| {
                eprintln!("bench_append: {e}");
                std::process::exit(1);
            })
            .dir
    };
    let transcript = dir.join("conversation.jsonl");
    let before = count_lines(&transcript);

    let messages: Vec<Message> = (0..repeats).map(|i| Message::new(Role::User, format!("benchmark message {i}"), Some(timestamp(i)))).collect();
    let mut samples = Vec::with_capacity(repeats);
    let mut checkpoints = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let t0 = Instant::now();
        let result = with_session(&store, chat_id, |s| s.append("main", message));
        let elapsed = t0.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(appended) => {
                if appended.checkpoint_seq.is_some() {
                    checkpoints.push(i);
                }
            }
            Err(e) => {
                eprintln!("bench_append: append {i} to {chat_id} failed: {e}");
                std::process::exit(1);
            }
        }
        samples.push(elapsed);
    }
    let after = count_lines(&transcript);
    if after != before + repeats {
        eprintln!("bench_append: {} has {after} lines, expected {before} + {repeats}", transcript.display());
        std::process::exit(1);
    }

    let mut sorted = samples.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let out = serde_json::json!({
        "repeats": repeats,
        "messages_before": before,
        "messages_after": after,
        "median_ms": round4(median(&sorted)),
        "min_ms": round4(sorted[0]),
        "p90_ms": round4(percentile(&sorted, 90.0)),
        "max_ms": round4(sorted[sorted.len() - 1]),
        "mean_ms": round4(samples.iter().sum::<f64>() / samples.len() as f64),
        "first_ms": round4(samples[0]),
        "checkpoint_samples": checkpoints,
        "checkpoint_ms": checkpoints.iter().map(|&i| round4(samples[i])).collect::<Vec<_>>(),
        "samples_ms": samples.iter().map(|&x| round4(x)).collect::<Vec<_>>(),
    });
    println!("{out}");
}
