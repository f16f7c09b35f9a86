//! ISO 8601 timestamps as gptme reads them (`dateutil.parser.isoparse`).
//!
//! Timestamps are stored exactly as written; this module only decides whether a string is one
//! gptme would accept and turns it into seconds since the epoch for ordering and listing. A
//! naive timestamp (what gptme writes for messages) means local time, as Python's
//! `datetime.timestamp()` takes it.

use chrono::{DateTime, Datelike, FixedOffset, Local, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike};

/// A parsed timestamp: a wall-clock time and, when the text had one, its UTC offset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timestamp {
    pub naive: NaiveDateTime,
    pub offset_seconds: Option<i32>,
}

impl Timestamp {
    /// Seconds since the Unix epoch; naive times are read in the local time zone.
    pub fn epoch_seconds(&self) -> f64 {
        let micros = |dt: DateTime<FixedOffset>| dt.timestamp_micros() as f64 / 1e6;
        match self.offset_seconds {
            Some(off) => {
                let tz = FixedOffset::east_opt(off).unwrap_or(FixedOffset::east_opt(0).unwrap());
                micros(tz.from_local_datetime(&self.naive).unwrap())
            }
            None => match Local.from_local_datetime(&self.naive).earliest() {
                Some(dt) => dt.timestamp_micros() as f64 / 1e6,
                None => self.naive.and_utc().timestamp_micros() as f64 / 1e6,
            },
        }
    }
}

/// Parses `YYYY-MM-DD`, optionally followed by one separator character and
/// `HH[:MM[:SS[.fraction]]]`, optionally followed by `Z` or `±HH[:MM]`.
pub fn parse(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        let s = text.get(range)?;
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    if b.len() == 10 {
        return Some(Timestamp { naive: date.and_hms_opt(0, 0, 0)?, offset_seconds: None });
    }
    // One separator character (gptme writes 'T'; isoparse takes any).
    let rest = text.get(10..)?;
    let mut chars = rest.chars();
    chars.next()?;
    let time_text = chars.as_str();
    let (clock, offset_seconds) = split_offset(time_text)?;
    let time = parse_clock(clock)?;
    Some(Timestamp { naive: date.and_time(time), offset_seconds })
}

fn split_offset(text: &str) -> Option<(&str, Option<i32>)> {
    if let Some(clock) = text.strip_suffix('Z') {
        return Some((clock, Some(0)));
    }
    match text.find(['+', '-']) {
        None => Some((text, None)),
        Some(i) => {
            let sign = if text.as_bytes()[i] == b'-' { -1 } else { 1 };
            let off = &text[i + 1..];
            if !off.is_ascii() {
                return None; // also keeps the byte slicing below on character boundaries
            }
            let (h, m) = match off.len() {
                2 => (off, "00"),
                4 => (&off[..2], &off[2..]),
                5 if off.as_bytes()[2] == b':' => (&off[..2], &off[3..]),
                _ => return None,
            };
            if !(h.bytes().chain(m.bytes())).all(|c| c.is_ascii_digit()) {
                return None;
            }
            let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            Some((&text[..i], Some(sign * (h * 3600 + m * 60))))
        }
    }
}

fn parse_clock(text: &str) -> Option<NaiveTime> {
    let (main, fraction) = match text.split_once(['.', ',']) {
        Some((m, f)) => (m, Some(f)),
        None => (text, None),
    };
    let parts: Vec<&str> = main.split(':').collect();
    if parts.is_empty() || parts.len() > 3 || parts.iter().any(|p| p.len() != 2 || !p.bytes().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let field = |i: usize| parts.get(i).map_or(Some(0), |p| p.parse::<u32>().ok());
    let micros = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()) => {
            let digits: String = f.chars().chain(std::iter::repeat('0')).take(6).collect();
            digits.parse().ok()?
        }
        Some(_) => return None,
    };
    let (h, m, s) = (field(0)?, field(1)?, field(2)?);
    if h == 24 && m == 0 && s == 0 && micros == 0 {
        return NaiveTime::from_hms_opt(0, 0, 0);
    }
    NaiveTime::from_hms_micro_opt(h, m, s, micros)
}

