//! Issue 19: the store on a PostgreSQL server. The same commands answer the same on both
//! engines; many hosts starting against a new database migrate it once; several hosts
//! importing their logs roots into one database at once each keep their own conversations,
//! the same chat ids apart, every one written back byte for byte. (The round trip and the log
//! operations against real gptme run on both engines in `roundtrip` and `differential_ops`.)

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use common::pg::{as_role, psql_file, Roles};
use common::tree::{assert_same_tree, copy_tree};
use common::{fixtures, run_ok, sessiondb};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Every reading command, for the whole store and for each conversation, prints the same on
/// PostgreSQL as on SQLite.
#[test]
fn both_engines_answer_alike() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    copy_tree(&fixtures(), &logs);
    let sqlite = common::TestDb::sqlite(work.path());
    for db in [&sqlite.db, &pg.db] {
        run_ok(sessiondb(db).arg("import").arg(&logs).args(["--source", "host"]));
    }
    let listed: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&sqlite.db).args(["list", "--json", "--all"])).stdout).unwrap();
    let ids: Vec<String> = listed.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect();
    assert!(ids.len() >= 15, "{ids:?}");
    let mut commands: Vec<Vec<String>> = [
        "list",
        "list --json",
        "list --all --sort cost",
        "list --all --sort tokens",
        "list --all --sort tokens --reverse",
        "list --all --sort messages",
        "list --name 2026-07-0*",
        "list --model sonnet",
        "stats",
        "stats --json",
    ]
    .iter()
    .map(|c| c.split(' ').map(str::to_owned).collect())
    .collect();
    for id in &ids {
        for c in ["show", "show --json", "read", "stats", "export --format markdown", "export --format toml"] {
            let mut args: Vec<String> = c.split(' ').map(str::to_owned).collect();
            args.insert(1, id.clone());
            commands.push(args);
        }
    }
    for args in &commands {
        let on = |db: &Path| {
            let out = sessiondb(db).args(args).env("NO_COLOR", "1").output().unwrap();
            (out.status.code(), stdout(&out), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        let (a, b) = (on(&sqlite.db), on(&pg.db));
        assert_eq!(a.0, b.0, "{args:?}: exit codes (stderr on PostgreSQL: {})", b.2);
        assert_eq!(a.1, b.1, "{args:?}: SQLite's output, then PostgreSQL's");
    }
}

/// Many hosts starting at once against a new database: each opens it, one creates the schema
/// (under the advisory lock), and every one succeeds.
#[test]
fn many_hosts_migrate_a_new_database_once() {
    let Some(pg) = common::postgres_db() else { return };
    let children: Vec<_> = (0..8).map(|_| sessiondb(&pg.db).args(["list", "--json"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()).collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout(&out).trim(), "[]");
    }
    let url = pg.db.to_str().unwrap();
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let versions: Vec<i64> = client.query("SELECT version FROM sessiondb_schema", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(versions, [sessiondb::store::schema::POSTGRES_VERSION]);
}

/// Schema 24 on a server: a store at version 23 (texts found by source, then hash) is migrated
/// by the next command that opens it, to texts found by hash first, and keeps every byte.
#[test]
fn a_store_at_version_23_finds_its_texts_by_hash_first() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    copy_tree(&fixtures(), &logs);
    run_ok(sessiondb(&pg.db).arg("import").arg(&logs));
    let url = pg.db.to_str().unwrap();
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let index =
        |client: &mut postgres::Client| -> String { client.query_one("SELECT indexdef FROM pg_indexes WHERE indexname = 'texts_by_hash'", &[]).unwrap().get(0) };
    assert!(index(&mut client).ends_with("(hash, source_id)"), "{}", index(&mut client));
    // The store as version 23 left it (28 undone too, which a later migration cannot repeat).
    client
        .batch_execute(
            "DROP TRIGGER texts_stamp_added ON texts; DROP FUNCTION texts_stamp_added();
             DROP TRIGGER texts_log_deletions ON texts; DROP FUNCTION ranking_deletions_log(); DROP TABLE ranking_deletions;
             ALTER TABLE texts DROP COLUMN added;
             DROP INDEX texts_by_hash; CREATE INDEX texts_by_hash ON texts (source_id, hash); UPDATE sessiondb_schema SET version = 23",
        )
        .unwrap();
    run_ok(sessiondb(&pg.db).args(["list", "--json"]));
    assert!(index(&mut client).ends_with("(hash, source_id)"), "{}", index(&mut client));
    let version: i64 = client.query_one("SELECT version FROM sessiondb_schema", &[]).unwrap().get(0);
    assert_eq!(version, sessiondb::store::schema::CURRENT_VERSION, "and on to the current version");
    // The texts are found by it: a copy of a conversation under another name is stored with
    // the texts already there, none again.
    let texts = |client: &mut postgres::Client| -> i64 { client.query_one("SELECT count(*) FROM texts", &[]).unwrap().get(0) };
    let before = texts(&mut client);
    let first = fs::read_dir(&logs).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("conversation.jsonl").is_file()).min().unwrap();
    copy_tree(&first, &logs.join("a-copy"));
    let again: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&pg.db).arg("import").arg(&logs).arg("--json")).stdout).unwrap();
    assert_eq!((again["failed"].as_u64(), again["conversations"].as_u64()), (Some(0), Some(1)), "{again}");
    assert_eq!(texts(&mut client), before);
    let out = work.path().join("out");
    run_ok(sessiondb(&pg.db).args(["export", "--to"]).arg(&out));
    assert_same_tree(&logs, &out, &[".lock"]);
}

