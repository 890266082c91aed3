//! Sign in, register, sign out.

use askama::Template;
use poem::web::{Data, Query};
use poem::{handler, Response};
use serde::Deserialize;

use super::form;
use super::page::{self, Chrome, FormErrors, PageError, PageResult, Visitor};
use super::session;
use crate::auth::account;
use crate::auth::tokens::random_token;
use crate::state::AppState;
use scanfleet_core::store::sessions;

#[derive(Deserialize)]
pub struct NextQuery {
    #[serde(default)]
    next: String,
}

#[derive(Template)]
#[template(path = "signin.html")]
struct SignIn {
    chrome: Chrome,
    next: String,
    email: String,
    message: Option<String>,
}

#[derive(Template)]
#[template(path = "register.html")]
struct Register {
    chrome: Chrome,
    email: String,
    full_name: String,
    errors: FormErrors,
}

/// A page before sign-in, with a fresh form token set as its cookie too.
fn anonymous_page(state: &AppState, render: impl FnOnce(Chrome) -> PageResult) -> PageResult {
    let csrf = random_token("");
    let mut resp = render(Chrome::anonymous(&csrf))?;
    session::set_cookie(&mut resp, state, session::PRE_CSRF_COOKIE, &csrf, 3600);
    Ok(resp)
}

#[handler]
pub async fn signin_page(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Query(q): Query<NextQuery>,
) -> PageResult {
    let next = page::safe_next(&q.next).to_string();
    if visitor.0 .0.is_some() {
        return Ok(page::redirect(&next));
    }
    anonymous_page(&state, |chrome| {
        page::html(&SignIn {
            chrome,
            next,
            email: String::new(),
            message: None,
        })
    })
}

#[handler]
pub async fn signin(state: Data<&AppState>, body: poem::Body) -> PageResult {
    let form = form::read(body).await;
    let next = page::safe_next(form.get("next")).to_string();
    let email = form.get("email").trim().to_string();
    match account::authenticate(&state, &email, form.get("password").to_string()).await {
        Ok(user) => {
            tracing::info!(user_id = %user.id, "console sign-in");
            let mut resp = page::redirect(&next);
            session::open(&state, user.id, &mut resp).await?;
            Ok(resp)
        }
        Err(e) => {
            let errors = FormErrors::from_error(PageError::Core(e))?;
            let message = errors
                .general
                .clone()
                .or_else(|| errors.all().into_iter().next());
            anonymous_page(&state, |chrome| {
                page::form_page(
                    &SignIn {
                        chrome,
                        next,
                        email,
                        message,
                    },
                    true,
                )
            })
        }
    }
}

#[handler]
pub async fn register_page(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    if visitor.0 .0.is_some() {
        return Ok(page::redirect("/"));
    }
    anonymous_page(&state, |chrome| {
        page::html(&Register {
            chrome,
            email: String::new(),
            full_name: String::new(),
            errors: FormErrors::default(),
        })
    })
}

#[handler]
pub async fn register(state: Data<&AppState>, body: poem::Body) -> PageResult {
    let form = form::read(body).await;
    let email = form.get("email").trim().to_string();
    let full_name = form.get("full_name").to_string();
    let outcome =
        account::register(&state, &email, form.get("password").to_string(), &full_name).await;
    match outcome {
        Ok(user) => {
            let mut resp = page::redirect("/");
            session::open(&state, user.id, &mut resp).await?;
            Ok(resp)
        }
        Err(e) => {
            let errors = FormErrors::from_error(PageError::Core(e))?;
            anonymous_page(&state, |chrome| {
                page::form_page(
                    &Register {
                        chrome,
                        email,
                        full_name,
                        errors,
                    },
                    true,
                )
            })
        }
    }
}

#[handler]
pub async fn signout(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    if let Some(s) = &visitor.0 .0 {
        let db = state.db.get().await?;
        sessions::revoke(&**db, s.session_id, "signed out").await?;
    }
    let mut resp: Response = page::redirect("/signin");
    session::set_cookie(&mut resp, &state, session::COOKIE, "", 0);
    Ok(resp)
}
