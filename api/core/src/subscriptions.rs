//! Applying what the payment provider says a subscription is: from its
//! webhook events, and from its answer to our own calls (upgrade, cancel).
//! Provider-neutral: the api's payments module turns the provider's objects
//! into [`Snapshot`]s.

use chrono::{DateTime, SubsecRound, Utc};
use tokio_postgres::GenericClient;
use uuid::Uuid;

use crate::error::Error;
use crate::store::changes::note_change;
use crate::store::subscriptions::{self, Snapshot, Subscription, SubscriptionStatus};
use crate::store::users;
use crate::Core;

/// Applies what the provider says a subscription is, dated `at`, unless the
/// user's row holds newer news (see [`subscriptions::is_newer`]). Returns
/// the user whose subscription it changed, if it was applied.
pub async fn apply_snapshot(
    db: &impl GenericClient,
    snap: &Snapshot,
    at: DateTime<Utc>,
) -> Result<Option<Uuid>, Error> {
    let row = match subscriptions::lock_by_provider_id(db, &snap.subscription_id).await? {
        Some(row) => Some(row),
        None => match snap.user_id {
            Some(user_id) => subscriptions::lock(db, user_id).await?,
            None => None,
        },
    };
    let Some(user_id) = row.as_ref().map(|r| r.user_id).or(snap.user_id) else {
        tracing::warn!(subscription = %snap.subscription_id, "event for a subscription of no known user: ignored");
        return Ok(None);
    };
    let ends = snap.status == SubscriptionStatus::Canceled;
    if !subscriptions::is_newer(row.as_ref(), &snap.subscription_id, ends, at) {
        tracing::info!(subscription = %snap.subscription_id, "stale subscription change: ignored");
        return Ok(None);
    }
    let tier = snap
        .tier_slug
        .clone()
        .or_else(|| row.as_ref().map(|r| r.tier_slug.clone()));
    let Some(tier) = tier.filter(|t| matches!(t.as_str(), "monthly" | "yearly")) else {
        tracing::warn!(subscription = %snap.subscription_id, price = ?snap.price_id, "subscription price is none of ours: ignored");
        return Ok(None);
    };
    if !users::exists(db, user_id).await? {
        return Ok(None);
    }
    subscriptions::apply_snapshot(db, user_id, &tier, snap, at).await?;
    Ok(Some(user_id))
}

/// The user's subscription after a change.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The tier the user is on now.
    pub tier_slug: String,
    pub subscription: Option<Subscription>,
}

/// Applies the provider's answer to our own call (upgrade, cancel) on the
/// user's subscription, and reads back where the user stands. Dated now, to
/// the second like the provider's event times, so that events created
/// before the call are stale and the call's own events are not.
pub async fn apply_change(core: &Core, user_id: Uuid, snap: &Snapshot) -> Result<Applied, Error> {
    let mut db = core.db.get().await?;
    let tx = db.transaction().await?;
    let now = Utc::now().trunc_subsecs(0);
    // The row is found by the provider's subscription id, which is the
    // user's: it was read from their row.
    apply_snapshot(&*tx, snap, now).await?;
    let subscription = subscriptions::find(&tx, user_id).await?;
    let tier_slug = users::tier_of(&*tx, user_id).await?;
    tx.commit().await?;
    note_change(user_id);
    Ok(Applied {
        tier_slug,
        subscription,
    })
}
