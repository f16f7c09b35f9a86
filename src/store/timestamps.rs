//! A message's timestamp as its row keeps it.
//!
//! gptme writes every message's timestamp in one form, `datetime.isoformat()` of a naive local
//! time (`2025-01-01T12:35:30.236366`, 26 bytes). On SQLite a timestamp of exactly that form is
//! kept as the integer of its microseconds ([`crate::codec::timestamp::naive_micros`], 8 bytes;
//! schema 25 made `messages.timestamp` a column of no affinity, so SQLite keeps each value as
//! given), and any other text as it is; a server keeps the text.
//!
//! Invariant: [`MessageTime`] reads back exactly the text [`stored`] was given.

use super::sql::{Engine, FromSql, Value, ValueRef};

/// The value of `messages.timestamp` for a message timestamped `timestamp`, on `engine`.
pub fn stored(engine: Engine, timestamp: Option<&str>) -> Value {
    match (engine, timestamp) {
        (_, None) => Value::Null,
        (Engine::Sqlite, Some(text)) => crate::codec::timestamp::naive_micros(text).map_or_else(|| Value::Text(text.to_owned()), Value::Integer),
        (Engine::Postgres, Some(text)) => Value::Text(text.to_owned()),
    }
}

/// `messages.timestamp` read back as the message's timestamp.
pub struct MessageTime(pub Option<String>);

impl FromSql for MessageTime {
    fn from_sql(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Null => Ok(MessageTime(None)),
            ValueRef::Text(text) => Ok(MessageTime(Some(text.to_owned()))),
            ValueRef::Integer(micros) => crate::codec::timestamp::from_naive_micros(micros)
                .map(|text| MessageTime(Some(text)))
                .ok_or_else(|| format!("a message's timestamp {micros} is past what a date holds")),
            ValueRef::Real(_) | ValueRef::Blob(_) => Err("a message's timestamp is neither text nor an integer".into()),
        }
    }
}

/// How many rows [`compact_sqlite`] reads at a time.
const COMPACT_PAGE: i64 = 4_096;

/// Rewrites the timestamp of every message row of an SQLite store that is gptme's own form as
/// its integer (migration 25, run inside its transaction). Returns how many rows it rewrote.
pub(super) fn compact_sqlite(tx: &rusqlite::Transaction<'_>) -> Result<u64, rusqlite::Error> {
    let mut read = tx.prepare("SELECT id, timestamp FROM messages WHERE id > ?1 AND typeof(timestamp) = 'text' ORDER BY id LIMIT ?2")?;
    let mut write = tx.prepare("UPDATE messages SET timestamp = ?2 WHERE id = ?1")?;
    let (mut after, mut rewritten) = (i64::MIN, 0);
    loop {
        let page: Vec<(i64, String)> = read.query_map((after, COMPACT_PAGE), |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        let Some(&(last, _)) = page.last() else { return Ok(rewritten) };
        for (id, text) in page {
            if let Some(micros) = crate::codec::timestamp::naive_micros(&text) {
                write.execute((id, micros))?;
                rewritten += 1;
            }
        }
        after = last;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_keeps_gptmes_form_as_an_integer_and_every_timestamp_reads_back() {
        for text in ["2025-01-01T12:35:30.236366", "2025-01-01T12:35:30", "2025-01-01T12:35:30+00:00", "2025-01-01 12:35", "not a time", ""] {
            for engine in [Engine::Sqlite, Engine::Postgres] {
                let value = stored(engine, Some(text));
                let integer = matches!(value, Value::Integer(_));
                assert_eq!(integer, engine == Engine::Sqlite && text.starts_with("2025-01-01T12:35:30") && !text.contains('+'), "{engine}: {text}");
                let read = MessageTime::from_sql(super::super::sql::ToSql::to_sql(&value)).unwrap();
                assert_eq!(read.0.as_deref(), Some(text));
            }
        }
        assert!(matches!(stored(Engine::Sqlite, None), Value::Null));
        assert_eq!(MessageTime::from_sql(ValueRef::Null).unwrap().0, None);
        assert!(MessageTime::from_sql(ValueRef::Integer(i64::MAX)).is_err());
    }
}
