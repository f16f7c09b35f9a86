//! `sessiondb secrets`: credentials planted by the test (random values in the real formats, never
//! real keys) in user messages, tool output and attached files are each found, in the right
//! place and of the right kind, and shown by their format's prefix only (no output holds a
//! planted secret); and a corpus of what looks like secrets but is not (hashes, UUIDs, base64
//! images, code that reads keys from the environment, placeholders) gives no finding. Every
//! surface that shows stored text (each command, gptme's MCP client on `mcp`, `serve`'s API and
//! the stock web UI in Chromium) shows them masked, and as they are with `--show-secrets`; an
//! edit from the web UI keeps them.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::crash::Rng as Gen;
use common::{run_ok, sessiondb};
use serde_json::{json, Value};

/// Planted values from the tests' seeded generator, so that a failure replays.
impl Gen {
    /// `n` characters of `alphabet`, with at least one digit and one letter when it has both.
    fn of(&mut self, alphabet: &str, n: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        loop {
            let s: String = (0..n).map(|_| chars[(self.next() % chars.len() as u64) as usize]).collect();
            let both = chars.iter().any(char::is_ascii_digit) && chars.iter().any(char::is_ascii_alphabetic);
            if !both || (s.chars().any(|c| c.is_ascii_digit()) && s.chars().any(|c| c.is_ascii_alphabetic())) {
                return s;
            }
        }
    }
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_DIGITS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const BASE64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// One planted credential of each family: (kind, the secret, the text around it).
fn planted(g: &mut Gen) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    let mut plant = |kind: &'static str, secret: String, around: &dyn Fn(&str) -> String| {
        let text = around(&secret);
        out.push((kind, secret, text));
    };
    plant("AWS access key id", format!("AKIA{}", g.of(UPPER_DIGITS, 16)), &|s| format!("export AWS_ACCESS_KEY_ID={s}"));
    plant("AWS secret access key", g.of(BASE64, 40), &|s| format!("aws_secret_access_key = {s}\nregion = eu-west-1"));
    plant("GitHub token", format!("ghp_{}", g.of(ALNUM, 36)), &|s| format!("git clone https://github.com/acme/app (token {s})"));
    plant("GitHub token", format!("github_pat_{}", g.of(&format!("{ALNUM}_"), 82)), &|s| format!("GH_TOKEN: {s}"));
    plant("GitLab token", format!("glpat-{}", g.of(URLSAFE, 20)), &|s| format!("curl --header \"PRIVATE-TOKEN: {s}\" https://gitlab.example.com/api/v4/projects"));
    plant("Anthropic API key", format!("sk-ant-api03-{}AA", g.of(URLSAFE, 93)), &|s| format!("ANTHROPIC_API_KEY=\"{s}\""));
    plant("OpenAI API key", format!("sk-proj-{}T3BlbkFJ{}", g.of(URLSAFE, 74), g.of(URLSAFE, 74)), &|s| format!("client = OpenAI(api_key=\"{s}\")"));
    plant("Slack token", format!("xoxb-{}-{}-{}", g.of("0123456789", 12), g.of("0123456789", 13), g.of(ALNUM, 24)), &|s| format!("SLACK_BOT={s}"));
    plant("Slack webhook", format!("https://hooks.slack.com/services/T{}/B{}/{}", g.of(UPPER_DIGITS, 8), g.of(UPPER_DIGITS, 10), g.of(ALNUM, 24)), &|s| {
        format!("POST to {s} failed")
    });
    plant("Stripe key", format!("sk_live_{}", g.of(ALNUM, 24)), &|s| format!("stripe.api_key = '{s}'"));
    plant("Google API key", format!("AIza{}", g.of(URLSAFE, 35)), &|s| format!("https://maps.googleapis.com/maps/api/geocode/json?key={s}&address=x"));
    plant("Hugging Face token", format!("hf_{}", g.of(ALNUM, 34)), &|s| format!("huggingface-cli login --token {s}"));
    plant("npm token", format!("npm_{}", g.of(ALNUM, 36)), &|s| format!("//registry.npmjs.org/:_authToken={s}"));
    plant("PyPI token", format!("pypi-AgEIcHlwaS5vcmc{}", g.of(URLSAFE, 60)), &|s| format!("password = {s}"));
    plant("SendGrid key", format!("SG.{}.{}", g.of(URLSAFE, 22), g.of(URLSAFE, 43)), &|s| format!("SENDGRID={s}"));
    plant("JSON web token", format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", g.of(URLSAFE, 40), g.of(URLSAFE, 43)), &|s| format!("Authorization: Bearer {s}"));
    plant("password in a URL", g.of(ALNUM, 14), &|s| format!("DATABASE_URL=postgres://app:{s}@db.internal:5432/app"));
    let body: Vec<String> = (0..4).map(|_| g.of(BASE64, 64)).collect();
    plant("private key", format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----", body.join("\n")), &|s| {
        format!("cat ~/.ssh/id_ed25519\n{s}\n")
    });
    plant("secret assignment", g.of(ALNUM, 24), &|s| format!("settings.py:\nSESSION_SECRET_KEY = '{s}'"));
    out
}

