//! The dependency rule between the library's rooms, checked on the source text.
//!
//! Each room may use only the rooms listed for it below (a room lower in the list never uses a
//! higher one), and `rusqlite` — SQL itself — appears nowhere outside `src/store/`. The command
//! line is the binary's (`src/main.rs` declares `mod cli`), not a room of the library: the
//! library neither declares it nor uses what only the command line needs (clap, clap_complete,
//! clap_mangen, indicatif). Test modules
//! (everything from a file's first `#[cfg(test)]` on) are exempt: a test may build its inputs
//! with anything.

use std::path::{Path, PathBuf};

/// Each room and the rooms it may use. The command line (`src/main.rs`, `src/cli/`) is the top
/// and may use them all.
const ROOMS: &[(&str, &[&str])] = &[
    ("cause", &[]),
    ("secrets", &[]),
    ("model", &["cause"]),
    ("layout", &["cause", "model"]),
    ("fs", &["cause", "model", "layout"]),
    ("codec", &["cause", "model"]),
    ("render", &["cause", "model", "codec", "secrets"]),
    ("store", &["cause", "model", "codec", "fs", "layout", "secrets"]),
    ("sync", &["cause", "model", "codec", "fs", "layout", "render", "store", "secrets"]),
    ("ops", &["cause", "model", "codec", "fs", "layout", "render", "store", "sync", "secrets"]),
    ("serve", &["cause", "model", "codec", "fs", "layout", "render", "store", "sync", "ops", "secrets"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `.rs` files of a room: `src/<room>.rs` and everything under `src/<room>/`.
fn files_of(room: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let single = src().join(format!("{room}.rs"));
    if single.exists() {
        files.push(single);
    }
    let mut pending = vec![src().join(room)];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code lines of a file that count: comments and test modules left out.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .take_while(|(_, line)| line.trim() != "#[cfg(test)]")
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| (i + 1, line.to_owned()))
        .collect()
}

/// The rooms a line names as `crate::<room>`.
fn rooms_named(line: &str) -> Vec<&str> {
    let mut named = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
        named.push(&after[..end]);
        rest = &after[end..];
    }
    named
}

#[test]
fn no_room_uses_a_room_above_it() {
    let known: Vec<&str> = ROOMS.iter().map(|(room, _)| *room).collect();
    let mut wrong = Vec::new();
    for (room, allowed) in ROOMS {
        let files = files_of(room);
        assert!(!files.is_empty(), "room {room} has no source files: is the table above out of date?");
        for file in files {
            for (line_no, line) in code_lines(&file) {
                for named in rooms_named(&line) {
                    if named != *room && known.contains(&named) && !allowed.contains(&named) {
                        wrong.push(format!("{}:{line_no}: {room} uses {named}: {}", file.display(), line.trim()));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the dependency rule (see tests/layering.rs):\n{}", wrong.join("\n"));
}

#[test]
fn every_room_of_the_library_is_in_the_table() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    for line in lib.lines() {
        if let Some(room) = line.trim().strip_prefix("pub mod ").and_then(|r| r.strip_suffix(';')) {
            assert!(ROOMS.iter().any(|(r, _)| *r == room), "src/lib.rs declares room {room}, missing from the dependency table");
        }
    }
}

#[test]
fn sql_stays_in_the_store() {
    let mut wrong = Vec::new();
    let mut rooms: Vec<&str> = ROOMS.iter().map(|(room, _)| *room).filter(|r| *r != "store").collect();
    rooms.push("cli");
    for room in rooms {
        for file in files_of(room) {
            for (line_no, line) in code_lines(&file) {
                if line.contains("rusqlite") {
                    wrong.push(format!("{}:{line_no}: {}", file.display(), line.trim()));
                }
            }
        }
    }
    for (line_no, line) in code_lines(&src().join("main.rs")) {
        if line.contains("rusqlite") {
            wrong.push(format!("src/main.rs:{line_no}: {}", line.trim()));
        }
    }
    assert!(wrong.is_empty(), "rusqlite outside src/store/:\n{}", wrong.join("\n"));
}

#[test]
fn the_command_line_is_not_part_of_the_library() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: Vec<&str> = lib.lines().map(str::trim).filter(|l| !l.starts_with("//")).filter(|l| words(l).windows(2).any(|w| w == ["mod", "cli"])).collect();
    assert!(declared.is_empty(), "src/lib.rs declares the command line (it is src/main.rs's `mod cli`):\n{}", declared.join("\n"));
}

/// The words of a line (identifiers and keywords, split at everything else).
fn words(line: &str) -> Vec<&str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect()
}

#[test]
fn the_library_does_not_use_the_command_line_crates() {
    const CLI_ONLY: &[&str] = &["clap", "clap_complete", "clap_mangen", "indicatif"];
    let mut files = vec![src().join("lib.rs")];
    for (room, _) in ROOMS {
        files.extend(files_of(room));
    }
    let mut wrong = Vec::new();
    for file in files {
        for (line_no, line) in code_lines(&file) {
            if let Some(krate) = CLI_ONLY.iter().find(|k| words(&line).contains(k)) {
                wrong.push(format!("{}:{line_no}: uses {krate}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(wrong.is_empty(), "crates only the command line needs, used in the library:\n{}", wrong.join("\n"));
}
