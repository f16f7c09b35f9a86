//! Shell completion in real interactive shells (issue 31, item 10; issue 32, item 3): the
//! script `sessiondb completions SHELL` prints is sourced in bash, zsh and fish running under
//! tmux, Tab is pressed, and the screen is read. `sessiondb <TAB>` completes (the command name
//! is registered, not the binary's path), and a chat id holding `$(…)`, backticks and `;` is
//! inserted quoted: Enter then reads that conversation and runs nothing.
//!
//! A shell (or tmux) that is not installed skips its test with a message, except under CI
//! (`CI` set), where that fails: `.ci/run` installs them (`tools/setup-shells.sh`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{run_ok, sessiondb};

/// The id gptme allows and a shell would run, unquoted.
const EVIL: &str = "evil-$(touch pwned)`touch pwned2`;touch pwned3";

/// Whether `program` is installed; when it is not, a test skips (saying so), or fails under CI
/// ([`common::needed_or_skip`]).
fn installed(program: &str) -> bool {
    let found = Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success());
    let found = if found { Ok(()) } else { Err(format!("{program} is not installed")) };
    common::needed_or_skip("the completion test", found, "tools/setup-shells.sh").is_some()
}

/// A store holding `EVIL` and a plain conversation, and a directory that puts this build on
/// `PATH` as `sessiondb`.
struct Setup {
    work: tempfile::TempDir,
    db: PathBuf,
    bin: PathBuf,
}

fn setup() -> Setup {
    let work = tempfile::tempdir().unwrap();
    let logs = work.path().join("logs");
    for id in [EVIL, "plain-chat"] {
        std::fs::create_dir_all(logs.join(id)).unwrap();
        std::fs::write(logs.join(id).join("conversation.jsonl"), "{\"role\": \"user\", \"content\": \"hello\", \"timestamp\": \"2026-07-16T10:00:00\"}\n").unwrap();
    }
    let db = work.path().join("sessions.db");
    run_ok(sessiondb(&db).arg("import").arg(&logs));
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sessiondb"), bin.join("sessiondb")).unwrap();
    Setup { work, db, bin }
}

/// An interactive shell in a tmux session of its own (its own server socket), 200 columns wide.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn start(s: &Setup, shell: &str) -> Tmux {
        let socket = s.work.path().join("tmux.sock");
        let home = s.work.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", s.bin.display());
        let command = format!("env -i HOME='{}' TERM=xterm PATH='{path}' SESSIONDB_DB='{}' PS1='$ ' {shell}", home.display(), s.db.display());
        let tmux = Tmux { socket };
        tmux.run(&["-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50", "-c"], &[s.work.path().to_str().unwrap(), &command]);
        tmux
    }

    fn run(&self, args: &[&str], more: &[&str]) {
        let out = Command::new("tmux").arg("-S").arg(&self.socket).args(args).args(more).output().unwrap();
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Types `keys` (tmux key names: `Tab`, `Enter`, `C-u`, or literal text).
    fn keys(&self, keys: &[&str]) {
        self.run(&["send-keys", "-t", "0"], keys);
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux").arg("-S").arg(&self.socket).args(["capture-pane", "-p", "-t", "0"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().map(str::trim_end).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n")
    }

    /// The screen once it shows `wanted`; fails after 20 s, showing the screen.
    fn wait_for(&self, wanted: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(wanted) {
                return screen;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "waited for {wanted:?}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs a command line and waits for `marker` in what it prints.
    fn command(&self, line: &str) {
        self.keys(&["C-u", line, "Enter"]);
        self.keys(&["C-u", "clear; printf 'rea%s\n' dy-42", "Enter"]);
        self.wait_for("ready-42");
        self.keys(&["C-l"]);
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-S").arg(&self.socket).arg("kill-server").output();
    }
}

/// The session after `setup_lines`: completes a command name, completes `EVIL` quoted from
/// `ev` and from a quoted prefix of it, and Enter reads it, running nothing.
fn completes_and_quotes(shell: &str, setup_lines: &[&str], quoted: &str) {
    if !installed("tmux") || !installed(shell.split_whitespace().next().unwrap()) {
        return;
    }
    let s = setup();
    let tmux = Tmux::start(&s, shell);
    for line in setup_lines {
        tmux.command(line);
    }
    // `sessiondb <TAB>` completes: the command's name is registered.
    tmux.keys(&["sessiondb rea", "Tab"]);
    tmux.wait_for("sessiondb read");
    tmux.keys(&["C-u"]);
    tmux.command("clear");
    // A chat id is inserted as one quoted word.
    tmux.keys(&["sessiondb read ev", "Tab"]);
    let screen = tmux.wait_for(&format!("sessiondb read {quoted}"));
    assert!(!screen.contains(&format!("read {EVIL}")), "{shell}: inserted unquoted:\n{screen}");
    // Typed quoted, a prefix of it completes too.
    tmux.keys(&["C-u", r"sessiondb read evil-\$\(to", "Tab"]);
    tmux.wait_for(&format!("sessiondb read {quoted}"));
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("0. User: hello");
    assert!(screen.contains(&format!("Reading conversation: {EVIL}")), "{shell}: Enter reads the conversation:\n{screen}");
    tmux.command("true");
    for pwned in ["pwned", "pwned2", "pwned3"] {
        assert!(!s.work.path().join(pwned).exists(), "{shell}: the chat id ran `touch {pwned}`");
    }
}

#[test]
fn bash_completes_the_command_and_quotes_chat_ids() {
    completes_and_quotes("bash --norc --noprofile -i", &["source <(sessiondb completions bash)"], r"evil-\$\(touch\ pwned\)\`touch\ pwned2\`\;touch\ pwned3");
}

#[test]
fn zsh_completes_the_command_and_quotes_chat_ids() {
    completes_and_quotes(
        "zsh -f -i",
        &["autoload -Uz compinit && compinit -u", "source <(sessiondb completions zsh)"],
        r"evil-\$\(touch\ pwned\)\`touch\ pwned2\`\;touch\ pwned3",
    );
}

#[test]
fn fish_completes_the_command_and_quotes_chat_ids() {
    completes_and_quotes(
        "fish --no-config -i",
        &["function fish_prompt; echo -n '$ '; end", "sessiondb completions fish | source"],
        r"evil-\$\(touch\ pwned\)`touch\ pwned2`\;touch\ pwned3",
    );
}

/// What the shells are handed is the command's name, never this build's path.
#[test]
fn every_registration_names_the_command_not_a_path() {
    let s = setup();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = String::from_utf8(run_ok(Command::new(env!("CARGO_BIN_EXE_sessiondb")).args(["completions", shell])).stdout).unwrap();
        let bin = Path::new(env!("CARGO_BIN_EXE_sessiondb"));
        assert!(!script.contains(bin.to_str().unwrap()) && script.contains("sessiondb"), "{shell}:\n{script}");
        let via_env = run_ok(Command::new(s.bin.join("sessiondb")).env("COMPLETE", shell));
        assert_eq!(String::from_utf8(via_env.stdout).unwrap(), script, "{shell}: COMPLETE={shell} sessiondb prints the same");
    }
}
