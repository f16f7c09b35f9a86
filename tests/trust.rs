//! What sessiondb acknowledged is never lost: queued changes against a concurrent sync and a
//! gptme rewriting the conversation, appends that a gptme loading at the wrong moment drops,
//! queued changes of a renamed directory, and a transcript replaced by a directory. Each test
//! plays real gptme (`tools/oracle/gptme_actor.py`) against the real binary.

use crate::common;

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use common::{gptme_python, run_ok, sessiondb, tool};
use serde_json::Value;

struct Root {
    logs: PathBuf,
    db: PathBuf,
    home: PathBuf,
    _db: common::TestDb,
    _temp: tempfile::TempDir,
}

impl Root {
    /// An empty logs root with an SQLite file for its store.
    fn new() -> Root {
        Root::of("sqlite").unwrap()
    }

    /// [`Root::new`] once per engine: on an SQLite file, then on a fresh PostgreSQL database.
    fn each() -> Vec<Root> {
        ["sqlite", "postgres"].into_iter().filter_map(Root::of).collect()
    }

    fn of(engine: &str) -> Option<Root> {
        let temp = tempfile::tempdir().unwrap();
        let test_db = common::TestDb::of(engine, temp.path())?;
        let logs = temp.path().join("logs");
        let home = temp.path().join("home");
        fs::create_dir_all(&logs).unwrap();
        fs::create_dir(&home).unwrap();
        eprintln!("on {engine}:");
        Some(Root { db: test_db.db.clone(), logs, home, _db: test_db, _temp: temp })
    }

    fn sessiondb(&self) -> Command {
        let mut cmd = sessiondb(&self.db);
        cmd.env("GPTME_LOGS_HOME", &self.logs).env("HOME", &self.home);
        cmd
    }

    fn output(&self, args: &[&str]) -> Output {
        self.sessiondb().args(args).output().unwrap()
    }

    fn sync(&self) -> Value {
        let out = run_ok(self.sessiondb().arg("sync").arg(&self.logs).arg("--json"));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn append(&self, chat: &str, content: &str, queue: bool) {
        let mut cmd = self.sessiondb();
        cmd.args(["append", chat, "--role", "user", "--content", content]);
        if queue {
            cmd.arg("--queue");
        }
        let out = run_ok(&mut cmd);
        assert!(String::from_utf8_lossy(&out.stdout).contains("appended"), "{out:?}");
    }

    /// Every message content in every branch the store holds for a conversation.
    fn store_contents(&self, chat_id: &str) -> BTreeSet<String> {
        common::store_contents(&sessiondb::store::Store::open(&self.db).unwrap(), chat_id)
    }
}

/// Real gptme on one conversation, driven command by command (see tools/oracle/gptme_actor.py).
struct Gptme {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Gptme {
    fn start(dir: &Path) -> Gptme {
        let mut child =
            Command::new(gptme_python()).arg(tool("gptme_actor.py")).arg(dir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("python runs");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Gptme { child, stdin, stdout }
    }

    fn run(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("ok"), "gptme {command:?}: {line}");
        line.trim().to_owned()
    }
}

impl Drop for Gptme {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.wait();
    }
}

/// Every message content of a directory's transcripts (main and branches).
fn directory_contents(dir: &Path) -> BTreeSet<String> {
    common::transcript_contents(dir).into_iter().collect()
}

/// A conversation made by gptme, imported.
fn started(root: &Root, chat: &str) -> PathBuf {
    let dir = root.logs.join(chat);
    let mut gptme = Gptme::start(&dir);
    gptme.run("load");
    gptme.run("append hello from gptme");
    drop(gptme);
    run_ok(root.sessiondb().arg("import").arg(&root.logs));
    dir
}

/// Issue 13, item 1: a queue committed while a sync pass runs — gptme holding the conversation
/// and rewriting it (undo: a new inode, so the pass re-reads the conversation whole) — was
/// deleted with the old rows. Every queued append must end in the directory and the store.
#[test]
fn queued_appends_survive_a_concurrent_sync_and_gptme_rewrites() {
    for root in Root::each() {
        let dir = started(&root, "busy");
        let mut watch =
            root.sessiondb().args(["sync", "--watch", "--rescan", "1", "--json"]).arg(&root.logs).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let mut gptme = Gptme::start(&dir);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        // gptme runs after gptme, each loading the conversation, appending, and every other time
        // undoing it (a backup branch and a rewrite: a new inode), then letting go, so that the
        // sync's write-outs get their turns in between.
        let writer = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut i = 0;
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                gptme.run("load");
                gptme.run(&format!("append gptme {i}"));
                if i % 2 == 1 {
                    gptme.run("undo 1");
                } else {
                    kept.push(format!("gptme {i}"));
                }
                gptme.run("release");
                i += 1;
            }
            (gptme, kept)
        });
        let queued: Vec<String> = (0..30).map(|i| format!("queued {i}")).collect();
        for q in &queued {
            root.append("busy", q, true);
            std::thread::sleep(std::time::Duration::from_millis(15));
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let (gptme, kept_by_gptme) = writer.join().unwrap();
        drop(gptme); // gptme lets go of the conversation
        unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
        let status = watch.wait().unwrap();
        let mut errors = String::new();
        std::io::Read::read_to_string(watch.stderr.as_mut().unwrap(), &mut errors).unwrap();
        assert!(status.success(), "watch failed: {errors}");
        let report = root.sync();
        assert_eq!(report["materialise"]["failed"], 0, "{report}");

        let on_disk = directory_contents(&dir);
        let stored = root.store_contents("busy");
        for q in queued.iter().chain(&kept_by_gptme) {
            assert!(on_disk.contains(q), "{q:?} is not in the directory: {on_disk:?}");
            assert!(stored.contains(q), "{q:?} is not in the store");
        }
        let after = root.sync();
        assert_eq!(after["materialise"]["conversations"], 0, "everything was written out: {after}");
    }
}

