//! The api crate's error kinds and, in one table ([`Error::status_and_code`]),
//! their HTTP status and problem `code`. Domain code returns these kinds and
//! never picks a status itself. Every error leaves the service as RFC 9457
//! problem details (`application/problem+json`).

use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::registry::{MetaResponses, Registry};
use poem_openapi::ApiResponse;

use crate::payments::PaymentsError;
use crate::problem::{FieldError, Problem, ProblemResponse, Upgrade, VerificationHelp};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request could not be parsed (body, parameters).
    #[error("{0}")]
    BadRequest(String),
    /// Missing, invalid or expired credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// Authenticated, but not allowed (key permission, role, tier feature).
    #[error("{detail}")]
    Forbidden { code: &'static str, detail: String },
    /// A tier limit or feature; carries the upgrade prompt.
    #[error("{detail}")]
    UpgradeRequired {
        code: &'static str,
        detail: String,
        upgrade: Upgrade,
    },
    /// A scan of a target whose ownership is not proven (when proof is
    /// required); carries how to prove it.
    #[error("{detail}")]
    TargetUnverified {
        detail: String,
        help: Box<VerificationHelp>,
    },
    /// An ownership check found no proof; `errors` says, per method
    /// (`dns_txt`, `http_file`), what it found instead.
    #[error("{detail}")]
    VerificationFailed {
        detail: String,
        errors: Vec<FieldError>,
        help: Box<VerificationHelp>,
    },
    /// Missing, or owned by someone else: the two are never told apart.
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{detail}")]
    Conflict { code: &'static str, detail: String },
    /// Well-formed but invalid values, each naming its field.
    #[error("invalid input: {}", .0.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; "))]
    Validation(Vec<FieldError>),
    #[error("rate limit exceeded, retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// Too many wrong passwords for one account, from wherever they came.
    #[error("too many failed attempts for this account, retry in {retry_after_secs} s")]
    AccountThrottled { retry_after_secs: u64 },
    /// The payment provider: unconfigured or down (503), refusing or
    /// garbling (502), or a webhook delivery that is not genuine (400).
    #[error(transparent)]
    Payments(#[from] crate::payments::PaymentsError),
    /// A report could not be rendered (our own fonts or PDF writer).
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// Postgres or Redis unreachable.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl Error {
    pub fn conflict(code: &'static str, detail: impl Into<String>) -> Error {
        Error::Conflict {
            code,
            detail: detail.into(),
        }
    }

    pub fn forbidden(code: &'static str, detail: impl Into<String>) -> Error {
        Error::Forbidden {
            code,
            detail: detail.into(),
        }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Error {
        Error::Validation(vec![FieldError {
            field: field.to_string(),
            message: message.into(),
        }])
    }

    /// The one table from error kind to HTTP status and problem code.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Error::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Error::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "unauthenticated"),
            Error::Forbidden { code, .. } => (StatusCode::FORBIDDEN, code),
            Error::UpgradeRequired { code, .. } => (StatusCode::FORBIDDEN, code),
            Error::TargetUnverified { .. } => (StatusCode::FORBIDDEN, "target_unverified"),
            Error::VerificationFailed { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "verification_failed")
            }
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Conflict { code, .. } => (StatusCode::CONFLICT, code),
            Error::Validation(_) => (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            Error::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Error::AccountThrottled { .. } => (StatusCode::TOO_MANY_REQUESTS, "account_throttled"),
            Error::Payments(e) => payments_status_and_code(e),
            Error::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Error::Report(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            Error::Unexpected(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    fn to_problem(&self) -> Problem {
        let (status, code) = self.status_and_code();
        let detail = match self {
            // The cause chain goes to the log, never to the client.
            Error::Unexpected(_)
            | Error::Report(_)
            | Error::Payments(PaymentsError::Unexpected(_)) => {
                "an unexpected error occurred".to_string()
            }
            Error::Unavailable(_) => "a backing service is unavailable".to_string(),
            other => other.to_string(),
        };
        let mut problem = Problem::new(status, code, detail);
        match self {
            Error::Validation(errors) => problem.errors = Some(errors.clone()),
            Error::UpgradeRequired { upgrade, .. } => problem.upgrade = Some(upgrade.clone()),
            Error::TargetUnverified { help, .. } => problem.verification = Some((**help).clone()),
            Error::VerificationFailed { errors, help, .. } => {
                problem.errors = Some(errors.clone());
                problem.verification = Some((**help).clone());
            }
            _ => {}
        }
        problem
    }

    pub fn into_problem_response(self) -> ProblemResponse {
        let (status, _) = self.status_and_code();
        if status.is_server_error() {
            tracing::error!(error = ?self, "request failed");
        }
        let problem = self.to_problem();
        match &self {
            Error::Unauthenticated(_) => ProblemResponse::unauthorized(problem),
            Error::RateLimited { retry_after_secs }
            | Error::AccountThrottled { retry_after_secs } => {
                ProblemResponse::TooManyRequests(problem.into(), *retry_after_secs)
            }
            _ => ProblemResponse::from_problem(problem),
        }
    }
}

/// The payment rows of the table in [`Error::status_and_code`].
fn payments_status_and_code(e: &PaymentsError) -> (StatusCode, &'static str) {
    match e {
        PaymentsError::NotConfigured(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "payments_not_configured")
        }
        PaymentsError::BadSignature(_) => (StatusCode::BAD_REQUEST, "invalid_signature"),
        PaymentsError::BadEvent(_) => (StatusCode::BAD_REQUEST, "invalid_event"),
        e if e.is_unavailable() => (
            StatusCode::SERVICE_UNAVAILABLE,
            "payment_provider_unavailable",
        ),
        PaymentsError::Unreachable(_)
        | PaymentsError::Refused(_)
        | PaymentsError::BadResponse(_) => (StatusCode::BAD_GATEWAY, "payment_provider_error"),
        PaymentsError::Unexpected(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Unexpected(anyhow::Error::new(e).context("postgres query failed"))
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Error::Unavailable(format!("postgres pool: {e}"))
    }
}

impl From<fred::error::Error> for Error {
    fn from(e: fred::error::Error) -> Self {
        Error::Unavailable(format!("redis: {e}"))
    }
}

impl From<scanfleet_bus::BusError> for Error {
    fn from(e: scanfleet_bus::BusError) -> Self {
        match e {
            scanfleet_bus::BusError::Redis(e) => e.into(),
            bad @ scanfleet_bus::BusError::BadJob { .. } => {
                Error::Unexpected(anyhow::Error::new(bad))
            }
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        self.into_problem_response().into_response()
    }
}

impl ApiResponse for Error {
    fn meta() -> MetaResponses {
        ProblemResponse::meta()
    }

    fn register(registry: &mut Registry) {
        ProblemResponse::register(registry);
    }
}

impl From<Error> for poem::Error {
    fn from(e: Error) -> Self {
        poem::Error::from_response(e.into_response())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