/// Three hosts import their logs roots (the same chat ids in each) into one database at once:
/// every conversation is there once under its host's source, each host's are written back
/// byte for byte, and a query sees all three.
#[test]
fn three_hosts_import_into_one_database_at_once() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let hosts = ["alpha", "beta", "gamma"];
    for host in hosts {
        copy_tree(&fixtures(), &work.path().join(host));
    }
    let children: Vec<_> = hosts
        .iter()
        .map(|host| {
            sessiondb(&pg.db)
                .arg("import")
                .arg(work.path().join(host))
                .args(["--source", host, "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut imported = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["failed"], 0, "{summary}");
        imported.push(summary["conversations"].as_u64().unwrap());
    }
    assert!(imported.iter().all(|&n| n == imported[0] && n > 0), "{imported:?}");
    let listed: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&pg.db).args(["list", "--json", "--all"])).stdout).unwrap();
    let mut seen: Vec<(String, String)> =
        listed.as_array().unwrap().iter().map(|c| (c["source"].as_str().unwrap().to_owned(), c["id"].as_str().unwrap().to_owned())).collect();
    seen.sort();
    let count = seen.len();
    seen.dedup();
    assert_eq!(seen.len(), count, "no conversation twice");
    assert_eq!(count as u64, imported.iter().sum::<u64>());
    for host in hosts {
        let out = work.path().join(format!("out-{host}"));
        run_ok(sessiondb(&pg.db).args(["export", "--source", host, "--to"]).arg(&out));
        assert_same_tree(&work.path().join(host), &out, &[".lock"]);
        let only: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&pg.db).args(["list", "--json", "--all", "--source", host])).stdout).unwrap();
        assert_eq!(only.as_array().unwrap().len() as u64, imported[0], "{host}");
    }
    // A bare chat id that every host has names none of them, and says which there are.
    let out = sessiondb(&pg.db).args(["show", "2026-07-05-branches"]).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    for host in hosts {
        assert!(said.contains(&format!("{host}:2026-07-05-branches")), "{said}");
    }
}

