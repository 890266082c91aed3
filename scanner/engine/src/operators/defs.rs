//! YAML shapes of matchers and extractors as Nuclei templates write them.
//! Field names follow the template format; unknown fields are kept in `extra`
//! so the loader can report them as unsupported features by name.

use std::collections::BTreeMap;

use serde::Deserialize;

/// A YAML field that templates write either as one scalar or as a list.
///
/// Any scalar counts as text (`words: [200, true]` is two words), as Go's
/// YAML decoder reads it into Nuclei's string lists; `null` in a list is
/// the empty string.
#[derive(Debug, Clone, PartialEq)]
pub enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for StringOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarsVisitor)
    }
}

/// Reads one scalar of any type as text, or a list of them.
struct ScalarsVisitor;

impl<'de> serde::de::Visitor<'de> for ScalarsVisitor {
    type Value = StringOrList;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string or a list of strings")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StringOrList, E> {
        Ok(StringOrList::One(v.to_owned()))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<StringOrList, E> {
        Ok(StringOrList::One(v))
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<StringOrList, E> {
        Ok(StringOrList::One(v.to_string()))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<StringOrList, E> {
        Ok(StringOrList::One(v.to_string()))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<StringOrList, E> {
        Ok(StringOrList::One(v.to_string()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<StringOrList, E> {
        Ok(StringOrList::One(v.to_string()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<StringOrList, E> {
        Ok(StringOrList::Many(Vec::new()))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<StringOrList, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<Option<StringOrList>>()? {
            match item {
                Some(StringOrList::One(s)) => out.push(s),
                None => out.push(String::new()),
                Some(StringOrList::Many(_)) => {
                    return Err(serde::de::Error::custom("a list inside a list of strings"))
                }
            }
        }
        Ok(StringOrList::Many(out))
    }
}

impl StringOrList {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StringOrList::One(s) => vec![s],
            StringOrList::Many(v) => v,
        }
    }
    pub fn to_vec(&self) -> Vec<String> {
        self.clone().into_vec()
    }
}

/// One `matchers:` entry.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub struct MatcherDef {
    /// word, regex, status, size, binary, dsl, xpath.
    #[serde(rename = "type")]
    pub kind: String,
    /// `and` or `or` between the values of this matcher (default `or`).
    pub condition: Option<String>,
    /// Which part of the response to match (default `body`).
    pub part: Option<String>,
    #[serde(default)]
    pub negative: bool,
    pub name: Option<String>,
    #[serde(default)]
    pub words: Option<StringOrList>,
    #[serde(default)]
    pub regex: Option<StringOrList>,
    #[serde(default)]
    pub status: Option<Vec<u16>>,
    #[serde(default)]
    pub size: Option<Vec<usize>>,
    #[serde(default)]
    pub binary: Option<StringOrList>,
    #[serde(default)]
    pub dsl: Option<StringOrList>,
    #[serde(default)]
    pub xpath: Option<StringOrList>,
    /// `hex` means `words` are hex-encoded.
    pub encoding: Option<String>,
    #[serde(default)]
    pub case_insensitive: bool,
    #[serde(default)]
    pub match_all: bool,
    #[serde(default)]
    pub internal: bool,
    /// Fields this engine does not know; reported as unsupported features.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// One `extractors:` entry.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub struct ExtractorDef {
    /// regex, kval, json, xpath, dsl.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: Option<String>,
    pub part: Option<String>,
    /// Values of an internal extractor feed later requests and are not reported.
    #[serde(default)]
    pub internal: bool,
    #[serde(default)]
    pub regex: Option<StringOrList>,
    /// Capture group of `regex` (0 = whole match).
    #[serde(default)]
    pub group: Option<usize>,
    #[serde(default)]
    pub kval: Option<StringOrList>,
    #[serde(default)]
    pub json: Option<StringOrList>,
    #[serde(default)]
    pub xpath: Option<StringOrList>,
    pub attribute: Option<String>,
    #[serde(default)]
    pub dsl: Option<StringOrList>,
    #[serde(default)]
    pub case_insensitive: bool,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Whether `text` may refer to the variable `name`: the name occurs in it,
/// compared without case and with `-` and `_` alike. Generous on purpose
/// (a longer word containing the name counts), since a miss would change
/// what a template sees.
pub fn mentions(text: &str, name: &str) -> bool {
    fn fold(b: u8) -> u8 {
        match b.to_ascii_lowercase() {
            b'-' => b'_',
            other => other,
        }
    }
    let (text, name) = (text.as_bytes(), name.as_bytes());
    let Some((&first, rest)) = name.split_first() else {
        return true;
    };
    let first = fold(first);
    text.len() >= name.len()
        && (0..=text.len() - name.len()).any(|i| {
            fold(text[i]) == first
                && text[i + 1..i + name.len()]
                    .iter()
                    .zip(rest)
                    .all(|(&a, &b)| fold(a) == fold(b))
        })
}

impl StringOrList {
    fn mentions(&self, name: &str) -> bool {
        match self {
            StringOrList::One(s) => mentions(s, name),
            StringOrList::Many(v) => v.iter().any(|s| mentions(s, name)),
        }
    }
}

fn option_mentions(field: &Option<StringOrList>, name: &str) -> bool {
    field.as_ref().is_some_and(|f| f.mentions(name))
}

impl MatcherDef {
    /// Whether any text of this matcher (part, values, expressions, unknown
    /// fields) may read the variable `name`. A matcher also reads parts it
    /// does not name (`body` by default, `status_code`, ...): see
    /// [`reads_implicitly`].
    pub fn mentions(&self, name: &str) -> bool {
        [&self.part, &self.condition, &self.encoding]
            .into_iter()
            .any(|f| f.as_deref().is_some_and(|t| mentions(t, name)))
            || [
                &self.words,
                &self.regex,
                &self.binary,
                &self.dsl,
                &self.xpath,
            ]
            .into_iter()
            .any(|f| option_mentions(f, name))
            // Unknown fields are taken to mention every name: they are
            // rare, and reading them as text would cost more than it saves.
            || !self.extra.is_empty()
    }
}

impl ExtractorDef {
    /// Whether any text of this extractor other than its own name may read
    /// the variable `name`.
    pub fn mentions(&self, name: &str) -> bool {
        [&self.part, &self.attribute]
            .into_iter()
            .any(|f| f.as_deref().is_some_and(|t| mentions(t, name)))
            || [&self.regex, &self.kval, &self.json, &self.xpath, &self.dsl]
                .into_iter()
                .any(|f| option_mentions(f, name))
            // Unknown fields: as for matchers.
            || !self.extra.is_empty()
    }
}

/// Names a matcher or extractor reads without writing them: the default
/// part, the parts behind `header`, `all` and `response`, and the status a
/// status matcher compares. An extracted value under one of these names
/// shadows that part for every operator after it.
pub fn reads_implicitly(name: &str) -> bool {
    const IMPLICIT: [&str; 8] = [
        "body",
        "header",
        "all_headers",
        "all",
        "response",
        "raw",
        "status_code",
        "content_length",
    ];
    IMPLICIT
        .iter()
        .any(|n| mentions(name, n) || mentions(n, name))
}
