//! A JSON value in Python's data model: what gptme's message metadata and event payloads hold.
//!
//! Only the value and its questions live here; reading and writing Python's JSON dialect byte
//! for byte is the codec's job (`codec::json`).

/// A JSON value in Python's data model.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// An integer, kept as its canonical decimal digits (Python ints have no size limit).
    Int(String),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    /// Keys in insertion order, no duplicates.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Looks a key up in an object; `None` for a missing key or a non-object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an `f64` when it is a number (Python's `int` or `float`; `bool` is excluded).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Int(digits) => digits.parse::<f64>().ok(),
            Json::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The value as an `i64` when it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Int(digits) => digits.parse::<i64>().ok(),
            _ => None,
        }
    }

    /// Python's truthiness: `None`, `False`, `0`, `0.0`, `""`, `[]`, `{}` are false.
    pub fn is_truthy(&self) -> bool {
        match self {
            Json::Null => false,
            Json::Bool(b) => *b,
            Json::Int(d) => d != "0",
            Json::Float(f) => *f != 0.0,
            Json::Str(s) => !s.is_empty(),
            Json::Array(a) => !a.is_empty(),
            Json::Object(o) => !o.is_empty(),
        }
    }
}
