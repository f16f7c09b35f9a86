//! gptme's directory layout: where each file of a conversation lives, what a path inside a
//! conversation directory is, and which log gptme has loaded.
//!
//! Invariant: this is the one place that spells gptme's paths and decides what they mean. A
//! path built here classifies back to what it was built from ([`classify`] of
//! [`branch_path`]`(b)` is branch `b`, and so on), so that what sessiondb writes is what it reads
//! again; the test-conversation rule is one list of patterns, from which both the Rust check
//! ([`is_test`]) and the SQL condition ([`test_ids_sql`]) are made, so that the two cannot
//! disagree. Paths are relative to the conversation directory, `/`-separated, as the store keeps
//! them. Apart from [`default_logs_root`] (the environment) and [`conversation_dirs`] (one
//! directory listing), everything here is pure: it reads no file and knows no database.
//! Depends only on `model` and the standard library.

use std::path::{Path, PathBuf};

use crate::model::ChatId;

/// The branch gptme starts on, whose transcript is [`MAIN_TRANSCRIPT`].
pub const MAIN: &str = "main";
/// The main branch's transcript; a directory holding one is a conversation.
pub const MAIN_TRANSCRIPT: &str = "conversation.jsonl";
/// The event log's file name (main's sits beside [`MAIN_TRANSCRIPT`]).
pub const EVENTS_FILE: &str = "events.jsonl";
/// The full history kept by a manual compaction.
pub const LOSSLESS: &str = "lossless.jsonl";
/// The `/backtrack` bookmarks.
pub const BOOKMARKS: &str = "conv-checkpoints.jsonl";
/// Per-chat configuration (`[chat]`, `[env]`).
pub const CONFIG: &str = "config.toml";
/// The sidecar gptme flocks while it rewrites [`CONFIG`].
pub const CONFIG_LOCK: &str = ".config.lock";
/// The directory of the non-main branches (and their event logs).
pub const BRANCHES_DIR: &str = "branches";
/// The directory of the compacted views.
pub const VIEWS_DIR: &str = "views";
/// The marker naming the view active on main.
pub const VIEW_MARKER: &str = "views/.current";
/// The directory of attachments stored by content.
pub const FILES_DIR: &str = "files";
/// Another directory of attachments, which gptme's `chats fork --at-turn` copies with [`FILES_DIR`].
pub const ATTACHMENTS_DIR: &str = "attachments";
/// The file holding the PID of the gptme process that owns the chat (flocked).
pub const LOCK: &str = ".lock";
/// The chat's working directory: a link to it, or a real directory (`@log` in config.toml).
pub const WORKSPACE: &str = "workspace";
/// The document name the store gives [`LOSSLESS`].
pub const LOSSLESS_NAME: &str = "lossless";
/// The document name the store gives [`BOOKMARKS`].
pub const BOOKMARKS_NAME: &str = "conv-checkpoints";

/// What kind of JSONL document a file is, by where it is; see the store's `documents` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    Branch,
    View,
    Lossless,
    Events,
    Bookmarks,
}

impl DocumentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Branch => "branch",
            DocumentKind::View => "view",
            DocumentKind::Lossless => "lossless",
            DocumentKind::Events => "events",
            DocumentKind::Bookmarks => "conv_checkpoints",
        }
    }

    pub fn parse(s: &str) -> Option<DocumentKind> {
        Some(match s {
            "branch" => DocumentKind::Branch,
            "view" => DocumentKind::View,
            "lossless" => DocumentKind::Lossless,
            "events" => DocumentKind::Events,
            "conv_checkpoints" => DocumentKind::Bookmarks,
            _ => return None,
        })
    }
}

