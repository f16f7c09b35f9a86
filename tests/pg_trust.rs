//! Issue 31, trust at the new doors of a store on a PostgreSQL server: what one host's role can
//! do to another's (each host writes only its own sources, `tools/pg/host-role.sql`), and what
//! a server that does not answer does to a command. A host cannot plant bytes under the SHA-256
//! of a file another host attaches later, nor change an attachment's chunks once written; a
//! stored attachment whose bytes are not what its SHA-256 says is never written out, and
//! `doctor` names it and the conversations that hold it. A host cannot hold another up by
//! taking the source names or roots that one needs, and a name sources of several roles share
//! is never read as any one of them. A server that never answers, or stalls mid-statement, is
//! given up in bounded time, saying which and what to do.

use crate::common;

use std::fs;
use std::path::Path;

use common::pg::Roles;
use common::tree::assert_same_tree;
use common::{run_ok, sessiondb};
use sha2::{Digest, Sha256};

/// A conversation `chat` under logs root `root` whose directory holds `files/NAME` with `bytes`.
fn conversation_with_file(root: &Path, chat: &str, name: &str, bytes: &[u8]) {
    let dir = root.join(chat);
    fs::create_dir_all(dir.join("files")).unwrap();
    fs::write(dir.join("conversation.jsonl"), format!("{{\"role\": \"user\", \"content\": \"see {name}\", \"timestamp\": \"2026-07-01T10:00:00\"}}\n")).unwrap();
    fs::write(dir.join("files").join(name), bytes).unwrap();
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    Sha256::digest(bytes).to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Stores `bytes` as the blob of the file `content` (under its SHA-256), as SQL typed by the
/// role of `client` can; returns the blob's id.
fn plant(client: &mut postgres::Client, content: &[u8], bytes: &[u8]) -> i64 {
    let mut tx = client.transaction().unwrap();
    let id: i64 = tx.query_one("INSERT INTO blobs (sha256, size) VALUES ($1, $2) RETURNING id", &[&sha256(content), &(bytes.len() as i64)]).unwrap().get(0);
    tx.execute("INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, 0, $2)", &[&id, &bytes]).unwrap();
    tx.commit().unwrap();
    id
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Item 3: a host (role "mallory") stores its own bytes under the SHA-256 of a file another
/// host (role "alice") attaches later. Unheld, they are found out and replaced: alice's store
/// keeps her bytes and exports them. Held by a conversation of mallory's, they cannot be
/// replaced: alice's sync refuses that conversation, naming the file and mallory's role;
/// `doctor` names the blob, the conversation that holds it and its writer; an export of that
/// conversation fails rather than write them. Mallory cannot change the chunks of a blob once
/// written, nor write a blob as another role, nor vouch for another. Alice reads back a blob
/// another role wrote once, and vouches for it: later syncs do not read it again (she is then
/// refused every chunk, and syncs all the same).
#[test]
fn a_host_cannot_plant_bytes_under_a_file_another_host_attaches() {
    let Some(pg) = common::postgres_db() else { return };
    let owner = pg.db.to_str().unwrap().to_owned();
    run_ok(sessiondb(&pg.db).args(["list", "--all"]));
    let roles = Roles::hosts(&owner, &["alice", "mallory"]);
    let (alice, mallory) = (roles.url("alice"), roles.url("mallory"));
    let mut as_mallory = postgres::Client::connect(mallory.to_str().unwrap(), postgres::NoTls).unwrap();
    let mut as_owner = postgres::Client::connect(&owner, postgres::NoTls).unwrap();
    let work = tempfile::tempdir().unwrap();
    let (root_a, root_m) = (work.path().join("alice"), work.path().join("mallory"));

    // Planted before alice attaches the file, held by nothing.
    let notes = b"alice's notes, version 1\n";
    plant(&mut as_mallory, notes, b"mallory was here\n");
    conversation_with_file(&root_a, "notes", "notes.txt", notes);
    run_ok(sessiondb(&alice).arg("import").arg(&root_a).args(["--source", "alice"]));
    let out = work.path().join("out-alice");
    run_ok(sessiondb(&alice).args(["export", "--source", "alice", "--to"]).arg(&out));
    assert_same_tree(&root_a, &out, &[".lock"]);

    // Planted, and held by a conversation of mallory's own.
    let plan = b"alice's plan\n";
    plant(&mut as_mallory, plan, b"mallory's plan\n");
    conversation_with_file(&root_m, "plan", "plan.txt", plan);
    run_ok(sessiondb(&mallory).arg("import").arg(&root_m).args(["--source", "mallory"]));
    conversation_with_file(&root_a, "plan", "plan.txt", plan);
    let refused = sessiondb(&alice).arg("sync").arg(&root_a).output().unwrap();
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("plan.txt") && said.contains("other bytes") && said.contains(roles.role("mallory")), "{said}");
    let stored: i64 = as_owner
        .query_one("SELECT count(*) FROM conversations c JOIN sources s ON s.id = c.source_id WHERE s.name = 'alice' AND c.chat_id = 'plan'", &[])
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "nothing of the refused conversation is stored");
    fs::remove_dir_all(root_a.join("plan")).unwrap();
    let doctor = sessiondb(&pg.db).arg("doctor").env("NO_COLOR", "1").output().unwrap();
    let said = text(&doctor);
    assert_eq!(doctor.status.code(), Some(1), "{said}");
    let line = said.lines().find(|l| l.contains(&hex(&sha256(plan)))).unwrap_or_else(|| panic!("doctor names the planted blob: {said}"));
    assert!(line.contains("do not hash to") && line.contains("mallory:plan") && line.contains(roles.role("mallory")), "{line}");
    let out_m = work.path().join("out-mallory");
    let export = sessiondb(&pg.db).args(["export", "--source", "mallory", "--to"]).arg(&out_m).output().unwrap();
    let said = text(&export);
    assert_eq!(export.status.code(), Some(1), "{said}");
    assert!(said.contains("plan.txt") && said.contains("do not hash to"), "{said}");
    assert!(!out_m.join("plan/files/plan.txt").exists(), "the planted bytes are never written out");

    // What mallory's SQL can no longer do: add to, change or remove the chunks of a blob once
    // written (even one of its own, held by nothing), write a blob as another role, vouch for another.
    let own = plant(&mut as_mallory, b"a file of mallory's\n", b"a file of mallory's\n");
    let alice_role = roles.role("alice").to_owned();
    for (sql, params) in [
        ("INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, 1, '\\x00'::bytea)", vec![&own as &(dyn postgres::types::ToSql + Sync)]),
        ("INSERT INTO blobs (sha256, size, writer) VALUES ($1, 1, $2)", vec![&sha256(b"x") as _, &alice_role as _]),
        ("INSERT INTO blob_vouchers (blob_id, role_name) VALUES ($1, $2)", vec![&own as _, &alice_role as _]),
    ] {
        let e = as_mallory.execute(sql, &params).unwrap_err();
        assert_eq!(e.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE), "{sql}: {e}");
    }
    for sql in ["DELETE FROM blob_chunks", "UPDATE blob_chunks SET data = '\\x00'::bytea"] {
        assert_eq!(as_mallory.execute(sql, &[]).unwrap(), 0, "{sql}");
    }

    // Honest bytes another role wrote: read back once, and vouched for.
    let honest = b"a file both hosts have\n";
    plant(&mut as_mallory, honest, honest);
    conversation_with_file(&root_a, "shared", "shared.txt", honest);
    run_ok(sessiondb(&alice).arg("sync").arg(&root_a));
    let vouchers: Vec<String> = as_owner
        .query("SELECT v.role_name FROM blob_vouchers v JOIN blobs b ON b.id = v.blob_id WHERE b.sha256 = $1", &[&sha256(honest)])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(vouchers, [alice_role.as_str()]);
    // Every conversation read again whole, with no chunk alice may read: what she wrote or
    // vouched for is not read again.
    as_owner.batch_execute(&format!("REVOKE SELECT ON blob_chunks FROM \"{alice_role}\"")).unwrap();
    for chat in ["notes", "shared"] {
        let transcript = root_a.join(chat).join("conversation.jsonl");
        let mut lines = fs::read_to_string(&transcript).unwrap();
        lines.push_str("{\"role\": \"assistant\", \"content\": \"seen\", \"timestamp\": \"2026-07-01T10:00:01\"}\n");
        fs::write(transcript.with_extension("new"), lines).unwrap();
        fs::rename(transcript.with_extension("new"), &transcript).unwrap();
    }
    let synced: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&alice).arg("sync").arg(&root_a).arg("--json")).stdout).unwrap();
    assert_eq!(synced["ingest"]["conversations"], 2, "{synced}");
    as_owner.batch_execute(&format!("GRANT SELECT ON blob_chunks TO \"{alice_role}\"")).unwrap();
    let out = work.path().join("out-alice-again");
    run_ok(sessiondb(&alice).args(["export", "--source", "alice", "--to"]).arg(&out));
    assert_same_tree(&root_a, &out, &[".lock"]);
}

