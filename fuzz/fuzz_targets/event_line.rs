//! Any bytes as an `events.jsonl` line: never a panic; canonical lines re-encode exactly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::events::{decode_event_line, encode_event, EventLine};

fuzz_target!(|data: &[u8]| {
    if let EventLine::Event { event, canonical } = decode_event_line(data) {
        let encoded = encode_event(&event);
        if canonical {
            assert_eq!(encoded.as_bytes(), data);
        }
        assert!(matches!(decode_event_line(encoded.as_bytes()), EventLine::Event { canonical: true, .. }));
    }
});