/// Which document a relative path is, and its name (a branch's or view's name; `main` for the
/// main transcript and event log); `None` for every other file.
pub fn classify(rel: &str) -> Option<(DocumentKind, String)> {
    let parts: Vec<&str> = rel.split('/').collect();
    let jsonl_stem = |name: &str| name.strip_suffix(".jsonl").filter(|s| !s.is_empty()).map(str::to_owned);
    match parts.as_slice() {
        [MAIN_TRANSCRIPT] => Some((DocumentKind::Branch, MAIN.into())),
        [EVENTS_FILE] => Some((DocumentKind::Events, MAIN.into())),
        [LOSSLESS] => Some((DocumentKind::Lossless, LOSSLESS_NAME.into())),
        [BOOKMARKS] => Some((DocumentKind::Bookmarks, BOOKMARKS_NAME.into())),
        // gptme's main is `conversation.jsonl`, its events `events.jsonl`: it never loads or
        // writes `branches/main.jsonl` or `branches/main/events.jsonl`, so such files are kept
        // as they are, never taken for main's.
        [BRANCHES_DIR, name] => jsonl_stem(name).filter(|n| n != MAIN).map(|n| (DocumentKind::Branch, n)),
        [BRANCHES_DIR, branch, EVENTS_FILE] if *branch != MAIN => Some((DocumentKind::Events, (*branch).to_owned())),
        [VIEWS_DIR, name] => jsonl_stem(name).map(|n| (DocumentKind::View, n)),
        _ => None,
    }
}

/// Whether `rel` is an attachment stored by content (under `files/`).
pub fn is_attachment(rel: &str) -> bool {
    rel.strip_prefix(FILES_DIR).is_some_and(|r| r.starts_with('/'))
}

/// The transcript of branch `name`: `conversation.jsonl` for main, else `branches/<name>.jsonl`.
pub fn branch_path(name: &str) -> String {
    if name == MAIN {
        MAIN_TRANSCRIPT.into()
    } else {
        format!("{BRANCHES_DIR}/{name}.jsonl")
    }
}

/// The directory holding branch `name`'s event log: "" (the conversation directory) for main,
/// else `branches/<name>`.
pub fn events_dir(name: &str) -> String {
    if name == MAIN {
        String::new()
    } else {
        format!("{BRANCHES_DIR}/{name}")
    }
}

/// `name` inside the event-log directory of branch `branch`.
fn in_events_dir(branch: &str, name: &str) -> String {
    let dir = events_dir(branch);
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// The event log of branch `name`: `events.jsonl` for main, else `branches/<name>/events.jsonl`.
pub fn events_path(name: &str) -> String {
    in_events_dir(name, EVENTS_FILE)
}

/// The sidecar gptme flocks while it writes branch `name`'s event log.
pub fn events_lock_path(name: &str) -> String {
    in_events_dir(name, ".events.jsonl.lock")
}

/// The event log that goes with transcript `rel`: `events.jsonl` for `conversation.jsonl`,
/// `branches/<name>/events.jsonl` for `branches/<name>.jsonl`; `None` when `rel` is not a
/// branch's transcript.
pub fn events_path_of_transcript(rel: &str) -> Option<String> {
    match classify(rel)? {
        (DocumentKind::Branch, _) if rel == MAIN_TRANSCRIPT => Some(EVENTS_FILE.to_owned()),
        (DocumentKind::Branch, name) => Some(format!("{BRANCHES_DIR}/{name}/{EVENTS_FILE}")),
        _ => None,
    }
}

/// The file of the document of `kind` named `name`: the inverse of [`classify`].
pub fn document_path(kind: DocumentKind, name: &str) -> String {
    match kind {
        DocumentKind::Branch => branch_path(name),
        DocumentKind::View => view_path(name),
        DocumentKind::Events => events_path(name),
        DocumentKind::Lossless => LOSSLESS.to_owned(),
        DocumentKind::Bookmarks => BOOKMARKS.to_owned(),
    }
}

/// The file of view `name`: `views/<name>.jsonl`.
pub fn view_path(name: &str) -> String {
    format!("{VIEWS_DIR}/{name}.jsonl")
}

/// An attachment stored by content: `files/<16 hex of sha256><suffix>`.
pub fn attachment_path(hash: &str, suffix: &str) -> String {
    format!("{FILES_DIR}/{hash}{suffix}")
}

/// Whether `rel` counts in gptme's branch count, which is 1 (main) plus the entries gptme's
/// `glob("branches/*.jsonl")` finds: any entry directly in `branches/` whose name ends with
/// `.jsonl` — `.jsonl` itself, `main.jsonl`, a directory or a link so named included.
pub fn counts_as_branch(rel: &str) -> bool {
    rel.strip_prefix(BRANCHES_DIR).and_then(|r| r.strip_prefix('/')).is_some_and(|name| !name.contains('/') && name.ends_with(".jsonl"))
}

/// The SQL condition that a path (the text of column `column`) counts in the branch count:
/// [`counts_as_branch`], for the store's `entries`.
pub fn counts_as_branch_sql(column: &str) -> String {
    format!("(glob('{BRANCHES_DIR}/*.jsonl', {column}) AND NOT glob('{BRANCHES_DIR}/*/*', {column}))")
}

/// What a backup branch was saved before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backup {
    Edit,
    Undo,
}

