//! Any text and any query through search's highlighting: `highlight_terms` and `snippet` never
//! panic, the marks only wrap stored text, and each marked piece folds to text holding a term.
//! Input: two bytes (context lines, matches shown), then the query and the content, split at
//! the first NUL; both any UTF-8.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::store::search::{fold_case, highlight_terms, snippet, Marks};

fuzz_target!(|data: &[u8]| {
    let [context, matches, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let (query, content) = text.split_once('\0').unwrap_or((text, ""));
    let terms = highlight_terms(query);
    let folded: Vec<String> = terms.iter().map(|t| fold_case(t)).collect();
    let pieces = std::cell::RefCell::new(Vec::new());
    let marks = Marks { text: &|s: &str| s.to_owned(), matched: &|s: &str| {
        pieces.borrow_mut().push(s.to_owned());
        s.to_owned()
    } };
    let out = snippet(content, &terms, usize::from(*context % 8), usize::from(*matches % 8), &marks);
    let lines: Vec<&str> = content.split('\n').collect();
    if !pieces.borrow().is_empty() {
        for shown in out.split('\n').filter(|l| *l != "...") {
            let (number, line) = shown.split_once("| ").expect("a numbered line");
            assert_eq!(line, lines[number.trim().parse::<usize>().expect("a line number") - 1]);
        }
    }
    for piece in pieces.into_inner() {
        let f = fold_case(&piece);
        assert!(folded.iter().any(|t| f.contains(t.as_str())), "{piece:?} holds no term of {folded:?}");
    }
});
