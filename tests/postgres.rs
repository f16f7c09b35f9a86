//! Issue 19: the store on a PostgreSQL server. The same commands answer the same on both
//! engines; many hosts starting against a new database migrate it once; several hosts
//! importing their logs roots into one database at once each keep their own conversations,
//! the same chat ids apart, every one written back byte for byte. (The round trip and the log
//! operations against real gptme run on both engines in `roundtrip` and `differential_ops`.)

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use common::tree::assert_same_tree;
use common::{fixtures, run_ok, sessiondb};

fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success());
}

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
    let mut commands: Vec<Vec<String>> =
        ["list", "list --json", "list --all --sort cost", "list --name 2026-07-0*", "list --model sonnet", "stats", "stats --json"]
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
    assert_eq!(versions, [sessiondb::store::schema::CURRENT_VERSION]);
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
    assert!(fs::read_dir(work.path()).unwrap().count() >= 6);
}