/// The prefix shared by the backups of `branch` of this kind: `<branch>-edit-` or
/// `<branch>-undo-`. gptme numbers the next one by how many branches start with it.
pub fn backup_prefix(branch: &str, kind: Backup) -> String {
    let kind = match kind {
        Backup::Edit => "edit",
        Backup::Undo => "undo",
    };
    format!("{branch}-{kind}-")
}

/// The backup branch `<branch>-<kind>-<n>`.
pub fn backup_name(branch: &str, kind: Backup, n: usize) -> String {
    format!("{}{n}", backup_prefix(branch, kind))
}

/// The branch that keeps the store's version of `branch` when a sync finds the directory
/// changed too: `<branch>-conflict-<n>`, n = 1, 2, ….
pub fn conflict_branch(branch: &str, n: u64) -> String {
    format!("{branch}-conflict-{n}")
}

/// Where the store's version of view `view` goes in a conflict: `views/<view>-conflict-<n>.jsonl`.
pub fn conflict_view_path(view: &str, n: u64) -> String {
    view_path(&format!("{view}-conflict-{n}"))
}

/// Where the store's version of any other file `rel` goes in a conflict: `<rel>.conflict-<n>`.
pub fn conflict_file_path(rel: &str, n: u64) -> String {
    format!("{rel}.conflict-{n}")
}

/// The view the `views/.current` marker names, as gptme's `_restore_current_view` reads it: the
/// text stripped of surrounding whitespace, and `None` when that is empty or holds a path
/// separator. Whether the view exists is the caller's to check (gptme then ignores the marker).
pub fn active_view_name(marker: &[u8]) -> Option<String> {
    let name = String::from_utf8_lossy(marker).trim().to_owned();
    if name.is_empty() || name.contains('/') || name.contains('\\') {
        return None;
    }
    Some(name)
}

/// The log gptme has loaded for a branch: its `log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadedLog {
    /// The active view, `views/<name>.jsonl`.
    View(String),
    /// The branch's own transcript.
    Branch(String),
}

impl LoadedLog {
    /// The document kind and name the store keeps it under.
    pub fn document(&self) -> (DocumentKind, &str) {
        match self {
            LoadedLog::View(name) => (DocumentKind::View, name),
            LoadedLog::Branch(name) => (DocumentKind::Branch, name),
        }
    }

    /// Its file, relative to the conversation directory.
    pub fn path(&self) -> String {
        match self {
            LoadedLog::View(name) => view_path(name),
            LoadedLog::Branch(name) => branch_path(name),
        }
    }
}

/// Which log gptme loads for `branch` (`LogManager.load(branch=…)`, whose `log` is what it
/// shows, edits, undoes and resumes): on main, the view the marker names when it names one that
/// exists (`view_exists`); otherwise — another branch, no marker, or a marker naming nothing —
/// the branch itself. `marker` is `views/.current`'s bytes, `None` when there is none. Every
/// command that reads or changes "the conversation" decides through this.
pub fn loaded_log(branch: &str, marker: Option<&[u8]>, view_exists: impl FnOnce(&str) -> bool) -> LoadedLog {
    if branch == MAIN {
        if let Some(view) = marker.and_then(active_view_name).filter(|v| view_exists(v)) {
            return LoadedLog::View(view);
        }
    }
    LoadedLog::Branch(branch.to_owned())
}

