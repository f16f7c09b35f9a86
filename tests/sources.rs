//! Issue 19, first part: many logs roots in one store. Each root is a source; a conversation is
//! identified by source and chat id, so two roots' `my-chat` are kept apart; commands name one
//! as `SOURCE:CHAT` or by a chat id that only one source has; `list`, `search` and `stats`
//! filter by `--source` and show the source once there are several; a sync or import of a
//! root writes only that root's source.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{run_ok, sessiondb};
use serde_json::Value;

/// A conversation directory `root/chat` whose one message says `said`.
fn conversation(root: &Path, chat: &str, said: &str) -> PathBuf {
    let dir = root.join(chat);
    fs::create_dir_all(&dir).unwrap();
    let line = format!("{{\"role\": \"user\", \"content\": \"{said}\", \"timestamp\": \"2026-01-01T00:00:00\"}}\n");
    fs::write(dir.join("conversation.jsonl"), line).unwrap();
    dir
}

/// The default name of `root`'s source: this host and the root's canonical path.
fn default_name(root: &Path) -> String {
    format!("{}:{}", sessiondb::store::sources::hostname(), fs::canonicalize(root).unwrap().display())
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two roots `a` and `b`, both with `my-chat` (saying different things), `b` also `only-b`,
/// and a database for them.
struct TwoRoots {
    db: PathBuf,
    a: PathBuf,
    b: PathBuf,
    _db: common::TestDb,
    _work: tempfile::TempDir,
}

/// [`TwoRoots`] once per engine (an SQLite file, a fresh PostgreSQL database), each in a work
/// directory of its own.
fn two_roots() -> Vec<TwoRoots> {
    ["sqlite", "postgres"]
        .into_iter()
        .filter_map(|engine| {
            let work = tempfile::tempdir().unwrap();
            let test_db = common::TestDb::of(engine, work.path())?;
            let (a, b) = (work.path().join("a"), work.path().join("b"));
            conversation(&a, "my-chat", "alpha words");
            conversation(&b, "my-chat", "beta words");
            conversation(&b, "only-b", "gamma words");
            Some(TwoRoots { db: test_db.db.clone(), a, b, _db: test_db, _work: work })
        })
        .collect()
}

#[test]
fn two_roots_with_the_same_chat_id_are_both_kept() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a));
        run_ok(sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "laptop"]));
        let listed = json(&run_ok(sessiondb(&t.db).args(["list", "--json"])));
        let mut rows: Vec<(String, String)> =
            listed.as_array().unwrap().iter().map(|c| (c["source"].as_str().unwrap().to_owned(), c["id"].as_str().unwrap().to_owned())).collect();
        rows.sort();
        let a = default_name(&t.a);
        let mut expected = vec![(a.clone(), "my-chat".to_owned()), ("laptop".to_owned(), "my-chat".to_owned()), ("laptop".to_owned(), "only-b".to_owned())];
        expected.sort();
        assert_eq!(rows, expected, "both my-chats, each under its source (the first named by default)");

        // SOURCE:CHAT names each; a bare id that only one source has names that one.
        let read = |name: &str| stdout(&run_ok(sessiondb(&t.db).args(["show", name, "--json"])));
        assert!(read("laptop:my-chat").contains("beta words"));
        assert!(read(&format!("{a}:my-chat")).contains("alpha words"));
        assert!(read("only-b").contains("gamma words"));

        // Written back byte for byte, each from its own source.
        let out = t.a.parent().unwrap().join("out");
        run_ok(sessiondb(&t.db).args(["export", "laptop:my-chat", "--to"]).arg(&out));
        assert_eq!(fs::read(out.join("my-chat/conversation.jsonl")).unwrap(), fs::read(t.b.join("my-chat/conversation.jsonl")).unwrap());

        // `doctor` passes on a store of two sources.
        run_ok(sessiondb(&t.db).arg("doctor"));
    }
}

