//! Payments: subscriptions bought and changed through an external provider
//! that speaks Stripe's HTTP API (Stripe itself, or anything at
//! `SCANFLEET_PAYMENTS__API_BASE` that speaks it), and the signed webhook
//! events through which the provider tells us what happened.
//!
//! The provider is the system of record for money; Postgres mirrors what it
//! reports (`store::subscriptions`). Our own calls (upgrade, cancel) apply the
//! provider's answer at once; everything else (a completed checkout, a
//! renewal, a failed payment, the end of a subscription) arrives as a webhook
//! event, applied once per event id and never over a newer change.
//!
//! Nothing outside this module knows which provider it is: routes call
//! [`Payments`] and get provider-neutral [`Snapshot`]s.
//!
//! # Layout
//! - [`stripe`]: the HTTP client (form-encoded bodies, bearer secret key,
//!   idempotency keys, error objects) and the provider's object shapes.
//! - [`signature`]: the `Stripe-Signature` HMAC scheme.
//! - [`events`]: webhook event parsing.
//! - [`webhook`]: verifying and applying an event (one transaction).
//! - [`dev`]: the local stand-in used in dev mode when no provider key is
//!   configured: a checkout page served by the api itself that sends the
//!   service the same signed events.

pub mod dev;
pub mod events;
pub mod signature;
pub mod stripe;
pub mod webhook;

use scanfleet_common::settings::PaymentProvider;
use scanfleet_common::{Secret, Settings};
use uuid::Uuid;

pub use self::signature::SignatureError;
pub use self::stripe::ProviderError;
pub use scanfleet_core::store::subscriptions::Snapshot;
use scanfleet_core::store::subscriptions::Subscription;

