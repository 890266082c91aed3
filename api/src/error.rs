//! Errors on their way out of the api: the one table ([`status_and_code`])
//! from the core's error kinds ([`scanfleet_core::Error`]) to an HTTP status
//! and problem `code`, and their RFC 9457 problem details
//! (`application/problem+json`). The core never picks a status; features
//! (payments, reports) map their own errors onto the core's kinds.

use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::registry::{MetaResponses, Registry};
use poem_openapi::ApiResponse;
pub use scanfleet_core::Error;

use crate::problem::{Problem, ProblemResponse, WWW_AUTHENTICATE_INVALID_TOKEN};

/// An error as an operation returns it: a core error kind, answered as
/// problem details.
#[derive(Debug)]
pub struct ApiError(pub Error);

/// What operations and edge helpers return.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// Conversions for `?` on everything that converts into a core error.
macro_rules! into_api_error {
    ($($from:ty),* $(,)?) => {
        $(impl From<$from> for ApiError {
            fn from(e: $from) -> Self {
                ApiError(Error::from(e))
            }
        })*
    };
}

into_api_error!(
    tokio_postgres::Error,
    deadpool_postgres::PoolError,
    fred::error::Error,
    scanfleet_bus::BusError,
    anyhow::Error,
    scanfleet_report::ReportError,
);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

/// The one table from error kind to HTTP status and problem code.
pub fn status_and_code(e: &Error) -> (StatusCode, &'static str) {
    match e {
        Error::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
        Error::Unauthenticated(_) | Error::InvalidToken(_) => {
            (StatusCode::UNAUTHORIZED, "unauthenticated")
        }
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
        Error::Unavailable { code, .. } => (StatusCode::SERVICE_UNAVAILABLE, code),
        Error::BadGateway { code, .. } => (StatusCode::BAD_GATEWAY, code),
        Error::Unexpected(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

fn to_problem(e: &Error) -> Problem {
    let (status, code) = status_and_code(e);
    let detail = match e {
        // The cause chain goes to the log, never to the client.
        Error::Unexpected(_) => "an unexpected error occurred".to_string(),
        other => other.to_string(),
    };
    let mut problem = Problem::new(status, code, detail);
    match e {
        Error::Validation(errors) => {
            problem.errors = Some(errors.iter().cloned().map(Into::into).collect())
        }
        Error::UpgradeRequired { upgrade, .. } => {
            problem.upgrade = Some((**upgrade).clone().into())
        }
        Error::TargetUnverified { help, .. } => {
            problem.verification = Some((**help).clone().into())
        }
        Error::VerificationFailed { errors, help, .. } => {
            problem.errors = Some(errors.iter().cloned().map(Into::into).collect());
            problem.verification = Some((**help).clone().into());
        }
        _ => {}
    }
    problem
}

impl ApiError {
    pub fn into_problem_response(self) -> ProblemResponse {
        let (status, _) = status_and_code(&self.0);
        if status.is_server_error() {
            tracing::error!(error = ?self.0, "request failed");
        }
        let problem = to_problem(&self.0);
        match &self.0 {
            Error::Unauthenticated(_) => ProblemResponse::unauthorized(problem),
            Error::InvalidToken(_) => ProblemResponse::Unauthorized(
                problem.into(),
                WWW_AUTHENTICATE_INVALID_TOKEN.to_string(),
            ),
            Error::RateLimited { retry_after_secs }
            | Error::AccountThrottled { retry_after_secs } => {
                ProblemResponse::TooManyRequests(problem.into(), *retry_after_secs)
            }
            _ => ProblemResponse::from_problem(problem),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_problem_response().into_response()
    }
}

impl ApiResponse for ApiError {
    fn meta() -> MetaResponses {
        ProblemResponse::meta()
    }

    fn register(registry: &mut Registry) {
        ProblemResponse::register(registry);
    }
}

impl From<ApiError> for poem::Error {
    fn from(e: ApiError) -> Self {
        poem::Error::from_response(e.into_response())
    }
}
