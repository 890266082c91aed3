//! A client for the parts of Stripe's HTTP API that subscriptions need, and
//! the shapes of the objects it returns.
//!
//! Wire format, as Stripe documents it: `POST` bodies are
//! `application/x-www-form-urlencoded` with nested keys in brackets
//! (`line_items[0][price]`, `metadata[tier_slug]`); the secret key goes in
//! `Authorization: Bearer`; every `POST` carries an `Idempotency-Key`, so a
//! retry after a lost answer cannot act twice; errors come back as
//! `{"error": {"type", "message", "code", "param"}}` with a 4xx or 5xx status.
//! The API version is pinned (`Stripe-Version`) so object shapes do not
//! change under us when the account's default moves.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use scanfleet_common::Secret;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::{Catalog, CheckoutRequest, CheckoutSession, PaymentsError, Snapshot};
use scanfleet_core::store::subscriptions::SubscriptionStatus;

/// The API version whose object shapes [`SubscriptionObject`] reads.
pub const API_VERSION: &str = "2024-06-20";
/// Connecting may take at most this long (and at most the call's timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An error object returned by the provider, with the HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {kind}{}: {message}", code.as_deref().map(|c| format!(" ({c})")).unwrap_or_default())]
pub struct ProviderError {
    pub status: u16,
    /// `type`: `invalid_request_error`, `card_error`, `api_error`, ...
    pub kind: String,
    pub message: String,
    pub code: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ErrorEnvelope {
    error: ErrorObject,
}

#[derive(Debug, Deserialize)]
struct ErrorObject {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
    code: Option<String>,
}

/// Reads an error answer: the provider's error object when there is one.
pub fn parse_error(status: u16, body: &[u8]) -> PaymentsError {
    match serde_json::from_slice::<ErrorEnvelope>(body) {
        Ok(ErrorEnvelope { error }) => PaymentsError::Refused(ProviderError {
            status,
            kind: error.kind.unwrap_or_else(|| "api_error".into()),
            message: error.message.unwrap_or_default(),
            code: error.code,
        }),
        Err(_) => PaymentsError::BadResponse(anyhow::anyhow!(
            "status {status} without an error object: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )),
    }
}

/// A form body with Stripe's bracketed keys, in insertion order.
#[derive(Debug, Default, Clone)]
pub struct Form(Vec<(String, String)>);

impl Form {
    pub fn field(mut self, key: impl Into<String>, value: impl Into<String>) -> Form {
        self.0.push((key.into(), value.into()));
        self
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }
}

/// Provider ids end up in URL paths; refuse anything but Stripe's alphabet.
fn checked_id(id: &str) -> Result<&str, PaymentsError> {
    if !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(id)
    } else {
        Err(PaymentsError::BadResponse(anyhow::anyhow!(
            "`{id}` is not a provider id"
        )))
    }
}

#[derive(Clone)]
pub struct StripeClient {
    /// Built once with the client at start-up: it pools connections to the
    /// provider.
    http: reqwest::Client,
    base: String,
    secret_key: Secret,
    /// A call that has not answered by then is abandoned (503); the
    /// idempotency key makes the user's retry safe.
    timeout: Duration,
}

impl std::fmt::Debug for StripeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl StripeClient {
    pub fn new(base: &str, secret_key: Secret, timeout: Duration) -> StripeClient {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("scanfleet/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the TLS backend initialises");
        StripeClient {
            http,
            base: base.trim_end_matches('/').to_string(),
            secret_key,
            timeout,
        }
    }

    /// `POST {base}{path}` with `form`; one retry, with the same
    /// idempotency key, when the connection could not be made.
    #[tracing::instrument(skip_all, fields(path = %path))]
    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        form: &Form,
        idempotency_key: &str,
    ) -> Result<T, PaymentsError> {
        let send = || {
            self.http
                .post(format!("{}{path}", self.base))
                .timeout(self.timeout)
                .bearer_auth(self.secret_key.expose())
                .header("Stripe-Version", API_VERSION)
                .header("Idempotency-Key", idempotency_key)
                .form(form.pairs())
                .send()
        };
        let resp = match send().await {
            Err(e) if e.is_connect() => send().await,
            other => other,
        }
        .map_err(PaymentsError::Unreachable)?;
        read(resp).await
    }

    #[tracing::instrument(skip_all, fields(path = %path))]
    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, PaymentsError> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .timeout(self.timeout)
            .bearer_auth(self.secret_key.expose())
            .header("Stripe-Version", API_VERSION)
            .send()
            .await
            .map_err(PaymentsError::Unreachable)?;
        read(resp).await
    }