/// Text that looks like credentials and is not.
fn decoys(g: &mut Gen) -> Vec<String> {
    let hex = "0123456789abcdef";
    let mut out = vec![
        "let key = std::env::var(\"OPENAI_API_KEY\")?;".to_owned(),
        "api_key = os.environ[\"ANTHROPIC_API_KEY\"]".to_owned(),
        "password: ${DB_PASSWORD}".to_owned(),
        "Authorization: Bearer <your-token-here>".to_owned(),
        "AWS_SECRET_ACCESS_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".to_owned(),
        "postgres://user:password@localhost:5432/db".to_owned(),
        "export GITHUB_TOKEN=$(gh auth token)".to_owned(),
        "The token budget is 200000 and the secret to speed is caching.".to_owned(),
        "fn secret_key_len(token_count: usize) -> usize { token_count * 2 }".to_owned(),
        "ssh-keygen -t ed25519 -f ~/.ssh/id_ed25519 # writes -----BEGIN OPENSSH PRIVATE KEY----- files".to_owned(),
    ];
    for _ in 0..20 {
        out.push(format!("sha256: {}", g.of(hex, 64)));
        out.push(format!("commit {}", g.of(hex, 40)));
        let u = g.of(hex, 32);
        out.push(format!("request id {}-{}-{}-{}-{}", &u[..8], &u[8..12], &u[12..16], &u[16..20], &u[20..]));
        out.push(format!("![chart](data:image/png;base64,{}==)", g.of(BASE64, 2000)));
        out.push(format!("integrity=\"sha512-{}\"", g.of(BASE64, 86)));
    }
    out
}

fn append(db: &Path, logs: &Path, chat: &str, role: &str, content: &str, file: Option<&Path>) {
    let mut cmd = sessiondb(db);
    cmd.env("GPTME_LOGS_HOME", logs).args(["append", "--role", role, "--content", content]);
    if let Some(file) = file {
        cmd.arg("--file").arg(file);
    }
    run_ok(cmd.arg(chat));
}

