//! The template as YAML writes it: `id`, `info`, `variables`, `http` blocks,
//! and the top-level switches (`flow`, `self-contained`) that decide whether
//! this engine can run it.
//!
//! Field names and shapes follow Nuclei's template format. Keys this model
//! does not know are not an error: the loader records them (with their path)
//! in [`Template::unknown_fields`] so the runnability check can name them.

use std::path::PathBuf;

use scanfleet_common::Severity;
use serde::{Deserialize, Deserializer};

use super::yaml;
use crate::operators::{ExtractorDef, MatcherDef};

/// Top-level sections that hold requests of protocols other than HTTP.
/// `network` is the older name of `tcp`; `workflows` chains other templates.
pub const OTHER_PROTOCOLS: &[&str] = &[
    "dns",
    "file",
    "network",
    "tcp",
    "headless",
    "ssl",
    "websocket",
    "whois",
    "code",
    "javascript",
    "workflows",
];

/// One template file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Template {
    #[serde(deserialize_with = "yaml::text")]
    pub id: String,
    pub info: Info,
    /// Template variables in document order; later ones may refer to
    /// earlier ones through `{{...}}`.
    #[serde(default, deserialize_with = "yaml::ordered_text_map")]
    pub variables: Vec<(String, String)>,
    /// The HTTP blocks, run in order. `requests:` is the older name.
    #[serde(default, alias = "requests")]
    pub http: Vec<HttpBlock>,
    /// JavaScript that orchestrates the blocks (`http(1) && http(2)`).
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub flow: Option<String>,
    /// Requests carry their own absolute URLs and ignore the target.
    #[serde(default)]
    pub self_contained: bool,
    /// Stop the whole template at its first match.
    #[serde(default)]
    pub stop_at_first_match: bool,
    /// Request signing (`AWS`), deprecated in Nuclei.
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub signature: Option<String>,
    /// Other-protocol sections present in the file (names from
    /// [`OTHER_PROTOCOLS`]); their content is not parsed.
    #[serde(skip)]
    pub other_protocols: Vec<String>,
    /// Keys the model does not know, as dotted paths (`http.0.analyzer`,
    /// `constants`). Filled by the loader.
    #[serde(skip)]
    pub unknown_fields: Vec<String>,
    /// The file the template was read from, when it came from disk.
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// The `info` section: what the template is about.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Info {
    #[serde(default, deserialize_with = "yaml::text")]
    pub name: String,
    #[serde(default, deserialize_with = "yaml::comma_list")]
    pub author: Vec<String>,
    /// Anything outside the five levels, or missing, is `info`.
    #[serde(default = "default_severity", deserialize_with = "severity")]
    pub severity: Severity,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub impact: Option<String>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub remediation: Option<String>,
    #[serde(default, deserialize_with = "yaml::comma_list")]
    pub tags: Vec<String>,
    #[serde(default, deserialize_with = "yaml::string_list")]
    pub reference: Vec<String>,
    #[serde(default)]
    pub classification: Option<Classification>,
    /// Free-form key/values (`max-request`, `shodan-query`, `verified`...).
    #[serde(default, deserialize_with = "yaml::ordered_map")]
    pub metadata: Vec<(String, serde_json::Value)>,
}

impl Default for Info {
    fn default() -> Self {
        Info {
            name: String::new(),
            author: Vec::new(),
            severity: Severity::Info,
            description: None,
            impact: None,
            remediation: None,
            tags: Vec::new(),
            reference: Vec::new(),
            classification: None,
            metadata: Vec::new(),
        }
    }
}

fn default_severity() -> Severity {
    Severity::Info
}

fn severity<'de, D: Deserializer<'de>>(d: D) -> Result<Severity, D::Error> {
    Ok(Severity::normalize(&yaml::opt_text(d)?.unwrap_or_default()))
}

/// `info.classification`: CVE/CWE identifiers and scores.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub struct Classification {
    #[serde(default, deserialize_with = "yaml::comma_list")]
    pub cve_id: Vec<String>,
    #[serde(default, deserialize_with = "yaml::comma_list")]
    pub cwe_id: Vec<String>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub cvss_metrics: Option<String>,
    #[serde(default, deserialize_with = "yaml::opt_f64")]
    pub cvss_score: Option<f64>,
    #[serde(default, deserialize_with = "yaml::opt_f64")]
    pub epss_score: Option<f64>,
    #[serde(default, deserialize_with = "yaml::opt_f64")]
    pub epss_percentile: Option<f64>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub cpe: Option<String>,
}

/// A `payloads:` value: an inline list, or the path of a word-list file
/// (one value per line). A string with a line break is an inline list, as in
/// Nuclei.
#[derive(Debug, Clone, PartialEq)]
pub enum PayloadDef {
    List(Vec<String>),
    File(String),
}

