//! An error and its causes as one line of text: the one way errors are worded for people.
//!
//! Library errors name what failed (a path, a conversation) and return what caused it from
//! `source()`, rather than repeating the cause in their own text; [`chain`] joins the levels
//! with `": "`. Some errors (rusqlite's, a few of the standard library's) repeat their cause's
//! text in their own as well: a level whose text the line already holds is left out, so each
//! cause is worded exactly once however an error chooses to carry it.

use std::error::Error;

/// `error` and each of its causes, outermost first, joined by `": "`; a cause whose text is
/// already in the line (the error above it quotes it) is left out.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}")]
    struct Named {
        path: String,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}: quoting its cause")]
    struct Quoting(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error(transparent)]
        Named(#[from] Named),
    }

    #[test]
    fn each_cause_once() {
        let named = || Named { path: "/a/b".into(), source: std::io::Error::other("disk full") };
        assert_eq!(chain(&named()), "/a/b: disk full");
        assert_eq!(chain(&Outer::from(named())), "/a/b: disk full", "a transparent wrapper adds nothing");
        assert_eq!(chain(&Quoting(std::io::Error::other("gone"))), "gone: quoting its cause", "a quoted cause is not repeated");
        assert_eq!(chain(&std::io::Error::other("plain")), "plain");
    }
}