/// A store with every planted credential in one conversation (in turn a user message, a
/// tool's output and an attached file) and the decoys in another.
struct Planted {
    work: tempfile::TempDir,
    db: std::path::PathBuf,
    logs: std::path::PathBuf,
    /// (kind, secret, whether it is in an attached file), as planted.
    expected: Vec<(&'static str, String, bool)>,
    /// The planted texts (where each secret stands).
    texts: Vec<String>,
    decoys: Vec<String>,
}

const SECRETS_CHAT: &str = "2026-12-06-secrets";
const DECOYS_CHAT: &str = "2026-12-06-decoys";

fn planted_store() -> Planted {
    let work = tempfile::tempdir().unwrap();
    let (db, logs) = (work.path().join("store.db"), work.path().join("logs"));
    fs::create_dir(&logs).unwrap();
    let mut g = Gen(0x5ec2_e75e_ed00_0001);
    let planted = planted(&mut g);
    let decoys = decoys(&mut g);
    run_ok(sessiondb(&db).env("GPTME_LOGS_HOME", &logs).args(["new", SECRETS_CHAT]));
    run_ok(sessiondb(&db).env("GPTME_LOGS_HOME", &logs).args(["new", DECOYS_CHAT]));
    // In turn: a user message, a tool's output (a system message), an attached file.
    let mut expected = Vec::new();
    for (i, (kind, secret, text)) in planted.iter().enumerate() {
        match i % 3 {
            0 => append(&db, &logs, SECRETS_CHAT, "user", text, None),
            1 => append(&db, &logs, SECRETS_CHAT, "system", &format!("Ran command:\n```stdout\n{text}\n```"), None),
            _ => {
                let file = work.path().join(format!("notes-{i}.txt"));
                fs::write(&file, format!("some notes\n{text}\nmore notes\n")).unwrap();
                append(&db, &logs, SECRETS_CHAT, "user", "see the attached notes", Some(&file));
            }
        }
        expected.push((*kind, secret.clone(), i % 3 == 2));
    }
    for decoy in &decoys {
        append(&db, &logs, DECOYS_CHAT, "assistant", decoy, None);
    }
    let texts = planted.into_iter().map(|(_, _, text)| text).collect();
    Planted { work, db, logs, expected, texts, decoys }
}

#[test]
fn every_planted_credential_is_found_where_it_is_and_shown_by_its_prefix_only() {
    let planted = planted_store();
    let Planted { db, expected, decoys, .. } = &planted;
    let out = run_ok(sessiondb(db).args(["secrets", "--json"]));
    let text = String::from_utf8(out.stdout).unwrap();
    let report: Value = serde_json::from_str(&text).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let of = |chat: &str| findings.iter().filter(|f| f["id"] == chat).collect::<Vec<_>>();
    // Every planted one, of its kind, in a message or in a file as planted.
    let found = of(SECRETS_CHAT);
    let mut kinds: Vec<&str> = found.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    let mut want: Vec<&str> = expected.iter().map(|(k, _, _)| *k).collect();
    kinds.sort();
    want.sort();
    assert_eq!(kinds, want, "{text}");
    assert_eq!(found.iter().filter(|f| f.get("file").is_some()).count(), expected.iter().filter(|(_, _, file)| *file).count());
    // The decoys: no finding (a false-positive rate of 0 over these).
    let false_positives = of(DECOYS_CHAT);
    println!("{} planted found of {}; {} findings among {} decoys", found.len(), expected.len(), false_positives.len(), decoys.len());
    assert!(false_positives.is_empty(), "{false_positives:?}");
    // No output shows a planted secret, nor more than a few characters of one.
    let plain = String::from_utf8(run_ok(sessiondb(db).arg("secrets")).stdout).unwrap();
    for (kind, secret, _) in expected {
        let tail = &secret[secret.len() - 12..];
        assert!(!text.contains(tail) && !plain.contains(tail), "{kind}: part of the secret shown");
    }
    assert!(plain.contains(&format!("{} credentials", expected.len())), "{plain}");
}

/// What no surface may show of a secret: any of it past its format's public prefix. A surface
/// passes when no secret's last twelve characters, nor twelve from its middle, are in what it
/// printed (the secrets are ASCII).
fn leaked<'a>(planted: &'a Planted, shown: &str) -> Vec<&'a str> {
    let shows = |secret: &str| {
        let (end, middle) = (secret.len(), (secret.len() - 12) / 2);
        shown.contains(&secret[end - 12..]) || shown.contains(&secret[middle..middle + 12])
    };
    planted.expected.iter().filter(|(_, secret, _)| shows(secret)).map(|(kind, _, _)| *kind).collect()
}

