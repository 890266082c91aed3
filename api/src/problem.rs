//! RFC 9457 problem details: the body of every error response, its
//! `application/problem+json` payload type for the OpenAPI document, and the
//! middleware that turns errors raised outside our handlers (unknown routes,
//! wrong methods, unparseable bodies, missing credentials) into problems too.

use poem::http::{header, Method, StatusCode};
use poem::{Endpoint, IntoResponse, Request, Response};
use poem_openapi::payload::Payload;
use poem_openapi::registry::{MetaSchemaRef, Registry};
use poem_openapi::types::{ToJSON, Type};
use poem_openapi::{ApiResponse, Object};

use crate::json_body::BodyShapeError;
use crate::parse_errors::{self, ParamName};

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Sent with every 401, as RFC 9110 asks.
pub const WWW_AUTHENTICATE: &str = r#"Bearer realm="scanfleet""#;

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
    /// Where the client can upgrade.
    pub url: String,
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

fn code_for_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad_request",
        401 => "unauthenticated",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        406 => "not_acceptable",
        409 => "conflict",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        422 => "validation_failed",
        429 => "rate_limited",
        501 => "not_implemented",
        502 => "bad_gateway",
        503 => "unavailable",
        _ if status.is_server_error() => "internal",
        _ => "error",
    }
}

/// A 400 naming what did not parse.
fn unparseable(detail: String, field: Option<FieldError>) -> Problem {
    let mut p = Problem::new(StatusCode::BAD_REQUEST, "bad_request", detail);
    p.errors = field.map(|f| vec![f]);
    p
}

/// Problems for the errors poem-openapi raises before our handlers run,
/// naming the parameter or body property at fault in the contract's terms
/// (see `parse_errors`): `method` and `path` are the request's.
fn known_problem(err: &poem::Error, method: &Method, path: &str) -> Option<Problem> {
    use poem_openapi::error::{
        AuthorizationError, ParseParamError, ParsePathError, ParseRequestPayloadError,
    };
    let param = if let Some(e) = err.downcast_ref::<ParseParamError>() {
        Some(ParamName::Named(e.name))
    } else {
        err.downcast_ref::<ParsePathError>()
            .map(|e| ParamName::PathPosition(e.name))
    };
    if let Some(param) = param {
        let field = parse_errors::parameter_error(method, path, param);
        let detail = format!("parameter `{}` could not be parsed", field.field);
        return Some(unparseable(detail, Some(field)));
    }
    if let Some(BodyShapeError(fault)) = err.downcast_ref::<BodyShapeError>() {
        let detail = format!("the request body could not be parsed: {}", err);
        let field = fault.field.clone().map(|field| FieldError {
            field,
            message: fault.message.clone(),
        });
        return Some(unparseable(detail, field));
    }
    if let Some(e) = err.downcast_ref::<ParseRequestPayloadError>() {
        return Some(unparseable(
            format!("the request body could not be parsed: {}", e.reason),
            None,
        ));
    }
    if err.is::<AuthorizationError>() {
        return Some(Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "credentials are missing: send `Authorization: Bearer <token>` or `X-API-Key`",
        ));
    }
    None
}

fn is_problem(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with(PROBLEM_CONTENT_TYPE))
}

/// Outermost middleware: whatever fails, the client gets problem+json.
pub async fn problem_guard<E: Endpoint>(
    ep: std::sync::Arc<E>,
    req: Request,
) -> poem::Result<Response> {
    // Kept for naming a parameter that does not parse; cloning the method
    // and the URI (shared bytes) costs no copy of the path.
    let method = req.method().clone();
    let uri = req.uri().clone();
    let resp = match ep.call(req).await {
        Ok(r) => r.into_response(),
        Err(err) => {
            if let Some(problem) = known_problem(&err, &method, uri.path()) {
                return Ok(with_auth_header(ProblemJson(problem).into_response()));
            }
            let detail = err.to_string();
            let resp = err.into_response();
            if is_problem(&resp) {
                // Raised from our own `Error`: already a problem.
                return Ok(resp);
            }
            return Ok(with_auth_header(problem_response_for_status(
                resp.status(),
                Some(detail).filter(|d| !d.is_empty()),
            )));
        }
    };
    if resp.status().as_u16() >= 400 && !is_problem(&resp) {
        return Ok(with_auth_header(problem_response_for_status(
            resp.status(),
            None,
        )));
    }
    Ok(resp)
}

fn problem_response_for_status(status: StatusCode, detail: Option<String>) -> Response {
    let detail = detail.unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
    ProblemJson(Problem::new(status, code_for_status(status), detail)).into_response()
}

fn with_auth_header(mut resp: Response) -> Response {
    if resp.status() == StatusCode::UNAUTHORIZED
        && !resp.headers().contains_key(header::WWW_AUTHENTICATE)
    {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static(WWW_AUTHENTICATE),
        );
    }
    resp
}
