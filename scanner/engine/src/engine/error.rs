//! Errors that stop the engine from starting or a template from compiling.
//! The failures a run reports per target, alongside its results, are in
//! `failure`.

use crate::dsl::DslError;
use crate::flowjs::FlowError;
use crate::operators::OperatorError;
use scanfleet_http::{AuthorityError, HttpError};

/// Failures that stop the engine from starting or a template from compiling.
///
/// Per-request trouble during a run is not an `EngineError`: it is reported
/// as a [`TargetError`](super::TargetError) so one bad host or template
/// never ends the run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The HTTP client could not be built from the configuration.
    #[error("could not build the HTTP client")]
    Client(#[source] HttpError),
    /// A target URL is not an absolute http(s) URL.
    #[error("invalid target {input:?}")]
    InvalidTarget {
        input: String,
        #[source]
        reason: TargetProblem,
    },
    /// A template cannot be prepared for execution (bad expression, payload
    /// unknown attack type, ...).
    #[error("template {template_id}")]
    Compile {
        template_id: String,
        #[source]
        cause: CompileError,
    },
    /// A `--var name=value` option is malformed.
    #[error("invalid variable {0:?}: expected name=value")]
    InvalidVariable(String),
    /// Anything else.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// What is wrong with a target URL.
#[derive(Debug, thiserror::Error)]
pub enum TargetProblem {
    #[error("expected scheme://host")]
    NoScheme,
    #[error("only http and https targets are supported")]
    Scheme,
    #[error("missing host")]
    MissingHost,
    #[error(transparent)]
    Authority(#[from] AuthorityError),
}

/// Why a template could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// A string with `{{...}}` markers that does not parse.
    #[error("{text:?} does not parse")]
    Text {
        text: String,
        #[source]
        source: DslError,
    },
    /// A JavaScript `flow:` that does not parse.
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// Matchers or extractors that do not compile.
    #[error(transparent)]
    Operators(#[from] OperatorError),
    #[error(transparent)]
    Attack(#[from] UnknownAttack),
}

/// An `attack:` value that names no attack type.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown attack type {0:?}")]
pub struct UnknownAttack(pub String);
