//! Webhook events: the envelope (`id`, `type`, `created`, `data.object`) and
//! the four kinds that move a subscription. Other kinds are acknowledged and
//! ignored, so the provider can be set to send more without harm.

use chrono::{DateTime, TimeZone, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::stripe::{id_of, SessionObject, SubscriptionObject};
use super::{Catalog, PaymentsError, Snapshot};

/// An event as delivered.
#[derive(Debug, Deserialize)]
struct Envelope {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    created: i64,
    data: Data,
}

#[derive(Debug, Deserialize)]
struct Data {
    object: Value,
}

/// A verified event, parsed.
#[derive(Debug)]
pub struct Event {
    /// `evt_...`: the idempotency key of the delivery.
    pub id: String,
    /// The event type as sent (`customer.subscription.updated`, ...).
    pub kind_name: String,
    /// When the provider created it: the order of changes.
    pub created: DateTime<Utc>,
    pub kind: EventKind,
}

#[derive(Debug)]
pub enum EventKind {
    /// `checkout.session.completed`: the user paid.
    CheckoutCompleted(CheckoutCompleted),
    /// `customer.subscription.created`, `.updated` and `.deleted`: the
    /// subscription as it is now.
    SubscriptionChanged(Snapshot),
    /// `invoice.payment_failed`: a payment of this subscription failed.
    PaymentFailed { subscription_id: Option<String> },
    /// Anything else.
    Ignored,
}

#[derive(Debug, Clone)]
pub struct CheckoutCompleted {
    pub session_id: String,
    /// `client_reference_id`: our user id.
    pub client_reference_id: Option<String>,
    pub tier_slug: Option<String>,
    pub customer_id: Option<String>,
    pub subscription_id: Option<String>,
}

/// An invoice (`in_...`); the subscription moved under `parent` in newer
/// API versions.
#[derive(Debug, Deserialize)]
struct InvoiceObject {
    #[serde(default)]
    subscription: Value,
    #[serde(default)]
    parent: Value,
}

fn bad(e: impl std::fmt::Display) -> PaymentsError {
    PaymentsError::BadEvent(serde::de::Error::custom(e))
}

/// Parses a verified payload.
pub fn parse(body: &[u8], catalog: &Catalog) -> Result<Event, PaymentsError> {
    let env: Envelope = serde_json::from_slice(body).map_err(PaymentsError::BadEvent)?;
    let created = Utc
        .timestamp_opt(env.created, 0)
        .single()
        .ok_or_else(|| bad("`created` is not a unix timestamp"))?;
    let kind = match env.kind.as_str() {
        "checkout.session.completed" => {
            let s: SessionObject =
                serde_json::from_value(env.data.object).map_err(PaymentsError::BadEvent)?;
            EventKind::CheckoutCompleted(CheckoutCompleted {
                session_id: s.id,
                client_reference_id: s.client_reference_id,
                tier_slug: s.metadata.get("tier_slug").cloned(),
                customer_id: id_of(&s.customer),
                subscription_id: id_of(&s.subscription),
            })
        }
        "customer.subscription.created"
        | "customer.subscription.updated"
        | "customer.subscription.deleted" => {
            let s: SubscriptionObject =
                serde_json::from_value(env.data.object).map_err(PaymentsError::BadEvent)?;
            let mut snap = s.snapshot(catalog).map_err(bad)?;
            if env.kind == "customer.subscription.deleted" {
                // The object of a deletion says `canceled` already; be sure.
                snap.status = scanfleet_core::store::subscriptions::SubscriptionStatus::Canceled;
            }
            EventKind::SubscriptionChanged(snap)
        }
        "invoice.payment_failed" => {
            let inv: InvoiceObject =
                serde_json::from_value(env.data.object).map_err(PaymentsError::BadEvent)?;
            let subscription_id = id_of(&inv.subscription)
                .or_else(|| id_of(&inv.parent["subscription_details"]["subscription"]));
            EventKind::PaymentFailed { subscription_id }
        }
        _ => EventKind::Ignored,
    };
    Ok(Event {
        id: env.id,
        kind_name: env.kind,
        created,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_invoice_names_its_subscription_in_either_api_version() {
        let catalog = Catalog::default();
        for object in [
            json!({"id": "in_1", "object": "invoice", "subscription": "sub_1"}),
            json!({"id": "in_1", "object": "invoice",
                   "parent": {"subscription_details": {"subscription": "sub_1"}}}),
        ] {
            let body = json!({"id": "evt_1", "type": "invoice.payment_failed",
                              "created": 1_700_000_000, "data": {"object": object}});
            let event = parse(body.to_string().as_bytes(), &catalog).unwrap();
            assert!(matches!(
                event.kind,
                EventKind::PaymentFailed { subscription_id: Some(ref s) } if s == "sub_1"
            ));
        }
    }

    #[test]
    fn other_event_types_are_ignored_and_garbage_is_refused() {
        let body = json!({"id": "evt_2", "type": "customer.created", "created": 1,
                          "data": {"object": {"id": "cus_1"}}});
        let event = parse(body.to_string().as_bytes(), &Catalog::default()).unwrap();
        assert!(matches!(event.kind, EventKind::Ignored));
        assert!(matches!(
            parse(b"{\"hello\":1}", &Catalog::default()),
            Err(PaymentsError::BadEvent(_))
        ));
    }
}
