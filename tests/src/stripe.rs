//! A local HTTP server that speaks Stripe's protocol for the calls the api
//! makes (checkout sessions, subscription retrieve and update), records
//! every request it gets, answers with objects shaped like Stripe's, and
//! builds and signs the webhook events Stripe would send.
//!
//! Signatures are made with the `hmac` crate, independently of the api's own
//! HMAC code, so a bug there cannot cancel itself out.

use std::collections::HashMap;
use std::net::TcpListener as StdTcpListener;
use std::sync::{Arc, Mutex};

use chrono::{Duration, Utc};
use hmac::{KeyInit, Mac};
use poem::http::StatusCode;
use poem::listener::TcpAcceptor;
use poem::web::{Data, Form, Path};
use poem::{get, handler, post, EndpointExt, Request, Response, Route, Server};
use serde_json::{json, Value};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::{Reply, TestApp};

pub const SECRET_KEY: &str = "sk_test_fake_4eC39HqLyjWDarjtT1zdp7dc";
pub const WEBHOOK_SECRET: &str = "whsec_test_fake_secret";
pub const PRICE_MONTHLY: &str = "price_test_monthly";
pub const PRICE_YEARLY: &str = "price_test_yearly";

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub idempotency_key: Option<String>,
    pub content_type: Option<String>,
    /// The decoded form body, in order.
    pub form: Vec<(String, String)>,
}

