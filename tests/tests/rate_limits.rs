//! Rate limits against the real app and Redis: per-user budgets by tier,
//! per-IP budgets for unauthenticated requests, the headers on every
//! response, and one budget shared by several api processes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use scanfleet_tests::{spawn_app, spawn_app_with, Reply, TestApp, PASSWORD};
use serde_json::json;
use uuid::Uuid;

const ON: (&str, &str) = ("SCANFLEET_RATE__ENABLED", "true");

/// Budgets are fixed one-minute windows, so a burst that straddles a
/// window boundary is split across two budgets. Bursts therefore start with
/// at least 20 s of the window left: this waits for a clock boundary, not
/// for the system to settle.
async fn with_enough_of_the_window_left() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = now.as_secs_f64() % 60.0;
    if into > 40.0 {
        tokio::time::sleep(Duration::from_secs_f64(60.0 - into + 0.05)).await;
    }
}

/// Two api processes with rate limiting on, sharing one database and one
/// Redis prefix (so one budget per user).
async fn two_apps_sharing_one_budget() -> (TestApp, TestApp) {
    let first = spawn_app_with(&[ON]).await;
    let second = spawn_app_with(&[
        ON,
        ("SCANFLEET_REDIS_PREFIX", &first.redis_prefix),
        ("DATABASE_URL", first.state.settings.database_url.expose()),
    ])
    .await;
    (first, second)
}

fn num(r: &Reply, header: &str) -> u64 {
    r.header(header)
        .unwrap_or_else(|| panic!("{header} missing on {}: {}", r.status, r.text))
        .parse()
        .unwrap_or_else(|_| panic!("{header} is not a number"))
}

/// Asserts the three headers and returns (limit, remaining, reset).
fn rate_headers(r: &Reply) -> (u64, u64, u64) {
    let reset = num(r, "x-ratelimit-reset");
    assert!((1..=60).contains(&reset), "reset {reset}");
    (
        num(r, "x-ratelimit-limit"),
        num(r, "x-ratelimit-remaining"),
        reset,
    )
}

#[tokio::test]
async fn a_demo_users_eleventh_request_in_a_minute_is_429_with_retry_after() {
    let app = spawn_app_with(&[ON]).await;
    let user = app.new_user().await;
    with_enough_of_the_window_left().await;
    for i in 1..=10u64 {
        let r = app.get("/api/v1/schedules", &user.access_token).await;
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
        let (limit, remaining, _) = rate_headers(&r);
        assert_eq!((limit, remaining), (10, 10 - i), "request {i}");
    }
    let r = app.get("/api/v1/schedules", &user.access_token).await;
    let p = r.assert_problem(429);
    assert_eq!(p["code"], "rate_limited");
    let (limit, remaining, reset) = rate_headers(&r);
    assert_eq!((limit, remaining), (10, 0));
    let retry_after: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert_eq!(retry_after, reset);
    // Still limited, whatever the endpoint.
    app.get("/api/v1/auth/me", &user.access_token)
        .await
        .assert_problem(429);
}

#[tokio::test]
async fn the_limit_follows_the_users_tier() {
    let app = spawn_app_with(&[ON]).await;
    let user = app.new_user().await;
    let admin = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    app.make_admin(admin.id).await;
    let r = app.get("/api/v1/schedules", &user.access_token).await;
    assert_eq!(rate_headers(&r).0, 60);
    let r = app.get("/api/v1/schedules", &admin.access_token).await;
    assert_eq!(rate_headers(&r).0, 200);
}

#[tokio::test]
async fn rate_limit_headers_are_on_error_responses_too() {
    let app = spawn_app_with(&[ON]).await;
    let user = app.new_user().await;
    let missing = Uuid::now_v7();
    let not_found = app
        .call(
            Method::PUT,
            &format!("/api/v1/schedules/{missing}"),
            Some(&user.access_token),
            Some(json!({"enabled": false})),
        )
        .await;
    not_found.assert_problem(404);
    assert_eq!(rate_headers(&not_found).0, 10);
    let invalid = app
        .post(
            "/api/v1/schedules",
            Some(&user.access_token),
            json!({"target_id": missing, "cron_expression": "* * * * *"}),
        )
        .await;
    invalid.assert_problem(422);
    assert_eq!(rate_headers(&invalid).0, 10);
    let unparseable = app
        .post("/api/v1/schedules", Some(&user.access_token), json!([]))
        .await;
    unparseable.assert_problem(400);
    rate_headers(&unparseable);
    let unknown_route = app.get("/api/v1/nothing-here", &user.access_token).await;
    unknown_route.assert_problem(404);
    rate_headers(&unknown_route);
    // Without credentials the client IP's budget applies.
    let unauthenticated = app.call(Method::GET, "/api/v1/schedules", None, None).await;
    unauthenticated.assert_problem(401);
    assert_eq!(rate_headers(&unauthenticated).0, 60);
}

#[tokio::test]
async fn two_app_instances_sharing_one_redis_prefix_share_one_budget() {
    let (first, second) = two_apps_sharing_one_budget().await;
    let user = first.new_user().await;
    with_enough_of_the_window_left().await;
    for i in 1..=10u64 {
        let app = if i % 2 == 0 { &first } else { &second };
        let r = app.get("/api/v1/schedules", &user.access_token).await;
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
        assert_eq!(rate_headers(&r).1, 10 - i, "request {i}");
    }
    for app in [&first, &second] {
        app.get("/api/v1/schedules", &user.access_token)
            .await
            .assert_problem(429);
    }
}