/// The multi-host test: three hosts, each with its own logs root (the same chat ids in
/// all three) where real gptme keeps appending, sync into one database at once, over and over;
/// one host's syncs are killed (SIGKILL) at random moments. Each host connects with a role of
/// its own (tools/pg/host-role.sql), so each writes its own source alone, under the server's
/// row-level security, beside the others. After a last sync of each, every message gptme
/// acknowledged on each host is in the store once, under that host's source, and each source
/// written out is its host's root, byte for byte.
#[test]
fn three_hosts_sync_while_gptme_writes_and_one_is_killed() {
    let Some(pg) = common::postgres_db() else { return };
    let (kills_wanted, mut rng) = common::crash::plan(20);
    let work = tempfile::tempdir().unwrap();
    let hosts = ["alpha", "beta", "gamma"];
    // The store's owner makes the schema; each host then has a role of its own.
    let owner = pg.db.to_str().unwrap().to_owned();
    run_ok(sessiondb(&pg.db).args(["list", "--all"]));
    let tag = format!("{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let role_of = |host: &str| format!("{host}_{tag}");
    let _roles = Roles { admin: common::postgres_server().unwrap(), db: owner.clone(), names: hosts.iter().map(|h| role_of(h)).collect() };
    let mut client = postgres::Client::connect(&owner, postgres::NoTls).unwrap();
    for host in hosts {
        client.batch_execute(&format!("CREATE ROLE \"{}\" LOGIN", role_of(host))).unwrap();
        psql_file(&owner, "tools/pg/host-role.sql", &[("role", &role_of(host))]);
    }
    let as_host: std::collections::HashMap<&str, std::path::PathBuf> = hosts.iter().map(|h| (*h, as_role(&owner, &role_of(h)))).collect();
    let killed = "beta";
    let chats = ["2026-12-01-host-new", "2026-07-01-basic-chat"];
    let mut appenders = Vec::new();
    for host in hosts {
        let root = work.path().join(host);
        copy_tree(&fixtures(), &root);
        let ack = work.path().join(format!("{host}.acks"));
        appenders.push(
            Command::new(common::gptme_python())
                .arg(common::tool("gptme_appender.py"))
                .arg(&root)
                .arg(&ack)
                // Enough to write all through a run on a quiet machine; bounded so that on a
                // loaded one the transcripts (which gptme reads whole before each append) stay
                // small enough for the rounds to go on.
                .arg("3000")
                .args(chats)
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    let sync = |host: &str| {
        let mut cmd = sessiondb(&as_host[host]);
        cmd.arg("sync").arg(work.path().join(host)).args(["--source", host]).stdout(Stdio::null()).stderr(Stdio::piped());
        cmd
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
    let (mut kills, mut rounds) = (0u32, 0u32);
    // Kill delays are spread over one and a half times about the length of a whole sync, which
    // follows the runs (longer after a kill, shorter after a sync that finished in time), so
    // that kills land in every phase however loaded the machine is.
    let mut whole = std::time::Duration::from_millis(200);
    while kills < kills_wanted || rounds < 10 {
        assert!(std::time::Instant::now() < deadline, "too slow: {kills} kills in {rounds} rounds");
        rounds += 1;
        // The hosts sync at once; the killed host's sync dies somewhere in it.
        let children: Vec<_> = hosts.iter().map(|host| (*host, sync(host).spawn().unwrap())).collect();
        for (host, mut child) in children {
            if host == killed {
                std::thread::sleep(std::time::Duration::from_micros(rng.next() % (whole.as_micros() as u64 * 3 / 2 + 1)));
                if child.try_wait().unwrap().is_none() {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    kills += 1;
                    whole = whole.mul_f64(1.1);
                    continue;
                }
                whole = whole.mul_f64(0.9);
            }
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{host}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    for mut appender in appenders {
        // SIGTERM: the appender finishes the append in hand and records it.
        unsafe { libc::kill(appender.id() as i32, libc::SIGTERM) };
        assert!(appender.wait().unwrap().success());
    }
    for host in hosts {
        let out = sync(host).output().unwrap();
        assert!(out.status.success(), "{host}: {}", String::from_utf8_lossy(&out.stderr));
    }

    let store = sessiondb::store::Store::open(&pg.db).unwrap();
    let conn = store.connection().unwrap();
    let mut acknowledged_in_all = 0;
    for host in hosts {
        let acknowledged: Vec<String> = fs::read_to_string(work.path().join(format!("{host}.acks"))).unwrap().lines().map(str::to_owned).collect();
        acknowledged_in_all += acknowledged.len();
        for chat in chats {
            let main = sessiondb::store::queries::branch_messages(&conn, &format!("{host}:{chat}"), "main").unwrap();
            for a in acknowledged.iter().filter(|a| a.starts_with(&format!("ack {chat} "))) {
                let found = main.iter().filter(|m| &m.content == a).count();
                assert_eq!(found, 1, "{host}: {a:?} is in its store copy {found} times");
            }
        }
        let out = work.path().join(format!("out-{host}"));
        run_ok(sessiondb(&pg.db).args(["export", "--source", host, "--to"]).arg(&out));
        assert_same_tree(&work.path().join(host), &out, &[".lock"]);
    }
    // A query across all sources sees every host's conversations, each under its host.
    let listed: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&pg.db).args(["list", "--json", "--all"])).stdout).unwrap();
    for host in hosts {
        for chat in chats {
            let rows = listed.as_array().unwrap().iter().filter(|c| c["source"] == host && c["id"] == chat).count();
            assert_eq!(rows, 1, "{host}:{chat} listed {rows} times");
        }
    }
    println!("rounds: {rounds}, kills: {kills}, messages acknowledged by gptme: {acknowledged_in_all}");
    assert!(acknowledged_in_all > 30, "gptme appended too little to test anything: {acknowledged_in_all}");
}

/// `doctor` on a server's database: sound after an import and in step with the logs root; the
/// search sets missing a message or miscounting are reported (exit 1) and `--reindex` makes
/// them again from the rows; a blob's chunk gone is reported as on SQLite; the password is never
/// shown.
#[test]
fn doctor_checks_a_server_database() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    copy_tree(&fixtures(), &logs);
    let url = pg.db.to_str().unwrap().to_owned();
    // The same database, named with a password the trust authentication ignores.
    let with_password = url.replacen("://sessiondb@", "://sessiondb:hunter2@", 1);
    let db = std::path::PathBuf::from(if with_password != url { with_password.clone() } else { url.clone() });
    let doctor = |args: &[&str]| {
        let out = sessiondb(&db).arg("doctor").args(args).env("NO_COLOR", "1").output().unwrap();
        let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert!(!text.contains("hunter2"), "the password is never shown: {text}");
        (out.status.code(), text)
    };
    let (code, text) = doctor(&[]);
    assert_eq!(code, Some(1), "a database sessiondb never used: {text}");
    assert!(text.contains("schema version 0 is older than"), "{text}");

    run_ok(sessiondb(&db).arg("import").arg(&logs).args(["--source", "host"]));
    let (code, text) = doctor(&[logs.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("no problems found") && text.contains("conversations in step"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&doctor(&["--json"]).1).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["schema_version"], sessiondb::store::schema::POSTGRES_VERSION);

    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "DELETE FROM text_terms WHERE text_id IN (SELECT text_id FROM text_terms ORDER BY text_id LIMIT 3);
             INSERT INTO text_terms_counts AS t (slot, documents, tokens) VALUES (0, 0, 1)
                 ON CONFLICT (slot) DO UPDATE SET tokens = t.tokens + 1",
        )
        .unwrap();
    let (code, text) = doctor(&[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("search index: 3 texts are neither in it nor waiting for it"), "{text}");
    assert!(text.contains("search index: its totals count"), "{text}");
    let (code, text) = doctor(&["--reindex"]);
    assert_eq!(code, Some(0), "made again from the rows: {text}");
    let found = stdout(&run_ok(sessiondb(&db).args(["search", "--json", "--all", "the"])));
    assert_ne!(serde_json::from_str::<serde_json::Value>(&found).unwrap()["total"]["messages"], 0);

    client.batch_execute("DELETE FROM blob_chunks WHERE id = (SELECT min(id) FROM blob_chunks)").unwrap();
    let (code, text) = doctor(&[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("blob: ") && text.contains("bytes stored of its"), "{text}");
}

/// The README's access recipes, run as written (tools/pg/reader-role.sql, own-sources.sql): a
/// reader lists, shows, searches and exports everything and writes nothing (refused, saying
/// why, the store unchanged); with row-level security each person sees only the sources named
/// for them, in every command and in every table, while the owner still sees all.
#[test]
fn a_reader_reads_all_and_each_person_only_their_sources() {
    let Some(pg) = common::postgres_db() else { return };
    let owner = pg.db.to_str().unwrap().to_owned();
    let work = tempfile::tempdir().unwrap();
    for host in ["alice-laptop", "bob-laptop"] {
        let logs = work.path().join(host);
        copy_tree(&fixtures(), &logs);
        run_ok(sessiondb(&pg.db).arg("import").arg(&logs).args(["--source", host]));
    }
    let tag = format!("{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let (reader, alice) = (format!("reader_{tag}"), format!("alice_{tag}"));
    let _roles = Roles { admin: common::postgres_server().unwrap(), db: owner.clone(), names: vec![reader.clone(), alice.clone()] };
    let mut client = postgres::Client::connect(&owner, postgres::NoTls).unwrap();
    client.batch_execute(&format!("CREATE ROLE \"{reader}\" LOGIN; CREATE ROLE \"{alice}\" LOGIN")).unwrap();
    let count = |client: &mut postgres::Client, sql: &str| -> i64 { client.query_one(sql, &[]).unwrap().get(0) };
    let messages = count(&mut client, "SELECT count(*) FROM messages");
    let listed = |db: &Path| -> Vec<String> {
        let rows: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(db).args(["list", "--json", "--all"])))).unwrap();
        // Each conversation as HOST:CHAT, the host from the logs root it was read from.
        let mut ids: Vec<String> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let path = Path::new(r["path"].as_str().unwrap());
                let host = path.parent().unwrap().parent().unwrap().file_name().unwrap().to_str().unwrap();
                format!("{host}:{}", r["id"].as_str().unwrap())
            })
            .collect();
        ids.sort();
        ids
    };
    let everything = listed(&pg.db);
    assert!(everything.iter().any(|id| id.starts_with("bob-laptop:")) && everything.iter().any(|id| id.starts_with("alice-laptop:")), "{everything:?}");

    psql_file(&owner, "tools/pg/reader-role.sql", &[("role", &reader)]);
    let as_reader = as_role(&owner, &reader);
    assert_eq!(listed(&as_reader), everything, "a reader sees every source");
    let chat = "alice-laptop:2026-07-01-basic-chat";
    for args in [vec!["show", chat], vec!["stats"], vec!["search", "the"], vec!["export", chat, "--format", "markdown"]] {
        let (a, b) = (run_ok(sessiondb(&pg.db).args(&args).env("NO_COLOR", "1")), run_ok(sessiondb(&as_reader).args(&args).env("NO_COLOR", "1")));
        assert_eq!(stdout(&a), stdout(&b), "{args:?}: the owner's output, then the reader's");
    }
    let out = sessiondb(&as_reader).args(["append", chat, "--role", "user", "--content", "not allowed"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("does not let this role do that") && err.contains("only reads"), "{err}");
    assert_eq!(count(&mut client, "SELECT count(*) FROM messages"), messages, "nothing written");

    psql_file(&owner, "tools/pg/own-sources.sql", &[]);
    psql_file(&owner, "tools/pg/reader-role.sql", &[("role", &alice)]);
    client.execute("INSERT INTO source_readers (role_name, source_id) SELECT $1, id FROM sources WHERE name = 'alice-laptop'", &[&alice]).unwrap();
    let as_alice = as_role(&owner, &alice);
    let hers: Vec<String> = listed(&as_alice);
    assert!(!hers.is_empty() && hers.iter().all(|id| !id.starts_with("bob-laptop:")), "{hers:?}");
    assert_eq!(hers.len() * 2, everything.len(), "her source's conversations, every one");
    let found: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&as_alice).args(["search", "--json", "--all", "-n", "1000", "the"])))).unwrap();
    let mine: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&pg.db).args(["search", "--json", "--all", "-n", "1000", "the"])))).unwrap();
    assert_eq!(found["total"]["messages"].as_u64().unwrap() * 2, mine["total"]["messages"].as_u64().unwrap(), "she finds her half");
    let out = sessiondb(&as_alice).args(["show", "bob-laptop:2026-07-01-basic-chat"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "bob's conversation is not there for her");
    let stats: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&as_alice).args(["stats", "--json"])))).unwrap();
    let all_stats: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&pg.db).args(["stats", "--json"])))).unwrap();
    assert_ne!(stats, all_stats);
    // Every table, read directly as her: only her source's rows.
    let mut hers_db = postgres::Client::connect(as_alice.to_str().unwrap(), postgres::NoTls).unwrap();
    for (table, all) in [("sources", 2), ("conversations", everything.len() as i64), ("messages", messages)] {
        assert_eq!(count(&mut hers_db, &format!("SELECT count(*) FROM {table}")) * 2, all, "{table}");
    }
    for table in ["documents", "document_lines", "events", "event_messages", "entries", "texts", "text_terms", "branches", "attachments", "blobs", "blob_chunks"] {
        let (hers, all) = (count(&mut hers_db, &format!("SELECT count(*) FROM {table}")), count(&mut client, &format!("SELECT count(*) FROM {table}")));
        assert!(hers > 0, "{table}: her rows");
        if !table.starts_with("blob") {
            assert_eq!(hers * 2, all, "{table}: her source's rows only");
        }
    }
    assert_eq!(listed(&pg.db), everything, "the owner still sees every source");
}

