//! Managing webhooks: the steps the API and the web console share
//! (the paid-tier gate, the checks of each value, creating, rotating,
//! testing and redelivering).

use chrono::{DateTime, Duration, Utc};
use scanfleet_common::Severity;
use uuid::Uuid;

use crate::contract::bounds::{
    WEBHOOK_DESCRIPTION_MAX as DESCRIPTION_MAX, WEBHOOK_URL_MAX as URL_MAX,
};
use crate::error::Error;
use crate::state::AppState;
use crate::webhooks::sign;
use scanfleet_core::outbox;
use scanfleet_core::scans::upgrade_prompt;
use scanfleet_core::store::tiers;
use scanfleet_core::store::users::User;
use scanfleet_core::store::webhooks::{self, Webhook, WebhookValues};

/// How long a rotated secret keeps signing beside the new one.
pub const ROTATION_OVERLAP_HOURS: i64 = 24;

/// Webhooks are a paid feature, like reports.
pub async fn ensure_paid(state: &AppState, user: &User) -> Result<(), Error> {
    let db = state.db.get().await?;
    let tier = tiers::get(&**db, &user.tier_slug).await?;
    if tier.is_some_and(|t| t.features.iter().any(|f| f == "webhooks")) {
        return Ok(());
    }
    Err(Error::UpgradeRequired {
        code: "feature_not_in_tier",
        detail: format!("webhooks are not part of the {} tier", user.tier_slug),
        upgrade: upgrade_prompt(
            &state.upgrade_links,
            &user.tier_slug,
            "Upgrade to Monthly Pro or Yearly Pro to send events to webhooks and Slack.",
        ),
    })
}

pub async fn owned(state: &AppState, user: &User, id: Uuid) -> Result<Webhook, Error> {
    ensure_paid(state, user).await?;
    let db = state.db.get().await?;
    webhooks::find(&**db, user.id, id)
        .await?
        .ok_or(Error::NotFound("webhook"))
}

/// The URL through the SSRF guard, trimmed; 422 naming `url` when refused.
pub async fn checked_url(state: &AppState, raw: &str, kind: &str) -> Result<String, Error> {
    if raw.chars().count() > URL_MAX {
        return Err(Error::invalid(
            "url",
            format!("must be at most {URL_MAX} characters"),
        ));
    }
    state
        .webhook_guard
        .check(raw, kind == "slack")
        .await
        .map_err(|e| Error::invalid("url", e.to_string()))?;
    Ok(raw.trim().to_string())
}

pub fn checked_events(events: &[String]) -> Result<Vec<String>, Error> {
    let mut kept: Vec<String> = Vec::new();
    for e in events {
        if !outbox::SUBSCRIBABLE.contains(&e.as_str()) {
            return Err(Error::invalid(
                "events",
                format!("must be among {}", outbox::SUBSCRIBABLE.join(", ")),
            ));
        }
        if !kept.contains(e) {
            kept.push(e.clone());
        }
    }
    if kept.is_empty() {
        return Err(Error::invalid("events", "must name at least one event"));
    }
    Ok(kept)
}

pub fn checked_severity(raw: Option<&str>) -> Result<Option<Severity>, Error> {
    raw.map(|s| {
        Severity::parse(s).ok_or_else(|| {
            Error::invalid(
                "min_severity",
                "must be critical, high, medium, low or info",
            )
        })
    })
    .transpose()
}

pub fn checked_description(raw: Option<&str>) -> Result<Option<String>, Error> {
    raw.map(|d| {
        if d.chars().count() > DESCRIPTION_MAX {
            Err(Error::invalid(
                "description",
                format!("must be at most {DESCRIPTION_MAX} characters"),
            ))
        } else if d.chars().any(char::is_control) {
            Err(Error::invalid(
                "description",
                "must not hold control characters",
            ))
        } else {
            Ok(d.to_string())
        }
    })
    .transpose()
}

/// What a new webhook is made of, as sent.
pub struct NewHook<'a> {
    pub url: &'a str,
    /// `generic` when absent.
    pub kind: Option<&'a str>,
    pub events: &'a [String],
    pub min_severity: Option<&'a str>,
    pub description: Option<&'a str>,
}

/// Creates a webhook; returns it with its secret, shown once.
pub async fn create(
    state: &AppState,
    user: &User,
    new: &NewHook<'_>,
) -> Result<(Webhook, String), Error> {
    ensure_paid(state, user).await?;
    let kind = new.kind.unwrap_or("generic");
    if !matches!(kind, "generic" | "slack") {
        return Err(Error::invalid("kind", "must be generic or slack"));
    }
    let events = checked_events(new.events)?;
    let min_severity = checked_severity(new.min_severity)?.unwrap_or(Severity::Info);
    let description = checked_description(new.description)?.unwrap_or_default();
    let url = checked_url(state, new.url, kind).await?;
    let secret = sign::new_secret();
    let db = state.db.get().await?;
    let values = WebhookValues {
        url: &url,
        kind,
        events: &events,
        min_severity,
        description: &description,
        enabled: true,
    };
    let webhook = webhooks::create(&**db, user.id, &values, &secret).await?;
    tracing::info!(user_id = %user.id, webhook_id = %webhook.id, "webhook created");
    Ok((webhook, secret))
}

/// Gives a webhook a new secret; the previous one keeps signing until the
/// returned time.
pub async fn rotate(
    state: &AppState,
    user: &User,
    id: Uuid,
) -> Result<(String, DateTime<Utc>), Error> {
    ensure_paid(state, user).await?;
    let secret = sign::new_secret();
    let until = Utc::now() + Duration::hours(ROTATION_OVERLAP_HOURS);
    let db = state.db.get().await?;
    if !webhooks::rotate_secret(&**db, user.id, id, &secret, until).await? {
        return Err(Error::NotFound("webhook"));
    }
    Ok((secret, until))
}

/// Queues a `ping` to the webhook; `Conflict` when it is disabled.
pub async fn test(state: &AppState, user: &User, id: Uuid) -> Result<(), Error> {
    let hook = owned(state, user, id).await?;
    let db = state.db.get().await?;
    if !outbox::ping(&db, user.id, hook.id).await? {
        return Err(Error::conflict(
            "webhook_disabled",
            "the webhook is disabled; enable it to send a test event",
        ));
    }
    Ok(())
}

/// Queues a delivery of the webhook again, now.
pub async fn redeliver(
    state: &AppState,
    user: &User,
    id: Uuid,
    delivery_id: Uuid,
) -> Result<(), Error> {
    let hook = owned(state, user, id).await?;
    let db = state.db.get().await?;
    if !webhooks::redeliver(&db, hook.id, delivery_id).await? {
        return Err(Error::NotFound("delivery"));
    }
    Ok(())
}

/// Deletes one of the user's webhooks.
pub async fn delete(state: &AppState, user: &User, id: Uuid) -> Result<(), Error> {
    ensure_paid(state, user).await?;
    let db = state.db.get().await?;
    if !webhooks::delete(&**db, user.id, id).await? {
        return Err(Error::NotFound("webhook"));
    }
    Ok(())
}
