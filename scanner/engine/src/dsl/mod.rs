//! The template expression language: Nuclei's DSL (govaluate syntax plus
//! Nuclei's helper functions) and `{{...}}` interpolation in strings.
//!
//! Matchers, extractors and the request builder compile expressions once
//! when a template loads ([`Expr::parse`], [`TemplateString::parse`]) and
//! evaluate them for every response or request against a [`Vars`] scope.
//! Strings are byte strings shared by reference count, so a large response
//! body is never copied to be looked at.
//!
//! # Semantics worth knowing
//! - Typing is govaluate's: `+` joins when either side is a string, other
//!   arithmetic needs numbers, `&&`/`||`/`!` need booleans, and values of
//!   different kinds are never equal (`"200" == 200` is false; `mmh3` returns
//!   a string, so templates compare it with a quoted number).
//! - In string literals a backslash makes the next character literal, as in
//!   govaluate: `'\n'` is the letter `n`, `'\''` is a quote.
//! - `{{...}}` inside a string literal of an expression is resolved from the
//!   same scope at evaluation time, as Nuclei does for DSL matchers.
//! - Helper calls with an impossible argument count parse and fail when run
//!   (Nuclei's behaviour); [`Expr::parse_strict`] rejects them up front and
//!   [`Expr::problems`] lists them.
//! - Helpers that need the network (`resolve`, `jarm`, ...) are recognised
//!   and fail with [`DslError::Unsupported`].
//! - `wait_for(n)` does not sleep where it is evaluated: it notes the time
//!   for the request being built ([`RequestedWait`]), which the engine waits
//!   for, bounded, before sending.
//!
//! # Layout
//! - [`value`] holds [`Value`], its conversions and Nuclei's equality rules.
//! - [`vars`] holds the [`Vars`] lookup trait and ways to layer scopes.
//! - `lexer`, `ast`, `parse` and `eval` hold tokens, the syntax tree (of
//!   expressions and of strings with markers, which nest), the parsers and
//!   evaluation; [`expr`] holds [`Expr`], the parsed expression.
//! - [`helpers`] holds the helper functions.
//! - [`template`] holds [`TemplateString`]; `eval` its [`Rendered`] result.
//! - [`error`] holds [`DslError`].

pub mod error;
pub mod expr;
pub mod helpers;
pub mod template;
pub mod value;
pub mod vars;

mod ast;
mod eval;
mod lexer;
mod parse;

#[cfg(test)]
mod tests;

pub use error::{ArgumentError, DslError, VersionError};
pub use eval::Rendered;
pub use expr::Expr;
pub use helpers::{
    compare_versions, helper_names, is_helper, is_supported_helper, mmh3_hash, RequestedWait,
};
pub use template::TemplateString;
pub use value::{Bytes, Value};
pub use vars::{Chain, FnVars, Layers, NoVars, Vars};

/// Parses and evaluates in one go. For one-off use; hot paths should keep
/// the parsed [`Expr`].
pub fn evaluate(src: &str, vars: &dyn Vars) -> Result<Value, DslError> {
    Expr::parse(src)?.eval(vars)
}