/// Each host writes only its own sources, enforced by the server (schema 17): two hosts with
/// roles of their own (tools/pg/host-role.sql) sync their roots; neither sessiondb run as one
/// host, nor SQL typed as it, adds to, changes or removes the other's rows, while removing its
/// own conversation keeps the attachments the other still holds. A source the owner made is
/// written by the owner until handed over. With tools/pg/own-sources.sql a host still writes
/// its own and sees just its own. A host syncing another's logs root reads it into a source of
/// its own (schema 20), the other's untouched.
#[test]
fn each_host_writes_only_its_own_sources() {
    let Some(pg) = common::postgres_db() else { return };
    let owner = pg.db.to_str().unwrap().to_owned();
    let work = tempfile::tempdir().unwrap();
    let root = |name: &str| {
        let logs = work.path().join(name);
        copy_tree(&fixtures(), &logs);
        logs
    };
    let (root_a, root_b, root_owner) = (root("a"), root("b"), root("owned"));
    run_ok(sessiondb(&pg.db).arg("import").arg(&root_owner).args(["--source", "owned"]));
    let tag = format!("{}_{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
    let (a, b) = (format!("host_a_{tag}"), format!("host_b_{tag}"));
    let _roles = Roles { admin: common::postgres_server().unwrap(), db: owner.clone(), names: vec![a.clone(), b.clone()] };
    let mut client = postgres::Client::connect(&owner, postgres::NoTls).unwrap();
    client.batch_execute(&format!("CREATE ROLE \"{a}\" LOGIN; CREATE ROLE \"{b}\" LOGIN")).unwrap();
    for role in [&a, &b] {
        psql_file(&owner, "tools/pg/host-role.sql", &[("role", role)]);
    }
    let (as_a, as_b) = (as_role(&owner, &a), as_role(&owner, &b));
    run_ok(sessiondb(&as_a).arg("sync").arg(&root_a).args(["--source", "a"]));
    run_ok(sessiondb(&as_b).arg("sync").arg(&root_b).args(["--source", "b"]));
    let count = |client: &mut postgres::Client, sql: &str| -> i64 { client.query_one(sql, &[]).unwrap().get(0) };
    let rows_of_a = |client: &mut postgres::Client| -> Vec<i64> {
        let of_a = "SELECT c.id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE s.name = 'a'";
        let mut queries: Vec<String> =
            ["messages", "documents", "entries", "pending_paths"].iter().map(|t| format!("SELECT count(*) FROM {t} WHERE conversation_id IN ({of_a})")).collect();
        queries.push(format!("SELECT count(*) FROM document_lines WHERE document_id IN (SELECT id FROM documents WHERE conversation_id IN ({of_a}))"));
        queries.extend(["SELECT count(*) FROM blob_chunks".to_owned(), format!("SELECT count(*) FROM conversations WHERE id IN ({of_a})")]);
        queries.push("SELECT count(*) FROM texts WHERE source_id IN (SELECT id FROM sources WHERE name = 'a')".to_owned());
        queries.push("SELECT coalesce(sum(length(data)), 0)::bigint FROM texts WHERE source_id IN (SELECT id FROM sources WHERE name = 'a')".to_owned());
        queries.push("SELECT count(*) FROM text_dictionaries".to_owned());
        queries.iter().map(|q| count(client, q)).collect()
    };
    let before = rows_of_a(&mut client);
    assert!(before[0] > 0 && before[2] > 0, "{before:?}");

    // sessiondb as host b: refused before anything is written, naming both roles.
    let chat = "a:2026-07-04-attachments";
    for args in [vec!["rm", "--yes", chat], vec!["append", chat, "--role", "user", "--content", "not b's"], vec!["rename", chat, "2026-07-04-renamed"]] {
        let out = sessiondb(&as_b).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("source \"a\" is written by role") && err.contains(&a) && err.contains(&b), "{args:?}: {err}");
    }
    // SQL typed as host b: updates and deletes of a's rows find none, inserts are refused.
    let mut typed = postgres::Client::connect(as_b.to_str().unwrap(), postgres::NoTls).unwrap();
    let a_conversations = "(SELECT c.id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE s.name = 'a')";
    for sql in [
        format!("UPDATE messages SET role = 'system' WHERE conversation_id IN {a_conversations}"),
        "UPDATE texts SET data = '\\x00'::bytea WHERE source_id IN (SELECT id FROM sources WHERE name = 'a')".to_owned(),
        "DELETE FROM texts WHERE source_id IN (SELECT id FROM sources WHERE name = 'a')".to_owned(),
        "DELETE FROM text_dictionaries".to_owned(),
        format!("DELETE FROM document_lines WHERE document_id IN (SELECT id FROM documents WHERE conversation_id IN {a_conversations})"),
        format!("DELETE FROM conversations WHERE id IN {a_conversations}"),
        "UPDATE sources SET writer = current_user WHERE name = 'a'".to_owned(),
        "DELETE FROM blobs".to_owned(),
        "DELETE FROM blob_chunks".to_owned(),
    ] {
        assert_eq!(typed.execute(sql.as_str(), &[]).unwrap(), 0, "{sql}");
    }
    for sql in [
        format!("INSERT INTO pending_paths (conversation_id, path) SELECT id, 'conversation.jsonl' FROM {a_conversations} x"),
        format!("INSERT INTO sources (name, root, writer) VALUES ('c', '/c', '{a}')"),
        "INSERT INTO blob_chunks (blob_id, seq, data) SELECT id, 1000, '\\x00' FROM blobs LIMIT 1".to_owned(),
        "INSERT INTO texts (source_id, hash, data) SELECT id, 1, '\\x00' FROM sources WHERE name = 'a'".to_owned(),
        "INSERT INTO text_dictionaries (id, source_id, data, created) SELECT 1, id, '\\x00', 0 FROM sources WHERE name = 'a'".to_owned(),
    ] {
        let e = typed.execute(sql.as_str(), &[]).unwrap_err();
        assert_eq!(e.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE), "{sql}: {e}");
    }
    assert_eq!(rows_of_a(&mut client), before, "host a's rows as they were");

    // Host b removes its own copy of the conversation with attachments: the blobs host a's copy
    // holds stay, and a's source is written out byte for byte.
    run_ok(sessiondb(&as_b).args(["rm", "--yes", "b:2026-07-04-attachments"]));
    let out = work.path().join("out-a");
    run_ok(sessiondb(&as_a).args(["export", "--source", "a", "--to"]).arg(&out));
    assert_same_tree(&root_a, &out, &[".lock"]);

    // The owner's source: the owner's until handed over.
    let out = sessiondb(&as_a).arg("sync").arg(&root_owner).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("source \"owned\" is written by role") && err.contains("UPDATE sources SET writer"), "{err}");
    client.execute("UPDATE sources SET writer = $1 WHERE name = 'owned'", &[&a]).unwrap();
    run_ok(sessiondb(&as_a).args(["append", "owned:2026-07-01-basic-chat", "--role", "user", "--content", "handed over"]));

    // Each host seeing its own sources only: it still writes them, attachments and all.
    psql_file(&owner, "tools/pg/own-sources.sql", &[]);
    run_ok(sessiondb(&as_a).args(["append", "a:2026-07-01-basic-chat", "--role", "user", "--content", "seen by a alone"]));
    copy_tree(&fixtures().join("2026-07-04-attachments"), &root_b.join("2026-07-04-attachments-again"));
    run_ok(sessiondb(&as_b).arg("sync").arg(&root_b));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&as_b).args(["list", "--json", "--all"])))).unwrap();
    let sources: std::collections::BTreeSet<&str> = listed.as_array().unwrap().iter().map(|c| c["source"].as_str().unwrap_or("b")).collect();
    assert!(sources.iter().all(|s| *s == "b"), "host b sees its own source only: {sources:?}");
    let out = work.path().join("out-b");
    run_ok(sessiondb(&as_b).args(["export", "--source", "b", "--to"]).arg(&out));
    assert_same_tree(&root_b, &out, &[".lock"]);
    let found: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&pg.db).args(["search", "--json", "--all", "seen by a alone"])))).unwrap();
    assert_eq!(found["total"]["messages"], 1, "the owner finds what host a wrote");

    // Host b syncing host a's root reads it into a source of its own (a root, like a name, is
    // each writer's own: schema 20), and host a's rows stay as they were.
    let before = rows_of_a(&mut client);
    run_ok(sessiondb(&as_b).arg("sync").arg(&root_a));
    let copies: Vec<(String, i64)> = client
        .query(
            "SELECT s.writer, count(c.id) FROM sources s JOIN conversations c ON c.source_id = s.id WHERE s.root = $1 GROUP BY s.writer ORDER BY s.writer = $2",
            &[&root_a.to_str().unwrap(), &a],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(copies.len(), 2, "{copies:?}");
    assert_eq!((copies[0].0.as_str(), copies[0].1), (b.as_str(), copies[1].1), "host b's own copy, whole: {copies:?}");
    assert_eq!(rows_of_a(&mut client), before, "host a's rows as they were");
}