/// How gptme recognises a test or eval conversation by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdPattern {
    Prefix(&'static str),
    Contains(&'static str),
}

/// gptme hides these conversations from listings by default: ids starting with `tmp` or
/// `test-`, or containing `gptme-evals-`.
const TEST_IDS: &[IdPattern] = &[IdPattern::Prefix("tmp"), IdPattern::Prefix("test-"), IdPattern::Contains("gptme-evals-")];

/// Whether gptme counts conversation `chat_id` as a test or eval conversation (hidden by default).
pub fn is_test(chat_id: &ChatId) -> bool {
    is_test_id(chat_id.as_str())
}

/// [`is_test`] of an id not yet checked as a [`ChatId`].
pub fn is_test_id(chat_id: &str) -> bool {
    TEST_IDS.iter().any(|p| match p {
        IdPattern::Prefix(s) => chat_id.starts_with(s),
        IdPattern::Contains(s) => chat_id.contains(s),
    })
}

/// An SQL condition, true exactly when the text in `column` is a test id by [`is_test_id`]:
/// `(glob('tmp*', column) OR …)` (SQLite's `column GLOB 'tmp*'`, in the function form the
/// store's PostgreSQL schema also has). `column` is an SQL expression (e.g. `c.chat_id`), not
/// data.
pub fn test_ids_sql(column: &str) -> String {
    let glob = |s: &str| -> String {
        // GLOB's metacharacters match themselves inside brackets; quotes are doubled.
        s.chars()
            .map(|c| match c {
                '*' | '?' | '[' => format!("[{c}]"),
                '\'' => "''".to_owned(),
                c => c.to_string(),
            })
            .collect()
    };
    let terms: Vec<String> = TEST_IDS
        .iter()
        .map(|p| match p {
            IdPattern::Prefix(s) => format!("glob('{}*', {column})", glob(s)),
            IdPattern::Contains(s) => format!("glob('*{}*', {column})", glob(s)),
        })
        .collect();
    format!("({})", terms.join(" OR "))
}

/// gptme's logs root: `$GPTME_LOGS_HOME`, else `$XDG_DATA_HOME/gptme/logs`, else
/// `~/.local/share/gptme/logs` (an empty variable counts as unset). `None` without a home.
pub fn default_logs_root() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("GPTME_LOGS_HOME").or_else(|| var("XDG_DATA_HOME").map(|d| d.join("gptme/logs"))).or_else(|| var("HOME").map(|h| h.join(".local/share/gptme/logs")))
}

/// Whether `dir` (a directory under a logs root) is a conversation: it holds a
/// `conversation.jsonl` (of any type; a link is not followed). gptme lists no other.
pub fn is_conversation_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(MAIN_TRANSCRIPT)).is_ok()
}

