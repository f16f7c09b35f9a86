//! `sessiondb mcp`: gptme's own MCP client (`gptme.mcp.client.MCPClient`, no model) connects,
//! lists the four tools and calls each, and the answers agree with the command line's `--json`
//! on the same store — the same conversations in the same order, page after page; gptme gives
//! the tools to its agent; and the server answers whatever it is sent (malformed lines, unknown
//! tools and methods, huge limits) and keeps answering, fresh, while a sync runs beside it. A
//! server that cannot open its store answers all the same, each tool saying why; no answer is
//! larger than MCP clients pass to their model whole. (Claude Code and Codex themselves drive
//! the server in `tests/mcp_agents.rs`.)

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{run_ok, sessiondb};
use serde_json::{json, Value};

/// The four tools, in the order the server lists them.
pub(crate) const TOOLS: [&str; 4] = ["search_conversations", "read_conversation", "list_conversations", "conversation_stats"];

/// Queries of every class, each found in two conversations or more: words, a phrase, CJK, a
/// literal code fragment, a prefix, a path.
const QUERIES: [&str; 7] = ["borrow", "\"borrow checker\"", "数据库", "repr(", "capital", "sess*", "src/main.rs"];

struct Setup {
    work: tempfile::TempDir,
    logs: PathBuf,
    db: PathBuf,
    /// The database `db` names, kept (a server's is dropped with it).
    _store: common::TestDb,
}

/// Writes conversation `id` under `logs` with gptme's line format.
pub(crate) fn conversation(logs: &Path, id: &str, messages: &[(&str, &str)]) {
    let dir = logs.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::new();
    for (i, (role, content)) in messages.iter().enumerate() {
        text += &message_line(role, content, &format!("2026-08-0{}T10:00:0{i}", id.len() % 9 + 1));
    }
    std::fs::write(dir.join("conversation.jsonl"), text).unwrap();
}

fn message_line(role: &str, content: &str, timestamp: &str) -> String {
    let m = sessiondb::model::Message::new(sessiondb::model::Role::parse(role), content, Some(timestamp.into()));
    sessiondb::codec::message_line::encode_message(&m) + "\n"
}

/// The bundled gptme logs plus conversations that the queries find in several places, imported.
fn setup() -> Setup {
    setup_on("sqlite").expect("an SQLite file")
}

/// [`setup`] on a store of `engine`; `None` when PostgreSQL is left out.
fn setup_on(engine: &str) -> Option<Setup> {
    let work = tempfile::tempdir().unwrap();
    let store = common::TestDb::of(engine, work.path())?;
    let logs = work.path().join("logs");
    run_ok(Command::new("cp").arg("-r").arg(common::fixtures()).arg(&logs));
    conversation(
        &logs,
        "mcp-rust",
        &[
            ("user", "error[E0502]: cannot borrow `x` as mutable in src/main.rs; the borrow checker says no"),
            ("assistant", "The borrow checker allows one mutable borrow. Print it with println!(\"{:?}\", repr(x))."),
            ("system", "Ran `cargo build` in src/main.rs: sessions saved"),
        ],
    );
    conversation(
        &logs,
        "mcp-python",
        &[("user", "print(repr(value)) and a borrow of the capital"), ("assistant", "我们使用数据库存储会话 — the session is stored; see src/main.rs")],
    );
    conversation(&logs, "mcp-cjk", &[("user", "数据库的会话 and the capital of Japan"), ("assistant", "日本語: 数据库 again; sessiondb borrow checker notes")]);
    let db = store.db.clone();
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    Some(Setup { work, logs, db, _store: store })
}

/// gptme's user configuration enabling the server, exactly as the README gives it (with `more`
/// arguments after the logs root); the home directory it is in, under `work`.
fn gptme_config(work: &Path, db: &Path, logs: &Path, more: &[&str]) -> PathBuf {
    let home = work.join("home");
    let dir = home.join(".config/gptme");
    std::fs::create_dir_all(&dir).unwrap();
    let mut args = vec!["--db".to_owned(), db.display().to_string(), "mcp".to_owned(), logs.display().to_string()];
    args.extend(more.iter().map(|a| a.to_string()));
    let config = format!("[mcp]\nenabled = true\n\n[[mcp.servers]]\nname = \"sessiondb\"\ncommand = {:?}\nargs = {:?}\n", env!("CARGO_BIN_EXE_sessiondb"), args);
    std::fs::write(dir.join("config.toml"), config).unwrap();
    home
}

/// Runs gptme's MCP client (`tools/oracle/mcp_client.py`) with `calls`; its JSON report.
fn gptme_client(setup: &Setup, calls: &Value) -> Value {
    gptme_mcp_client(setup.work.path(), &setup.db, &setup.logs, &[], calls)
}

