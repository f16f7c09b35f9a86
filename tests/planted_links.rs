//! Links and special files planted in an export target or a logs root (issue 13, items 5, 6
//! and 12). Outside every target lies a sentinel directory — a victim file, a sticky 1777
//! directory, an empty one — whose every entry's content, mode and mtime are checksummed before
//! and after each command: no command may change it. Each command must finish (a timeout kills
//! a hang) and either succeed safely or fail with an error that names the link or file.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::sessiondb;
use sha2::{Digest, Sha256};

const LINE_1: &str = r#"{"role": "user", "content": "first", "timestamp": "2026-12-01T10:00:00"}"#;
const LINE_2: &str = r#"{"role": "assistant", "content": "written by gptme meanwhile", "timestamp": "2026-12-01T10:01:00"}"#;
const SIDE: &str = r#"{"role": "user", "content": "on a side branch", "timestamp": "2026-12-01T10:02:00"}"#;

struct Lab {
    logs: PathBuf,
    out: PathBuf,
    db: PathBuf,
    home: PathBuf,
    sentinel: PathBuf,
    _db: common::TestDb,
    _temp: tempfile::TempDir,
}

/// The lab once per engine ([`lab_on`]): its store an SQLite file, then a fresh PostgreSQL
/// database.
fn labs() -> Vec<Lab> {
    ["sqlite", "postgres"].into_iter().filter_map(lab_on).collect()
}

fn lab_on(engine: &str) -> Option<Lab> {
    let temp = tempfile::tempdir().unwrap();
    let test_db = common::TestDb::of(engine, temp.path())?;
    eprintln!("on {engine}:");
    let t = temp.path();
    let (logs, out, home, sentinel) = (t.join("logs"), t.join("out"), t.join("home"), t.join("sentinel"));
    for d in [&logs, &out, &home, &sentinel] {
        fs::create_dir(d).unwrap();
    }
    fs::write(sentinel.join("victim"), "precious\n").unwrap();
    fs::set_permissions(sentinel.join("victim"), fs::Permissions::from_mode(0o640)).unwrap();
    fs::create_dir(sentinel.join("sticky")).unwrap();
    fs::write(sentinel.join("sticky/inside"), "also precious\n").unwrap();
    fs::set_permissions(sentinel.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::create_dir(sentinel.join("empty")).unwrap();
    let old = filetime::FileTime::from_unix_time(1_000_000_000, 123_456_789);
    for p in ["victim", "sticky/inside", "sticky", "empty", ""] {
        filetime::set_file_mtime(sentinel.join(p), old).unwrap();
    }
    Some(Lab { db: test_db.db.clone(), logs, out, home, sentinel, _db: test_db, _temp: temp })
}

/// Kind, mode, mtime and content digest of every entry below `dir` (links not followed).
fn snapshot(dir: &Path) -> BTreeMap<String, (u32, i64, i64, String)> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(p) = pending.pop() {
        let m = fs::symlink_metadata(&p).unwrap();
        let content = if m.is_dir() {
            pending.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            String::new()
        } else if m.file_type().is_symlink() {
            fs::read_link(&p).unwrap().display().to_string()
        } else {
            format!("{:x}", Sha256::digest(fs::read(&p).unwrap()))
        };
        let rel = p.strip_prefix(dir).unwrap().display().to_string();
        out.insert(rel, (m.mode(), m.mtime(), m.mtime_nsec(), content));
    }
    out
}