/// Issue 13, item 2: gptme reads the transcript, sessiondb appends (the lock is free), gptme
/// takes the lock and rewrites the file from what it read. The append must survive as a
/// conflict branch, named in the sync summary and by doctor beforehand.
#[test]
fn an_append_dropped_by_a_stale_gptme_is_kept_as_a_branch() {
    for root in Root::each() {
        let dir = started(&root, "stale");
        let mut gptme = Gptme::start(&dir);
        gptme.run("read"); // LogManager.load has read the transcript, not yet locked
        root.append("stale", "acknowledged by sessiondb", false);
        gptme.run("lock");
        gptme.run("append gptme writes from its stale copy");
        drop(gptme);
        let text = fs::read_to_string(dir.join("conversation.jsonl")).unwrap();
        assert!(!text.contains("acknowledged by sessiondb"), "gptme did not drop the line: the test is not testing anything");

        let doctor = root.output(&["doctor", root.logs.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&doctor.stdout);
        assert_eq!(doctor.status.code(), Some(1), "{said}");
        assert!(said.contains("stale: 1 message(s) sessiondb had appended to conversation.jsonl"), "{said}");

        let report = root.sync();
        let displaced = report["displaced"].as_array().unwrap();
        assert_eq!(displaced.len(), 1, "{report}");
        assert_eq!(displaced[0]["kept_as"], "branches/main-conflict-1.jsonl");
        let kept = fs::read_to_string(dir.join("branches/main-conflict-1.jsonl")).unwrap();
        assert!(kept.contains("acknowledged by sessiondb"), "{kept}");
        assert!(root.store_contents("stale").contains("acknowledged by sessiondb"));
        assert!(root.store_contents("stale").contains("gptme writes from its stale copy"));
        // Once kept, it is not kept again.
        let again = root.sync();
        assert_eq!(again["displaced"].as_array().unwrap().len(), 0, "{again}");
        assert!(!dir.join("branches/main-conflict-2.jsonl").exists());
        let doctor = root.output(&["doctor", root.logs.to_str().unwrap()]);
        assert!(doctor.status.success(), "{}", String::from_utf8_lossy(&doctor.stdout));
    }
}

/// The other side of item 2: an append that gptme removed on purpose (an undo, an edit) is not
/// brought back.
#[test]
fn an_append_gptme_undid_or_edited_away_is_not_brought_back() {
    for how in ["undo 1", "edit-drop-last"] {
        for root in Root::each() {
            let dir = started(&root, "undone");
            root.append("undone", "removed on purpose", false);
            let mut gptme = Gptme::start(&dir);
            gptme.run("load");
            gptme.run(how);
            drop(gptme);
            let report = root.sync();
            assert_eq!(report["displaced"].as_array().unwrap().len(), 0, "{how}: {report}");
            assert!(!directory_contents(&dir).is_empty());
            let main = fs::read_to_string(dir.join("conversation.jsonl")).unwrap();
            assert!(!main.contains("removed on purpose"), "{how}");
            assert!(!dir.join("branches/main-conflict-1.jsonl").exists(), "{how}");
        }
    }
}

/// Issue 13, item 3: queued changes of a directory that was renamed are named by sync and
/// doctor, and `rm` refuses to discard them without --force.
#[test]
fn queued_changes_of_a_renamed_directory_are_named_and_kept() {
    for root in Root::each() {
        let dir = started(&root, "moved");
        root.append("moved", "queued before the move", true);
        fs::rename(&dir, root.logs.join("moved-elsewhere")).unwrap();

        let out = run_ok(root.sessiondb().arg("sync").arg(&root.logs));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("moved: changes queued in the store cannot be written out"), "{err}");
        assert!(err.contains("sessiondb export --to DIR moved"), "{err}");

        let doctor = root.output(&["doctor", root.logs.to_str().unwrap()]);
        assert_eq!(doctor.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&doctor.stdout).contains("moved: changes queued in the store cannot be written out"));

        let rm = root.output(&["rm", "--yes", "moved"]);
        assert!(!rm.status.success());
        let err = String::from_utf8_lossy(&rm.stderr);
        assert!(err.contains("changes queued in the store") && err.contains("--force"), "{err}");
        assert!(root.store_contents("moved").contains("queued before the move"), "rm discarded the queue");

        // The way out the messages name: export the store's copy, which holds the queued change.
        let out = tempfile::tempdir().unwrap();
        run_ok(root.sessiondb().args(["export", "--to"]).arg(out.path()).arg("moved"));
        assert!(directory_contents(&out.path().join("moved")).contains("queued before the move"));
        run_ok(root.sessiondb().args(["rm", "--yes", "--force", "moved"]));
    }
}