#[test]
fn a_bare_chat_id_in_two_sources_is_refused_naming_both() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a));
        run_ok(sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "laptop"]));
        for command in [vec!["read", "my-chat"], vec!["show", "my-chat"], vec!["stats", "my-chat"], vec!["export", "my-chat", "--format", "markdown"]] {
            let out = sessiondb(&t.db).args(&command).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{command:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                err.trim(),
                format!("sessiondb: \"my-chat\" names more than one conversation; give one of: laptop:my-chat, {}:my-chat", default_name(&t.a)),
                "{command:?}: one error, listing the candidates as SOURCE:CHAT"
            );
        }
        // A source that does not exist names nothing.
        let out = sessiondb(&t.db).args(["show", "desktop:my-chat"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no conversation \"desktop:my-chat\""));
    }
}

/// Chat ids may hold `:` (gptme allows it). `SOURCE:CHAT` is read first, so that the names the
/// ambiguity error offers always find what they are offered for; a chat id with `:` is still
/// found bare when no source's name starts it, and always as `SOURCE:CHAT`.
#[test]
fn a_chat_id_with_a_colon_is_still_a_chat_id() {
    let work = tempfile::tempdir().unwrap();
    let (a, db) = (work.path().join("a"), work.path().join("db"));
    conversation(&a, "laptop:notes", "colon words");
    conversation(&a, "todo:later", "todo words");
    conversation(&work.path().join("b"), "notes", "plain words");
    conversation(&work.path().join("c"), "notes", "other words");
    run_ok(sessiondb(&db).arg("import").arg(&a).args(["--source", "home"]));
    run_ok(sessiondb(&db).arg("import").arg(work.path().join("b")).args(["--source", "laptop"]));
    run_ok(sessiondb(&db).arg("import").arg(work.path().join("c")).args(["--source", "work"]));
    let shows = |name: &str, words: &str| assert!(stdout(&run_ok(sessiondb(&db).args(["show", name, "--json"]))).contains(words), "{name} shows {words}");
    shows("todo:later", "todo words");
    shows("laptop:notes", "plain words");
    shows("home:laptop:notes", "colon words");
    // `notes` is in two sources: each name the error offers finds its own.
    let out = sessiondb(&db).args(["show", "notes"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.trim_end().ends_with("give one of: laptop:notes, work:notes"), "{said}");
    shows("work:notes", "other words");
}

#[test]
fn list_search_and_stats_filter_by_source_and_show_it_only_when_there_are_several() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a));
        // One source: output as before, no source anywhere.
        let one = stdout(&run_ok(sessiondb(&t.db).args(["list", "--json"])));
        assert!(!one.contains("\"source\""), "{one}");
        assert!(!stdout(&run_ok(sessiondb(&t.db).arg("list"))).contains("SOURCE"));
        assert!(!stdout(&run_ok(sessiondb(&t.db).args(["search", "words", "--json"]))).contains("\"source\""));
        assert!(json(&run_ok(sessiondb(&t.db).args(["stats", "--json"]))).get("by_source").is_none());

        run_ok(sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "laptop"]));
        let table = stdout(&run_ok(sessiondb(&t.db).arg("list")));
        assert!(table.lines().next().unwrap().contains("SOURCE"), "{table}");
        assert!(table.lines().any(|l| l.contains("laptop") && l.contains("only-b")), "{table}");

        let only: Vec<String> = json(&run_ok(sessiondb(&t.db).args(["list", "--json", "--source", "laptop"])))
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(only.len(), 2);
        assert!(only.iter().all(|id| id == "my-chat" || id == "only-b"));

        let found = json(&run_ok(sessiondb(&t.db).args(["search", "words", "--json"])));
        let mut hits: Vec<String> =
            found["results"].as_array().unwrap().iter().map(|r| format!("{}:{}", r["source"].as_str().unwrap(), r["id"].as_str().unwrap())).collect();
        hits.sort();
        assert_eq!(hits.len(), 3, "both my-chats found, apart: {hits:?}");
        let filtered = json(&run_ok(sessiondb(&t.db).args(["search", "words", "--json", "--source", &default_name(&t.a)])));
        let ids: Vec<&str> = filtered["results"].as_array().unwrap().iter().map(|r| r["snippets"][0]["snippet"].as_str().unwrap()).collect();
        assert_eq!(ids, ["alpha words"]);
        let chat = json(&run_ok(sessiondb(&t.db).args(["search", "words", "--json", "--chat", "laptop:my-chat"])));
        assert_eq!(chat["results"][0]["snippets"][0]["snippet"], "beta words");

        let stats = json(&run_ok(sessiondb(&t.db).args(["stats", "--json"])));
        assert_eq!(stats["total_conversations"], 3);
        assert_eq!(stats["by_source"]["laptop"]["conversations"], 2);
        assert_eq!(stats["by_source"][default_name(&t.a)]["conversations"], 1);
        let laptop = json(&run_ok(sessiondb(&t.db).args(["stats", "--json", "--source", "laptop"])));
        assert_eq!(laptop["total_conversations"], 2);
        assert_eq!(json(&run_ok(sessiondb(&t.db).args(["stats", "laptop:my-chat", "--json"])))["source"], "laptop");

        // A source that is not there is a bad argument, as other filters that name nothing.
        let out = sessiondb(&t.db).args(["search", "words", "--source", "desktop"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--source \"desktop\" names nothing in the store"));
        let out = sessiondb(&t.db).args(["list", "--source", "desktop"]).output().unwrap();
        assert_ne!(out.status.code(), Some(0));
    }
}

