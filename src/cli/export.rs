//! `sessiondb export --to DIR [CHAT_ID…]`.

use std::path::PathBuf;
use std::time::Instant;

use super::term::{say, tell};
use super::{human_bytes, Failure};
use sessiondb::render::Format;
use sessiondb::secrets::Shown;
use sessiondb::store::{queries, sources, Store};
use sessiondb::sync::document::{write_document, write_document_file};
use sessiondb::sync::materialise::export_conversation;

#[derive(clap::Args)]
pub struct Args {
    /// The logs root to write into; each conversation becomes DIR/<chat id>/
    #[arg(long, value_name = "DIR", required_unless_present = "format")]
    to: Option<PathBuf>,
    /// Instead of directories: one conversation as gptme's editable TOML, as Markdown (gptme's
    /// `chats export` layout) or as a self-contained HTML page (these two with secrets masked)
    #[arg(long, value_parser = ["toml", "markdown", "html"])]
    format: Option<String>,
    /// With --format: the branch [default: main]; main is what gptme loads: the active view
    /// when one is active
    #[arg(long)]
    branch: Option<String>,
    /// With --format: write here (atomically; a link there is replaced, not followed) instead
    /// of standard output; `-` is standard output
    #[arg(short = 'o', long = "output", value_name = "FILE", requires = "format")]
    output: Option<PathBuf>,
    /// Conversations to export [default: all]
    chat_ids: Vec<String>,
    /// Without CHAT_IDs: every conversation of this source (one logs root's), rather than all
    #[arg(long, value_name = "NAME", conflicts_with_all = ["chat_ids", "format"])]
    source: Option<String>,
    // Markdown and HTML mask secrets unless --show-secrets; directories and TOML, gptme's own
    // forms, are always exact.
    #[command(flatten)]
    secrets: super::SecretsArg,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    if let Some(format) = &args.format {
        let [chat_id] = args.chat_ids.as_slice() else {
            return Err(Failure(format!("--format {format} takes exactly one CHAT_ID")));
        };
        let output = args.output.as_deref().filter(|p| *p != std::path::Path::new("-"));
        let format = match format.as_str() {
            "toml" => return super::ops::export_toml(store, chat_id, args.branch.as_deref().unwrap_or(sessiondb::layout::MAIN), output),
            "html" => Format::Html,
            _ => Format::Markdown,
        };
        return document(store, chat_id, format, args.branch.as_deref(), output, args.secrets.shown());
    }
    let to = args.to.expect("required without --format");
    let started = Instant::now();
    let conn = store.connection()?;
    let chat_ids = match (&args.source, args.chat_ids.is_empty()) {
        (Some(name), _) => sources::qualified_chat_ids(&conn, sources::named(&conn, name)?.id)?,
        (None, true) => queries::chat_ids(&conn)?,
        (None, false) => args.chat_ids,
    };
    // Each conversation becomes DIR/<chat id>: two sources' conversations of one chat id cannot
    // both go to one DIR (their files would mix). Refused before anything is written.
    let mut targets: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for name in &chat_ids {
        let Ok(found) = sources::resolve(&conn, name) else { continue }; // reported below
        if let Some(other) = targets.insert(found.chat_id.clone(), found.qualified()).filter(|other| *other != found.qualified()) {
            return Err(Failure(format!(
                "{other} and {} would both be written to {}; export each source to a directory of its own (--source NAME)",
                found.qualified(),
                to.join(&found.chat_id).display()
            )));
        }
    }
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
                tell!("error: {chat_id}: {}", sessiondb::cause::chain(&e));
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
fn document(store: &Store, chat_id: &str, format: Format, branch: Option<&str>, output: Option<&std::path::Path>, shown: Shown) -> Result<i32, Failure> {
    let conn = store.connection()?;
    let branch = branch.unwrap_or(sessiondb::layout::MAIN);
    match output {
        Some(path) => {
            write_document_file(&conn, chat_id, branch, format, shown, path)?;
            say!("Exported conversation to {}", path.display());
        }
        None => {
            // On a terminal, stored control characters are shown escaped; to a pipe or a file
            // the document is exact. A reader that went away (`| head`) ends the process by
            // SIGPIPE (see src/main.rs).
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut out: Box<dyn std::io::Write> =
                if std::io::IsTerminal::is_terminal(&std::io::stdout()) { Box::new(super::term::Visible::new(out)) } else { Box::new(out) };
            write_document(&conn, chat_id, branch, format, shown, &mut out)?;
        }
    }
    Ok(0)
}