/// What can go wrong talking to the provider or reading its events. The
/// api's error table maps these to 400, 502 and 503.
#[derive(Debug, thiserror::Error)]
pub enum PaymentsError {
    /// The provider (or one price) is not configured: 503.
    #[error("payments are not configured: {0}")]
    NotConfigured(&'static str),
    /// No answer: connection refused, timeout, TLS failure: 503.
    #[error("the payment provider cannot be reached")]
    Unreachable(#[source] reqwest::Error),
    /// The provider answered with an error object: 502 (503 when it says it
    /// is overloaded or failing itself).
    #[error("the payment provider refused the request")]
    Refused(#[source] ProviderError),
    /// The provider answered with something we cannot read: 502.
    #[error("the payment provider's answer cannot be read")]
    BadResponse(#[source] anyhow::Error),
    /// A webhook delivery whose signature does not check out: 400.
    #[error("webhook signature refused")]
    BadSignature(#[from] SignatureError),
    /// A signed webhook delivery that is not a provider event: 400.
    #[error("the webhook payload is not a provider event")]
    BadEvent(#[source] serde_json::Error),
    /// A broken assumption of our own: 500.
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl PaymentsError {
    /// Whether retrying later may succeed (the provider is down or busy).
    pub fn is_unavailable(&self) -> bool {
        match self {
            PaymentsError::NotConfigured(_) | PaymentsError::Unreachable(_) => true,
            PaymentsError::Refused(e) => e.status == 429 || e.status >= 500,
            _ => false,
        }
    }
}

/// The payments rows of the error table: each kind onto the core's general
/// kinds, with its own problem `code`.
impl From<PaymentsError> for crate::error::ApiError {
    fn from(e: PaymentsError) -> Self {
        crate::error::ApiError(e.into())
    }
}

impl From<PaymentsError> for scanfleet_core::Error {
    fn from(e: PaymentsError) -> Self {
        use scanfleet_core::Error;
        // The problem's detail says the cause too, as it always did.
        let detail = scanfleet_common::chain::Chain(&e).to_string();
        match e {
            PaymentsError::NotConfigured(_) => Error::Unavailable {
                code: "payments_not_configured",
                detail,
                source: None,
            },
            PaymentsError::BadSignature(_) => Error::BadRequest {
                code: "invalid_signature",
                detail,
            },
            PaymentsError::BadEvent(_) => Error::BadRequest {
                code: "invalid_event",
                detail,
            },
            PaymentsError::Unexpected(e) => Error::Unexpected(e),
            e if e.is_unavailable() => Error::Unavailable {
                code: "payment_provider_unavailable",
                detail,
                source: Some(Box::new(e)),
            },
            e => Error::BadGateway {
                code: "payment_provider_error",
                detail,
                source: Some(Box::new(e)),
            },
        }
    }
}

/// The price ids of the purchasable tiers.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub monthly: Option<String>,
    pub yearly: Option<String>,
}

impl Catalog {
    /// The price of a purchasable tier.
    pub fn price_for(&self, tier_slug: &str) -> Result<&str, PaymentsError> {
        let (price, variable) = match tier_slug {
            "monthly" => (
                &self.monthly,
                "SCANFLEET_PAYMENTS__PRICE_MONTHLY is not set",
            ),
            "yearly" => (&self.yearly, "SCANFLEET_PAYMENTS__PRICE_YEARLY is not set"),
            _ => return Err(PaymentsError::NotConfigured("no price for this tier")),
        };
        price
            .as_deref()
            .ok_or(PaymentsError::NotConfigured(variable))
    }

    /// The tier a price stands for, when it is one of ours.
    pub fn tier_for(&self, price_id: &str) -> Option<&'static str> {
        if self.monthly.as_deref() == Some(price_id) {
            Some("monthly")
        } else if self.yearly.as_deref() == Some(price_id) {
            Some("yearly")
        } else {
            None
        }
    }
}

/// Which provider answers.
#[derive(Debug, Clone)]
enum Backend {
    Stripe(stripe::StripeClient),
    Dev,
    /// Payments cannot work; every payment operation is a 503 saying why.
    Unconfigured(&'static str),
}

/// A checkout session opened at the provider.
#[derive(Debug, Clone)]
pub struct CheckoutSession {
    pub id: String,
    /// Where the user pays.
    pub url: String,
}

/// Who buys what, for [`Payments::create_checkout`].
#[derive(Debug, Clone)]
pub struct CheckoutRequest<'a> {
    pub user_id: Uuid,
    pub email: &'a str,
    pub tier_slug: &'a str,
    /// The provider customer of an earlier subscription, reused.
    pub customer_id: Option<&'a str>,
}

/// The configured payment provider, built once at start-up
/// ([`Payments::from_settings`]) and carried in the api's state: the HTTP
/// client inside pools its connections to the provider.
#[derive(Debug, Clone)]
pub struct Payments {
    backend: Backend,
    catalog: Catalog,
    webhook_secret: Result<Secret, &'static str>,
    public_url: String,
}

/// Price ids of the dev stand-in when none are configured.
pub const DEV_PRICE_MONTHLY: &str = "price_dev_monthly";
pub const DEV_PRICE_YEARLY: &str = "price_dev_yearly";

/// The dev stand-in's webhook signing secret when none is configured:
/// random, made once with the process's [`Payments`] (the stand-in is the
/// only sender).
fn dev_webhook_secret() -> Secret {
    Secret::new(crate::auth::tokens::random_token("whsec_dev_"))
}

impl Payments {
    pub fn from_settings(settings: &Settings) -> Payments {
        let p = &settings.payments;
        let configured = Catalog {
            monthly: p.price_monthly.clone(),
            yearly: p.price_yearly.clone(),
        };
        let (backend, catalog, webhook_secret) = match p.provider {
            PaymentProvider::Dev => (
                Backend::Dev,
                Catalog {
                    monthly: configured.monthly.or(Some(DEV_PRICE_MONTHLY.into())),
                    yearly: configured.yearly.or(Some(DEV_PRICE_YEARLY.into())),
                },
                Ok(p.webhook_secret.clone().unwrap_or_else(dev_webhook_secret)),
            ),
            PaymentProvider::Stripe => (
                match &p.secret_key {
                    Some(key) => Backend::Stripe(stripe::StripeClient::new(
                        &p.api_base,
                        key.clone(),
                        std::time::Duration::from_secs(p.timeout_secs),
                    )),
                    None => Backend::Unconfigured("SCANFLEET_PAYMENTS__SECRET_KEY is not set"),
                },
                configured,
                p.webhook_secret
                    .clone()
                    .ok_or("SCANFLEET_PAYMENTS__WEBHOOK_SECRET is not set"),
            ),
        };
        Payments {
            backend,
            catalog,
            webhook_secret,
            public_url: settings.api.public_url.clone(),
        }
    }

    /// `stripe` or `dev`, as stored with checkout sessions.
    pub fn provider_name(&self) -> &'static str {
        match self.backend {
            Backend::Dev => "dev",
            _ => "stripe",
        }
    }

    pub fn is_dev(&self) -> bool {
        matches!(self.backend, Backend::Dev)
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn webhook_secret(&self) -> Result<&Secret, PaymentsError> {
        self.webhook_secret
            .as_ref()
            .map_err(|why| PaymentsError::NotConfigured(why))
    }

    /// Fails with 503 when payment operations cannot work at all.
    pub fn ensure_configured(&self) -> Result<(), PaymentsError> {
        match self.backend {
            Backend::Unconfigured(why) => Err(PaymentsError::NotConfigured(why)),
            _ => Ok(()),
        }
    }

    /// Where the provider sends the user after paying or giving up.
    fn return_url(&self, outcome: &str) -> String {
        format!(
            "{}/api/v1/subscriptions/checkout/return?outcome={outcome}",
            self.public_url
        )
    }

    /// Opens a checkout session in subscription mode for the tier's price.
    pub async fn create_checkout(
        &self,
        req: &CheckoutRequest<'_>,
    ) -> Result<CheckoutSession, PaymentsError> {
        let price = self.catalog.price_for(req.tier_slug)?;
        match &self.backend {
            Backend::Stripe(client) => {
                client
                    .create_checkout_session(
                        req,
                        price,
                        &self.return_url("success"),
                        &self.return_url("canceled"),
                    )
                    .await
            }
            Backend::Dev => Ok(dev::create_checkout(&self.public_url)),
            Backend::Unconfigured(why) => Err(PaymentsError::NotConfigured(why)),
        }
    }

    /// Moves `sub` to the tier's price, prorating the current period.
    pub async fn change_tier(
        &self,
        sub: &Subscription,
        tier_slug: &str,
    ) -> Result<Snapshot, PaymentsError> {
        let price = self.catalog.price_for(tier_slug)?;
        let subscription_id = live_id(sub)?;
        match &self.backend {
            Backend::Stripe(client) => {
                // A subscription known only from its checkout has no item id
                // yet: ask the provider for it.
                let item_id = match &sub.provider_item_id {
                    Some(id) => id.clone(),
                    None => client
                        .retrieve_subscription(subscription_id, &self.catalog)
                        .await?
                        .item_id
                        .ok_or_else(|| {
                            PaymentsError::BadResponse(anyhow::anyhow!(
                                "subscription {subscription_id} has no items"
                            ))
                        })?,
                };
                client
                    .change_price(
                        subscription_id,
                        &item_id,
                        price,
                        tier_slug,
                        sub.user_id,
                        &self.catalog,
                    )
                    .await
            }
            Backend::Dev => Ok(dev::change_price(sub, price, tier_slug)),
            Backend::Unconfigured(why) => Err(PaymentsError::NotConfigured(why)),
        }
    }

    /// Cancels `sub` at the end of its current period.
    pub async fn cancel_at_period_end(
        &self,
        sub: &Subscription,
    ) -> Result<Snapshot, PaymentsError> {
        let subscription_id = live_id(sub)?;
        match &self.backend {
            Backend::Stripe(client) => {
                client
                    .cancel_at_period_end(subscription_id, &self.catalog)
                    .await
            }
            Backend::Dev => Ok(dev::cancel_at_period_end(sub)),
            Backend::Unconfigured(why) => Err(PaymentsError::NotConfigured(why)),
        }
    }
}

/// The provider id of a subscription the caller checked is live.
fn live_id(sub: &Subscription) -> Result<&str, PaymentsError> {
    sub.provider_subscription_id.as_deref().ok_or_else(|| {
        PaymentsError::Unexpected(anyhow::anyhow!(
            "subscription of user {} has no provider id",
            sub.user_id
        ))
    })
}