fn stdout_of(db: &Path, args: &[&str]) -> String {
    String::from_utf8(run_ok(sessiondb(db).args(args)).stdout).unwrap()
}

/// The first word of a planted text: what a search finds its message by.
fn first_word(text: &str) -> &str {
    text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').find(|w| w.len() >= 3).unwrap()
}

#[test]
fn every_surface_of_the_command_line_masks_them_and_show_secrets_shows_them() {
    let planted = planted_store();
    let db = &planted.db;
    // A last message whose preview (100 characters) cuts a token short.
    let cut = format!("{} ghp_{}", "word ".repeat(18), "Qw9".repeat(12));
    append(db, &planted.logs, SECRETS_CHAT, "assistant", &cut, None);
    let in_messages: Vec<&(&str, String, bool)> = planted.expected.iter().filter(|(_, _, file)| !file).collect();
    let mut surfaces: Vec<(String, String)> = Vec::new();
    let mut shown_plainly = String::new();
    let mut run = |args: Vec<&str>| {
        let masked = stdout_of(db, &args);
        let mut plain_args = args.clone();
        plain_args.push("--show-secrets");
        shown_plainly.push_str(&stdout_of(db, &plain_args));
        surfaces.push((args.join(" "), masked));
    };
    run(vec!["read", SECRETS_CHAT, "-n", "0", "--system"]);
    run(vec!["read", SECRETS_CHAT, "-n", "0", "--system", "--full"]);
    run(vec!["show", SECRETS_CHAT]);
    run(vec!["show", SECRETS_CHAT, "--json"]);
    run(vec!["export", SECRETS_CHAT, "--format", "markdown"]);
    run(vec!["export", SECRETS_CHAT, "--format", "html"]);
    for text in planted.texts.iter().step_by(3).chain(planted.texts.iter().skip(1).step_by(3)) {
        let word = first_word(text);
        run(vec!["search", "-F", word, "--chat", SECRETS_CHAT, "-m", "50", "-c", "10"]);
        run(vec!["search", "-F", word, "--chat", SECRETS_CHAT, "-m", "50", "-c", "10", "--json"]);
    }
    // Listings show the last message's preview, which is masked even when cut.
    for args in [vec!["list", "--json"], vec!["list"], vec!["stats", SECRETS_CHAT, "--json"]] {
        surfaces.push((args.join(" "), stdout_of(db, &args)));
    }
    for (surface, out) in &surfaces {
        assert!(leaked(&planted, out).is_empty(), "{surface} shows {:?}:\n{out}", leaked(&planted, out));
        assert!(!out.contains("Qw9Qw9Qw9"), "{surface} shows the token its preview cuts:\n{out}");
    }
    let read = &surfaces[0].1;
    assert!(read.contains("‹masked "), "{read}");
    let listed = &surfaces.iter().find(|(s, _)| s == "list --json").unwrap().1;
    assert!(listed.contains("‹masked, cut›..."), "{listed}");
    // --show-secrets shows every secret of a message somewhere, exactly.
    for (kind, secret, _) in in_messages {
        assert!(shown_plainly.contains(secret.as_str()), "{kind}: --show-secrets does not show it");
    }
    // The decoys are shown as they are.
    let decoys = stdout_of(db, &["show", DECOYS_CHAT, "--json"]);
    for decoy in planted.decoys.iter().take(10) {
        assert!(decoys.contains(&serde_json::to_string(decoy).unwrap()[1..20]), "{decoy}");
    }
    // The exact forms are unchanged: a directory export and the files gptme reads.
    let out = planted.work.path().join("out");
    run_ok(sessiondb(db).args(["export", SECRETS_CHAT, "--to"]).arg(&out));
    let exported = fs::read_to_string(out.join(SECRETS_CHAT).join("conversation.jsonl")).unwrap();
    let original = fs::read_to_string(planted.logs.join(SECRETS_CHAT).join("conversation.jsonl")).unwrap();
    assert_eq!(exported, original);
    for (kind, secret, _) in planted.expected.iter().filter(|(_, _, file)| !file) {
        assert!(original.contains(&serde_json::to_string(secret).unwrap()[1..12]), "{kind}");
    }
}