impl<'de> Deserialize<'de> for PayloadDef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = PayloadDef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of payload values or a file path")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<PayloadDef, A::Error> {
                let mut out = Vec::new();
                while let Some(yaml::Text(v)) = seq.next_element::<yaml::Text>()? {
                    out.push(v);
                }
                Ok(PayloadDef::List(out))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PayloadDef, E> {
                Ok(string_payload(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PayloadDef, E> {
                Ok(PayloadDef::List(vec![v.to_string()]))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PayloadDef, E> {
                Ok(PayloadDef::List(vec![v.to_string()]))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<PayloadDef, E> {
                Ok(PayloadDef::List(vec![v.to_string()]))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<PayloadDef, E> {
                Ok(PayloadDef::List(vec![v.to_string()]))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<PayloadDef, E> {
                Ok(PayloadDef::List(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

fn string_payload(v: &str) -> PayloadDef {
    if v.contains('\n') {
        PayloadDef::List(v.split('\n').map(str::to_owned).collect())
    } else {
        PayloadDef::File(v.trim().to_owned())
    }
}

/// Where a payload file named by a template was looked for, and what came
/// of it.
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadFile {
    /// The payload name (`username`).
    pub name: String,
    /// The path as the template wrote it.
    pub path: String,
    /// The file that was read, or `None` when no candidate existed (or the
    /// path tried to leave the template tree).
    pub resolved: Option<PathBuf>,
}

/// One entry of `http:`. Every field of Nuclei's HTTP request is here so
/// the check can tell which ones a template uses.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub struct HttpBlock {
    /// Block id; extracted values are also published as `<id>_<name>`.
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub name: Option<String>,
    /// HTTP method of `path` requests (default GET).
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub method: Option<String>,
    #[serde(default, deserialize_with = "yaml::string_list")]
    pub path: Vec<String>,
    /// Raw HTTP/1.1 requests, each a whole message.
    #[serde(default, deserialize_with = "yaml::string_list")]
    pub raw: Vec<String>,
    #[serde(default, deserialize_with = "yaml::ordered_text_map")]
    pub headers: Vec<(String, String)>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub body: Option<String>,
    /// `payloads:` as written. The loader fills [`HttpBlock::payloads`].
    #[serde(default, rename = "payloads", deserialize_with = "yaml::ordered_map")]
    pub payload_defs: Vec<(String, PayloadDef)>,
    /// Payload values by name, in document order, with word-list files read.
    #[serde(skip)]
    pub payloads: Vec<(String, Vec<String>)>,
    /// Every payload file the block names and whether it was found.
    #[serde(skip)]
    pub payload_files: Vec<PayloadFile>,
    /// batteringram, pitchfork or clusterbomb.
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub attack: Option<String>,
    #[serde(default)]
    pub threads: Option<u32>,
    #[serde(default)]
    pub redirects: bool,
    /// Follow redirects only to the same host.
    #[serde(default)]
    pub host_redirects: bool,
    #[serde(default)]
    pub max_redirects: Option<u32>,
    #[serde(default)]
    pub stop_at_first_match: bool,
    /// `and` or `or` (default) between the block's matchers.
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub matchers_condition: Option<String>,
    #[serde(default)]
    pub matchers: Vec<MatcherDef>,
    #[serde(default)]
    pub extractors: Vec<ExtractorDef>,
    /// Keep numbered history (`body_1`, `status_code_2`) for matching.
    #[serde(default)]
    pub req_condition: bool,
    #[serde(default)]
    pub cookie_reuse: bool,
    #[serde(default)]
    pub disable_cookie: bool,
    /// Send raw requests byte for byte, without normalisation.
    #[serde(default, rename = "unsafe")]
    pub unsafe_: bool,
    #[serde(default)]
    pub race: bool,
    #[serde(default, rename = "race_count")]
    pub race_count: Option<u32>,
    #[serde(default)]
    pub pipeline: bool,
    #[serde(default)]
    pub pipeline_concurrent_connections: Option<u32>,
    #[serde(default)]
    pub pipeline_requests_per_connection: Option<u32>,
    /// Run later requests once per extracted value, not just the first.
    #[serde(default)]
    pub iterate_all: bool,
    #[serde(default)]
    pub skip_variables_check: bool,
    /// Read the whole body of an unsafe response, ignoring Content-Length.
    #[serde(default)]
    pub read_all: bool,
    /// Most response-body bytes to read.
    #[serde(default)]
    pub max_size: Option<u64>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub digest_username: Option<String>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub digest_password: Option<String>,
    /// Do not merge the input URL's path into raw request targets.
    #[serde(default)]
    pub disable_path_automerge: bool,
    #[serde(default)]
    pub self_contained: bool,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub signature: Option<String>,
    /// DAST fuzzing rules; kept as written.
    #[serde(default)]
    pub fuzzing: Option<serde_json::Value>,
    /// Matchers gating fuzzing.
    #[serde(default)]
    pub pre_condition: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "yaml::opt_text")]
    pub pre_condition_operator: Option<String>,
    /// Matchers applied to every other template's responses.
    #[serde(default)]
    pub global_matchers: bool,
}

impl HttpBlock {
    /// Every request template of the block, path and raw alike.
    pub fn request_texts(&self) -> impl Iterator<Item = &str> {
        self.path.iter().chain(self.raw.iter()).map(String::as_str)
    }
}
