//! Strings with `{{...}}` (and `§name§`) markers: paths, headers, bodies and
//! payload values. Parsed once; rendered per request.
//!
//! Rendering follows Nuclei's `expressions.Evaluate`:
//! - `{{name}}` whose exact text is a defined variable becomes its value
//!   (this is how hyphenated names like `{{interactsh-url}}` resolve);
//! - otherwise a marker holding an expression that reads a variable or calls
//!   a helper is evaluated (`{{base64(username)}}`, `{{md5({{num}})}}`);
//! - a marker with only literals (`{{7*7}}`, a classic template-injection
//!   probe) stays as written, so does anything that does not parse;
//! - a marker that cannot be resolved stays as written and its variable
//!   names are reported in [`Rendered::unresolved`].
//!
//! Values substituted into the output are never re-read as markers.

use super::ast::Interp;
use super::error::DslError;
use super::eval::{self, Rendered};
use super::parse;
use super::vars::Vars;

/// A parsed template string.
#[derive(Debug, Clone)]
pub struct TemplateString {
    src: Box<str>,
    interp: Interp,
}

impl TemplateString {
    /// Parses a template string. This never fails on odd markers (they are
    /// kept as text, as Nuclei does); the `Result` is for future strictness
    /// and for symmetry with [`Expr::parse`](super::Expr::parse).
    pub fn parse(src: &str) -> Result<TemplateString, DslError> {
        Ok(TemplateString {
            src: src.into(),
            interp: parse::interpolated(src),
        })
    }

    pub fn source(&self) -> &str {
        &self.src
    }

    /// True when the string has no marker at all: rendering returns it as is.
    pub fn is_plain(&self) -> bool {
        self.interp.is_plain()
    }

    /// Variables the markers read, sorted, without repeats. A marker that is
    /// a bare name (`{{interactsh-url}}`) counts as that one name.
    pub fn variables(&self) -> Vec<String> {
        self.interp.variables()
    }

    /// Helpers the markers call, sorted, without repeats.
    pub fn functions(&self) -> Vec<String> {
        self.interp.functions()
    }

    /// Renders against a scope. Never fails: what cannot be resolved is
    /// kept verbatim and reported in the result.
    pub fn render(&self, vars: &dyn Vars) -> Rendered {
        eval::render(&self.interp, vars)
    }
}
