//! Issue 13, items 10 and 11: the scale of one conversation.
//!
//! Item 10: a file of any size is stored (in chunks: no single SQLite value holds more than a
//! chunk) and round-trips byte for byte through import, sync, an operation and export. The
//! real size (a file over SQLite's 1,000,000,000-byte limit) is checked by
//! `tools/bench/bench_big_conversation.sh`; here files of a few chunks cross every boundary.
//!
//! Item 11: per-conversation commands on a long conversation use memory that does not grow
//! with its length, `read -n 10` takes time that does not grow with it either, and `undo` neither
//! rebuilds nor copies the branch (compared between 20,000 and 200,000 messages of the same shape,
//! and against `show` on the same machine, so that the machine's speed cancels out).

use crate::common;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use common::{run_measured, run_ok, sessiondb};

/// sessiondb's chunk size (`store::blobs::CHUNK`).
const CHUNK: usize = 4 << 20;

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    let mut state = u32::from(seed) + 1;
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (state >> 16) as u8
        })
        .collect()
}

/// The longest value any column of any table of the database holds (on a server, any text or
/// bytea column, in bytes).
fn longest_value(db: &Path) -> i64 {
    if let Some(url) = db.to_str().filter(|u| u.starts_with("postgres")) {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        let columns: Vec<(String, String)> = client
            .query(
                "SELECT c.table_name::text, c.column_name::text FROM information_schema.columns c JOIN pg_tables t ON t.tablename = c.table_name AND t.schemaname = c.table_schema
                 WHERE c.table_schema = current_schema() AND c.data_type IN ('text', 'bytea')",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        return columns
            .iter()
            .map(|(table, column)| {
                client.query_one(&format!("SELECT coalesce(max(octet_length(\"{column}\")), 0)::bigint FROM \"{table}\""), &[]).unwrap().get::<_, i64>(0)
            })
            .max()
            .unwrap_or(0);
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut longest = 0;
    for table in tables {
        let columns: Vec<String> =
            conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')")).unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
        for column in columns {
            let n: Option<i64> = conn.query_row(&format!("SELECT max(length(\"{column}\")) FROM \"{table}\""), [], |r| r.get(0)).unwrap();
            longest = longest.max(n.unwrap_or(0));
        }
    }
    longest
}

/// Item 10: files of several chunks (and of exactly one, and empty) round-trip byte for byte
/// through import, sync, `append --file` and export, and the database never holds a value
/// larger than a chunk. Before, a file was one value: one of 1,000,000,000 bytes or more could
/// not be stored at all, and here the database held a 10 MiB value.
#[test]
fn files_of_any_size_are_stored_in_chunks_and_round_trip() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        let dir = logs.join("big-files");
        fs::create_dir_all(dir.join("files")).unwrap();
        fs::write(dir.join("conversation.jsonl"), b"{\"role\": \"user\", \"content\": \"see files\", \"timestamp\": \"2026-07-01T10:00:00.000001\"}\n").unwrap();
        fs::write(dir.join("files/several-chunks.bin"), bytes(2 * CHUNK + CHUNK / 2 + 7, 1)).unwrap();
        fs::write(dir.join("files/one-chunk.bin"), bytes(CHUNK, 2)).unwrap();
        fs::write(dir.join("files/empty.bin"), b"").unwrap();
        run_ok(sessiondb(db).arg("import").arg(&logs));

        // gptme adds a file; sync reads it in.
        fs::write(dir.join("files/added-later.bin"), bytes(CHUNK + 1, 3)).unwrap();
        run_ok(sessiondb(db).arg("sync").arg(&logs));
        // An operation stores an attachment.
        let outside = work.join("attachment.dat");
        fs::write(&outside, bytes(3 * CHUNK - 1, 4)).unwrap();
        run_ok(sessiondb(db).args(["append", "big-files", "--role", "user", "--content", "attached", "--file"]).arg(&outside));
        assert_eq!(fs::read_dir(dir.join("files")).unwrap().count(), 5, "the attachment is in files/");

        let out = work.join("out");
        run_ok(sessiondb(db).args(["export", "--to"]).arg(&out));
        common::tree::assert_same_tree(&dir, &out.join("big-files"), &[".lock"]);
        let longest = longest_value(db);
        assert!(longest <= CHUNK as i64, "a value of {longest} bytes: files are stored whole, not in chunks");
        let (ok, report) = doctor(db);
        assert!(ok, "{report}");
    })
}

