//! Matchers and extractors: decide whether a response matches a template and
//! pull values out of it. Everything is compiled once when templates load
//! (regexes, DSL expressions, jq and XPath queries) and evaluated on rayon
//! workers, so compiled operators are immutable and `Send + Sync`.
//!
//! # Layout
//! - [`defs`] — the YAML shapes of matchers and extractors.
//! - [`matcher`] — word, regex, status, size, binary, dsl and xpath matchers.
//! - [`extractor`] — regex, kval, json, xpath and dsl extractors.
//! - [`evaluate`] — a request's operators together (`matchers-condition`,
//!   extracted values visible to matchers).
//! - `part` — which response variable a matcher reads.
//! - `render` — `{{...}}` markers in matcher words (the DSL's template strings).
//! - `json` — jq queries (jaq).
//! - `xpath` — XPath over HTML and XML.
//! - [`error`] — compile errors.

pub mod defs;
pub mod error;
pub mod evaluate;
pub mod extractor;
mod json;
pub mod matcher;
mod part;
mod render;
mod xpath;

#[cfg(test)]
mod tests;

pub use defs::{ExtractorDef, MatcherDef, StringOrList};
pub use error::{JsonPathError, OperatorError, XPathError};
pub use evaluate::{Condition, OperatorResult, Operators};
pub use extractor::Extractor;
pub use matcher::{MatchOutcome, Matcher};
