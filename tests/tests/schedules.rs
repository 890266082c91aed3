//! Schedules against the real app, Postgres and Redis: cron validation,
//! next_run in UTC, ownership, updates, deletion, and run-now through the
//! scan-creation path (counted against the tier's scan limit).

use chrono::{DateTime, Datelike, Duration, Timelike, Utc, Weekday};
use reqwest::Method;
use scanfleet_tests::{spawn_app, Reply, TestApp, TestUser};
use serde_json::{json, Value};
use uuid::Uuid;

async fn create_schedule(app: &TestApp, user: &TestUser, body: Value) -> Reply {
    app.post("/api/v1/schedules", Some(&user.access_token), body)
        .await
}

async fn put(app: &TestApp, user: &TestUser, id: Uuid, body: Value) -> Reply {
    app.call(
        Method::PUT,
        &format!("/api/v1/schedules/{id}"),
        Some(&user.access_token),
        Some(body),
    )
    .await
}

fn id_of(r: &Reply) -> Uuid {
    r.body["id"].as_str().expect("id").parse().expect("uuid")
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .expect("timestamp")
        .parse()
        .expect("RFC 3339 timestamp")
}

/// A user with a target and a schedule on it.
async fn user_with_schedule(app: &TestApp, cron: &str) -> (TestUser, Uuid, Uuid) {
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    let r = create_schedule(
        app,
        &user,
        json!({"target_id": target, "cron_expression": cron}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    (user, target, id_of(&r))
}

#[tokio::test]
async fn creating_a_schedule_returns_it_enabled_with_the_next_run_in_utc() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    let before = Utc::now();
    let r = create_schedule(
        &app,
        &user,
        json!({"target_id": target, "cron_expression": "0 9 * * 1"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["target_id"], target.to_string());
    assert_eq!(r.body["engine"], "full");
    assert_eq!(r.body["cron_expression"], "0 9 * * 1");
    assert_eq!(r.body["enabled"], true);
    assert!(r.body["last_run_at"].is_null());
    let offset = DateTime::parse_from_rfc3339(r.body["next_run"].as_str().unwrap())
        .expect("RFC 3339")
        .offset()
        .local_minus_utc();
    assert_eq!(offset, 0, "next_run is in UTC");
    let next = time(&r.body["next_run"]);
    assert_eq!(next.weekday(), Weekday::Mon);
    assert_eq!((next.hour(), next.minute(), next.second()), (9, 0, 0));
    assert!(next > before && next <= before + Duration::days(7));
}

#[tokio::test]
async fn a_schedule_takes_any_engine_and_the_day_fields_are_ored() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    let r = create_schedule(
        &app,
        &user,
        json!({"target_id": target, "engine": "quick", "cron_expression": "0 0 1,15 * 1"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["engine"], "quick");
    let next = time(&r.body["next_run"]);
    assert_eq!((next.hour(), next.minute()), (0, 0));
    assert!(
        next.weekday() == Weekday::Mon || next.day() == 1 || next.day() == 15,
        "{next}"
    );
    // A Monday comes within a week, whatever the day of the month.
    assert!(next <= Utc::now() + Duration::days(7));
}

#[tokio::test]
async fn cron_expressions_firing_more_often_than_every_5_minutes_are_422() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    for cron in ["*/4 * * * *", "* * * * *", "0-4 * * * *", "0,2 9 * * *"] {
        let r = create_schedule(
            &app,
            &user,
            json!({"target_id": target, "cron_expression": cron}),
        )
        .await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["cron_expression"], "{cron}");
        assert!(r.text.contains("5 minutes"), "{cron}: {}", r.text);
    }
    let ok = create_schedule(
        &app,
        &user,
        json!({"target_id": target, "cron_expression": "*/5 * * * *"}),
    )
    .await;
    assert_eq!(ok.status, 201, "{}", ok.text);
}

#[tokio::test]
async fn malformed_cron_expressions_and_unknown_engines_are_422_naming_the_field() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    for cron in [
        "",
        "0 9 * *",
        "0 0 9 * * 1",
        "61 * * * *",
        "0 9 * * 8",
        "0 9 * * FUNDAY",
        "0 0 30 2 *",
        "@reboot",
    ] {
        let r = create_schedule(
            &app,
            &user,
            json!({"target_id": target, "cron_expression": cron}),
        )
        .await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["cron_expression"], "{cron:?}");
    }
    let r = create_schedule(
        &app,
        &user,
        json!({"target_id": target, "engine": "deep", "cron_expression": "0 9 * * 1"}),
    )
    .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["engine"]);
    let db = app.state.db.get().await.unwrap();
    let n: i64 = db
        .query_one("SELECT count(*) FROM schedules", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn scheduling_someone_elses_or_a_missing_target_is_404() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let alices = app.new_target(&alice, "example.com").await;
    for target in [alices, Uuid::now_v7()] {
        let r = create_schedule(
            &app,
            &bob,
            json!({"target_id": target, "cron_expression": "0 9 * * 1"}),
        )
        .await;
        r.assert_problem(404);
    }
}

