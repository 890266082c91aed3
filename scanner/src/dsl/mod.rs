//! The template expression language: Nuclei's DSL (govaluate syntax plus
//! Nuclei's helper functions) and `{{...}}` interpolation in strings.
//!
//! Matchers, extractors and the request builder compile expressions once
//! when a template loads ([`Expr::parse`], [`TemplateString::parse`]) and
//! evaluate them for every response or request against a [`Vars`] scope.
//! Strings are byte strings shared by reference count, so a large response
//! body is never copied to be looked at.
//!
//! # Layout
//! - [`value`] holds [`Value`], its conversions and Nuclei's equality rules.
//! - [`vars`] holds the [`Vars`] lookup trait and ways to layer scopes.
//! - `lexer`, [`expr`] and `eval` hold tokens, syntax tree and evaluation.
//! - [`helpers`] holds the helper functions.
//! - [`template`] holds [`TemplateString`] and [`Rendered`].
//! - [`error`] holds [`DslError`].

pub mod error;
pub mod expr;
pub mod helpers;
pub mod template;
pub mod value;
pub mod vars;

mod eval;
mod lexer;

#[cfg(test)]
mod tests;

pub use error::DslError;
pub use expr::Expr;
pub use helpers::{compare_versions, helper_names, is_helper, is_supported_helper, mmh3_hash};
pub use template::{Rendered, TemplateString};
pub use value::{Bytes, Value};
pub use vars::{Chain, FnVars, Layers, NoVars, Vars};

/// Parses and evaluates in one go. For one-off use; hot paths should keep
/// the parsed [`Expr`].
pub fn evaluate(src: &str, vars: &dyn Vars) -> Result<Value, DslError> {
    Expr::parse(src)?.eval(vars)
}
