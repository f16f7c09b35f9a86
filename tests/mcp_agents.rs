//! Issue 32, items 17 and 18, with the agents themselves: Claude Code and Codex (the versions
//! `tools/agents/package.json` pins, installed by `tools/oracle/setup-agents.sh`) each run
//! offline against a scripted model of ours (`tools/oracle/model_server.py`) that calls every
//! sessiondb tool — a search finding more than a page holds, a listing with `limit: 5.0`, a
//! read of a Chinese message too long for one page and its next page through `more`, the
//! statistics — and then answers in text. The agents are set up by the README's own commands
//! (`claude mcp add …`, `codex mcp add …` and the line of the Codex entry added by hand), read
//! from it, with the user's store and logs under `XDG_DATA_HOME` and `sessiondb` on `PATH`.
//! What reached the model must be, byte for byte, what the server answers to the same calls
//! asked of `sessiondb mcp` directly (so neither replaced nor cut by the client), no error,
//! within [`CAP`], and agree with the command line's `--json` on the same store. With the
//! code before item 18, Claude Code hands the model a 2 KB preview of the search's 79 KB and
//! Codex 48 KB of it, cut inside a string. Codex with only what `codex mcp add` writes (no
//! `env_vars`) reaches a server that tells the model why it cannot answer; before item 17 the
//! server exited and the model had no tools. Each README command that names the store
//! (`SESSIONDB_DB` or `--db`) lets each agent find it with `XDG_DATA_HOME` unset.
//!
//! Offline: the model server is the only address the agents are given; `HTTPS_PROXY` and
//! `HTTP_PROXY` point at it too, and it refuses (and records) every request for another host.
//! Where the agents are not installed the tests are skipped with a message, except under CI.

use crate::common;
use crate::mcp::{cli_json, conversation, search_rows, Server, BIN, CAP};

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::run_ok;
use serde_json::{json, Value};

/// The scripted calls: each tool once, and the read's next page.
fn script() -> Value {
    json!({
        "calls": [
            { "tool": "search_conversations", "arguments": { "query": "quagga", "limit": 0, "max_chars": 1_000_000 } },
            { "tool": "list_conversations", "arguments": { "limit": 5.0 } },
            { "tool": "read_conversation", "arguments": { "chat_id": "mcp-agents-cjk", "max_chars": 1_000_000 } },
            { "tool": "read_conversation", "arguments": { "chat_id": "mcp-agents-cjk", "cursor": "$more", "max_chars": 1_000_000 } },
            { "tool": "conversation_stats", "arguments": {} },
        ],
        "final": "All five answers read.",
    })
}

