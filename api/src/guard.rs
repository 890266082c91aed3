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
