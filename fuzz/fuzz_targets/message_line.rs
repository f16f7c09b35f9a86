//! Any bytes as a message line: decoding never panics, and a line called canonical re-encodes
//! to exactly its bytes (the promise lossless export rests on).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::message_line::{decode_line, encode_message, LineContent};

fuzz_target!(|data: &[u8]| {
    let decoded = decode_line(data);
    if let LineContent::Message(m) = &decoded.content {
        let encoded = encode_message(m);
        if decoded.canonical {
            assert_eq!(encoded.as_bytes(), data);
        }
        // Our own encoding of what we read is always canonical.
        assert!(decode_line(encoded.as_bytes()).canonical);
    } else {
        assert!(!decoded.canonical);
    }
});
