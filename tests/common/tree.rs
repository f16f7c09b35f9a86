//! Comparing directory trees: bytes, modes, modification times, symlink targets, empty
//! directories — everything `diff -r` checks and what it does not.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

#[derive(Debug, PartialEq, Eq)]
pub enum Node {
    Dir { mode: u32, mtime_ns: i64 },
    File { mode: u32, mtime_ns: i64, bytes: Vec<u8> },
    Link { target: std::path::PathBuf, mtime_ns: i64 },
}

/// Every entry below `root` (relative paths), skipping the names in `ignore`.
pub fn snapshot(root: &Path, ignore: &[&str]) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, ignore, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, ignore: &[&str], out: &mut BTreeMap<String, Node>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if ignore.iter().any(|i| rel == *i || rel.ends_with(&format!("/{i}"))) {
            continue;
        }
        let meta = fs::symlink_metadata(&path).unwrap();
        let mtime_ns = meta.mtime() * 1_000_000_000 + meta.mtime_nsec();
        let node = if meta.file_type().is_symlink() {
            Node::Link { target: fs::read_link(&path).unwrap(), mtime_ns }
        } else if meta.is_dir() {
            walk(root, &path, ignore, out);
            Node::Dir { mode: meta.mode() & 0o7777, mtime_ns }
        } else {
            Node::File { mode: meta.mode() & 0o7777, mtime_ns, bytes: fs::read(&path).unwrap() }
        };
        out.insert(rel, node);
    }
}

/// Panics with a readable list of differences between two trees.
pub fn assert_same_tree(expected: &Path, actual: &Path, ignore: &[&str]) {
    compare(expected, actual, ignore, true);
}

/// [`assert_same_tree`], mtimes aside: every path, kind, mode, link target and byte. For a tree
/// recorded from another checkout of the same files (a committed store), whose mtimes were
/// that checkout's.
pub fn assert_same_contents(expected: &Path, actual: &Path, ignore: &[&str]) {
    compare(expected, actual, ignore, false);
}

fn compare(expected: &Path, actual: &Path, ignore: &[&str], mtimes: bool) {
    let timeless = |mut tree: BTreeMap<String, Node>| {
        if !mtimes {
            for node in tree.values_mut() {
                match node {
                    Node::Dir { mtime_ns, .. } | Node::File { mtime_ns, .. } | Node::Link { mtime_ns, .. } => *mtime_ns = 0,
                }
            }
        }
        tree
    };
    let a = timeless(snapshot(expected, ignore));
    let b = timeless(snapshot(actual, ignore));
    let mut problems = Vec::new();
    for (path, node) in &a {
        match b.get(path) {
            None => problems.push(format!("missing: {path}")),
            Some(other) if other != node => problems.push(format!("differs: {path}: {}", describe(node, other))),
            _ => {}
        }
    }
    for path in b.keys().filter(|p| !a.contains_key(*p)) {
        problems.push(format!("unexpected: {path}"));
    }
    assert!(problems.is_empty(), "{} vs {}:\n{}", expected.display(), actual.display(), problems.join("\n"));
}

fn describe(a: &Node, b: &Node) -> String {
    match (a, b) {
        (Node::File { mode: m1, mtime_ns: t1, bytes: b1 }, Node::File { mode: m2, mtime_ns: t2, bytes: b2 }) => {
            let mut parts = Vec::new();
            if m1 != m2 {
                parts.push(format!("mode {m1:o} vs {m2:o}"));
            }
            if t1 != t2 {
                parts.push(format!("mtime {t1} vs {t2}"));
            }
            if b1 != b2 {
                let at = b1.iter().zip(b2).position(|(x, y)| x != y).unwrap_or(b1.len().min(b2.len()));
                parts.push(format!("bytes differ at offset {at} ({} vs {} bytes)", b1.len(), b2.len()));
            }
            parts.join(", ")
        }
        _ => format!("{a:?} vs {b:?}").chars().take(300).collect(),
    }
}

/// The logs root under `dir` with the path the fixtures were generated at before issue 32
/// replaced by the one they name now, in files and link targets, as that change made it.
pub fn neutral_paths(dir: &Path) {
    const OLD: &str = "/work/main/tests/fixtures/gptme-logs";
    const NEW: &str = "/home/you/.local/share/gptme/logs";
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).unwrap().to_string_lossy().into_owned();
            if target.contains(OLD) {
                fs::remove_file(&path).unwrap();
                std::os::unix::fs::symlink(target.replace(OLD, NEW), &path).unwrap();
            }
        } else if meta.is_dir() {
            neutral_paths(&path);
        } else {
            let bytes = fs::read(&path).unwrap();
            if let Ok(text) = std::str::from_utf8(&bytes) {
                if text.contains(OLD) {
                    fs::write(&path, text.replace(OLD, NEW)).unwrap();
                }
            }
        }
    }
}

/// Copies the tree `from` to `to` (a path where nothing is), keeping modes, mtimes and
/// symlinks (`cp -a`).
pub fn copy_tree(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success(), "cp -a {} {}", from.display(), to.display());
}