impl Lab {
    fn conversation(&self, id: &str, with_branch: bool) -> PathBuf {
        let dir = self.logs.join(id);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("conversation.jsonl"), format!("{LINE_1}\n")).unwrap();
        if with_branch {
            fs::create_dir(dir.join("branches")).unwrap();
            fs::write(dir.join("branches/side.jsonl"), format!("{SIDE}\n")).unwrap();
        }
        dir
    }

    fn cmd(&self) -> Command {
        let mut cmd = sessiondb(&self.db);
        cmd.env("GPTME_LOGS_HOME", &self.logs).env("HOME", &self.home);
        cmd
    }

    /// Runs `cmd` under `umask`, with at most 4 GiB of address space (reading /dev/zero ends
    /// there, not in the machine's memory) and 30 seconds; checks that the sentinel is as it
    /// was, that the program did not crash and that it stayed small (a read of /dev/zero
    /// shows there). Returns the exit code and stdout + stderr.
    fn run(&self, cmd: &mut Command, umask: u32) -> (i32, String) {
        let before = snapshot(&self.sentinel);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::umask(umask as libc::mode_t);
                let limit = libc::rlimit { rlim_cur: 4 << 30, rlim_max: 4 << 30 };
                libc::setrlimit(libc::RLIMIT_AS, &limit);
                Ok(())
            });
        }
        let log = self.home.join("output");
        let child = cmd.stdout(fs::File::create(&log).unwrap()).stderr(fs::File::create(log.with_extension("err")).unwrap()).spawn().unwrap();
        let (code, peak_mib) = wait(child, &format!("{cmd:?}"));
        let output = fs::read_to_string(&log).unwrap() + &fs::read_to_string(log.with_extension("err")).unwrap();
        assert!(!output.contains("panicked") && code >= 0, "{cmd:?} crashed ({code}): {output}");
        assert!(peak_mib < 256, "{cmd:?} used {peak_mib} MiB: it read what it should not have: {output}");
        assert_eq!(snapshot(&self.sentinel), before, "{cmd:?} changed the sentinel: {output}");
        (code, output)
    }

    fn ok(&self, cmd: &mut Command) -> String {
        let (code, output) = self.run(cmd, 0o022);
        assert_eq!(code, 0, "{cmd:?}: {output}");
        output
    }

    /// The command fails, naming a symbolic link.
    fn refused(&self, cmd: &mut Command) -> String {
        let (code, output) = self.run(cmd, 0o022);
        assert_ne!(code, 0, "{cmd:?} should have been refused: {output}");
        assert!(output.contains("is a symbolic link") && output.contains("never"), "{cmd:?}: the error names the link: {output}");
        output
    }
}

