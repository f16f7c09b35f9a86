//! `events.jsonl` lines ⇄ [`Event`]: gptme's append-only recovery log.
//!
//! A line is `{"seq": n, "ts": "<utc iso>", "type": T, "payload": {...}}`. Message payloads
//! (`message_append`'s `message`, `message_edit`'s and `checkpoint`'s `messages`) are decoded
//! into [`Message`]s so the store can keep each message once, shared with the transcripts.
//! As for message lines, a line is *canonical* when [`encode_event`] gives back its exact bytes;
//! callers keep the bytes of every other line.

use super::json::{self, dump_into, write_py_string, Json};
use super::message_line::{encode_message_into, message_from_json};
use crate::model::Message;

pub const MESSAGE_APPEND: &str = "message_append";
pub const MESSAGE_EDIT: &str = "message_edit";
pub const UNDO: &str = "undo";
pub const CHECKPOINT: &str = "checkpoint";

/// gptme writes a checkpoint after every event whose seq is a multiple of this.
pub const CHECKPOINT_INTERVAL: i64 = 50;

/// One event of the recovery log.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub ts: String,
    pub kind: String,
    pub payload: Payload,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// `{"message": m}` of a `message_append`.
    Message(Message),
    /// `{"messages": [..]}` of a `message_edit` or `checkpoint`.
    Messages(Vec<Message>),
    /// Any other payload (`undo`'s `{"n": n}`, types from newer versions), as written.
    Other(Json),
}

impl Payload {
    /// The messages the payload carries: an append's one, an edit's or checkpoint's list, or
    /// none.
    pub fn messages(&self) -> &[Message] {
        match self {
            Payload::Message(m) => std::slice::from_ref(m),
            Payload::Messages(ms) => ms,
            Payload::Other(_) => &[],
        }
    }
}

/// What a line of an event log holds. (An `Event` is much larger than the other variants; lines
/// are decoded one at a time, so boxing it would only add an allocation per line.)
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum EventLine {
    Event {
        event: Event,
        canonical: bool,
    },
    Blank,
    /// Not an event gptme can replay (it skips such lines); the reason says why.
    Malformed(String),
}

/// Decodes one event line, given without its newline. Decoding is strict UTF-8, as gptme's
/// event reader is: a line with undecodable bytes is damaged, not repaired.
pub fn decode_event_line(line: &[u8]) -> EventLine {
    let Ok(text) = std::str::from_utf8(line) else {
        return EventLine::Malformed("invalid UTF-8".into());
    };
    if text.trim().is_empty() {
        return EventLine::Blank;
    }
    let parsed = match json::parse(text.trim()) {
        Ok(p) => p,
        Err(e) => return EventLine::Malformed(format!("invalid JSON: {e}")),
    };
    match event_from_json(parsed.value) {
        Ok(event) => {
            let canonical = !parsed.lossy && encode_event(&event).as_bytes() == line;
            EventLine::Event { event, canonical }
        }
        Err(reason) => EventLine::Malformed(reason),
    }
}

fn event_from_json(value: Json) -> Result<Event, String> {
    let Json::Object(members) = value else {
        return Err("expected a JSON object".into());
    };
    let (mut seq, mut ts, mut kind, mut payload) = (None, None, None, None);
    for (key, value) in members {
        match (key.as_str(), value) {
            ("seq", v @ Json::Int(_)) => seq = Some(v.as_i64().ok_or("'seq' is out of range")?),
            ("ts", Json::Str(s)) => ts = Some(s),
            ("type", Json::Str(s)) => kind = Some(s),
            ("payload", v) => payload = Some(v),
            (other, _) => return Err(format!("unexpected or mistyped field {other:?}")),
        }
    }
    let seq = seq.ok_or("missing integer 'seq'")?;
    let ts = ts.ok_or("missing 'ts'")?;
    let kind = kind.ok_or("missing 'type'")?;
    let payload = payload.ok_or("missing 'payload'")?;
    let payload = decode_payload(&kind, payload);
    Ok(Event { seq, ts, kind, payload })
}

fn decode_payload(kind: &str, payload: Json) -> Payload {
    let single_member = |payload: &Json, name: &str| -> bool { matches!(payload, Json::Object(m) if m.len() == 1 && m[0].0 == name) };
    match kind {
        MESSAGE_APPEND if single_member(&payload, "message") => {
            let Json::Object(mut members) = payload.clone() else { unreachable!() };
            match message_from_json(members.remove(0).1) {
                Ok(m) => Payload::Message(m),
                Err(_) => Payload::Other(payload),
            }
        }
        MESSAGE_EDIT | CHECKPOINT if single_member(&payload, "messages") => {
            let Json::Object(members) = &payload else { unreachable!() };
            let Json::Array(items) = &members[0].1 else { return Payload::Other(payload) };
            let messages: Result<Vec<Message>, String> = items.iter().cloned().map(message_from_json).collect();
            match messages {
                Ok(m) => Payload::Messages(m),
                Err(_) => Payload::Other(payload),
            }
        }
        _ => Payload::Other(payload),
    }
}