/// A sync of root R writes R's source only: the same chat id in another root is never
/// replaced, and a conversation moved from one root to another is a new conversation of the
/// second, while the first keeps its rows until its own sync finds the directory gone.
#[test]
fn a_sync_of_a_root_writes_only_its_own_source() {
    for t in two_roots() {
        conversation(&t.a, "moving", "moving words");
        run_ok(sessiondb(&t.db).arg("sync").arg(&t.a));
        run_ok(sessiondb(&t.db).arg("sync").arg(&t.b).args(["--source", "laptop"]));
        let a = default_name(&t.a);
        let show = |name: &str| stdout(&run_ok(sessiondb(&t.db).args(["show", name, "--json"])));
        assert!(show(&format!("{a}:my-chat")).contains("alpha words"), "b's sync left a's my-chat as it was");
        assert!(show("laptop:my-chat").contains("beta words"));

        // b's my-chat grows; a sync of b changes b's only.
        let mut grown = fs::read(t.b.join("my-chat/conversation.jsonl")).unwrap();
        grown.extend_from_slice(b"{\"role\": \"assistant\", \"content\": \"more beta\", \"timestamp\": \"2026-01-01T00:00:01\"}\n");
        fs::write(t.b.join("my-chat/conversation.jsonl"), &grown).unwrap();
        run_ok(sessiondb(&t.db).arg("sync").arg(&t.b));
        assert!(show("laptop:my-chat").contains("more beta"));
        assert!(!show(&format!("{a}:my-chat")).contains("more beta"));

        // `moving` goes from a to b: a sync of b takes it in as b's, and leaves a's alone.
        fs::rename(t.a.join("moving"), t.b.join("moving")).unwrap();
        run_ok(sessiondb(&t.db).arg("sync").arg(&t.b));
        assert!(show("laptop:moving").contains("moving words"));
        assert!(show(&format!("{a}:moving")).contains("moving words"), "a's row is a's sync's to judge");
        // a's sync then finds it gone: hidden from list, kept until `rm`.
        run_ok(sessiondb(&t.db).arg("sync").arg(&t.a));
        let listed: Vec<String> = json(&run_ok(sessiondb(&t.db).args(["list", "--json"])))
            .as_array()
            .unwrap()
            .iter()
            .map(|c| format!("{}:{}", c["source"].as_str().unwrap(), c["id"].as_str().unwrap()))
            .collect();
        assert!(listed.contains(&"laptop:moving".to_owned()) && !listed.contains(&format!("{a}:moving")), "{listed:?}");
        assert!(show(&format!("{a}:moving")).contains("moving words"), "marked deleted, not purged");
    }
}

