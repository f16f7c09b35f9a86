//! `sessiondb backup DEST`: a consistent copy of the store, taken while others write
//! ([`sessiondb::store::backup`]).

use super::term::say;
use super::Failure;
use sessiondb::store::backup;
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// Where the copy goes: a new file (an SQLite store of its own, opened with `--db DEST`)
    #[arg(value_name = "DEST")]
    dest: std::path::PathBuf,
    /// Replace DEST if something is there already
    #[arg(long)]
    force: bool,
    /// Print what was copied as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let made = backup::backup(store, &args.dest, args.force)?;
    if args.json {
        let out = serde_json::json!({
            "path": made.path.display().to_string(),
            "bytes": made.bytes,
            "conversations": made.conversations,
            "messages": made.messages,
            "seconds": (made.seconds * 1000.0).round() / 1000.0,
        });
        super::print_json(&out);
    } else {
        say!(
            "backed up {} conversations, {} messages ({}) to {} in {:.1} s; open it with `sessiondb --db {}`, or copy it over the store while no sessiondb runs (the ranking index is built again by its first search)",
            super::grouped(made.conversations),
            super::grouped(made.messages),
            super::human_bytes(made.bytes),
            made.path.display(),
            made.seconds,
            made.path.display()
        );
    }
    Ok(0)
}
