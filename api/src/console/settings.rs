//! Schedules, notifications, webhooks, the account and the admin pages.

use askama::Template;
use chrono::{DateTime, Utc};
use poem::handler;
use poem::web::{Data, Path, Query};
use serde::Deserialize;
use uuid::Uuid;

use super::form;
use super::page::{self, Chrome, FormErrors, PageError, PageResult, Visitor};
use super::targets::engines;
use crate::auth::account;
use crate::state::AppState;
use scanfleet_common::jobs::Engine;
use scanfleet_core::cron::CronSpec;
use scanfleet_core::store::api_keys::{self, ApiKey};
use scanfleet_core::store::notifications::{self, Notification};
use scanfleet_core::store::schedules::{self, NewSchedule, Schedule, ScheduleUpdate};
use scanfleet_core::store::targets;
use scanfleet_core::store::users::{self, AdminChange, User};
use scanfleet_core::store::{tiers, Page};

const ALL: Page = Page {
    limit: 500,
    offset: 0,
};

/// A schedule with its target's domain and its last firing's scan.
pub struct ScheduleLine {
    pub s: Schedule,
    pub domain: String,
    pub last_scan: Option<(Uuid, String)>,
}

#[derive(Template)]
#[template(path = "schedules.html")]
struct Schedules {
    chrome: Chrome,
    lines: Vec<ScheduleLine>,
    /// The user's targets as (id, domain, chosen).
    targets: Vec<(Uuid, String, bool)>,
    engines: [(&'static str, &'static str); Engine::ALL.len()],
    cron: String,
    preview: Vec<String>,
    errors: FormErrors,
    chosen_target: String,
}

#[derive(Deserialize, Default)]
pub struct ScheduleQuery {
    #[serde(default)]
    target: String,
    #[serde(default)]
    cron: String,
}

/// The next five firings of `expr`, or why it is not a schedule.
fn preview(expr: &str) -> Result<Vec<String>, String> {
    let spec = CronSpec::parse(expr).map_err(|e| e.to_string())?;
    let mut at = Utc::now();
    let mut out = Vec::new();
    for _ in 0..5 {
        match spec.next_after(at) {
            Some(next) => {
                out.push(next.format("%a %Y-%m-%d %H:%M UTC").to_string());
                at = next;
            }
            None => break,
        }
    }
    if out.is_empty() {
        return Err("never fires again".into());
    }
    Ok(out)
}

async fn schedules_page(
    state: &AppState,
    visitor: &Visitor,
    q: ScheduleQuery,
    errors: FormErrors,
) -> PageResult {
    let me = page::signed(visitor)?;
    let chrome = Chrome::load(state, me, "schedules").await?;
    let db = state.db.get().await?;
    let (list, _) = schedules::list(&**db, me.user.id, ALL).await?;
    let (targets, _) = targets::list(&**db, me.user.id, None, ALL).await?;
    let ids: Vec<Uuid> = list.iter().map(|s| s.id).collect();
    let last = db
        .query(
            "SELECT DISTINCT ON (schedule_id) schedule_id, id, status FROM scans
             WHERE user_id = $1 AND schedule_id = ANY($2)
             ORDER BY schedule_id, created_at DESC",
            &[&me.user.id, &ids],
        )
        .await?;
    let mut lines = Vec::new();
    for s in list {
        let domain = targets
            .iter()
            .find(|t| t.id == s.target_id)
            .map(|t| t.domain.clone())
            .unwrap_or_default();
        let mut last_scan = None;
        for r in &last {
            if r.try_get::<_, Uuid>("schedule_id")? == s.id {
                last_scan = Some((r.try_get("id")?, r.try_get("status")?));
            }
        }
        lines.push(ScheduleLine {
            s,
            domain,
            last_scan,
        });
    }
    let (preview, errors) = if q.cron.trim().is_empty() || !errors.is_empty() {
        (Vec::new(), errors)
    } else {
        match preview(q.cron.trim()) {
            Ok(p) => (p, errors),
            Err(e) => (
                Vec::new(),
                FormErrors::from_error(PageError::Core(crate::error::Error::invalid(
                    "cron_expression",
                    e,
                )))?,
            ),
        }
    };
    let failed = !errors.is_empty();
    let targets = targets
        .into_iter()
        .map(|t| {
            let chosen = t.id.to_string() == q.target;
            (t.id, t.domain, chosen)
        })
        .collect();
    page::form_page(
        &Schedules {
            chrome,
            lines,
            targets,
            engines: engines(),
            cron: q.cron,
            preview,
            errors,
            chosen_target: q.target,
        },
        failed,
    )
}