/// Issue 13, item 4: `conversation.jsonl` replaced by a directory fails the conversation (sync
/// and import both), and the store keeps its last good copy.
#[test]
fn a_transcript_replaced_by_a_directory_fails_and_keeps_the_last_good_copy() {
    for root in Root::each() {
        let dir = started(&root, "swapped");
        root.append("swapped", "second message", false);
        let before = root.store_contents("swapped");
        fs::rename(dir.join("conversation.jsonl"), root.home.join("aside.jsonl")).unwrap();
        fs::create_dir(dir.join("conversation.jsonl")).unwrap();

        for args in [vec!["sync", "--json"], vec!["import", "--json"]] {
            let out = root.sessiondb().args(&args).arg(&root.logs).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{args:?} accepted it: {}", String::from_utf8_lossy(&out.stdout));
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(said.contains("conversation.jsonl: a directory where gptme keeps a file"), "{args:?}: {said}");
            assert_eq!(root.store_contents("swapped"), before, "{args:?}");
        }
        let show = run_ok(root.sessiondb().args(["show", "swapped"]));
        assert!(String::from_utf8_lossy(&show.stdout).contains("second message"));
    }
}

/// Issue 13, item 13: `view off` and a second `rename` left blobs nothing refers to, so doctor
/// failed on a healthy store.
#[test]
fn view_off_and_renames_leave_no_orphaned_blobs() {
    for root in Root::each() {
        started(&root, "tidy");
        root.append("tidy", "a second message", false);
        let toml = root.home.join("view.toml");
        let out = run_ok(root.sessiondb().args(["export", "--format", "toml", "tidy"]));
        fs::write(&toml, &out.stdout).unwrap();
        run_ok(root.sessiondb().args(["view", "create", "tidy", "v1", "--toml"]).arg(&toml));
        run_ok(root.sessiondb().args(["view", "use", "tidy", "v1"]));
        run_ok(root.sessiondb().args(["view", "off", "tidy"]));
        run_ok(root.sessiondb().args(["rename", "tidy", "first name"]));
        run_ok(root.sessiondb().args(["rename", "tidy", "second name"]));
        let doctor = root.output(&["doctor", root.logs.to_str().unwrap()]);
        assert!(doctor.status.success(), "{}", String::from_utf8_lossy(&doctor.stdout));
    }
}

