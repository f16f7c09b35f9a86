//! gptme's file formats: message lines (`conversation.jsonl`, branches, views), the event log,
//! conversation checkpoints and `config.toml`, all in Python's JSON dialect ([`json`]).
//!
//! Every decoder here says, for each line, whether the matching encoder reproduces it byte for
//! byte; that single rule is what makes import followed by export lossless.

pub mod bookmarks;
pub mod config;
pub mod events;
pub mod json;
pub mod lines;
pub mod message_line;
pub mod normalise;
pub mod pystr;
pub mod timestamp;
pub mod toml_log;
