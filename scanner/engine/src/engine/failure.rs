//! The failures a run reports per target, alongside its results: one bad
//! host or template never ends the run.

use std::sync::Arc;

use serde::Serialize;

use super::build::Skip;
use crate::flowjs::FlowError;
use scanfleet_common::chain::Chain;
use scanfleet_http::HttpError;

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
    /// What happened, with its cause; serialised as its text (`message`).
    #[serde(rename = "message", serialize_with = "as_text")]
    pub failure: Arc<TargetFailure>,
}

impl TargetError {
    /// The failure as text, its causes included, as it is printed and
    /// serialised.
    pub fn message(&self) -> String {
        Chain(&*self.failure).to_string()
    }
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.template_id {
            Some(t) => write!(f, "{} [{}]: {}", self.target, t, Chain(&*self.failure)),
            None => write!(f, "{}: {}", self.target, Chain(&*self.failure)),
        }
    }
}

fn as_text<S: serde::Serializer>(failure: &Arc<TargetFailure>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Chain(&**failure))
}

/// What went wrong with a target or one of its requests.
#[derive(Debug, thiserror::Error)]
pub enum TargetFailure {
    /// The address safety check refused the target.
    #[error(transparent)]
    Refused(HttpError),
    /// A request could not be sent or its response read.
    #[error("{url}")]
    Request {
        url: String,
        #[source]
        source: HttpError,
    },
    /// Too many requests in a row failed; the target is given up.
    #[error("giving up after {0} failed requests in a row")]
    GaveUp(usize),
    /// A request could not be built, so was not sent.
    #[error(transparent)]
    Skipped(#[from] Skip),
    /// A boolean `flow:` names a block the template does not have.
    #[error("flow step http({step}): the template has {blocks} http block(s)")]
    MissingStep { step: usize, blocks: usize },
    /// A JavaScript `flow:` calls `http(...)` with a block it does not have.
    #[error("flow step http({0:?}): the template has no such block")]
    NoSuchBlock(String),
    /// A JavaScript `flow:` stopped early.
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// The thread running a JavaScript `flow:` ended abnormally.
    #[error("flow script failed: flow thread ended")]
    FlowThread(#[source] tokio::task::JoinError),
    /// Matching a response panicked (a bug; the run goes on).
    #[error("matching panicked")]
    MatchingPanicked,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_error_keeps_its_cause_and_is_serialised_with_its_text() {
        let source = scanfleet_http::TargetUrl::parse("ftp://h.test/").unwrap_err();
        let error = TargetError {
            target: "http://h.test".into(),
            template_id: Some("t".into()),
            kind: TargetErrorKind::Request,
            failure: Arc::new(TargetFailure::Request {
                url: "http://h.test/x".into(),
                source,
            }),
        };
        let text =
            "http://h.test/x: invalid URL \"ftp://h.test/\": only http and https are supported";
        assert_eq!(error.message(), text);
        assert_eq!(error.to_string(), format!("http://h.test [t]: {text}"));
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(json["message"], text);
        let cause = std::error::Error::source(&*error.failure).unwrap();
        assert!(cause.downcast_ref::<HttpError>().is_some());
    }
}
