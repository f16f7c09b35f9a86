//! JSON exactly as Python's `json` module reads and writes it.
//!
//! gptme writes every line with `json.dumps(obj)` under Python's defaults, and reads them back with
//! `json.loads`. That dialect differs from strict JSON in ways that matter for a byte-exact round
//! trip: objects keep insertion order (a repeated key keeps its first position and takes the last
//! value), integers are arbitrary precision, `NaN`/`Infinity`/`-Infinity` are accepted and
//! written, floats are spelled by Python's `repr` (`1e-05`, `1e+16`, `1.0`), and output escapes
//! every non-ASCII character as `\uXXXX`.
//!
//! The invariant this module keeps: for any [`Json`] value `v`, `parse(&dump(&v)) == v`; and for
//! any text `t` that Python's `json.dumps` produced, `dump(&parse(t)?) == t`. Input that this
//! model cannot represent faithfully (a lone UTF-16 surrogate, which a Rust `String` cannot hold)
//! still parses, but is flagged in [`Parsed::lossy`] so callers keep the original bytes.

use std::fmt::Write as _;

/// The value type lives with the model; this module reads and writes it.
pub use crate::model::Json;

/// The result of a successful parse.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub value: Json,
    /// True when the input held something [`Json`] cannot represent exactly (a lone surrogate
    /// escape), so that `dump(value)` can never reproduce the input.
    pub lossy: bool,
}

/// Why a text is not JSON, with the byte offset where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at byte {offset}")]
pub struct ParseError {
    pub offset: usize,
    pub reason: &'static str,
}

/// Objects and arrays nested deeper than this are rejected rather than risking the stack.
/// Python's own decoder stops near 1,000 levels (its recursion limit), so nothing gptme can
/// read is refused.
pub const MAX_DEPTH: usize = 1_000;

/// Parses one JSON document as Python's `json.loads` would (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    let mut parser = Parser { bytes: text.as_bytes(), text, pos: 0, lossy: false };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    if parser.pos != parser.bytes.len() {
        return Err(parser.error("extra data after the value"));
    }
    Ok(Parsed { value, lossy: parser.lossy })
}

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    lossy: bool,
}

