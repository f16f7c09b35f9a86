//! Property tests of the codec: any message survives encode → decode unchanged, any line of
//! bytes either decodes or is reported (never a panic), and the "canonical" promise holds —
//! whenever a line is called canonical, encoding the decoded value gives back its exact bytes.

use crate::common;

use common::strategies::{any_json, message};
use proptest::prelude::*;
use sessiondb::codec::events::{decode_event_line, encode_event, Event, EventLine, Payload};
use sessiondb::codec::json::{dump, parse};
use sessiondb::codec::message_line::{decode_line, encode_message, LineContent};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn messages_roundtrip_exactly(m in message()) {
        let line = encode_message(&m);
        let decoded = decode_line(line.as_bytes());
        prop_assert!(decoded.canonical, "not canonical: {}", line);
        let LineContent::Message(back) = decoded.content else { panic!("not a message: {line}") };
        prop_assert_eq!(&back.role, &m.role);
        prop_assert_eq!(&back.content, &m.content);
        prop_assert_eq!(&back.timestamp, &m.timestamp);
        prop_assert_eq!(&back.files, &m.files);
        prop_assert_eq!(&back.file_hashes, &m.file_hashes);
        prop_assert_eq!((back.pinned, back.hide, back.ui_only, back.ephemeral_ttl), (m.pinned, m.hide, m.ui_only, m.ephemeral_ttl));
        prop_assert_eq!(encode_message(&back), line);
    }

    #[test]
    fn json_dump_parse_is_identity_on_text(v in any_json(4)) {
        let text = dump(&v);
        let parsed = parse(&text).expect("own output parses");
        prop_assert!(!parsed.lossy);
        prop_assert_eq!(dump(&parsed.value), text);
    }

    #[test]
    fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let decoded = decode_line(&bytes);
        if decoded.canonical {
            let LineContent::Message(m) = decoded.content else { panic!("canonical non-message") };
            prop_assert_eq!(encode_message(&m).into_bytes(), bytes.clone());
        }
        if let EventLine::Event { event, canonical: true } = decode_event_line(&bytes) {
            prop_assert_eq!(encode_event(&event).into_bytes(), bytes.clone());
        }
    }

    #[test]
    fn mutated_lines_keep_the_canonical_promise(m in message(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = encode_message(&m).into_bytes();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let decoded = decode_line(&bytes);
        if decoded.canonical {
            let LineContent::Message(back) = decoded.content else { panic!() };
            prop_assert_eq!(encode_message(&back).into_bytes(), bytes.clone());
        }
    }

    #[test]
    fn events_roundtrip(seq in 1i64..1_000_000, ms in proptest::collection::vec(message(), 0..4), kind in 0..3) {
        let payload = match kind {
            0 if !ms.is_empty() => Payload::Message(ms[0].clone()),
            1 => Payload::Messages(ms),
            _ => Payload::Other(parse(r#"{"n": 2}"#).unwrap().value),
        };
        let kind = match &payload { Payload::Message(_) => "message_append", Payload::Messages(_) => "checkpoint", Payload::Other(_) => "undo" };
        let event = Event { seq, ts: "2026-07-16T10:00:00.123456+00:00".into(), kind: kind.into(), payload };
        let line = encode_event(&event);
        match decode_event_line(line.as_bytes()) {
            EventLine::Event { event: back, canonical } => {
                prop_assert!(canonical);
                prop_assert_eq!(encode_event(&back), line);
            }
            other => panic!("{other:?}"),
        }
    }
}
