//! Any text through the credential scanner: every finding is a range of the text on character
//! boundaries, in order and never overlapping, and its preview shows at most half of it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::secrets::{preview, scan};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut end = 0;
    for finding in scan(&text) {
        assert!(finding.range.start >= end && finding.range.start < finding.range.end && finding.range.end <= text.len());
        assert!(text.is_char_boundary(finding.range.start) && text.is_char_boundary(finding.range.end));
        end = finding.range.end;
        let shown = preview(&text, &finding);
        let secret = &text[finding.range.clone()];
        let prefix = shown.split('…').next().unwrap_or_default();
        assert!(secret.starts_with(prefix) && prefix.len() <= secret.len() / 2, "{shown:?} of {secret:?}");
    }
});