/// What gptme writes back for a timestamp it read: `isoformat()` of `isoparse(text)`
/// (microseconds only when non-zero, a UTC offset as `+HH:MM`, `Z` as `+00:00`). `None` when
/// the text is not a timestamp gptme reads.
pub fn normalise(text: &str) -> Option<String> {
    let t = parse(text)?;
    let base = format_naive(t.naive);
    Some(match t.offset_seconds {
        None => base,
        Some(off) => {
            let sign = if off < 0 { '-' } else { '+' };
            let off = off.abs();
            format!("{base}{sign}{:02}:{:02}", off / 3600, off % 3600 / 60)
        }
    })
}

/// A naive timestamp as one integer, microseconds from 1970-01-01T00:00:00 on its own clock
/// (no time zone is applied): `Some` only when [`from_naive_micros`] of it gives `text` back
/// exactly (gptme's own form, [`format_naive`]), so that a store may keep the integer instead.
pub fn naive_micros(text: &str) -> Option<i64> {
    let t = parse(text).filter(|t| t.offset_seconds.is_none())?;
    let micros = t.naive.and_utc().timestamp_micros();
    (from_naive_micros(micros).as_deref() == Some(text)).then_some(micros)
}

/// The timestamp [`naive_micros`] made `micros` of; `None` past what a date holds.
pub fn from_naive_micros(micros: i64) -> Option<String> {
    Some(format_naive(DateTime::from_timestamp_micros(micros)?.naive_utc()))
}

/// Formats a naive local time as Python's `datetime.isoformat()` (microseconds only when
/// non-zero), which is how gptme writes message timestamps.
pub fn format_naive(dt: NaiveDateTime) -> String {
    let mut out = String::with_capacity(32);
    push_naive(&mut out, dt);
    out
}

/// [`format_naive`] written at the end of `out`. Fields are written digit by digit: a listing
/// formats two timestamps per conversation, and chrono's strftime parser, then `format!` of
/// each field, were a tenth of `list --json --all`'s time.
fn push_naive(out: &mut String, dt: NaiveDateTime) {
    let (date, time) = (dt.date(), dt.time());
    match u32::try_from(date.year()) {
        Ok(year) if year <= 9999 => push_digits(out, year, 4),
        // Outside what Python's datetime holds; written as `{:04}` writes it.
        _ => out.push_str(&format!("{:04}", date.year())),
    }
    for (sep, value) in [('-', date.month()), ('-', date.day()), ('T', time.hour()), (':', time.minute()), (':', time.second())] {
        out.push(sep);
        push_digits(out, value, 2);
    }
    let micros = dt.and_utc().timestamp_subsec_micros();
    if micros != 0 {
        out.push('.');
        push_digits(out, micros, 6);
    }
}

/// `value` in decimal, zero-padded to `width` digits (`value` has at most `width`).
fn push_digits(out: &mut String, value: u32, width: u32) {
    for place in (0..width).rev() {
        out.push(char::from(b'0' + (value / 10u32.pow(place) % 10) as u8));
    }
}