/// Issue 13, item 14: token counts beyond i64 (gptme adds Python ints) wrapped round to small
/// negative totals. They stop at i64's maximum instead.
#[test]
fn token_totals_never_wrap() {
    for root in Root::each() {
        let dir = root.logs.join("huge");
        fs::create_dir(&dir).unwrap();
        let line = |n: &str| {
            format!(
                r#"{{"role": "assistant", "content": "x", "timestamp": "2026-12-01T10:00:00", "metadata": {{"model": "m", "usage": {{"input_tokens": {n}, "output_tokens": {n}}}}}}}"#
            )
        };
        fs::write(dir.join("conversation.jsonl"), format!("{}\n{}\n", line("1e300"), line("9223372036854775807"))).unwrap();
        run_ok(root.sessiondb().arg("import").arg(&root.logs));
        let list: Value = serde_json::from_slice(&run_ok(root.sessiondb().args(["list", "--json", "--all"])).stdout).unwrap();
        let row = &list.as_array().unwrap()[0];
        assert_eq!(row["total_input_tokens"].as_i64(), Some(i64::MAX), "{row}");
        assert_eq!(row["total_output_tokens"].as_i64(), Some(i64::MAX), "{row}");
        let stats: Value = serde_json::from_slice(&run_ok(root.sessiondb().args(["stats", "--json", "--all", "--by", "model"])).stdout).unwrap();
        assert!(!stats.to_string().contains(":-"), "a negative count: {stats}");
    }
}

/// What every party acknowledged during the soak, in order, per conversation.
#[derive(Default)]
struct Acks {
    /// (conversation, content), in the order acknowledged.
    messages: Vec<(String, String)>,
    kills: u64,
    /// sessiondb appends refused because gptme held the conversation (nothing acknowledged).
    refused: u64,
    /// Refused because gptme wrote the file during the append (it took the lock over in the
    /// instant before sessiondb stamped it; nothing acknowledged).
    refused_racing: u64,
    errors: Vec<String>,
}

/// Runs a sessiondb command that may be killed at a random moment (`kill_after`); returns its
/// output when it was not killed.
fn run_killable(mut cmd: Command, kill_after: Option<std::time::Duration>) -> Option<Output> {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    if let Some(delay) = kill_after {
        let pid = child.id() as i32;
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let out = child.wait_with_output().unwrap();
        killer.join().unwrap();
        return (out.status.code().is_some()).then_some(out);
    }
    Some(child.wait_with_output().unwrap())
}

