//! Payments (issue 10) against the real app, Postgres and Redis, and a local
//! server speaking Stripe's protocol ([`FakeStripe`]): checkout -> signed
//! webhook -> tier; upgrade with proration; cancel at period end; replayed
//! and out-of-order events; bad signatures; the provider failing or missing;
//! the dev stand-in's own checkout page.

use std::time::{Duration as StdDuration, Instant};

use chrono::{Duration, Utc};
use reqwest::Method;
use scanfleet_tests::stripe::{
    deliver_raw, event, signature_header, Behaviour, FakeStripe, PRICE_MONTHLY, PRICE_YEARLY,
    SECRET_KEY, WEBHOOK_SECRET,
};
use scanfleet_tests::{spawn_app, spawn_app_with, TestApp, TestUser};
use serde_json::{json, Value};

async fn app_with(fake: &FakeStripe, extra: &[(&str, &str)]) -> TestApp {
    let settings = fake.settings();
    let mut vars: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    vars.extend_from_slice(extra);
    spawn_app_with(&vars).await
}

async fn me(app: &TestApp, user: &TestUser) -> Value {
    let r = app.get("/api/v1/auth/me", &user.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

async fn tier_of(app: &TestApp, user: &TestUser) -> String {
    me(app, user).await["tier_slug"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn current(app: &TestApp, user: &TestUser) -> Value {
    let r = app
        .get("/api/v1/subscriptions/current", &user.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

async fn checkout(app: &TestApp, user: &TestUser, tier: &str) -> Value {
    let r = app
        .post(
            "/api/v1/subscriptions/checkout",
            Some(&user.access_token),
            json!({"tier_slug": tier}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

async fn create_api_key(app: &TestApp, user: &TestUser) -> u16 {
    app.post(
        "/api/v1/api-keys",
        Some(&user.access_token),
        json!({"name": "ci", "permissions": ["read"]}),
    )
    .await
    .status
    .as_u16()
}

/// Checkout, payment at the fake, and delivery of its events: the user is
/// subscribed to `tier`. Returns the provider subscription id.
async fn subscribe(app: &TestApp, fake: &FakeStripe, user: &TestUser, tier: &str) -> String {
    let session = checkout(app, user, tier).await;
    let (sub_id, events) = fake.complete_checkout(session["session_id"].as_str().unwrap());
    for e in &events {
        let r = fake.deliver(app, e).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    assert_eq!(tier_of(app, user).await, tier);
    sub_id
}

fn time(v: &Value) -> chrono::DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn checkout_then_the_signed_webhook_moves_the_user_to_the_paid_tier() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[("SCANFLEET_RATE__ENABLED", "true")]).await;
    let user = app.new_user().await;
    assert_eq!(create_api_key(&app, &user).await, 403);

    let session = checkout(&app, &user, "monthly").await;
    let session_id = session["session_id"].as_str().unwrap();
    assert!(session_id.starts_with("cs_test_"));
    assert_eq!(
        session["checkout_url"],
        format!("https://checkout.stripe.test/c/pay/{session_id}")
    );

    // What went over the wire is Stripe's protocol.
    let sent = fake.last_request();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/checkout/sessions")
    );
    assert_eq!(
        sent.authorization.as_deref(),
        Some(format!("Bearer {SECRET_KEY}").as_str())
    );
    assert!(sent
        .content_type
        .as_deref()
        .unwrap()
        .starts_with("application/x-www-form-urlencoded"));
    assert!(!sent.idempotency_key.as_deref().unwrap_or("").is_empty());
    assert_eq!(sent.field("mode"), Some("subscription"));
    assert_eq!(sent.field("line_items[0][price]"), Some(PRICE_MONTHLY));
    assert_eq!(sent.field("line_items[0][quantity]"), Some("1"));
    let uid = user.id.to_string();
    assert_eq!(sent.field("client_reference_id"), Some(uid.as_str()));
    assert_eq!(
        sent.field("subscription_data[metadata][user_id]"),
        Some(uid.as_str())
    );
    assert_eq!(sent.field("customer_email"), Some(user.email.as_str()));
    assert!(sent.field("success_url").is_some() && sent.field("cancel_url").is_some());

    // Nothing changes until the provider confirms the payment.
    let r = app.get("/api/v1/auth/me", &user.access_token).await;
    assert_eq!(r.body["tier_slug"], "demo");
    assert_eq!(r.header("x-ratelimit-limit"), Some("10"));

    let (_, events) = fake.complete_checkout(session_id);
    for e in &events {
        let r = fake.deliver(&app, e).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["duplicate"], false);
    }
    assert_eq!(tier_of(&app, &user).await, "monthly");
    let cur = current(&app, &user).await;
    assert_eq!(cur["tier_slug"], "monthly");
    assert_eq!(cur["status"], "active");
    assert_eq!(cur["cancel_at_period_end"], false);
    let period_end = time(&cur["current_period_end"]);
    assert!(period_end > Utc::now() + Duration::days(29), "{cur}");

    // Every tier check sees the new tier at once.
    assert_eq!(create_api_key(&app, &user).await, 201);
    let usage = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(usage.body["scans_limit"], 60);
    assert_eq!(usage.body["targets_limit"], 100);
    assert_eq!(usage.body["period_end"], cur["current_period_end"]);
    // The rate limiter's cached tier is dropped at once.
    let r = app.get("/api/v1/auth/me", &user.access_token).await;
    assert_eq!(r.header("x-ratelimit-limit"), Some("60"));
}

#[tokio::test]
async fn an_upgrade_changes_the_price_with_proration_and_takes_effect_at_once() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    let user = app.new_user().await;
    let sub_id = subscribe(&app, &fake, &user, "monthly").await;
    let item_id = fake.subscription(&sub_id)["items"]["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let r = app
        .post(
            "/api/v1/subscriptions/upgrade",
            Some(&user.access_token),
            json!({"tier_slug": "yearly"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["tier_slug"], "yearly");
    assert_eq!(r.body["status"], "active");

    let sent = fake.last_request();
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", format!("/v1/subscriptions/{sub_id}").as_str())
    );
    assert_eq!(sent.field("items[0][id]"), Some(item_id.as_str()));
    assert_eq!(sent.field("items[0][price]"), Some(PRICE_YEARLY));
    assert_eq!(sent.field("proration_behavior"), Some("create_prorations"));
    assert!(!sent.idempotency_key.as_deref().unwrap_or("").is_empty());

    assert_eq!(tier_of(&app, &user).await, "yearly");
    let usage = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(usage.body["scans_limit"], 120);

    // The same tier again is a conflict, and asks nothing of the provider.
    let before = fake.requests().len();
    let again = app
        .post(
            "/api/v1/subscriptions/upgrade",
            Some(&user.access_token),
            json!({"tier_slug": "yearly"}),
        )
        .await;
    again.assert_problem(409);
    assert_eq!(fake.requests().len(), before);
}

#[tokio::test]
async fn a_cancelled_subscription_stays_active_until_its_period_ends_then_returns_to_demo() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    fake.set_period(Duration::seconds(4));
    let user = app.new_user().await;
    let sub_id = subscribe(&app, &fake, &user, "monthly").await;

    let r = app
        .post(
            "/api/v1/subscriptions/cancel",
            Some(&user.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["tier_slug"], "monthly");
    assert_eq!(r.body["status"], "active");
    assert_eq!(r.body["cancel_at_period_end"], true);
    let sent = fake.last_request();
    assert_eq!(sent.path, format!("/v1/subscriptions/{sub_id}"));
    assert_eq!(sent.field("cancel_at_period_end"), Some("true"));
    assert!(sent.idempotency_key.is_some());

    // Still paid until the period ends.
    assert_eq!(tier_of(&app, &user).await, "monthly");
    assert_eq!(create_api_key(&app, &user).await, 201);
    let period_end = time(&current(&app, &user).await["current_period_end"]);

    let deadline = Instant::now() + StdDuration::from_secs(15);
    while tier_of(&app, &user).await != "demo" {
        assert!(
            Instant::now() < deadline,
            "still paid after the period ended at {period_end}"
        );
        tokio::time::sleep(StdDuration::from_millis(250)).await;
    }
    assert!(Utc::now() >= period_end);
    assert_eq!(create_api_key(&app, &user).await, 403);
    let cur = current(&app, &user).await;
    assert_eq!(cur["tier_slug"], "demo");
    // The usage is counted in the calendar month again.
    let usage = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(usage.body["scans_limit"], 10);
    // Nothing left to cancel or upgrade.
    app.post(
        "/api/v1/subscriptions/cancel",
        Some(&user.access_token),
        json!({}),
    )
    .await
    .assert_problem(409);
}

#[tokio::test]
async fn a_replayed_event_is_acknowledged_and_applied_only_once() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    let user = app.new_user().await;
    let sub_id = subscribe(&app, &fake, &user, "monthly").await;

    // A failed payment, then the provider's word that the subscription is
    // active again, both in the same second.
    let t = Utc::now().timestamp() + 1;
    let failed = event(
        "invoice.payment_failed",
        t,
        json!({"id": "in_1", "object": "invoice", "subscription": sub_id, "customer": "cus_x"}),
    );
    let r = fake.deliver(&app, &failed).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(current(&app, &user).await["status"], "past_due");
    // The tier is kept while the provider retries the payment.
    assert_eq!(tier_of(&app, &user).await, "monthly");

    let recovered = event(
        "customer.subscription.updated",
        t,
        fake.subscription(&sub_id),
    );
    fake.deliver(&app, &recovered).await;
    assert_eq!(current(&app, &user).await["status"], "active");

    // Delivered again (freshly signed, as the provider's retries are).
    let r = fake.deliver(&app, &failed).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["duplicate"], true);
    assert_eq!(current(&app, &user).await["status"], "active");

    let db = app.state.db.get().await.unwrap();
    let recorded: i64 = db
        .query_one(
            "SELECT count(*) FROM payment_events WHERE id = $1",
            &[&failed["id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(recorded, 1);
}

#[tokio::test]
async fn events_arriving_out_of_order_never_undo_a_newer_change() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    let user = app.new_user().await;
    let sub_id = subscribe(&app, &fake, &user, "monthly").await;
    let now = Utc::now().timestamp();

    let mut yearly = fake.subscription(&sub_id);
    yearly["items"]["data"][0]["price"]["id"] = json!(PRICE_YEARLY);
    let monthly = fake.subscription(&sub_id);
    let newer = event("customer.subscription.updated", now + 20, yearly);
    let older = event("customer.subscription.updated", now + 10, monthly);
    let older_failure = event(
        "invoice.payment_failed",
        now + 5,
        json!({"id": "in_2", "object": "invoice", "subscription": sub_id}),
    );

    for e in [&newer, &older, &older_failure] {
        let r = fake.deliver(&app, e).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    assert_eq!(tier_of(&app, &user).await, "yearly");
    assert_eq!(current(&app, &user).await["status"], "active");

    // The late end of a subscription the user no longer has cancels nothing.
    let mut old = fake.subscription(&sub_id);
    old["id"] = json!("sub_replaced_long_ago");
    old["status"] = json!("canceled");
    let r = fake
        .deliver(&app, &event("customer.subscription.deleted", now + 30, old))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(tier_of(&app, &user).await, "yearly");

    // The end of the current one, newer than all, does.
    let mut ended = fake.subscription(&sub_id);
    ended["status"] = json!("canceled");
    fake.deliver(
        &app,
        &event("customer.subscription.deleted", now + 40, ended),
    )
    .await;
    assert_eq!(tier_of(&app, &user).await, "demo");
}

#[tokio::test]
async fn a_webhook_with_a_bad_signature_is_400_and_changes_nothing() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    let user = app.new_user().await;
    let session = checkout(&app, &user, "monthly").await;
    let (_, events) = fake.complete_checkout(session["session_id"].as_str().unwrap());
    let body = events[0].to_string();
    let now = Utc::now().timestamp();

    let tampered = body.replace("monthly", "yearly");
    let cases = [
        ("no signature", body.clone(), None),
        (
            "wrong secret",
            body.clone(),
            Some(signature_header("whsec_not_ours", now, body.as_bytes())),
        ),
        (
            "changed body",
            tampered,
            Some(signature_header(WEBHOOK_SECRET, now, body.as_bytes())),
        ),
        (
            "too old",
            body.clone(),
            Some(signature_header(WEBHOOK_SECRET, now - 600, body.as_bytes())),
        ),
        ("garbage", body.clone(), Some("t=abc,v1=zz".to_string())),
    ];
    for (what, body, sig) in cases {
        let r = deliver_raw(&app, body, sig).await;
        let problem = r.assert_problem(400);
        assert_eq!(problem["code"], "invalid_signature", "{what}: {}", r.text);
    }
    assert_eq!(tier_of(&app, &user).await, "demo");
    let db = app.state.db.get().await.unwrap();
    let recorded: i64 = db
        .query_one("SELECT count(*) FROM payment_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(recorded, 0);

    // The same event, properly signed, goes through.
    let r = fake.deliver(&app, &events[0]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(tier_of(&app, &user).await, "monthly");
}

#[tokio::test]
async fn when_the_provider_is_down_the_payment_operations_answer_503_and_change_nothing() {
    let fake = FakeStripe::start().await;
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let app = app_with(&fake, &[("SCANFLEET_PAYMENTS__API_BASE", closed.as_str())]).await;
    let user = app.new_user().await;
    let r = app
        .post(
            "/api/v1/subscriptions/checkout",
            Some(&user.access_token),
            json!({"tier_slug": "monthly"}),
        )
        .await;
    assert_eq!(
        r.assert_problem(503)["code"],
        "payment_provider_unavailable"
    );
    let db = app.state.db.get().await.unwrap();
    let sessions: i64 = db
        .query_one("SELECT count(*) FROM checkout_sessions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sessions, 0);

    // A subscription known from the provider's events (webhooks need no
    // provider call).
    let sub_user = app.new_user().await;
    let sub = json!({
        "id": "sub_down_1", "object": "subscription", "customer": "cus_down_1",
        "status": "active", "cancel_at_period_end": false,
        "current_period_start": Utc::now().timestamp() - 60,
        "current_period_end": Utc::now().timestamp() + 86_400,
        "items": {"object": "list", "data": [
            {"id": "si_down_1", "object": "subscription_item", "price": {"id": PRICE_MONTHLY, "object": "price"}}
        ]},
        "metadata": {"user_id": sub_user.id.to_string(), "tier_slug": "monthly"}
    });
    let r = fake
        .deliver(
            &app,
            &event("customer.subscription.created", Utc::now().timestamp(), sub),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(tier_of(&app, &sub_user).await, "monthly");
    let before = current(&app, &sub_user).await;

    for (path, body) in [
        (
            "/api/v1/subscriptions/upgrade",
            json!({"tier_slug": "yearly"}),
        ),
        ("/api/v1/subscriptions/cancel", json!({})),
    ] {
        let r = app.post(path, Some(&sub_user.access_token), body).await;
        assert_eq!(
            r.assert_problem(503)["code"],
            "payment_provider_unavailable",
            "{path}"
        );
    }
    assert_eq!(tier_of(&app, &sub_user).await, "monthly");
    assert_eq!(current(&app, &sub_user).await, before);
}

#[tokio::test]
async fn a_provider_that_does_not_answer_in_time_is_503_and_changes_nothing() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[("SCANFLEET_PAYMENTS__TIMEOUT_SECS", "1")]).await;
    let user = app.new_user().await;
    subscribe(&app, &fake, &user, "monthly").await;
    let before = current(&app, &user).await;
    fake.set_behaviour(Behaviour::Hang(StdDuration::from_secs(5)));

    let started = Instant::now();
    let r = app
        .post(
            "/api/v1/subscriptions/upgrade",
            Some(&user.access_token),
            json!({"tier_slug": "yearly"}),
        )
        .await;
    assert_eq!(
        r.assert_problem(503)["code"],
        "payment_provider_unavailable"
    );
    assert!(
        started.elapsed() < StdDuration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(tier_of(&app, &user).await, "monthly");
    assert_eq!(current(&app, &user).await, before);
}

#[tokio::test]
async fn a_provider_error_object_becomes_a_502_and_changes_nothing() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    let user = app.new_user().await;
    subscribe(&app, &fake, &user, "monthly").await;
    let before = current(&app, &user).await;

    fake.set_behaviour(Behaviour::Fail(
        400,
        json!({"error": {"type": "invalid_request_error",
                         "message": "This subscription cannot be updated right now.",
                         "code": "resource_locked"}}),
    ));
    let r = app
        .post(
            "/api/v1/subscriptions/upgrade",
            Some(&user.access_token),
            json!({"tier_slug": "yearly"}),
        )
        .await;
    let problem = r.assert_problem(502);
    assert_eq!(problem["code"], "payment_provider_error");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("cannot be updated right now"),
        "{}",
        r.text
    );
    app.post(
        "/api/v1/subscriptions/cancel",
        Some(&user.access_token),
        json!({}),
    )
    .await
    .assert_problem(502);
    assert_eq!(tier_of(&app, &user).await, "monthly");
    assert_eq!(current(&app, &user).await, before);

    // A provider that says it is failing itself: try again later.
    fake.set_behaviour(Behaviour::Fail(
        500,
        json!({"error": {"type": "api_error", "message": "Something went wrong on Stripe's end."}}),
    ));
    let other = app.new_user().await;
    let r = app
        .post(
            "/api/v1/subscriptions/checkout",
            Some(&other.access_token),
            json!({"tier_slug": "monthly"}),
        )
        .await;
    assert_eq!(
        r.assert_problem(503)["code"],
        "payment_provider_unavailable"
    );
}

#[tokio::test]
async fn without_a_provider_key_in_production_the_payment_operations_answer_503() {
    let app = spawn_app_with(&[
        ("SCANFLEET_MODE", "production"),
        ("SCANFLEET_PAYMENTS__PRICE_MONTHLY", PRICE_MONTHLY),
    ])
    .await;
    let user = app.new_user().await;
    for (path, body) in [
        (
            "/api/v1/subscriptions/checkout",
            json!({"tier_slug": "monthly"}),
        ),
        (
            "/api/v1/subscriptions/upgrade",
            json!({"tier_slug": "monthly"}),
        ),
        ("/api/v1/subscriptions/cancel", json!({})),
    ] {
        let r = app.post(path, Some(&user.access_token), body).await;
        assert_eq!(
            r.assert_problem(503)["code"],
            "payments_not_configured",
            "{path}"
        );
    }
    let r = deliver_raw(&app, "{}".into(), Some("t=1,v1=00".into())).await;
    assert_eq!(r.assert_problem(503)["code"], "payments_not_configured");
}

#[tokio::test]
async fn checkout_takes_only_purchasable_tiers_and_only_one_subscription() {
    let fake = FakeStripe::start().await;
    let app = app_with(&fake, &[]).await;
    let user = app.new_user().await;
    for tier in ["demo", "admin", "platinum"] {
        let r = app
            .post(
                "/api/v1/subscriptions/checkout",
                Some(&user.access_token),
                json!({"tier_slug": tier}),
            )
            .await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["tier_slug"], "{tier}");
    }
    // Nothing to change or cancel yet.
    app.post(
        "/api/v1/subscriptions/upgrade",
        Some(&user.access_token),
        json!({"tier_slug": "yearly"}),
    )
    .await
    .assert_problem(409);
    app.post(
        "/api/v1/subscriptions/cancel",
        Some(&user.access_token),
        json!({}),
    )
    .await
    .assert_problem(409);

    subscribe(&app, &fake, &user, "monthly").await;
    let r = app
        .post(
            "/api/v1/subscriptions/checkout",
            Some(&user.access_token),
            json!({"tier_slug": "yearly"}),
        )
        .await;
    assert_eq!(r.assert_problem(409)["code"], "already_subscribed");

    // API keys cannot change a subscription.
    let key = app
        .post(
            "/api/v1/api-keys",
            Some(&user.access_token),
            json!({"name": "k", "permissions": ["read", "scan", "write"]}),
        )
        .await;
    let raw = key.body["key"].as_str().unwrap();
    let r = app
        .client
        .post(app.url("/api/v1/subscriptions/cancel"))
        .header("X-API-Key", raw)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    // Issue 37, item 4: the key was sent and refused, so 403 saying so.
    let r = TestApp::read(r).await;
    assert_eq!(r.assert_problem(403)["code"], "api_key_not_accepted");
}

#[tokio::test]
async fn the_dev_stand_in_checkout_page_takes_a_demo_user_to_monthly() {
    // Dev mode, no provider key: the default stand-in.
    let app = spawn_app().await;
    let user = app.new_user().await;
    let session = checkout(&app, &user, "monthly").await;
    let url = session["checkout_url"].as_str().unwrap();
    let path = &url[url.find("/api/v1/").expect("a page of the api")..];
    assert!(path.starts_with("/api/v1/subscriptions/dev-checkout/cs_dev_"));

    let page = app.call(Method::GET, path, None, None).await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(page.text.contains("Monthly Pro") && page.text.contains("/complete"));

    let done = app
        .call(Method::POST, &format!("{path}/complete"), None, None)
        .await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert_eq!(tier_of(&app, &user).await, "monthly");
    assert_eq!(create_api_key(&app, &user).await, 201);
    let tiers = app
        .call(Method::GET, "/api/v1/subscriptions/tiers", None, None)
        .await;
    let monthly_rpm = tiers.body.as_array().unwrap()[1]["rate_limit_rpm"].clone();
    assert_eq!(monthly_rpm, 60);

    // Completing twice changes nothing more.
    let again = app
        .call(Method::POST, &format!("{path}/complete"), None, None)
        .await;
    assert_eq!(again.status, 200);
    let db = app.state.db.get().await.unwrap();
    let events: i64 = db
        .query_one("SELECT count(*) FROM payment_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(events, 2);

    // Upgrade and cancel work against the stand-in too.
    let r = app
        .post(
            "/api/v1/subscriptions/upgrade",
            Some(&user.access_token),
            json!({"tier_slug": "yearly"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(tier_of(&app, &user).await, "yearly");
    let r = app
        .post(
            "/api/v1/subscriptions/cancel",
            Some(&user.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.body["cancel_at_period_end"], true, "{}", r.text);
}

#[tokio::test]
async fn abandoning_the_dev_checkout_leaves_the_user_on_demo() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let session = checkout(&app, &user, "yearly").await;
    let url = session["checkout_url"].as_str().unwrap();
    let path = &url[url.find("/api/v1/").unwrap()..];
    let r = app
        .call(Method::POST, &format!("{path}/abandon"), None, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // An abandoned session cannot be completed afterwards.
    app.call(Method::POST, &format!("{path}/complete"), None, None)
        .await;
    assert_eq!(tier_of(&app, &user).await, "demo");
    let unknown = app
        .call(
            Method::GET,
            "/api/v1/subscriptions/dev-checkout/cs_dev_nope",
            None,
            None,
        )
        .await;
    unknown.assert_problem(404);
}