/// Runs gptme's MCP client against `sessiondb --db DB mcp LOGS MORE…`, configured as the README
/// says under `work`, with `calls`; its JSON report.
pub(crate) fn gptme_mcp_client(work: &Path, db: &Path, logs: &Path, more: &[&str], calls: &Value) -> Value {
    let home = gptme_config(work, db, logs, more);
    // coreutils' `timeout`: a server that stops answering fails the test instead of hanging it.
    let mut child = Command::new("timeout")
        .arg("300")
        .arg(common::gptme_python())
        .arg(common::tool("mcp_client.py"))
        .arg("sessiondb")
        .current_dir(work)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("GPTME_LOGS_HOME")
        .env_remove("SESSIONDB_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    child.stdin.take().unwrap().write_all(calls.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "mcp_client.py failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

pub(crate) fn cli_json(db: &Path, args: &[&str]) -> Value {
    serde_json::from_slice(&run_ok(sessiondb(db).args(args)).stdout).unwrap()
}

/// A call's answer, parsed; the call must have succeeded.
fn answer(result: &Value) -> Value {
    assert_eq!(result["is_error"], false, "{result}");
    serde_json::from_str(result["text"].as_str().unwrap()).unwrap()
}

fn pages(result: &Value) -> Vec<Value> {
    result["pages"].as_array().unwrap_or_else(|| panic!("no pages: {result}")).iter().map(|p| serde_json::from_str(p.as_str().unwrap()).unwrap()).collect()
}

pub(crate) fn ids(rows: &[Value]) -> Vec<String> {
    rows.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

/// What both sides say of a search result: its conversation, match count and each snippet's
/// place and marked text.
pub(crate) fn search_rows(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            let snippets: Vec<Value> = r["snippets"].as_array().unwrap().iter().map(|s| json!([s["role"], s["file"], s["index"], s["highlighted"]])).collect();
            json!([r["id"], r["name"], r["modified"], r["matches"], snippets])
        })
        .collect()
}

#[test]
fn gptmes_client_lists_the_tools_and_every_answer_agrees_with_the_command_line() {
    answers_agree_with_the_command_line(setup());
}

#[test]
fn gptmes_client_lists_the_tools_and_every_answer_agrees_with_the_command_line_on_postgres() {
    if let Some(setup) = setup_on("postgres") {
        answers_agree_with_the_command_line(setup);
    }
}

fn answers_agree_with_the_command_line(setup: Setup) {
    let cli_list = cli_json(&setup.db, &["list", "--json"]);
    let chat_ids = ids(cli_list.as_array().unwrap());
    let mut calls = Vec::new();
    for q in QUERIES {
        calls.push(json!({ "tool": "search_conversations", "arguments": { "query": q, "limit": 100, "max_chars": 1_000_000 } }));
        calls.push(json!({ "tool": "search_conversations", "arguments": { "query": q, "limit": 100, "max_chars": 500 }, "follow": true }));
    }
    calls.push(json!({ "tool": "search_conversations", "arguments": { "query": "borrow", "role": "user", "max_chars": 1_000_000 } }));
    calls.push(json!({ "tool": "list_conversations", "arguments": { "limit": 1000, "max_chars": 1_000_000 } }));
    calls.push(json!({ "tool": "list_conversations", "arguments": { "limit": 3, "max_chars": 1500 }, "follow": true }));
    calls.push(json!({ "tool": "list_conversations", "arguments": { "query": "mcp-", "max_chars": 1_000_000 } }));
    calls.push(json!({ "tool": "conversation_stats", "arguments": {} }));
    for id in &chat_ids {
        calls.push(json!({ "tool": "read_conversation", "arguments": { "chat_id": id, "limit": 1000, "max_chars": 1_000_000 } }));
        calls.push(json!({ "tool": "read_conversation", "arguments": { "chat_id": id, "limit": 4, "max_chars": 800 }, "follow": true }));
        calls.push(json!({ "tool": "conversation_stats", "arguments": { "chat_id": id } }));
    }
    let report = gptme_client(&setup, &Value::Array(calls));
    let names: Vec<&str> = report["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS);
    for tool in report["tools"].as_array().unwrap() {
        assert!(tool["description"].as_str().unwrap().len() > 100, "a description a model can choose by: {tool}");
        assert_eq!(tool["inputSchema"]["type"], "object");
    }
    let mut results = report["results"].as_array().unwrap().iter();
    let mut cut = 0;
    let mut hidden = 0;

    for q in QUERIES {
        let cli = cli_json(&setup.db, &["search", "--json", "-n", "100", "-m", "3", "--", q]);
        let cli_rows = cli["results"].as_array().unwrap();
        assert!(cli_rows.len() >= 2, "{q:?} is found in several conversations: {cli}");
        let whole = answer(results.next().unwrap());
        assert_eq!(search_rows(whole["results"].as_array().unwrap()), search_rows(cli_rows), "{q:?}");
        assert_eq!((&whole["total"], &whole["literal"], &whole["more"]), (&cli["total"], &cli["literal"], &Value::Null), "{q:?}");
        for s in whole["results"].as_array().unwrap().iter().flat_map(|r| r["snippets"].as_array().unwrap()) {
            assert!(s["timestamp"].is_string(), "every match has its message's time: {s}");
        }
        let paged = pages(results.next().unwrap());
        assert!(paged.len() > 1, "{q:?}: 500 characters hold fewer than all");
        let joined: Vec<Value> = paged.iter().flat_map(|p| p["results"].as_array().unwrap().clone()).collect();
        assert_eq!(ids(&joined), ids(cli_rows), "{q:?}: the pages join up to the whole list");
        for p in &paged {
            assert!(p.to_string().chars().count() <= 500, "{q:?}: a page over its budget: {p}");
        }
    }
    let cli = cli_json(&setup.db, &["search", "--json", "-n", "100", "-m", "3", "--role", "user", "borrow"]);
    assert_eq!(search_rows(answer(results.next().unwrap())["results"].as_array().unwrap()), search_rows(cli["results"].as_array().unwrap()));

    let listed = answer(results.next().unwrap());
    assert_eq!(listed["conversations"], cli_list, "list_conversations has list --json's rows");
    assert_eq!(listed["total"], chat_ids.len());
    let paged = pages(results.next().unwrap());
    assert!(paged.len() >= chat_ids.len() / 3);
    let joined: Vec<Value> = paged.iter().flat_map(|p| p["conversations"].as_array().unwrap().clone()).collect();
    assert_eq!(Value::Array(joined), cli_list, "listing page by page gives every conversation once, in order");
    let named = answer(results.next().unwrap());
    assert_eq!(named["conversations"], cli_json(&setup.db, &["list", "--json", "--name", "*mcp-*"]));
    assert_eq!(named["total"], 3);

    let mut stats = answer(results.next().unwrap());
    assert_eq!(stats, cli_json(&setup.db, &["stats", "--json"]), "conversation_stats is stats --json");

    for id in &chat_ids {
        let read = answer(results.next().unwrap());
        hidden += read["messages"].as_array().unwrap().iter().filter(|m| m["hidden"] == true).count();
        // `show --json` prints the branch's lines as stored (these messages); the conversation
        // as gptme loads it is the same document unless a view is active.
        if read["file"] == "conversation.jsonl" {
            let store = sessiondb::store::Store::open_existing(&setup.db).unwrap();
            let expected: Vec<Value> = sessiondb::store::queries::branch_messages(&store.connection().unwrap(), id, "main")
                .unwrap()
                .into_iter()
                .map(|m| json!([m.role.as_str(), m.content, m.timestamp, m.hide]))
                .collect();
            let got: Vec<Value> = read["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| json!([m["role"], m["content"], m["timestamp"], m.get("hidden").cloned().unwrap_or(json!(false))]))
                .collect();
            assert_eq!(got, expected, "{id}: read_conversation has show --json's messages");
        }
        // Page by page, a message cut at the budget going on in the next page: the same text.
        let mut joined: Vec<(u64, String, String)> = Vec::new();
        for page in pages(results.next().unwrap()) {
            assert!(page.to_string().chars().count() <= 800, "{id}: a page over its budget: {page}");
            cut += page["messages"].as_array().unwrap().iter().filter(|m| m["cut"] == true).count();
            for m in page["messages"].as_array().unwrap() {
                let (index, content) = (m["index"].as_u64().unwrap(), m["content"].as_str().unwrap());
                match joined.last_mut() {
                    Some((i, _, text)) if *i == index => text.push_str(content),
                    _ => joined.push((index, m["role"].as_str().unwrap().to_owned(), content.to_owned())),
                }
            }
        }
        let whole: Vec<(u64, String, String)> = read["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["index"].as_u64().unwrap(), m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(joined, whole, "{id}: the pages of read_conversation join up to the whole conversation");
        stats = answer(results.next().unwrap());
        assert_eq!(stats, cli_json(&setup.db, &["stats", "--json", id]), "{id}");
    }
    assert!(results.next().is_none());
    assert!(cut > 0, "some message is longer than a page, and is read on in the next");
    assert!(hidden > 0, "the bundled logs have hidden messages, marked as such");
}

#[test]
fn gptme_gives_its_agent_the_four_tools() {
    let setup = setup();
    let report = gptme_client(&setup, &json!([]));
    let expected: Vec<String> = {
        let mut names: Vec<String> = TOOLS.iter().map(|t| format!("sessiondb.{t}")).collect();
        names.sort();
        names
    };
    assert_eq!(report["agent_tools"], json!(expected));
    for (name, desc) in report["agent_descriptions"].as_object().unwrap() {
        assert!(desc.as_str().unwrap().starts_with("[sessiondb] "), "{name}: {desc}");
    }
}

#[test]
fn gptmes_client_gets_tool_errors_that_say_what_was_wrong() {
    let setup = setup();
    let calls = json!([
        { "tool": "search_conversations", "arguments": { "query": "borrow", "limti": 3 } },
        { "tool": "search_conversations", "arguments": { "query": "borrow", "limit": "ten" } },
        { "tool": "search_conversations", "arguments": {} },
        { "tool": "search_conversations", "arguments": { "query": "borrow", "chat": "no-such-chat" } },
        { "tool": "search_conversations", "arguments": { "query": "borrow", "since": "last tuesday" } },
        { "tool": "read_conversation", "arguments": { "chat_id": "no-such-chat" } },
        { "tool": "read_conversation", "arguments": { "chat_id": "mcp-rust", "cursor": "next please" } },
        { "tool": "no_such_tool", "arguments": {} },
        { "tool": "search_conversations", "arguments": { "query": "borrow" } },
    ]);
    let report = gptme_client(&setup, &calls);
    let results = report["results"].as_array().unwrap();
    let wanted = [
        "unknown argument \"limti\"",
        "argument \"limit\" is \"ten\", expected a whole number",
        "\"query\" is required",
        "chat \"no-such-chat\" names nothing in the store",
        "since \"last tuesday\"",
        "no conversation \"no-such-chat\"",
        "cursor \"next please\" is not one this tool gave",
    ];
    for (result, wanted) in results.iter().zip(wanted) {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(result["text"].as_str().unwrap().contains(wanted), "{wanted:?} in {result}");
    }
    assert!(results[7]["exception"].as_str().unwrap().contains("Unknown tool: \"no_such_tool\""), "{}", results[7]);
    assert_eq!(answer(&results[8])["results"][0]["id"], "mcp-rust", "the server goes on answering");
}

/// A `sessiondb mcp` process spoken to line by line.
pub(crate) struct Server {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// How long a server may live in a test: one that stops answering is killed, so that the test
/// fails (its answer cut short) instead of hanging.
const SERVER_LIFETIME: std::time::Duration = std::time::Duration::from_secs(120);

impl Server {
    fn start(db: &Path, logs: &Path) -> Server {
        Server::start_with(db, logs, &[])
    }

    /// [`Server::start`] with more arguments after the logs root.
    fn start_with(db: &Path, logs: &Path, more: &[&str]) -> Server {
        Server::spawn(sessiondb(db).arg("mcp").arg(logs).args(more))
    }

    /// Starts `command`, a `sessiondb … mcp` command line.
    pub(crate) fn spawn(command: &mut Command) -> Server {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (pid, watched) = (child.id() as libc::pid_t, done.clone());
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + SERVER_LIFETIME;
            while std::time::Instant::now() < until {
                if watched.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            // SAFETY: our own child, not reaped (`done` is set before it is waited for).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        Server { child, input, output, done }
    }

    /// Sends one line and reads one answer.
    fn ask(&mut self, line: &str) -> Value {
        writeln!(self.input, "{line}").unwrap();
        self.input.flush().unwrap();
        let mut answer = String::new();
        self.output.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?} for {line}"))
    }

    pub(crate) fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let answer = self.ask(&json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": tool, "arguments": arguments } }).to_string());
        assert_eq!(answer["id"], id, "{answer}");
        answer["result"].clone()
    }

    /// Closes the input and waits: the server must end on its own, successfully.
    pub(crate) fn finish(self) {
        let status = self.end();
        assert!(status.success(), "{status}");
    }

    /// Closes the input and waits for the server to end on its own; its exit status.
    pub(crate) fn end(mut self) -> std::process::ExitStatus {
        drop(self.input);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.output, &mut rest).unwrap();
        assert_eq!(rest, "", "nothing is written but answers");
        // From here on this function reaps the child, so the watchdog stands down first (a
        // child never reaped stays a zombie, whose id no other process can take).
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            match self.child.try_wait().unwrap() {
                Some(status) => break status,
                None if std::time::Instant::now() < until => std::thread::sleep(std::time::Duration::from_millis(20)),
                None => {
                    let _ = self.child.kill();
                    panic!("the server did not end at the end of its input");
                }
            }
        };
        status
    }
}

#[test]
fn malformed_requests_unknown_tools_and_huge_limits_are_answered_and_the_server_goes_on() {
    let setup = setup();
    let mut server = Server::start(&setup.db, &setup.logs);
    let init = server.ask(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let code = |answer: &Value| answer["error"]["code"].clone();
    assert_eq!(code(&server.ask("{not json")), -32700);
    assert_eq!(server.ask("{not json")["id"], Value::Null);
    assert_eq!(code(&server.ask("\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}")), -32700);
    assert_eq!(code(&server.ask("[]")), -32600);
    assert_eq!(code(&server.ask("\"tools/list\"")), -32600);
    assert_eq!(code(&server.ask(r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#)), -32600);
    assert_eq!(code(&server.ask(r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#)), -32600);
    assert_eq!(code(&server.ask(r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#)), -32601);
    assert_eq!(code(&server.ask(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":null}"#)), -32602);
    assert_eq!(code(&server.ask(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rm_everything"}}"#)), -32602);
    assert_eq!(code(&server.ask(r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_conversation","arguments":[1]}}"#)), -32602);
    let batch =
        server.ask(r#"[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":8,"method":"nope"}]"#);
    assert_eq!(
        batch,
        json!([{ "jsonrpc": "2.0", "id": 7, "result": {} }, { "jsonrpc": "2.0", "id": 8, "error": { "code": -32601, "message": "Method not found: \"nope\"" } }])
    );

    // Huge limits are brought down to the most a page holds; huge positions are past the end.
    let huge = u64::MAX;
    let result = server.call(10, "search_conversations", json!({ "query": "borrow", "limit": huge, "matches": huge, "max_chars": huge }));
    let found = &serde_json::from_str::<Value>(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(result["isError"], false, "{result}");
    assert!(found["results"].as_array().unwrap().len() >= 3, "{found}");
    for (tool, arguments) in [
        ("search_conversations", json!({ "query": "borrow", "cursor": huge.to_string() })),
        ("list_conversations", json!({ "limit": huge, "cursor": huge.to_string() })),
        ("read_conversation", json!({ "chat_id": "mcp-rust", "start": huge, "limit": huge })),
        ("read_conversation", json!({ "chat_id": "mcp-rust", "cursor": format!("{huge}:{huge}") })),
    ] {
        let result = server.call(11, tool, arguments.clone());
        assert_eq!(result["isError"], false, "{tool} {arguments}: {result}");
        let page: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(page["more"], Value::Null, "{tool} {arguments}: nothing past the end: {page}");
    }
    let too_big = server.call(12, "search_conversations", json!({ "query": "borrow", "limit": 1e300 }));
    assert_eq!(too_big["isError"], true, "{too_big}");
    let long_query = server.call(13, "search_conversations", json!({ "query": "x".repeat(100_000) }));
    assert!(long_query["content"][0]["text"].as_str().unwrap().contains("at most"), "{long_query}");

    // A conversation that cannot be read in: the answer still comes, from the store, saying so.
    std::fs::create_dir_all(setup.logs.join("mcp-broken/conversation.jsonl")).unwrap();
    let result = server.call(16, "search_conversations", json!({ "query": "borrow" }));
    assert_eq!(result["isError"], false, "{result}");
    let page: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(page["results"].as_array().unwrap().len() >= 3, "{page}");
    let note = page["note"].as_str().unwrap_or_else(|| panic!("no note: {page}"));
    assert!(note.contains("could not be read in") && note.contains("mcp-broken"), "{note}");

    // A line longer than the server holds is refused whole, and the next one answered.
    let mut long = String::from("{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"ping\",\"pad\":\"");
    long.push_str(&"x".repeat(17 << 20));
    long.push_str("\"}");
    assert_eq!(code(&server.ask(&long)), -32700);
    let result = server.call(15, "list_conversations", json!({ "limit": 1 }));
    assert_eq!(result["isError"], false, "{result}");
    server.finish();
}

#[test]
fn a_search_while_a_sync_runs_is_answered_and_finds_what_gptme_just_wrote() {
    let setup = setup();
    let mut watch = Reaped(
        sessiondb(&setup.db).args(["sync", "--rescan", "1", "--watch", "--json"]).arg(&setup.logs).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap(),
    );
    // Its first pass reported: from here on it watches the directories and reads what changes.
    let mut passes = BufReader::new(watch.0.stdout.take().unwrap());
    let mut first = String::new();
    passes.read_line(&mut first).unwrap();
    assert!(first.starts_with('{'), "{first:?}");
    let mut server = Server::start(&setup.db, &setup.logs);
    let transcript = setup.logs.join("mcp-rust/conversation.jsonl");
    for i in 0..50u64 {
        // As gptme appends: one whole line, while the watcher reads the same files.
        let word = format!("zebra{i}x");
        let mut file = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
        file.write_all(message_line("user", &format!("a note about {word}"), "2026-08-09T10:00:00").as_bytes()).unwrap();
        drop(file);
        let result = server.call(i, "search_conversations", json!({ "query": word }));
        assert_eq!(result["isError"], false, "{result}");
        let page: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(page.get("note"), None, "{page}");
        assert_eq!(ids(page["results"].as_array().unwrap()), ["mcp-rust"], "{word} is found the moment it is written: {page}");
        // Every earlier one too: nothing read twice or lost by the two readers.
        let all = server.call(100 + i, "search_conversations", json!({ "query": "zebra*" }));
        let page: Value = serde_json::from_str(all["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(page["total"]["messages"], i + 1, "{page}");
    }
    // A new conversation, a new branch, a conversation removed: each seen by the next call.
    let found = |server: &mut Server, word: &str| -> Vec<(String, String)> {
        let result = server.call(200, "search_conversations", json!({ "query": word }));
        let page: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        page["results"].as_array().unwrap().iter().map(|r| (r["id"].as_str().unwrap().to_owned(), r["snippets"][0]["file"].as_str().unwrap().to_owned())).collect()
    };
    conversation(&setup.logs, "mcp-new", &[("user", "okapi1x arrives")]);
    assert_eq!(found(&mut server, "okapi1x"), [("mcp-new".to_owned(), "conversation.jsonl".to_owned())]);
    std::fs::create_dir(setup.logs.join("mcp-cjk/branches")).unwrap();
    std::fs::write(setup.logs.join("mcp-cjk/branches/side.jsonl"), message_line("user", "okapi2x on a branch", "2026-08-09T10:00:00")).unwrap();
    assert_eq!(found(&mut server, "okapi2x"), [("mcp-cjk".to_owned(), "branches/side.jsonl".to_owned())]);
    assert!(found(&mut server, "\"borrow checker\"").iter().any(|(id, _)| id == "mcp-rust"));
    std::fs::remove_dir_all(setup.logs.join("mcp-rust")).unwrap();
    assert!(!found(&mut server, "\"borrow checker\"").iter().any(|(id, _)| id == "mcp-rust"), "a removed conversation is gone from answers");
    server.finish();
    assert_eq!(watch.0.try_wait().unwrap(), None, "the sync ran beside the server throughout");
    // The watcher read the appends too (or found them read): its passes went on.
    let mut more = String::new();
    passes.read_line(&mut more).unwrap();
    assert!(more.starts_with('{'), "{more:?}");
}

/// A child process killed and reaped when dropped, also when a test fails.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_server_makes_a_database_only_from_a_logs_root() {
    let work = tempfile::tempdir().unwrap();
    let typo = work.path().join("typo/sessions.db");
    let without_root = |cmd: &mut Command| {
        cmd.env("HOME", work.path()).env_remove("XDG_DATA_HOME").env_remove("XDG_CONFIG_HOME").env_remove("GPTME_LOGS_HOME").stdin(Stdio::null()).output().unwrap()
    };
    let out = without_root(sessiondb(&typo).arg("mcp"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no database at"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty() && !typo.parent().unwrap().exists(), "nothing made, nothing said on the protocol's channel");
    // Given a logs root, it reads it in on the first call, into a database of its own.
    let logs = work.path().join("logs");
    conversation(&logs, "fresh", &[("user", "a quagga in the logs")]);
    let db = work.path().join("new.db");
    let mut server = Server::start(&db, &logs);
    let result = server.call(1, "search_conversations", json!({ "query": "quagga" }));
    let page: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(ids(page["results"].as_array().unwrap()), ["fresh"]);
    server.finish();
}

/// `mcp --source NAME` reads its logs root into that source; once the store has two sources,
/// listed and found conversations carry theirs, and `SOURCE:CHAT` names one.
#[test]
fn the_server_reads_its_root_into_the_source_it_is_given() {
    let work = tempfile::tempdir().unwrap();
    let (a, b, db) = (work.path().join("a"), work.path().join("b"), work.path().join("db"));
    conversation(&a, "same", &[("user", "an okapi at home")]);
    conversation(&b, "same", &[("user", "an okapi at work")]);
    run_ok(sessiondb(&db).arg("import").arg(&a));
    let mut server = Server::start_with(&db, &b, &["--source", "work"]);
    let page: Value = serde_json::from_str(server.call(1, "search_conversations", json!({ "query": "okapi" }))["content"][0]["text"].as_str().unwrap()).unwrap();
    let mut found: Vec<String> =
        page["results"].as_array().unwrap().iter().map(|r| format!("{}|{}", r["source"].as_str().unwrap_or("-"), r["id"].as_str().unwrap())).collect();
    found.sort();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.contains(&"work|same".to_owned()), "{found:?}");
    let listed: Value = serde_json::from_str(server.call(2, "list_conversations", json!({}))["content"][0]["text"].as_str().unwrap()).unwrap();
    assert!(listed["conversations"].as_array().unwrap().iter().any(|c| c["source"] == "work"), "{listed}");
    let read = server.call(3, "read_conversation", json!({ "chat_id": "work:same" }));
    assert!(read["content"][0]["text"].as_str().unwrap().contains("okapi at work"), "{read}");
    // `source` keeps a search, a listing and the overview to one root.
    let text = |v: Value| -> Value { serde_json::from_str(v["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{v}"))).unwrap() };
    let page = text(server.call(4, "search_conversations", json!({ "query": "okapi", "source": "work" })));
    let found: Vec<_> = page["results"].as_array().unwrap().iter().map(|r| (r["source"].as_str().unwrap(), r["id"].as_str().unwrap())).collect();
    assert_eq!(found, [("work", "same")], "{page}");
    assert_eq!(page["total"]["conversations"], 1, "{page}");
    let listed = text(server.call(5, "list_conversations", json!({ "source": "work" })));
    assert_eq!((listed["total"].as_u64(), listed["conversations"][0]["source"].as_str()), (Some(1), Some("work")), "{listed}");
    let overview = text(server.call(6, "conversation_stats", json!({ "source": "work" })));
    let all = text(server.call(7, "conversation_stats", json!({})));
    assert_eq!((overview["total_conversations"].as_u64(), all["total_conversations"].as_u64()), (Some(1), Some(2)), "{overview}\n{all}");
    for (id, tool, args) in [
        (8, "search_conversations", json!({ "query": "okapi", "source": "nowhere" })),
        (9, "list_conversations", json!({ "source": "nowhere" })),
        (10, "conversation_stats", json!({ "source": "nowhere" })),
    ] {
        let refused = server.call(id, tool, args);
        assert_eq!(refused["isError"], true, "{tool}: {refused}");
        let said = refused["content"][0]["text"].as_str().unwrap();
        assert!(said.starts_with("source \"nowhere\" names nothing in the store: the sources are "), "{tool}: {said}");
        assert!(said.contains("work"), "{tool}: {said}");
    }
    let refused = server.call(11, "conversation_stats", json!({ "chat_id": "same", "source": "work" }));
    assert_eq!(refused["isError"], true, "{refused}");
    server.finish();
}

/// Issue 31, item 14: a tool's `limit: 0` means all, as `-n 0` does on the command line (it
/// used to be raised to 1): every conversation a search finds, every conversation listed, every
/// message read, within the answer's `max_chars`.
#[test]
fn limit_zero_means_all_in_every_tool() {
    let setup = setup();
    let mut server = Server::start(&setup.db, &setup.logs);
    let text = |result: Value| -> Value { serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap() };
    let budget = 1_000_000;
    let found = text(server.call(1, "search_conversations", json!({ "query": "the", "limit": 0, "max_chars": budget })));
    let total = found["total"]["conversations"].as_u64().unwrap();
    assert!(total > 1 && found["results"].as_array().unwrap().len() as u64 == total && found["more"].is_null(), "{found}");
    let listed = text(server.call(2, "list_conversations", json!({ "limit": 0, "max_chars": budget })));
    assert_eq!(listed["conversations"].as_array().unwrap().len() as u64, listed["total"].as_u64().unwrap(), "{listed}");
    assert!(listed["total"].as_u64().unwrap() > 1 && listed["more"].is_null(), "{listed}");
    let read = text(server.call(3, "read_conversation", json!({ "chat_id": "2026-07-07-long-conversation", "limit": 0, "max_chars": budget })));
    let shown = cli_json_lines(&setup.db, "2026-07-07-long-conversation");
    assert_eq!(read["messages"].as_array().unwrap().len(), shown, "{read}");
    assert!(shown > 20 && read["more"].is_null());
    server.finish();
}

/// The messages of a conversation's main branch, as `show --json` prints them.
fn cli_json_lines(db: &Path, chat_id: &str) -> usize {
    String::from_utf8(run_ok(sessiondb(db).args(["show", chat_id, "--json"])).stdout).unwrap().lines().count()
}

/// The `sessiondb` binary under test, for a command line without `--db`.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_sessiondb");

/// Issue 32, item 17: a server started where it cannot find its store — as Codex starts one,
/// with `HOME` and `PATH` but not the user's `XDG_DATA_HOME` — answers `initialize` and
/// `tools/list` as ever, and every tool call is a tool error saying what failed, what the
/// server had, and what to change (it used to exit 1 at once, and the agent went on without
/// its tools, unaware). A store made meanwhile is used from the next call, without a restart.
#[test]
fn a_server_that_cannot_open_its_store_answers_and_says_why() {
    let work = tempfile::tempdir().unwrap();
    let (home, data) = (work.path().join("home"), work.path().join("data"));
    std::fs::create_dir_all(&home).unwrap();
    let logs = data.join("gptme/logs");
    conversation(&logs, "mcp-elsewhere", &[("user", "a tapir under XDG_DATA_HOME")]);
    // The user's store, where their shell's XDG_DATA_HOME puts it.
    run_ok(Command::new(BIN).arg("import").env_clear().env("HOME", &home).env("XDG_DATA_HOME", &data));
    assert!(data.join("sessiondb/sessions.db").is_file());
    // The server, with the environment Codex gives its MCP servers.
    let mut server = Server::spawn(Command::new(BIN).arg("mcp").env_clear().env("HOME", &home).env("PATH", "/usr/bin:/bin").env("LANG", "C.UTF-8"));
    let looked_at = home.join(".local/share/sessiondb/sessions.db");
    let says_why = |text: &str| {
        for part in [
            "sessiondb cannot open its store".to_owned(),
            format!("no database at {}", looked_at.display()),
            format!("HOME={}", home.display()),
            "none of SESSIONDB_DB, GPTME_LOGS_HOME, XDG_DATA_HOME, XDG_CONFIG_HOME".to_owned(),
            "`--db PATH` before `mcp`".to_owned(),
            "env_vars = [\"SESSIONDB_DB\", \"GPTME_LOGS_HOME\", \"XDG_DATA_HOME\", \"XDG_CONFIG_HOME\"]".to_owned(),
            "claude mcp add sessiondb -e SESSIONDB_DB=PATH".to_owned(),
        ] {
            assert!(text.contains(&part), "{part:?} in {text}");
        }
    };
    let init = server.ask(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "sessiondb", "{init}");
    says_why(init["result"]["instructions"].as_str().unwrap());
    let listed = server.ask(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let names: Vec<&str> = listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS, "{listed}");
    for (id, (tool, arguments)) in [
        ("search_conversations", json!({ "query": "tapir" })),
        ("read_conversation", json!({ "chat_id": "mcp-elsewhere" })),
        ("list_conversations", json!({})),
        ("conversation_stats", json!({})),
    ]
    .into_iter()
    .enumerate()
    {
        let result = server.call(2 + id as u64, tool, arguments);
        assert_eq!(result["isError"], true, "{tool}: {result}");
        says_why(result["content"][0]["text"].as_str().unwrap());
    }
    assert_eq!(server.ask(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"rm_everything"}}"#)["error"]["code"], -32602);
    assert!(!looked_at.exists(), "nothing made where the server looked");
    // The store made where the server looks: the next call is answered from it.
    run_ok(sessiondb(&looked_at).arg("import").arg(&logs));
    let result = server.call(10, "search_conversations", json!({ "query": "tapir" }));
    assert_eq!(result["isError"], false, "{result}");
    let page: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(ids(page["results"].as_array().unwrap()), ["mcp-elsewhere"], "{page}");
    assert!(server.end().success(), "the store opened in the end");
}

/// The largest answer any call gets (`max_chars` at most), in bytes of UTF-8: under what
/// Claude Code (50,000 characters) and Codex (about 48,000 bytes) pass to their model whole.
pub(crate) const CAP: usize = 40_000;

/// Issue 32, item 18: however large a `max_chars` a call asks for, its answer is at most
/// [`CAP`] bytes — a message of Chinese text, three bytes a character, as well — and the rest
/// comes page by page through `more`, joining up to the whole: a message of 240,000 characters,
/// one of 105,000 Chinese ones, a search finding 150 conversations and a listing of 152.
#[test]
fn no_answer_is_over_what_clients_pass_whole_and_the_rest_is_paged() {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    let ascii: String = (0..40_000).map(|i| ["okapi ", "zebra ", "tapir "][i % 3]).collect();
    let cjk = "数据库会话存储".repeat(15_000);
    conversation(&logs, "mcp-long-ascii", &[("user", &ascii)]);
    conversation(&logs, "mcp-long-cjk", &[("user", &cjk)]);
    for i in 0..150 {
        conversation(&logs, &format!("mcp-many-{i:03}"), &[("user", &format!("a quagga, number {i}, {}", "grazing on the plain ".repeat(12)))]);
    }
    let db = work.path().join("db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let mut server = Server::start(&db, &logs);
    // Every page of `tool` called with `arguments` and the largest budget, following `more`.
    let mut pages = |tool: &str, arguments: Value| -> Vec<Value> {
        let mut pages: Vec<Value> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut arguments = arguments.clone();
            arguments["max_chars"] = json!(1_000_000);
            if let Some(cursor) = &cursor {
                arguments["cursor"] = json!(cursor);
            }
            let result = server.call(pages.len() as u64, tool, arguments.clone());
            assert_eq!(result["isError"], false, "{tool} {arguments}: {result}");
            let text = result["content"][0]["text"].as_str().unwrap();
            assert!(text.len() <= CAP, "{tool} {arguments}: an answer of {} bytes", text.len());
            let page: Value = serde_json::from_str(text).unwrap();
            cursor = page["more"].as_str().map(str::to_owned);
            pages.push(page);
            if cursor.is_none() || pages.len() > 100 {
                return pages;
            }
        }
    };
    for (id, text) in [("mcp-long-ascii", &ascii), ("mcp-long-cjk", &cjk)] {
        let read = pages("read_conversation", json!({ "chat_id": id }));
        assert!(read.len() > text.len() / CAP, "{id}: {} pages", read.len());
        let joined: String = read.iter().flat_map(|p| p["messages"].as_array().unwrap()).map(|m| m["content"].as_str().unwrap()).collect();
        assert!(joined == *text, "{id}: the pages join up to the message");
    }
    let found = pages("search_conversations", json!({ "query": "quagga", "limit": 0 }));
    assert!(found.len() > 1, "150 conversations are found, more than one page holds");
    let cli = cli_json(&db, &["search", "--json", "-n", "0", "quagga"]);
    let joined: Vec<Value> = found.iter().flat_map(|p| p["results"].as_array().unwrap().clone()).collect();
    assert_eq!(joined.len(), 150);
    assert_eq!(search_rows(&joined), search_rows(cli["results"].as_array().unwrap()), "the pages join up to search --json");
    let listed = pages("list_conversations", json!({ "limit": 0 }));
    assert!(listed.len() > 1, "152 conversations are listed, more than one page holds");
    let joined: Vec<Value> = listed.iter().flat_map(|p| p["conversations"].as_array().unwrap().clone()).collect();
    assert_eq!(Value::Array(joined), cli_json(&db, &["list", "--json", "-n", "0"]), "the pages join up to list --json");
    server.finish();
}

/// Issue 32, item 18: an integer argument written as a whole-number float (`5.0`, an integer
/// to JSON Schema, and what Codex passes on when the model writes it) is that integer; a
/// fraction is refused, saying which argument and what it should be.
#[test]
fn integer_arguments_written_as_whole_floats_are_taken_and_fractions_refused() {
    let setup = setup();
    let mut server = Server::start(&setup.db, &setup.logs);
    for (tool, as_integers, as_floats) in [
        ("list_conversations", json!({ "limit": 5 }), json!({ "limit": 5.0 })),
        ("search_conversations", json!({ "query": "borrow", "limit": 2, "matches": 1 }), json!({ "query": "borrow", "limit": 2.0, "matches": 1e0 })),
        (
            "read_conversation",
            json!({ "chat_id": "mcp-rust", "start": 1, "limit": 1, "max_chars": 600 }),
            json!({ "chat_id": "mcp-rust", "start": 1.0, "limit": 1.0, "max_chars": 600.0 }),
        ),
    ] {
        let expected = server.call(1, tool, as_integers);
        assert_eq!(expected["isError"], false, "{tool}: {expected}");
        let got = server.call(2, tool, as_floats.clone());
        assert_eq!(got, expected, "{tool} {as_floats}");
    }
    let refused = server.call(3, "list_conversations", json!({ "limit": 5.5 }));
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["content"][0]["text"], "list_conversations: argument \"limit\" is 5.5, expected a whole number, 0 or more");
    server.finish();
}
