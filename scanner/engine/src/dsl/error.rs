//! Errors of the expression language, at parse time and at evaluation time.

use std::sync::Arc;

use crate::goregex::{RegexError, RegexFailure};

/// Everything that can go wrong while compiling or evaluating a DSL
/// expression or a `{{...}}` template string.
///
/// Parse-time variants (`Syntax`, `UnknownFunction`, `Arity`,
/// `InvalidRegex` for literal patterns) mean the template itself is broken;
/// the others depend on the data an expression is evaluated against.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DslError {
    /// The expression text is not valid: unbalanced parentheses, stray
    /// tokens, unterminated strings. `at` is a byte offset into the source.
    #[error("syntax error at byte {at}: {message}")]
    Syntax { at: usize, message: String },

    /// A call names a function that is not a known helper.
    #[error("unknown function '{0}'")]
    UnknownFunction(String),

    /// A helper was called with a number of arguments it does not accept.
    #[error("function '{name}' takes {expected} arguments, got {got}")]
    Arity {
        name: String,
        expected: String,
        got: usize,
    },

    /// A regular expression (literal or computed) does not compile.
    #[error("invalid regular expression '{pattern}'")]
    InvalidRegex {
        pattern: String,
        #[source]
        source: RegexFailure,
    },

    /// The expression reads a variable that the evaluation scope lacks.
    /// Nuclei reports this as "No parameter ... found".
    #[error("no parameter '{0}' found")]
    UndefinedVariable(String),

    /// An operator was applied to values it cannot combine, such as
    /// `"abc" && true` or `"1" < 2`.
    #[error("operator '{op}' cannot be applied to {left} and {right}")]
    TypeMismatch {
        op: &'static str,
        left: &'static str,
        right: &'static str,
    },

    /// A helper rejected its arguments (bad base64, bad version string,
    /// index out of range...).
    #[error("{function}")]
    Argument {
        function: &'static str,
        #[source]
        reason: ArgumentError,
    },

    /// A recognised helper that this engine deliberately does not run,
    /// because it needs the network, blocks a worker, or needs a crypto or
    /// gadget library the scanner does not ship.
    #[error("function '{function}' is not supported: {reason}")]
    Unsupported {
        function: &'static str,
        reason: &'static str,
    },
}

impl DslError {
    /// A helper's own rule broken (`index out of range: 5`).
    pub(crate) fn arg(function: &'static str, message: impl Into<String>) -> DslError {
        DslError::Argument {
            function,
            reason: ArgumentError::Rule(message.into()),
        }
    }

    /// An argument that did not decode (base64, hex, JSON, a compressed
    /// stream, a version), with the decoder's error.
    pub(crate) fn bad_input(function: &'static str, reason: impl Into<ArgumentError>) -> DslError {
        DslError::Argument {
            function,
            reason: reason.into(),
        }
    }

    /// True when the error comes from the data an expression met rather than
    /// from the expression itself; Nuclei silences these in matchers.
    pub fn is_data_dependent(&self) -> bool {
        matches!(
            self,
            DslError::UndefinedVariable(_)
                | DslError::TypeMismatch { .. }
                | DslError::Argument { .. }
        )
    }
}

impl From<RegexError> for DslError {
    fn from(e: RegexError) -> DslError {
        DslError::InvalidRegex {
            pattern: e.pattern,
            source: e.source,
        }
    }
}

/// Why a helper rejected an argument.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ArgumentError {
    /// A rule of the helper itself (an index out of range, an empty set).
    #[error("{0}")]
    Rule(String),
    #[error(transparent)]
    Base64(#[from] base64::DecodeError),
    #[error(transparent)]
    Hex(#[from] hex::FromHexError),
    /// Shared, so that the error stays cheap to clone.
    #[error(transparent)]
    Json(Arc<serde_json::Error>),
    /// A compressed stream that does not decode, or an archive that cannot
    /// be written.
    #[error(transparent)]
    Io(Arc<std::io::Error>),
    #[error(transparent)]
    Version(#[from] VersionError),
}

impl From<serde_json::Error> for ArgumentError {
    fn from(e: serde_json::Error) -> ArgumentError {
        ArgumentError::Json(Arc::new(e))
    }
}

impl From<std::io::Error> for ArgumentError {
    fn from(e: std::io::Error) -> ArgumentError {
        ArgumentError::Io(Arc::new(e))
    }
}

/// Equal when of the same kind: the same rule text, the same decoder error,
/// the same JSON error category at the same place, the same I/O error kind.
impl PartialEq for ArgumentError {
    fn eq(&self, other: &ArgumentError) -> bool {
        use ArgumentError::*;
        match (self, other) {
            (Rule(a), Rule(b)) => a == b,
            (Base64(a), Base64(b)) => a == b,
            (Hex(a), Hex(b)) => a == b,
            (Json(a), Json(b)) => {
                (a.classify(), a.line(), a.column()) == (b.classify(), b.line(), b.column())
            }
            (Io(a), Io(b)) => a.kind() == b.kind(),
            (Version(a), Version(b)) => a == b,
            _ => false,
        }
    }
}

/// Why a version or a constraint could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("malformed version: {0}")]
    MalformedVersion(String),
    #[error("error parsing version")]
    Segment(#[source] std::num::ParseIntError),
    #[error("malformed constraint: {0}")]
    MalformedConstraint(String),
}
