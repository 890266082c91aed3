//! Notifications: created by the storage functions the ingester calls, read
//! and marked read through the API.

use reqwest::Method;
use scanfleet_core::store::notifications;
use scanfleet_tests::{spawn_app, TestApp};
use uuid::Uuid;

/// A completed scan with finding counts (total, critical, high, medium, low, info).
async fn finished_scan(app: &TestApp, user: Uuid, counts: [i32; 6]) -> Uuid {
    let db = app.state.db.get().await.unwrap();
    let target = Uuid::now_v7();
    db.execute(
        "INSERT INTO targets (id, user_id, domain) VALUES ($1, $2, $3)",
        &[&target, &user, &format!("t{}.example.com", target.simple())],
    )
    .await
    .unwrap();
    let scan = Uuid::now_v7();
    db.execute(
        "INSERT INTO scans (id, user_id, target_id, engine, status, findings_count, critical_count,
                            high_count, medium_count, low_count, info_count, completed_at)
         VALUES ($1, $2, $3, 'full', 'completed', $4, $5, $6, $7, $8, $9, now())",
        &[
            &scan, &user, &target, &counts[0], &counts[1], &counts[2], &counts[3], &counts[4],
            &counts[5],
        ],
    )
    .await
    .unwrap();
    scan
}

#[tokio::test]
async fn scan_complete_carries_counts_and_is_created_once() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let scan = finished_scan(&app, u.id, [10, 1, 2, 3, 1, 3]).await;
    let db = app.state.db.get().await.unwrap();
    assert!(notifications::create_scan_complete(&db, scan)
        .await
        .unwrap());
    // A replayed terminal event does not notify twice.
    assert!(!notifications::create_scan_complete(&db, scan)
        .await
        .unwrap());

    let r = app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("1"));
    let n = &r.body[0];
    assert_eq!(n["type"], "scan_complete");
    assert_eq!(n["scan_id"], scan.to_string());
    assert_eq!(n["read"], false);
    assert_eq!(n["data"]["total_findings"], 10);
    assert_eq!(n["data"]["critical"], 1);
    assert_eq!(n["data"]["high"], 2);
    assert_eq!(n["data"]["medium"], 3);
    assert_eq!(n["data"]["low"], 1);
    assert_eq!(n["data"]["info"], 3);
    assert!(n["message"].as_str().unwrap().contains("10 findings"));
}

#[tokio::test]
async fn scan_failed_carries_the_error_message() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let scan = finished_scan(&app, u.id, [0; 6]).await;
    let db = app.state.db.get().await.unwrap();
    notifications::create_scan_failed(&db, scan, "target refused: private address")
        .await
        .unwrap();
    let r = app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(r.body[0]["type"], "scan_failed");
    assert_eq!(
        r.body[0]["data"]["error"],
        "target refused: private address"
    );
    assert!(r.body[0]["message"]
        .as_str()
        .unwrap()
        .contains("private address"));
}

#[tokio::test]
async fn reading_notifications_one_by_one_and_all_at_once() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let db = app.state.db.get().await.unwrap();
    for _ in 0..3 {
        let scan = finished_scan(&app, u.id, [1, 0, 0, 0, 0, 1]).await;
        notifications::create_scan_complete(&db, scan)
            .await
            .unwrap();
    }
    let count = app
        .get("/api/v1/notifications/unread-count", &u.access_token)
        .await;
    assert_eq!(count.body["unread_count"], 3);

    let list = app.get("/api/v1/notifications", &u.access_token).await;
    let first = list.body[0]["id"].as_str().unwrap().to_string();
    let r = app
        .call(
            Method::PUT,
            &format!("/api/v1/notifications/{first}/read"),
            Some(&u.access_token),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["read"], true);
    assert_eq!(
        app.get("/api/v1/notifications/unread-count", &u.access_token)
            .await
            .body["unread_count"],
        2
    );
    let unread = app
        .get("/api/v1/notifications?unread=true", &u.access_token)
        .await;
    assert_eq!(unread.body.as_array().unwrap().len(), 2);
    assert_eq!(unread.header("x-total-count"), Some("2"));
    assert!(unread
        .body
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["read"] == false));

    let r = app
        .post(
            "/api/v1/notifications/read-all",
            Some(&u.access_token),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["updated"], 2);
    assert_eq!(
        app.get("/api/v1/notifications/unread-count", &u.access_token)
            .await
            .body["unread_count"],
        0
    );
    let all = app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(all.body.as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn another_users_notification_is_a_404() {
    let app = spawn_app().await;
    let a = app.new_user().await;
    let b = app.new_user().await;
    let scan = finished_scan(&app, a.id, [1, 1, 0, 0, 0, 0]).await;
    let db = app.state.db.get().await.unwrap();
    notifications::create_scan_complete(&db, scan)
        .await
        .unwrap();
    let id = app.get("/api/v1/notifications", &a.access_token).await.body[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.call(
        Method::PUT,
        &format!("/api/v1/notifications/{id}/read"),
        Some(&b.access_token),
        None,
    )
    .await
    .assert_problem(404);
    assert_eq!(
        app.get("/api/v1/notifications", &b.access_token)
            .await
            .body
            .as_array()
            .unwrap()
            .len(),
        0
    );
    app.post(
        "/api/v1/notifications/read-all",
        Some(&b.access_token),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(
        app.get("/api/v1/notifications/unread-count", &a.access_token)
            .await
            .body["unread_count"],
        1
    );
    app.call(
        Method::PUT,
        &format!("/api/v1/notifications/{}/read", Uuid::now_v7()),
        Some(&a.access_token),
        None,
    )
    .await
    .assert_problem(404);
}

#[tokio::test]
async fn notification_lists_validate_paging() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app
        .get("/api/v1/notifications?limit=0", &u.access_token)
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["limit"]);
    let r = app
        .get("/api/v1/notifications?offset=-3", &u.access_token)
        .await;
    assert_eq!(r.error_fields(), vec!["offset"]);
}
