//! Errors of the execution engine, and the per-target failures a run reports
//! alongside its results.

use serde::Serialize;

use crate::http::HttpError;

/// Failures that stop the engine from starting or a template from compiling.
///
/// Per-request trouble during a run is not an `EngineError`: it is reported
/// as a [`TargetError`] so one bad host or template never ends the run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The HTTP client could not be built from the configuration.
    #[error("could not build the HTTP client: {0}")]
    Client(#[source] HttpError),
    /// A target URL is not an absolute http(s) URL.
    #[error("invalid target {input:?}: {reason}")]
    InvalidTarget { input: String, reason: String },
    /// A template cannot be prepared for execution (bad expression, payload
    /// unknown attack type, ...).
    #[error("template {template_id}: {reason}")]
    Compile { template_id: String, reason: String },
    /// A `--var name=value` option is malformed.
    #[error("invalid variable {0:?}: expected name=value")]
    InvalidVariable(String),
    /// Anything else.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

/// What went wrong with one target (and possibly one template on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetErrorKind {
    /// The address safety check refused the target: nothing was scanned.
    Refused,
    /// A request could not be sent or its response read (after retries).
    Request,
    /// A request was not sent because it could not be built, e.g. it still
    /// held unresolved `{{variables}}` (Nuclei skips such requests too).
    Skipped,
    /// A JavaScript `flow:` stopped early: it threw, or went past its step
    /// or time budget. Results of the steps that ran stand.
    Flow,
}

/// One failure reported by a run; the run itself goes on.
#[derive(Debug, Clone, Serialize)]
pub struct TargetError {
    pub target: String,
    /// The template whose request failed; `None` for failures of the target as a whole.
    pub template_id: Option<String>,
    pub kind: TargetErrorKind,
    pub message: String,
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.template_id {
            Some(t) => write!(f, "{} [{}]: {}", self.target, t, self.message),
            None => write!(f, "{}: {}", self.target, self.message),
        }
    }
}