/// Everything gptme's MCP client got from `sessiondb mcp` (`more` its arguments) for: a search
/// for each planted message, the whole conversation read page after page, and the listing.
fn mcp_answers(planted: &Planted, more: &[&str]) -> String {
    let mut calls: Vec<Value> = planted
        .texts
        .iter()
        .step_by(3)
        .chain(planted.texts.iter().skip(1).step_by(3))
        .map(|text| json!({"tool": "search_conversations", "arguments": {"query": first_word(text), "literal": true, "chat": SECRETS_CHAT, "matches": 10}}))
        .collect();
    calls.push(json!({"tool": "read_conversation", "arguments": {"chat_id": SECRETS_CHAT, "limit": 5}, "follow": true}));
    calls.push(json!({"tool": "list_conversations", "arguments": {}}));
    let report = crate::mcp::gptme_mcp_client(planted.work.path(), &planted.db, &planted.logs, more, &Value::Array(calls));
    let results = report["results"].as_array().unwrap();
    let mut all = String::new();
    for r in results {
        assert_eq!(r["is_error"], false, "{r}");
        all.push_str(r["text"].as_str().unwrap());
        for page in r["pages"].as_array().into_iter().flatten() {
            all.push_str(page.as_str().unwrap());
        }
    }
    all
}

#[test]
fn gptmes_mcp_client_is_answered_with_them_masked_unless_the_server_shows_them() {
    let planted = planted_store();
    let masked = mcp_answers(&planted, &[]);
    assert!(leaked(&planted, &masked).is_empty(), "mcp shows {:?}", leaked(&planted, &masked));
    assert!(masked.contains("‹masked "), "{masked}");
    let shown = mcp_answers(&planted, &["--show-secrets"]);
    for (kind, secret, _) in planted.expected.iter().filter(|(_, _, file)| !file) {
        // As JSON spells it inside the answer's text (itself a JSON string).
        let spelled = serde_json::to_string(secret).unwrap();
        assert!(shown.contains(&spelled[1..spelled.len() - 1]), "{kind}: mcp --show-secrets does not show it");
    }
}

