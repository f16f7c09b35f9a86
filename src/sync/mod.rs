//! Moving conversations between gptme's directories and the store: [`ingest`] reads
//! directories in, [`materialise`] writes them back out, both through [`fsutil`]'s safe
//! filesystem primitives.

pub mod fsutil;
pub mod ingest;
pub mod materialise;
