//! The conversation model: immutable [`Message`] values and the [`Log`] that orders them.
//!
//! These types carry gptme's semantics (equality by role and content, concatenation rules,
//! append-returns-a-new-log) and nothing about files or databases: the codec turns them into
//! gptme's bytes, the store into rows.

mod chat_id;
mod json;
mod log;
mod message;
pub mod resume;

pub use chat_id::{ChatId, ChatIdError};
pub use json::Json;
pub use log::Log;
pub use message::{Message, Role, Usage};
