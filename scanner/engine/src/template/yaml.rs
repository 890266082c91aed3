//! Lenient readers for the field shapes public templates actually use.
//!
//! Nuclei reads templates with Go's YAML decoder, which turns any scalar
//! into a string when the target field is a string (`id: 2021`, `words: [200]`)
//! and lets list fields be written as one scalar. The helpers here accept the
//! same shapes so a template Nuclei loads also loads here.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// Any YAML scalar as text; `null` is the empty string.
///
/// Used through `deserialize_string` so the parser hands over the scalar as
/// written (`1.10` stays `1.10`); the numeric visits cover values that come
/// through serde's buffered content (flattened structs).
struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or another scalar")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_char<E: de::Error>(self, v: char) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<String, E> {
        Ok(String::from_utf8_lossy(v).into_owned())
    }
    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        Ok(String::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_string(TextVisitor)
    }
}

/// A scalar read as text (see [`TextVisitor`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        text(d).map(Text)
    }
}

/// A mapping key as text (`200: ok` has the key `"200"`).
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_string(TextVisitor).map(Key)
    }
}

/// `deserialize_with` for a `String` field that may be written as any scalar
/// (an empty value or `null` is the empty string, as in Go).
pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    d.deserialize_option(TextVisitor)
}

/// `deserialize_with` for an `Option<String>` field written as any scalar.
pub fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Text>::deserialize(d)?.map(|t| t.0))
}

/// A list of scalars, or one scalar standing for a one-element list;
/// `null` is the empty list. With `split_commas`, a lone scalar is a
/// comma-separated list (Nuclei's `author` and `tags`).
struct ListVisitor {
    split_commas: bool,
}

impl ListVisitor {
    fn one(&self, s: String) -> Vec<String> {
        if self.split_commas {
            s.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        } else {
            vec![s]
        }
    }
}

impl<'de> Visitor<'de> for ListVisitor {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of strings or a single string")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Text(item)) = seq.next_element::<Text>()? {
            out.push(item);
        }
        Ok(out)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<String>, E> {
        Ok(self.one(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Vec<String>, E> {
        Ok(self.one(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<String>, E> {
        Ok(vec![v.to_string()])
    }
    fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_any(self)
    }
}

/// `deserialize_with` for a list field that may be written as one scalar.
pub fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_any(ListVisitor {
        split_commas: false,
    })
}

/// `deserialize_with` for `author`/`tags`: a list, or one comma-separated string.
pub fn comma_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_any(ListVisitor { split_commas: true })
}

/// A mapping read in document order. Template authors rely on order:
/// variables may use earlier ones, and payload order decides how pitchfork
/// pairs values and how clusterbomb nests them.
struct OrderedVisitor<V>(PhantomData<V>);

impl<'de, V: DeserializeOwned> Visitor<'de> for OrderedVisitor<V> {
    type Value = Vec<(String, V)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((Key(key), value)) = map.next_entry::<Key, V>()? {
            // A repeated key keeps its first position and takes the last
            // value, as a Go map filled in document order would.
            if let Some(slot) = out.iter_mut().find(|(k, _): &&mut (String, V)| *k == key) {
                slot.1 = value;
            } else {
                out.push((key, value));
            }
        }
        Ok(out)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

/// `deserialize_with` for an ordered mapping of name to any value type.
pub fn ordered_map<'de, D, V>(d: D) -> Result<Vec<(String, V)>, D::Error>
where
    D: Deserializer<'de>,
    V: DeserializeOwned,
{
    d.deserialize_option(OrderedVisitor(PhantomData))
}

/// `deserialize_with` for an ordered mapping of name to scalar text.
pub fn ordered_text_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, String)>, D::Error> {
    let pairs: Vec<(String, Text)> = ordered_map(d)?;
    Ok(pairs.into_iter().map(|(k, v)| (k, v.0)).collect())
}

/// `deserialize_with` for an optional number written as an integer, a float
/// or a numeric string (`cvss-score: 9.8`, `cvss-score: 10`).
pub fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let Some(Text(s)) = Option::<Text>::deserialize(d)? else {
        return Ok(None);
    };
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    s.parse::<f64>()
        .map(Some)
        .map_err(|_| de::Error::custom(format!("expected a number, found {s:?}")))
}