/// Waits for `child` at most 30 seconds (a hang fails the test, after killing it); returns its
/// exit code (-1 when killed by a signal) and its peak resident memory in MiB. The child is
/// reaped by `wait4` (which also reports its memory), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn wait(mut child: std::process::Child, what: &str) -> (i32, u64) {
    let started = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: wait4 fills `usage` for our own child, which has not been reaped yet.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = unsafe { libc::wait4(child.id() as i32, &mut status, libc::WNOHANG, &mut usage) };
        if pid == child.id() as i32 {
            let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
            return (code, usage.ru_maxrss as u64 / 1024);
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("{what} hung for 30 seconds");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn output_of(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

#[test]
fn export_refuses_a_conversation_directory_that_is_a_link() {
    for lab in labs() {
        lab.conversation("c1", true);
        lab.conversation("c2", false);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        symlink(lab.sentinel.join("empty"), lab.out.join("c1")).unwrap();
        let output = lab.refused(lab.cmd().args(["export", "--to"]).arg(&lab.out));
        assert!(output.contains(&lab.out.join("c1").display().to_string()), "{output}");
        // The other conversation is exported as usual.
        assert_eq!(fs::read_to_string(lab.out.join("c2/conversation.jsonl")).unwrap(), format!("{LINE_1}\n"));
    }
}

#[test]
fn export_never_opens_a_lock_file_that_is_a_link() {
    for lab in labs() {
        lab.conversation("c1", false);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        fs::create_dir(lab.out.join("c1")).unwrap();
        symlink(lab.sentinel.join("victim"), lab.out.join("c1/.lock")).unwrap();
        lab.refused(lab.cmd().args(["export", "--to"]).arg(&lab.out));
    }
}

#[test]
fn export_never_writes_through_a_subdirectory_link() {
    for lab in labs() {
        lab.conversation("c1", true);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        fs::create_dir(lab.out.join("c1")).unwrap();
        symlink(lab.sentinel.join("sticky"), lab.out.join("c1/branches")).unwrap();
        lab.refused(lab.cmd().args(["export", "--to"]).arg(&lab.out));
        assert_eq!(fs::metadata(lab.sentinel.join("sticky")).unwrap().mode() & 0o7777, 0o1777);
    }
}

#[test]
fn a_stored_link_is_recreated_but_nothing_is_written_through_it() {
    for lab in labs() {
        let dir = lab.conversation("c1", false);
        symlink(lab.sentinel.join("empty"), dir.join("files")).unwrap();
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        // Exported into an empty directory, the link is recreated as it was.
        lab.ok(lab.cmd().args(["export", "--to"]).arg(&lab.out));
        assert_eq!(fs::read_link(lab.out.join("c1/files")).unwrap(), lab.sentinel.join("empty"));
        common::tree::assert_same_tree(&dir, &lab.out.join("c1"), &[".lock"]);
        // An attachment is never stored through it.
        let attachment = lab.home.join("notes.txt");
        fs::write(&attachment, "attached").unwrap();
        lab.refused(lab.cmd().args(["append", "c1", "--role", "user", "--content", "see file", "--file"]).arg(&attachment));
        assert_eq!(fs::read_to_string(dir.join("conversation.jsonl")).unwrap(), format!("{LINE_1}\n"), "nothing was appended");
    }
}

#[test]
fn a_queued_attachment_is_never_stored_through_a_stored_link() {
    for lab in labs() {
        let dir = lab.conversation("c1", false);
        symlink(lab.sentinel.join("empty"), dir.join("files")).unwrap();
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        // The queued operation runs on a copy exported from the store, link included.
        let attachment = lab.home.join("notes.txt");
        fs::write(&attachment, "attached").unwrap();
        lab.refused(lab.cmd().args(["append", "c1", "--queue", "--role", "user", "--content", "see file", "--file"]).arg(&attachment));
    }
}

#[test]
fn export_refuses_stored_entries_beneath_a_stored_link() {
    for lab in labs() {
        let dir = lab.conversation("c1", false);
        symlink(lab.sentinel.join("empty"), dir.join("files")).unwrap();
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        // What an older sessiondb could leave in the store: a file beneath the stored link.
        let store = sessiondb::store::Store::open(&lab.db).unwrap();
        let sha = sessiondb::store::blobs::put_bytes(&store.connection().unwrap(), b"x", "files/x").unwrap().to_vec();
        let insert = "INSERT INTO entries (conversation_id, path, kind, mode, mtime_ns, blob_sha256, size)
                      SELECT id, 'files/x', 'blob', 420, 0, ?1, 1 FROM conversations WHERE chat_id = 'c1'";
        match lab.db.to_str().filter(|url| url.starts_with("postgres")) {
            Some(url) => {
                let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
                client.execute(insert.replace("?1", "$1").as_str(), &[&sha]).unwrap();
            }
            None => {
                rusqlite::Connection::open(&lab.db).unwrap().execute(insert, [&sha]).unwrap();
            }
        }
        let (code, output) = lab.run(lab.cmd().args(["export", "--to"]).arg(&lab.out), 0o022);
        assert_ne!(code, 0, "{output}");
        assert!(output.contains("\"files/x\" lies beneath the stored symbolic link \"files\""), "{output}");
    }
}

#[test]
fn an_operation_never_writes_through_a_planted_branches_link() {
    for lab in labs() {
        let dir = lab.conversation("c1", false);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        symlink(lab.sentinel.join("sticky"), dir.join("branches")).unwrap();
        lab.refused(lab.cmd().args(["branch", "c1", "copy"]));
    }
}

#[test]
fn sync_with_debris_never_stamps_a_lock_file_that_is_a_link() {
    for lab in labs() {
        let dir = lab.conversation("c1", false);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        symlink(lab.sentinel.join("victim"), dir.join(".lock")).unwrap();
        fs::write(dir.join(".sessiondb-tmp-interrupted"), "debris").unwrap();
        let (code, output) = lab.run(lab.cmd().arg("sync").arg(&lab.logs), 0o022);
        assert!(code == 0 || output.contains("is a symbolic link"), "{output}");
    }
}

/// A conversation with a change queued in the store while "gptme" appended to the same
/// transcript: the next sync has a conflict to keep, as `branches/main-conflict-<n>.jsonl`.
fn queued_conflict(lab: &Lab) -> PathBuf {
    let dir = lab.conversation("c1", false);
    lab.ok(lab.cmd().arg("import").arg(&lab.logs));
    lab.ok(lab.cmd().args(["append", "c1", "--queue", "--role", "user", "--content", "queued"]));
    let mut main = fs::OpenOptions::new().append(true).open(dir.join("conversation.jsonl")).unwrap();
    std::io::Write::write_all(&mut main, format!("{LINE_2}\n").as_bytes()).unwrap();
    dir
}

#[test]
fn conflict_copies_are_never_written_through_a_branches_link() {
    for lab in labs() {
        let dir = queued_conflict(&lab);
        symlink(lab.sentinel.join("sticky"), dir.join("branches")).unwrap();
        lab.refused(lab.cmd().arg("sync").arg(&lab.logs));
        // The queue is kept for a later sync, once the link is gone.
        fs::remove_file(dir.join("branches")).unwrap();
        lab.ok(lab.cmd().arg("sync").arg(&lab.logs));
        assert!(fs::read_to_string(dir.join("branches/main-conflict-1.jsonl")).unwrap().contains("queued"));
    }
}

/// [`queued_conflict`] with `plant` called on the first conflict name before the sync, which
/// must then fail naming it (reading the directory back refuses what was planted).
fn sync_with_a_planted_conflict_name(lab: &Lab, plant: impl FnOnce(&Path)) -> (PathBuf, String) {
    let dir = queued_conflict(lab);
    fs::create_dir(dir.join("branches")).unwrap();
    plant(&dir.join("branches/main-conflict-1.jsonl"));
    let (code, output) = lab.run(lab.cmd().arg("sync").arg(&lab.logs), 0o022);
    assert_ne!(code, 0, "{output}");
    assert!(output.contains("main-conflict-1.jsonl"), "{output}");
    (dir, output)
}

#[test]
fn a_fifo_at_a_conflict_name_is_never_opened() {
    for lab in labs() {
        let (dir, _) = sync_with_a_planted_conflict_name(&lab, |name| {
            let fifo = std::ffi::CString::new(name.to_str().unwrap()).unwrap();
            // SAFETY: mkfifo with a valid C string.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        });
        // Nothing was left holding the database.
        let list = output_of(lab.cmd().arg("list"));
        assert!(list.status.success(), "{}", String::from_utf8_lossy(&list.stderr));
        // Once the FIFO is gone, the conflict is kept under the first free name.
        fs::remove_file(dir.join("branches/main-conflict-1.jsonl")).unwrap();
        lab.ok(lab.cmd().arg("sync").arg(&lab.logs));
        assert!(fs::read_to_string(dir.join("branches/main-conflict-1.jsonl")).unwrap().contains("queued"));
    }
}

#[test]
fn a_link_to_a_device_at_a_conflict_name_is_never_read() {
    for lab in labs() {
        // The conflict goes to the next name; reading the directory back refuses the link out of
        // the conversation.
        let (_, output) = sync_with_a_planted_conflict_name(&lab, |name| symlink("/dev/zero", name).unwrap());
        assert!(output.contains("/dev/zero"), "{output}");
    }
}

#[test]
fn export_output_files_follow_the_umask_and_keep_a_replaced_files_mode() {
    for lab in labs() {
        lab.conversation("c1", false);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        let export = |file: &Path, umask: u32| {
            let (code, output) = lab.run(lab.cmd().args(["export", "--format", "markdown", "c1", "-o"]).arg(file), umask);
            assert_eq!(code, 0, "{output}");
            fs::symlink_metadata(file).unwrap().mode() & 0o7777
        };
        assert_eq!(export(&lab.home.join("private.md"), 0o077), 0o600);
        assert_eq!(export(&lab.home.join("shared.md"), 0o022), 0o644);
        let existing = lab.home.join("existing.md");
        fs::write(&existing, "old").unwrap();
        fs::set_permissions(&existing, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(export(&existing, 0o022), 0o600, "a replaced file keeps its mode");
        assert!(fs::read_to_string(&existing).unwrap().contains("first"));
        // A link named as the output is replaced by the file, never written through.
        let link = lab.home.join("link.md");
        symlink(lab.sentinel.join("victim"), &link).unwrap();
        export(&link, 0o022);
        assert!(fs::symlink_metadata(&link).unwrap().is_file());
    }
}

#[test]
fn conflict_directories_follow_the_umask() {
    for lab in labs() {
        let dir = lab.conversation("c1", false);
        lab.ok(lab.cmd().arg("import").arg(&lab.logs));
        // An event log, then a queued append and "gptme" changing both files meanwhile: the event
        // log's conflict copy goes to a new directory, branches/main-conflict-1/.
        lab.ok(lab.cmd().args(["append", "c1", "--role", "user", "--content", "logged"]));
        lab.ok(lab.cmd().args(["append", "c1", "--queue", "--role", "user", "--content", "queued"]));
        let events = fs::read_to_string(dir.join("events.jsonl")).unwrap();
        let last = events.lines().last().unwrap().to_owned();
        fs::write(dir.join("events.jsonl"), format!("{events}{last}\n")).unwrap();
        let mut main = fs::OpenOptions::new().append(true).open(dir.join("conversation.jsonl")).unwrap();
        std::io::Write::write_all(&mut main, format!("{LINE_2}\n").as_bytes()).unwrap();
        let (code, output) = lab.run(lab.cmd().arg("sync").arg(&lab.logs), 0o077);
        assert_eq!(code, 0, "{output}");
        let conflict_dir = dir.join("branches/main-conflict-1");
        assert!(conflict_dir.join("events.jsonl").exists(), "{output}");
        assert_eq!(fs::metadata(&conflict_dir).unwrap().mode() & 0o7777, 0o700);
    }
}