impl<'a> Parser<'a> {
    fn error(&self, reason: &'static str) -> ParseError {
        ParseError { offset: self.pos, reason }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> bool {
        if self.bytes[self.pos..].starts_with(literal.as_bytes()) {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, ParseError> {
        match self.bytes.get(self.pos) {
            None => Err(self.error("unexpected end of input")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                if self.eat("null") {
                    Ok(Json::Null)
                } else if self.eat("true") {
                    Ok(Json::Bool(true))
                } else if self.eat("false") {
                    Ok(Json::Bool(false))
                } else if self.eat("NaN") {
                    Ok(Json::Float(f64::NAN))
                } else if self.eat("Infinity") {
                    Ok(Json::Float(f64::INFINITY))
                } else {
                    Err(self.error("expected a value"))
                }
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.pos += 1; // '{'
        let mut members: Vec<(String, Json)> = Vec::new();
        // An index from key to position, built only for large objects so that small ones (all
        // of gptme's) stay allocation-light while hostile ones stay linear.
        let mut index: Option<std::collections::HashMap<String, usize>> = None;
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error("expected a property name in double quotes"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.error("expected ':'"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            // Python's dict: a repeated key keeps its first position and takes the last value.
            let existing = match &index {
                Some(map) => map.get(&key).copied(),
                None => members.iter().position(|(k, _)| *k == key),
            };
            match existing {
                Some(i) => members[i].1 = value,
                None => {
                    if let Some(map) = &mut index {
                        map.insert(key.clone(), members.len());
                    }
                    members.push((key, value));
                    if index.is_none() && members.len() > 32 {
                        index = Some(members.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect());
                    }
                }
            }
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.error("expected ',' or ']'")),
            }
        }
    }

    /// A number, following Python's `NUMBER_RE`: `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`, plus
    /// `-Infinity`.
    fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.pos;
        if self.bytes[self.pos] == b'-' {
            self.pos += 1;
            if self.eat("Infinity") {
                return Ok(Json::Float(f64::NEG_INFINITY));
            }
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.error("expected a digit")),
        }
        let mut is_float = false;
        if self.bytes.get(self.pos) == Some(&b'.') && matches!(self.bytes.get(self.pos + 1), Some(b'0'..=b'9')) {
            self.pos += 1;
            self.digits();
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            let mark = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if matches!(self.bytes.get(self.pos), Some(b'0'..=b'9')) {
                self.digits();
                is_float = true;
            } else {
                // Python's regex simply stops before a dangling exponent marker.
                self.pos = mark;
            }
        }
        let literal = &self.text[start..self.pos];
        if is_float {
            // Rust's parser is correctly rounded, as CPython's is; overflow gives ±inf as Python.
            let f: f64 = literal.parse().map_err(|_| self.error("invalid number"))?;
            Ok(Json::Float(f))
        } else if literal == "-0" {
            Ok(Json::Int("0".to_owned()))
        } else {
            Ok(Json::Int(literal.to_owned()))
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            // Copy the run of plain characters in one go.
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.bytes.get(self.pos) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.error("invalid control character in string")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), ParseError> {
        let Some(&c) = self.bytes.get(self.pos) else {
            return Err(self.error("unterminated string"));
        };
        self.pos += 1;
        match c {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let first = self.hex4()?;
                if (0xd800..0xdc00).contains(&first) {
                    // A high surrogate pairs with an immediately following low surrogate escape.
                    if self.bytes[self.pos..].starts_with(b"\\u") {
                        let save = self.pos;
                        self.pos += 2;
                        let second = self.hex4()?;
                        if (0xdc00..0xe000).contains(&second) {
                            let code = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                            out.push(char::from_u32(code).expect("valid surrogate pair"));
                            return Ok(());
                        }
                        self.pos = save;
                    }
                    self.lone_surrogate(out);
                } else if (0xdc00..0xe000).contains(&first) {
                    self.lone_surrogate(out);
                } else {
                    out.push(char::from_u32(first).expect("non-surrogate BMP code point"));
                }
            }
            _ => {
                self.pos -= 1;
                return Err(self.error("invalid escape"));
            }
        }
        Ok(())
    }

    fn lone_surrogate(&mut self, out: &mut String) {
        out.push('\u{fffd}');
        self.lossy = true;
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or_else(|| self.error("invalid \\u escape"))?;
        let mut value = 0u32;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or_else(|| self.error("invalid \\u escape"))?;
            value = value * 16 + v;
        }
        self.pos += 4;
        Ok(value)
    }
}

/// Serialises a value exactly as Python's `json.dumps(value)` does with default arguments.
pub fn dump(value: &Json) -> String {
    let mut out = String::new();
    dump_into(&mut out, value);
    out
}

/// Appends `json.dumps(value)` to `out`.
pub fn dump_into(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Int(digits) => out.push_str(digits),
        Json::Float(f) => write_py_float(out, *f),
        Json::Str(s) => write_py_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dump_into(out, item);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py_string(out, key);
                out.push_str(": ");
                dump_into(out, item);
            }
            out.push('}');
        }
    }
}

/// Writes a string literal as `json.dumps` does with `ensure_ascii=True`: `\"`, `\\`, the short
/// escapes `\n \r \t \b \f`, and `\u00XX`/`\uXXXX` (lowercase hex, surrogate pairs above the
/// BMP) for every other character outside printable ASCII, DEL included.
pub fn write_py_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    for (i, ch) in s.char_indices() {
        let plain = matches!(ch, ' '..='~') && ch != '"' && ch != '\\';
        if plain {
            continue;
        }
        out.push_str(&s[run_start..i]);
        run_start = i + ch.len_utf8();
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            _ => {
                let mut units = [0u16; 2];
                for unit in ch.encode_utf16(&mut units) {
                    push_u_escape(out, *unit);
                }
            }
        }
    }
    out.push_str(std::str::from_utf8(&bytes[run_start..]).expect("char boundary"));
    out.push('"');
}

/// Appends `\uXXXX` with lowercase hex (the hot path of encoding non-ASCII text).
fn push_u_escape(out: &mut String, unit: u16) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = [b'\\', b'u', HEX[(unit >> 12) as usize & 15], HEX[(unit >> 8) as usize & 15], HEX[(unit >> 4) as usize & 15], HEX[unit as usize & 15]];
    out.push_str(std::str::from_utf8(&digits).expect("ASCII"));
}

