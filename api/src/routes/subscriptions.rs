//! `/subscriptions`: tiers, the caller's subscription and usage, and payment
//! through the provider (see [`crate::payments`]): checkout, upgrade and
//! cancel (Bearer only: API keys cannot change a subscription), and the
//! provider's signed webhook (no credentials: the signature is the proof).
//!
//! Each provider call happens before anything is written: when it fails the
//! subscription is as it was. Its answer is applied at once, so a tier
//! change takes effect on the next request; the webhook events that follow
//! repeat it harmlessly.
//!
//! Hidden from the contract: the dev stand-in's checkout page and the page
//! the provider sends the user back to.

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem::{FromRequest, Request, RequestBody};
use poem_openapi::param::{Header, Path, Query};
use poem_openapi::payload::{Html, Json, ParsePayload, Payload};
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::{Object, OpenApi};
use uuid::Uuid;

use super::ApiTags;
use crate::auth::{BearerCaller, Caller, CanRead, Identity};
use crate::contract::PaidTierSlug;
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::payments::webhook::{self, Receipt};
use crate::payments::{dev, signature, CheckoutRequest, CheckoutSession, Snapshot};
use crate::state::AppState;
use scanfleet_core::store::payments::{self as checkouts, CheckoutStatus};
use scanfleet_core::store::subscriptions::{
    self, calendar_month, uses_billing_period, Subscription, SubscriptionStatus,
};
use scanfleet_core::store::tiers::{self, Tier};

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
    /// The `max_rps_per_host` a new target gets when none is given.
    pub default_max_rps_per_host: i32,
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
            default_max_rps_per_host: t.default_max_rps_per_host,
        }
    }
}

/// The caller's subscription. Without a paid subscription: the user's tier,
/// `active`, and the current calendar month (UTC) as the period.
#[derive(Debug, Object)]
pub struct CurrentSubscription {
    pub tier_slug: String,
    /// `active`, `past_due` (a renewal payment failed; the tier is kept while
    /// the provider retries) or `canceled`.
    pub status: String,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    /// The subscription ends with the period (cancelled).
    pub cancel_at_period_end: bool,
}

impl CurrentSubscription {
    /// What `user_tier` with subscription row `sub` amounts to at `now`.
    fn of(user_tier: &str, sub: Option<&Subscription>, now: DateTime<Utc>) -> CurrentSubscription {
        match sub {
            Some(sub) if uses_billing_period(user_tier, sub, now) => CurrentSubscription {
                tier_slug: user_tier.to_string(),
                status: sub.status.as_str().to_string(),
                current_period_start: sub.current_period_start,
                current_period_end: sub.current_period_end,
                cancel_at_period_end: sub.cancel_at_period_end,
            },
            _ => {
                let (start, end) = calendar_month(now);
                CurrentSubscription {
                    tier_slug: user_tier.to_string(),
                    status: SubscriptionStatus::Active.as_str().to_string(),
                    current_period_start: start,
                    current_period_end: end,
                    cancel_at_period_end: false,
                }
            }
        }
    }
}

/// A tier to buy or move to.
#[derive(Debug, Object)]
pub struct TierChoice {
    /// A purchasable tier: `monthly` or `yearly`.
    pub tier_slug: PaidTierSlug,
}

/// A checkout session at the payment provider.
#[derive(Debug, Object)]
pub struct CheckoutOut {
    /// Where the user pays; the tier changes when the provider confirms.
    pub checkout_url: String,
    /// The provider's session id.
    pub session_id: String,
}

/// The answer to a webhook delivery.
#[derive(Debug, Object)]
pub struct WebhookReceipt {
    pub received: bool,
    /// The event was processed before; nothing changed.
    pub duplicate: bool,
}

/// A provider event, taken as the raw bytes that were signed: the signature
/// covers the body exactly as sent, so it is read before any parsing.
pub struct SignedEvent(pub Vec<u8>);

impl Payload for SignedEvent {
    const CONTENT_TYPE: &'static str = "application/json";

    fn check_content_type(content_type: &str) -> bool {
        content_type
            .split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    }

    fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            description: Some(
                "A provider event: `id`, `type`, `created` (unix seconds) and \
                 `data.object`, signed in the `Stripe-Signature` header.",
            ),
            ..MetaSchema::new("object")
        }))
    }
}

