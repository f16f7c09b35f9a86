//! Any text as Python-dialect JSON: never a panic, and dump ∘ parse is stable (dumping what we
//! parsed, then parsing and dumping again, gives the same text).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::json::{dump, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(parsed) = parse(text) {
        let once = dump(&parsed.value);
        let again = parse(&once).expect("our own output parses");
        assert_eq!(dump(&again.value), once);
    }
});