/// Hosts write at once and share attachments: a host removing the last of its conversations
/// that hold an attachment while another host's write has just come to hold it (its entry not
/// yet committed, so the removal finds the attachment unreferenced and waits on that entry's
/// key lock) keeps the attachment, and the removal succeeds once the other write commits.
#[test]
fn a_removal_keeps_an_attachment_another_host_has_just_come_to_hold() {
    let Some(pg) = common::postgres_db() else { return };
    let url = pg.db.to_str().unwrap().to_owned();
    let work = tempfile::tempdir().unwrap();
    let (root_a, root_b) = (work.path().join("a"), work.path().join("b"));
    copy_tree(&fixtures(), &root_a);
    fs::create_dir_all(&root_b).unwrap();
    copy_tree(&fixtures().join("2026-07-01-basic-chat"), &root_b.join("2026-07-01-basic-chat"));
    run_ok(sessiondb(&pg.db).arg("import").arg(&root_a).args(["--source", "a"]));
    run_ok(sessiondb(&pg.db).arg("import").arg(&root_b).args(["--source", "b"]));
    let chat = "2026-07-04-attachments";
    let held_only_there = format!(
        "SELECT DISTINCT e.blob_sha256 FROM entries e JOIN conversations c ON c.id = e.conversation_id JOIN sources s ON s.id = c.source_id
         WHERE s.name = 'a' AND c.chat_id = '{chat}' AND e.blob_sha256 IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM entries o WHERE o.blob_sha256 = e.blob_sha256 AND o.conversation_id != c.id)"
    );
    let mut watcher = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let blobs: Vec<Vec<u8>> = watcher.query(held_only_there.as_str(), &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert!(!blobs.is_empty(), "the fixture's attachments are held by {chat} alone");

    // Host b's write, left open: an entry of its conversation comes to hold those attachments.
    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut write = other.transaction().unwrap();
    let added = write
        .execute(
            format!(
                "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, blob_sha256, size)
                 SELECT (SELECT c.id FROM conversations c JOIN sources s ON s.id = c.source_id WHERE s.name = 'b'), 'files/held-' || md5(sha::text), 'blob', 420, 0, sha,
                        (SELECT size FROM blobs WHERE sha256 = sha)
                 FROM ({held_only_there}) AS held(sha)"
            )
            .as_str(),
            &[],
        )
        .unwrap();
    assert_eq!(added as usize, blobs.len());
    let mut rm = sessiondb(&pg.db).args(["rm", "--yes", &format!("a:{chat}")]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    // The removal finds the attachments unreferenced and waits on the open write's key lock.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let waiting: i64 =
            watcher.query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'", &[]).unwrap().get(0);
        if waiting > 0 {
            break;
        }
        assert!(rm.try_wait().unwrap().is_none(), "rm finished without meeting the open write");
        assert!(std::time::Instant::now() < deadline, "rm never came to wait on the open write");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    write.commit().unwrap();
    let out = rm.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gone: i64 = watcher.query_one(format!("SELECT count(*) FROM conversations WHERE chat_id = '{chat}'").as_str(), &[]).unwrap().get(0);
    assert_eq!(gone, 0, "removed");
    for sha in &blobs {
        let (size, stored): (i64, i64) = {
            let row = watcher
                .query_one(
                    "SELECT b.size, (SELECT coalesce(sum(length(data)), 0) FROM blob_chunks WHERE blob_id = b.id)::bigint FROM blobs b WHERE b.sha256 = $1",
                    &[sha],
                )
                .unwrap();
            (row.get(0), row.get(1))
        };
        assert_eq!(size, stored, "the attachment host b holds is kept whole");
    }
}

/// TLS as libpq's `sslmode` and `sslrootcert` mean it, against the test server (which offers
/// TLS with a certificate for localhost and 127.0.0.1 signed by DIR/root.crt, `tools/pg/server.sh`):
/// `require` encrypts (seen from the server), `verify-full` with the server's root connects,
/// another root is refused saying why, `verify-full` without roots asks for them, `disable`
/// connects in the clear.
#[test]
fn tls_as_libpq_means_it() {
    let Some(pg) = common::postgres_db() else { return };
    let url = pg.db.to_str().unwrap().to_owned();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let ssl: String = client.query_one("SHOW ssl", &[]).unwrap().get(0);
    assert_eq!(ssl, "on", "the test server offers no TLS: tools/pg/server.sh starts one that does");
    let server_cert: String = client.query_one("SHOW ssl_cert_file", &[]).unwrap().get(0);
    let cert = Path::new(&server_cert).with_file_name("root.crt").display().to_string();
    let with = |query: &str| std::path::PathBuf::from(format!("{url}{}{query}", if url.contains('?') { '&' } else { '?' }));
    let list = |db: &Path, home: &Path| sessiondb(db).args(["list", "--json"]).env("HOME", home).output().unwrap();
    let work = tempfile::tempdir().unwrap();

    for query in ["sslmode=require".to_owned(), format!("sslmode=verify-full&sslrootcert={cert}"), format!("sslrootcert={cert}"), "sslmode=disable".to_owned()] {
        let out = list(&with(&query), work.path());
        assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let other = work.path().join("other.crt");
    run_ok(
        Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
            .arg(work.path().join("other.key"))
            .arg("-out")
            .arg(&other),
    );
    let out = list(&with(&format!("sslmode=verify-ca&sslrootcert={}", other.display())), work.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot connect to") && err.contains("certificate"), "another root is refused, saying why: {err}");
    let out = list(&with("sslmode=verify-full"), work.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(".postgresql/root.crt"), "no roots: {err}");

    // Seen from the server: the connections of a `serve` (which rescans the logs root every
    // second, and keeps its connections) with sslmode=require are encrypted.
    let logs = work.path().join("logs");
    fs::create_dir(&logs).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let watcher = sessiondb(&with("sslmode=require&application_name=sessiondb_tls_probe"))
        .args(["serve", "--port", &port.to_string(), "--rescan", "1"])
        .arg(&logs)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _watcher = Killed(watcher);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let encrypted: Vec<bool> = loop {
        let rows =
            client.query("SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid WHERE a.application_name = 'sessiondb_tls_probe'", &[]).unwrap();
        if !rows.is_empty() || std::time::Instant::now() > deadline {
            break rows.iter().map(|r| r.get(0)).collect();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(!encrypted.is_empty() && encrypted.iter().all(|&e| e), "serve's connections, encrypted: {encrypted:?}");
}

/// A database whose locale sorts text otherwise than byte by byte (ICU's en-US: `a_b` before
/// `aB`, case and punctuation weighed last) lists, pages and names conversations as SQLite
/// does: the store's text is compared in byte order whatever the database's locale.
#[test]
fn a_database_of_another_locale_orders_as_sqlite_does() {
    let Some(admin) = common::postgres_server() else { return };
    let Some(pg) = common::postgres_db() else { return };
    // The test database again, made with ICU's en-US collation.
    let url = pg.db.to_str().unwrap().to_owned();
    let name = url.rsplit('/').next().unwrap().split('?').next().unwrap().to_owned();
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    client.batch_execute(&format!("DROP DATABASE \"{name}\" WITH (FORCE)")).unwrap();
    client.batch_execute(&format!("CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'")).unwrap();
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let ids = ["a_b", "aB", "Ab", "a-b", "ab", "a.b", "B", "b", "é", "z"];
    let when = filetime::FileTime::from_unix_time(1_780_000_000, 0);
    for id in ids {
        let dir = logs.join(id);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("conversation.jsonl"), format!("{{\"role\": \"user\", \"content\": \"hello {id}\", \"timestamp\": \"2026-07-01T10:00:00\"}}\n"))
            .unwrap();
        filetime::set_file_mtime(dir.join("conversation.jsonl"), when).unwrap();
    }
    let sqlite = common::TestDb::sqlite(work.path());
    for db in [&sqlite.db, &pg.db] {
        run_ok(sessiondb(db).arg("import").arg(&logs));
    }
    for args in [vec!["list", "--json"], vec!["list", "--reverse"], vec!["list", "-n", "3", "--json"]] {
        let (a, b) = (stdout(&run_ok(sessiondb(&sqlite.db).args(&args))), stdout(&run_ok(sessiondb(&pg.db).args(&args))));
        assert_eq!(a, b, "{args:?}: SQLite's order, then PostgreSQL's");
    }
    // A search newest first breaks ties by chat id too (what ranked it is the engine's own).
    let search = |db: &Path| -> serde_json::Value {
        let mut page: serde_json::Value =
            serde_json::from_str(&stdout(&run_ok(sessiondb(db).args(["search", "hello", "--sort", "newest", "--json", "-n", "4"])))).unwrap();
        page.as_object_mut().unwrap().remove("ranked_by");
        page
    };
    assert_eq!(search(&sqlite.db), search(&pg.db));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&run_ok(sessiondb(&pg.db).args(["list", "--json"])))).unwrap();
    let order: Vec<&str> = listed.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    let mut bytes: Vec<&str> = ids.to_vec();
    bytes.sort();
    assert_eq!(order, bytes, "ties broken by chat id in byte order");
}

/// The rows of message lines are sent in batches (`store::writer::PENDING_LINES` lines, in
/// statements of up to 256 rows): a conversation of 2,600 lines straddles several, with lines
/// said again (within a batch and across them), blank and damaged lines at and around the
/// boundaries, and texts shared by different lines. Written back, it is the file it was, on
/// both engines: no batch dropped, duplicated or reordered a row; and one message is counted
/// per distinct line.
#[test]
fn a_conversation_longer_than_a_batch_comes_back_whole() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        let dir = logs.join("2026-07-09-long");
        fs::create_dir_all(&dir).unwrap();
        let mut lines: Vec<String> = Vec::new();
        let mut distinct = std::collections::HashSet::new();
        for i in 0..2_600usize {
            let line = match i {
                // Lines said again: the first line of the file, and the line just before.
                _ if i % 97 == 0 && i > 0 => lines[0].clone(),
                _ if i % 101 == 0 && i > 0 => lines[i - 1].clone(),
                // Blank and damaged lines, some at the batch boundaries (1,024 and 2,048).
                1_023 | 1_024 | 2_047 => String::new(),
                1_025 | 2_048 | 500 => format!("{{\"role\": \"user\", \"content\": \"cut short {i}"),
                _ => {
                    // Texts shared by lines that differ (their timestamps): every seventh.
                    let content = if i % 7 == 0 { "the same text, again".to_owned() } else { format!("message {i}: {}", "words ".repeat(i % 13)) };
                    let role = if i % 2 == 0 { "user" } else { "assistant" };
                    serde_json::json!({"role": role, "content": content, "timestamp": format!("2026-07-09T10:{:02}:{:02}.{i:06}", i / 60 % 60, i % 60)}).to_string()
                }
            };
            distinct.insert(line.clone());
            lines.push(line);
        }
        fs::write(dir.join("conversation.jsonl"), lines.join("\n") + "\n").unwrap();
        let summary: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(db).arg("import").arg(&logs).arg("--json")).stdout).unwrap();
        assert_eq!(summary["failed"], 0, "{summary}");
        let messages = distinct.iter().filter(|l| l.ends_with('}')).count();
        assert_eq!(summary["messages"].as_u64().unwrap() as usize, messages, "{summary}");
        let out = work.join("out");
        run_ok(sessiondb(db).args(["export", "--to"]).arg(&out));
        assert_same_tree(&logs, &out, &[".lock"]);
        // Read again whole (the previous copy replaced), it still comes back as it was.
        fs::write(dir.join("conversation.jsonl"), lines.join("\n") + "\n" + &lines[3] + "\n").unwrap();
        run_ok(sessiondb(db).arg("import").arg(&logs));
        let again = work.join("again");
        run_ok(sessiondb(db).args(["export", "--to"]).arg(&again));
        assert_same_tree(&logs, &again, &[".lock"]);
    });
}

