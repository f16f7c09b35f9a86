//! Python `str` behaviour that gptme's output depends on.

/// Python's `str.isspace()`: Unicode White_Space plus the ASCII separators U+001C–U+001F,
/// which Python counts as whitespace and Rust does not.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `s.split()` (no argument): runs of whitespace separate words; none are empty.
pub fn split(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_space).filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn splits_like_python() {
        assert_eq!(super::split(" a\u{1f}b\u{3000}c \n").collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
