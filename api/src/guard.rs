//! The outermost middleware: whatever fails, the client gets problem+json.
//! Errors poem-openapi raises before a handler runs (a parameter or body
//! that does not parse, missing credentials) become problems naming the
//! field at fault in the contract's terms (see `parse_errors`); any other
//! bare error status gets a problem for its status.

use poem::http::{header, Method, StatusCode};
use poem::{Endpoint, IntoResponse, Request, Response};

use crate::json_body::BodyShapeError;
use crate::parse_errors::{self, ParamName};
use crate::problem::{FieldError, Problem, ProblemJson, PROBLEM_CONTENT_TYPE, WWW_AUTHENTICATE};

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

/// The credential headers a request carried, read before it runs so that a
/// refusal of its credentials names what was sent (issue 37, item 4).
#[derive(Debug, Clone, Default)]
struct SentCredentials {
    /// The `Authorization` scheme when it is not `Bearer`: `Some("")` for
    /// a header with a value and no scheme, `Some("Basic")` and so on.
    /// Only the scheme is kept, never the credential after it.
    wrong_scheme: Option<String>,
    /// The `Authorization` value looks like one of our API keys.
    key_in_authorization: bool,
    /// An `X-API-Key` header was sent.
    api_key: bool,
}

impl SentCredentials {
    fn of(req: &Request) -> SentCredentials {
        let api_key = req.headers().contains_key("x-api-key");
        let Some(value) = req.headers().get(header::AUTHORIZATION) else {
            return SentCredentials {
                api_key,
                ..SentCredentials::default()
            };
        };
        let value = String::from_utf8_lossy(value.as_bytes());
        let value = value.trim();
        let scheme = match value.split_once(' ') {
            Some((scheme, _)) => scheme,
            // One word: a credential with no scheme, unless it is a bare
            // scheme name.
            None if value.eq_ignore_ascii_case("bearer") => value,
            None => "",
        };
        let wrong_scheme = (!scheme.eq_ignore_ascii_case("bearer")).then(|| {
            // Echo a plausible scheme name only, never a credential.
            if scheme.len() <= 20
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                scheme.to_string()
            } else {
                String::new()
            }
        });
        SentCredentials {
            wrong_scheme,
            key_in_authorization: value.split(' ').any(|w| w.starts_with("sfk_")),
            api_key,
        }
    }

    /// The problem for credentials the operation's security schemes could
    /// not read.
    fn problem(&self) -> Problem {
        let unauthenticated =
            |detail: String| Problem::new(StatusCode::UNAUTHORIZED, "unauthenticated", detail);
        if self.key_in_authorization && self.wrong_scheme.is_some() {
            return unauthenticated(
                "an API key goes in the `X-API-Key` header, not in `Authorization`".into(),
            );
        }
        match self.wrong_scheme.as_deref() {
            Some("") => {
                return unauthenticated(
                    "the `Authorization` header has no `Bearer` scheme: send \
                     `Authorization: Bearer <token>`"
                        .into(),
                )
            }
            Some(scheme) => {
                return unauthenticated(format!(
                    "the `Authorization` scheme `{scheme}` is not accepted: send \
                     `Authorization: Bearer <token>`"
                ))
            }
            None => {}
        }
        if self.api_key {
            // An operation that takes keys would have read it (and refused
            // a bad one with its own 401): this one takes Bearer tokens only.
            return Problem::new(
                StatusCode::FORBIDDEN,
                "api_key_not_accepted",
                "API keys are not accepted here; use a Bearer token",
            );
        }
        unauthenticated(
            "credentials are missing: send `Authorization: Bearer <token>` (or `X-API-Key` \
             where API keys are accepted)"
                .into(),
        )
    }
}

/// Problems for the errors poem-openapi raises before our handlers run,
/// naming the parameter or body property at fault in the contract's terms
/// (see `parse_errors`): `method` and `path` are the request's, `sent` its
/// credential headers.
fn known_problem(
    err: &poem::Error,
    method: &Method,
    path: &str,
    sent: &SentCredentials,
) -> Option<Problem> {
    use poem_openapi::error::{
        AuthorizationError, ContentTypeError, ParseParamError, ParsePathError,
        ParseRequestPayloadError,
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
        return Some(sent.problem());
    }
    if let Some(e) = err.downcast_ref::<ContentTypeError>() {
        // Every request body of the contract is JSON.
        let detail = match e {
            ContentTypeError::NotSupported { content_type } => format!(
                "the request body must be JSON: send `Content-Type: application/json` \
                 (not `{}`)",
                content_type.split(';').next().unwrap_or_default().trim()
            ),
            ContentTypeError::ExpectContentType => {
                "the request body must be JSON: send `Content-Type: application/json`".to_string()
            }
        };
        return Some(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            detail,
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
    let sent = SentCredentials::of(&req);
    let resp = match ep.call(req).await {
        Ok(r) => r.into_response(),
        Err(err) => {
            if let Some(problem) = known_problem(&err, &method, uri.path(), &sent) {
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
