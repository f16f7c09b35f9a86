//! Any bytes as a `conv-checkpoints.jsonl` line: never a panic; canonical lines re-encode exactly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::conv_checkpoints::{decode_checkpoint_line, encode_checkpoint, CheckpointLine};

fuzz_target!(|data: &[u8]| {
    if let CheckpointLine::Checkpoint { checkpoint, canonical } = decode_checkpoint_line(data) {
        let encoded = encode_checkpoint(&checkpoint);
        if canonical {
            assert_eq!(encoded.as_bytes(), data);
        }
    }
});
