//! Issue 17: `sessiondb serve`, gptme-server's v2 API over the store.
//!
//! The contract test asks the real gptme-server 0.35.1 and `sessiondb serve`, on copies of the
//! same logs root, every read endpoint and parameter combination, and compares the answers field
//! by field (`tools/oracle/serve_contract.py`, which lists the deliberate differences); the
//! served copy must be unchanged afterwards (reads never write). The security tests refuse path
//! traversal, oversized requests, missing and wrong tokens, and a non-loopback bind without a
//! token. The live test appends with real gptme in another process and waits for the event.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{fixtures, gptme_python, run_ok, sessiondb, tool};

/// A free port on 127.0.0.1 (bound and released: a race with other processes is possible but
/// unlikely, and shows as a failure to start).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP/1.1 request; returns (status, headers, body).
pub(crate) fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, Vec<u8>) {
    http_as(&format!("127.0.0.1:{port}"), port, method, path, headers, body)
}

/// [`http`] with `host` as the request's `Host`.
pub(crate) fn http_as(host: &str, port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, Vec<u8>) {
    answer_if_any(host, port, method, path, headers, body).expect("an HTTP answer")
}

/// [`http_as`], or `None` when the server closed the connection without answering (a server
/// stopping: a request it had not begun reading when it stopped).
pub(crate) fn answer_if_any(host: &str, port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<(u16, String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    // A server may answer (413) before reading a large body; a write that fails then is fine.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    if raw.is_empty() {
        return None;
    }
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status");
    let mut body = raw[split + 4..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body = unchunk(&body);
    }
    Some((status, head, body))
}

fn unchunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&data[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
    out
}

pub(crate) fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// A running `sessiondb serve`, stopped (SIGTERM, then waited for) when dropped.
pub(crate) struct Serve {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Serve {
    /// Serves `logs` from `db` with `args`; without a token (`--no-auth`) unless `args` give
    /// one, so that plain requests are answered.
    pub(crate) fn start(db: &Path, logs: &Path, args: &[&str]) -> Serve {
        Serve::start_with(db, logs, args, |_| {})
    }

