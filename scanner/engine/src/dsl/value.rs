//! Values the expression language computes with.
//!
//! Strings are byte strings (`bytes::Bytes`): response bodies are binary, and
//! favicon hashes must be computed over exactly the bytes Nuclei sees. Cloning
//! a `Value::Str` only bumps a reference count, so looking up a 10 MiB body
//! in a hot loop costs nothing.

use std::borrow::Cow;
use std::fmt::Write as _;

pub use bytes::Bytes;

/// A DSL value.
///
/// Nuclei's evaluator (govaluate) keeps every number as a float; we keep
/// integers exact and compare `Int` with `Float` numerically, which gives the
/// same answers for every value a template can produce.
#[derive(Debug, Clone, Default)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Bytes),
    List(Vec<Value>),
    #[default]
    Null,
}

impl Value {
    /// A string value from anything byte-like.
    pub fn str(s: impl AsRef<[u8]>) -> Value {
        Value::Str(Bytes::copy_from_slice(s.as_ref()))
    }

    /// The value as bytes, the way Nuclei's `toString` renders it: numbers
    /// without exponent, booleans as `true`/`false`, null as empty, lists as
    /// Go prints a slice (`[a b c]`).
    pub fn as_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Value::Str(b) => Cow::Borrowed(b.as_ref()),
            Value::Bool(true) => Cow::Borrowed(b"true"),
            Value::Bool(false) => Cow::Borrowed(b"false"),
            Value::Null => Cow::Borrowed(b""),
            Value::Int(i) => Cow::Owned(i.to_string().into_bytes()),
            Value::Float(f) => Cow::Owned(format_float(*f).into_bytes()),
            Value::List(items) => {
                let mut out = Vec::from(&b"["[..]);
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b' ');
                    }
                    out.extend_from_slice(&item.as_bytes());
                }
                out.push(b']');
                Cow::Owned(out)
            }
        }
    }

    /// The value as text, with invalid UTF-8 replaced.
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.as_bytes()).into_owned()
    }

    /// The value as a `Bytes` handle, sharing the buffer when it already is a
    /// string.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            Value::Str(b) => b.clone(),
            other => Bytes::from(other.as_bytes().into_owned()),
        }
    }

    /// Loose truthiness for callers that want a yes/no from any value:
    /// non-zero numbers, non-empty strings and lists are true.
    /// Matchers should prefer [`Value::as_bool`]: Nuclei requires a DSL
    /// matcher to return a real boolean.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0 && !f.is_nan(),
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Null => false,
        }
    }

    /// `Some(b)` only for a boolean value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, for numeric values only.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A short type name for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::Float(_) => "number",
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Null => "null",
        }
    }

    /// Equality as Nuclei's `==`: numbers numerically, strings bytewise,
    /// and values of different kinds are never equal (so `"200" == 200` is
    /// false, exactly as in govaluate).
    pub fn dsl_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                self.as_f64() == other.as_f64()
            }
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Null, Value::Null) => true,
            (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.dsl_eq(y))
            }
            _ => false,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.dsl_eq(other)
    }
}

/// Formats a float like Go's `strconv.FormatFloat(f, 'f', -1, 64)`: the
/// shortest digits that round-trip, never in exponent form.
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let mut s = String::new();
    let _ = write!(s, "{f}");
    s
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(Bytes::from(s.into_bytes()))
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Value {
        Value::from(s.as_str())
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Value {
        Value::Str(Bytes::from(b))
    }
}

impl From<&[u8]> for Value {
    fn from(b: &[u8]) -> Value {
        Value::Str(Bytes::copy_from_slice(b))
    }
}

impl From<Bytes> for Value {
    fn from(b: Bytes) -> Value {
        Value::Str(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Value {
        Value::Int(i64::from(i))
    }
}

impl From<u16> for Value {
    fn from(i: u16) -> Value {
        Value::Int(i64::from(i))
    }
}

impl From<u32> for Value {
    fn from(i: u32) -> Value {
        Value::Int(i64::from(i))
    }
}

impl From<usize> for Value {
    fn from(i: usize) -> Value {
        i64::try_from(i)
            .map(Value::Int)
            .unwrap_or(Value::Float(i as f64))
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Value {
        Value::Float(f)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::List(items)
    }
}

impl From<Vec<String>> for Value {
    fn from(items: Vec<String>) -> Value {
        Value::List(items.into_iter().map(Value::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_render_without_exponent_like_nuclei_to_string() {
        assert_eq!(Value::Float(1e6).to_string_lossy(), "1000000");
        assert_eq!(Value::Float(0.5).to_string_lossy(), "0.5");
        assert_eq!(Value::Float(200.0).to_string_lossy(), "200");
        assert_eq!(Value::Int(-3).to_string_lossy(), "-3");
    }

    #[test]
    fn strings_and_numbers_of_the_same_text_are_not_equal() {
        assert!(!Value::from("200").dsl_eq(&Value::Int(200)));
        assert!(Value::Int(200).dsl_eq(&Value::Float(200.0)));
        assert!(Value::from("a").dsl_eq(&Value::str(b"a")));
    }

    #[test]
    fn binary_strings_keep_every_byte() {
        let raw = vec![0u8, 0xff, 0x80, b'a'];
        let v = Value::from(raw.clone());
        assert_eq!(v.as_bytes().as_ref(), raw.as_slice());
    }

    #[test]
    fn lists_render_like_go_slices() {
        let v = Value::from(vec!["a".to_string(), "b".to_string()]);
        assert_eq!(v.to_string_lossy(), "[a b]");
    }
}
