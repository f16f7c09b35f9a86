//! `sessiondb compact`: gives the store's free pages back to the file system, while other
//! processes go on ([`sessiondb::store::compact`]).

use super::term::say;
use super::Failure;
use sessiondb::store::compact;
use sessiondb::store::Store;

#[derive(clap::Args)]
pub struct Args {
    /// Print what was done as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(store: &Store, args: Args) -> Result<i32, Failure> {
    let done = compact::compact(store)?;
    if args.json {
        let out = serde_json::json!({
            "bytes_before": done.bytes_before,
            "bytes_after": done.bytes_after,
            "free_before": done.free_before,
            "free_after": done.free_after,
            "rewritten": done.rewritten,
            "steps": done.steps,
            "seconds": (done.seconds * 1000.0).round() / 1000.0,
        });
        super::print_json(&out);
        return Ok(0);
    }
    let size = super::human_bytes;
    let how = if done.rewritten {
        "the file rewritten once; later compacts give free pages back in small steps".to_owned()
    } else if done.steps > 0 {
        format!("in {} steps", super::grouped(done.steps))
    } else {
        "nothing was free".to_owned()
    };
    say!(
        "compacted the store in {:.1} s: {} → {} ({how}); `sessiondb stats --disk` shows its parts",
        done.seconds,
        size(done.bytes_before),
        size(done.bytes_after)
    );
    Ok(0)
}
