//! Any bytes as a `conv-checkpoints.jsonl` line: never a panic; canonical lines re-encode exactly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::bookmarks::{decode_bookmark_line, encode_bookmark, BookmarkLine};

fuzz_target!(|data: &[u8]| {
    if let BookmarkLine::Bookmark { bookmark, canonical } = decode_bookmark_line(data) {
        let encoded = encode_bookmark(&bookmark);
        if canonical {
            assert_eq!(encoded.as_bytes(), data);
        }
    }
});