#[handler]
pub async fn schedules_list(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Query(q): Query<ScheduleQuery>,
) -> PageResult {
    schedules_page(&state, &visitor, q, FormErrors::default()).await
}

fn engine_of(raw: &str) -> Result<Engine, crate::error::Error> {
    Engine::parse(raw)
        .filter(|e| Engine::ALL.contains(e))
        .ok_or_else(|| crate::error::Error::invalid("engine", "must be full, quick, recon or auto"))
}

fn cron_of(raw: &str) -> Result<(CronSpec, DateTime<Utc>), crate::error::Error> {
    let spec = CronSpec::parse(raw.trim())
        .map_err(|e| crate::error::Error::invalid("cron_expression", e.to_string()))?;
    let next = spec
        .next_after(Utc::now())
        .ok_or_else(|| crate::error::Error::invalid("cron_expression", "never fires again"))?;
    Ok((spec, next))
}

#[handler]
pub async fn schedules_create(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let outcome = async {
        let target_id = Uuid::parse_str(form.get("target_id"))
            .map_err(|_| crate::error::Error::invalid("target_id", "choose a target"))?;
        let engine = engine_of(form.get("engine"))?;
        let (spec, next_run) = cron_of(form.get("cron_expression"))?;
        let db = state.db.get().await?;
        schedules::create(
            &**db,
            NewSchedule {
                user_id: me.user.id,
                target_id,
                engine,
                cron_expression: spec.as_str(),
                next_run,
            },
        )
        .await
    }
    .await;
    match outcome {
        Ok(_) => Ok(page::redirect("/schedules")),
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            let q = ScheduleQuery {
                target: form.get("target_id").to_string(),
                cron: form.get("cron_expression").to_string(),
            };
            schedules_page(&state, &visitor, q, errors).await
        }
    }
}

#[handler]
pub async fn schedules_change(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(schedule_id): Path<Uuid>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let db = state.db.get().await?;
    let current = schedules::find(&**db, me.user.id, schedule_id)
        .await?
        .ok_or(PageError::NotFound)?;
    match form.get("action") {
        "delete" => schedules::delete(&**db, me.user.id, schedule_id).await?,
        "enable" | "disable" => {
            let (spec, next_run) = cron_of(&current.cron_expression)?;
            schedules::update(
                &**db,
                me.user.id,
                current.id,
                ScheduleUpdate {
                    engine: current.engine,
                    cron_expression: spec.as_str(),
                    enabled: form.get("action") == "enable",
                    next_run,
                },
            )
            .await?;
        }
        _ => {
            return Err(PageError::BadRequest(
                "action: must be enable, disable or delete".into(),
            ))
        }
    }
    Ok(page::redirect("/schedules"))
}

#[derive(Template)]
#[template(path = "notifications.html")]
struct Notifications {
    chrome: Chrome,
    list: Vec<Notification>,
    total: i64,
}

#[handler]
pub async fn notifications_list(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    let me = page::signed(&visitor)?;
    let chrome = Chrome::load(&state, me, "notifications").await?;
    let db = state.db.get().await?;
    let (list, total) = notifications::list(
        &**db,
        me.user.id,
        false,
        Page {
            limit: 100,
            offset: 0,
        },
    )
    .await?;
    page::html(&Notifications {
        chrome,
        list,
        total,
    })
}

#[handler]
pub async fn notifications_read(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(id): Path<Uuid>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let db = state.db.get().await?;
    notifications::mark_read(&**db, me.user.id, id)
        .await?
        .ok_or(PageError::NotFound)?;
    Ok(page::redirect("/notifications"))
}

#[handler]
pub async fn notifications_read_all(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    let me = page::signed(&visitor)?;
    let db = state.db.get().await?;
    notifications::mark_all_read(&**db, me.user.id).await?;
    Ok(page::redirect("/notifications"))
}

