//! `sessiondb read CHAT_ID`: gptme's `chats read` (one line per message), or with `--full`
//! whole messages rendered for a terminal.
//!
//! Invariant: a message's number is its place in the branch's file, counted from 0 with every
//! line (the system prompt gptme begins with is 0, and hidden or left-out system messages keep
//! theirs), the number `search` and the MCP tools give a match: `read --start N` shows the
//! message a search found as message N. A page that stops before the end says so, and where
//! the next one starts.

use std::io::{IsTerminal, Write};

use super::term::{visible, visible_line};
use super::Failure;
use sessiondb::model::{Message, Role};
use sessiondb::render::role_label;
use sessiondb::store::{queries, Store};

#[derive(clap::Args)]
pub struct Args {
    /// The conversation
    chat_id: String,
    /// At most N messages; 0 for all of them
    #[arg(short = 'n', long = "limit", default_value_t = 20)]
    limit: usize,
    /// Start from message K: its place in the branch's file, from 0 (the system prompt), as
    /// `search` numbers its matches
    #[arg(long, value_name = "K")]
    start: Option<usize>,
    /// Messages of context before --start
    #[arg(short = 'c', long = "context", default_value_t = 0)]
    context: usize,
    /// Include system messages
    #[arg(long)]
    system: bool,
    /// The branch [default: main]; main is what gptme loads: the active view when one is active
    #[arg(long)]
    branch: Option<String>,
    /// Whole messages, with code fences, instead of one line each
    #[arg(long)]
    full: bool,
    #[command(flatten)]
    secrets: super::SecretsArg,
}

/// Python's `textwrap.shorten(text, width, placeholder="...")`: whitespace collapsed, whole
/// words kept while the placeholder still fits.
fn shorten(text: &str, width: usize) -> String {
    let words: Vec<&str> = sessiondb::codec::pystr::split(text).collect();
    let collapsed = words.join(" ");
    if collapsed.chars().count() <= width {
        return collapsed;
    }
    let mut line = String::new();
    for w in &words {
        let extra = if line.is_empty() { 0 } else { 1 };
        if line.chars().count() + extra + w.chars().count() + 3 > width {
            break;
        }
        if extra == 1 {
            line.push(' ');
        }
        line.push_str(w);
    }
    format!("{line}...")
}

/// gptme's ✅/❌ for system messages reporting success or failure.
fn status(m: &Message, text: &str) -> &'static str {
    if m.role != Role::System {
        return "";
    }
    let first = text.split('\n').next().unwrap_or("").to_lowercase();
    let words: Vec<&str> = first.split_whitespace().take(3).collect();
    if first.starts_with("saved") || first.starts_with("appended") || words.iter().any(|w| *w == "success" || *w == "successfully") {
        "✅ "
    } else if first.starts_with("error") || first.starts_with("failed") {
        "❌ "
    } else {
        ""
    }
}

