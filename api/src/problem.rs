//! RFC 9457 problem details: the body of every error response, its
//! `application/problem+json` payload type for the OpenAPI document. The
//! middleware that turns errors raised outside our handlers into problems
//! is `guard`.

use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::payload::Payload;
use poem_openapi::registry::{MetaSchemaRef, Registry};
use poem_openapi::types::{ToJSON, Type};
use poem_openapi::{ApiResponse, Object};

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Sent with every 401, as RFC 9110 asks.
pub const WWW_AUTHENTICATE: &str = r#"Bearer realm="scanfleet""#;

/// Sent with a 401 for a Bearer token that was sent and is no good
/// (RFC 6750, 3.1): the client should get a new token, not retry.
pub const WWW_AUTHENTICATE_INVALID_TOKEN: &str =
    r#"Bearer realm="scanfleet", error="invalid_token""#;

/// One invalid field of a request.
#[derive(Debug, Clone, Object, PartialEq)]
pub struct FieldError {
    /// The field at fault, as named in the request (`email`, `domains[3]`).
    pub field: String,
    pub message: String,
}

/// Where to go to lift a tier limit.
#[derive(Debug, Clone, Object, PartialEq)]
pub struct Upgrade {
    /// The tier that lifts the limit.
    pub tier_slug: String,
    /// Where the client upgrades: `POST` the checkout here with
    /// `{"tier_slug"}` (`POST /subscriptions/checkout`).
    pub url: String,
    /// The tiers and what they allow (`GET /subscriptions/tiers`).
    pub tiers_url: String,
    pub message: String,
}

/// How to prove ownership of a target: sent with a refused scan of an
/// unverified target and with a failed verification.
#[derive(Debug, Clone, Object, PartialEq)]
pub struct VerificationHelp {
    /// The value to publish: `scanfleet-verification=<token>`.
    pub value: String,
    /// Names on which a TXT record with the value is accepted.
    pub dns_txt_names: Vec<String>,
    /// Where a file with the value as one of its lines is accepted (HTTP
    /// is tried after HTTPS).
    pub file_url: String,
    /// POST here once the value is published.
    pub verify_url: String,
    /// The above, for a human.
    pub instructions: String,
}

impl From<scanfleet_core::error::FieldError> for FieldError {
    fn from(e: scanfleet_core::error::FieldError) -> Self {
        FieldError {
            field: e.field,
            message: e.message,
        }
    }
}

impl From<scanfleet_core::error::Upgrade> for Upgrade {
    fn from(u: scanfleet_core::error::Upgrade) -> Self {
        Upgrade {
            tier_slug: u.tier_slug,
            url: u.url,
            tiers_url: u.tiers_url,
            message: u.message,
        }
    }
}

impl From<scanfleet_core::error::VerificationHelp> for VerificationHelp {
    fn from(h: scanfleet_core::error::VerificationHelp) -> Self {
        VerificationHelp {
            value: h.value,
            dns_txt_names: h.dns_txt_names,
            file_url: h.file_url,
            verify_url: h.verify_url,
            instructions: h.instructions,
        }
    }
}

/// RFC 9457 problem details.
#[derive(Debug, Clone, Object)]
pub struct Problem {
    /// A URI reference naming the problem type (`about:blank`: see `code`).
    #[oai(rename = "type")]
    pub problem_type: String,
    /// Short summary of the status.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong, for a human.
    pub detail: String,
    /// Stable machine-readable error code (`validation_failed`, `not_found`, ...).
    pub code: String,
    /// The invalid fields of a 422.
    #[oai(skip_serializing_if_is_none)]
    pub errors: Option<Vec<FieldError>>,
    /// The upgrade prompt of a tier limit.
    #[oai(skip_serializing_if_is_none)]
    pub upgrade: Option<Upgrade>,
    /// How to prove ownership of the target (`target_unverified`,
    /// `verification_failed`).
    #[oai(skip_serializing_if_is_none)]
    pub verification: Option<VerificationHelp>,
}

