//! `sessiondb export --to DIR [CHAT_ID…]`.

use std::path::PathBuf;
use std::time::Instant;

use super::{human_bytes, Failure};
use crate::store::{queries, Store};
use crate::sync::materialise::export_conversation;

#[derive(clap::Args)]
pub struct Args {
    /// The logs root to write into; each conversation becomes DIR/<chat id>/
    #[arg(long, value_name = "DIR", required_unless_present = "format")]
    to: Option<PathBuf>,
    /// `toml`: print one branch of one conversation as gptme's editable TOML instead
    #[arg(long, value_parser = ["toml"])]
    format: Option<String>,
    /// With --format toml: the branch
    #[arg(long, default_value = "main")]
    branch: String,
    /// Conversations to export [default: all]
    chat_ids: Vec<String>,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    if args.format.is_some() {
        let [chat_id] = args.chat_ids.as_slice() else {
            return Err(Failure("--format toml takes exactly one CHAT_ID".into()));
        };
        return super::ops::export_toml(store, chat_id, &args.branch);
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
                eprintln!("error: {chat_id}: {e}");
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
