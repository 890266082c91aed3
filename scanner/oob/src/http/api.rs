//! `/register`, `/poll` and `/deregister`, answered byte-for-byte as the
//! Go interactsh server answers them: `{"message": ...}` on success,
//! `{"error": ...}` with 400 on a refusal, an empty 401 on a wrong token.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};
use scanfleet_interactsh::crypto;
use scanfleet_interactsh::wire::StatusBody;
use scanfleet_interactsh::{DeregisterRequest, PollResponse, RegisterRequest, EVICTED_MESSAGE};
use subtle::ConstantTimeEq;

use super::HttpContext;
use crate::error::OobError;
use crate::metrics;
use crate::store::Access;

const WRONG_SECRET: &str = "invalid secret key passed for user";

/// Answers one API call.
pub async fn handle(ctx: &HttpContext, parts: &Parts, body: &Bytes) -> Response<Full<Bytes>> {
    if !token_accepted(ctx, parts) {
        return respond(StatusCode::UNAUTHORIZED, Bytes::new());
    }
    let result = match parts.uri.path() {
        "/register" => register(ctx, body).await,
        "/deregister" => deregister(ctx, body).await,
        _ => poll(ctx, parts.uri.query().unwrap_or("")).await,
    };
    result.unwrap_or_else(|e| {
        tracing::error!(error = %e, source = ?std::error::Error::source(&e), "API call failed");
        json(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error",
            "internal server error",
        )
    })
}

/// Without a configured token every call passes; with one, the raw
/// `Authorization` header must equal it.
fn token_accepted(ctx: &HttpContext, parts: &Parts) -> bool {
    let Some(token) = &ctx.token else {
        return true;
    };
    let given = parts
        .headers
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    given.ct_eq(token.expose().as_bytes()).into()
}

async fn register(ctx: &HttpContext, body: &Bytes) -> Result<Response<Full<Bytes>>, OobError> {
    let request: RegisterRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return Ok(bad_request(&format!("could not decode json body: {e}"))),
    };
    let id = &request.correlation_id;
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Ok(bad_request(
            "could not set id and public key: invalid correlation-id",
        ));
    }
    let public = match crypto::parse_public_key(&request.public_key) {
        Ok(key) => key,
        Err(e) => {
            let text = format!("could not set id and public key: could not read public Key: {e}");
            return Ok(bad_request(&text));
        }
    };
    let aes_key = crypto::generate_aes_key();
    let wrapped = crypto::wrap_aes_key(&public, &aes_key)?;
    let created = ctx
        .store
        .register(id, &request.secret_key, &BASE64.encode(aes_key), &wrapped)
        .await?;
    if !created {
        return Ok(bad_request(
            "could not set id and public key: correlation-id provided already exists",
        ));
    }
    metrics::registered();
    tracing::debug!(correlation_id = %id, "registered");
    Ok(json(StatusCode::OK, "message", "registration successful"))
}

async fn deregister(ctx: &HttpContext, body: &Bytes) -> Result<Response<Full<Bytes>>, OobError> {
    let request: DeregisterRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return Ok(bad_request(&format!("could not decode json body: {e}"))),
    };
    let access = ctx
        .store
        .deregister(&request.correlation_id, &request.secret_key)
        .await?;
    Ok(match access {
        Access::UnknownId => bad_request(&format!("could not remove id: {EVICTED_MESSAGE}")),
        Access::WrongSecret => bad_request(&format!("could not remove id: {WRONG_SECRET}")),
        Access::Granted(()) => json(StatusCode::OK, "message", "deregistration successful"),
    })
}

async fn poll(ctx: &HttpContext, query: &str) -> Result<Response<Full<Bytes>>, OobError> {
    let param = |name: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .filter(|v| !v.is_empty())
    };
    let Some(id) = param("id") else {
        return Ok(bad_request("no id specified for poll"));
    };
    let Some(secret) = param("secret") else {
        return Ok(bad_request("no secret specified for poll"));
    };
    let polled = match ctx.store.poll(&id, &secret).await? {
        Access::UnknownId => {
            return Ok(bad_request(&format!(
                "could not get interactions: {EVICTED_MESSAGE}"
            )))
        }
        Access::WrongSecret => {
            return Ok(bad_request(&format!(
                "could not get interactions: {WRONG_SECRET}"
            )))
        }
        Access::Granted(polled) => polled,
    };
    metrics::polled();
    let key = BASE64
        .decode(&polled.aes_key)
        .ok()
        .and_then(|k| crypto::AesKey::try_from(k.as_slice()).ok())
        .ok_or(OobError::RedisShape(
            "a registration's AES key is not 32 bytes of base64",
        ))?;
    let answer = PollResponse {
        data: polled
            .interactions
            .iter()
            .map(|json| crypto::encrypt_item(&key, json.as_bytes()))
            .collect(),
        extra: Vec::new(),
        aes_key: polled.wrapped_key,
        tlddata: Vec::new(),
    };
    let mut body = serde_json::to_vec(&answer)?;
    body.push(b'\n');
    Ok(respond(StatusCode::OK, Bytes::from(body)))
}

fn bad_request(text: &str) -> Response<Full<Bytes>> {
    json(StatusCode::BAD_REQUEST, "error", text)
}

/// `{"<key>": "<text>"}` and a newline, as Go's JSON encoder writes it.
fn json(status: StatusCode, key: &str, text: &str) -> Response<Full<Bytes>> {
    let body = match key {
        "message" => StatusBody {
            message: Some(text.into()),
            error: None,
        },
        _ => StatusBody {
            message: None,
            error: Some(text.into()),
        },
    };
    let mut bytes = serde_json::to_vec(&body).unwrap_or_default();
    bytes.push(b'\n');
    respond(status, Bytes::from(bytes))
}

fn respond(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    if status != StatusCode::UNAUTHORIZED {
        let headers = response.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json; charset=utf-8"),
        );
        headers.insert(
            hyper::header::X_CONTENT_TYPE_OPTIONS,
            hyper::header::HeaderValue::from_static("nosniff"),
        );
    }
    response
}
