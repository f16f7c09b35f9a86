//! Moving conversations between gptme's directories and the store: [`ingest`] reads
//! directories in, [`materialise`] writes them back out, both through [`safe_fs`]'s link-safe
//! filesystem primitives, under gptme's own process lock ([`gptme_lock`]).

pub mod acknowledged;
pub mod dirtx;
pub mod fsutil;
pub mod gptme_lock;
pub mod incremental;
pub mod ingest;
pub mod materialise;
pub mod pass;
pub mod safe_fs;
pub mod watch;
pub mod pending;
pub mod state;
pub mod watermark;
