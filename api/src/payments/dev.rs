//! The local stand-in for the payment provider (`SCANFLEET_PAYMENTS__PROVIDER
//! =dev`, the default in dev mode when no provider key is set; refused in
//! production). Checkout sends the user to a page of the api itself
//! (`/api/v1/subscriptions/dev-checkout/{session_id}`) that completes or
//! abandons it. Completing builds the events the real provider would send
//! (`checkout.session.completed`, then `customer.subscription.created`), in
//! the provider's shapes, signs them with the webhook secret and hands them
//! to the same [`super::webhook::receive`] that real deliveries go through.
//! Upgrade and cancel answer from the subscription row, as the provider
//! would answer from its own.

use chrono::{DateTime, Months, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{CheckoutSession, Snapshot};
use scanfleet_core::store::subscriptions::{Subscription, SubscriptionStatus};

/// Opens a session whose page is served by this api.
pub fn create_checkout(public_url: &str) -> CheckoutSession {
    let id = format!("cs_dev_{}", Uuid::new_v4().simple());
    CheckoutSession {
        url: format!("{public_url}/api/v1/subscriptions/dev-checkout/{id}"),
        id,
    }
}

fn event(kind: &str, created: i64, object: Value) -> Value {
    json!({
        "id": format!("evt_dev_{}", Uuid::new_v4().simple()),
        "object": "event",
        "api_version": super::stripe::API_VERSION,
        "type": kind,
        "created": created,
        "livemode": false,
        "data": {"object": object},
    })
}

/// The provider's subscription object for a new subscription.
#[allow(clippy::too_many_arguments)]
fn subscription_object(
    id: &str,
    customer: &str,
    item: &str,
    price: &str,
    user_id: Uuid,
    tier_slug: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
) -> Value {
    json!({
        "id": id,
        "object": "subscription",
        "customer": customer,
        "status": "active",
        "cancel_at_period_end": false,
        "current_period_start": start.timestamp(),
        "current_period_end": end.timestamp(),
        "items": {"object": "list", "data": [
            {"id": item, "object": "subscription_item", "price": {"id": price, "object": "price"}}
        ]},
        "metadata": {"user_id": user_id.to_string(), "tier_slug": tier_slug},
    })
}

/// The events the provider sends when the user pays for `tier_slug` (billed
/// every `months`) in checkout session `session_id`, at `now`.
pub fn completion_events(
    session_id: &str,
    user_id: Uuid,
    tier_slug: &str,
    price: &str,
    months: u32,
    now: DateTime<Utc>,
) -> Vec<Value> {
    let subscription = format!("sub_dev_{}", Uuid::new_v4().simple());
    let customer = format!("cus_dev_{}", user_id.simple());
    let item = format!("si_dev_{}", Uuid::new_v4().simple());
    let session = json!({
        "id": session_id,
        "object": "checkout.session",
        "mode": "subscription",
        "status": "complete",
        "payment_status": "paid",
        "client_reference_id": user_id.to_string(),
        "customer": customer,
        "subscription": subscription,
        "metadata": {"user_id": user_id.to_string(), "tier_slug": tier_slug},
    });
    let sub = subscription_object(
        &subscription,
        &customer,
        &item,
        price,
        user_id,
        tier_slug,
        now,
        now + Months::new(months),
    );
    vec![
        event("checkout.session.completed", now.timestamp(), session),
        event("customer.subscription.created", now.timestamp(), sub),
    ]
}

fn snapshot_of(sub: &Subscription) -> Snapshot {
    Snapshot {
        subscription_id: sub.provider_subscription_id.clone().unwrap_or_default(),
        customer_id: sub.provider_customer_id.clone(),
        status: sub.status,
        tier_slug: Some(sub.tier_slug.clone()),
        price_id: sub.provider_price_id.clone(),
        item_id: sub.provider_item_id.clone(),
        current_period_start: sub.current_period_start,
        current_period_end: sub.current_period_end,
        cancel_at_period_end: sub.cancel_at_period_end,
        user_id: Some(sub.user_id),
    }
}

/// The subscription on a new price. Proration is the provider's business
/// (an invoice line); the period stays.
pub fn change_price(sub: &Subscription, price: &str, tier_slug: &str) -> Snapshot {
    Snapshot {
        tier_slug: Some(tier_slug.to_string()),
        price_id: Some(price.to_string()),
        status: SubscriptionStatus::Active,
        ..snapshot_of(sub)
    }
}

pub fn cancel_at_period_end(sub: &Subscription) -> Snapshot {
    Snapshot {
        cancel_at_period_end: true,
        ..snapshot_of(sub)
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><style>body{{font-family:sans-serif;max-width:32rem;\
         margin:4rem auto;line-height:1.5}}button{{font-size:1rem;padding:.5rem 1rem;\
         margin-right:.5rem}}</style></head><body>{body}</body></html>",
        title = escape(title)
    )
}

/// The checkout page: what is bought, and the two ways out.
pub fn checkout_page(session_id: &str, tier_name: &str, price: &str) -> String {
    let base = format!("/api/v1/subscriptions/dev-checkout/{}", escape(session_id));
    page(
        "Dev checkout",
        &format!(
            "<h1>Dev checkout</h1><p>This is the local stand-in for the payment \
             provider; nothing is charged.</p><p>Subscribe to <strong>{}</strong> \
             for {}.</p><form method=\"post\" action=\"{base}/complete\" \
             style=\"display:inline\"><button type=\"submit\">Pay and subscribe</button>\
             </form><form method=\"post\" action=\"{base}/abandon\" style=\"display:inline\">\
             <button type=\"submit\">Abandon</button></form>",
            escape(tier_name),
            escape(price)
        ),
    )
}

/// A page with one message (after completing or abandoning).
pub fn message_page(title: &str, message: &str) -> String {
    page(
        title,
        &format!("<h1>{}</h1><p>{}</p>", escape(title), escape(message)),
    )
}
