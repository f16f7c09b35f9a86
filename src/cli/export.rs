//! `sessiondb export --to DIR [CHAT_ID…]`.

use std::path::PathBuf;
use std::time::Instant;

use super::term::{say, tell};
use super::{human_bytes, Failure};
use sessiondb::store::{queries, Store};
use sessiondb::sync::materialise::export_conversation;

#[derive(clap::Args)]
pub struct Args {
    /// The logs root to write into; each conversation becomes DIR/<chat id>/
    #[arg(long, value_name = "DIR", required_unless_present = "format")]
    to: Option<PathBuf>,
    /// Instead of directories: one conversation as gptme's editable TOML, as Markdown (gptme's
    /// `chats export` layout) or as a self-contained HTML page
    #[arg(long, value_parser = ["toml", "markdown", "html"])]
    format: Option<String>,
    /// With --format: the branch [default: main]; main is what gptme loads: the active view
    /// when one is active
    #[arg(long)]
    branch: Option<String>,
    /// With --format markdown|html: write here (atomically; a link there is replaced, not
    /// followed) instead of standard output; `-` is standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Conversations to export [default: all]
    chat_ids: Vec<String>,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    if let Some(format) = &args.format {
        let [chat_id] = args.chat_ids.as_slice() else {
            return Err(Failure(format!("--format {format} takes exactly one CHAT_ID")));
        };
        if format == "toml" {
            return super::ops::export_toml(store, chat_id, args.branch.as_deref().unwrap_or(sessiondb::layout::MAIN));
        }
        return document(store, chat_id, format, args.branch.as_deref(), args.output.as_deref().filter(|p| *p != std::path::Path::new("-")));
    }
    let to = args.to.expect("required without --format");
    let started = Instant::now();
    let conn = store.connection()?;
    let chat_ids = if args.chat_ids.is_empty() { queries::chat_ids(&conn)? } else { args.chat_ids };
    std::fs::create_dir_all(&to).map_err(|e| Failure(format!("{}: {e}", to.display())))?;
    let (mut files, mut bytes, mut failed) = (0, 0, 0);
    for chat_id in &chat_ids {
        match export_conversation(&conn, chat_id, &to) {
            Ok(stats) => {
                files += stats.files;
                bytes += stats.bytes;
            }
            Err(e) => {
                failed += 1;
                tell!("error: {chat_id}: {e}");
            }
        }
    }
    println!(
        "exported {} conversations ({} failed): {} files, {} in {:.2} s to {}",
        chat_ids.len() - failed,
        failed,
        files,
        human_bytes(bytes),
        started.elapsed().as_secs_f64(),
        to.display()
    );
    Ok(if failed > 0 { 1 } else { 0 })
}

/// `export --format markdown|html`: the conversation as a document.
fn document(store: &Store, chat_id: &str, format: &str, branch: Option<&str>, output: Option<&std::path::Path>) -> Result<i32, Failure> {
    use sessiondb::store::modify;
    let conn = store.connection()?;
    let conv = modify::load_conversation(&conn, chat_id)?;
    let branch = branch.unwrap_or(sessiondb::layout::MAIN);
    let doc = modify::loaded_doc(&conn, conv.id, branch)?.ok_or_else(|| Failure(format!("conversation {chat_id:?} has no branch {branch:?}")))?;
    // As gptme holds them: a message without a timestamp has its file's mtime.
    let mtime_ns = queries::entry_mtime(&conn, conv.id, &doc.path).unwrap_or(0);
    let mtime = mtime_ns.div_euclid(1_000_000_000) as f64 + mtime_ns.rem_euclid(1_000_000_000) as f64 * 1e-9;
    // Message by message from the store to the output: memory does not grow with the
    // conversation. A failed read of the store is reported as itself, and leaves no file.
    let mut failed = None;
    let mut render = |out: &mut dyn std::io::Write| {
        let written = queries::with_document_lines(&conn, doc.id, 0, |lines| {
            let messages = lines.filter_map(|l| l.message).map(|m| sessiondb::ops::normalise_for_rewrite(&m, mtime));
            if format == "html" {
                sessiondb::render::html(chat_id, messages, out)
            } else {
                sessiondb::render::markdown(chat_id, messages, out)
            }
        });
        written.unwrap_or_else(|e| {
            let reason = std::io::Error::other(e.to_string());
            failed = Some(e);
            Err(reason)
        })
    };
    let written = match output {
        Some(path) => {
            let now = sessiondb::fs::meta::now_ns();
            // As any program's `open(O_CREAT)` would: a new file under the umask; a file being
            // replaced keeps its mode.
            let mode = match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_file() => sessiondb::fs::meta::mode_bits(&m),
                _ => sessiondb::fs::meta::new_file_mode(),
            };
            sessiondb::fs::atomic::write_atomic(path, mode, now, render).map(|()| say!("Exported conversation to {}", path.display()))
        }
        None => {
            // On a terminal, stored control characters are shown escaped; to a pipe or a file
            // the document is exact.
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut out: Box<dyn std::io::Write> =
                if std::io::IsTerminal::is_terminal(&std::io::stdout()) { Box::new(super::term::Visible::new(out)) } else { Box::new(out) };
            render(&mut out).and_then(|()| std::io::Write::flush(&mut out))
        }
    };
    if let Some(e) = failed {
        return Err(e.into());
    }
    // A reader that went away (`| head`) ends the process by SIGPIPE (see src/main.rs).
    written.map(|()| 0).map_err(|e| Failure(format!("{}: {e}", output.map_or("standard output".into(), |p| p.display().to_string()))))
}