    /// `POST /v1/checkout/sessions` in subscription mode. The user id and
    /// tier go in the session (`client_reference_id`, `metadata`) and in the
    /// subscription it creates (`subscription_data[metadata]`), so every
    /// later event names the user.
    pub async fn create_checkout_session(
        &self,
        req: &CheckoutRequest<'_>,
        price: &str,
        success_url: &str,
        cancel_url: &str,
    ) -> Result<CheckoutSession, PaymentsError> {
        let user = req.user_id.to_string();
        let mut form = Form::default()
            .field("mode", "subscription")
            .field("line_items[0][price]", price)
            .field("line_items[0][quantity]", "1")
            .field("success_url", success_url)
            .field("cancel_url", cancel_url)
            .field("client_reference_id", &user)
            .field("metadata[user_id]", &user)
            .field("metadata[tier_slug]", req.tier_slug)
            .field("subscription_data[metadata][user_id]", &user)
            .field("subscription_data[metadata][tier_slug]", req.tier_slug);
        form = match req.customer_id {
            Some(customer) => form.field("customer", customer),
            None => form.field("customer_email", req.email),
        };
        let session: SessionObject = self
            .post(
                "/v1/checkout/sessions",
                &form,
                &format!("checkout-{user}-{}", Uuid::new_v4()),
            )
            .await?;
        let url = session.url.ok_or_else(|| {
            PaymentsError::BadResponse(anyhow::anyhow!("checkout session without a url"))
        })?;
        Ok(CheckoutSession {
            id: session.id,
            url,
        })
    }

    /// `GET /v1/subscriptions/{id}`.
    pub async fn retrieve_subscription(
        &self,
        subscription_id: &str,
        catalog: &Catalog,
    ) -> Result<Snapshot, PaymentsError> {
        let id = checked_id(subscription_id)?;
        let sub: SubscriptionObject = self.get(&format!("/v1/subscriptions/{id}")).await?;
        sub.snapshot(catalog)
    }

    /// `POST /v1/subscriptions/{id}`: the item's price becomes `price`, with
    /// `proration_behavior=create_prorations` (the unused part of the period
    /// is credited, the new price charged for the rest of it).
    pub async fn change_price(
        &self,
        subscription_id: &str,
        item_id: &str,
        price: &str,
        tier_slug: &str,
        user_id: Uuid,
        catalog: &Catalog,
    ) -> Result<Snapshot, PaymentsError> {
        let id = checked_id(subscription_id)?;
        let form = Form::default()
            .field("items[0][id]", item_id)
            .field("items[0][price]", price)
            .field("proration_behavior", "create_prorations")
            .field("metadata[user_id]", user_id.to_string())
            .field("metadata[tier_slug]", tier_slug);
        let sub: SubscriptionObject = self
            .post(
                &format!("/v1/subscriptions/{id}"),
                &form,
                &format!("upgrade-{id}-{price}-{}", Uuid::new_v4()),
            )
            .await?;
        sub.snapshot(catalog)
    }

    /// `POST /v1/subscriptions/{id}` with `cancel_at_period_end=true`.
    pub async fn cancel_at_period_end(
        &self,
        subscription_id: &str,
        catalog: &Catalog,
    ) -> Result<Snapshot, PaymentsError> {
        let id = checked_id(subscription_id)?;
        let form = Form::default().field("cancel_at_period_end", "true");
        let sub: SubscriptionObject = self
            .post(
                &format!("/v1/subscriptions/{id}"),
                &form,
                &format!("cancel-{id}-{}", Uuid::new_v4()),
            )
            .await?;
        sub.snapshot(catalog)
    }
}

async fn read<T: DeserializeOwned>(resp: reqwest::Response) -> Result<T, PaymentsError> {
    let status = resp.status();
    let body = resp.bytes().await.map_err(PaymentsError::Unreachable)?;
    if !status.is_success() {
        return Err(parse_error(status.as_u16(), &body));
    }
    serde_json::from_slice(&body).map_err(|e| PaymentsError::BadResponse(e.into()))
}

/// The id of a field that is either an id or an expanded object.
pub fn id_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("id").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

fn timestamp(secs: i64) -> Result<DateTime<Utc>, PaymentsError> {
    Utc.timestamp_opt(secs, 0).single().ok_or_else(|| {
        PaymentsError::BadResponse(anyhow::anyhow!("`{secs}` is not a unix timestamp"))
    })
}

/// A checkout session object (`cs_...`).
#[derive(Debug, Clone, Deserialize)]
pub struct SessionObject {
    pub id: String,
    pub url: Option<String>,
    pub client_reference_id: Option<String>,
    #[serde(default)]
    pub customer: Value,
    #[serde(default)]
    pub subscription: Value,
    #[serde(default)]
    pub metadata: HashMap<String, String>,
}