/// A large budget is reserved in blocks; two processes serving many
/// concurrent requests of one user together serve exactly the limit.
#[tokio::test]
async fn a_large_budget_shared_by_two_processes_serves_exactly_the_limit() {
    const LIMIT: u64 = 1500;
    let (first, second) = two_apps_sharing_one_budget().await;
    let user = first.new_user().await;
    first
        .state
        .db
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE tiers SET rate_limit_rpm = $1 WHERE slug = 'demo'",
            &[&(LIMIT as i32)],
        )
        .await
        .unwrap();
    with_enough_of_the_window_left().await;
    // Each client alternates between the processes and stops once both
    // refused it in a row, so no process keeps unused slots.
    let client = |n: usize| {
        let (first, second, token) = (&first, &second, &user.access_token);
        async move {
            let (mut served, mut refused_in_a_row) = (0u64, 0);
            let mut i = n;
            while refused_in_a_row < 2 {
                let app = if i.is_multiple_of(2) { first } else { second };
                i += 1;
                let r = app.get("/api/v1/schedules", token).await;
                match r.status.as_u16() {
                    200 => {
                        served += 1;
                        refused_in_a_row = 0;
                        let (limit, remaining, _) = rate_headers(&r);
                        assert_eq!(limit, LIMIT);
                        assert!(remaining < LIMIT, "{remaining}");
                    }
                    429 => refused_in_a_row += 1,
                    other => panic!("{other}: {}", r.text),
                }
            }
            served
        }
    };
    let served: u64 = futures::future::join_all((0..16).map(client))
        .await
        .into_iter()
        .sum();
    assert_eq!(served, LIMIT);
}

#[tokio::test]
async fn login_and_register_are_limited_per_client_ip() {
    let app = spawn_app_with(&[ON, ("SCANFLEET_RATE__ANON_RPM", "4")]).await;
    with_enough_of_the_window_left().await;
    let r = app.register("ip@example.com", PASSWORD).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (limit, remaining, _) = rate_headers(&r);
    assert_eq!((limit, remaining), (4, 3));
    let ok = app.login("ip@example.com", PASSWORD).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    let token = ok.body["access_token"].as_str().unwrap().to_string();
    for remaining in [1, 0] {
        let r = app.login("ip@example.com", "wrong-password").await;
        r.assert_problem(401);
        assert_eq!(rate_headers(&r).1, remaining);
    }
    let r = app.login("ip@example.com", PASSWORD).await;
    r.assert_problem(429);
    assert!(r.header("retry-after").is_some());
    app.register("other@example.com", PASSWORD)
        .await
        .assert_problem(429);
    app.call(Method::GET, "/api/v1/subscriptions/tiers", None, None)
        .await
        .assert_problem(429);
    // The user's own budget is separate from the IP's.
    let r = app.get("/api/v1/schedules", &token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(rate_headers(&r).0, 10);
}

#[tokio::test]
async fn requests_with_invalid_credentials_count_against_the_client_ip() {
    let app = spawn_app_with(&[ON, ("SCANFLEET_RATE__ANON_RPM", "2")]).await;
    with_enough_of_the_window_left().await;
    for _ in 0..2 {
        app.get("/api/v1/schedules", "not-a-token")
            .await
            .assert_problem(401);
    }
    let r = app.get("/api/v1/schedules", "not-a-token").await;
    r.assert_problem(429);
    let mut req = app.client.get(app.url("/api/v1/schedules"));
    req = req.header("X-API-Key", "sfk_unknown");
    TestApp::read(req.send().await.unwrap())
        .await
        .assert_problem(429);
}

#[tokio::test]
async fn api_key_requests_spend_their_owners_budget() {
    let app = spawn_app_with(&[ON]).await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let key = app
        .post(
            "/api/v1/api-keys",
            Some(&user.access_token),
            json!({"name": "k", "permissions": ["read"]}),
        )
        .await;
    assert_eq!(key.status, 201, "{}", key.text);
    let raw = key.body["key"].as_str().unwrap().to_string();
    with_enough_of_the_window_left().await;
    let bearer = app.get("/api/v1/schedules", &user.access_token).await;
    let (limit, before, _) = rate_headers(&bearer);
    assert_eq!(limit, 60);
    let mut req = app.client.get(app.url("/api/v1/schedules"));
    req = req.header("X-API-Key", &raw);
    let with_key = TestApp::read(req.send().await.unwrap()).await;
    assert_eq!(with_key.status, 200, "{}", with_key.text);
    let (limit, after, _) = rate_headers(&with_key);
    assert_eq!((limit, after), (60, before - 1));
}

#[tokio::test]
async fn service_endpoints_and_the_contract_are_not_limited() {
    let app = spawn_app_with(&[ON, ("SCANFLEET_RATE__ANON_RPM", "1")]).await;
    for _ in 0..3 {
        for path in ["/healthz", "/readyz", "/api/v1/openapi.json"] {
            let r = app.call(Method::GET, path, None, None).await;
            assert_eq!(r.status, 200, "{path}: {}", r.text);
            assert!(r.header("x-ratelimit-limit").is_none(), "{path}");
        }
    }
}

#[tokio::test]
async fn with_rate_limiting_disabled_nothing_is_limited() {
    // The harness default: SCANFLEET_RATE__ENABLED=false.
    let app = spawn_app().await;
    let user = app.new_user().await;
    for _ in 0..15 {
        let r = app.get("/api/v1/schedules", &user.access_token).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.header("x-ratelimit-limit").is_none());
    }
}

#[tokio::test]
async fn when_redis_is_unreachable_requests_are_served_unlimited() {
    use fred::interfaces::ClientLike;
    let app = spawn_app_with(&[ON]).await;
    let user = app.new_user().await;
    // The limiter counts on the shared client: without it, it fails open.
    app.state.redis.quit().await.unwrap();
    for _ in 0..12 {
        let r = app.get("/api/v1/schedules", &user.access_token).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.header("x-ratelimit-limit").is_none());
    }
}