/// The conversation directories of a logs root — its subdirectories that are conversations
/// ([`is_conversation_dir`]), sorted by name — and, separately, its other subdirectories.
pub fn conversation_dirs(logs_root: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut conversations = Vec::new();
    let mut others = Vec::new();
    for entry in std::fs::read_dir(logs_root)? {
        let entry = entry?;
        let path = entry.path();
        if !entry.file_type()?.is_dir() {
            continue;
        }
        if is_conversation_dir(&path) {
            conversations.push(path);
        } else {
            others.push(path);
        }
    }
    conversations.sort();
    others.sort();
    Ok((conversations, others))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_gptme_paths() {
        assert_eq!(classify("conversation.jsonl"), Some((DocumentKind::Branch, "main".into())));
        assert_eq!(classify("events.jsonl"), Some((DocumentKind::Events, "main".into())));
        assert_eq!(classify("lossless.jsonl"), Some((DocumentKind::Lossless, "lossless".into())));
        assert_eq!(classify("conv-checkpoints.jsonl"), Some((DocumentKind::Bookmarks, "conv-checkpoints".into())));
        assert_eq!(classify("branches/a.b.jsonl"), Some((DocumentKind::Branch, "a.b".into())));
        assert_eq!(classify("branches/x/events.jsonl"), Some((DocumentKind::Events, "x".into())));
        assert_eq!(classify("views/compacted-001.jsonl"), Some((DocumentKind::View, "compacted-001".into())));
        assert_eq!(classify("views/.current"), None);
        assert_eq!(classify("branches/.jsonl"), None);
        assert_eq!(classify("branches/x/y.jsonl"), None);
        assert_eq!(classify("config.toml"), None);
        assert_eq!(classify("files/abc.png"), None);
        assert_eq!(classify("workspace/conversation.jsonl"), None);
    }

    #[test]
    fn built_paths_classify_back() {
        for name in ["main", "alt", "a.b", "main-edit-0", "x-conflict-2", "é ü"] {
            assert_eq!(classify(&branch_path(name)), Some((DocumentKind::Branch, name.into())), "{name}");
            assert_eq!(classify(&events_path(name)), Some((DocumentKind::Events, name.into())), "{name}");
            assert_eq!(events_path_of_transcript(&branch_path(name)), Some(events_path(name)));
            assert_eq!(counts_as_branch(&branch_path(name)), name != "main");
            if name != "main" {
                assert_eq!(classify(&view_path(name)), Some((DocumentKind::View, name.into())), "{name}");
            }
        }
        assert_eq!(branch_path("main"), "conversation.jsonl");
        assert_eq!(branch_path("alt"), "branches/alt.jsonl");
        assert_eq!(events_path("main"), "events.jsonl");
        assert_eq!(events_path("alt"), "branches/alt/events.jsonl");
        assert_eq!(events_lock_path("main"), ".events.jsonl.lock");
        assert_eq!(events_lock_path("alt"), "branches/alt/.events.jsonl.lock");
        assert_eq!(events_dir("main"), "");
        assert_eq!(events_path_of_transcript("views/v.jsonl"), None);
        assert_eq!(events_path_of_transcript("branches/main.jsonl"), None);
        assert_eq!(classify("branches/main.jsonl"), None, "gptme never loads it: not main");
        assert_eq!(classify("branches/main/events.jsonl"), None, "gptme never writes it: not main's events");
        assert_eq!(attachment_path("0123456789abcdef", ".png"), "files/0123456789abcdef.png");
        assert!(is_attachment("files/0123456789abcdef.png") && !is_attachment("files") && !is_attachment("filesx/a"));
        assert!(!counts_as_branch("branches/alt/events.jsonl") && !counts_as_branch("views/v.jsonl"));
    }

    #[test]
    fn backup_and_conflict_names() {
        assert_eq!(backup_prefix("main", Backup::Edit), "main-edit-");
        assert_eq!(backup_name("alt", Backup::Undo, 3), "alt-undo-3");
        assert_eq!(conflict_branch("main", 1), "main-conflict-1");
        assert_eq!(branch_path(&conflict_branch("alt", 2)), "branches/alt-conflict-2.jsonl");
        assert_eq!(conflict_view_path("compacted-001", 1), "views/compacted-001-conflict-1.jsonl");
        assert_eq!(conflict_file_path("config.toml", 1), "config.toml.conflict-1");
    }

    #[test]
    fn the_marker_names_a_view_as_gptme_reads_it() {
        assert_eq!(active_view_name(b"compacted-001\n"), Some("compacted-001".into()));
        assert_eq!(active_view_name(b"  v \t\n"), Some("v".into()));
        for bad in [&b""[..], b"\n", b"  ", b"a/b", b"..\\x", b"../v"] {
            assert_eq!(active_view_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_loaded_log_is_the_active_view_on_main_only() {
        let exists = |v: &str| v == "compacted-001";
        let marker = Some(&b"compacted-001\n"[..]);
        assert_eq!(loaded_log("main", marker, exists), LoadedLog::View("compacted-001".into()));
        assert_eq!(loaded_log("main", marker, exists).path(), "views/compacted-001.jsonl");
        assert_eq!(loaded_log("main", marker, exists).document(), (DocumentKind::View, "compacted-001"));
        // Another branch never restores the view; a marker naming no view is ignored.
        assert_eq!(loaded_log("alt", marker, exists), LoadedLog::Branch("alt".into()));
        assert_eq!(loaded_log("main", Some(b"gone\n"), exists), LoadedLog::Branch("main".into()));
        assert_eq!(loaded_log("main", Some(b"\n"), exists), LoadedLog::Branch("main".into()));
        assert_eq!(loaded_log("main", None, exists), LoadedLog::Branch("main".into()));
        assert_eq!(loaded_log("main", None, exists).path(), "conversation.jsonl");
    }

    #[test]
    fn test_ids() {
        let id = |s: &str| ChatId::new(s).unwrap();
        assert!(is_test(&id("tmp123")));
        assert!(is_test(&id("test-x")));
        assert!(is_test(&id("x-gptme-evals-y")));
        assert!(!is_test(&id("testing")));
    }

    /// The SQL condition and the Rust rule agree on every id, including ones holding GLOB's
    /// metacharacters, quotes and non-ASCII text.
    #[test]
    fn the_sql_test_condition_agrees_with_is_test() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let sql = format!("SELECT {} FROM (SELECT ?1 AS chat_id)", test_ids_sql("chat_id"));
        let mut ids: Vec<String> = Vec::new();
        let parts = ["", "tmp", "TMP", "tm", "test-", "test", "Test-", "gptme-evals-", "gptme-evals", "x", "*", "?", "[", "]", "'", "é", "-", " "];
        for a in parts {
            for b in parts {
                for c in ["", "tmp", "-gptme-evals-1", "z"] {
                    ids.push(format!("{a}{b}{c}"));
                }
            }
        }
        assert!(ids.len() > 1000);
        let mut stmt = conn.prepare(&sql).unwrap();
        for id in &ids {
            let sql_says: bool = stmt.query_row([id], |r| r.get(0)).unwrap();
            assert_eq!(sql_says, is_test_id(id), "{id:?}: SQL {sql_says}");
        }
        assert_eq!(test_ids_sql("c.chat_id"), "(glob('tmp*', c.chat_id) OR glob('test-*', c.chat_id) OR glob('*gptme-evals-*', c.chat_id))");
    }

    #[test]
    fn finds_conversation_directories() {
        let root = tempfile::tempdir().unwrap();
        for (name, transcript) in [("b", true), ("a", true), ("empty", false)] {
            std::fs::create_dir(root.path().join(name)).unwrap();
            if transcript {
                std::fs::write(root.path().join(name).join(MAIN_TRANSCRIPT), "").unwrap();
            }
        }
        std::fs::write(root.path().join("file"), "").unwrap();
        let (conversations, others) = conversation_dirs(root.path()).unwrap();
        assert_eq!(conversations, [root.path().join("a"), root.path().join("b")]);
        assert_eq!(others, [root.path().join("empty")]);
    }

    /// gptme counts what `glob("branches/*.jsonl")` finds (checked against Python's pathlib:
    /// `.jsonl` and `main.jsonl` are found too); the Rust rule and its SQL agree on every case.
    #[test]
    fn the_branch_count_is_gptmes_glob_in_rust_and_in_sql() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let sql = format!("SELECT {}", counts_as_branch_sql("?1"));
        for (rel, counts) in [
            ("branches/a.jsonl", true),
            ("branches/main.jsonl", true),
            ("branches/.jsonl", true),
            ("branches/a.jsonl.bak", false),
            ("branches/a/events.jsonl", false),
            ("branches/a.jsonl/x.jsonl", false),
            ("conversation.jsonl", false),
            ("views/v.jsonl", false),
            ("branchesx/a.jsonl", false),
        ] {
            assert_eq!(counts_as_branch(rel), counts, "{rel}");
            assert_eq!(conn.query_row(&sql, [rel], |r| r.get::<_, bool>(0)).unwrap(), counts, "SQL: {rel}");
        }
    }
}
