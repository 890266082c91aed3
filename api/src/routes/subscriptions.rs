//! `/subscriptions`: tiers, the caller's subscription and usage.
//!
//! The payment-provider operations (checkout, upgrade, cancel, webhook) are
//! part of the contract but not provided by this version yet: each answers
//! 501 problem+json.

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::ApiTags;
use crate::auth::{Access, BearerAuth, Credentials};
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::subscriptions::{self, calendar_month, uses_billing_period};
use crate::store::tiers::{self, Tier};

/// A subscription tier: price, limits and features.
#[derive(Debug, Object)]
pub struct TierOut {
    /// `demo`, `monthly`, `yearly` or `admin`.
    pub slug: String,
    pub name: String,
    /// Price per interval in the currency's minor unit.
    pub price_cents: i32,
    /// ISO 4217 code, lower case (`usd`).
    pub currency: String,
    /// Billing interval: `month`, `year` or `none`.
    pub interval: String,
    /// Requests per minute.
    pub rate_limit_rpm: i32,
    /// Scans per period; null means unlimited.
    #[oai(nullable)]
    pub scan_limit: Option<i32>,
    /// Targets at once; null means unlimited.
    #[oai(nullable)]
    pub target_limit: Option<i32>,
    pub features: Vec<String>,
    /// Whether the tier can be bought through checkout.
    pub purchasable: bool,
}

impl From<Tier> for TierOut {
    fn from(t: Tier) -> Self {
        TierOut {
            slug: t.slug,
            name: t.name,
            price_cents: t.price_cents,
            currency: t.currency,
            interval: t.interval,
            rate_limit_rpm: t.rate_limit_rpm,
            scan_limit: t.scan_limit,
            target_limit: t.target_limit,
            features: t.features,
            purchasable: t.purchasable,
        }
    }
}

/// The caller's subscription. Without a paid subscription: the user's tier,
/// `active`, and the current calendar month (UTC) as the period.
#[derive(Debug, Object)]
pub struct CurrentSubscription {
    pub tier_slug: String,
    /// `active`, `trialing`, `past_due`, `canceled` or `incomplete`.
    pub status: String,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    /// The subscription ends with the period (cancelled).
    pub cancel_at_period_end: bool,
}

/// Scans and targets used against the tier's limits.
#[derive(Debug, Object)]
pub struct Usage {
    /// The period scans are counted in: the billing period for paid
    /// subscriptions, else the calendar month (UTC).
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    /// Scans created in the period (every created scan counts).
    pub scans_used: i64,
    /// Null means unlimited.
    #[oai(nullable)]
    pub scans_limit: Option<i32>,
    pub targets_used: i64,
    /// Null means unlimited.
    #[oai(nullable)]
    pub targets_limit: Option<i32>,
}

pub struct SubscriptionsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Subscriptions")]
impl SubscriptionsApi {
    /// List tiers with pricing, limits and features
    #[oai(
        path = "/subscriptions/tiers",
        method = "get",
        operation_id = "list_tiers"
    )]
    async fn list_tiers(&self, state: Data<&AppState>) -> Result<Json<Vec<TierOut>>> {
        let db = state.db.get().await?;
        let list = tiers::list(&**db).await?;
        Ok(Json(list.into_iter().map(Into::into).collect()))
    }

    /// The caller's subscription
    #[oai(
        path = "/subscriptions/current",
        method = "get",
        operation_id = "get_current_subscription"
    )]
    async fn get_current_subscription(
        &self,
        state: Data<&AppState>,
        auth: Credentials,
    ) -> Result<Json<CurrentSubscription>> {
        let me = state.authenticate(&auth, Access::Read).await?;
        let db = state.db.get().await?;
        let now = Utc::now();
        let current = match subscriptions::find(&**db, me.user.id).await? {
            Some(sub) if uses_billing_period(&me.user.tier_slug, &sub, now) => {
                CurrentSubscription {
                    tier_slug: me.user.tier_slug,
                    status: sub.status,
                    current_period_start: sub.current_period_start,
                    current_period_end: sub.current_period_end,
                    cancel_at_period_end: sub.cancel_at_period_end,
                }
            }
            _ => {
                let (start, end) = calendar_month(now);
                CurrentSubscription {
                    tier_slug: me.user.tier_slug,
                    status: "active".to_string(),
                    current_period_start: start,
                    current_period_end: end,
                    cancel_at_period_end: false,
                }
            }
        };
        Ok(Json(current))
    }

    /// Start a checkout at the payment provider
    #[oai(
        path = "/subscriptions/checkout",
        method = "post",
        operation_id = "create_checkout"
    )]
    async fn create_checkout(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/checkout"))
    }

    /// Change tier with proration
    #[oai(
        path = "/subscriptions/upgrade",
        method = "post",
        operation_id = "upgrade_subscription"
    )]
    async fn upgrade_subscription(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/upgrade"))
    }

    /// Cancel at the end of the billing period
    #[oai(
        path = "/subscriptions/cancel",
        method = "post",
        operation_id = "cancel_subscription"
    )]
    async fn cancel_subscription(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/cancel"))
    }

    /// Scans and targets used against the tier's limits
    #[oai(
        path = "/subscriptions/usage",
        method = "get",
        operation_id = "get_usage"
    )]
    async fn get_usage(&self, state: Data<&AppState>, auth: Credentials) -> Result<Json<Usage>> {
        let me = state.authenticate(&auth, Access::Read).await?;
        let db = state.db.get().await?;
        let tier = tiers::get(&**db, &me.user.tier_slug)
            .await?
            .ok_or_else(|| anyhow::anyhow!("user {} has unknown tier", me.user.id))?;
        let (period_start, period_end) =
            subscriptions::current_period(&**db, me.user.id, &me.user.tier_slug).await?;
        Ok(Json(Usage {
            period_start,
            period_end,
            scans_used: subscriptions::scans_used(&**db, me.user.id, period_start).await?,
            scans_limit: tier.scan_limit,
            targets_used: subscriptions::targets_used(&**db, me.user.id).await?,
            targets_limit: tier.target_limit,
        }))
    }

    /// Events from the payment provider (signed)
    #[oai(
        path = "/subscriptions/webhook",
        method = "post",
        operation_id = "payment_webhook"
    )]
    async fn payment_webhook(
        &self,
        _state: Data<&AppState>,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/webhook"))
    }
}