/// Issue 13's soak: everything at once, for `$SESSIONDB_SOAK_SECS` (default 15) — real gptme
/// loading at random moments (also in the gap between reading and locking), holding, appending,
/// undoing and editing; `sync --watch` killed and restarted; direct and queued sessiondb appends,
/// some killed mid-way. At the end every acknowledged message is in the directory and the store
/// (a backup or conflict branch counts), and in each transcript at most once and in order.
#[test]
fn soak_everything_at_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let secs: u64 = std::env::var("SESSIONDB_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(15);
    let (_, seed_rng) = common::crash::plan(0);
    for root in Root::each() {
        let root = Arc::new(root);
        let chats = ["soak-a", "soak-b"];
        for chat in chats {
            started(&root, chat);
        }
        let acks = Arc::new(Mutex::new(Acks::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let mut threads = Vec::new();
        let mut seed = seed_rng.0;
        let mut next_rng = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            common::crash::Rng(seed | 1)
        };

        // One live gptme per conversation.
        for chat in chats {
            let (root, acks, stop, mut rng) = (root.clone(), acks.clone(), stop.clone(), next_rng());
            threads.push(std::thread::spawn(move || {
                let mut gptme = Gptme::start(&root.logs.join(chat));
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let mut append = |gptme: &mut Gptme, acks: &Mutex<Acks>| {
                        let content = format!("{chat} gptme {i}");
                        gptme.run(&format!("append {content}"));
                        acks.lock().unwrap().messages.push((chat.to_owned(), content));
                        i += 1;
                    };
                    match rng.next() % 10 {
                        0..=4 => {
                            let len: usize = gptme.run("load").trim_start_matches("ok ").parse().unwrap();
                            for _ in 0..1 + rng.next() % 3 {
                                match rng.next() % 10 {
                                    0 if len > 1 => {
                                        gptme.run("undo 1");
                                    }
                                    1 if len > 1 => {
                                        gptme.run("edit-drop-last");
                                    }
                                    _ => append(&mut gptme, &acks),
                                }
                                std::thread::sleep(std::time::Duration::from_millis(rng.next() % 40));
                            }
                            gptme.run("release");
                        }
                        5..=7 => {
                            // LogManager.load's gap: read, others write, then lock and write.
                            gptme.run("read");
                            std::thread::sleep(std::time::Duration::from_millis(rng.next() % 60));
                            gptme.run("lock");
                            append(&mut gptme, &acks);
                            gptme.run("release");
                        }
                        _ => std::thread::sleep(std::time::Duration::from_millis(20)),
                    }
                }
            }));
        }
        // Direct and queued sessiondb appends, some killed part-way.
        for queue in [false, true] {
            let (root, acks, stop, mut rng) = (root.clone(), acks.clone(), stop.clone(), next_rng());
            threads.push(std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let chat = chats[(rng.next() % 2) as usize];
                    let content = format!("{chat} sdb-{} {i}", if queue { "queued" } else { "direct" });
                    i += 1;
                    let mut cmd = root.sessiondb();
                    cmd.args(["append", chat, "--role", "user", "--content", &content]);
                    if queue {
                        cmd.arg("--queue");
                    }
                    let kill = (rng.next() % 8 == 0).then(|| std::time::Duration::from_millis(rng.next() % 30));
                    match run_killable(cmd, kill) {
                        Some(out) if out.status.success() => acks.lock().unwrap().messages.push((chat.to_owned(), content)),
                        Some(out) => {
                            let err = String::from_utf8_lossy(&out.stderr).into_owned();
                            // Refused, nothing acknowledged: gptme holds the conversation, or gptme
                            // wrote it at the same moment (0.35.1 takes over a lock whose file still
                            // names a dead process, in the instant before sessiondb stamps its own).
                            let mut acks = acks.lock().unwrap();
                            if err.contains("in use by") {
                                acks.refused += 1;
                            } else if err.contains("changed on disk since sessiondb last read it") {
                                acks.refused_racing += 1;
                            } else {
                                acks.errors.push(format!("{content}: {err}"));
                            }
                        }
                        None => acks.lock().unwrap().kills += 1,
                    }
                    std::thread::sleep(std::time::Duration::from_millis(rng.next() % 25));
                }
            }));
        }
        // sync --watch, killed and restarted.
        {
            let (root, acks, stop, mut rng) = (root.clone(), acks.clone(), stop.clone(), next_rng());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let mut watch = root.sessiondb();
                    watch.args(["sync", "--watch", "--rescan", "1", "--json"]).arg(&root.logs).stdout(Stdio::null()).stderr(Stdio::null());
                    let mut child = watch.spawn().unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(300 + rng.next() % 1500));
                    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
                    child.wait().unwrap();
                    acks.lock().unwrap().kills += 1;
                }
            }));
        }
        while std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().unwrap();
        }
        // Every gptme has let go: two passes write out every queue and take in every change.
        root.sync();
        let last = root.sync();
        assert_eq!(last["materialise"]["conversations"], 0, "{last}");
        assert_eq!(last["materialise"]["failed"], 0, "{last}");

        let acks = acks.lock().unwrap();
        assert!(acks.errors.is_empty(), "sessiondb failed: {:#?}", acks.errors);
        let mut conflicts = 0;
        for chat in chats {
            let dir = root.logs.join(chat);
            let stored = root.store_contents(chat);
            let on_disk = directory_contents(&dir);
            for (_, content) in acks.messages.iter().filter(|(c, _)| c == chat) {
                let (in_dir, in_store) = (on_disk.contains(content), stored.contains(content));
                if !(in_dir && in_store) {
                    let keep = std::env::temp_dir().join(format!("sessiondb-soak-{}", std::process::id()));
                    let _ = Command::new("cp").arg("-a").arg(root.logs.parent().unwrap()).arg(&keep).status();
                    panic!("{content:?} lost: in the directory {in_dir}, in the store {in_store} (the root is kept at {})", keep.display());
                }
            }
            // In each transcript: every message at most once, each party's in the order acknowledged.
            let mut files = vec![dir.join("conversation.jsonl")];
            files.extend(fs::read_dir(dir.join("branches")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")));
            for f in files {
                conflicts += u64::from(f.to_string_lossy().contains("-conflict-"));
                let text = fs::read_to_string(&f).unwrap();
                let mut seen = BTreeSet::new();
                let mut last_of: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
                for line in text.lines() {
                    let v: Value = serde_json::from_str(line).unwrap();
                    let content = v["content"].as_str().unwrap().to_owned();
                    assert!(seen.insert(content.clone()), "{}: {content:?} twice", f.display());
                    if let Some((party, n)) = content.rsplit_once(' ') {
                        if let Ok(n) = n.parse::<u64>() {
                            let previous = last_of.insert(party.to_owned(), n);
                            assert!(previous.is_none_or(|p| p < n), "{}: {content:?} out of order", f.display());
                        }
                    }
                }
            }
        }
        println!(
            "soak: {secs} s, {} messages acknowledged, {} sessiondb processes killed, {} appends refused while gptme held the conversation, \
         {} refused because gptme wrote during them, {conflicts} conflict branches",
            acks.messages.len(),
            acks.kills,
            acks.refused,
            acks.refused_racing
        );
    }
}

