//! API keys against the real app, Postgres and Redis: creation (raw key
//! once, stored hashed), masked listing, deletion, and `X-API-Key`
//! authentication with its permission, expiry and tier rules.

use reqwest::Method;
use scanfleet_api::auth::tokens::sha256;
use scanfleet_tests::{spawn_app, Reply, TestApp, TestUser};
use serde_json::{json, Value};
use uuid::Uuid;

async fn create_key(app: &TestApp, user: &TestUser, body: Value) -> Reply {
    app.post("/api/v1/api-keys", Some(&user.access_token), body)
        .await
}

/// A monthly-tier user.
async fn paid_user(app: &TestApp) -> TestUser {
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    user
}

/// Creates a key with these permissions and returns (id, raw key).
async fn key_with(app: &TestApp, user: &TestUser, permissions: &[&str]) -> (Uuid, String) {
    let r = create_key(app, user, json!({"name": "ci", "permissions": permissions})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    (
        r.body["id"].as_str().unwrap().parse().unwrap(),
        r.body["key"].as_str().unwrap().to_string(),
    )
}

/// A request authenticated with `X-API-Key` only.
async fn with_key(
    app: &TestApp,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> Reply {
    let mut req = app
        .client
        .request(method, app.url(path))
        .header("X-API-Key", key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    TestApp::read(req.send().await.expect("request")).await
}

#[tokio::test]
async fn creating_a_key_returns_the_raw_key_once_and_stores_only_its_hash() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let before = chrono::Utc::now();
    let r = create_key(
        &app,
        &user,
        json!({"name": "deploy bot", "permissions": ["scan", "read"]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let raw = r.body["key"].as_str().unwrap();
    assert!(raw.starts_with("sfk_") && raw.len() > 40, "{raw}");
    assert_eq!(r.body["name"], "deploy bot");
    assert_eq!(r.body["permissions"], json!(["read", "scan"]));
    let expires: chrono::DateTime<chrono::Utc> =
        r.body["expires_at"].as_str().unwrap().parse().unwrap();
    let days = (expires - before).num_hours() as f64 / 24.0;
    assert!((89.9..=90.1).contains(&days), "{days}");

    let db = app.state.db.get().await.unwrap();
    let row = db
        .query_one(
            "SELECT key_hash, last4, row_to_json(k)::text FROM api_keys k",
            &[],
        )
        .await
        .unwrap();
    let hash: Vec<u8> = row.get(0);
    let last4: String = row.get(1);
    let whole: String = row.get(2);
    assert_eq!(hash, sha256(raw));
    assert_eq!(last4, raw[raw.len() - 4..]);
    assert!(!whole.contains(&raw[4..]), "the raw key is stored: {whole}");
}

#[tokio::test]
async fn expires_in_days_sets_the_lifetime() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let r = create_key(
        &app,
        &user,
        json!({"name": "k", "permissions": ["read"], "expires_in_days": 365}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let expires: chrono::DateTime<chrono::Utc> =
        r.body["expires_at"].as_str().unwrap().parse().unwrap();
    let days = (expires - chrono::Utc::now()).num_days();
    assert!((364..=365).contains(&days), "{days}");
}

#[tokio::test]
async fn invalid_create_requests_are_422_naming_the_field() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let long = "x".repeat(101);
    for (body, field) in [
        (json!({"name": "", "permissions": ["read"]}), "name"),
        (json!({"name": "  ", "permissions": ["read"]}), "name"),
        (json!({"name": long, "permissions": ["read"]}), "name"),
        (json!({"name": "k", "permissions": []}), "permissions"),
        (
            json!({"name": "k", "permissions": ["admin"]}),
            "permissions",
        ),
        (
            json!({"name": "k", "permissions": ["read"], "expires_in_days": 0}),
            "expires_in_days",
        ),
        (
            json!({"name": "k", "permissions": ["read"], "expires_in_days": 366}),
            "expires_in_days",
        ),
    ] {
        let r = create_key(&app, &user, body.clone()).await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec![field], "{body}");
    }
    let listed = app.get("/api/v1/api-keys", &user.access_token).await;
    assert_eq!(listed.header("x-total-count"), Some("0"));
}

#[tokio::test]
async fn demo_users_cannot_create_keys_and_get_an_upgrade_prompt() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let r = create_key(&app, &user, json!({"name": "k", "permissions": ["read"]})).await;
    let p = r.assert_problem(403);
    assert_eq!(p["code"], "api_keys_require_paid_tier");
    assert_eq!(p["upgrade"]["tier_slug"], "monthly");
    assert!(p["upgrade"]["url"].is_string() && p["upgrade"]["message"].is_string());
}

#[tokio::test]
async fn keys_are_listed_newest_first_and_masked() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let other = paid_user(&app).await;
    let (first, raw1) = key_with(&app, &user, &["read"]).await;
    let (second, raw2) = key_with(&app, &user, &["scan"]).await;
    key_with(&app, &other, &["read"]).await;
    let r = app.get("/api/v1/api-keys", &user.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("2"));
    let list = r.body.as_array().unwrap();
    assert_eq!(list[0]["id"], second.to_string());
    assert_eq!(list[1]["id"], first.to_string());
    assert_eq!(
        list[0]["key"],
        format!("sfk_\u{2026}{}", &raw2[raw2.len() - 4..])
    );
    assert_eq!(list[0]["permissions"], json!(["scan"]));
    assert!(list[0]["last_used_at"].is_null());
    for raw in [&raw1, &raw2] {
        assert!(!r.text.contains(&raw[4..]), "raw key listed");
    }
    let page = app
        .get("/api/v1/api-keys?limit=1&offset=1", &user.access_token)
        .await;
    assert_eq!(page.body.as_array().unwrap().len(), 1);
    assert_eq!(page.body[0]["id"], first.to_string());
}

#[tokio::test]
async fn deleting_a_key_returns_204_and_the_key_stops_working() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let (id, raw) = key_with(&app, &user, &["read"]).await;
    assert_eq!(
        with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
            .await
            .status,
        200
    );
    let path = format!("/api/v1/api-keys/{id}");
    let r = app
        .call(Method::DELETE, &path, Some(&user.access_token), None)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
        .await
        .assert_problem(401);
    app.call(Method::DELETE, &path, Some(&user.access_token), None)
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn another_users_key_is_404_on_delete_and_keeps_working() {
    let app = spawn_app().await;
    let alice = paid_user(&app).await;
    let bob = paid_user(&app).await;
    let (id, raw) = key_with(&app, &alice, &["read"]).await;
    app.call(
        Method::DELETE,
        &format!("/api/v1/api-keys/{id}"),
        Some(&bob.access_token),
        None,
    )
    .await
    .assert_problem(404);
    assert_eq!(
        with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn each_permission_allows_its_own_operations_only() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let target = app.new_target(&user, "example.com").await;
    let r = app
        .post(
            "/api/v1/schedules",
            Some(&user.access_token),
            json!({"target_id": target, "cron_expression": "0 9 * * 1"}),
        )
        .await;
    let schedule = r.body["id"].as_str().unwrap().to_string();
    let (_, read) = key_with(&app, &user, &["read"]).await;
    let (_, scan) = key_with(&app, &user, &["scan"]).await;
    let (_, write) = key_with(&app, &user, &["write"]).await;

    let list = |k: String| {
        let app = &app;
        async move { with_key(app, Method::GET, "/api/v1/schedules", &k, None).await }
    };
    let create = |k: String| {
        let app = &app;
        async move {
            with_key(
                app,
                Method::POST,
                "/api/v1/schedules",
                &k,
                Some(json!({"target_id": target, "cron_expression": "0 10 * * 1"})),
            )
            .await
        }
    };
    let run_now = |k: String| {
        let app = &app;
        let path = format!("/api/v1/schedules/{schedule}/run-now");
        async move { with_key(app, Method::POST, &path, &k, None).await }
    };

    // read: GET only.
    assert_eq!(list(read.clone()).await.status, 200);
    for r in [create(read.clone()).await, run_now(read.clone()).await] {
        assert_eq!(r.assert_problem(403)["code"], "insufficient_permission");
    }
    // scan: run schedules now (and start scans), nothing else.
    let r = run_now(scan.clone()).await;
    assert_eq!(r.status, 202, "{}", r.text);
    let r = with_key(
        &app,
        Method::POST,
        "/api/v1/scans",
        &scan,
        Some(json!({"target_id": target})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    for r in [list(scan.clone()).await, create(scan.clone()).await] {
        assert_eq!(r.assert_problem(403)["code"], "insufficient_permission");
    }
    // write: create, change, delete schedules, nothing else.
    let r = create(write.clone()).await;
    assert_eq!(r.status, 201, "{}", r.text);
    for r in [list(write.clone()).await, run_now(write.clone()).await] {
        assert_eq!(r.assert_problem(403)["code"], "insufficient_permission");
    }
}

#[tokio::test]
async fn a_key_acts_as_its_owner_and_records_its_last_use() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let other = paid_user(&app).await;
    app.new_target(&user, "example.com").await;
    let (_, raw) = key_with(&app, &user, &["read"]).await;
    let r = with_key(&app, Method::GET, "/api/v1/targets", &raw, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("1"));
    let usage = with_key(&app, Method::GET, "/api/v1/subscriptions/usage", &raw, None).await;
    assert_eq!(usage.body["targets_used"], 1);
    let listed = app.get("/api/v1/api-keys", &user.access_token).await;
    assert!(
        listed.body[0]["last_used_at"].is_string(),
        "{}",
        listed.text
    );
    let (_, theirs) = key_with(&app, &other, &["read"]).await;
    let r = with_key(&app, Method::GET, "/api/v1/targets", &theirs, None).await;
    assert_eq!(r.header("x-total-count"), Some("0"));
}

#[tokio::test]
async fn an_expired_key_is_401() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let (id, raw) = key_with(&app, &user, &["read"]).await;
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    let r = with_key(&app, Method::GET, "/api/v1/schedules", &raw, None).await;
    r.assert_problem(401);
    assert!(r.body["detail"].as_str().unwrap().contains("expired"));
    assert!(r.header("www-authenticate").is_some());
}

#[tokio::test]
async fn an_unknown_key_is_401() {
    let app = spawn_app().await;
    for key in ["sfk_not-a-real-key", "", "garbage"] {
        with_key(&app, Method::GET, "/api/v1/schedules", key, None)
            .await
            .assert_problem(401);
    }
}

#[tokio::test]
async fn a_key_stops_working_when_its_owner_is_downgraded_to_demo() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let (_, raw) = key_with(&app, &user, &["read"]).await;
    assert_eq!(
        with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
            .await
            .status,
        200
    );
    app.set_tier(user.id, "demo").await;
    let r = with_key(&app, Method::GET, "/api/v1/schedules", &raw, None).await;
    let p = r.assert_problem(403);
    assert_eq!(p["code"], "api_keys_require_paid_tier");
    assert_eq!(p["upgrade"]["tier_slug"], "monthly");
    app.set_tier(user.id, "yearly").await;
    assert_eq!(
        with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_disabled_owners_key_is_401() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let (_, raw) = key_with(&app, &user, &["read"]).await;
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE users SET disabled = true WHERE id = $1",
        &[&user.id],
    )
    .await
    .unwrap();
    with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
        .await
        .assert_problem(401);
}

/// Issue 37, item 4: a key that was sent and refused is a 403 saying
/// keys are not accepted here, not a 401 asking for credentials.
#[tokio::test]
async fn keys_are_refused_on_auth_api_key_and_subscription_changing_endpoints() {
    let app = spawn_app().await;
    let user = paid_user(&app).await;
    let (id, raw) = key_with(&app, &user, &["read", "scan", "write"]).await;
    for (method, path, body) in [
        (Method::GET, "/api/v1/auth/me".to_string(), None),
        (
            Method::PUT,
            "/api/v1/auth/me/password".to_string(),
            Some(json!({"current_password": "x", "new_password": "yyyyyyyy"})),
        ),
        (
            Method::POST,
            "/api/v1/auth/logout".to_string(),
            Some(json!({"refresh_token": user.refresh_token})),
        ),
        (Method::GET, "/api/v1/api-keys".to_string(), None),
        (
            Method::POST,
            "/api/v1/api-keys".to_string(),
            Some(json!({"name": "k", "permissions": ["read"]})),
        ),
        (Method::DELETE, format!("/api/v1/api-keys/{id}"), None),
        (
            Method::POST,
            "/api/v1/subscriptions/checkout".to_string(),
            Some(json!({"tier_slug": "yearly"})),
        ),
        (
            Method::POST,
            "/api/v1/subscriptions/cancel".to_string(),
            None,
        ),
    ] {
        let r = with_key(&app, method, &path, &raw, body).await;
        let problem = r.assert_problem(403);
        assert_eq!(problem["code"], "api_key_not_accepted", "{path}");
        assert_eq!(
            problem["detail"], "API keys are not accepted here; use a Bearer token",
            "{path}"
        );
    }
    // The key was not deleted through itself.
    let listed = app.get("/api/v1/api-keys", &user.access_token).await;
    assert_eq!(listed.header("x-total-count"), Some("1"));
}

#[tokio::test]
async fn admins_can_create_and_use_keys() {
    let app = spawn_app().await;
    let admin = app.new_user().await;
    app.make_admin(admin.id).await;
    let (_, raw) = key_with(&app, &admin, &["read"]).await;
    assert_eq!(
        with_key(&app, Method::GET, "/api/v1/schedules", &raw, None)
            .await
            .status,
        200
    );
}
