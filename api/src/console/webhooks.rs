//! Webhooks: create (the secret shown once), test, the delivery log,
//! redeliver, rotate the secret, enable, disable, delete. Paid tiers only,
//! as in the API; a demo user sees the upgrade prompt.

use askama::Template;
use poem::handler;
use poem::web::{Data, Path};
use uuid::Uuid;

use super::form;
use super::page::{self, Chrome, FormErrors, PageError, PageResult, Visitor};
use crate::state::AppState;
use crate::webhooks::manage;
use scanfleet_core::outbox;
use scanfleet_core::store::webhooks::{self, Attempt, Webhook, WebhookValues};
use scanfleet_core::store::Page;

/// One event a webhook may subscribe to, with whether it is checked.
pub struct EventChoice {
    pub name: &'static str,
    pub checked: bool,
}

fn event_choices(chosen: &[String]) -> Vec<EventChoice> {
    outbox::SUBSCRIBABLE
        .iter()
        .map(|name| EventChoice {
            name,
            checked: chosen.iter().any(|c| c == name),
        })
        .collect()
}

#[derive(Template)]
#[template(path = "webhooks.html")]
struct Webhooks {
    chrome: Chrome,
    list: Vec<Webhook>,
    paid: bool,
    events: Vec<EventChoice>,
    url: String,
    description: String,
    errors: FormErrors,
    secret: Option<String>,
}

async fn list_page(
    state: &AppState,
    visitor: &Visitor,
    form: (String, String, Vec<String>, FormErrors),
    secret: Option<String>,
) -> PageResult {
    let me = page::signed(visitor)?;
    let chrome = Chrome::load(state, me, "webhooks").await?;
    let paid = manage::ensure_paid(state, &me.user).await.is_ok();
    let db = state.db.get().await?;
    let list = if paid {
        webhooks::list(
            &**db,
            me.user.id,
            Page {
                limit: 500,
                offset: 0,
            },
        )
        .await?
        .0
    } else {
        Vec::new()
    };
    let (url, description, chosen, errors) = form;
    let failed = !errors.is_empty();
    let chosen = if chosen.is_empty() {
        vec!["scan.completed".to_string(), "finding.new".to_string()]
    } else {
        chosen
    };
    page::form_page(
        &Webhooks {
            chrome,
            list,
            paid,
            events: event_choices(&chosen),
            url,
            description,
            errors,
            secret,
        },
        failed,
    )
}

#[handler]
pub async fn index(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    let empty = (
        String::new(),
        String::new(),
        Vec::new(),
        FormErrors::default(),
    );
    list_page(&state, &visitor, empty, None).await
}

#[handler]
pub async fn create(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let events: Vec<String> = form.all("events").map(str::to_string).collect();
    let outcome = manage::create(
        &state,
        &me.user,
        &manage::NewHook {
            url: form.get("url"),
            kind: form.opt("kind"),
            events: &events,
            min_severity: form.opt("min_severity"),
            description: form.opt("description"),
        },
    )
    .await;
    match outcome {
        Ok((_, secret)) => {
            let empty = (
                String::new(),
                String::new(),
                Vec::new(),
                FormErrors::default(),
            );
            list_page(&state, &visitor, empty, Some(secret)).await
        }
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            let kept = (
                form.get("url").to_string(),
                form.get("description").to_string(),
                events,
                errors,
            );
            list_page(&state, &visitor, kept, None).await
        }
    }
}

#[derive(Template)]
#[template(path = "webhook.html")]
struct WebhookPage {
    chrome: Chrome,
    hook: Webhook,
    attempts: Vec<Attempt>,
    total: i64,
    notice: Option<String>,
    secret: Option<String>,
    error: Option<String>,
}

async fn hook_page(
    state: &AppState,
    visitor: &Visitor,
    id: Uuid,
    notice: Option<String>,
    secret: Option<String>,
    error: Option<String>,
) -> PageResult {
    let me = page::signed(visitor)?;
    let hook = manage::owned(state, &me.user, id).await?;
    let chrome = Chrome::load(state, me, "webhooks").await?;
    let db = state.db.get().await?;
    let (attempts, total) = webhooks::list_attempts(
        &**db,
        hook.id,
        Page {
            limit: 50,
            offset: 0,
        },
    )
    .await?;
    page::html(&WebhookPage {
        chrome,
        hook,
        attempts,
        total,
        notice,
        secret,
        error,
    })
}

#[handler]
pub async fn show(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(id): Path<Uuid>,
) -> PageResult {
    hook_page(&state, &visitor, id, None, None, None).await
}

/// Test, rotate, enable, disable or delete, by the form's `action`.
#[handler]
pub async fn act(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(id): Path<Uuid>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let outcome: Result<(Option<String>, Option<String>), crate::error::Error> =
        match form.get("action") {
            "test" => manage::test(&state, &me.user, id)
                .await
                .map(|_| (Some("A test event is queued.".to_string()), None)),
            "rotate" => manage::rotate(&state, &me.user, id)
                .await
                .map(|(secret, until)| {
                    let note = format!(
                        "New secret below; the previous one keeps signing until {}.",
                        until.format("%Y-%m-%d %H:%M UTC")
                    );
                    (Some(note), Some(secret))
                }),
            "enable" | "disable" => {
                let hook = manage::owned(&state, &me.user, id).await?;
                let values = WebhookValues {
                    url: &hook.url,
                    kind: &hook.kind,
                    events: &hook.events,
                    min_severity: hook.min_severity,
                    description: &hook.description,
                    enabled: form.get("action") == "enable",
                };
                let db = state.db.get().await?;
                webhooks::update(&**db, me.user.id, id, &values)
                    .await?
                    .ok_or(PageError::NotFound)?;
                Ok((None, None))
            }
            "delete" => {
                manage::delete(&state, &me.user, id).await?;
                return Ok(page::redirect("/webhooks"));
            }
            _ => {
                return Err(PageError::BadRequest(
                    "action: must be test, rotate, enable, disable or delete".into(),
                ))
            }
        };
    match outcome {
        Ok((notice, secret)) => hook_page(&state, &visitor, id, notice, secret, None).await,
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            hook_page(
                &state,
                &visitor,
                id,
                None,
                None,
                Some(errors.all().join(" ")),
            )
            .await
        }
    }
}

#[handler]
pub async fn redeliver(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path((id, delivery_id)): Path<(Uuid, Uuid)>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    manage::redeliver(&state, &me.user, id, delivery_id).await?;
    let note = Some("The delivery is queued again.".to_string());
    hook_page(&state, &visitor, id, note, None, None).await
}
