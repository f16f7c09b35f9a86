//! An ordered conversation: gptme's immutable `Log`.
//!
//! Every operation returns a new `Log` and leaves the receiver untouched, so a caller holding an
//! old log (a branch point, an undo backup) keeps exactly what it had.

use super::message::Message;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Log {
    messages: Vec<Message>,
}

impl Log {
    pub fn new(messages: Vec<Message>) -> Log {
        Log { messages }
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// A new log with `message` added at the end.
    pub fn append(&self, message: Message) -> Log {
        let mut messages = self.messages.clone();
        messages.push(message);
        Log { messages }
    }

    /// A new log without the last message (an empty log stays empty).
    pub fn pop(&self) -> Log {
        let mut messages = self.messages.clone();
        messages.pop();
        Log { messages }
    }

    /// The index of the first position where the two logs differ by role and content, or
    /// `None` when they are equal. This is where gptme's branch diff starts.
    pub fn first_difference(&self, other: &Log) -> Option<usize> {
        let common = self.messages.iter().zip(&other.messages).take_while(|(a, b)| a == b).count();
        if common == self.len() && common == other.len() {
            None
        } else {
            Some(common)
        }
    }

    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    fn m(content: &str) -> Message {
        Message::new(Role::User, content, None)
    }

    #[test]
    fn append_and_pop_return_new_logs() {
        let empty = Log::default();
        let one = empty.append(m("a"));
        let two = one.append(m("b"));
        assert_eq!((empty.len(), one.len(), two.len()), (0, 1, 2));
        assert_eq!(two.pop(), one);
        assert_eq!(empty.pop(), empty);
    }

    #[test]
    fn first_difference() {
        let a = Log::new(vec![m("x"), m("y")]);
        assert_eq!(a.first_difference(&a.clone()), None);
        assert_eq!(a.first_difference(&Log::new(vec![m("x")])), Some(1));
        assert_eq!(a.first_difference(&Log::new(vec![m("z")])), Some(0));
    }
}
