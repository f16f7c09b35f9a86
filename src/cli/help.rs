//! `sessiondb --help` laid out for a person at a terminal: the commands in groups, as git and
//! gh list theirs, and every line of every command's help wrapped to the terminal's width.
//!
//! Invariant: every command is listed exactly once — one not named in [`GROUPS`] is listed under
//! "Other" rather than left out — and no line of the grouped list is wider than the width,
//! but for a single word longer than the room left for it.

use clap::Command;

/// The groups of `sessiondb --help`, in order, each with its commands in order.
const GROUPS: &[(&str, &[&str])] = &[
    ("Read", &["list", "show", "read", "search", "stats", "branches", "diff", "checkpoints", "next"]),
    (
        "Change (store and gptme's directory together)",
        &["new", "append", "undo", "edit", "branch", "view", "fork", "checkpoint", "backtrack", "rename", "rm", "clean", "recover"],
    ),
    ("Keep in step with gptme's logs", &["import", "sync", "export", "archive", "restore"]),
    ("Serve", &["serve", "mcp"]),
    ("Store", &["doctor", "backup", "compact", "secrets"]),
    ("Set up", &["completions", "man"]),
];

/// The widest help is this many cells, however wide the terminal: longer lines are hard to read.
const MAX_WIDTH: usize = 100;

/// `cmd` (sessiondb's own command line) with its help wrapped to the terminal's width (or
/// `$COLUMNS`) and, at the top level, its commands listed in groups.
pub(crate) fn laid_out(cmd: Command) -> Command {
    let width = super::terminal_width(std::io::IsTerminal::is_terminal(&std::io::stdout())).min(MAX_WIDTH);
    let cmd = cmd.term_width(width);
    let header = cmd.get_styles().get_header();
    let heading = |text: &str| format!("{header}{text}:{header:#}");
    let listing = grouped(&cmd, width, &heading);
    let template = format!("{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{}\n\n{}\n{{options}}{{after-help}}", listing.trim_end(), heading("Options"));
    cmd.help_template(template)
}

/// The commands of `cmd`, group by group: `  name  what it does`, the description wrapped under
/// itself.
fn grouped(cmd: &Command, width: usize, heading: &dyn Fn(&str) -> String) -> String {
    let commands: Vec<&Command> = cmd.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help").collect();
    let named = |name: &str| commands.iter().copied().find(|c| c.get_name() == name);
    let mut groups: Vec<(&str, Vec<&Command>)> = GROUPS.iter().map(|(title, names)| (*title, names.iter().filter_map(|n| named(n)).collect())).collect();
    let others: Vec<&Command> = commands.iter().copied().filter(|c| !GROUPS.iter().any(|(_, names)| names.contains(&c.get_name()))).collect();
    groups.push(("Other", others));
    let name_width = commands.iter().map(|c| c.get_name().len()).max().unwrap_or(0);
    let indent = 2 + name_width + 2;
    let mut out = String::new();
    for (title, members) in groups.into_iter().filter(|(_, members)| !members.is_empty()) {
        out.push_str(&heading(title));
        out.push('\n');
        for c in members {
            let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
            let lines = wrap(&about, width.saturating_sub(indent).max(20));
            out.push_str(&format!("  {:name_width$}  {}\n", c.get_name(), lines.first().map_or("", String::as_str)));
            for line in lines.iter().skip(1) {
                out.push_str(&format!("{:indent$}{line}\n", ""));
            }
        }
        out.push('\n');
    }
    out
}

/// `text`'s words in lines of at most `width` characters (a longer word alone on its line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wraps_at_word_boundaries_within_the_width() {
        assert_eq!(wrap("one two three four", 9), ["one two", "three", "four"]);
        assert_eq!(wrap("a-very-long-word b", 5), ["a-very-long-word", "b"]);
        assert!(wrap("", 10).is_empty());
    }
}
