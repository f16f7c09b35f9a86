//! Every input a fuzzer ever crashed on, kept under `tests/fuzz-regressions/<target>/` and
//! replayed here against the same checks the fuzz target makes.

use std::fs;
use std::path::PathBuf;

use sessiondb::codec::events::{decode_event_line, encode_event, EventLine};
use sessiondb::codec::message_line::{decode_line, encode_message, LineContent};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions").join(target);
    let Ok(entries) = fs::read_dir(&dir) else { return Vec::new() };
    entries
        .map(|e| e.unwrap().path())
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

#[test]
fn message_line_regressions() {
    let cases = inputs("message_line");
    assert!(!cases.is_empty(), "the regression corpus is missing");
    for (path, data) in cases {
        let decoded = decode_line(&data);
        if let LineContent::Message(m) = &decoded.content {
            if decoded.canonical {
                assert_eq!(encode_message(m).as_bytes(), &data[..], "{}", path.display());
            }
        }
    }
}

#[test]
fn event_line_regressions() {
    for (path, data) in inputs("event_line") {
        if let EventLine::Event { event, canonical: true } = decode_event_line(&data) {
            assert_eq!(encode_event(&event).as_bytes(), &data[..], "{}", path.display());
        }
    }
}