/// The installed agent `name` (`claude`, `codex`), or why it cannot run here.
fn agent(name: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/agents/node_modules/.bin").join(name);
    match Command::new(&path).arg("--version").output() {
        Ok(out) if out.status.success() => Ok(path),
        Ok(out) => Err(format!("{} --version failed: {}", path.display(), String::from_utf8_lossy(&out.stderr))),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The agent `name`, or `None` (the test skipped, saying why) where it is not installed; under
/// CI, which installs it, its absence fails the test ([`common::needed_or_skip`]).
fn installed(name: &str, test: &str) -> Option<PathBuf> {
    common::needed_or_skip(test, agent(name), "tools/oracle/setup-agents.sh")
}

/// A user's machine: a home, `XDG_DATA_HOME` holding gptme's logs and sessiondb's store (made
/// by `sessiondb import` with no `--db`), a project to work in, `sessiondb` on `PATH`, and the
/// scripted model listening.
struct Machine {
    work: tempfile::TempDir,
    home: PathBuf,
    data: PathBuf,
    project: PathBuf,
    path: String,
    model: Model,
}

/// The scripted model server, killed when dropped.
struct Model {
    child: std::process::Child,
    port: u16,
    record: PathBuf,
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Model {
    fn start(dir: &Path, script: &Value) -> Model {
        let (script_path, record) = (dir.join("script.json"), dir.join("record.jsonl"));
        std::fs::write(&script_path, script.to_string()).unwrap();
        let mut child = Command::new("python3")
            .arg(common::tool("model_server.py"))
            .arg(&script_path)
            .arg(&record)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the model server printed {line:?}, not its port"));
        Model { child, port, record }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every event recorded so far.
    fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.record).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

impl Machine {
    fn new(script: &Value) -> Machine {
        let work = tempfile::tempdir().unwrap();
        let (home, data, project, bin) = (work.path().join("home"), work.path().join("data"), work.path().join("project"), work.path().join("bin"));
        for dir in [&home, &data, &project, &bin] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink(BIN, bin.join("sessiondb")).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let logs = data.join("gptme/logs");
        std::fs::create_dir_all(data.join("gptme")).unwrap();
        run_ok(Command::new("cp").arg("-r").arg(common::fixtures()).arg(&logs));
        // 150 conversations a search finds (more than a page holds), and a message of 30,000
        // Chinese characters: 90,000 bytes, over what either client passes whole.
        for i in 0..150 {
            conversation(&logs, &format!("mcp-agents-{i:03}"), &[("user", &format!("a quagga, number {i}, {}", "grazing on the plain ".repeat(12)))]);
        }
        conversation(&logs, "mcp-agents-cjk", &[("user", &"数据库会话存储日本語".repeat(3_000))]);
        let machine = Machine { model: Model::start(work.path(), script), work, home, data, project, path };
        run_ok(machine.user(BIN).arg("import"));
        assert!(machine.store().is_file(), "the store is under XDG_DATA_HOME");
        machine
    }

    /// The store, where `sessiondb` puts it without `--db`.
    fn store(&self) -> PathBuf {
        self.data.join("sessiondb/sessions.db")
    }

    /// `program` run as the user's shell runs it: their home, `XDG_DATA_HOME` and `PATH`, in the
    /// project, and offline but for the scripted model.
    fn user(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env_clear().current_dir(&self.project).env("HOME", &self.home).env("XDG_DATA_HOME", &self.data).env("PATH", &self.path).env("LANG", "C.UTF-8");
        for proxy in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"] {
            command.env(proxy, self.model.url());
        }
        command.env("NO_PROXY", "127.0.0.1,localhost").env("no_proxy", "127.0.0.1,localhost");
        command
    }

    /// Runs `command` to its end (at most five minutes), its output kept in files of the work
    /// directory; its exit status, standard output and standard error.
    fn run(&self, command: &mut Command, name: &str) -> (std::process::ExitStatus, String, String) {
        let (out, err) = (self.work.path().join(format!("{name}.out")), self.work.path().join(format!("{name}.err")));
        let child = command.stdin(Stdio::null()).stdout(std::fs::File::create(&out).unwrap()).stderr(std::fs::File::create(&err).unwrap()).spawn().unwrap();
        let status = common::output_within(child, Duration::from_secs(300), name).status;
        (status, std::fs::read_to_string(out).unwrap(), std::fs::read_to_string(err).unwrap())
    }
}

/// The MCP section of the README.
fn readme_mcp() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find("### For agents: `sessiondb mcp`").expect("the README's MCP section");
    let end = start + readme[start..].find("\n### gptme's web UI").expect("the section after it");
    readme[start..end].to_owned()
}

/// The place of a store in the README's set-up commands that name one.
const README_STORE: &str = "/path/to/sessions.db";

/// The README's set-up commands for `agent` (`claude`, `codex`), each split into words: the
/// one for the store where `sessiondb` finds it, then those that name the store
/// ([`README_STORE`]).
fn readme_commands(agent: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let section = readme_mcp();
    let prefix = format!("    {agent} mcp add ");
    let (naming, plain): (Vec<Vec<String>>, Vec<Vec<String>>) = section
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .partition(|words| words.iter().any(|w| w.contains(README_STORE)));
    assert_eq!(plain.len(), 1, "one `{agent} mcp add` line without a store's path in the README: {plain:?}");
    assert_eq!(naming.len(), 2, "two `{agent} mcp add` lines naming the store in the README: {naming:?}");
    (plain.into_iter().next().unwrap(), naming)
}

/// The README's entry for Codex's `config.toml`.
fn readme_codex_entry() -> String {
    let section = readme_mcp();
    let codex = section.find("**Codex**").expect("the README's Codex set-up");
    let block = &section[codex..];
    let start = block.find("```toml\n").expect("a toml block for Codex") + "```toml\n".len();
    let end = start + block[start..].find("```").unwrap();
    block[start..end].to_owned()
}

/// The text of a tool result as the model received it, and whether the agent marked it an
/// error: Claude Code sends `{"content": [text blocks], "is_error": …}`; Codex the call's output,
/// a "Wall time" line and then the text.
fn received(agent: &str, raw: &Value) -> (String, bool) {
    let texts = |blocks: &Value, kind: &str| -> Vec<String> {
        blocks
            .as_array()
            .unwrap_or_else(|| panic!("{agent}: content blocks, not {blocks}"))
            .iter()
            .map(|b| {
                assert_eq!(b["type"], kind, "{agent}: {b}");
                b["text"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    match agent {
        "claude" => match &raw["content"] {
            // What Claude Code puts in place of a result too large for it (a preview and a path).
            Value::String(text) => (text.clone(), raw["is_error"] == true),
            blocks => {
                let parts = texts(blocks, "text");
                assert_eq!(parts.len(), 1, "one text block: {raw}");
                (parts[0].clone(), raw["is_error"] == true)
            }
        },
        _ => match raw {
            Value::String(text) => (text.clone(), false),
            _ => {
                let parts = texts(raw, "input_text");
                assert!(parts.len() == 2 && parts[0].starts_with("Wall time: "), "a time and a text: {raw}");
                (parts[1].clone(), false)
            }
        },
    }
}

/// What `sessiondb mcp` answers to the script's calls on the machine's store, asked directly:
/// each call's text, an error's included (a cursor argument taken from the previous answer of
/// the same tool).
fn answered_directly(machine: &Machine) -> Vec<(String, bool)> {
    let mut server = Server::spawn(machine.user(BIN).arg("mcp"));
    let mut texts: Vec<(String, String, bool)> = Vec::new();
    for (i, call) in script()["calls"].as_array().unwrap().iter().enumerate() {
        let tool = call["tool"].as_str().unwrap();
        let mut arguments = call["arguments"].clone();
        for value in arguments.as_object_mut().unwrap().values_mut() {
            if value == "$more" {
                let (_, previous, _) = texts.iter().rev().find(|(t, _, _)| t == tool).expect("an earlier page");
                *value = serde_json::from_str::<Value>(previous).map_or(Value::Null, |answer| answer["more"].clone());
            }
        }
        let result = server.call(i as u64, tool, arguments);
        texts.push((tool.to_owned(), result["content"][0]["text"].as_str().unwrap().to_owned(), result["isError"] == true));
    }
    server.finish();
    texts.into_iter().map(|(_, text, error)| (text, error)).collect()
}

/// The script's results as they reached the model, in order: each call's tool and text, and
/// whether the agent marked it an error.
fn results(agent: &str, model: &Model) -> Vec<(String, String, bool)> {
    let events = model.events();
    let results: Vec<(String, String, bool)> = events
        .iter()
        .filter(|e| e["event"] == "tool_result")
        .map(|e| {
            let (text, error) = received(agent, &e["content"]);
            (e["tool"].as_str().unwrap().to_owned(), text, error)
        })
        .collect();
    let outside: Vec<&Value> = events.iter().filter(|e| e["event"] == "connect").collect();
    eprintln!("{agent}: {} requests to the model; refused requests for other hosts: {outside:?}", events.iter().filter(|e| e["event"] == "request").count());
    results
}

/// Checks what reached the model: the script's tools in order, each result no error, byte for
/// byte what the server answers, within [`CAP`], and agreeing with the command line.
fn check_results(agent: &str, machine: &Machine, got: &[(String, String, bool)]) {
    let calls: Vec<String> = script()["calls"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap().to_owned()).collect();
    let tools: Vec<String> = got.iter().map(|(t, _, _)| t.clone()).collect();
    assert_eq!(tools, calls, "{agent} called each tool as the model asked");
    let direct = answered_directly(machine);
    for ((tool, text, error), (sent, refused)) in got.iter().zip(&direct) {
        assert!(!error && !refused, "{agent}: {tool} answered with an error: {text}");
        assert!(
            text == sent,
            "{agent}: {tool}'s answer reached the model changed ({} bytes of {}): {}",
            text.len(),
            sent.len(),
            text.chars().take(300).collect::<String>()
        );
        assert!(text.len() <= CAP, "{agent}: {tool}'s answer of {} bytes", text.len());
    }
    let answers: Vec<Value> = got.iter().map(|(_, text, _)| serde_json::from_str(text).unwrap()).collect();
    let db = machine.store();
    // The search: a first page of search --json's results, more than a page in all.
    let cli = cli_json(&db, &["search", "--json", "-n", "0", "quagga"]);
    let (page, all) = (answers[0]["results"].as_array().unwrap(), cli["results"].as_array().unwrap());
    assert!(page.len() > 10 && page.len() < all.len() && answers[0]["more"] == json!(page.len().to_string()), "{agent}: a page of {} of {}", page.len(), all.len());
    assert_eq!(search_rows(page), search_rows(&all[..page.len()]), "{agent}: the search is search --json's");
    assert_eq!(answers[0]["total"], cli["total"]);
    // The listing, of 5.0 conversations.
    assert_eq!(answers[1]["conversations"], cli_json(&db, &["list", "--json", "-n", "5"]), "{agent}: the listing is list --json's");
    // The read, two pages of the message that show --json holds.
    let shown: Value =
        serde_json::from_str(String::from_utf8(run_ok(machine.user(BIN).args(["show", "mcp-agents-cjk", "--json"])).stdout).unwrap().lines().next().unwrap())
            .unwrap();
    let whole = shown["content"].as_str().unwrap();
    let (first, second) = (&answers[2]["messages"][0], &answers[3]["messages"][0]);
    assert_eq!((&first["cut"], &second["content_from"]), (&json!(true), &json!(first["content"].as_str().unwrap().chars().count())), "{agent}: {first}");
    let read = format!("{}{}", first["content"].as_str().unwrap(), second["content"].as_str().unwrap());
    assert!(whole.starts_with(&read) && read.chars().count() > 20_000, "{agent}: the pages are the message's beginning");
    // The statistics.
    assert_eq!(answers[4], cli_json(&db, &["stats", "--json"]), "{agent}: conversation_stats is stats --json");
}

/// The prompt the agents are run with (the scripted model does not read it).
const PROMPT: &str = "What did I do in earlier sessions? Look it up with the sessiondb tools.";

/// `command` (a README set-up command, `claude mcp add …` or `codex mcp add …`) run as the
/// user runs it, with the installed agent `program` for its first word and `store` for the
/// README's [`README_STORE`].
fn set_up(machine: &Machine, program: &Path, command: &[String], store: &Path) {
    let mut add = machine.user(program);
    add.args(command[1..].iter().map(|w| w.replace(README_STORE, &store.to_string_lossy())));
    let (status, out, err) = machine.run(&mut add, &format!("{}-mcp-add", command[0]));
    assert!(status.success(), "{command:?}: {out}{err}");
}

/// `claude -p` run as the user runs it (without `XDG_DATA_HOME` where `data` is false),
/// against the scripted model; its JSON outcome.
fn claude_print(machine: &Machine, claude: &Path, data: bool) -> Value {
    let mut run = machine.user(claude);
    if !data {
        run.env_remove("XDG_DATA_HOME");
    }
    run.args(["-p", PROMPT, "--allowedTools", "mcp__sessiondb", "--output-format", "json"])
        .env("ANTHROPIC_BASE_URL", machine.model.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-offline")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    let (status, out, err) = machine.run(&mut run, "claude");
    assert!(status.success(), "claude -p: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"))
}

/// Claude Code, set up by the README's `claude mcp add` line, calls every tool through
/// `sessiondb mcp` and each answer reaches the model whole.
#[test]
fn claude_code_uses_every_tool_and_each_answer_reaches_the_model_whole() {
    let Some(claude) = installed("claude", "claude_code_uses_every_tool_and_each_answer_reaches_the_model_whole") else { return };
    let machine = Machine::new(&script());
    set_up(&machine, &claude, &readme_commands("claude").0, &machine.store());
    let outcome = claude_print(&machine, &claude, true);
    assert_eq!(outcome["result"], script()["final"], "{outcome}");
    let got = results("claude", &machine.model);
    check_results("claude", &machine, &got);
}

/// Codex's `config.toml` before any server is added: the scripted model as its provider.
fn codex_provider(machine: &Machine) -> String {
    let dir = machine.home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    // gpt-5.5: a model Codex calls tools of directly (its newer ones call them from JavaScript,
    // "code mode"), with the truncation policy of all its models (10,000 tokens).
    let provider = format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n",
        machine.model.url()
    );
    std::fs::write(dir.join("config.toml"), &provider).unwrap();
    provider
}

/// Codex's `config.toml`.
fn codex_config(machine: &Machine) -> PathBuf {
    machine.home.join(".codex/config.toml")
}

/// `codex exec` run as the user runs it (without `XDG_DATA_HOME` where `data` is false),
/// against the scripted model; its standard output, the model's last message.
fn codex_exec(machine: &Machine, codex: &Path, data: bool) -> String {
    let mut run = machine.user(codex);
    if !data {
        run.env_remove("XDG_DATA_HOME");
    }
    run.args(["exec", "--skip-git-repo-check", PROMPT]);
    let (status, out, err) = machine.run(&mut run, "codex");
    assert!(status.success(), "codex exec: {out}{err}");
    out
}

/// Codex, set up by the README (its `codex mcp add` line, which must write the first lines of
/// its entry, and the entry's `env_vars` line added by hand), calls every tool through
/// `sessiondb mcp` and each answer reaches the model whole; `limit: 5.0`, as the model wrote it,
/// is taken.
#[test]
fn codex_uses_every_tool_and_each_answer_reaches_the_model_whole() {
    let Some(codex) = installed("codex", "codex_uses_every_tool_and_each_answer_reaches_the_model_whole") else { return };
    let machine = Machine::new(&script());
    codex_provider(&machine);
    set_up(&machine, &codex, &readme_commands("codex").0, &machine.store());
    let entry = readme_codex_entry();
    let (written, by_hand) = entry.trim_end().rsplit_once('\n').expect("an entry of several lines");
    assert!(by_hand.starts_with("env_vars = "), "the entry's last line gives env_vars: {by_hand}");
    let mut config = std::fs::read_to_string(codex_config(&machine)).unwrap();
    assert!(config.trim_end().ends_with(written), "`codex mcp add` wrote the README's entry but its last line:\n{config}");
    config = format!("{}\n{by_hand}\n", config.trim_end());
    assert!(config.ends_with(&entry));
    std::fs::write(codex_config(&machine), config).unwrap();
    let out = codex_exec(&machine, &codex, true);
    assert_eq!(out.trim(), script()["final"], "codex's last message is the model's");
    let got = results("codex", &machine.model);
    check_results("codex", &machine, &got);
}

/// Codex with only what the README's `codex mcp add` line writes (no `env_vars`; the entry the
/// README gave before): the server, started without `XDG_DATA_HOME`, finds no store, and the
/// model is told so, with what to change, instead of finding no tools.
#[test]
fn codex_without_the_variables_tells_the_model_why_the_store_is_missing() {
    let Some(codex) = installed("codex", "codex_without_the_variables_tells_the_model_why_the_store_is_missing") else { return };
    let script = json!({ "calls": [{ "tool": "search_conversations", "arguments": { "query": "quagga" } }], "final": "No store." });
    let machine = Machine::new(&script);
    codex_provider(&machine);
    set_up(&machine, &codex, &readme_commands("codex").0, &machine.store());
    assert!(!std::fs::read_to_string(codex_config(&machine)).unwrap().contains("env_vars"));
    codex_exec(&machine, &codex, true);
    let events = machine.model.events();
    let result = events.iter().find(|e| e["event"] == "tool_result").unwrap_or_else(|| panic!("the model called search_conversations: {events:?}"));
    let text = serde_json::to_string(&result["content"]).unwrap();
    let looked_at = machine.home.join(".local/share/sessiondb/sessions.db");
    for part in ["sessiondb cannot open its store", &format!("no database at {}", looked_at.display()), "XDG_DATA_HOME", "env_vars"] {
        assert!(text.contains(part), "{part:?} in what the model got: {text}");
    }
}

/// The script of a set-up that names the store: one listing.
fn listing_script() -> Value {
    json!({ "calls": [{ "tool": "list_conversations", "arguments": { "limit": 5 } }], "final": "Listed." })
}

/// Checks that the listing of [`listing_script`] reached the model as the server answered it:
/// `list --json`'s five rows.
fn check_listing(agent: &str, command: &[String], machine: &Machine) {
    let got = results(agent, &machine.model);
    assert_eq!(got.len(), 1, "{agent}, set up by {command:?}: one listing reached the model: {got:?}");
    assert!(!got[0].2, "{agent}, set up by {command:?}: the listing is an error: {}", got[0].1);
    let answer: Value = serde_json::from_str(&got[0].1).unwrap_or_else(|e| panic!("{agent}, set up by {command:?}: {e}: {}", got[0].1));
    assert_eq!(answer["conversations"], cli_json(&machine.store(), &["list", "--json", "-n", "5"]), "{agent}, set up by {command:?}");
}

/// Claude Code, set up by each README line that names the store (`-e SESSIONDB_DB=…`, `--db`),
/// finds it though it runs without the `XDG_DATA_HOME` that says where it is.
#[test]
fn claude_code_set_up_naming_the_store_finds_it_without_the_variable() {
    let Some(claude) = installed("claude", "claude_code_set_up_naming_the_store_finds_it_without_the_variable") else { return };
    for command in readme_commands("claude").1 {
        let machine = Machine::new(&listing_script());
        set_up(&machine, &claude, &command, &machine.store());
        let outcome = claude_print(&machine, &claude, false);
        assert_eq!(outcome["result"], listing_script()["final"], "{command:?}: {outcome}");
        check_listing("claude", &command, &machine);
    }
}

/// Codex, set up by each README line that names the store (`--env SESSIONDB_DB=…`, `--db`),
/// finds it without `env_vars` and without `XDG_DATA_HOME`.
#[test]
fn codex_set_up_naming_the_store_finds_it_without_the_variables() {
    let Some(codex) = installed("codex", "codex_set_up_naming_the_store_finds_it_without_the_variables") else { return };
    for command in readme_commands("codex").1 {
        let machine = Machine::new(&listing_script());
        codex_provider(&machine);
        set_up(&machine, &codex, &command, &machine.store());
        let out = codex_exec(&machine, &codex, false);
        assert_eq!(out.trim(), listing_script()["final"], "{command:?}: codex's last message is the model's");
        check_listing("codex", &command, &machine);
    }
}
