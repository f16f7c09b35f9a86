//! `sessiondb show CHAT_ID [--branch B] [--json]`: with `--json` the stored lines exactly,
//! else the messages for people, control characters made visible (see `term`); either way
//! with secrets masked unless `--show-secrets` (in a line, where its JSON spells them).

use std::io::Write;

use super::term::{visible, visible_line};
use super::Failure;
use sessiondb::secrets::{mask_json_line, Shown};
use sessiondb::store::{queries, Store};

#[derive(clap::Args)]
pub struct Args {
    /// The conversation
    chat_id: String,
    /// The branch to show
    #[arg(long, default_value = "main")]
    branch: String,
    /// Print the messages as gptme JSONL lines, exactly as stored: JSON Lines (one object a
    /// line, as gptme's files hold them), not the one pretty-printed document the other
    /// commands' --json print
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    secrets: super::SecretsArg,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let document_id = queries::branch_document(&conn, &args.chat_id, &args.branch)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // One line at a time, from the store to the output: memory does not grow with the branch.
    let result = queries::with_document_lines(&conn, document_id, 0, |lines| -> std::io::Result<()> {
        let shown = args.secrets.shown();
        for stored in lines {
            // The line's bytes only for `--json`: made from the message, they cost a tenth of reading it.
            let line = if args.json && stored.message.is_some() { stored.line() } else { Vec::new() };
            let Some(mut message) = stored.message else { continue };
            if args.json {
                match shown {
                    Shown::Masked => out.write_all(&mask_json_line(&line, &message.content))?,
                    Shown::AsTheyAre => out.write_all(&line)?,
                }
                out.write_all(b"\n")?;
            } else {
                let mut flags = Vec::new();
                if message.pinned {
                    flags.push("pinned");
                }
                if message.hide {
                    flags.push("hidden");
                }
                let flags = if flags.is_empty() { String::new() } else { format!(" ({})", flags.join(", ")) };
                shown.apply(&mut message.content);
                let stamp = message.timestamp.as_deref().unwrap_or("no timestamp");
                writeln!(out, "{}{} [{}]:", visible_line(message.role.as_str()), flags, visible_line(stamp))?;
                writeln!(out, "{}\n", visible(&message.content))?;
            }
        }
        out.flush()
    })?;
    // A reader that went away (`| head`) ends the process by SIGPIPE (see src/main.rs).
    result.map(|_| 0).map_err(Failure::from)
}
