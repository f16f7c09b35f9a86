//! Any bytes as a stored text (`store::texts`: a codec byte, then the text, a zstd frame, or a
//! dictionary's id and a frame made with it): decoding never panics nor allocates what a
//! damaged header claims, and a text decoded, stored again and decoded is the same text, with
//! the dictionary and without.
//! Input: the bytes of a `texts.data` value; dictionary 7 is the raw content below.
#![no_main]
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use sessiondb::store::texts::{decode_with, encode, Dictionary};
use sessiondb::store::StoreError;

fn dictionary() -> Arc<Dictionary> {
    static D: OnceLock<Arc<Dictionary>> = OnceLock::new();
    D.get_or_init(|| Arc::new(Dictionary::new(7, "You are gptme, a general-purpose AI assistant powered by LLMs. Ran command: ```shell\n".repeat(8).as_bytes())))
        .clone()
}

fuzz_target!(|data: &[u8]| {
    let find = |id: i64| if id == 7 { Ok(dictionary()) } else { Err(StoreError::Corrupt(format!("no dictionary {id}"))) };
    let Ok(text) = decode_with(data, find) else { return };
    let d = dictionary();
    for with in [None, Some(&*d)] {
        let again = encode(&text, with);
        assert_eq!(decode_with(&again, find).expect("a text just stored reads back"), text);
    }
});
