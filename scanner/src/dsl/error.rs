//! Errors of the expression language, at parse time and at evaluation time.

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
    #[error("invalid regular expression '{pattern}': {message}")]
    InvalidRegex { pattern: String, message: String },

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
    #[error("{function}: {message}")]
    Argument {
        function: &'static str,
        message: String,
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
    pub(crate) fn arg(function: &'static str, message: impl Into<String>) -> DslError {
        DslError::Argument {
            function,
            message: message.into(),
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

impl From<crate::goregex::RegexError> for DslError {
    fn from(e: crate::goregex::RegexError) -> DslError {
        DslError::InvalidRegex {
            pattern: e.pattern,
            message: e.reason,
        }
    }
}
