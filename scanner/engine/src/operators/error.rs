//! Errors raised while compiling matchers and extractors. Evaluation never
//! fails: a response that does not fit (missing part, body that is not JSON)
//! simply does not match or yields nothing, as in Nuclei.

use thiserror::Error;

use crate::dsl::DslError;

/// Why a matcher or extractor could not be compiled. Every variant names the
/// offending input so the template loader can report it verbatim.
#[derive(Debug, Error)]
pub enum OperatorError {
    /// The `type:` of a matcher is not one this engine runs.
    #[error("unknown matcher type `{0}`")]
    UnknownMatcherType(String),
    /// The `type:` of an extractor is not one this engine runs.
    #[error("unknown extractor type `{0}`")]
    UnknownExtractorType(String),
    /// A `condition` or `matchers-condition` other than `and`/`or`.
    #[error("unknown condition `{0}` (expected `and` or `or`)")]
    UnknownCondition(String),
    /// An `encoding` other than `hex`.
    #[error("unknown encoding `{0}` (only `hex` is supported)")]
    UnknownEncoding(String),
    /// The matcher or extractor lacks the list its type works on
    /// (a `word` matcher without `words`, a `json` extractor without `json`).
    #[error("{kind} requires at least one `{field}` value")]
    MissingValues { kind: String, field: &'static str },
    /// A regular expression that does not compile (after translation from
    /// Go's RE2 dialect).
    #[error(transparent)]
    BadRegex(#[from] crate::goregex::RegexError),
    /// A `binary` value that is not valid hexadecimal.
    #[error("invalid hex in binary matcher `{value}`")]
    BadHex {
        value: String,
        #[source]
        reason: hex::FromHexError,
    },
    /// A DSL expression that does not parse.
    #[error("invalid dsl expression `{expression}`")]
    BadDsl {
        expression: String,
        #[source]
        reason: DslError,
    },
    /// An XPath query that does not parse.
    #[error("invalid xpath `{query}`")]
    BadXPath {
        query: String,
        #[source]
        reason: XPathError,
    },
    /// A jq-style JSON query that does not parse or compile.
    #[error("invalid json path `{query}`")]
    BadJsonPath {
        query: String,
        #[source]
        reason: JsonPathError,
    },
}

/// Why an XPath query was refused.
#[derive(Debug, Error)]
pub enum XPathError {
    #[error("empty query")]
    Empty,
    #[error(transparent)]
    Parse(#[from] sxd_xpath::ParserError),
}

/// Why a jq-style query was refused. jaq's errors borrow the query text and
/// the loader's arena, so only a description of the first one (at most 200
/// characters) can leave the compiler.
#[derive(Debug, Error)]
pub enum JsonPathError {
    #[error("does not parse ({count} error(s): {first})")]
    Parse { count: usize, first: String },
    #[error("does not compile ({count} error(s): {first})")]
    Compile { count: usize, first: String },
}