    /// [`Serve::start`], with the command changed by `adjust` before it runs (its environment,
    /// its limits).
    pub(crate) fn start_with(db: &Path, logs: &Path, args: &[&str], adjust: impl FnOnce(&mut Command)) -> Serve {
        let port = free_port();
        let auth: &[&str] = if args.contains(&"--token") || args.contains(&"--no-auth") { &[] } else { &["--no-auth"] };
        let mut cmd = sessiondb(db);
        cmd.args(["serve", "--port", &port.to_string(), "--rescan", "2"])
            .args(auth)
            .args(args)
            .arg(logs)
            .env_remove("GPTME_SERVER_TOKEN")
            .env("SESSIONDB_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        adjust(&mut cmd);
        let child = cmd.spawn().unwrap();
        let mut serve = Serve { child, port };
        serve.wait_ready();
        // (A server's store has no ranking index: its searches rank from its own sets.)
        if !sessiondb::store::Store::is_server(db) {
            let mut ranking = db.as_os_str().to_owned();
            ranking.push(".ranking/meta.json");
            assert!(Path::new(&ranking).exists(), "serve brings the ranking index up before it listens, so that searches rank from it");
        }
        serve
    }

    pub(crate) fn wait_ready(&mut self) {
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(self.child.try_wait().unwrap().is_none(), "sessiondb serve exited before listening");
            assert!(start.elapsed() < Duration::from_secs(60), "sessiondb serve did not start listening");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// SIGTERM, and SIGKILL when that has not ended `child` within 10 s (a failing test must not
/// wait forever on a server that does not stop).
pub(crate) fn stop(child: &mut Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let asked = Instant::now();
    while matches!(child.try_wait(), Ok(None)) && asked.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Serve {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// The real gptme-server 0.35.1 on `logs`, with a home of its own.
struct GptmeServer {
    child: Child,
    port: u16,
}

impl GptmeServer {
    fn start(logs: &Path, home: &Path, token: &str) -> GptmeServer {
        let port = free_port();
        let python = gptme_python();
        let child = Command::new(&python)
            .args(["-m", "gptme.server", "serve", "--port", &port.to_string()])
            .current_dir(home)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("GPTME_LOGS_HOME", logs)
            .env("GPTME_SERVER_TOKEN", token)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = GptmeServer { child, port };
        let start = Instant::now();
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() && http(port, "GET", "/api/v2", &[], b"").0 == 200 {
                break;
            }
            assert!(server.child.try_wait().unwrap().is_none(), "gptme-server exited: is gptme[server] installed (tools/oracle/setup-gptme.sh)?");
            assert!(start.elapsed() < Duration::from_secs(120), "gptme-server did not start");
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }
}

impl Drop for GptmeServer {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// A copy of the committed fixtures at `dir`.
pub(crate) fn copy_fixtures(dir: &Path) -> PathBuf {
    copy_root(&fixtures(), dir)
}

fn copy_root(root: &Path, dir: &Path) -> PathBuf {
    common::tree::copy_tree(root, dir);
    dir.to_owned()
}

#[test]
fn every_read_answers_as_gptme_server_does_and_writes_nothing() {
    contract(&fixtures(), "sqlite");
}

#[test]
fn every_read_answers_as_gptme_server_does_and_writes_nothing_on_postgres() {
    contract(&fixtures(), "postgres");
}

#[test]
fn every_read_answers_as_gptme_server_does_on_logs_fresh_from_gptme() {
    let (logs, _keep) = common::regenerated_fixtures();
    contract(&logs, "sqlite");
}

/// The contract on copies of `root`, served from a store of `engine`.
fn contract(root: &Path, engine: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let Some(store) = common::TestDb::of(engine, tmp.path()) else { return };
    let theirs = copy_root(root, &tmp.path().join("theirs"));
    let ours = copy_root(root, &tmp.path().join("ours"));
    // Three conversations modified at the same instant as a fourth, in the middle of the
    // listing (so that no `limit` probe cuts the group): pages must break the tie by id, as
    // gptme-server does.
    let mut dirs: Vec<_> = std::fs::read_dir(&ours).unwrap().map(|e| e.unwrap().path()).filter(|d| d.join("conversation.jsonl").exists()).collect();
    dirs.sort_by_key(|d| std::fs::metadata(d.join("conversation.jsonl")).unwrap().modified().unwrap());
    let middle = filetime::FileTime::from_last_modification_time(&std::fs::metadata(dirs[dirs.len() / 2].join("conversation.jsonl")).unwrap());
    for d in dirs.iter().take(3) {
        for copy in [&theirs, &ours] {
            filetime::set_file_mtime(copy.join(d.file_name().unwrap()).join("conversation.jsonl"), middle).unwrap();
        }
    }
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let before = common::tree::snapshot(&ours, &[]);
    let token = "contract-token";
    let gptme = GptmeServer::start(&theirs, &home, token);
    let serve = Serve::start(&store.db, &ours, &["--token", token]);
    let out = Command::new(gptme_python())
        .arg(tool("serve_contract.py"))
        .arg(format!("http://127.0.0.1:{}", gptme.port))
        .arg(&theirs)
        .arg(format!("http://127.0.0.1:{}", serve.port))
        .arg(&ours)
        .arg(token)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let summary = report.lines().last().unwrap_or("");
    println!("{summary}");
    assert!(
        out.status.success(),
        "sessiondb serve differs from gptme-server:\n{}\n{}",
        report.lines().filter(|l| !l.starts_with("ok")).collect::<Vec<_>>().join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    let compared: usize = summary.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(compared > 300, "too few requests compared: {summary}");
    // gptme-server wrote into its copy (workspaces, config.toml); sessiondb's is untouched.
    assert_ne!(common::tree::snapshot(&theirs, &[]), common::tree::snapshot(root, &[]), "gptme-server's reads are expected to write");
    assert_eq!(common::tree::snapshot(&ours, &[]), before, "a read wrote to the logs root");
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    // Without --no-auth a token is made for the run and the server starts: only serving
    // without one is refused beyond loopback.
    let child = sessiondb(&tmp.path().join("db"))
        .args(["serve", "--no-auth", "--host", "0.0.0.0", "--port", &free_port().to_string()])
        .arg(&logs)
        .env_remove("GPTME_SERVER_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::output_within(child, Duration::from_secs(60), "serve --no-auth --host 0.0.0.0");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
}

#[test]
fn tokens_are_checked_as_gptme_server_checks_them() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    let serve = Serve::start(&tmp.path().join("db"), &logs, &["--token", "s3cret"]);
    let list = "/api/v2/conversations";
    let (status, _, body) = http(serve.port, "GET", list, &[], b"");
    assert_eq!((status, json(&body)["error"].as_str().unwrap()), (401, "Missing authentication credentials"));
    let (status, _, body) = http(serve.port, "GET", list, &[("Authorization", "Bearer wrong")], b"");
    assert_eq!((status, json(&body)["error"].as_str().unwrap()), (401, "Invalid or expired token"));
    let (status, _, body) = http(serve.port, "GET", list, &[("Authorization", "Basic s3cret")], b"");
    assert_eq!((status, json(&body)["error"].as_str().unwrap()), (401, "Invalid authentication scheme"));
    let (status, _, _) = http(serve.port, "GET", "/api/v2/conversations/2026-07-01-basic-chat/events", &[("Cookie", "gptme_auth=wrong")], b"");
    assert_eq!(status, 401);
    assert_eq!(http(serve.port, "GET", list, &[("Authorization", "Bearer s3cret")], b"").0, 200);
    // The web UI's cookie: set from a good token, then enough on its own.
    let (status, head, _) = http(serve.port, "POST", "/api/v2/auth/cookie", &[("Authorization", "Bearer s3cret")], b"");
    assert_eq!(status, 200);
    assert!(head.contains("gptme_auth=s3cret") && head.contains("HttpOnly"), "{head}");
    assert_eq!(http(serve.port, "GET", list, &[("Cookie", "other=1; gptme_auth=s3cret")], b"").0, 200);
    assert_eq!(http(serve.port, "POST", "/api/v2/auth/cookie", &[], b"").0, 401);
    // The API root is open, as gptme-server's is.
    assert_eq!(http(serve.port, "GET", "/api/v2", &[], b"").0, 200);
}

#[test]
fn files_outside_the_conversation_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    let chat = logs.join("2026-07-01-basic-chat");
    std::fs::write(tmp.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("secret.txt"), chat.join("leak.txt")).unwrap();
    std::fs::create_dir_all(chat.join("attachments")).unwrap();
    std::fs::write(chat.join("attachments/ok.txt"), "fine").unwrap();
    let serve = Serve::start(&tmp.path().join("db"), &logs, &[]);
    let base = "/api/v2/conversations/2026-07-01-basic-chat";
    let (status, _, body) = http(serve.port, "GET", &format!("{base}/files/attachments/ok.txt"), &[], b"");
    assert_eq!((status, body.as_slice()), (200, &b"fine"[..]));
    for path in
        ["../2026-07-03-message-flags/conversation.jsonl", "%2E%2E/2026-07-03-message-flags/conversation.jsonl", "attachments/../../../secret.txt", "leak.txt"]
    {
        let (status, _, body) = http(serve.port, "GET", &format!("{base}/files/{path}"), &[], b"");
        assert_eq!(status, 400, "{path}: {}", String::from_utf8_lossy(&body));
        assert!(!String::from_utf8_lossy(&body).contains("secret") || String::from_utf8_lossy(&body).contains("escapes"), "{path} leaked");
    }
    for path in ["../..", "..%2F..%2Fsecret.txt"] {
        let (status, _, body) = http(serve.port, "GET", &format!("{base}/workspace/{path}"), &[], b"");
        assert!(status == 400 || status == 404, "{path}: {status} {}", String::from_utf8_lossy(&body));
    }
    assert_eq!(http(serve.port, "GET", "/api/v2/conversations/a..b", &[], b"").0, 400);
    assert_eq!(http(serve.port, "GET", "/api/v2/conversations/..%2F..%2Fetc", &[], b"").0, 400);
}

#[test]
fn oversized_requests_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    let serve = Serve::start(&tmp.path().join("db"), &logs, &[]);
    let big = vec![b'x'; 3 << 20];
    let (status, _, _) = http(serve.port, "POST", "/api/v2/conversations/2026-07-01-basic-chat", &[("Content-Type", "application/json")], &big);
    assert_eq!(status, 413);
    // The same without a length given beforehand: chunks, cut at the limit.
    let mut chunked = Vec::new();
    for piece in big.chunks(64 << 10) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let mut s = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = "POST /api/v2/conversations/2026-07-01-basic-chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(&chunked);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(answer.starts_with(b"HTTP/1.1 413"), "{}", String::from_utf8_lossy(&answer[..answer.len().min(200)]));
    // Header fields past the server's bound (64 KiB) and targets past its bound (32 KiB),
    // whether or not hyper's own bounds (which depend on how the bytes arrive) catch them first:
    // a head too large for hyper's buffer is refused 431 whatever made it large.
    for size in [40_000, 70_000, 500_000] {
        let query = format!("/api/v2/conversations?q={}", "x".repeat(size));
        let status = http(serve.port, "GET", &query, &[], b"").0;
        assert!(status == 414 || (size > 65_000 && status == 431), "a {size}-byte query: {status}");
        if size < 65_000 {
            continue;
        }
        let big = "a".repeat(size);
        assert_eq!(http(serve.port, "GET", "/api/v2", &[("X-Big", &big)], b"").0, 431, "a {size}-byte header");
        let spread: Vec<(String, String)> = (0..size / 1000).map(|i| (format!("X-Part-{i}"), "b".repeat(990))).collect();
        let spread: Vec<(&str, &str)> = spread.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(http(serve.port, "GET", "/api/v2", &spread, b"").0, 431, "{size} bytes of header fields");
    }
    // Just under the bounds is fine.
    assert_eq!(http(serve.port, "GET", "/api/v2", &[("X-Big", &"a".repeat(60_000))], b"").0, 200);
    assert_eq!(http(serve.port, "GET", &format!("/api/v2?pad={}", "x".repeat(30_000)), &[], b"").0, 200);
    // The server is still there.
    assert_eq!(http(serve.port, "GET", "/api/v2", &[], b"").0, 200);
}

/// Reads SSE `data:` lines from `/events` until one satisfies `want` (or the deadline).
fn wait_for_event(reader: &mut impl BufRead, deadline: Instant, want: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let mut line = String::new();
    loop {
        assert!(Instant::now() < deadline, "no such event in time");
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => panic!("the event stream ended"),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => panic!("{e}"),
        }
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(data) {
                if want(&v) {
                    return v;
                }
            }
        }
    }
}

#[test]
fn events_follow_appends_by_real_gptme_in_another_process() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    let serve = Serve::start(&tmp.path().join("db"), &logs, &[]);
    let id = "2026-07-01-basic-chat";
    let mut s = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    write!(s, "GET /api/v2/conversations/{id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let mut reader = BufReader::new(s);
    let deadline = Instant::now() + Duration::from_secs(60);
    wait_for_event(&mut reader, deadline, |v| v["type"] == "connected");
    // Real gptme appends "ack <id> 0" in another process.
    run_ok(Command::new(gptme_python()).arg(tool("gptme_appender.py")).arg(&logs).arg(tmp.path().join("acks")).arg("1").arg(id));
    let added = wait_for_event(&mut reader, deadline, |v| v["type"] == "message_added");
    assert_eq!(added["message"]["content"], format!("ack {id} 0"));
    assert_eq!(added["message"]["role"], "user");
    // And the conversation as served holds it.
    let (_, _, body) = http(serve.port, "GET", &format!("/api/v2/conversations/{id}?limit=1"), &[], b"");
    assert_eq!(json(&body)["log"][0]["content"], format!("ack {id} 0"));
    // SIGTERM with the stream still open: the server ends the stream and exits.
    let mut serve = serve;
    unsafe { libc::kill(serve.child.id() as i32, libc::SIGTERM) };
    let stopped = Instant::now();
    while serve.child.try_wait().unwrap().is_none() {
        assert!(stopped.elapsed() < Duration::from_secs(10), "the server did not stop with an event stream open");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(serve.child.try_wait().unwrap().unwrap().success());
    let mut rest = String::new();
    let _ = reader.read_to_string(&mut rest);
}

/// Opens `/events` of `id` and waits for `connected`.
fn open_events(port: u16, id: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    write!(s, "GET /api/v2/conversations/{id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let mut reader = BufReader::new(s);
    wait_for_event(&mut reader, Instant::now() + Duration::from_secs(30), |v| v["type"] == "connected");
    reader
}

#[test]
fn writes_go_through_the_operations_and_gptme_reads_the_result() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let db = tmp.path().join("db");
    let serve = Serve::start(&db, &logs, &[]);
    let port = serve.port;
    let send = |method: &str, path: &str, body: &str| {
        let (status, _, body) = http(port, method, path, &[("Content-Type", "application/json")], body.as_bytes());
        (status, json(&body))
    };
    let base = "/api/v2/conversations/made-here";
    let (status, body) = send("PUT", base, r#"{"messages": [{"role": "user", "content": "first question"}], "config": {"chat": {"name": "Made here"}}}"#);
    assert_eq!((status, body["conversation_id"].as_str()), (200, Some("made-here")), "{body}");
    assert_eq!(send("PUT", base, "{}").0, 409);
    assert_eq!(send("PUT", "/api/v2/conversations/bad", r#"{"messages": [{"role": "robot", "content": "x"}]}"#).0, 400);
    assert!(!logs.join("bad").exists(), "a refused PUT left a directory");
    let mut events = open_events(port, "made-here");
    let deadline = Instant::now() + Duration::from_secs(60);
    assert_eq!(send("POST", base, r#"{"role": "assistant", "content": "first answer"}"#).0, 200);
    let added = wait_for_event(&mut events, deadline, |v| v["type"] == "message_added");
    assert_eq!(added["message"]["content"], "first answer");
    // Another process (the CLI) appends: the stream hears of it too.
    run_ok(sessiondb(&db).args(["append", "made-here", "--role", "user", "--content", "from the command line"]));
    let added = wait_for_event(&mut events, deadline, |v| v["type"] == "message_added");
    assert_eq!(added["message"]["content"], "from the command line");
    assert_eq!(send("POST", base, r#"{"role": "user"}"#).0, 400);
    assert_eq!(send("POST", "/api/v2/conversations/nowhere", r#"{"role": "user", "content": "x"}"#).0, 404);
    // Edit the last user message, keep what follows; the stream sees the edit.
    let (status, body) = send("PATCH", &format!("{base}/messages/2"), r#"{"content": "from the command line, edited"}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["log"][2]["content"], "from the command line, edited");
    let edited = wait_for_event(&mut events, deadline, |v| v["type"] == "conversation_edited");
    assert_eq!(edited["log"][2]["content"], "from the command line, edited");
    assert_eq!(send("PATCH", &format!("{base}/messages/1"), r#"{"content": "not a user message"}"#).0, 400);
    assert_eq!(send("PATCH", &format!("{base}/messages/9"), r#"{"content": "x"}"#).0, 404);
    // Deleting the answer would put two user messages together: refused, as gptme does.
    assert_eq!(send("DELETE", &format!("{base}/messages/1"), "").0, 400);
    let (status, body) = send("PATCH", &format!("{base}/messages/0?truncate=1"), "");
    assert_eq!((status, body["log"].as_array().map(Vec::len)), (200, Some(1)), "{body}");
    assert!(body["branches"].as_object().unwrap().keys().any(|b| b.starts_with("main-edit-")), "no backup branch: {body}");
    // Fork after the first message, rename, and the no-model answer.
    assert_eq!(send("POST", base, r#"{"role": "assistant", "content": "second answer"}"#).0, 200);
    let (status, body) = send("POST", &format!("{base}/fork?after_message=0"), "");
    assert_eq!(status, 200, "{body}");
    let fork = body["conversation_id"].as_str().unwrap().to_owned();
    let (_, forked) = send("GET", &format!("/api/v2/conversations/{fork}"), "");
    assert_eq!(forked["name"], "Fork of Made here @ msg 1");
    assert_eq!(forked["log"].as_array().unwrap().len(), 1);
    assert_eq!(send("POST", &format!("{base}/fork?after_message=x"), "").0, 400);
    let (status, body) = send("PATCH", &format!("{base}/config"), r#"{"chat": {"name": "Renamed here"}}"#);
    assert_eq!((status, body["config"]["chat"]["name"].as_str()), (200, Some("Renamed here")), "{body}");
    assert_eq!(send("PATCH", &format!("{base}/config"), r#"{"chat": {"model": "x"}}"#).0, 400);
    let (status, body) = send("POST", &format!("{base}/step"), "{}");
    assert_eq!(status, 501);
    assert!(body["error"].as_str().unwrap().contains("runs no model"));
    // gptme reads every conversation written here as it reads its own.
    let out = Command::new(gptme_python()).arg(tool("gptme_check.py")).args(["reads"]).arg(&logs).args(["--strict", "--events-suffix-ok"]).output().unwrap();
    assert!(out.status.success(), "gptme does not read what serve wrote: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // Delete, as `rm`.
    assert_eq!(send("DELETE", &format!("/api/v2/conversations/{fork}"), "").0, 200);
    assert!(!logs.join(&fork).exists());
    assert_eq!(send("GET", &format!("/api/v2/conversations/{fork}"), "").0, 404);
}

#[test]
fn the_stock_web_ui_lists_opens_searches_and_follows_live() {
    let Some((python, chromium)) = crate::html_browser::browser_or_skip("the_stock_web_ui_lists_opens_searches_and_follows_live") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    // A conversation written by real gptme whose word "greenhouse" is only in a message body,
    // and whose letters are not in its id or name in order. (The UI's Ctrl-K list filters the
    // server's answer again, fuzzily, by id and name: sessiondb's answer names a conversation
    // found by content with the text around the match. gptme-server's `q=` does not find it.)
    let id = "2026-08-01-planet-notes";
    let step = |role: &str, content: &str| serde_json::json!({"op": "append", "id": id, "role": role, "content": content, "timestamp": "2026-08-01T10:00:00"});
    let script = serde_json::json!([
        {"op": "new", "id": id},
        step("user", "What do greenhouse plants need most?"),
        step("assistant", "Light, water and warmth."),
        step("user", "Thanks."),
        step("assistant", "Glad to help."),
    ]);
    let script_file = tmp.path().join("ops.json");
    std::fs::write(&script_file, script.to_string()).unwrap();
    run_ok(Command::new(gptme_python()).arg(tool("gptme_ops.py")).arg(&logs).arg(&script_file));
    let webui =
        Command::new(&python).args(["-c", "import gptme.server, os; print(os.path.join(os.path.dirname(gptme.server.__file__), 'webui-dist'))"]).output().unwrap();
    let webui = String::from_utf8_lossy(&webui.stdout).trim().to_owned();
    // With a token, as a server reachable by others runs: the UI gets it in its link.
    let token = "ui-token";
    let serve = Serve::start(&tmp.path().join("db"), &logs, &["--webui-dir", &webui, "--token", token]);
    let child = Command::new(&python)
        .arg(tool("webui_probe.py"))
        .arg(format!("http://127.0.0.1:{}/", serve.port))
        .arg(&logs)
        .args(["2026-07-01-basic-chat", "greenhouse", id, token])
        .env("SESSIONDB_CHROMIUM", chromium)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::output_within(child, Duration::from_secs(300), "the web UI probe");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    assert!(out.status.success(), "the web UI probe failed:\n{report}\n{}", String::from_utf8_lossy(&out.stderr));
    for check in ["sidebar", "open", "history", "history-search", "search", "live", "errors", "search-word"] {
        assert!(report.contains(&format!("ok     {check}:")), "check {check} missing from the probe's report:\n{report}");
    }
}

#[test]
fn cors_answers_only_the_origin_given() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    let serve = Serve::start(&tmp.path().join("db"), &logs, &["--cors-origin", "http://ui.example:5701"]);
    let preflight = |origin: &str| {
        let (status, head, _) = http(serve.port, "OPTIONS", "/api/v2/conversations", &[("Origin", origin), ("Access-Control-Request-Method", "GET")], b"");
        (status, head.to_ascii_lowercase())
    };
    let (status, head) = preflight("http://ui.example:5701");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("access-control-allow-origin: http://ui.example:5701"), "{head}");
    // Another origin is not named (a browser then refuses the answer to it).
    let (_, head) = preflight("http://elsewhere.example");
    assert!(!head.contains("elsewhere") && !head.contains("access-control-allow-origin: *"), "another origin was allowed: {head}");
}

/// `serve --source NAME` reads its root into that source before it listens.
#[test]
fn serve_reads_its_root_into_the_source_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let (home, work, db) = (dir.path().join("home"), dir.path().join("work"), dir.path().join("db"));
    for (root, said) in [(&home, "at home"), (&work, "at work")] {
        std::fs::create_dir_all(root.join("same")).unwrap();
        std::fs::write(root.join("same/conversation.jsonl"), format!("{{\"role\": \"user\", \"content\": \"{said}\"}}\n")).unwrap();
    }
    run_ok(sessiondb(&db).arg("import").arg(&home));
    let serve = Serve::start(&db, &work, &["--source", "work"]);
    let shown = run_ok(sessiondb(&db).args(["show", "work:same", "--json"]));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("at work"));
    drop(serve);
}

/// In a store holding two logs roots, the server is its own root's, as gptme-server serves one
/// logs directory: it lists, opens, searches and writes that root's conversations only, and
/// the other root's conversation of the same chat id is neither shown nor changed.
#[test]
fn serve_keeps_to_its_own_root_in_a_store_of_several() {
    let dir = tempfile::tempdir().unwrap();
    let (home, work, db) = (dir.path().join("home"), dir.path().join("work"), dir.path().join("db"));
    for (root, said) in [(&home, "at home"), (&work, "at work")] {
        for id in ["same", &format!("only-{}", root.file_name().unwrap().to_str().unwrap())] {
            std::fs::create_dir_all(root.join(id)).unwrap();
            std::fs::write(
                root.join(id).join("conversation.jsonl"),
                format!("{{\"role\": \"user\", \"content\": \"{said}\", \"timestamp\": \"2025-01-01T00:00:00\"}}\n"),
            )
            .unwrap();
        }
    }
    run_ok(sessiondb(&db).arg("import").arg(&home));
    let home_same = std::fs::read(home.join("same/conversation.jsonl")).unwrap();
    let serve = Serve::start(&db, &work, &[]);
    let get = |path: &str| {
        let (status, _, body) = http(serve.port, "GET", path, &[], b"");
        (status, json(&body))
    };
    let ids = |v: &serde_json::Value| -> Vec<String> {
        let items = v.as_array().or_else(|| v["conversations"].as_array()).unwrap_or_else(|| panic!("no list: {v}"));
        let mut ids: Vec<String> = items.iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect();
        ids.sort();
        ids
    };
    for listing in ["/api/v2/conversations", "/api/v2/conversations?paginated=true", "/api/v2/conversations?limit=50"] {
        let (status, body) = get(listing);
        assert_eq!((status, ids(&body)), (200, vec!["only-work".to_owned(), "same".to_owned()]), "{listing}: {body}");
    }
    // Message content: "at home" is only in the other root's conversations.
    for q in ["/api/v2/conversations?search=at%20home", "/api/v2/conversations?q=at%20home&paginated=true"] {
        let (status, body) = get(q);
        assert_eq!((status, ids(&body)), (200, Vec::<String>::new()), "{q}: {body}");
    }
    assert_eq!(ids(&get("/api/v2/conversations?search=at%20work").1), vec!["only-work".to_owned(), "same".to_owned()]);
    let (status, body) = get("/api/v2/conversations/same");
    assert_eq!((status, body["log"][0]["content"].as_str()), (200, Some("at work")), "{body}");
    assert_eq!(get("/api/v2/conversations/only-home").0, 404);
    let (status, _, body) =
        http(serve.port, "POST", "/api/v2/conversations/same", &[("Content-Type", "application/json")], br#"{"role": "assistant", "content": "answered at work"}"#);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    drop(serve);
    assert!(std::fs::read_to_string(work.join("same/conversation.jsonl")).unwrap().contains("answered at work"));
    assert_eq!(std::fs::read(home.join("same/conversation.jsonl")).unwrap(), home_same, "the other root's conversation of that id was changed");
    let shown = run_ok(sessiondb(&db).args(["show", &format!("{}:same", source_of(&db, &home)), "--json"]));
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("answered at work"), "the other root's rows were changed");
}

/// `?q=` answers with the first matches in the listing's order, whatever the limit: the
/// answer to `limit=k` is the first k of the answer to `limit=1000` (content matches are asked
/// for as many as the page holds), ties of modification time included; and the pages of a
/// paginated search, cursor after cursor, are the whole paginated answer in order.
#[test]
fn a_search_gives_the_first_matches_of_the_listing_at_any_limit() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    for i in 0..24 {
        // By name (the id), by content, by both, or not at all; four at each second, so that
        // ties are many.
        let id = if i % 7 == 0 { format!("zephyr-{i:02}") } else { format!("chat-{i:02}") };
        let said = if i % 3 == 0 { "a zephyr blew" } else { "calm air" };
        std::fs::create_dir_all(logs.join(&id)).unwrap();
        let line = format!("{{\"role\": \"user\", \"content\": \"{said} ({i})\", \"timestamp\": \"2025-01-01T00:00:{:02}\"}}\n", i / 4);
        std::fs::write(logs.join(&id).join("conversation.jsonl"), line).unwrap();
    }
    let serve = Serve::start(&dir.path().join("db"), &logs, &[]);
    let get = |path: &str| {
        let (status, _, body) = http(serve.port, "GET", path, &[], b"");
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        json(&body)
    };
    let all = get("/api/v2/conversations?q=zephyr&limit=1000&detail=true");
    let all = all.as_array().unwrap();
    // By name 0, 7, 14, 21; by content every third: 0 and 21 both.
    assert_eq!(all.len(), 10, "{all:?}");
    for k in 1..=all.len() + 1 {
        let some = get(&format!("/api/v2/conversations?q=zephyr&limit={k}&detail=true"));
        assert_eq!(some.as_array().unwrap()[..], all[..k.min(all.len())], "limit={k}");
    }
    let whole = get("/api/v2/conversations?q=zephyr&limit=1000&paginated=1");
    let mut paged = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = get(&format!("/api/v2/conversations?q=zephyr&limit=3&paginated=1{cursor}"));
        paged.extend(page["conversations"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => {
                let encoded: String =
                    next.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
                cursor = format!("&cursor={encoded}");
            }
            None => break,
        }
    }
    assert_eq!(paged[..], whole["conversations"].as_array().unwrap()[..]);
}

/// The name of the source that reads logs root `root`, as `list --json` shows it.
fn source_of(db: &Path, root: &Path) -> String {
    let out = run_ok(sessiondb(db).args(["list", "--json", "--all"]));
    let list: serde_json::Value = json(&out.stdout);
    let want = root.join("same");
    let conv = list.as_array().unwrap().iter().find(|c| c["path"].as_str().is_some_and(|p| Path::new(p).starts_with(&want))).unwrap_or_else(|| panic!("{list}"));
    conv["source"].as_str().unwrap().to_owned()
}

/// With neither `--webui-dir` nor `GPTME_WEBUI_DIR` nor `GPTME_PYTHON`, the web UI is found
/// through the `gptme` command on `PATH`: the interpreter its `#!` line names (as pipx and
/// `uv tool` install it, in a virtual environment `python3` does not see) imports gptme.
#[test]
fn the_web_ui_is_found_through_the_gptme_command() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = copy_fixtures(&tmp.path().join("logs"));
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // Absolute, and not resolved: a virtual environment's python is a link out of it.
    let python = std::path::absolute(gptme_python()).unwrap();
    std::fs::write(bin.join("gptme"), format!("#!{}\nimport gptme.cli\n", python.display())).unwrap();
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()))).unwrap();
    let serve = Serve::start_with(&tmp.path().join("db"), &logs, &[], |cmd| {
        cmd.env("PATH", path).env_remove("GPTME_PYTHON").env_remove("GPTME_WEBUI_DIR");
    });
    let (status, _, body) = http(serve.port, "GET", "/", &[], b"");
    let page = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<html") || page.contains("<!doctype html") || page.contains("<!DOCTYPE html"), "{page}");
}