#[test]
fn serve_and_the_stock_web_ui_show_them_masked_and_an_edit_keeps_them() {
    use crate::serve::{http, json as body_json, Serve};
    let planted = planted_store();
    let token = "secrets-token";
    let auth = format!("Bearer {token}");
    let webui = String::from_utf8(
        run_ok(
            Command::new(common::gptme_python()).args(["-c", "import gptme.server, os; print(os.path.join(os.path.dirname(gptme.server.__file__), 'webui-dist'))"]),
        )
        .stdout,
    )
    .unwrap();
    let serve = Serve::start(&planted.db, &planted.logs, &["--webui-dir", webui.trim(), "--token", token]);
    let get = |path: &str| {
        let (status, _, body) = http(serve.port, "GET", path, &[("Authorization", &auth)], b"");
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        String::from_utf8(body).unwrap()
    };
    let conversation = get(&format!("/api/v2/conversations/{SECRETS_CHAT}"));
    let mut surfaces = vec![("the conversation".to_owned(), conversation.clone()), ("the listing".to_owned(), get("/api/v2/conversations?limit=100"))];
    for text in planted.texts.iter().step_by(3) {
        let word = first_word(text);
        surfaces.push((format!("q={word}"), get(&format!("/api/v2/conversations?limit=100&q={word}"))));
    }
    // Each attached file, as kept in the conversation's `files/` (by its content hash).
    let dict = body_json(conversation.as_bytes());
    let files: Vec<String> = dict["log"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["file_hashes"].as_object().into_iter().flatten())
        .map(|(_, hash)| format!("files/{}.txt", hash.as_str().unwrap()))
        .collect();
    assert_eq!(files.len(), planted.expected.iter().filter(|(_, _, file)| *file).count(), "{conversation}");
    for file in &files {
        let served = get(&format!("/api/v2/conversations/{SECRETS_CHAT}/files/{file}"));
        assert!(served.contains("some notes") && served.contains("‹masked "), "{file}: {served}");
        surfaces.push((format!("file {file}"), served));
    }
    for (surface, shown) in &surfaces {
        assert!(leaked(&planted, shown).is_empty(), "serve's {surface} shows {:?}", leaked(&planted, shown));
    }
    assert!(conversation.contains("‹masked "));
    // The stock web UI, in a real browser, opening the conversation.
    if let Some((python, chromium)) = crate::html_browser::browser_or_skip("serve_and_the_stock_web_ui_show_them_masked_and_an_edit_keeps_them") {
        let child = Command::new(&python)
            .arg(common::tool("page_probe.py"))
            .arg(format!("http://127.0.0.1:{}/", serve.port))
            .args([SECRETS_CHAT, "see the attached notes", token])
            .env("SESSIONDB_CHROMIUM", chromium)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = common::output_within(child, Duration::from_secs(180), "the page probe");
        assert!(out.status.success(), "page_probe.py failed: {}", String::from_utf8_lossy(&out.stderr));
        let page: Value = serde_json::from_slice(&out.stdout).unwrap();
        let (text, html) = (page["text"].as_str().unwrap(), page["html"].as_str().unwrap());
        assert!(leaked(&planted, text).is_empty() && leaked(&planted, html).is_empty(), "the web UI shows {:?}", leaked(&planted, html));
        assert!(text.contains("‹masked "), "{text}");
        assert_eq!(page["bad"], json!([]), "requests the server refused");
    }
    // An edit from the UI sends the message back as it was shown, masked, changed around the
    // mask: the secret stays, the change is made.
    let index = dict["log"].as_array().unwrap().iter().position(|m| m["role"] == "user" && m["content"].as_str().unwrap().contains("‹masked ")).unwrap();
    let shown = dict["log"][index]["content"].as_str().unwrap().to_owned();
    let edited = json!({"content": format!("(edited) {shown}")}).to_string();
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    let (status, _, body) = http(serve.port, "PATCH", &format!("/api/v2/conversations/{SECRETS_CHAT}/messages/{index}"), &headers, edited.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(leaked(&planted, &String::from_utf8_lossy(&body)).is_empty());
    let stored = stdout_of(&planted.db, &["show", SECRETS_CHAT, "--json", "--show-secrets"]);
    let secret = &planted.expected[0].1;
    let line = stored.lines().find(|l| l.contains("(edited)")).unwrap_or_else(|| panic!("the edit is not stored:\n{stored}"));
    assert!(line.contains(secret.as_str()), "the edit lost the secret its mask stood for: {line}");
    drop(serve);
    // With --show-secrets, as they are.
    let serve = Serve::start(&planted.db, &planted.logs, &["--token", token, "--show-secrets"]);
    let (_, _, body) = http(serve.port, "GET", &format!("/api/v2/conversations/{SECRETS_CHAT}"), &[("Authorization", &auth)], b"");
    let body = String::from_utf8(body).unwrap();
    for (kind, secret, _) in planted.expected.iter().filter(|(_, _, file)| !file) {
        let spelled = serde_json::to_string(secret).unwrap();
        assert!(body.contains(&spelled[1..spelled.len() - 1]), "{kind}: serve --show-secrets does not show it");
    }
}
