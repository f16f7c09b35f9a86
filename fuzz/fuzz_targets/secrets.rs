//! Any text through the credential scanner: every finding is a range of the text on character
//! boundaries, in order and never overlapping, and its preview shows at most half of it. A
//! masked text has the original's lines and no finding's secret whole, `unmask` of it gives
//! the original back (unless the original itself holds a mask's mark), and a preview or a JSON
//! line of it is masked without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sessiondb::codec::message_line::{decode_line, encode_message, LineContent};
use sessiondb::model::{Message, Role};
use sessiondb::secrets::{mask, mask_json_line, mask_preview, preview, scan, unmask};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut end = 0;
    let found = scan(&text);
    for finding in &found {
        assert!(finding.range.start >= end && finding.range.start < finding.range.end && finding.range.end <= text.len());
        assert!(text.is_char_boundary(finding.range.start) && text.is_char_boundary(finding.range.end));
        end = finding.range.end;
        let shown = preview(&text, finding);
        let secret = &text[finding.range.clone()];
        let prefix = shown.split('…').next().unwrap_or_default();
        assert!(secret.starts_with(prefix) && prefix.len() <= secret.len() / 2, "{shown:?} of {secret:?}");
    }
    let masked = mask(&text);
    assert_eq!(masked.matches('\n').count(), text.matches('\n').count(), "{masked:?} of {text:?}");
    if !text.contains('‹') {
        for finding in &found {
            let secret = &text[finding.range.clone()];
            assert!(secret.len() < 8 || !masked.contains(secret), "{secret:?} left in {masked:?}");
        }
        assert_eq!(unmask(&masked, &text), text);
    }
    let _ = mask_preview(&text);
    // A line as gptme writes it stays a message line.
    let line = encode_message(&Message::new(Role::User, text.to_string(), None));
    let masked_line = mask_json_line(line.as_bytes(), &text);
    assert!(matches!(decode_line(&masked_line).content, LineContent::Message(_)), "{:?}", String::from_utf8_lossy(&masked_line));
});