impl Problem {
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Problem {
        Problem {
            problem_type: "about:blank".to_string(),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: detail.into(),
            code: code.to_string(),
            errors: None,
            upgrade: None,
            verification: None,
        }
    }
}

/// A problem as an `application/problem+json` payload.
pub struct ProblemJson(pub Problem);

impl From<Problem> for ProblemJson {
    fn from(p: Problem) -> Self {
        ProblemJson(p)
    }
}

impl Payload for ProblemJson {
    const CONTENT_TYPE: &'static str = PROBLEM_CONTENT_TYPE;

    fn schema_ref() -> MetaSchemaRef {
        Problem::schema_ref()
    }

    fn register(registry: &mut Registry) {
        Problem::register(registry);
    }
}

impl IntoResponse for ProblemJson {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self
            .0
            .to_json()
            .map(|v| v.to_string())
            .unwrap_or_else(|| "{}".to_string());
        Response::builder()
            .status(status)
            .content_type(PROBLEM_CONTENT_TYPE)
            .body(body)
    }
}

/// Every error response an operation can return, as declared in the contract.
#[derive(ApiResponse)]
pub enum ProblemResponse {
    /// The request body or a parameter could not be parsed.
    #[oai(status = 400)]
    BadRequest(ProblemJson),
    /// Missing, invalid or expired credentials.
    #[oai(status = 401)]
    Unauthorized(ProblemJson, #[oai(header = "WWW-Authenticate")] String),
    /// Authenticated but not allowed: key permission, role, tier feature or limit.
    #[oai(status = 403)]
    Forbidden(ProblemJson),
    /// The resource does not exist or belongs to someone else.
    #[oai(status = 404)]
    NotFound(ProblemJson),
    /// The request conflicts with the current state.
    #[oai(status = 409)]
    Conflict(ProblemJson),
    /// The request body has no or an unsupported `Content-Type`.
    #[oai(status = 415)]
    UnsupportedMediaType(ProblemJson),
    /// Well-formed but invalid values; `errors` names each field.
    #[oai(status = 422)]
    UnprocessableEntity(ProblemJson),
    /// Too many requests; retry after the given number of seconds.
    #[oai(status = 429)]
    TooManyRequests(ProblemJson, #[oai(header = "Retry-After")] u64),
    /// An unexpected error.
    #[oai(status = 500)]
    InternalServerError(ProblemJson),
    /// Not provided by this version of the service.
    #[oai(status = 501)]
    NotImplemented(ProblemJson),
    /// The payment provider refused the request or answered with something
    /// unreadable.
    #[oai(status = 502)]
    BadGateway(ProblemJson),
    /// Postgres, Redis or the payment provider is unreachable, or payments
    /// are not configured.
    #[oai(status = 503)]
    ServiceUnavailable(ProblemJson),
}

impl ProblemResponse {
    pub fn unauthorized(problem: Problem) -> ProblemResponse {
        ProblemResponse::Unauthorized(problem.into(), WWW_AUTHENTICATE.to_string())
    }

    pub fn from_problem(problem: Problem) -> ProblemResponse {
        match problem.status {
            400 => ProblemResponse::BadRequest(problem.into()),
            401 => ProblemResponse::unauthorized(problem),
            403 => ProblemResponse::Forbidden(problem.into()),
            404 => ProblemResponse::NotFound(problem.into()),
            409 => ProblemResponse::Conflict(problem.into()),
            415 => ProblemResponse::UnsupportedMediaType(problem.into()),
            422 => ProblemResponse::UnprocessableEntity(problem.into()),
            429 => ProblemResponse::TooManyRequests(problem.into(), 60),
            501 => ProblemResponse::NotImplemented(problem.into()),
            502 => ProblemResponse::BadGateway(problem.into()),
            503 => ProblemResponse::ServiceUnavailable(problem.into()),
            _ => ProblemResponse::InternalServerError(problem.into()),
        }
    }
}
