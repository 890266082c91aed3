//! Compiled expressions: [`Expr`], a parsed expression with its source,
//! ready to evaluate. The tree is in `ast`, the parser in `parse`, the
//! evaluator in `eval`.

use std::fmt;
use std::sync::Arc;

use super::ast::{self, Node};
use super::error::DslError;
use super::eval;
use super::parse;
use super::value::Value;
use super::vars::Vars;

/// A parsed expression: compile once, evaluate many times, share freely
/// between threads (cloning is a reference-count bump).
#[derive(Clone)]
pub struct Expr {
    src: Arc<str>,
    root: Arc<Node>,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expr").field(&self.src).finish()
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.src)
    }
}

impl Expr {
    /// Parses an expression. Calls to functions that are not helpers fail
    /// here with [`DslError::UnknownFunction`]. A call with an argument
    /// count the helper never accepts parses (as in Nuclei) and fails with
    /// [`DslError::Arity`] when evaluated; see [`Expr::problems`].
    pub fn parse(src: &str) -> Result<Expr, DslError> {
        Self::parse_with(src, false)
    }

    /// Like [`Expr::parse`], but argument-count errors fail the parse.
    pub fn parse_strict(src: &str) -> Result<Expr, DslError> {
        Self::parse_with(src, true)
    }

    /// Errors that are certain to occur whenever the expression runs
    /// (currently: helper calls with the wrong number of arguments, and
    /// literal regular expressions that do not compile). A template loader
    /// can report these without rejecting the template.
    pub fn problems(&self) -> Vec<DslError> {
        let mut out = Vec::new();
        ast::problems(&self.root, &mut out);
        out
    }

    fn parse_with(src: &str, strict: bool) -> Result<Expr, DslError> {
        Ok(Expr {
            src: Arc::from(src),
            root: Arc::new(parse::expression(src, strict)?),
        })
    }

    /// Evaluates against a scope of variables.
    pub fn eval(&self, vars: &dyn Vars) -> Result<Value, DslError> {
        eval::eval(&self.root, vars)
    }

    /// Evaluates and requires a boolean, as Nuclei's DSL matchers do.
    pub fn eval_bool(&self, vars: &dyn Vars) -> Result<bool, DslError> {
        match self.eval(vars)? {
            Value::Bool(b) => Ok(b),
            other => Err(DslError::TypeMismatch {
                op: "dsl result",
                left: other.type_name(),
                right: "bool",
            }),
        }
    }

    /// The source text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.src
    }

    /// Names of the variables the expression reads (including those inside
    /// `{{...}}` markers in its string literals), sorted, without repeats.
    pub fn variables(&self) -> Vec<String> {
        ast::variables(&self.root)
    }

    /// Names of the helpers the expression calls, sorted, without repeats.
    pub fn functions(&self) -> Vec<String> {
        ast::functions(&self.root)
    }

    /// True when the expression contains no variable at all, so its value
    /// never changes (`{{7*7}}` in a payload is such a literal, and Nuclei
    /// leaves it as written).
    pub fn is_literal_only(&self) -> bool {
        ast::is_literal_only(&self.root)
    }
}