/// One root, one source: a second name for a root, or a name that reads another root, is
/// refused before anything is written.
#[test]
fn a_source_reads_one_root() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a).args(["--source", "desk"]));
        let out = sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "desk"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("source \"desk\" reads"), "{}", String::from_utf8_lossy(&out.stderr));
        let out = sessiondb(&t.db).arg("sync").arg(&t.a).args(["--source", "other"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("is read as source \"desk\" already"), "{}", String::from_utf8_lossy(&out.stderr));
        // Without --source, the root's source is the one the store has for it.
        run_ok(sessiondb(&t.db).arg("sync").arg(&t.a));
        let listed = json(&run_ok(sessiondb(&t.db).args(["list", "--json"])));
        assert_eq!(listed.as_array().unwrap().len(), 1);
        assert!(listed[0].get("source").is_none(), "still one source");
    }
}

/// Operations on a conversation named `SOURCE:CHAT` change that one, in its own directory.
#[test]
fn an_operation_on_source_chat_changes_that_conversation_only() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a));
        run_ok(sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "laptop"]));
        let a_before = fs::read(t.a.join("my-chat/conversation.jsonl")).unwrap();
        run_ok(sessiondb(&t.db).args(["append", "laptop:my-chat", "--role", "user", "--content", "appended to b"]));
        assert!(fs::read_to_string(t.b.join("my-chat/conversation.jsonl")).unwrap().contains("appended to b"));
        assert_eq!(fs::read(t.a.join("my-chat/conversation.jsonl")).unwrap(), a_before, "a's directory untouched");
        assert!(stdout(&run_ok(sessiondb(&t.db).args(["show", "laptop:my-chat", "--json"]))).contains("appended to b"));
        run_ok(sessiondb(&t.db).arg("doctor"));
    }
}

/// A store written by the sessiondb before sources (schema 12, commit 40f7269, from the fixture
/// logs root at /tmp/fx/logs) keeps working once migrated: its conversations are the source of
/// that root, and export writes them back byte for byte (modes and mtimes included).
#[test]
fn a_store_of_the_previous_schema_still_round_trips_exactly() {
    let work = tempfile::tempdir().unwrap();
    let db = work.path().join("db");
    fs::copy(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/schema12-by-40f7269.sqlite"), &db).unwrap();
    let listed = json(&run_ok(sessiondb(&db).args(["list", "--json", "--all"])));
    assert_eq!(listed.as_array().unwrap().len(), 18);
    assert!(listed[0].get("source").is_none(), "one source");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let sources: Vec<(String, String)> =
        conn.prepare("SELECT name, root FROM sources").unwrap().query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(sources, [(format!("{}:/tmp/fx/logs", sessiondb::store::sources::hostname()), "/tmp/fx/logs".to_owned())]);
    drop(conn);
    let out = work.path().join("out");
    run_ok(sessiondb(&db).arg("export").arg("--to").arg(&out));
    // The store was made from another checkout of the fixtures: the same bytes, not the same
    // mtimes; and from the fixtures as generated then, at /work/main/tests/fixtures/gptme-logs,
    // where the sample now names the neutral root gptme's own default would be for `you`.
    common::tree::neutral_paths(&out);
    common::tree::assert_same_contents(&common::fixtures(), &out, &[".lock"]);
    run_ok(sessiondb(&db).arg("doctor"));
}

/// `export --to DIR` writes DIR/<chat id>: two sources' `my-chat` cannot both go to one DIR, so
/// exporting all of them is refused before anything is written, and `--source` exports one
/// root's conversations, byte for byte.
#[test]
fn export_writes_one_source_per_directory() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a));
        run_ok(sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "laptop"]));
        let out = t.a.parent().unwrap().join("out");
        let refused = sessiondb(&t.db).arg("export").arg("--to").arg(&out).output().unwrap();
        assert_eq!(refused.status.code(), Some(1));
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(err.contains("would both be written to") && err.contains("laptop:my-chat"), "{err}");
        assert!(!out.join("my-chat").exists(), "nothing written");
        run_ok(sessiondb(&t.db).arg("export").arg("--to").arg(&out).args(["--source", "laptop"]));
        common::tree::assert_same_tree(&t.b, &out, &[".lock"]);
        let out_a = t.a.parent().unwrap().join("out-a");
        run_ok(sessiondb(&t.db).arg("export").arg("--to").arg(&out_a).args(["--source", &default_name(&t.a)]));
        common::tree::assert_same_tree(&t.a, &out_a, &[".lock"]);
    }
}