#[derive(Template)]
#[template(path = "account.html")]
struct Account {
    chrome: Chrome,
    user: User,
    tier_name: String,
    keys: Vec<ApiKey>,
    new_key: Option<String>,
    name_errors: FormErrors,
    password_errors: FormErrors,
    key_errors: FormErrors,
    upgrade_errors: FormErrors,
    checkout_url: Option<String>,
    notice: Option<String>,
}

#[derive(Default)]
struct AccountForms {
    upgrade_errors: FormErrors,
    checkout_url: Option<String>,
    new_key: Option<String>,
    name_errors: FormErrors,
    password_errors: FormErrors,
    key_errors: FormErrors,
    notice: Option<String>,
}

async fn account_page(state: &AppState, visitor: &Visitor, forms: AccountForms) -> PageResult {
    let me = page::signed(visitor)?;
    let chrome = Chrome::load(state, me, "account").await?;
    let db = state.db.get().await?;
    let user = users::find(&**db, me.user.id)
        .await?
        .ok_or(PageError::SignIn)?;
    let tier_name = tiers::get(&**db, &user.tier_slug)
        .await?
        .map(|t| t.name)
        .unwrap_or_else(|| user.tier_slug.clone());
    let (keys, _) = api_keys::list(&**db, me.user.id, ALL).await?;
    let failed = !(forms.name_errors.is_empty()
        && forms.password_errors.is_empty()
        && forms.key_errors.is_empty()
        && forms.upgrade_errors.is_empty());
    page::form_page(
        &Account {
            chrome,
            user,
            tier_name,
            keys,
            new_key: forms.new_key,
            name_errors: forms.name_errors,
            password_errors: forms.password_errors,
            key_errors: forms.key_errors,
            upgrade_errors: forms.upgrade_errors,
            checkout_url: forms.checkout_url,
            notice: forms.notice,
        },
        failed,
    )
}

#[handler]
pub async fn account_show(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    account_page(&state, &visitor, AccountForms::default()).await
}

#[handler]
pub async fn account_name(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let outcome = async {
        let name = crate::validate::validate_full_name(form.get("full_name"))?;
        let db = state.db.get().await?;
        users::set_full_name(&**db, me.user.id, &name).await
    }
    .await;
    let forms = match outcome {
        Ok(_) => AccountForms {
            notice: Some("Name saved.".into()),
            ..Default::default()
        },
        Err(e) => AccountForms {
            name_errors: FormErrors::from_error(e.into())?,
            ..Default::default()
        },
    };
    account_page(&state, &visitor, forms).await
}

#[handler]
pub async fn account_password(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let outcome = account::change_password(
        &state,
        &me.user,
        Some(me.session_id),
        form.get("current_password").to_string(),
        form.get("new_password").to_string(),
    )
    .await;
    let forms = match outcome {
        Ok(n) => AccountForms {
            notice: Some(format!(
                "Password changed; {n} other session{} signed out.",
                if n == 1 { " was" } else { "s were" }
            )),
            ..Default::default()
        },
        Err(e) => AccountForms {
            password_errors: FormErrors::from_error(e.into())?,
            ..Default::default()
        },
    };
    account_page(&state, &visitor, forms).await
}

#[handler]
pub async fn account_key_create(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let permissions: Vec<String> = form.all("permissions").map(str::to_string).collect();
    let days = form.opt("expires_in_days").map(|d| {
        d.parse::<i64>().map_err(|_| {
            crate::error::Error::invalid("expires_in_days", "must be a whole number of days")
        })
    });
    let outcome = match days.transpose() {
        Err(e) => Err(e),
        Ok(days) => {
            crate::routes::api_keys::issue(&state, &me.user, form.get("name"), &permissions, days)
                .await
        }
    };
    let forms = match outcome {
        Ok((_, raw)) => AccountForms {
            new_key: Some(raw),
            ..Default::default()
        },
        Err(e) => AccountForms {
            key_errors: FormErrors::from_error(e.into())?,
            ..Default::default()
        },
    };
    account_page(&state, &visitor, forms).await
}