/// The line gptme writes for `event`, without the newline.
pub fn encode_event(event: &Event) -> String {
    let mut out = String::with_capacity(128);
    out.push_str("{\"seq\": ");
    out.push_str(&event.seq.to_string());
    out.push_str(", \"ts\": ");
    write_py_string(&mut out, &event.ts);
    out.push_str(", \"type\": ");
    write_py_string(&mut out, &event.kind);
    out.push_str(", \"payload\": ");
    match &event.payload {
        Payload::Message(m) => {
            out.push_str("{\"message\": ");
            encode_message_into(&mut out, m);
            out.push('}');
        }
        Payload::Messages(messages) => {
            out.push_str("{\"messages\": [");
            for (i, m) in messages.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                encode_message_into(&mut out, m);
            }
            out.push_str("]}");
        }
        Payload::Other(json) => dump_into(&mut out, json),
    }
    out.push('}');
    out
}

/// Replays an event log as gptme's `recover_messages` does: from the latest checkpoint's
/// snapshot (or empty), every later event in order — append pushes, undo pops n, edit replaces
/// the list. `None` when there are no events at all ("nothing to recover"), which differs from
/// a log that replays to an empty list.
pub fn replay(events: &[Event]) -> Option<Vec<Message>> {
    if events.is_empty() {
        return None;
    }
    let checkpoint = events.iter().rposition(|e| e.kind == CHECKPOINT);
    let mut messages: Vec<Message> = Vec::new();
    let mut start_seq = 0;
    if let Some(i) = checkpoint {
        if let Payload::Messages(ms) = &events[i].payload {
            messages = ms.clone();
        }
        start_seq = events[i].seq;
    }
    for event in events.iter().filter(|e| e.seq > start_seq) {
        match (event.kind.as_str(), &event.payload) {
            (MESSAGE_APPEND, Payload::Message(m)) => messages.push(m.clone()),
            (UNDO, Payload::Other(payload)) => {
                let n = payload.get("n").and_then(Json::as_i64).unwrap_or(1).max(0);
                for _ in 0..n {
                    messages.pop();
                }
            }
            (MESSAGE_EDIT, Payload::Messages(ms)) => messages = ms.clone(),
            _ => {}
        }
    }
    Some(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gptme_events_are_canonical() {
        let lines = [
            r#"{"seq": 1, "ts": "2026-07-16T10:00:00.123456+00:00", "type": "message_append", "payload": {"message": {"role": "user", "content": "hi", "timestamp": "2026-07-16T10:00:00"}}}"#,
            r#"{"seq": 2, "ts": "2026-07-16T10:00:00+00:00", "type": "undo", "payload": {"n": 1}}"#,
            r#"{"seq": 51, "ts": "2026-07-16T10:00:00+00:00", "type": "checkpoint", "payload": {"messages": []}}"#,
            r#"{"seq": 3, "ts": "2026-07-16T10:00:00+00:00", "type": "message_edit", "payload": {"messages": [{"role": "user", "content": "a", "timestamp": "2026-07-16T10:00:00"}, {"role": "assistant", "content": "b", "timestamp": "2026-07-16T10:00:00"}]}}"#,
        ];
        for line in lines {
            match decode_event_line(line.as_bytes()) {
                EventLine::Event { event, canonical } => {
                    assert!(canonical, "{line}");
                    assert_eq!(encode_event(&event), line);
                }
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn damaged_lines() {
        assert!(matches!(decode_event_line(b"{\"seq\": 1, \"ts"), EventLine::Malformed(_)));
        assert!(matches!(decode_event_line(b"\xff"), EventLine::Malformed(_)));
        assert!(matches!(decode_event_line(b"{\"seq\": \"1\", \"ts\": \"x\", \"type\": \"undo\", \"payload\": {}}"), EventLine::Malformed(_)));
        assert_eq!(decode_event_line(b"  "), EventLine::Blank);
        // An append whose message gptme could not load keeps its payload as written.
        match decode_event_line(br#"{"seq": 1, "ts": "x", "type": "message_append", "payload": {"message": {"role": 1}}}"#) {
            EventLine::Event { event, canonical } => {
                assert!(canonical);
                assert!(matches!(event.payload, Payload::Other(_)));
            }
            other => panic!("{other:?}"),
        }
    }
}