fn doctor(db: &Path) -> (bool, String) {
    let out = sessiondb(db).arg("doctor").output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A conversation of `n` small messages (user and assistant in turn, as gptme writes them),
/// with an event log whose next event is not a checkpoint.
fn long_conversation(logs: &Path, id: &str, n: usize) {
    let dir = logs.join(id);
    fs::create_dir_all(&dir).unwrap();
    let mut out = std::io::BufWriter::new(fs::File::create(dir.join("conversation.jsonl")).unwrap());
    let mut first = String::new();
    for i in 0..n {
        let time = format!("2026-07-01T{:02}:{:02}:{:02}.{:06}", (i / 3600) % 24, (i / 60) % 60, i % 60, 1 + i % 999_998);
        let line = if i % 2 == 0 {
            format!(r#"{{"role": "user", "content": "message {i}: please look at this", "timestamp": "{time}"}}"#)
        } else {
            format!(
                r#"{{"role": "assistant", "content": "reply {i}: done", "timestamp": "{time}", "metadata": {{"model": "anthropic/claude", "usage": {{"input_tokens": 10, "output_tokens": 5}}, "cost": 0.001}}}}"#
            )
        };
        if i == 0 {
            first = line.clone();
        }
        writeln!(out, "{line}").unwrap();
    }
    out.flush().unwrap();
    fs::write(
        dir.join("events.jsonl"),
        format!("{{\"seq\": 1, \"ts\": \"2026-07-01T00:00:00.000001+00:00\", \"type\": \"message_append\", \"payload\": {{\"message\": {first}}}}}\n"),
    )
    .unwrap();
}

/// Peak memory (MiB) and seconds of one command.
struct Cost {
    mib: u64,
    seconds: f64,
}

fn measure(db: &Path, args: &[&str], work: &Path) -> Cost {
    let started = Instant::now();
    let (code, stderr, mib) = run_measured(sessiondb(db).args(args), work);
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(code, 0, "{args:?}: {stderr}");
    Cost { mib, seconds }
}

/// How much more memory a command may use at 200,000 messages than at 20,000: SQLite's page
/// cache (32 MiB at most) fills with the larger database; nothing else may grow. Loading the
/// conversation (the old way) costs far more: 200,000 messages are 32 MB of lines.
const GROWTH_MIB: u64 = 40;

/// Item 11: `read -n 10`, `show`, `stats CHAT`, `doctor`, `export --format html|markdown` and
/// `undo` on a conversation ten times as long use at most [`GROWTH_MIB`] more memory,
/// `read -n 10` takes less than three times as long, and `undo` less than half of `show` (reading
/// the conversation once). Before, each loaded the whole conversation (memory growing with it;
/// `undo` also decoded, re-encoded and re-inserted every message: fifteen times `show`; then,
/// copying the branch's rows for its backup, about one `show`).
#[test]
fn per_conversation_commands_do_not_grow_with_the_conversation() {
    let work = tempfile::tempdir().unwrap();
    let mut costs = Vec::new();
    for n in [20_000, 200_000] {
        let logs = work.path().join(format!("logs-{n}"));
        long_conversation(&logs, "long", n);
        let db = work.path().join(format!("db-{n}"));
        run_ok(sessiondb(&db).arg("import").arg(&logs));
        let commands: [&[&str]; 7] = [
            &["read", "long", "-n", "10"],
            &["show", "long"],
            &["stats", "long"],
            &["doctor"],
            &["export", "--format", "html", "long"],
            &["export", "--format", "markdown", "long"],
            &["undo", "long"],
        ];
        costs.push(commands.iter().map(|args| (args.join(" "), measure(&db, args, work.path()))).collect::<Vec<_>>());
        // The undo did what gptme's does: a backup of the whole branch, one message fewer.
        let dir = logs.join("long");
        let lines = |p: &str| fs::read(dir.join(p)).unwrap().iter().filter(|&&b| b == b'\n').count();
        assert_eq!((lines("conversation.jsonl"), lines("branches/main-undo-0.jsonl")), (n - 1, n));
        let (ok, report) = doctor(&db);
        assert!(ok, "{report}");
    }
    let mut failures = Vec::new();
    for ((command, small), (_, large)) in costs[0].iter().zip(&costs[1]) {
        eprintln!("{command}: {} MiB, {:.2} s at 20k; {} MiB, {:.2} s at 200k", small.mib, small.seconds, large.mib, large.seconds);
        if large.mib > small.mib + GROWTH_MIB {
            failures.push(format!("{command}: memory grew from {} MiB to {} MiB", small.mib, large.mib));
        }
        if command.starts_with("read") && large.seconds > 3.0 * small.seconds.max(0.05) {
            failures.push(format!("{command}: time grew from {:.2} s to {:.2} s", small.seconds, large.seconds));
        }
    }
    // undo reads and copies no rows of the branch: its backup borrows them (schema 0010), and
    // only the kernel copies the shortened file. It costs well under reading the conversation
    // once (show); copying the rows cost about as much as that, rebuilding the branch fifteen
    // times as much.
    let at = |command: &str| &costs[1].iter().find(|(c, _)| c == command).expect("measured").1;
    let (undo, show) = (at("undo long"), at("show long"));
    if undo.seconds > 0.5 * show.seconds {
        failures.push(format!("undo took {:.2} s at 200k, more than half of reading the whole conversation ({:.2} s)", undo.seconds, show.seconds));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