/// Starts `sync --watch` on the root; stopped (SIGINT) by [`stop_watch`].
fn start_watch(root: &Root) -> Child {
    root.sessiondb().args(["sync", "--watch", "--rescan", "1", "--json"]).arg(&root.logs).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Stops a watcher with Ctrl-C; returns (exit code, the passes it reported, its stderr).
fn stop_watch(child: Child) -> (Option<i32>, Vec<Value>, String) {
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let passes = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out.status.code(), passes, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Waits until `search` finds `text` (or fails the test after 20 s).
fn wait_until_found(root: &Root, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = root.output(&["search", text, "--json"]);
        if out.status.success() && String::from_utf8_lossy(&out.stdout).contains(text) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{text:?} never became searchable");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Issue 13, item 15: two watchers on one root both failed with "Query returned no rows"; a
/// watcher whose write-ahead log was deleted failed every pass until restarted.
#[test]
fn two_watchers_coexist_and_a_watcher_survives_its_wal_being_deleted() {
    let root = Root::new();
    let dir = started(&root, "watched");
    let (a, b) = (start_watch(&root), start_watch(&root));
    let mut gptme = Gptme::start(&dir);
    for i in 0..40 {
        gptme.run("load");
        gptme.run(&format!("append watched message {i}"));
        if i % 3 == 2 {
            gptme.run("undo 1");
        }
        gptme.run("release");
    }
    wait_until_found(&root, "watched message 39");
    for (code, passes, err) in [stop_watch(a), stop_watch(b)] {
        let failures: Vec<&Value> = passes.iter().filter(|p| p["errors"].as_array().is_some_and(|e| !e.is_empty())).collect();
        assert!(failures.is_empty(), "a watcher reported errors: {failures:?}\n{err}");
        assert_eq!(code, Some(0), "{err}");
    }

    let watch = start_watch(&root);
    wait_until_found(&root, "watched message 39");
    let wal = PathBuf::from(format!("{}-wal", root.db.display()));
    fs::remove_file(&wal).unwrap();
    for i in 0..3 {
        gptme.run("load");
        gptme.run(&format!("append after the log went {i}"));
        gptme.run("release");
    }
    wait_until_found(&root, "after the log went 2");
    let (code, _, err) = stop_watch(watch);
    assert_eq!(code, Some(0), "{err}");
}

/// Issue 13, item 17: a write-out that failed (here: `branches/` replaced by a file, so nothing
/// can be written under it; a full disk fails the same way) was counted as "skipped (locked by
/// gptme)".
#[test]
fn a_failed_write_out_is_counted_as_failed_not_as_locked() {
    for root in Root::each() {
        let dir = started(&root, "blocked");
        run_ok(root.sessiondb().args(["branch", "blocked", "side"]));
        let mut cmd = root.sessiondb();
        run_ok(cmd.args(["append", "blocked", "--role", "user", "--content", "queued to a branch", "--queue", "--branch", "side"]));
        fs::rename(dir.join("branches"), root.home.join("branches-aside")).unwrap();
        fs::write(dir.join("branches"), "not a directory").unwrap();
        let out = root.sessiondb().arg("sync").arg(&root.logs).arg("--json").output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["materialise"]["failed"], 1, "{report}");
        assert_eq!(report["materialise"]["skipped_locked"], 0, "{report}");
        assert_eq!(report["ingest"]["skipped_locked"], 0, "{report}");
        assert!(root.store_contents("blocked").contains("queued to a branch"), "the queue is kept");
    }
}

/// Issue 13, item 12: directories an operation creates follow the umask, as gptme's `mkdir`
/// does (they were always 0755).
#[test]
fn directories_operations_create_follow_the_umask() {
    for root in Root::each() {
        let dir = started(&root, "private");
        let toml = root.home.join("view.toml");
        fs::write(&toml, &run_ok(root.sessiondb().args(["export", "--format", "toml", "private"])).stdout).unwrap();
        let cmd = format!("umask 077; exec {} --db {} view create private v1 --toml {}", env!("CARGO_BIN_EXE_sessiondb"), root.db.display(), toml.display());
        run_ok(Command::new("sh").arg("-c").arg(cmd));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.join("views")).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700, "views/ is {mode:o}");
    }
}