/// Item 3, on both engines: a stored attachment whose bytes no longer hash to its SHA-256 (here
/// changed in place, its size kept) is never written out: `export` fails on it, naming the file,
/// and leaves no such file; `doctor` reports it and names the conversation that holds it.
#[test]
fn an_attachment_whose_bytes_do_not_hash_to_its_address_is_never_written_out() {
    common::on_each_engine(|work, db| {
        let logs = work.join("logs");
        let bytes = b"the report, as gptme attached it\n";
        conversation_with_file(&logs, "report", "report.txt", bytes);
        run_ok(sessiondb(db).arg("import").arg(&logs).args(["--source", "host"]));
        let damaged = b"the report, as it is not stored!\n";
        assert_eq!(damaged.len(), bytes.len());
        let change = "UPDATE blob_chunks SET data = ?1 WHERE blob_id = (SELECT id FROM blobs WHERE sha256 = ?2)";
        if let Some(url) = db.to_str().filter(|u| u.starts_with("postgres")) {
            let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
            assert_eq!(client.execute(&change.replace('?', "$"), &[&damaged.to_vec(), &sha256(bytes)]).unwrap(), 1);
        } else {
            let conn = rusqlite::Connection::open(db).unwrap();
            assert_eq!(conn.execute(change, rusqlite::params![damaged.to_vec(), sha256(bytes)]).unwrap(), 1);
        }
        let out = work.join("out");
        let export = sessiondb(db).args(["export", "--to"]).arg(&out).output().unwrap();
        let said = text(&export);
        assert_eq!(export.status.code(), Some(1), "{said}");
        assert!(said.contains("report.txt") && said.contains("do not hash to"), "{said}");
        assert!(!out.join("report/files/report.txt").exists(), "the damaged bytes are never written out");
        let doctor = sessiondb(db).arg("doctor").env("NO_COLOR", "1").output().unwrap();
        let said = text(&doctor);
        assert_eq!(doctor.status.code(), Some(1), "{said}");
        let line = said.lines().find(|l| l.contains(&hex(&sha256(bytes)))).unwrap_or_else(|| panic!("doctor names the blob: {said}"));
        assert!(line.contains("do not hash to") && line.contains("host:report"), "{line}");
    })
}

