//! Who is at the console, and the guard every console request passes.
//!
//! A signed-in browser holds one cookie, `sf_session`: a random token whose
//! hash names a row of `console_sessions`, itself a row of `sessions`, so
//! sign-out, a password change and a disabled account end it as they end
//! an API login (see [`scanfleet_core::store::sessions::find_console`]).
//! The cookie is HttpOnly, SameSite=Lax, and Secure outside dev mode. It is
//! only ever read here: the API under `/api/v1` takes Bearer tokens and
//! API keys and nothing else.
//!
//! CSRF: every request that changes something (any method but GET and
//! HEAD) is refused when the browser says it comes from another site
//! (`Sec-Fetch-Site: cross-site`), and must echo the session's CSRF token,
//! as the `X-CSRF-Token` header (htmx sends it, from `hx-headers` on the
//! page's body) or as the `csrf` field of a form. Before sign-in (the
//! sign-in and register forms) the token is a random value the form page
//! also sets as the `sf_csrf` cookie (double submit).
//!
//! Every console response carries the security headers of [`HEADERS`].

use poem::http::{header, HeaderValue, Method, StatusCode};
use poem::{Body, Endpoint, IntoResponse, Request, Response};
use subtle::ConstantTimeEq;

use super::form::FormData;
use super::page::{self, PageError, Visitor};
use crate::auth::tokens::{random_token, sha256};
use crate::state::AppState;
use scanfleet_common::settings::Mode;
use scanfleet_core::store::sessions;

/// The session cookie.
pub const COOKIE: &str = "sf_session";
/// The pre-session CSRF cookie of the sign-in and register forms.
pub const PRE_CSRF_COOKIE: &str = "sf_csrf";
/// The header htmx echoes the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a console session lasts from sign-in.
pub const SESSION_HOURS: i64 = 12;

/// The headers of every console response. The policy allows our own
/// scripts, styles and connections only: no inline script or style, no
/// eval (htmx runs with `allowEval` off), no framing.
pub const HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
    (
        "permissions-policy",
        "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    ),
    ("x-frame-options", "DENY"),
];

/// The value of cookie `name`.
pub fn cookie<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// Sets cookie `name` on `resp`: HttpOnly, SameSite=Lax, path `/`, Secure
/// outside dev mode; `max_age` 0 deletes it.
pub fn set_cookie(resp: &mut Response, state: &AppState, name: &str, value: &str, max_age: i64) {
    let secure = if state.settings.mode == Mode::Dev {
        ""
    } else {
        "; Secure"
    };
    let cookie =
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// Opens a console session for `user_id`, its cookie set on `resp`.
pub async fn open(
    state: &AppState,
    user_id: uuid::Uuid,
    resp: &mut Response,
) -> Result<(), PageError> {
    let token = random_token("");
    let csrf = random_token("");
    let db = state.db.get().await?;
    sessions::create_console(
        &**db,
        user_id,
        chrono::Duration::hours(SESSION_HOURS),
        &sha256(&token),
        &csrf,
    )
    .await?;
    set_cookie(resp, state, COOKIE, &token, SESSION_HOURS * 3600);
    Ok(())
}

async fn visitor(state: &AppState, req: &Request) -> Result<Visitor, PageError> {
    let Some(token) = cookie(req, COOKIE) else {
        return Ok(Visitor(None));
    };
    let db = state.db.get().await?;
    Ok(Visitor(
        sessions::find_console(&**db, &sha256(token)).await?,
    ))
}

fn same(a: &str, b: &str) -> bool {
    !a.is_empty() && a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Checks a state-changing request: not cross-site, and echoing the
/// expected CSRF token. A form body is read here and put back for the
/// handler.
async fn check_write(req: &mut Request, visitor: &Visitor) -> Result<(), PageError> {
    let fetch_site = req
        .headers()
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok());
    if fetch_site == Some("cross-site") {
        return Err(PageError::Forbidden(
            "this request came from another site and was refused",
        ));
    }
    let expected = match &visitor.0 {
        Some(s) => s.csrf_token.clone(),
        None => cookie(req, PRE_CSRF_COOKIE).unwrap_or_default().to_string(),
    };
    if let Some(sent) = req.headers().get(CSRF_HEADER).and_then(|v| v.to_str().ok()) {
        return if same(sent, &expected) {
            Ok(())
        } else {
            Err(PageError::Forbidden(
                "the form has expired: reload the page and try again",
            ))
        };
    }
    let body = req
        .take_body()
        .into_bytes()
        .await
        .map_err(|_| PageError::BadRequest("the request body could not be read".into()))?;
    let form = FormData::parse(&body);
    let ok = same(form.get("csrf"), &expected);
    req.set_body(Body::from(body));
    if ok {
        Ok(())
    } else {
        Err(PageError::Forbidden(
            "the form has expired: reload the page and try again",
        ))
    }
}

/// The guard around every console route: finds the visitor, checks
/// writes, renders errors as pages, adds the security headers.
pub async fn guard<E: Endpoint>(ep: std::sync::Arc<E>, mut req: Request) -> poem::Result<Response> {
    let Some(state) = req.data::<AppState>().cloned() else {
        return Ok(StatusCode::INTERNAL_SERVER_ERROR.into_response());
    };
    // Static files need no visitor: no session is looked up for them.
    if req.uri().path().starts_with("/assets/") {
        let mut resp = match ep.call(req).await {
            Ok(r) => r.into_response(),
            Err(e) => e.into_response(),
        };
        for (name, value) in HEADERS {
            resp.headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        return Ok(resp);
    }
    let is_write = !matches!(*req.method(), Method::GET | Method::HEAD);
    let htmx = req.headers().contains_key("hx-request");
    let path = req.uri().to_string();
    let outcome = async {
        let visitor = visitor(&state, &req).await?;
        if is_write {
            check_write(&mut req, &visitor).await?;
        }
        req.extensions_mut().insert(visitor.clone());
        Ok::<_, PageError>(visitor)
    }
    .await;
    let mut resp = match outcome {
        Err(e) => page::error_response(&state, &Visitor(None), &path, htmx, e).await,
        Ok(visitor) => match ep.call(req).await {
            Ok(r) => r.into_response(),
            Err(e) => {
                let e = PageError::from_poem(e);
                page::error_response(&state, &visitor, &path, htmx, e).await
            }
        },
    };
    let headers = resp.headers_mut();
    for (name, value) in HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    headers.insert(header::VARY, HeaderValue::from_static("Cookie, HX-Request"));
    Ok(resp)
}