/// Formats epoch seconds as Python's `datetime.fromtimestamp(t, tz=timezone.utc).isoformat()`.
pub fn format_utc(epoch_seconds: f64) -> String {
    // Python splits off the fraction and rounds it to microseconds half-to-even.
    let whole = epoch_seconds.trunc();
    let micros = ((epoch_seconds - whole) * 1e6).round_ties_even() as i64 + whole as i64 * 1_000_000;
    let dt = DateTime::from_timestamp_micros(micros).unwrap_or_default().naive_utc();
    let mut out = String::with_capacity(40);
    push_naive(&mut out, dt);
    out.push_str("+00:00");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gptmes_own_naive_timestamps_become_integers_and_nothing_else_does() {
        for s in ["2025-01-01T12:35:30.236366", "2026-07-16T10:00:00", "0001-01-01T00:00:00", "9999-12-31T23:59:59.999999", "1969-12-31T23:59:59.000001"] {
            let micros = naive_micros(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(from_naive_micros(micros).as_deref(), Some(s));
        }
        for s in [
            "2026-07-16T10:00:00.000000",
            "2026-07-16T10:00:00.5",
            "2026-07-16 10:00:00",
            "2026-07-16T10:00",
            "2026-07-16",
            "2026-07-16T10:00:00+00:00",
            "2026-07-16T10:00:00Z",
            "2026-07-16T24:00:00",
            "yesterday",
            "",
        ] {
            assert_eq!(naive_micros(s), None, "{s}");
        }
        assert_eq!(from_naive_micros(i64::MAX), None);
    }

    #[test]
    fn accepts_gptme_forms() {
        for s in [
            "2026-07-16T10:00:00",
            "2026-07-16T10:00:00.123456",
            "2026-07-16T10:00:00+00:00",
            "2026-07-16",
            "2026-07-16 10:00",
            "2026-07-16T10:00:00.5Z",
            "2026-07-16T10:00:00-0530",
        ] {
            assert!(parse(s).is_some(), "{s}");
        }
        for s in ["yesterday", "2026-13-01T00:00:00", "2026-07-16T10", "2026-07-16T1:00", "2026-07-16T10:00:00+5", ""] {
            let _ = parse(s); // must not panic
        }
        assert!(parse("2026-13-01T00:00:00").is_none());
        assert!(parse("yesterday").is_none());
    }

    #[test]
    fn non_ascii_offsets_are_rejected_not_panicked_on() {
        // Found by fuzzing (message_line): a multi-byte character inside the UTC offset.
        assert_eq!(parse("4052-07-03:00:0-\u{fffd}0"), None);
        assert_eq!(parse("2026-07-16T10:00:00+0\u{e9}"), None);
        assert_eq!(parse("2026-07-16T10:00:00+\u{e9}:00"), None);
    }

    #[test]
    fn normalises_like_python_isoformat() {
        assert_eq!(normalise("2026-07-16T10:00:00.000000").as_deref(), Some("2026-07-16T10:00:00"));
        assert_eq!(normalise("2026-07-16T10:00:00.5").as_deref(), Some("2026-07-16T10:00:00.500000"));
        assert_eq!(normalise("2026-07-16T10:00:00Z").as_deref(), Some("2026-07-16T10:00:00+00:00"));
        assert_eq!(normalise("2026-07-16 10:00").as_deref(), Some("2026-07-16T10:00:00"));
        assert_eq!(normalise("2026-07-16T10:00:00-0530").as_deref(), Some("2026-07-16T10:00:00-05:30"));
    }

    proptest::proptest! {
        /// Every instant of the years Python's datetime holds (1 to 9999) is written as
        /// chrono's own `%Y-%m-%dT%H:%M:%S` and `%.6f` (when it has a fraction) write it.
        #[test]
        fn timestamps_are_written_as_chrono_writes_them(micros in -62_135_596_800_000_000i64..253_402_300_800_000_000) {
            if let Some(dt) = DateTime::from_timestamp_micros(micros) {
                let dt = dt.naive_utc();
                let fraction = if dt.and_utc().timestamp_subsec_micros() == 0 { String::new() } else { dt.format("%.6f").to_string() };
                proptest::prop_assert_eq!(format_naive(dt), format!("{}{fraction}", dt.format("%Y-%m-%dT%H:%M:%S")));
            }
        }

        /// Every timestamp gptme writes for an instant of those years is kept as its integer
        /// and given back exactly.
        #[test]
        fn naive_timestamps_round_trip_through_their_integer(micros in -62_135_596_800_000_000i64..253_402_300_800_000_000) {
            let text = from_naive_micros(micros).unwrap();
            proptest::prop_assert_eq!(naive_micros(&text), Some(micros));
        }
    }

    #[test]
    fn aware_epoch() {
        let t = parse("1970-01-01T01:00:00+01:00").unwrap();
        assert_eq!(t.epoch_seconds(), 0.0);
        assert_eq!(format_utc(1.5), "1970-01-01T00:00:01.500000+00:00");
        assert_eq!(format_utc(0.0), "1970-01-01T00:00:00+00:00");
    }
}