impl ParsePayload for SignedEvent {
    const IS_REQUIRED: bool = true;

    async fn from_request(request: &Request, body: &mut RequestBody) -> poem::Result<Self> {
        Ok(SignedEvent(Vec::<u8>::from_request(request, body).await?))
    }
}

// The two-argument form: the one-argument arm recurses by a bare name.
poem_openapi::impl_apirequest_for_payload!(SignedEvent,);

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
        me: Caller<CanRead>,
    ) -> Result<Json<CurrentSubscription>> {
        let db = state.db.get().await?;
        let sub = subscriptions::find(&db, me.user.id).await?;
        Ok(Json(CurrentSubscription::of(
            &me.user.tier_slug,
            sub.as_ref(),
            Utc::now(),
        )))
    }

    /// Start a checkout at the payment provider
    ///
    /// Opens a checkout session in subscription mode for the tier's price.
    /// The tier changes once the provider confirms the payment (webhook).
    /// 409 when the caller already has a live subscription (use upgrade) or
    /// is on the admin tier; 502/503 when the provider fails or payments are
    /// not configured.
    #[oai(
        path = "/subscriptions/checkout",
        method = "post",
        operation_id = "create_checkout"
    )]
    async fn create_checkout(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        body: JsonBody<TierChoice>,
    ) -> Result<Json<CheckoutOut>> {
        let session = start_checkout(&state, &me.user, &body.tier_slug).await?;
        Ok(Json(CheckoutOut {
            checkout_url: session.url,
            session_id: session.id,
        }))
    }

    /// Change tier with proration
    ///
    /// Moves the caller's subscription to the tier's price at the provider,
    /// prorating the current period, and applies the provider's answer at
    /// once. 409 without a live subscription (start with checkout) or when
    /// already on that tier.
    #[oai(
        path = "/subscriptions/upgrade",
        method = "post",
        operation_id = "upgrade_subscription"
    )]
    async fn upgrade_subscription(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        body: JsonBody<TierChoice>,
    ) -> Result<Json<CurrentSubscription>> {
        let db = state.db.get().await?;
        let tier = purchasable(&**db, &body.tier_slug).await?;
        let payments = &state.payments;
        payments.ensure_configured()?;
        payments.catalog().price_for(&tier.slug)?;
        let sub = live_subscription(&db, &me).await?;
        if sub.tier_slug == tier.slug {
            return Err(Error::conflict(
                "already_on_tier",
                format!("the subscription is on the {} tier already", tier.slug),
            )
            .into());
        }
        drop(db);
        let snap = payments.change_tier(&sub, &tier.slug).await?;
        apply_answer(&state, me.user.id, &snap).await
    }

    /// Cancel at the end of the billing period
    ///
    /// The subscription stays active until `current_period_end`; then the
    /// caller returns to the demo tier. Cancelling twice is harmless. 409
    /// without a live subscription.
    #[oai(
        path = "/subscriptions/cancel",
        method = "post",
        operation_id = "cancel_subscription"
    )]
    async fn cancel_subscription(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
    ) -> Result<Json<CurrentSubscription>> {
        let db = state.db.get().await?;
        let payments = &state.payments;
        payments.ensure_configured()?;
        let sub = live_subscription(&db, &me).await?;
        if sub.cancel_at_period_end {
            return Ok(Json(CurrentSubscription::of(
                &me.user.tier_slug,
                Some(&sub),
                Utc::now(),
            )));
        }
        drop(db);
        let snap = payments.cancel_at_period_end(&sub).await?;
        apply_answer(&state, me.user.id, &snap).await
    }

    /// Scans and targets used against the tier's limits
    #[oai(
        path = "/subscriptions/usage",
        method = "get",
        operation_id = "get_usage"
    )]
    async fn get_usage(&self, state: Data<&AppState>, me: Caller<CanRead>) -> Result<Json<Usage>> {
        let db = state.db.get().await?;
        let tier = tiers::get(&**db, &me.user.tier_slug)
            .await?
            .ok_or_else(|| anyhow::anyhow!("user {} has unknown tier", me.user.id))?;
        let (period_start, period_end) =
            subscriptions::current_period(&db, me.user.id, &me.user.tier_slug).await?;
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
    ///
    /// Register `{public_url}/api/v1/subscriptions/webhook` with the provider
    /// for `checkout.session.completed`, `customer.subscription.created`,
    /// `customer.subscription.updated`, `customer.subscription.deleted` and
    /// `invoice.payment_failed`. No credentials: the `Stripe-Signature`
    /// header (HMAC-SHA256 with the webhook secret, timestamp within 5
    /// minutes) proves the sender; a bad one is 400 and changes nothing.
    /// Each event is applied once, and never over a newer change.
    #[oai(
        path = "/subscriptions/webhook",
        method = "post",
        operation_id = "payment_webhook"
    )]
    async fn payment_webhook(
        &self,
        state: Data<&AppState>,
        #[oai(name = "Stripe-Signature")] signature: Header<Option<String>>,
        body: SignedEvent,
    ) -> Result<Json<WebhookReceipt>> {
        let receipt =
            webhook::receive(&state.db, &state.payments, &body.0, signature.0.as_deref()).await?;
        Ok(Json(WebhookReceipt {
            received: true,
            duplicate: receipt == Receipt::Duplicate,
        }))
    }

    /// The dev stand-in's checkout page.
    #[oai(
        path = "/subscriptions/dev-checkout/:session_id",
        method = "get",
        hidden
    )]
    async fn dev_checkout_page(
        &self,
        state: Data<&AppState>,
        session_id: Path<String>,
    ) -> Result<Html<String>> {
        let checkout = dev_checkout(&state, &session_id).await?;
        let db = state.db.get().await?;
        let tier = tiers::get(&**db, &checkout.tier_slug)
            .await?
            .ok_or(Error::NotFound("checkout session"))?;
        if checkout.status != CheckoutStatus::Open {
            return Ok(Html(dev::message_page(
                "Checkout finished",
                &format!("This checkout is {} already.", checkout.status.as_str()),
            )));
        }
        let price = format!(
            "{}.{:02} {} per {}",
            tier.price_cents / 100,
            tier.price_cents % 100,
            tier.currency.to_uppercase(),
            tier.interval
        );
        Ok(Html(dev::checkout_page(&checkout.id, &tier.name, &price)))
    }

    /// The dev stand-in: pay. Sends the service the provider's signed events.
    #[oai(
        path = "/subscriptions/dev-checkout/:session_id/complete",
        method = "post",
        hidden
    )]
    async fn dev_checkout_complete(
        &self,
        state: Data<&AppState>,
        session_id: Path<String>,
    ) -> Result<Html<String>> {
        let checkout = dev_checkout(&state, &session_id).await?;
        let payments = &state.payments;
        if checkout.status != CheckoutStatus::Open {
            return Ok(Html(dev::message_page(
                "Checkout finished",
                &format!("This checkout is {} already.", checkout.status.as_str()),
            )));
        }
        let tier = {
            let db = state.db.get().await?;
            tiers::get(&**db, &checkout.tier_slug)
                .await?
                .ok_or(Error::NotFound("checkout session"))?
        };
        let price = payments.catalog().price_for(&tier.slug)?;
        let months = if tier.interval == "year" { 12 } else { 1 };
        let now = Utc::now();
        let secret = payments.webhook_secret()?.clone();
        for event in dev::completion_events(
            &checkout.id,
            checkout.user_id,
            &tier.slug,
            price,
            months,
            now,
        ) {
            let body = serde_json::to_vec(&event).map_err(anyhow::Error::from)?;
            let header = signature::sign(secret.expose(), now.timestamp(), &body);
            webhook::receive(&state.db, payments, &body, Some(&header)).await?;
        }
        Ok(Html(dev::message_page(
            "Subscribed",
            &format!(
                "You are on {} now. You can close this page and go back to the app.",
                tier.name
            ),
        )))
    }

    /// The dev stand-in: give up; nothing changes.
    #[oai(
        path = "/subscriptions/dev-checkout/:session_id/abandon",
        method = "post",
        hidden
    )]
    async fn dev_checkout_abandon(
        &self,
        state: Data<&AppState>,
        session_id: Path<String>,
    ) -> Result<Html<String>> {
        let checkout = dev_checkout(&state, &session_id).await?;
        let db = state.db.get().await?;
        checkouts::finish_checkout(&**db, &checkout.id, CheckoutStatus::Abandoned).await?;
        Ok(Html(dev::message_page(
            "Checkout abandoned",
            "Nothing was charged and your tier is unchanged.",
        )))
    }

    /// Where the provider sends the user back after checkout.
    #[oai(path = "/subscriptions/checkout/return", method = "get", hidden)]
    async fn checkout_return(&self, outcome: Query<Option<String>>) -> Html<String> {
        Html(match outcome.0.as_deref() {
            Some("success") => dev::message_page(
                "Thank you",
                "Your payment went through. Your tier changes as soon as the payment \
                 provider confirms it, usually within seconds.",
            ),
            _ => dev::message_page(
                "Checkout cancelled",
                "Nothing was charged and your tier is unchanged.",
            ),
        })
    }
}