/// A database that holds others' objects too — an extension's view (pg_buffercache's),
/// another program's table and view — becomes a store without any of them touched: the
/// migrations change the collation of sessiondb's own columns and make its own views again,
/// never the rest of the schema's (once, every view there was dropped, and an extension's
/// refused it: such a database could not become a store at all).
#[test]
fn a_database_shared_with_other_programs_keeps_their_objects_as_they_were() {
    let Some(pg) = common::postgres_db() else { return };
    let url = pg.db.to_str().unwrap().to_owned();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "CREATE EXTENSION pg_buffercache;
             CREATE TABLE their_notes (title text COLLATE \"POSIX\" NOT NULL);
             INSERT INTO their_notes VALUES ('kept');
             CREATE VIEW their_titles AS SELECT upper(title) AS title FROM their_notes;",
        )
        .unwrap();
    let schema_of_theirs = |client: &mut postgres::Client| -> Vec<String> {
        client
            .query(
                "SELECT k.relname || ':' || k.relkind::text || ':' || coalesce(pg_get_viewdef(k.oid), '') FROM pg_class k
                  JOIN pg_namespace n ON n.oid = k.relnamespace
                 WHERE n.nspname = current_schema() AND k.relname IN ('pg_buffercache', 'their_notes', 'their_titles')
                 UNION ALL SELECT 'collation:' || coalesce(collation_name, '') FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'their_notes'
                 ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let before = schema_of_theirs(&mut client);
    assert_eq!(before.len(), 4, "{before:?}");
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("logs").join("shared-db");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("conversation.jsonl"), "{\"role\": \"user\", \"content\": \"hello\", \"timestamp\": \"2026-07-01T10:00:00\"}\n").unwrap();
    run_ok(sessiondb(&pg.db).arg("import").arg(work.path().join("logs")));
    assert!(stdout(&run_ok(sessiondb(&pg.db).args(["list", "--json"]))).contains("shared-db"));
    assert_eq!(schema_of_theirs(&mut client), before, "their objects, after sessiondb made its store beside them");
    let title: String = client.query_one("SELECT title FROM their_titles", &[]).unwrap().get(0);
    assert_eq!(title, "KEPT");
    let ours: String = client
        .query_one("SELECT collation_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'conversations' AND column_name = 'chat_id'", &[])
        .unwrap()
        .get(0);
    assert_eq!(ours, "C", "sessiondb's own columns compare byte by byte");
}

/// `backup` copies SQLite stores; on a server it writes nothing and says how the server's own
/// tools back the database up.
#[test]
fn a_backup_of_a_server_database_points_to_its_own_tools() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    fs::create_dir_all(&logs).unwrap();
    run_ok(sessiondb(&pg.db).arg("import").arg(&logs));
    let copy = work.path().join("copy.db");
    let out = sessiondb(&pg.db).arg("backup").arg(&copy).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("pg_dump") && err.contains("pg_restore"), "{err}");
    assert!(!copy.exists() && fs::read_dir(work.path()).unwrap().count() == 1, "nothing written beside the logs");
}