fn strip_think_sig(content: &str) -> String {
    let mut out = String::new();
    let mut rest = content;
    while let Some(i) = rest.find("<!--") {
        let after = &rest[i + 4..];
        if after.trim_start().starts_with("think-sig:") {
            if let Some(end) = after.find("-->") {
                out.push_str(&rest[..i]);
                rest = after[end + 3..].trim_start();
                continue;
            }
        }
        out.push_str(&rest[..i + 4]);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// One line as gptme's `Message.format(max_length=100)` prints it.
fn one_line(m: &Message, width: usize) -> String {
    // Cut at the first newline or 100 characters, whichever comes first (character indexes,
    // as Python's), marking the cut with "...".
    let chars: Vec<char> = m.content.chars().collect();
    let cut = chars.iter().position(|&c| c == '\n').map_or(100, |nl| nl.min(100)).min(chars.len());
    let mut content: String = chars[..cut].iter().collect();
    if cut < chars.len() {
        content.push_str("...");
    }
    let text = strip_think_sig(&content);
    if text.is_empty() {
        return String::new();
    }
    let p = role_label(&m.role);
    let max_len = width.saturating_sub(p.chars().count());
    let flat = text.replace('\n', "\\n");
    let mut output = shorten(&flat, max_len);
    if output.chars().count() < 20 && flat.chars().count() > max_len {
        output = flat.chars().take(max_len).collect::<String>() + "...";
    }
    visible(&format!("{p}: {}{}", status(m, &text), output.trim_end())).into_owned()
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let branch = args.branch.as_deref().unwrap_or(sessiondb::layout::MAIN);
    let (_, doc) = sessiondb::sync::document::loaded(&conn, &args.chat_id, branch)?;
    let name = queries::conversation_summary(&conn, &args.chat_id)?.name;
    let limit = queries::at_most(args.limit).unwrap_or(usize::MAX);
    // Only as many lines are read as the page needs (and one more message, to tell whether
    // more follow): a long conversation costs no more memory.
    let first = args.start.map_or(0, |k| k.saturating_sub(args.context));
    let (mut messages, next): (Vec<(usize, Message)>, Option<usize>) = queries::with_document_lines(&conn, doc.id, first as i64, |lines| {
        let mut shown = (first..).zip(lines).filter_map(|(n, l)| Some((n, l.message?))).filter(|(_, m)| args.system || m.role != Role::System);
        let page: Vec<(usize, Message)> = shown.by_ref().take(limit).collect();
        (page, shown.next().map(|(n, _)| n))
    })?;
    for (_, m) in &mut messages {
        args.secrets.shown().apply(&mut m.content);
    }
    let terminal = std::io::stdout().is_terminal();
    let colour = terminal && std::env::var_os("NO_COLOR").is_none();
    let width = super::terminal_width(terminal);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result: std::io::Result<()> = (|| {
        writeln!(out, "Reading conversation: {} ({})", visible_line(&name), visible_line(&args.chat_id))?;
        let mut hidden = 0;
        // With --full, a rule the width of the terminal (at most 80) sets a message of several
        // lines apart from its neighbours, so that where one ends and the next begins is plain.
        let rule = "─".repeat(width.clamp(20, 80));
        let rule = if colour { format!("\x1b[2m{rule}\x1b[0m") } else { rule };
        let mut previous_multiline = None;
        for (n, m) in &messages {
            if args.full {
                if m.hide {
                    hidden += 1;
                    continue;
                }
                let multiline = m.content.trim_end().contains('\n');
                if previous_multiline.is_some_and(|p| p || multiline) {
                    writeln!(out, "{rule}")?;
                }
                previous_multiline = Some(multiline);
                writeln!(out, "{n}. {}", render_full(m, colour))?;
            } else {
                writeln!(out, "{n}. {}", one_line(m, width))?;
            }
        }
        if hidden > 0 {
            writeln!(out, "Skipped {hidden} hidden system messages (--system --full shows them; hidden ones stay hidden)")?;
        }
        let id = visible_line(&args.chat_id);
        let branch = args.branch.as_deref().map(|b| format!(" --branch {}", visible_line(b))).unwrap_or_default();
        if let Some(next) = next {
            writeln!(out, "More messages follow: `sessiondb read {id}{branch} --start {next}` reads on (`-n 0` reads them all)")?;
        } else if messages.is_empty() && first >= doc.line_count as usize && first > 0 {
            writeln!(
                out,
                "No message {first}: the branch's messages are numbered 0 to {} (`sessiondb read {id}{branch}` reads from the first)",
                (doc.line_count as usize).saturating_sub(1)
            )?;
        } else if messages.is_empty() && !args.system {
            writeln!(out, "No messages but system messages from {first} on (--system shows them)")?;
        }
        Ok(())
    })();
    // A reader that went away (`| head`) ends the process by SIGPIPE (see src/main.rs).
    result.map(|_| 0).map_err(Failure::from)
}

/// A whole message for a terminal: the role coloured, code fences set off with their language.
fn render_full(m: &Message, colour: bool) -> String {
    let (open, close) = if colour {
        let code = match m.role {
            Role::User => "1;32",
            Role::Assistant => "1;34",
            _ => "1;33",
        };
        (format!("\x1b[{code}m"), "\x1b[0m".to_owned())
    } else {
        (String::new(), String::new())
    };
    // Made visible before the colour codes go in: those are the only escapes written.
    let text = visible(&strip_think_sig(&m.content)).into_owned();
    let mut body = String::new();
    for (i, block) in text.split("```").enumerate() {
        if i % 2 == 0 {
            body.push_str(block);
        } else {
            let (lang, code) = block.split_once('\n').unwrap_or((block, ""));
            if colour {
                body.push_str(&format!("```\x1b[4;34m{lang}\x1b[0m\n\x1b[2m{}\x1b[0m\n```", code.trim_end()));
            } else {
                body.push_str(&format!("```{lang}\n{}\n```", code.trim_end()));
            }
        }
    }
    let multiline = text.contains('\n');
    format!("{open}{}{close}: {}{}{}", visible_line(&role_label(&m.role)), status(m, &text), if multiline { "\n" } else { "" }, body.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_like_textwrap() {
        assert_eq!(shorten("hello   world", 20), "hello world");
        assert_eq!(shorten("hello world again", 12), "hello...");
        assert_eq!(shorten("one two three four", 14), "one two...");
    }
}
