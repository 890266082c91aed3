//! Checkout sessions started by users, and the ledger of webhook events
//! already applied (so a redelivered event changes nothing).

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::error::Error;

/// Where a checkout session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckoutStatus {
    Open,
    Completed,
    Abandoned,
}

impl CheckoutStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckoutStatus::Open => "open",
            CheckoutStatus::Completed => "completed",
            CheckoutStatus::Abandoned => "abandoned",
        }
    }

    fn parse(text: &str) -> Option<CheckoutStatus> {
        match text {
            "open" => Some(CheckoutStatus::Open),
            "completed" => Some(CheckoutStatus::Completed),
            "abandoned" => Some(CheckoutStatus::Abandoned),
            _ => None,
        }
    }
}

scanfleet_common::text_column!(CheckoutStatus, CheckoutStatus::parse);

/// A checkout session: which user buys which tier.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub id: String,
    pub user_id: Uuid,
    pub tier_slug: String,
    /// `stripe` or `dev`.
    pub provider: String,
    pub status: CheckoutStatus,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<&Row> for Checkout {
    type Error = Error;

    fn try_from(r: &Row) -> Result<Self, Error> {
        Ok(Checkout {
            id: r.try_get("id")?,
            user_id: r.try_get("user_id")?,
            tier_slug: r.try_get("tier_slug")?,
            provider: r.try_get("provider")?,
            status: r.try_get("status")?,
            created_at: r.try_get("created_at")?,
        })
    }
}

const COLUMNS: &str = "id, user_id, tier_slug, provider, status, created_at";

pub async fn create_checkout(
    db: &impl GenericClient,
    id: &str,
    user_id: Uuid,
    tier_slug: &str,
    provider: &str,
) -> Result<(), Error> {
    db.execute(
        "INSERT INTO checkout_sessions (id, user_id, tier_slug, provider) VALUES ($1, $2, $3, $4)",
        &[&id, &user_id, &tier_slug, &provider],
    )
    .await?;
    Ok(())
}

pub async fn find_checkout(db: &impl GenericClient, id: &str) -> Result<Option<Checkout>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM checkout_sessions WHERE id = $1"),
            &[&id],
        )
        .await?;
    row.as_ref().map(Checkout::try_from).transpose()
}

/// Moves an open session to `status`; false when it was not open (already
/// finished, or unknown).
pub async fn finish_checkout(
    db: &impl GenericClient,
    id: &str,
    status: CheckoutStatus,
) -> Result<bool, Error> {
    let n = db
        .execute(
            "UPDATE checkout_sessions SET status = $2, finished_at = now()
             WHERE id = $1 AND status = 'open'",
            &[&id, &status],
        )
        .await?;
    Ok(n == 1)
}

/// Records a webhook event as applied; false when it was recorded before
/// (a redelivery). Call inside the transaction that applies the event, so
/// that an event whose application failed is applied on the next delivery.
pub async fn record_event(
    db: &impl GenericClient,
    id: &str,
    event_type: &str,
    provider_created_at: DateTime<Utc>,
) -> Result<bool, Error> {
    let n = db
        .execute(
            "INSERT INTO payment_events (id, type, provider_created_at) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO NOTHING",
            &[&id, &event_type, &provider_created_at],
        )
        .await?;
    Ok(n == 1)
}
