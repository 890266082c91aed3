//! The access log: a `request` span around every request and one event
//! with its status and duration, like poem's `Tracing` middleware, with
//! every credential redacted first (issue 37, item 2). The WebSocket takes
//! its access token as `?token=` (browsers cannot set headers on a
//! WebSocket), so the raw URI would write a live credential to the log;
//! nothing secret is logged: query parameters that carry a token, a key, a
//! secret, a password or a signature, and the headers that carry them
//! (logged only at `debug`), read [`REDACTED`].

use std::fmt;
use std::time::Instant;

use poem::http::header::HeaderMap;
use poem::http::Uri;
use poem::web::RealIp;
use poem::{Endpoint, FromRequest, IntoResponse, Middleware, Request, Response, Result};
use tracing::Instrument;

/// What a credential reads in the log.
pub const REDACTED: &str = "[redacted]";

/// Whether a query parameter's value is a credential: its name holds one
/// of these words (`token`, `access_token`, `api_key`, `X-Api-Key`,
/// `client_secret`, `signature`...) or is `sig` or `code` (signed URLs,
/// OAuth codes). Generous on purpose: a redacted harmless value costs
/// nothing, a logged token is a leak.
fn is_secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "token",
        "key",
        "secret",
        "passw",
        "signature",
        "credential",
        "auth",
    ]
    .iter()
    .any(|word| name.contains(word))
        || matches!(name.as_str(), "sig" | "code" | "jwt" | "session")
}

/// Whether a header's value is a credential.
fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    matches!(name.as_str(), "cookie" | "set-cookie")
        || [
            "authorization",
            "api-key",
            "apikey",
            "token",
            "secret",
            "signature",
        ]
        .iter()
        .any(|word| name.contains(word))
}

/// `uri` as the log shows it: the path as sent, every credential's value in
/// the query replaced by [`REDACTED`] (parameter names are compared
/// percent-decoded, as the handlers read them).
pub fn redact_uri(uri: &Uri) -> String {
    let path = uri.path();
    let Some(query) = uri.query() else {
        return path.to_string();
    };
    let mut out = String::with_capacity(path.len() + 1 + query.len());
    out.push_str(path);
    out.push('?');
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        let raw_name = pair.split_once('=').map_or(pair, |(name, _)| name);
        let secret = url::form_urlencoded::parse(raw_name.as_bytes())
            .next()
            .is_some_and(|(name, _)| is_secret_param(&name));
        if secret && pair.contains('=') {
            out.push_str(raw_name);
            out.push('=');
            out.push_str(REDACTED);
        } else {
            out.push_str(pair);
        }
    }
    out
}

/// Request headers as the debug log shows them, credentials redacted.
pub struct RedactedHeaders<'a>(pub &'a HeaderMap);

impl fmt::Display for RedactedHeaders<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, value) in self.0 {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            if is_secret_header(name.as_str()) {
                write!(f, "{name}: {REDACTED}")?;
            } else {
                write!(f, "{name}: {}", String::from_utf8_lossy(value.as_bytes()))?;
            }
        }
        Ok(())
    }
}

/// The middleware; replaces `poem::middleware::Tracing`.
#[derive(Debug, Default, Clone, Copy)]
pub struct AccessLog;

impl<E: Endpoint> Middleware<E> for AccessLog {
    type Output = AccessLogEndpoint<E>;

    fn transform(&self, ep: E) -> Self::Output {
        AccessLogEndpoint { inner: ep }
    }
}

/// The endpoint of [`AccessLog`].
pub struct AccessLogEndpoint<E> {
    inner: E,
}

impl<E: Endpoint> Endpoint for AccessLogEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> Result<Self::Output> {
        let remote_addr = RealIp::from_request_without_body(&req)
            .await
            .ok()
            .and_then(|ip| ip.0)
            .map_or_else(|| req.remote_addr().to_string(), |ip| ip.to_string());
        let span = tracing::info_span!(
            "request",
            remote_addr = %remote_addr,
            version = ?req.version(),
            method = %req.method(),
            uri = %redact_uri(req.original_uri()),
        );
        tracing::debug!(parent: &span, headers = %RedactedHeaders(req.headers()), "request headers");
        async move {
            let started = Instant::now();
            let res = self.inner.call(req).await;
            let duration = started.elapsed();
            match res {
                Ok(resp) => {
                    let resp = resp.into_response();
                    tracing::info!(status = %resp.status(), ?duration, "response");
                    Ok(resp)
                }
                Err(err) => {
                    tracing::info!(status = %err.status(), error = %err, ?duration, "error");
                    Err(err)
                }
            }
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(uri: &str) -> String {
        redact_uri(&uri.parse::<Uri>().expect("uri"))
    }

    #[test]
    fn credentials_in_the_query_are_redacted_and_the_rest_kept() {
        assert_eq!(
            redacted("/api/v1/ws/scans/1?token=eyJhbGciOi.x.y"),
            "/api/v1/ws/scans/1?token=[redacted]"
        );
        assert_eq!(
            redacted("/a?limit=5&api_key=sf_live_123&Signature=abc&x=%20&t%6Fken=s"),
            "/a?limit=5&api_key=[redacted]&Signature=[redacted]&x=%20&t%6Fken=[redacted]"
        );
        assert_eq!(
            redacted("/a?access_token=1&X-Amz-Credential=2&sig=3&flag"),
            "/a?access_token=[redacted]&X-Amz-Credential=[redacted]&sig=[redacted]&flag"
        );
        assert_eq!(redacted("/api/v1/scans"), "/api/v1/scans");
    }

    #[test]
    fn credential_headers_are_redacted() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer abc.def"),
            ("x-api-key", "sf_live_123"),
            ("stripe-signature", "t=1,v1=ff"),
            ("webhook-signature", "v1,abc"),
            ("cookie", "session=1"),
            ("user-agent", "curl/8"),
        ] {
            headers.insert(
                poem::http::HeaderName::from_static(name),
                value.parse().expect("value"),
            );
        }
        let text = RedactedHeaders(&headers).to_string();
        for secret in ["abc.def", "sf_live_123", "v1=ff", "v1,abc", "session=1"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(text.contains("user-agent: curl/8"), "{text}");
        assert!(text.contains("x-api-key: [redacted]"), "{text}");
    }
}