/// The catch-up before a command that names a conversation reads that conversation's own
/// directory: `SOURCE:CHAT` of a changed one, and of one new under that source's root.
#[test]
fn the_catch_up_before_a_command_reads_the_named_sources_directory() {
    for t in two_roots() {
        run_ok(sessiondb(&t.db).arg("import").arg(&t.a));
        run_ok(sessiondb(&t.db).arg("import").arg(&t.b).args(["--source", "laptop"]));
        let mut grown = fs::read(t.b.join("my-chat/conversation.jsonl")).unwrap();
        grown.extend_from_slice(b"{\"role\": \"assistant\", \"content\": \"written since\", \"timestamp\": \"2026-01-01T00:00:01\"}\n");
        fs::write(t.b.join("my-chat/conversation.jsonl"), &grown).unwrap();
        let show = |name: &str| stdout(&run_ok(sessiondb(&t.db).args(["show", name, "--json"])));
        assert!(show("laptop:my-chat").contains("written since"));
        assert!(!show(&format!("{}:my-chat", default_name(&t.a))).contains("written since"));
        conversation(&t.b, "new-one", "brand new");
        assert!(show("laptop:new-one").contains("brand new"), "taken in from laptop's root");
    }
}

/// One directory is one source whatever path names it: read again through a link to it, with
/// `..` in its path, or relative to the working directory, it is the source that reads it
/// already (nothing new, no second copy of any conversation), and what gptme added is read in.
#[test]
fn one_directory_is_one_source_whatever_path_names_it() {
    let work = tempfile::tempdir().unwrap();
    let (logs, db) = (work.path().join("logs"), work.path().join("db"));
    let dir = conversation(&logs, "c", "first words");
    std::os::unix::fs::symlink(&logs, work.path().join("logs-link")).unwrap();
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let json = |args: &[&str]| -> serde_json::Value { serde_json::from_slice(&run_ok(sessiondb(&db).current_dir(work.path()).args(args)).stdout).unwrap() };
    for other in ["logs-link", "./logs/../logs", "logs/"] {
        let imported = json(&["import", other, "--json"]);
        assert_eq!((imported["conversations"].as_u64(), imported["unchanged"].as_u64()), (Some(0), Some(1)), "{other}: {imported}");
    }
    let mut line = fs::read_to_string(dir.join("conversation.jsonl")).unwrap();
    line.push_str("{\"role\": \"assistant\", \"content\": \"later words\", \"timestamp\": \"2026-01-01T00:00:01\"}\n");
    fs::write(dir.join("conversation.jsonl"), line).unwrap();
    let synced = json(&["sync", "logs-link", "--json"]);
    assert_eq!(synced["ingest"]["new_conversations"].as_u64(), Some(0), "{synced}");
    let listed = json(&["list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["messages"].as_u64(), Some(2), "{listed}");
    assert!(listed[0].get("source").is_none(), "one source, so none shown: {listed}");
}

/// The bytes of the files below `dir` but gptme's `.lock` files (which an export takes).
fn file_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            total += file_bytes(&entry.path());
        } else if meta.is_file() && entry.file_name() != ".lock" {
            total += meta.len();
        }
    }
    total
}

