//! Who speaks next when a conversation is resumed: gptme 0.35's `_should_prompt_for_input`.
//!
//! gptme asks the user for input unless the conversation stopped mid-turn; then the model
//! answers straight away (crash recovery). The decision reads only the messages, so it can be
//! made from the store. Every rule of gptme's is here, each with the reason it reports.

use super::Json;
use super::{Message, Role};

/// gptme's `INTERRUPT_CONTENT`.
pub const INTERRUPTED: &str = "Interrupted by user";
/// gptme's `DECLINED_CONTENT`.
pub const DECLINED: &str = "Execution declined by user";
/// gptme's `LLM_REQUEST_FAILED_PREFIX`.
pub const LLM_REQUEST_FAILED: &str = "LLM request failed:";

/// Who speaks next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    User,
    Assistant,
}

/// The rule that decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No messages (budget reminders aside): the user starts.
    Empty,
    /// The last message (budget reminders aside) is the assistant's: its turn is over.
    AssistantSpokeLast,
    /// After the last user or assistant message, a system message without a call id reports an
    /// interrupt, a declined execution, a failed LLM request, or the step limit.
    ReturnedToPrompt,
    /// The last message is pinned.
    PinnedLast,
    /// No user message at all.
    NoUserMessage,
    /// The conversation stopped mid-turn (typically after a user message, or a tool result):
    /// the model answers without asking.
    MidTurn,
}

impl Reason {
    pub fn describe(self) -> &'static str {
        match self {
            Reason::Empty => "the conversation has no messages",
            Reason::AssistantSpokeLast => "the assistant spoke last",
            Reason::ReturnedToPrompt => "an interrupt, declined execution, failed request or step limit returned control to the user",
            Reason::PinnedLast => "the last message is pinned",
            Reason::NoUserMessage => "there is no user message",
            Reason::MidTurn => "the conversation stopped mid-turn, so the model continues (crash recovery)",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Reason::Empty => "empty",
            Reason::AssistantSpokeLast => "assistant_spoke_last",
            Reason::ReturnedToPrompt => "returned_to_prompt",
            Reason::PinnedLast => "pinned_last",
            Reason::NoUserMessage => "no_user_message",
            Reason::MidTurn => "mid_turn",
        }
    }
}

fn metadata_has(m: &Message, key: &str) -> bool {
    matches!(&m.metadata, Some(Json::Object(members)) if members.iter().any(|(k, _)| k == key))
}

/// A system budget reminder for a compacted view: transparent to the decision.
fn is_budget_reminder(m: &Message) -> bool {
    m.role == Role::System && m.call_id.as_deref().unwrap_or("").is_empty() && metadata_has(m, "compaction_reminder_view")
}

/// A resume-only prompt (e.g. a re-applied agent profile): pinned, with `resume_key` metadata.
fn is_resume_prompt(m: &Message) -> bool {
    m.pinned && metadata_has(m, "resume_key")
}

fn returns_to_prompt(m: &Message) -> bool {
    m.role == Role::System
        && m.call_id.as_deref().unwrap_or("").is_empty()
        && (m.content == INTERRUPTED
            || m.content == DECLINED
            || m.content.starts_with(LLM_REQUEST_FAILED)
            || matches!(m.metadata.as_ref().and_then(|md| md.get("max_steps_stop")), Some(Json::Bool(true))))
}

/// Decides who speaks next, with gptme's rules in gptme's order.
pub fn next_speaker(log: &[Message]) -> (Next, Reason) {
    let last = log.last();
    if last.is_some_and(is_resume_prompt) {
        // A resume-only prompt carries no turn: decide as if resume prompts were absent.
        let trimmed: Vec<Message> = log.iter().filter(|m| !metadata_has(m, "resume_key")).cloned().collect();
        return next_speaker(&trimmed);
    }
    let effective_last = log.iter().rev().find(|m| !is_budget_reminder(m));
    let returned = log.iter().rev().take_while(|m| m.role != Role::Assistant && m.role != Role::User).any(returns_to_prompt);
    let reason = match effective_last {
        None => Some(Reason::Empty),
        Some(m) if m.role == Role::Assistant => Some(Reason::AssistantSpokeLast),
        _ if returned => Some(Reason::ReturnedToPrompt),
        _ if last.is_some_and(|m| m.pinned) => Some(Reason::PinnedLast),
        _ if !log.iter().any(|m| m.role == Role::User) => Some(Reason::NoUserMessage),
        _ => None,
    };
    match reason {
        Some(reason) => (Next::User, reason),
        None => (Next::Assistant, Reason::MidTurn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::json::parse;

    fn m(role: Role, content: &str) -> Message {
        Message::new(role, content, None)
    }

    fn meta(mut msg: Message, json: &str) -> Message {
        msg.metadata = Some(parse(json).unwrap().value);
        msg
    }

    #[test]
    fn every_rule() {
        use Next::*;
        use Reason::*;
        let sys = m(Role::System, "system prompt");
        let user = m(Role::User, "hi");
        let asst = m(Role::Assistant, "hello");
        let cases: Vec<(Vec<Message>, (Next, Reason))> = vec![
            (vec![], (User, Empty)),
            (vec![sys.clone(), user.clone(), asst.clone()], (User, AssistantSpokeLast)),
            (vec![sys.clone(), user.clone()], (Assistant, MidTurn)),
            (vec![sys.clone(), user.clone(), asst.clone(), m(Role::System, "tool output")], (Assistant, MidTurn)),
            (vec![user.clone(), m(Role::System, INTERRUPTED)], (User, ReturnedToPrompt)),
            // An interrupt followed by hook messages still returns to the prompt.
            (vec![user.clone(), m(Role::System, INTERRUPTED), m(Role::System, "hook: lint ok")], (User, ReturnedToPrompt)),
            (vec![user.clone(), m(Role::System, DECLINED)], (User, ReturnedToPrompt)),
            (vec![user.clone(), m(Role::System, "LLM request failed: 500")], (User, ReturnedToPrompt)),
            (vec![user.clone(), meta(m(Role::System, "stop"), r#"{"max_steps_stop": true}"#)], (User, ReturnedToPrompt)),
            // A newer user turn supersedes the marker.
            (vec![m(Role::System, INTERRUPTED), user.clone()], (Assistant, MidTurn)),
            // Tool output with a call id is never a control marker.
            (
                vec![user.clone(), {
                    let mut t = m(Role::System, INTERRUPTED);
                    t.call_id = Some("c".into());
                    t
                }],
                (Assistant, MidTurn),
            ),
            (
                vec![user.clone(), {
                    let mut p = m(Role::User, "pinned");
                    p.pinned = true;
                    p
                }],
                (User, PinnedLast),
            ),
            (vec![sys.clone(), m(Role::System, "more")], (User, NoUserMessage)),
            // A budget reminder after the assistant is transparent.
            (vec![user.clone(), asst.clone(), meta(m(Role::System, "budget"), r#"{"compaction_reminder_view": "v"}"#)], (User, AssistantSpokeLast)),
            // A resume prompt after an unanswered user turn: still crash recovery.
            (
                vec![user.clone(), {
                    let mut p = meta(m(Role::System, "profile"), r#"{"resume_key": "k"}"#);
                    p.pinned = true;
                    p
                }],
                (Assistant, MidTurn),
            ),
        ];
        for (log, expected) in cases {
            assert_eq!(next_speaker(&log), expected, "{:?}", log.iter().map(|m| &m.content).collect::<Vec<_>>());
        }
    }
}
