//! Subscriptions without payment against the real app and Postgres: the
//! public tier list, the current subscription and usage against limits.

use chrono::{DateTime, Datelike, Duration, TimeZone, Timelike, Utc};
use reqwest::Method;
use scanfleet_tests::{spawn_app, TestApp, TestUser};
use serde_json::{json, Value};

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .expect("timestamp")
        .parse()
        .expect("RFC 3339 timestamp")
}

/// The calendar month (UTC) containing now.
fn this_month() -> (DateTime<Utc>, DateTime<Utc>) {
    let now = Utc::now();
    let start = Utc
        .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
        .unwrap();
    let end = if now.month() == 12 {
        Utc.with_ymd_and_hms(now.year() + 1, 1, 1, 0, 0, 0)
    } else {
        Utc.with_ymd_and_hms(now.year(), now.month() + 1, 1, 0, 0, 0)
    }
    .unwrap();
    (start, end)
}

/// Gives the user a paid subscription row with a period that covers now and
/// is not a calendar month.
async fn subscribe(app: &TestApp, user: &TestUser, tier: &str) -> (DateTime<Utc>, DateTime<Utc>) {
    app.set_tier(user.id, tier).await;
    let start = (Utc::now() - Duration::days(3)).with_nanosecond(0).unwrap();
    let end = start + Duration::days(30);
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "INSERT INTO subscriptions (user_id, tier_slug, status, current_period_start,
                                    current_period_end, cancel_at_period_end)
         VALUES ($1, $2, 'active', $3, $4, true)",
        &[&user.id, &tier, &start, &end],
    )
    .await
    .unwrap();
    (start, end)
}

#[tokio::test]
async fn tiers_are_public_and_list_price_interval_limits_and_features() {
    let app = spawn_app().await;
    let r = app
        .call(Method::GET, "/api/v1/subscriptions/tiers", None, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let tiers = r.body.as_array().unwrap();
    let slugs: Vec<&str> = tiers.iter().map(|t| t["slug"].as_str().unwrap()).collect();
    assert_eq!(slugs, vec!["demo", "monthly", "yearly", "admin"]);
    let by = |slug: &str| tiers.iter().find(|t| t["slug"] == slug).unwrap().clone();

    let demo = by("demo");
    assert_eq!(demo["name"], "Demo (Free)");
    assert_eq!(demo["price_cents"], 0);
    assert_eq!(demo["rate_limit_rpm"], 10);
    assert_eq!(demo["scan_limit"], 10);
    assert_eq!(demo["target_limit"], 5);
    assert_eq!(demo["purchasable"], false);

    let monthly = by("monthly");
    assert_eq!(monthly["price_cents"], 2900);
    assert_eq!(monthly["currency"], "usd");
    assert_eq!(monthly["interval"], "month");
    assert_eq!(monthly["rate_limit_rpm"], 60);
    assert_eq!(monthly["scan_limit"], 60);
    assert_eq!(monthly["target_limit"], 100);
    assert_eq!(monthly["purchasable"], true);
    assert!(monthly["features"]
        .as_array()
        .unwrap()
        .contains(&json!("api_keys")));

    let yearly = by("yearly");
    assert_eq!(yearly["interval"], "year");
    assert_eq!(yearly["rate_limit_rpm"], 120);
    assert_eq!(yearly["scan_limit"], 120);
    assert_eq!(yearly["target_limit"], 500);

    let admin = by("admin");
    assert_eq!(admin["rate_limit_rpm"], 200);
    assert!(admin["scan_limit"].is_null());
    assert!(admin["target_limit"].is_null());
    assert_eq!(admin["purchasable"], false);
}

#[tokio::test]
async fn without_a_subscription_the_current_one_is_the_tier_for_this_calendar_month() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let r = app
        .get("/api/v1/subscriptions/current", &user.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (start, end) = this_month();
    assert_eq!(r.body["tier_slug"], "demo");
    assert_eq!(r.body["status"], "active");
    assert_eq!(time(&r.body["current_period_start"]), start);
    assert_eq!(time(&r.body["current_period_end"]), end);
    assert_eq!(r.body["cancel_at_period_end"], false);

    app.set_tier(user.id, "monthly").await;
    let r = app
        .get("/api/v1/subscriptions/current", &user.access_token)
        .await;
    assert_eq!(r.body["tier_slug"], "monthly");
    assert_eq!(time(&r.body["current_period_start"]), start);
}

#[tokio::test]
async fn a_paid_subscription_reports_its_billing_period_and_status() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let (start, end) = subscribe(&app, &user, "yearly").await;
    let r = app
        .get("/api/v1/subscriptions/current", &user.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["tier_slug"], "yearly");
    assert_eq!(r.body["status"], "active");
    assert_eq!(time(&r.body["current_period_start"]), start);
    assert_eq!(time(&r.body["current_period_end"]), end);
    assert_eq!(r.body["cancel_at_period_end"], true);

    // Moved back to demo (by an administrator): the row no longer applies.
    app.set_tier(user.id, "demo").await;
    let r = app
        .get("/api/v1/subscriptions/current", &user.access_token)
        .await;
    assert_eq!(r.body["tier_slug"], "demo");
    assert_eq!(time(&r.body["current_period_start"]), this_month().0);
}

#[tokio::test]
async fn usage_counts_scans_of_the_period_and_targets_against_the_tier_limits() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let r = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let (start, end) = this_month();
    assert_eq!(time(&r.body["period_start"]), start);
    assert_eq!(time(&r.body["period_end"]), end);
    assert_eq!(r.body["scans_used"], 0);
    assert_eq!(r.body["scans_limit"], 10);
    assert_eq!(r.body["targets_used"], 0);
    assert_eq!(r.body["targets_limit"], 5);

    let target = app.new_target(&user, "example.com").await;
    app.new_target(&user, "example.org").await;
    for _ in 0..3 {
        let s = app
            .post(
                "/api/v1/scans",
                Some(&user.access_token),
                json!({"target_id": target}),
            )
            .await;
        assert_eq!(s.status, 201, "{}", s.text);
    }
    let r = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(r.body["scans_used"], 3);
    assert_eq!(r.body["targets_used"], 2);

    // Another user's usage is their own.
    let other = app.new_user().await;
    let r = app
        .get("/api/v1/subscriptions/usage", &other.access_token)
        .await;
    assert_eq!(r.body["scans_used"], 0);
    assert_eq!(r.body["targets_used"], 0);
}

#[tokio::test]
async fn paid_usage_is_counted_in_the_billing_period() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let (start, end) = subscribe(&app, &user, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let s = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({"target_id": target}),
        )
        .await;
    assert_eq!(s.status, 201, "{}", s.text);
    let r = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(time(&r.body["period_start"]), start);
    assert_eq!(time(&r.body["period_end"]), end);
    assert_eq!(r.body["scans_used"], 1);
    assert_eq!(r.body["scans_limit"], 60);
    assert_eq!(r.body["targets_limit"], 100);
}

#[tokio::test]
async fn admins_have_no_limits_in_their_usage() {
    let app = spawn_app().await;
    let admin = app.new_user().await;
    app.make_admin(admin.id).await;
    let r = app
        .get("/api/v1/subscriptions/usage", &admin.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.body["scans_limit"].is_null());
    assert!(r.body["targets_limit"].is_null());
}

#[tokio::test]
async fn current_and_usage_need_credentials() {
    let app = spawn_app().await;
    for path in [
        "/api/v1/subscriptions/current",
        "/api/v1/subscriptions/usage",
    ] {
        app.call(Method::GET, path, None, None)
            .await
            .assert_problem(401);
    }
}