impl Recorded {
    pub fn field(&self, key: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// How the fake answers API calls.
#[derive(Debug, Clone)]
pub enum Behaviour {
    Normal,
    /// Every API call fails with this status and Stripe error object.
    Fail(u16, Value),
    /// Every API call answers only after this long (a provider that hangs).
    Hang(std::time::Duration),
}

#[derive(Default)]
struct Inner {
    requests: Vec<Recorded>,
    /// checkout session id -> (user id, tier slug, price).
    sessions: HashMap<String, (String, String, String)>,
    subscriptions: HashMap<String, Value>,
    behaviour: Option<Behaviour>,
    /// Length of the billing periods it creates.
    period: Option<Duration>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Inner>>);

pub struct FakeStripe {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    shared: Shared,
    _shutdown: oneshot::Sender<()>,
}

fn stripe_error(status: u16, kind: &str, message: &str, code: Option<&str>) -> Response {
    let body = json!({"error": {"type": kind, "message": message, "code": code}});
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .content_type("application/json")
        .body(body.to_string())
}

fn json_response(v: &Value) -> Response {
    Response::builder()
        .content_type("application/json")
        .body(v.to_string())
}

/// Records the request; returns the error answer when the fake is failing
/// or the credentials are wrong.
fn record(shared: &Shared, req: &Request, form: &[(String, String)]) -> Option<Response> {
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut inner = shared.0.lock().unwrap();
    inner.requests.push(Recorded {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        authorization: header("authorization"),
        idempotency_key: header("idempotency-key"),
        content_type: header("content-type"),
        form: form.to_vec(),
    });
    if let Some(Behaviour::Fail(status, body)) = &inner.behaviour {
        return Some(
            Response::builder()
                .status(StatusCode::from_u16(*status).unwrap())
                .content_type("application/json")
                .body(body.to_string()),
        );
    }
    if header("authorization").as_deref() != Some(&format!("Bearer {SECRET_KEY}")) {
        return Some(stripe_error(
            401,
            "invalid_request_error",
            "Invalid API Key provided",
            None,
        ));
    }
    None
}

fn get_field<'a>(form: &'a [(String, String)], key: &str) -> Option<&'a str> {
    form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Waits first when the fake is set to hang.
async fn maybe_hang(shared: &Shared) {
    let hang = match shared.0.lock().unwrap().behaviour {
        Some(Behaviour::Hang(d)) => Some(d),
        _ => None,
    };
    if let Some(d) = hang {
        tokio::time::sleep(d).await;
    }
}

#[handler]
async fn create_session(
    req: &Request,
    Form(form): Form<Vec<(String, String)>>,
    Data(shared): Data<&Shared>,
) -> Response {
    maybe_hang(shared).await;
    if let Some(r) = record(shared, req, &form) {
        return r;
    }
    let price = get_field(&form, "line_items[0][price]").unwrap_or_default();
    if ![PRICE_MONTHLY, PRICE_YEARLY].contains(&price) {
        return stripe_error(
            400,
            "invalid_request_error",
            &format!("No such price: '{price}'"),
            Some("resource_missing"),
        );
    }
    let id = format!("cs_test_{}", Uuid::new_v4().simple());
    let user = get_field(&form, "client_reference_id")
        .unwrap_or_default()
        .to_string();
    let tier = get_field(&form, "metadata[tier_slug]")
        .unwrap_or_default()
        .to_string();
    shared
        .0
        .lock()
        .unwrap()
        .sessions
        .insert(id.clone(), (user.clone(), tier, price.to_string()));
    json_response(&json!({
        "id": id,
        "object": "checkout.session",
        "mode": "subscription",
        "status": "open",
        "payment_status": "unpaid",
        "client_reference_id": user,
        "customer": null,
        "subscription": null,
        "url": format!("https://checkout.stripe.test/c/pay/{id}"),
        "metadata": {},
    }))
}

#[handler]
async fn retrieve_subscription(
    req: &Request,
    Path(id): Path<String>,
    Data(shared): Data<&Shared>,
) -> Response {
    maybe_hang(shared).await;
    if let Some(r) = record(shared, req, &[]) {
        return r;
    }
    match shared.0.lock().unwrap().subscriptions.get(&id) {
        Some(sub) => json_response(sub),
        None => stripe_error(
            404,
            "invalid_request_error",
            &format!("No such subscription: '{id}'"),
            Some("resource_missing"),
        ),
    }
}

#[handler]
async fn update_subscription(
    req: &Request,
    Path(id): Path<String>,
    Form(form): Form<Vec<(String, String)>>,
    Data(shared): Data<&Shared>,
) -> Response {
    maybe_hang(shared).await;
    if let Some(r) = record(shared, req, &form) {
        return r;
    }
    let mut inner = shared.0.lock().unwrap();
    let Some(sub) = inner.subscriptions.get_mut(&id) else {
        return stripe_error(
            404,
            "invalid_request_error",
            &format!("No such subscription: '{id}'"),
            Some("resource_missing"),
        );
    };
    if let Some(price) = get_field(&form, "items[0][price]") {
        let item = get_field(&form, "items[0][id]").unwrap_or_default();
        if sub["items"]["data"][0]["id"] != item {
            return stripe_error(
                400,
                "invalid_request_error",
                "No such subscription item",
                Some("resource_missing"),
            );
        }
        sub["items"]["data"][0]["price"] = json!({"id": price, "object": "price"});
    }
    if get_field(&form, "cancel_at_period_end") == Some("true") {
        sub["cancel_at_period_end"] = json!(true);
    }
    for (k, v) in &form {
        if let Some(key) = k
            .strip_prefix("metadata[")
            .and_then(|k| k.strip_suffix(']'))
        {
            sub["metadata"][key] = json!(v);
        }
    }
    json_response(sub)
}

/// HMAC-SHA256 signature header, as Stripe makes it.
pub fn signature_header(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2_sig::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// A webhook event envelope.
pub fn event(kind: &str, created: i64, object: Value) -> Value {
    json!({
        "id": format!("evt_{}", Uuid::new_v4().simple()),
        "object": "event",
        "api_version": "2024-06-20",
        "type": kind,
        "created": created,
        "livemode": false,
        "pending_webhooks": 1,
        "data": {"object": object},
    })
}

impl FakeStripe {
    pub async fn start() -> FakeStripe {
        let shared = Shared::default();
        let listener = StdTcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = TcpAcceptor::from_std(listener).unwrap();
        let app = Route::new()
            .at("/v1/checkout/sessions", post(create_session))
            .at(
                "/v1/subscriptions/:id",
                get(retrieve_subscription).post(update_subscription),
            )
            .data(shared.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(
            Server::new_with_acceptor(acceptor).run_with_graceful_shutdown(
                app,
                async move {
                    let _ = rx.await;
                },
                None,
            ),
        );
        FakeStripe {
            base: format!("http://127.0.0.1:{port}"),
            shared,
            _shutdown: tx,
        }
    }

    /// The settings that point an app at this fake.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SCANFLEET_PAYMENTS__PROVIDER", "stripe".into()),
            ("SCANFLEET_PAYMENTS__API_BASE", self.base.clone()),
            ("SCANFLEET_PAYMENTS__SECRET_KEY", SECRET_KEY.into()),
            ("SCANFLEET_PAYMENTS__WEBHOOK_SECRET", WEBHOOK_SECRET.into()),
            ("SCANFLEET_PAYMENTS__PRICE_MONTHLY", PRICE_MONTHLY.into()),
            ("SCANFLEET_PAYMENTS__PRICE_YEARLY", PRICE_YEARLY.into()),
        ]
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.0.lock().unwrap().requests.clone()
    }

    pub fn last_request(&self) -> Recorded {
        self.requests().last().cloned().expect("a recorded request")
    }

    pub fn set_behaviour(&self, behaviour: Behaviour) {
        self.shared.0.lock().unwrap().behaviour = Some(behaviour);
    }

    /// Billing periods of subscriptions created from now on.
    pub fn set_period(&self, period: Duration) {
        self.shared.0.lock().unwrap().period = Some(period);
    }

    pub fn subscription(&self, id: &str) -> Value {
        self.shared.0.lock().unwrap().subscriptions[id].clone()
    }

    /// The user pays for checkout session `session_id`: the subscription
    /// now exists, and the events Stripe sends are returned
    /// (`checkout.session.completed`, `customer.subscription.created`).
    pub fn complete_checkout(&self, session_id: &str) -> (String, Vec<Value>) {
        let mut inner = self.shared.0.lock().unwrap();
        let (user, tier, price) = inner.sessions[session_id].clone();
        let now = Utc::now();
        let end = now + inner.period.unwrap_or(Duration::days(30));
        let sub_id = format!("sub_{}", Uuid::new_v4().simple());
        let customer = format!("cus_{}", Uuid::new_v4().simple());
        let sub = json!({
            "id": sub_id,
            "object": "subscription",
            "customer": customer,
            "status": "active",
            "cancel_at_period_end": false,
            "current_period_start": now.timestamp(),
            "current_period_end": end.timestamp(),
            "items": {"object": "list", "data": [{
                "id": format!("si_{}", Uuid::new_v4().simple()),
                "object": "subscription_item",
                "price": {"id": price, "object": "price"},
            }]},
            "metadata": {"user_id": user, "tier_slug": tier},
        });
        inner.subscriptions.insert(sub_id.clone(), sub.clone());
        let session = json!({
            "id": session_id,
            "object": "checkout.session",
            "mode": "subscription",
            "status": "complete",
            "payment_status": "paid",
            "client_reference_id": user,
            "customer": customer,
            "subscription": sub_id,
            "metadata": {"user_id": user, "tier_slug": tier},
        });
        let t = now.timestamp();
        (
            sub_id,
            vec![
                event("checkout.session.completed", t, session),
                event("customer.subscription.created", t, sub),
            ],
        )
    }

    /// Signs `event` with the webhook secret now and posts it to the app.
    pub async fn deliver(&self, app: &TestApp, event: &Value) -> Reply {
        let body = event.to_string();
        let header = signature_header(WEBHOOK_SECRET, Utc::now().timestamp(), body.as_bytes());
        deliver_raw(app, body, Some(header)).await
    }
}

/// Posts a webhook body with the given signature header.
pub async fn deliver_raw(app: &TestApp, body: String, signature: Option<String>) -> Reply {
    let mut req = app
        .client
        .post(app.url("/api/v1/subscriptions/webhook"))
        .header("content-type", "application/json")
        .body(body);
    if let Some(s) = signature {
        req = req.header("Stripe-Signature", s);
    }
    TestApp::read(req.send().await.expect("webhook request")).await
}
