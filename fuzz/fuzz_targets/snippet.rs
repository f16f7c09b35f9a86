//! Any text and any query through search's highlighting, literal or by words: `match_spans`
//! and `snippet` never panic, the marks only wrap stored text, a literal match lowered holds
//! the query lowered, and a word match is whole words.
//! Input: two bytes (context lines and whether the query is literal, matches shown), then the
//! query and the content, split at the first NUL; both any UTF-8.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::store::fts::lower;
use sessiondb::store::search::{match_spans, snippet, Highlight, Marks};

fuzz_target!(|data: &[u8]| {
    let [context, matches, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (query, content) = text.split_once('\0').unwrap_or((text, ""));
    let highlight = if context & 0x80 != 0 { Highlight::literal(query) } else { Highlight::words(query) };
    let marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| s.to_owned(), numbered: true };
    let out = snippet(content, &highlight, usize::from(*context % 8), usize::from(*matches % 8), &marks);
    let lines: Vec<&str> = content.split('\n').collect();
    let spans = match_spans(content, &highlight);
    if !spans.is_empty() {
        for shown in out.split('\n').filter(|l| *l != "...") {
            let (number, line) = shown.split_once("| ").expect("a numbered line");
            assert_eq!(line, lines[number.trim().parse::<usize>().expect("a line number") - 1]);
        }
    }
    for (s, e) in spans {
        assert!(s < e && content.is_char_boundary(s) && content.is_char_boundary(e));
        let piece = &content[s..e];
        match &highlight {
            // Alone, a word-final sigma lowers to σ.
            Highlight::Literal(needle) => assert!(lower(piece).replace('ς', "σ").contains(&needle.replace('ς', "σ")), "{piece:?} does not hold {needle:?}"),
            Highlight::Words(_) => {
                let inside = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() && !sessiondb::store::fts::is_cjk(c));
                let (first, last) = (piece.chars().next().unwrap(), piece.chars().next_back().unwrap());
                assert!(sessiondb::store::fts::is_cjk(first) || !inside(content[..s].chars().next_back()), "{piece:?} starts inside a word");
                assert!(sessiondb::store::fts::is_cjk(last) || !inside(content[e..].chars().next()), "{piece:?} ends inside a word");
            }
        }
    }
});