/// Opens a checkout of `tier_slug` for `user` at the payment provider and
/// records it: where the user pays. The API and the web console's upgrade
/// both start here.
pub async fn start_checkout(
    state: &AppState,
    user: &scanfleet_core::store::users::User,
    tier_slug: &str,
) -> Result<CheckoutSession> {
    let db = state.db.get().await?;
    let tier = purchasable(&**db, tier_slug).await?;
    let payments = &state.payments;
    payments.ensure_configured()?;
    payments.catalog().price_for(&tier.slug)?;
    if user.tier_slug == "admin" {
        return Err(Error::conflict(
            "admin_tier",
            "accounts on the admin tier have every feature and need no subscription",
        )
        .into());
    }
    let existing = subscriptions::find(&db, user.id).await?;
    if existing.as_ref().is_some_and(|s| s.is_live()) && user.tier_slug != "demo" {
        return Err(Error::conflict(
            "already_subscribed",
            "there is a subscription already: change its tier with POST /subscriptions/upgrade",
        )
        .into());
    }
    // No pooled connection is held while the provider is called.
    drop(db);
    let session = payments
        .create_checkout(&CheckoutRequest {
            user_id: user.id,
            email: &user.email,
            tier_slug: &tier.slug,
            customer_id: existing
                .as_ref()
                .and_then(|s| s.provider_customer_id.as_deref()),
        })
        .await?;
    let db = state.db.get().await?;
    checkouts::create_checkout(
        &**db,
        &session.id,
        user.id,
        &tier.slug,
        payments.provider_name(),
    )
    .await?;
    Ok(session)
}

