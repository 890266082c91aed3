//! Matchers and extractors: decide whether a response matches a template and
//! pull values out of it.
//!
//! # Layout
//! - [`defs`]: the YAML shapes of matchers and extractors.

pub mod defs;

pub use defs::{ExtractorDef, MatcherDef, StringOrList};