/// `export --to` over the logs root gptme writes: a conversation gptme added to since the
/// store last read it (a message), or whose attachment changed, is refused whole, naming the file, and
/// nothing of it is written — the store's older copy never replaces what gptme wrote; once
/// the store has read them, the export writes the same bytes again. Into any other directory
/// the store's copy is the newer one, and an older export there is replaced.
#[test]
fn an_export_over_the_live_root_never_replaces_what_gptme_wrote_since() {
    for root in Root::each() {
        let dir = started(&root, "live");
        let other = started(&root, "quiet");
        let mut gptme = Gptme::start(&dir);
        gptme.run("load");
        gptme.run("append written by gptme after the import");
        drop(gptme);
        // An attachment the store holds, changed since.
        fs::create_dir_all(other.join("files")).unwrap();
        fs::write(other.join("files/notes.txt"), "as imported\n").unwrap();
        run_ok(root.sessiondb().arg("import").arg(&other));
        fs::write(other.join("files/notes.txt"), "changed since\n").unwrap();
        let before = |d: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            // gptme's lock files hold the pid of whoever took the lock last (the export takes it).
            let locks = |p: &PathBuf| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".lock"));
            let mut files: Vec<_> = walk(d).into_iter().filter(|p| !locks(p)).map(|p| (p.clone(), fs::read(&p).unwrap())).collect();
            files.sort();
            files
        };
        let (live_before, quiet_before) = (before(&dir), before(&other));
        let out = root.output(&["export", "--to", root.logs.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let transcript = dir.join("conversation.jsonl");
        let source = sessiondb::store::sources::default_name(&root.logs);
        for (chat, file) in [("live", transcript.clone()), ("quiet", other.join("files/notes.txt"))] {
            let said = format!(
            "error: {chat}: {} holds other bytes than the store's copy, in logs root {} that the store reads as source {source:?}; nothing of this conversation was written",
            file.display(),
            root.logs.display()
        );
            assert!(err.contains(&said), "{said}\n{err}");
        }
        assert!(String::from_utf8_lossy(&out.stdout).contains("exported 0 conversations (2 failed)"), "{out:?}");
        assert_eq!(before(&dir), live_before, "the live conversation was written to");
        assert_eq!(before(&other), quiet_before, "the changed attachment's conversation was written to");
        assert!(directory_contents(&dir).contains("written by gptme after the import"));
        // Once the store has read them, the export writes them again, the same bytes.
        root.sync();
        run_ok(root.sessiondb().args(["export", "--to", root.logs.to_str().unwrap()]));
        assert_eq!((before(&dir), before(&other)), (live_before, quiet_before));
        // Anywhere else (a backup refreshed), the store's copy is the newer one and replaces the
        // older export.
        let backup = root.home.join("backup");
        run_ok(root.sessiondb().args(["export", "--to", backup.to_str().unwrap()]));
        root.append("live", "added after the backup", false);
        run_ok(root.sessiondb().args(["export", "--to", backup.to_str().unwrap()]));
        assert!(directory_contents(&backup.join("live")).contains("added after the backup"));
    }
}