#[tokio::test]
async fn schedules_are_listed_newest_first_with_a_total_count() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let other = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    let mut ids = Vec::new();
    for cron in ["0 1 * * *", "0 2 * * *", "0 3 * * *"] {
        let r = create_schedule(
            &app,
            &user,
            json!({"target_id": target, "cron_expression": cron}),
        )
        .await;
        ids.push(r.body["id"].as_str().unwrap().to_string());
    }
    ids.reverse();
    let r = app.get("/api/v1/schedules", &user.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("3"));
    let listed: Vec<&str> = r
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids);

    let page = app
        .get("/api/v1/schedules?limit=1&offset=1", &user.access_token)
        .await;
    assert_eq!(page.header("x-total-count"), Some("3"));
    assert_eq!(page.body.as_array().unwrap().len(), 1);
    assert_eq!(page.body[0]["id"], ids[1].as_str());

    let bad = app
        .get("/api/v1/schedules?limit=0", &user.access_token)
        .await;
    bad.assert_problem(422);
    assert_eq!(bad.error_fields(), vec!["limit"]);

    let theirs = app.get("/api/v1/schedules", &other.access_token).await;
    assert_eq!(theirs.body, json!([]));
    assert_eq!(theirs.header("x-total-count"), Some("0"));
}

#[tokio::test]
async fn updating_a_schedule_changes_the_given_fields_and_recomputes_next_run() {
    let app = spawn_app().await;
    let (user, _, id) = user_with_schedule(&app, "0 9 * * 1").await;

    let r = put(&app, &user, id, json!({"cron_expression": "30 6 * * 0"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["cron_expression"], "30 6 * * 0");
    assert_eq!(r.body["engine"], "full");
    assert_eq!(r.body["enabled"], true);
    let next = time(&r.body["next_run"]);
    assert_eq!(next.weekday(), Weekday::Sun);
    assert_eq!((next.hour(), next.minute()), (6, 30));

    let r = put(
        &app,
        &user,
        id,
        json!({"enabled": false, "engine": "recon"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["enabled"], false);
    assert_eq!(r.body["engine"], "recon");
    assert_eq!(r.body["cron_expression"], "30 6 * * 0");
    assert_eq!(time(&r.body["next_run"]), next);

    let listed = app.get("/api/v1/schedules", &user.access_token).await;
    assert_eq!(listed.body[0]["enabled"], false);
    assert_eq!(listed.body[0]["engine"], "recon");
}

#[tokio::test]
async fn updates_with_invalid_values_are_422_and_change_nothing() {
    let app = spawn_app().await;
    let (user, _, id) = user_with_schedule(&app, "0 9 * * 1").await;
    for (body, field) in [
        (json!({"cron_expression": "*/2 * * * *"}), "cron_expression"),
        (json!({"cron_expression": "0 9 * *"}), "cron_expression"),
        (json!({"engine": "deep", "enabled": false}), "engine"),
    ] {
        let r = put(&app, &user, id, body).await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec![field]);
    }
    let listed = app.get("/api/v1/schedules", &user.access_token).await;
    assert_eq!(listed.body[0]["cron_expression"], "0 9 * * 1");
    assert_eq!(listed.body[0]["enabled"], true);
}

#[tokio::test]
async fn another_users_schedule_is_404_on_update_delete_and_run_now() {
    let app = spawn_app().await;
    let (alice, _, id) = user_with_schedule(&app, "0 9 * * 1").await;
    let bob = app.new_user().await;
    put(&app, &bob, id, json!({"enabled": false}))
        .await
        .assert_problem(404);
    app.call(
        Method::DELETE,
        &format!("/api/v1/schedules/{id}"),
        Some(&bob.access_token),
        None,
    )
    .await
    .assert_problem(404);
    app.post(
        &format!("/api/v1/schedules/{id}/run-now"),
        Some(&bob.access_token),
        json!({}),
    )
    .await
    .assert_problem(404);
    let listed = app.get("/api/v1/schedules", &alice.access_token).await;
    assert_eq!(listed.body[0]["enabled"], true);
    assert_eq!(listed.header("x-total-count"), Some("1"));
}

#[tokio::test]
async fn deleting_a_schedule_returns_204_and_it_is_gone() {
    let app = spawn_app().await;
    let (user, _, id) = user_with_schedule(&app, "0 9 * * 1").await;
    let path = format!("/api/v1/schedules/{id}");
    let r = app
        .call(Method::DELETE, &path, Some(&user.access_token), None)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    assert!(r.text.is_empty());
    let listed = app.get("/api/v1/schedules", &user.access_token).await;
    assert_eq!(listed.body, json!([]));
    app.call(Method::DELETE, &path, Some(&user.access_token), None)
        .await
        .assert_problem(404);
    put(&app, &user, id, json!({"enabled": true}))
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn run_now_queues_a_scan_of_the_schedules_target_and_engine() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    let r = create_schedule(
        &app,
        &user,
        json!({"target_id": target, "engine": "recon", "cron_expression": "0 9 * * 1"}),
    )
    .await;
    let id = id_of(&r);
    let r = app
        .post(
            &format!("/api/v1/schedules/{id}/run-now"),
            Some(&user.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let scan_id: Uuid = r.body["scan_id"].as_str().unwrap().parse().unwrap();

    let scan = app
        .get(&format!("/api/v1/scans/{scan_id}"), &user.access_token)
        .await;
    assert_eq!(scan.status, 200, "{}", scan.text);
    assert_eq!(scan.body["target_id"], target.to_string());
    assert_eq!(scan.body["engine"], "recon");
    assert_eq!(scan.body["status"], "queued");

    let db = app.state.db.get().await.unwrap();
    let schedule_id: Option<Uuid> = db
        .query_one("SELECT schedule_id FROM scans WHERE id = $1", &[&scan_id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(schedule_id, Some(id));
    let listed = app.get("/api/v1/schedules", &user.access_token).await;
    assert!(listed.body[0]["last_run_at"].is_string());

    let usage = app
        .get("/api/v1/subscriptions/usage", &user.access_token)
        .await;
    assert_eq!(usage.body["scans_used"], 1);
}

#[tokio::test]
async fn run_now_counts_against_the_scan_limit_and_is_403_at_the_limit() {
    let app = spawn_app().await;
    let (user, _, id) = user_with_schedule(&app, "0 9 * * 1").await;
    let path = format!("/api/v1/schedules/{id}/run-now");
    // The demo tier allows 10 scans a month.
    for i in 0..10 {
        let r = app.post(&path, Some(&user.access_token), json!({})).await;
        assert_eq!(r.status, 202, "run {i}: {}", r.text);
    }
    let r = app.post(&path, Some(&user.access_token), json!({})).await;
    let p = r.assert_problem(403);
    assert_eq!(p["code"], "scan_limit_reached");
    assert_eq!(p["upgrade"]["tier_slug"], "monthly");
    let db = app.state.db.get().await.unwrap();
    let n: i64 = db
        .query_one("SELECT count(*) FROM scans WHERE schedule_id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 10);
}

#[tokio::test]
async fn schedule_endpoints_need_credentials() {
    let app = spawn_app().await;
    let id = Uuid::now_v7();
    for (method, path) in [
        (Method::GET, "/api/v1/schedules".to_string()),
        (Method::POST, "/api/v1/schedules".to_string()),
        (Method::PUT, format!("/api/v1/schedules/{id}")),
        (Method::DELETE, format!("/api/v1/schedules/{id}")),
        (Method::POST, format!("/api/v1/schedules/{id}/run-now")),
    ] {
        app.call(method, &path, None, Some(json!({})))
            .await
            .assert_problem(401);
    }
}