/// A tier that can be bought, or 422 naming `tier_slug`.
async fn purchasable(db: &impl tokio_postgres::GenericClient, slug: &str) -> Result<Tier> {
    match tiers::get(db, slug).await? {
        Some(tier) if tier.purchasable => Ok(tier),
        Some(_) => Err(Error::invalid(
            "tier_slug",
            format!("the {slug} tier cannot be bought: choose monthly or yearly"),
        )
        .into()),
        None => Err(Error::invalid("tier_slug", "unknown tier: choose monthly or yearly").into()),
    }
}

/// The caller's subscription that the provider still bills, or 409.
async fn live_subscription(
    db: &impl deadpool_postgres::GenericClient,
    me: &Identity,
) -> Result<Subscription> {
    match subscriptions::find(db, me.user.id).await? {
        Some(sub) if sub.is_live() && me.user.tier_slug != "demo" => Ok(sub),
        _ => Err(Error::conflict(
            "no_subscription",
            "there is no active subscription: start one with POST /subscriptions/checkout",
        )
        .into()),
    }
}

/// Applies the provider's answer to our own call and returns the result.
async fn apply_answer(
    state: &AppState,
    user_id: Uuid,
    snap: &Snapshot,
) -> Result<Json<CurrentSubscription>> {
    let applied = scanfleet_core::subscriptions::apply_change(&state.core, user_id, snap).await?;
    Ok(Json(CurrentSubscription::of(
        &applied.tier_slug,
        applied.subscription.as_ref(),
        Utc::now(),
    )))
}

/// The open dev-provider session `id`, or 404 (also when the provider is not
/// the dev stand-in).
async fn dev_checkout(state: &AppState, id: &str) -> Result<checkouts::Checkout> {
    if !state.payments.is_dev() {
        return Err(Error::NotFound("checkout session").into());
    }
    let db = state.db.get().await?;
    let checkout = checkouts::find_checkout(&**db, id)
        .await?
        .filter(|c| c.provider == "dev")
        .ok_or(Error::NotFound("checkout session"))?;
    Ok(checkout)
}
