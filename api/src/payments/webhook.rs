//! Receiving a webhook delivery: verify the signature over the raw body,
//! parse the event, then in one transaction record its id and apply it.
//! A redelivered event finds its id recorded and changes nothing; a failure
//! rolls back the id too, so the provider's next delivery applies it.

use chrono::{DateTime, Months, Utc};
use deadpool_postgres::Pool;
use tokio_postgres::GenericClient;
use uuid::Uuid;

use super::events::{self, CheckoutCompleted, Event, EventKind};
use super::{signature, Payments, PaymentsError};
use crate::error::Error;
use scanfleet_core::store::payments::{self as store, CheckoutStatus};
use scanfleet_core::store::subscriptions::{self, CheckoutCompletion};
use scanfleet_core::store::{tiers, users};
use scanfleet_core::subscriptions as subscriptions_use;

/// What a delivery led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// Applied (or ignored as stale or irrelevant) for the first time.
    Processed,
    /// This event id was processed before: nothing changed.
    Duplicate,
}

/// Verifies and applies one delivery.
#[tracing::instrument(skip_all)]
pub async fn receive(
    db: &Pool,
    payments: &Payments,
    body: &[u8],
    signature_header: Option<&str>,
) -> Result<Receipt, Error> {
    let secret = payments.webhook_secret()?;
    signature::verify(
        secret.expose(),
        signature_header,
        body,
        Utc::now().timestamp(),
    )
    .map_err(PaymentsError::from)?;
    let event = events::parse(body, payments.catalog())?;
    tracing::info!(event_id = %event.id, event_type = %event.kind_name, "payment event");
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    if !store::record_event(&*tx, &event.id, &event.kind_name, event.created).await? {
        return Ok(Receipt::Duplicate);
    }
    let changed = apply(&*tx, &event).await?;
    tx.commit().await?;
    if let Some(user_id) = changed {
        scanfleet_core::store::changes::note_change(user_id);
    }
    Ok(Receipt::Processed)
}

/// Applies an event; returns the user whose subscription changed.
async fn apply(db: &impl GenericClient, event: &Event) -> Result<Option<Uuid>, Error> {
    match &event.kind {
        EventKind::CheckoutCompleted(done) => checkout_completed(db, done, event.created).await,
        EventKind::SubscriptionChanged(snap) => {
            subscriptions_use::apply_snapshot(db, snap, event.created).await
        }
        EventKind::PaymentFailed {
            subscription_id: Some(id),
        } => payment_failed(db, id, event.created).await,
        EventKind::PaymentFailed {
            subscription_id: None,
        }
        | EventKind::Ignored => Ok(None),
    }
}

/// The user paid: they are on the tier from now on, even before the
/// subscription's own event arrives. If that event came first, the row holds
/// this subscription already and nothing is overwritten.
async fn checkout_completed(
    db: &impl GenericClient,
    done: &CheckoutCompleted,
    at: DateTime<Utc>,
) -> Result<Option<Uuid>, Error> {
    let session = store::find_checkout(db, &done.session_id).await?;
    store::finish_checkout(db, &done.session_id, CheckoutStatus::Completed).await?;
    // Our own record of the session wins over what the payload repeats.
    let user_id = session.as_ref().map(|s| s.user_id).or_else(|| {
        done.client_reference_id
            .as_deref()
            .and_then(|u| u.parse().ok())
    });
    let tier_slug = session
        .as_ref()
        .map(|s| s.tier_slug.clone())
        .or_else(|| done.tier_slug.clone());
    let (Some(user_id), Some(tier_slug), Some(subscription_id)) =
        (user_id, tier_slug, done.subscription_id.as_deref())
    else {
        tracing::warn!(session = %done.session_id, "completed checkout names no user, tier or subscription: ignored");
        return Ok(None);
    };
    if !users::exists(db, user_id).await? {
        return Ok(None);
    }
    let Some(tier) = tiers::get(db, &tier_slug).await?.filter(|t| t.purchasable) else {
        tracing::warn!(session = %done.session_id, tier = %tier_slug, "completed checkout for a tier that cannot be bought: ignored");
        return Ok(None);
    };
    let existing = subscriptions::lock(db, user_id).await?;
    if existing
        .as_ref()
        .is_some_and(|r| r.provider_subscription_id.as_deref() == Some(subscription_id))
    {
        return Ok(None);
    }
    let months = if tier.interval == "year" { 12 } else { 1 };
    subscriptions::apply_checkout(
        db,
        &CheckoutCompletion {
            user_id,
            tier_slug: &tier.slug,
            customer_id: done.customer_id.as_deref(),
            subscription_id,
            period_start: at,
            period_end: at + Months::new(months),
        },
    )
    .await?;
    Ok(Some(user_id))
}

async fn payment_failed(
    db: &impl GenericClient,
    subscription_id: &str,
    at: DateTime<Utc>,
) -> Result<Option<Uuid>, Error> {
    let Some(row) = subscriptions::lock_by_provider_id(db, subscription_id).await? else {
        return Ok(None);
    };
    if subscriptions::is_newer(Some(&row), subscription_id, false, at) {
        subscriptions::mark_past_due(db, row.user_id, at).await?;
    }
    // The tier stays while past due.
    Ok(None)
}