/// Issue 36: `stats --disk` counts each part of the store once (on SQLite they add up to the
/// file, its log and the ranking index, as the test measures them; on a server to sessiondb's
/// own tables, another program's table in the same schema left out), and the logs beside it
/// are the bytes `export` writes, per source. `compact` then leaves nothing free and every
/// conversation as it was.
#[test]
fn stats_disk_counts_every_byte_once_and_each_source_its_own() {
    common::on_each_engine(|work, db| {
        let (a, b) = (work.join("a"), work.join("b"));
        common::tree::copy_tree(&common::fixtures(), &a);
        for i in 0..3 {
            conversation(&b, &format!("2026-02-0{i}-other"), &format!("another root's conversation {i}"));
        }
        run_ok(sessiondb(db).args(["import", "--source", "a"]).arg(&a));
        run_ok(sessiondb(db).args(["import", "--source", "b"]).arg(&b));
        let disk = || json(&run_ok(sessiondb(db).args(["stats", "--disk", "--json"])));
        let used = disk();
        let parts = used["parts"].as_object().unwrap();
        let total: u64 = parts.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(used["total_bytes"], total, "{used}");
        let sqlite = !db.to_string_lossy().starts_with("postgres");
        if sqlite {
            let size = |suffix: &str| fs::metadata(format!("{}{suffix}", db.display())).map_or(0, |m| m.len());
            let ranking = PathBuf::from(format!("{}.ranking", db.display()));
            let ranking = if ranking.is_dir() { file_bytes(&ranking) } else { 0 };
            assert_eq!(total, size("") + size("-wal") + size("-shm") + ranking, "{used}");
            assert_eq!(used["engine"], "sqlite");
        } else {
            let keys: Vec<&String> = parts.keys().collect();
            assert_eq!(keys, ["rows", "texts", "attachments", "search_sets"], "{used}");
            // Another program's table in the same schema is not sessiondb's.
            let mut client = postgres::Client::connect(db.to_str().unwrap(), postgres::NoTls).unwrap();
            client
                .batch_execute("CREATE TABLE another_program (data text); INSERT INTO another_program SELECT repeat('x', 1000) FROM generate_series(1, 2000)")
                .unwrap();
            assert_eq!(disk()["total_bytes"], total);
        }
        assert!(parts.values().filter(|v| v.as_u64().unwrap() > 0).count() >= 4, "{used}");
        let sources = used["by_source"].as_array().unwrap();
        assert_eq!(sources.len(), 2, "{used}");
        let mut logs = 0;
        for (source, root, convs) in [("a", &a, 18), ("b", &b, 3)] {
            let s = sources.iter().find(|s| s["source"] == source).unwrap_or_else(|| panic!("{source} in {used}"));
            assert_eq!(s["conversations"], convs, "{s}");
            let out = work.join(format!("export-{source}"));
            run_ok(sessiondb(db).args(["export", "--source", source, "--to"]).arg(&out));
            assert_eq!(s["logs_bytes"], file_bytes(&out), "{source}: the bytes its export writes");
            assert!(file_bytes(root) >= s["logs_bytes"].as_u64().unwrap());
            assert!(s["texts_bytes"].as_u64().unwrap() > 0, "{s}");
            logs += s["logs_bytes"].as_u64().unwrap();
        }
        assert_eq!(used["logs_bytes"], logs);
        let shown = String::from_utf8(run_ok(sessiondb(db).args(["stats", "--disk"])).stdout).unwrap();
        assert!(shown.contains("conversations and messages") && shown.contains("By source"), "{shown}");
        let done = json(&run_ok(sessiondb(db).args(["compact", "--json"])));
        assert_eq!(done["free_after"], 0, "{done}");
        let after = work.join("export-after");
        run_ok(sessiondb(db).args(["export", "--source", "a", "--to"]).arg(&after));
        common::tree::assert_same_tree(&work.join("export-a"), &after, &[".lock"]);
    });
}