/// Every regular file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let kind = fs::symlink_metadata(&path).unwrap().file_type();
        if kind.is_dir() {
            files.extend(walk(&path));
        } else if kind.is_file() {
            files.push(path);
        }
    }
    files
}

/// `clean` judges emptiness on the directories as they are: a conversation that was empty when
/// the store last read it, and that real gptme has written to since, is neither offered nor
/// removed (it was removed with gptme's messages in it); one still empty is.
#[test]
fn clean_never_removes_a_conversation_gptme_wrote_to_since() {
    for root in Root::each() {
        for chat in ["written-since", "still-empty"] {
            run_ok(root.sessiondb().args(["new", chat, "--logs-dir"]).arg(&root.logs));
        }
        let dir = root.logs.join("written-since");
        let mut gptme = Gptme::start(&dir);
        gptme.run("load");
        gptme.run("append a question typed into gptme");
        gptme.run("append another one");
        drop(gptme);
        let listed = String::from_utf8(run_ok(root.sessiondb().arg("clean")).stdout).unwrap();
        assert!(listed.contains("still-empty") && !listed.contains("written-since"), "{listed}");
        let out = run_ok(root.sessiondb().args(["clean", "--delete"]));
        assert!(String::from_utf8_lossy(&out.stdout).contains("deleted 1 of 1"), "{out:?}");
        assert!(!root.logs.join("still-empty").exists());
        let kept = directory_contents(&dir);
        assert!(kept.contains("a question typed into gptme") && kept.contains("another one"), "{kept:?}");
    }
}