/// Issue 33: a server's word queries are ranked by a tantivy index this host keeps in its cache
/// directory (`store::ranking_server`), and it misses nothing that hosts writing at once commit
/// out of the order of their ids: a text whose transaction was still open when the index caught
/// up is taken at the next catch-up, a text deleted meanwhile is taken out, each once.
#[test]
fn each_host_ranks_a_server_search_by_its_own_index_and_misses_no_late_commit() {
    use sessiondb::store::ranking::{check, RankQuery, RankingIndex};
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    copy_tree(&fixtures(), &logs);
    let cache = work.path().join("cache");
    let url = pg.db.to_str().unwrap().to_owned();
    let search = |cache: Option<&Path>, query: &str| -> serde_json::Value {
        let mut cmd = sessiondb(&pg.db);
        cmd.args(["search", "--json", "-n", "1000", "--exact-total", "--", query]);
        match cache {
            Some(dir) => cmd.env("XDG_CACHE_HOME", dir),
            None => cmd.env_remove("XDG_CACHE_HOME").env_remove("HOME"),
        };
        let mut page: serde_json::Value = serde_json::from_slice(&run_ok(&mut cmd).stdout).unwrap();
        let by = page.as_object_mut().unwrap().remove("ranked_by").unwrap();
        serde_json::json!({"by": by, "total": page["total"], "found": page["results"].as_array().unwrap().iter().map(|r| (r["id"].clone(), r["matches"].clone())).collect::<Vec<_>>()})
    };
    run_ok(sessiondb(&pg.db).env("XDG_CACHE_HOME", &cache).arg("import").arg(&logs));
    for query in ["the", "\"the file\"", "error"] {
        let ranked = search(Some(&cache), query);
        assert_eq!(ranked["by"], "ranking index", "{query}: {ranked}");
        // Without a cache directory the server answers alone: the same conversations and counts.
        let alone = search(None, query);
        assert_eq!(alone["by"], "word index (server)", "{query}");
        let set = |v: &serde_json::Value| {
            let mut found: Vec<String> = v["found"].as_array().unwrap().iter().map(|f| f.to_string()).collect();
            found.sort();
            found
        };
        assert_eq!(set(&ranked), set(&alone), "{query}");
        assert_eq!(ranked["total"], alone["total"], "{query}");
    }
    let dirs: Vec<_> = fs::read_dir(cache.join("sessiondb/ranking")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "one index for the one database: {dirs:?}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs::metadata(&dirs[0]).unwrap().permissions().mode() & 0o777, 0o700, "the index is the user's alone");

    // Two transactions commit out of the order of the ids they were given.
    std::env::set_var("XDG_CACHE_HOME", &cache);
    let store = sessiondb::store::Store::open(&pg.db).unwrap();
    let matching = || -> Vec<i64> {
        store.catch_up_ranking(&mut |_| {}).unwrap();
        let conn = store.connection().unwrap();
        let index = RankingIndex::of(&conn).unwrap().unwrap();
        let mut found = index.all_matching(&RankQuery { terms: vec![vec!["zebrafish".into()]] }).unwrap();
        found.sort();
        assert_eq!(check(&conn).unwrap(), Vec::<String>::new(), "doctor finds it whole");
        found
    };
    let mut late = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut early = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let insert = "INSERT INTO texts (source_id, hash, data) VALUES ((SELECT min(id) FROM sources), $1, '\\x00'::bytea || convert_to($2, 'UTF8')) RETURNING id";
    let mut open = late.transaction().unwrap();
    let late_id: i64 = open.query_one(insert, &[&1i64, &"a zebrafish committed late"]).unwrap().get(0);
    let early_id: i64 = early.query_one(insert, &[&2i64, &"a zebrafish committed early"]).unwrap().get(0);
    assert!(late_id < early_id);
    assert_eq!(matching(), vec![early_id], "the open transaction's text is not there yet");
    open.commit().unwrap();
    assert_eq!(matching(), vec![late_id, early_id], "taken at the next catch-up, the other not twice");
    let mut deleting = late.transaction().unwrap();
    deleting.execute("DELETE FROM texts WHERE id = $1", &[&early_id]).unwrap();
    assert_eq!(matching(), vec![late_id, early_id], "a deletion not committed yet");
    deleting.commit().unwrap();
    assert_eq!(matching(), vec![late_id], "a committed deletion is applied");
    assert_eq!(matching(), vec![late_id], "and stays so");
}
