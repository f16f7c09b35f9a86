//! What the command line names, checked against the store before a command runs.
//!
//! Invariant: a conversation that the store does not have is refused with the closest chat ids
//! it has ("did you mean"), and a branch (`--branch`, `--from`, `diff A B`) that the named
//! conversation does not have with the branches it has, before anything is changed; the
//! commands' own errors stay as the last word for everything else.

use super::Failure;
use sessiondb::store::{queries, sources, Store, StoreError};

/// At most this many ids are suggested.
const SUGGESTED: usize = 3;

/// Refuses `chat_id` when the store has no such conversation, naming the closest ones.
pub fn check_conversation(store: &Store, chat_id: &str) -> Result<(), Failure> {
    let conn = store.connection()?;
    match sources::resolve(&conn, chat_id) {
        Err(StoreError::NoConversation(_)) => {}
        _ => return Ok(()),
    }
    let close = closest(chat_id, &queries::chat_ids(&conn)?);
    let hint = match close.as_slice() {
        [] => "`sessiondb list` lists them".to_owned(),
        [one] => format!("did you mean {one}?"),
        many => format!("did you mean one of {}?", many.join(", ")),
    };
    Err(Failure(format!("no conversation {chat_id:?} in the store; {hint}")))
}

/// Refuses `branch` when conversation `chat_id` (which the store has) has no such branch,
/// naming the branches it has. No branch at all is no answer: the conversation was being
/// replaced (a sync reading it again whole gives it a new row between this check's two reads),
/// and the command's own check, in its transaction, decides.
pub fn check_branch(store: &Store, chat_id: &str, branch: &str) -> Result<(), Failure> {
    let conn = store.connection()?;
    let Ok(branches) = queries::branch_names(&conn, chat_id) else { return Ok(()) };
    if branches.is_empty() || branches.iter().any(|b| b == branch) {
        return Ok(());
    }
    Err(Failure(format!("conversation {chat_id:?} has no branch {branch:?}; its branches are {}", branches.join(", "))))
}

/// The ids of `ids` closest to `given`, closest first: those that hold it, or that it holds,
/// then those within a few edits of it (clap's measure for suggestions, Jaro similarity
/// above 0.8).
pub fn closest(given: &str, ids: &[String]) -> Vec<String> {
    let mut scored: Vec<(f64, &String)> = ids
        .iter()
        .map(|id| {
            let contains = !given.is_empty() && (id.contains(given) || given.contains(id.as_str()));
            (if contains { 1.0 } else { strsim::jaro(given, id) }, id)
        })
        .filter(|(score, _)| *score > 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(SUGGESTED).map(|(_, id)| id.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_ids_are_suggested() {
        let ids: Vec<String> = ["2026-07-01-basic-chat", "2026-07-09-named-chat", "plain-id", "中文对话"].iter().map(|s| s.to_string()).collect();
        assert_eq!(closest("2026-07-01-basic-caht", &ids)[0], "2026-07-01-basic-chat");
        assert_eq!(closest("basic", &ids), ["2026-07-01-basic-chat"]);
        assert!(closest("something-else-entirely", &ids).is_empty());
    }
}
