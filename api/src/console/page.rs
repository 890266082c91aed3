//! What every console page shares: the header's data ([`Chrome`]),
//! rendering, redirects, and errors as pages ([`PageError`]).

use askama::Template;
use poem::http::{header, StatusCode};
use poem::{IntoResponse, Response};

use super::assets;
use crate::error::{status_and_code, Error};
use crate::state::AppState;
use scanfleet_core::store::notifications;
use scanfleet_core::store::sessions::ConsoleSession;

/// The browser's session, when it is signed in; in the request's data for
/// every console handler (the guard in [`super::session`] puts it there).
#[derive(Clone)]
pub struct Visitor(pub Option<ConsoleSession>);

/// Why a console request did not get its page.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Missing, or someone else's: the 404 page says nothing more.
    #[error("not found")]
    NotFound,
    /// Not signed in (or the session ended): to the sign-in page, and back.
    #[error("sign in first")]
    SignIn,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Core(#[from] Error),
}

impl From<deadpool_postgres::PoolError> for PageError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        PageError::Core(e.into())
    }
}

impl From<tokio_postgres::Error> for PageError {
    fn from(e: tokio_postgres::Error) -> Self {
        PageError::Core(e.into())
    }
}

impl From<askama::Error> for PageError {
    fn from(e: askama::Error) -> Self {
        PageError::Core(Error::Unexpected(anyhow::anyhow!("rendering a page: {e}")))
    }
}

impl From<crate::error::ApiError> for PageError {
    fn from(e: crate::error::ApiError) -> Self {
        PageError::Core(e.0)
    }
}

impl poem::error::ResponseError for PageError {
    fn status(&self) -> StatusCode {
        match self {
            PageError::NotFound => StatusCode::NOT_FOUND,
            PageError::SignIn => StatusCode::SEE_OTHER,
            PageError::Forbidden(_) => StatusCode::FORBIDDEN,
            PageError::BadRequest(_) => StatusCode::BAD_REQUEST,
            PageError::Core(e) => status_and_code(e).0,
        }
    }
}

impl PageError {
    /// A poem error from routing or extraction, as a page error.
    pub fn from_poem(e: poem::Error) -> PageError {
        if e.is::<PageError>() {
            if let Ok(e) = e.downcast::<PageError>() {
                return e;
            }
            return PageError::BadRequest("the request failed".into());
        }
        match e.status() {
            StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => PageError::NotFound,
            s if s.is_server_error() => PageError::Core(Error::Unexpected(anyhow::anyhow!("{e}"))),
            _ => PageError::BadRequest(e.to_string()),
        }
    }

    /// The status and the sentence a page shows.
    fn explain(&self) -> (StatusCode, String) {
        use poem::error::ResponseError;
        let status = self.status();
        let text = match self {
            PageError::NotFound => "There is nothing here.".to_string(),
            PageError::Core(Error::NotFound(_)) => "There is nothing here.".to_string(),
            PageError::Core(e) if status.is_server_error() => {
                tracing::error!(error = format!("{e:#}"), "console request failed");
                match e {
                    Error::Unavailable { detail, .. } => format!("{detail}. Try again shortly."),
                    _ => "Something went wrong on our side; it has been logged.".to_string(),
                }
            }
            other => other.to_string(),
        };
        let status = if matches!(self, PageError::Core(Error::NotFound(_))) {
            StatusCode::NOT_FOUND
        } else {
            status
        };
        (status, text)
    }
}

pub type PageResult = Result<Response, PageError>;

/// What the header of every page needs.
pub struct Chrome {
    pub signed_in: bool,
    pub user_name: String,
    pub is_admin: bool,
    /// Unread notifications (the badge).
    pub unread: i64,
    pub csrf: String,
    /// The navigation entry of this page (`targets`, ...).
    pub nav: &'static str,
    pub css: String,
    pub htmx: String,
    pub script: String,
}

impl Chrome {
    /// The header of a page for `session`'s user.
    pub async fn load(
        state: &AppState,
        session: &ConsoleSession,
        nav: &'static str,
    ) -> Result<Chrome, PageError> {
        let db = state.db.get().await?;
        let unread = notifications::unread_count(&**db, session.user.id).await?;
        Ok(Chrome {
            signed_in: true,
            user_name: display_name(&session.user),
            is_admin: session.user.is_admin(),
            unread,
            csrf: session.csrf_token.clone(),
            nav,
            ..Chrome::anonymous("")
        })
    }

    /// The header of a page before sign-in; `csrf` is the form's token.
    pub fn anonymous(csrf: &str) -> Chrome {
        Chrome {
            signed_in: false,
            user_name: String::new(),
            is_admin: false,
            unread: 0,
            csrf: csrf.to_string(),
            nav: "",
            css: assets::url("app.css"),
            htmx: assets::url("htmx-2.0.11.min.js"),
            script: assets::url("console.js"),
        }
    }

    /// `hx-headers` of the page's body: htmx sends the CSRF token with
    /// every request it makes.
    pub fn hx_headers(&self) -> String {
        serde_json::json!({ "X-CSRF-Token": self.csrf }).to_string()
    }
}