/// Writes a float as Python's `float.__repr__` (which `json.dumps` uses), with `NaN`,
/// `Infinity` and `-Infinity` for the non-finite values.
///
/// Python prints the shortest digits that round-trip, in positional notation when the decimal
/// exponent is in `-4..16` (always with a fractional part: `1.0`), otherwise in scientific
/// notation with a signed two-digit-minimum exponent (`1e-05`, `1.5e+16`).
pub fn write_py_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7", "1e16", "0e0".
    let sci = format!("{:e}", f);
    let (mantissa, exp) = sci.split_once('e').expect("exponent marker");
    let exp: i32 = exp.parse().expect("exponent digits");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

/// Converts to a `serde_json` value for machine-readable CLI output (non-finite floats become
/// `null`, as serde_json cannot carry them).
pub fn to_serde(value: &Json) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Int(d) => d
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| d.parse::<u64>().map(Value::from))
            .unwrap_or_else(|_| serde_json::Number::from_f64(d.parse().unwrap_or(f64::NAN)).map_or(Value::Null, Value::Number)),
        Json::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Json::Str(s) => Value::String(s.clone()),
        Json::Array(items) => Value::Array(items.iter().map(to_serde).collect()),
        Json::Object(members) => Value::Object(members.iter().map(|(k, v)| (k.clone(), to_serde(v))).collect()),
    }
}

/// Converts from a `serde_json` value (e.g. `--metadata` given on the command line).
pub fn from_serde(value: &serde_json::Value) -> Json {
    use serde_json::Value;
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => {
            if n.is_f64() {
                Json::Float(n.as_f64().unwrap_or(f64::NAN))
            } else {
                Json::Int(n.to_string())
            }
        }
        Value::String(s) => Json::Str(s.clone()),
        Value::Array(items) => Json::Array(items.iter().map(from_serde).collect()),
        Value::Object(members) => Json::Object(members.iter().map(|(k, v)| (k.clone(), from_serde(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(f: f64) -> String {
        let mut s = String::new();
        write_py_float(&mut s, f);
        s
    }

    #[test]
    fn floats_are_spelled_as_python_repr() {
        let cases = [
            (1e-05, "1e-05"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (0.1, "0.1"),
            (1.0, "1.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (123.456, "123.456"),
            (1234567890123456.0, "1234567890123456.0"),
            (0.0123456789, "0.0123456789"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-2.5e-7, "-2.5e-07"),
            (100.0, "100.0"),
        ];
        for (value, expected) in cases {
            assert_eq!(float(value), expected, "for {value:e}");
        }
    }

    #[test]
    fn strings_escape_like_ensure_ascii() {
        let mut s = String::new();
        write_py_string(&mut s, "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{7f}é中😀/");
        assert_eq!(s, r#""a\"b\\c\n\r\t\b\f\u0001\u007f\u00e9\u4e2d\ud83d\ude00/""#);
    }

    #[test]
    fn objects_keep_order_and_python_duplicate_rule() {
        let parsed = parse(r#"{"b": 1, "a": 2, "b": 3}"#).unwrap();
        assert_eq!(dump(&parsed.value), r#"{"b": 3, "a": 2}"#);
    }

    #[test]
    fn python_extensions_parse() {
        let parsed = parse(r#"[NaN, Infinity, -Infinity, -0, 1E5, 10000000000000000000000]"#).unwrap();
        assert_eq!(dump(&parsed.value), "[NaN, Infinity, -Infinity, 0, 100000.0, 10000000000000000000000]");
    }

    #[test]
    fn surrogates() {
        let pair = parse(r#""\ud83d\ude00""#).unwrap();
        assert_eq!(pair.value, Json::Str("😀".into()));
        assert!(!pair.lossy);
        let lone = parse(r#""\ud83d x""#).unwrap();
        assert!(lone.lossy);
    }

    #[test]
    fn errors_are_reported_with_offsets() {
        assert_eq!(parse("{\"a\": }").unwrap_err().offset, 6);
        assert!(parse("\"tab\there\"").is_err());
        assert!(parse("[1, 2").is_err());
        assert!(parse("1 2").is_err());
        assert!(parse(&"[".repeat(MAX_DEPTH + 1)).is_err());
    }
}