/// A subscription object (`sub_...`).
#[derive(Debug, Clone, Deserialize)]
pub struct SubscriptionObject {
    pub id: String,
    #[serde(default)]
    pub customer: Value,
    pub status: String,
    #[serde(default)]
    pub cancel_at_period_end: bool,
    /// Top level up to API version 2025-03-31; on the items after it.
    pub current_period_start: Option<i64>,
    pub current_period_end: Option<i64>,
    pub items: ItemList,
    #[serde(default)]
    pub metadata: HashMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ItemList {
    pub data: Vec<ItemObject>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ItemObject {
    pub id: String,
    pub price: PriceObject,
    pub current_period_start: Option<i64>,
    pub current_period_end: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PriceObject {
    pub id: String,
}

/// The provider's subscription statuses, folded into ours: paying (or in a
/// trial) is active; payment trouble keeps the tier while the provider
/// retries; ended is canceled.
pub fn status_of(provider_status: &str) -> Result<SubscriptionStatus, PaymentsError> {
    Ok(match provider_status {
        "active" | "trialing" => SubscriptionStatus::Active,
        "past_due" | "unpaid" | "incomplete" | "paused" => SubscriptionStatus::PastDue,
        "canceled" | "incomplete_expired" => SubscriptionStatus::Canceled,
        other => {
            return Err(PaymentsError::BadResponse(anyhow::anyhow!(
                "unknown subscription status `{other}`"
            )))
        }
    })
}

impl SubscriptionObject {
    /// What this object says, in our terms; the tier comes from the price,
    /// else from the metadata we set.
    pub fn snapshot(&self, catalog: &Catalog) -> Result<Snapshot, PaymentsError> {
        let item = self.items.data.first();
        let start = self
            .current_period_start
            .or(item.and_then(|i| i.current_period_start));
        let end = self
            .current_period_end
            .or(item.and_then(|i| i.current_period_end));
        let (Some(start), Some(end)) = (start, end) else {
            return Err(PaymentsError::BadResponse(anyhow::anyhow!(
                "subscription {} has no current period",
                self.id
            )));
        };
        let price_id = item.map(|i| i.price.id.clone());
        let tier_slug = price_id
            .as_deref()
            .and_then(|p| catalog.tier_for(p))
            .map(str::to_string)
            .or_else(|| {
                self.metadata
                    .get("tier_slug")
                    .filter(|t| matches!(t.as_str(), "monthly" | "yearly"))
                    .cloned()
            });
        Ok(Snapshot {
            subscription_id: self.id.clone(),
            customer_id: id_of(&self.customer),
            status: status_of(&self.status)?,
            tier_slug,
            price_id,
            item_id: item.map(|i| i.id.clone()),
            current_period_start: timestamp(start)?,
            current_period_end: timestamp(end)?,
            cancel_at_period_end: self.cancel_at_period_end,
            user_id: self.metadata.get("user_id").and_then(|u| u.parse().ok()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        Catalog {
            monthly: Some("price_m".into()),
            yearly: Some("price_y".into()),
        }
    }

    #[test]
    fn an_error_object_keeps_its_type_message_and_code() {
        let body = br#"{"error":{"type":"invalid_request_error","message":"No such price: 'price_x'","code":"resource_missing","param":"line_items[0][price]"}}"#;
        match parse_error(400, body) {
            PaymentsError::Refused(e) => {
                assert_eq!(e.status, 400);
                assert_eq!(e.kind, "invalid_request_error");
                assert_eq!(e.code.as_deref(), Some("resource_missing"));
                assert!(e.to_string().contains("No such price"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_error(502, b"<html>bad gateway</html>"),
            PaymentsError::BadResponse(_)
        ));
    }

    #[test]
    fn a_subscription_object_reads_as_a_snapshot_with_the_tier_of_its_price() {
        let user = Uuid::new_v4();
        let sub: SubscriptionObject = serde_json::from_value(json!({
            "id": "sub_1", "object": "subscription", "customer": "cus_1",
            "status": "trialing", "cancel_at_period_end": true,
            "current_period_start": 1_700_000_000, "current_period_end": 1_702_592_000,
            "items": {"object": "list", "data": [
                {"id": "si_1", "object": "subscription_item", "price": {"id": "price_y", "object": "price"}}
            ]},
            "metadata": {"user_id": user.to_string(), "tier_slug": "monthly"}
        }))
        .unwrap();
        let snap = sub.snapshot(&catalog()).unwrap();
        assert_eq!(snap.tier_slug.as_deref(), Some("yearly"));
        assert_eq!(snap.status, SubscriptionStatus::Active);
        assert_eq!(snap.item_id.as_deref(), Some("si_1"));
        assert_eq!(snap.customer_id.as_deref(), Some("cus_1"));
        assert_eq!(snap.user_id, Some(user));
        assert!(snap.cancel_at_period_end);
        assert_eq!(snap.current_period_start.timestamp(), 1_700_000_000);
    }

    #[test]
    fn newer_api_versions_put_the_period_on_the_item() {
        let sub: SubscriptionObject = serde_json::from_value(json!({
            "id": "sub_1", "customer": {"id": "cus_9", "object": "customer"}, "status": "past_due",
            "items": {"data": [{"id": "si_1", "price": {"id": "price_other"},
                                "current_period_start": 10, "current_period_end": 20}]},
            "metadata": {"tier_slug": "monthly"}
        }))
        .unwrap();
        let snap = sub.snapshot(&catalog()).unwrap();
        assert_eq!(snap.current_period_end.timestamp(), 20);
        assert_eq!(snap.customer_id.as_deref(), Some("cus_9"));
        assert_eq!(snap.status, SubscriptionStatus::PastDue);
        // Unknown price: the tier we wrote in the metadata.
        assert_eq!(snap.tier_slug.as_deref(), Some("monthly"));
    }
}