fn display_name(user: &scanfleet_core::store::users::User) -> String {
    if user.full_name.trim().is_empty() {
        user.email.clone()
    } else {
        user.full_name.clone()
    }
}

/// The signed-in session, or [`PageError::SignIn`].
pub fn signed(visitor: &Visitor) -> Result<&ConsoleSession, PageError> {
    visitor.0.as_ref().ok_or(PageError::SignIn)
}

/// A rendered page or fragment.
pub fn html(t: &impl Template) -> PageResult {
    let body = t.render()?;
    Ok(Response::builder()
        .content_type("text/html; charset=utf-8")
        .body(body))
}

/// A page with a form: 422 when what was sent is refused (`refused`), the
/// form shown again with the messages, else 200.
pub fn form_page(t: &impl Template, refused: bool) -> PageResult {
    let mut resp = html(t)?;
    if refused {
        resp.set_status(StatusCode::UNPROCESSABLE_ENTITY);
    }
    Ok(resp)
}

/// 303 to `to` (for htmx, `HX-Redirect`, which it follows as a page load).
pub fn redirect(to: &str) -> Response {
    Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, to)
        .header("hx-redirect", to)
        .finish()
}

/// Whether the request came from htmx (a fragment is wanted).
pub fn is_htmx(req: &poem::Request) -> bool {
    req.headers().contains_key("hx-request")
}

/// A path of ours to go back to after sign-in; anything else is `/`.
pub fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(|c| c.is_control());
    if ok {
        next
    } else {
        "/"
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    chrome: Chrome,
    title: &'static str,
    message: String,
}

/// The answer to a failed console request: a redirect to sign-in, an
/// error page with the navigation, or, for htmx, the message in the page's
/// flash area.
pub async fn error_response(
    state: &AppState,
    visitor: &Visitor,
    path: &str,
    htmx: bool,
    e: PageError,
) -> Response {
    if matches!(e, PageError::SignIn) {
        let next: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
        return redirect(&format!("/signin?next={next}"));
    }
    let (status, message) = e.explain();
    if htmx {
        let body = format!(
            "<p class=\"flash error\" role=\"alert\">{}</p>",
            escape(&message)
        );
        return Response::builder()
            .content_type("text/html; charset=utf-8")
            .header("hx-retarget", "#flash")
            .header("hx-reswap", "innerHTML")
            .body(body);
    }
    let chrome = match &visitor.0 {
        Some(s) => match Chrome::load(state, s, "").await {
            Ok(c) => c,
            Err(_) => Chrome::anonymous(""),
        },
        None => Chrome::anonymous(""),
    };
    let title = match status.as_u16() {
        404 => "Not found",
        403 => "Not allowed",
        429 => "Too many requests",
        s if s >= 500 => "Something went wrong",
        _ => "That did not work",
    };
    let page = ErrorPage {
        chrome,
        title,
        message,
    };
    match page.render() {
        Ok(body) => Response::builder()
            .status(status)
            .content_type("text/html; charset=utf-8")
            .body(body),
        Err(_) => status.into_response(),
    }
}

/// `text` as HTML text.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What a form's submission got wrong, beside each field (the API's own
/// messages) and above the form.
#[derive(Debug, Default)]
pub struct FormErrors {
    pub general: Option<String>,
    fields: Vec<(String, String)>,
}

impl FormErrors {
    /// The errors a form shows; an error no form can fix (a missing
    /// object, an outage) stays an error.
    pub fn from_error(e: PageError) -> Result<FormErrors, PageError> {
        let mut errors = FormErrors::default();
        match e {
            PageError::Core(Error::Validation(list)) => {
                errors.fields = list.into_iter().map(|f| (f.field, f.message)).collect();
            }
            PageError::Core(Error::UpgradeRequired {
                detail, upgrade, ..
            }) => {
                errors.general = Some(format!("{detail}. {}", upgrade.message));
            }
            PageError::Core(
                e @ (Error::Conflict { .. }
                | Error::Forbidden { .. }
                | Error::BadRequest { .. }
                | Error::TargetUnverified { .. }
                | Error::VerificationFailed { .. }
                | Error::RateLimited { .. }
                | Error::AccountThrottled { .. }
                | Error::Unauthenticated(_)),
            ) => errors.general = Some(e.to_string()),
            PageError::BadRequest(m) => errors.general = Some(m),
            other => return Err(other),
        }
        Ok(errors)
    }

    /// One message for the whole form.
    pub fn general(message: impl Into<String>) -> FormErrors {
        FormErrors {
            general: Some(message.into()),
            fields: Vec::new(),
        }
    }

    pub fn get(&self, field: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, m)| m.as_str())
    }

    pub fn has(&self, field: &str) -> bool {
        self.get(field).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.general.is_none() && self.fields.is_empty()
    }

    /// Every message, general first (for a form whose fields are many).
    pub fn all(&self) -> Vec<String> {
        self.general
            .iter()
            .cloned()
            .chain(self.fields.iter().map(|(f, m)| format!("{f}: {m}")))
            .collect()
    }
}