/// A PostgreSQL store at schema `version`: the released files of `schema/postgres/` up to it,
/// each in a transaction of its own, as `store::schema::migrate_postgres` applies them.
fn server_store_at(url: &str, version: i64) -> postgres::Client {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client.batch_execute("CREATE TABLE sessiondb_schema (version BIGINT NOT NULL)").unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/postgres");
    let mut files: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    files.sort();
    for name in files {
        let number: i64 = name[..4].parse().unwrap();
        if number > version {
            break;
        }
        let sql = fs::read_to_string(dir.join(&name)).unwrap();
        let mut tx = client.transaction().unwrap();
        tx.batch_execute(&sql).unwrap_or_else(|e| panic!("{name}: {e}"));
        tx.execute("DELETE FROM sessiondb_schema", &[]).unwrap();
        tx.execute("INSERT INTO sessiondb_schema (version) VALUES ($1)", &[&number]).unwrap();
        tx.commit().unwrap();
    }
    client
}

/// Item 3, the upgrade: blobs stored before schema 19 (one the bytes its key names, one
/// another's, both held by nothing, as a host could leave them) are attributed to no role when
/// the store is brought up to date, so that no role trusts them unread: the host that attaches
/// their files next reads each back once, vouches for the first and replaces the second.
#[test]
fn blobs_stored_before_schema_19_are_read_back_before_they_are_trusted() {
    let Some(pg) = common::postgres_db() else { return };
    let owner = pg.db.to_str().unwrap().to_owned();
    let mut client = server_store_at(&owner, 18);
    let (good, bad) = (b"stored right before the upgrade\n".as_slice(), b"stored wrong before the upgrade\n".as_slice());
    for (content, bytes) in [(good, good), (bad, b"not the file at all\n".as_slice())] {
        plant(&mut client, content, bytes);
    }
    run_ok(sessiondb(&pg.db).args(["list", "--all"]));
    let version: i64 = client.query_one("SELECT version FROM sessiondb_schema", &[]).unwrap().get(0);
    assert_eq!(version, sessiondb::store::schema::POSTGRES_VERSION);
    let writers: Vec<Option<String>> = client.query("SELECT writer FROM blobs ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(writers, [None, None], "written before: by no role recorded");

    let roles = Roles::hosts(&owner, &["alice"]);
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("alice");
    conversation_with_file(&root, "good", "good.txt", good);
    conversation_with_file(&root, "bad", "bad.txt", bad);
    run_ok(sessiondb(&roles.url("alice")).arg("import").arg(&root).args(["--source", "alice"]));
    let out = work.path().join("out");
    run_ok(sessiondb(&roles.url("alice")).args(["export", "--to"]).arg(&out));
    assert_same_tree(&root, &out, &[".lock"]);
    let alice = roles.role("alice");
    let rows: Vec<(Vec<u8>, Option<String>, Vec<String>)> = client
        .query("SELECT b.sha256, b.writer, array(SELECT role_name FROM blob_vouchers v WHERE v.blob_id = b.id) FROM blobs b ORDER BY b.sha256", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let mut expected = vec![(sha256(good), None, vec![alice.to_owned()]), (sha256(bad), Some(alice.to_owned()), vec![])];
    expected.sort();
    assert_eq!(rows, expected, "the sound one vouched for, the other replaced by alice's bytes");
}

/// A listener that accepts connections and never writes a byte, for as long as the test runs.
fn silent_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

/// Runs `sessiondb --db URL list`, failing the test when it takes longer than `limit`; returns
/// its exit code, what it said, and how long it took.
fn list_within(url: &str, limit: std::time::Duration) -> (Option<i32>, String, std::time::Duration) {
    let started = std::time::Instant::now();
    let child = sessiondb(Path::new(url)).args(["list", "--all"]).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let out = common::output_within(child, limit, &format!("sessiondb against {url}"));
    (out.status.code(), text(&out), started.elapsed())
}

/// Item 6: a server that accepts the connection and never answers is said at once, not waited
/// for: within 10 s by default, within the URL's `connect_timeout` when it gives one, naming the
/// server (its password never), how long it waited, and what to do.
#[test]
fn a_server_that_never_answers_is_said_at_once() {
    let port = silent_server();
    let url = format!("postgres://me:hunter2@127.0.0.1:{port}/sessions");
    let (code, said, took) = list_within(&url, std::time::Duration::from_secs(30));
    assert_eq!(code, Some(1), "{said}");
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}: {said}");
    assert!(said.contains(&format!("postgres://me:***@127.0.0.1:{port}/sessions")) && !said.contains("hunter2"), "{said}");
    assert!(said.contains("did not answer") && said.contains("within 10 s") && said.contains("connect_timeout="), "{said}");
    let (code, said, took) = list_within(&format!("{url}?connect_timeout=1"), std::time::Duration::from_secs(30));
    assert_eq!(code, Some(1), "{said}");
    assert!(took < std::time::Duration::from_secs(6), "took {took:?}: {said}");
    assert!(said.contains("did not answer") && said.contains("within 1 s"), "{said}");
}

/// A proxy to the server at `upstream` (host:port) that passes everything both ways until the
/// client sends a statement holding `marker`; from then on it passes the client's bytes on and
/// none of the server's: a server that answered the startup and stalls mid-query.
fn stalling_proxy(upstream: String, marker: &'static [u8]) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let server = std::net::TcpStream::connect(&upstream).unwrap();
            let stalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (mut from_client, mut to_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let seen = stalled.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0; 1 << 16];
                while let Ok(n @ 1..) = from_client.read(&mut buf) {
                    if buf[..n].windows(marker.len()).any(|w| w == marker) {
                        seen.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    if to_server.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let (mut from_server, mut to_client) = (server, client);
            std::thread::spawn(move || {
                let mut buf = vec![0; 1 << 16];
                while let Ok(n @ 1..) = from_server.read(&mut buf) {
                    if !stalled.load(std::sync::atomic::Ordering::SeqCst) && to_client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// Item 6: a server that answers the startup and then stalls in the middle of a statement is
/// given up once the statement has had its `statement_timeout` (here set in the URL's
/// `options`, as libpq takes it) and 10 s more, naming the server, how long it waited, and
/// what to do; the same URL without the stall works.
#[test]
fn a_server_that_stalls_mid_query_is_given_up() {
    let Some(pg) = common::postgres_db() else { return };
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    conversation_with_file(&logs, "chat", "a.txt", b"a file\n");
    run_ok(sessiondb(&pg.db).arg("import").arg(&logs));
    let direct = pg.db.to_str().unwrap();
    let (user, rest) = direct.split_once("://").unwrap().1.split_once('@').unwrap();
    let (upstream, database) = rest.split_once('/').unwrap();
    let database = database.split('?').next().unwrap();
    let options = "sslmode=disable&options=-c%20statement_timeout%3D1s";
    let port = stalling_proxy(upstream.to_owned(), b"FROM conversations");
    let through = format!("postgres://{user}@127.0.0.1:{port}/{database}?{options}");
    let (code, said, took) = list_within(&through, std::time::Duration::from_secs(60));
    assert_eq!(code, Some(1), "{said}");
    assert!(took < std::time::Duration::from_secs(30), "took {took:?}: {said}");
    assert!(said.contains(&format!("127.0.0.1:{port}/{database}")) && said.contains("did not answer"), "{said}");
    assert!(said.contains("within 11 s") && said.contains("statement_timeout"), "{said}");
    let (code, said, _) = list_within(&format!("{}?{options}", direct.split('?').next().unwrap()), std::time::Duration::from_secs(60));
    assert_eq!(code, Some(0), "{said}");
}

/// A conversation `chat` under logs root `root` of one user message, `content`.
fn conversation(root: &Path, chat: &str, content: &str) {
    fs::create_dir_all(root.join(chat)).unwrap();
    fs::write(root.join(chat).join("conversation.jsonl"), format!("{{\"role\": \"user\", \"content\": \"{content}\", \"timestamp\": \"2026-07-01T10:00:00\"}}\n"))
        .unwrap();
}

/// Item 4: a host (role "mallory") takes the names and the root another host (role "alice")
/// will need: the default name of alice's logs root and the root itself (as SQL), and the name
/// alice syncs her laptop with (with sessiondb). None of it stands in alice's way: names and
/// roots are each writer's own. Each host's name finds its own source; for a third role the name
/// is two roles' sources, refused as ambiguous with a name for each (`NAME@ROLE:CHAT`) that
/// finds it, and listed so.
#[test]
fn a_host_cannot_block_another_by_taking_its_source_names() {
    let Some(pg) = common::postgres_db() else { return };
    let owner = pg.db.to_str().unwrap().to_owned();
    run_ok(sessiondb(&pg.db).args(["list", "--all"]));
    let roles = Roles::hosts(&owner, &["alice", "mallory"]);
    let (alice, mallory) = (roles.url("alice"), roles.url("mallory"));
    let (alice_role, mallory_role) = (roles.role("alice"), roles.role("mallory"));
    let work = tempfile::tempdir().unwrap();
    let (root_a, laptop, root_m) = (work.path().join("alice"), work.path().join("laptop"), work.path().join("mallory"));
    conversation(&root_a, "chat", "alice at home");
    conversation(&laptop, "chat", "alice on her laptop");
    conversation(&root_m, "chat", "mallory's own");
    let default_a = sessiondb::store::sources::default_name(&root_a);
    let mut as_mallory = postgres::Client::connect(mallory.to_str().unwrap(), postgres::NoTls).unwrap();
    as_mallory.execute("INSERT INTO sources (name, root) VALUES ($1, '/nowhere'), ('taken-root', $2)", &[&default_a, &root_a.to_str().unwrap()]).unwrap();
    run_ok(sessiondb(&mallory).arg("import").arg(&root_m).args(["--source", "alice-laptop"]));

    run_ok(sessiondb(&alice).arg("import").arg(&root_a));
    run_ok(sessiondb(&alice).arg("import").arg(&laptop).args(["--source", "alice-laptop"]));
    conversation(&laptop, "later", "alice again");
    run_ok(sessiondb(&alice).arg("sync").arg(&laptop));
    let show = |db: &Path, name: &str| sessiondb(db).args(["show", name]).env("NO_COLOR", "1").output().unwrap();
    for (db, name, said) in [
        (&alice, "alice-laptop:chat", "alice on her laptop"),
        (&alice, "alice-laptop:later", "alice again"),
        (&alice, &format!("{default_a}:chat"), "alice at home"),
        (&mallory, "alice-laptop:chat", "mallory's own"),
        (&pg.db, &format!("alice-laptop@{alice_role}:chat"), "alice on her laptop"),
        (&pg.db, &format!("alice-laptop@{mallory_role}:chat"), "mallory's own"),
    ] {
        let out = show(db, name);
        assert!(out.status.success() && text(&out).contains(said), "{name}: {}", text(&out));
    }
    let both = [format!("alice-laptop@{alice_role}:chat"), format!("alice-laptop@{mallory_role}:chat")];
    let out = show(&pg.db, "alice-laptop:chat");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(both.iter().all(|name| text(&out).contains(name.as_str())), "{}", text(&out));
    let out = sessiondb(&pg.db).args(["list", "--source", "alice-laptop"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains(&format!("alice-laptop@{alice_role}")) && text(&out).contains(&format!("alice-laptop@{mallory_role}")), "{}", text(&out));
    let listed: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&pg.db).args(["list", "--json", "--all"])).stdout).unwrap();
    let mut seen: Vec<String> = listed.as_array().unwrap().iter().map(|c| format!("{}:{}", c["source"].as_str().unwrap(), c["id"].as_str().unwrap())).collect();
    seen.sort();
    let mut expected = vec![format!("{default_a}@{alice_role}:chat"), format!("alice-laptop@{alice_role}:later")];
    expected.extend(both.iter().cloned());
    expected.sort();
    assert_eq!(seen, expected, "each source named so that the name finds it");
    let mine: serde_json::Value = serde_json::from_slice(&run_ok(sessiondb(&alice).args(["list", "--json", "--all", "--source", "alice-laptop"])).stdout).unwrap();
    assert_eq!(mine.as_array().unwrap().len(), 2, "her own source of that name: {mine}");
}

/// Item 4, the upgrade: a store of schema 19 keeps its sources, whose names and roots become
/// each writer's own: a host may then name a source of its own as the owner named one.
#[test]
fn sources_of_schema_19_keep_their_names_each_writers_own() {
    let Some(pg) = common::postgres_db() else { return };
    let owner = pg.db.to_str().unwrap().to_owned();
    let mut client = server_store_at(&owner, 19);
    let work = tempfile::tempdir().unwrap();
    let (owned, hers) = (work.path().join("owned"), work.path().join("hers"));
    conversation(&owned, "chat", "the owner's");
    conversation(&hers, "chat", "hers");
    client.execute("INSERT INTO sources (name, root) VALUES ('laptop', $1)", &[&owned.to_str().unwrap()]).unwrap();
    run_ok(sessiondb(&pg.db).arg("import").arg(&owned));
    let roles = Roles::hosts(&owner, &["alice"]);
    run_ok(sessiondb(&roles.url("alice")).arg("import").arg(&hers).args(["--source", "laptop"]));
    for (db, said) in [(&pg.db, "the owner's"), (&roles.url("alice"), "hers")] {
        let out = run_ok(sessiondb(db).args(["show", "laptop:chat"]));
        assert!(text(&out).contains(said), "{}", text(&out));
    }
    let sources: i64 = client.query_one("SELECT count(*) FROM sources WHERE name = 'laptop'", &[]).unwrap().get(0);
    assert_eq!(sources, 2);
}
