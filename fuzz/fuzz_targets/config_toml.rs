//! Any text as config.toml: parsing the [chat] table never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::config::parse_chat_config;

fuzz_target!(|data: &[u8]| {
    let _ = parse_chat_config(&String::from_utf8_lossy(data));
});