/// Upgrade: a checkout of the chosen tier at the payment provider, which
/// the browser is sent to.
#[handler]
pub async fn account_upgrade(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    match crate::routes::subscriptions::start_checkout(&state, &me.user, form.get("tier_slug"))
        .await
    {
        // A link, not a redirect: the page's policy allows forms to post
        // to this site only (`form-action 'self'`), redirects included.
        Ok(session) => {
            let forms = AccountForms {
                checkout_url: Some(session.url),
                ..Default::default()
            };
            account_page(&state, &visitor, forms).await
        }
        Err(e) => {
            let forms = AccountForms {
                upgrade_errors: FormErrors::from_error(e.into())?,
                ..Default::default()
            };
            account_page(&state, &visitor, forms).await
        }
    }
}

#[handler]
pub async fn account_key_revoke(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(key_id): Path<Uuid>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let db = state.db.get().await?;
    api_keys::delete(&**db, me.user.id, key_id).await?;
    Ok(page::redirect("/account"))
}

/// A user with the admin form's choices.
pub struct AdminRow {
    pub u: User,
    pub tiers: Vec<super::targets::Opt>,
    pub roles: Vec<super::targets::Opt>,
}

const TIERS: [(&str, &str); 4] = [
    ("demo", "demo"),
    ("monthly", "monthly"),
    ("yearly", "yearly"),
    ("admin", "admin"),
];
const ROLES: [(&str, &str); 2] = [("user", "user"), ("admin", "admin")];

#[derive(Template)]
#[template(path = "admin.html")]
struct Admin {
    chrome: Chrome,
    users: Vec<AdminRow>,
    total: i64,
    nodes: Vec<crate::routes::admin::FleetNode>,
    /// Why the registry could not be read, when it could not.
    nodes_error: Option<String>,
}

fn admin_of(
    visitor: &Visitor,
) -> Result<&scanfleet_core::store::sessions::ConsoleSession, PageError> {
    let me = page::signed(visitor)?;
    if !me.user.is_admin() {
        // Not an admin: the page does not exist for them.
        return Err(PageError::NotFound);
    }
    Ok(me)
}

#[handler]
pub async fn admin_show(state: Data<&AppState>, visitor: Data<&Visitor>) -> PageResult {
    let me = admin_of(&visitor)?;
    let chrome = Chrome::load(&state, me, "admin").await?;
    let db = state.db.get().await?;
    let (users, total) = users::list(&**db, ALL).await?;
    let users = users
        .into_iter()
        .map(|u| AdminRow {
            tiers: super::targets::options(&TIERS, &u.tier_slug),
            roles: super::targets::options(&ROLES, &u.role),
            u,
        })
        .collect();
    let (nodes, nodes_error) = match crate::routes::admin::fleet_nodes(&state).await {
        Ok(n) => (n, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    page::html(&Admin {
        chrome,
        users,
        total,
        nodes,
        nodes_error,
    })
}

/// The Drain button of a node: it finishes its scans, takes no more and
/// exits (`POST /api/v1/admin/nodes/{id}/drain`).
#[handler]
pub async fn admin_node_drain(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(node_id): Path<String>,
) -> PageResult {
    let me = admin_of(&visitor)?;
    let node = crate::routes::admin::drain_node(&state, &node_id).await?;
    if node.is_none() {
        return Err(PageError::NotFound);
    }
    tracing::info!(admin = %me.user.id, node = %node_id, "node drain asked by admin (console)");
    Ok(page::redirect("/admin"))
}

#[handler]
pub async fn admin_user(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(user_id): Path<Uuid>,
    body: poem::Body,
) -> PageResult {
    let me = admin_of(&visitor)?;
    let form = form::read(body).await;
    let tier = form.get("tier_slug");
    let role = form.get("role");
    if !TIERS.iter().any(|(t, _)| *t == tier) || !ROLES.iter().any(|(r, _)| *r == role) {
        return Err(PageError::BadRequest(
            "tier or role: not one of the known values".into(),
        ));
    }
    let disabled = form.get("disabled") == "true";
    if user_id == me.user.id && (disabled || role != "admin") {
        return Err(PageError::BadRequest(
            "you cannot disable yourself or remove your own admin role".into(),
        ));
    }
    let db = state.db.get().await?;
    users::admin_update(
        &**db,
        user_id,
        AdminChange {
            tier_slug: Some(tier),
            role: Some(role),
            disabled: Some(disabled),
        },
    )
    .await?;
    if disabled {
        scanfleet_core::store::sessions::revoke_all_except(
            &**db,
            user_id,
            None,
            "account disabled",
        )
        .await?;
    }
    Ok(page::redirect("/admin"))
}
