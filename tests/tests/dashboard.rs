//! Dashboard summary and charts, against rows written the way the ingester
//! writes them (scan rows whose status and counters change over time).

use chrono::{Duration, Utc};
use scanfleet_tests::{spawn_app, TestApp};
use uuid::Uuid;

async fn target(app: &TestApp, user: Uuid, domain: &str) -> Uuid {
    let id = Uuid::now_v7();
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "INSERT INTO targets (id, user_id, domain) VALUES ($1, $2, $3)",
        &[&id, &user, &domain],
    )
    .await
    .unwrap();
    id
}

/// A scan created `age` ago with the given status and (findings, critical, high) counts.
async fn scan(
    app: &TestApp,
    user: Uuid,
    target: Uuid,
    status: &str,
    age: Duration,
    counts: (i32, i32, i32),
) -> Uuid {
    let id = Uuid::now_v7();
    let created = Utc::now() - age;
    let completed =
        (status == "completed" || status == "failed").then_some(created + Duration::minutes(5));
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "INSERT INTO scans (id, user_id, target_id, engine, status, progress, findings_count,
                            critical_count, high_count, created_at, completed_at)
         VALUES ($1, $2, $3, 'full', $4, 40, $5, $6, $7, $8, $9)",
        &[
            &id, &user, &target, &status, &counts.0, &counts.1, &counts.2, &created, &completed,
        ],
    )
    .await
    .unwrap();
    id
}

#[tokio::test]
async fn a_new_user_has_an_empty_dashboard() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let r = app.get("/api/v1/dashboard/summary", &u.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    for key in [
        "total_targets",
        "total_scans",
        "active_scans",
        "total_vulnerabilities",
        "critical_count",
        "high_count",
    ] {
        assert_eq!(r.body[key], 0, "{key}");
    }
    assert_eq!(r.body["recent_scans"].as_array().unwrap().len(), 0);
    let r = app.get("/api/v1/dashboard/charts", &u.access_token).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn summary_counts_every_scan_and_lists_the_last_five() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let other = app.new_user().await;
    let a = target(&app, u.id, "a.example.com").await;
    let b = target(&app, u.id, "b.example.com").await;
    let foreign = target(&app, other.id, "c.example.com").await;
    scan(
        &app,
        other.id,
        foreign,
        "completed",
        Duration::hours(1),
        (50, 5, 5),
    )
    .await;
    let statuses = [
        "completed",
        "failed",
        "running",
        "pending",
        "queued",
        "stopped",
        "completed",
    ];
    let mut ids = vec![];
    for (i, status) in statuses.iter().enumerate() {
        let t = if i % 2 == 0 { a } else { b };
        ids.push(
            scan(
                &app,
                u.id,
                t,
                status,
                Duration::minutes(70 - i as i64 * 10),
                (i as i32 + 1, 1, 2),
            )
            .await,
        );
    }
    let r = app.get("/api/v1/dashboard/summary", &u.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["total_targets"], 2);
    assert_eq!(r.body["total_scans"], 7);
    assert_eq!(r.body["active_scans"], 2, "pending and running only");
    assert_eq!(r.body["total_vulnerabilities"], 1 + 2 + 3 + 4 + 5 + 6 + 7);
    assert_eq!(r.body["critical_count"], 7);
    assert_eq!(r.body["high_count"], 14);
    let recent = r.body["recent_scans"].as_array().unwrap();
    assert_eq!(recent.len(), 5);
    let expected: Vec<String> = ids.iter().rev().take(5).map(|i| i.to_string()).collect();
    let got: Vec<String> = recent
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, expected, "newest first");
    assert_eq!(recent[0]["status"], "completed");
    assert_eq!(recent[0]["progress"], 100, "completed scans read 100");
    assert_eq!(recent[0]["target_domain"], "a.example.com");
    assert_eq!(recent[1]["progress"], 40);
    for key in [
        "id",
        "target_domain",
        "engine",
        "status",
        "progress",
        "created_at",
        "findings_count",
        "critical_count",
        "high_count",
        "medium_count",
        "low_count",
    ] {
        assert!(recent[0].get(key).is_some(), "{key}");
    }
}

#[tokio::test]
async fn deleting_a_target_takes_its_scans_out_of_the_totals() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let a = target(&app, u.id, "a.example.com").await;
    let b = target(&app, u.id, "b.example.com").await;
    scan(&app, u.id, a, "completed", Duration::hours(2), (10, 3, 1)).await;
    scan(&app, u.id, b, "completed", Duration::hours(1), (4, 1, 0)).await;
    let db = app.state.db.get().await.unwrap();
    db.execute("DELETE FROM targets WHERE id = $1", &[&a])
        .await
        .unwrap();
    let r = app.get("/api/v1/dashboard/summary", &u.access_token).await;
    assert_eq!(r.body["total_scans"], 1);
    assert_eq!(r.body["total_vulnerabilities"], 4);
    assert_eq!(r.body["critical_count"], 1);
    let charts = app.get("/api/v1/dashboard/charts", &u.access_token).await;
    let total: i64 = charts
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["vulnerabilities"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 4);
}

#[tokio::test]
async fn charts_cover_30_days_and_omit_days_without_activity() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let t = target(&app, u.id, "a.example.com").await;
    scan(&app, u.id, t, "completed", Duration::days(3), (6, 0, 0)).await;
    scan(&app, u.id, t, "completed", Duration::days(3), (2, 0, 0)).await;
    scan(&app, u.id, t, "failed", Duration::days(1), (9, 0, 0)).await;
    scan(&app, u.id, t, "completed", Duration::days(45), (100, 0, 0)).await;
    scan(&app, u.id, t, "completed", Duration::days(29), (1, 0, 0)).await;
    let r = app.get("/api/v1/dashboard/charts", &u.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let days = r.body.as_array().unwrap();
    let day = |ago: i64| (Utc::now() - Duration::days(ago)).date_naive().to_string();
    // Creation and completion fall on the same day here, except at midnight.
    let find = |date: String| days.iter().find(|d| d["date"] == date.as_str()).cloned();
    let three = find(day(3)).expect("three days ago");
    assert_eq!(three["scans"], 2);
    assert_eq!(three["vulnerabilities"], 8);
    let one = find(day(1)).expect("yesterday");
    assert_eq!(one["scans"], 1);
    assert_eq!(
        one["vulnerabilities"], 0,
        "failed scans are not completed scans"
    );
    assert!(find(day(45)).is_none(), "older than 30 days");
    assert!(find(day(29)).is_some(), "29 days ago is inside the window");
    assert_eq!(days.len(), 3, "{days:?}");
    let dates: Vec<&str> = days.iter().map(|d| d["date"].as_str().unwrap()).collect();
    let mut sorted = dates.clone();
    sorted.sort();
    assert_eq!(dates, sorted, "oldest first");
}

#[tokio::test]
async fn a_scan_completing_later_counts_on_its_completion_day() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let t = target(&app, u.id, "a.example.com").await;
    let s = scan(&app, u.id, t, "running", Duration::days(2), (0, 0, 0)).await;
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE scans SET findings_count = 5, critical_count = 2 WHERE id = $1",
        &[&s],
    )
    .await
    .unwrap();
    db.execute(
        "UPDATE scans SET status = 'completed', completed_at = now() WHERE id = $1",
        &[&s],
    )
    .await
    .unwrap();
    let r = app.get("/api/v1/dashboard/charts", &u.access_token).await;
    let days = r.body.as_array().unwrap();
    let today = Utc::now().date_naive().to_string();
    let created = (Utc::now() - Duration::days(2)).date_naive().to_string();
    let today_row = days
        .iter()
        .find(|d| d["date"] == today.as_str())
        .expect("today");
    assert_eq!(today_row["vulnerabilities"], 5);
    assert_eq!(today_row["scans"], 0);
    let created_row = days
        .iter()
        .find(|d| d["date"] == created.as_str())
        .expect("creation day");
    assert_eq!(created_row["scans"], 1);
    let summary = app.get("/api/v1/dashboard/summary", &u.access_token).await;
    assert_eq!(summary.body["critical_count"], 2);
    assert_eq!(summary.body["active_scans"], 0);
}

#[tokio::test]
async fn the_dashboard_needs_credentials() {
    let app = spawn_app().await;
    let r = app
        .call(
            reqwest::Method::GET,
            "/api/v1/dashboard/summary",
            None,
            None,
        )
        .await;
    r.assert_problem(401);
}

/// The rollups as counted from the scans themselves (the backfill of
/// migration 0004), beside the kept ones: (kept, counted).
async fn rollups(app: &TestApp, user: Uuid) -> (Vec<String>, Vec<String>) {
    let db = app.state.db.get().await.unwrap();
    let read = |sql: &'static str| {
        let db = &db;
        async move {
            db.query(sql, &[&user])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<String>>()
        }
    };
    let kept = [
        read(
            "SELECT format('totals %s %s %s %s', sum(scans), sum(findings_count),
                           sum(critical_count), sum(high_count))
             FROM user_scan_totals WHERE user_id = $1 HAVING count(*) > 0",
        )
        .await,
        read(
            "SELECT format('%s %s %s', day, sum(scans), sum(vulnerabilities))
             FROM user_daily_activity WHERE user_id = $1
             GROUP BY day HAVING sum(scans) <> 0 OR sum(vulnerabilities) <> 0 ORDER BY day",
        )
        .await,
    ]
    .concat();
    let counted = [
        read(
            "SELECT format('totals %s %s %s %s', count(*), sum(findings_count),
                           sum(critical_count), sum(high_count))
             FROM scans WHERE user_id = $1",
        )
        .await,
        read(
            "SELECT format('%s %s %s', day, scans, vulns) FROM (
                 SELECT day, sum(scans) AS scans, sum(vulns) AS vulns FROM (
                     SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS scans,
                            0 AS vulns
                     FROM scans WHERE user_id = $1 GROUP BY 1
                     UNION ALL
                     SELECT (completed_at AT TIME ZONE 'UTC')::date, 0, sum(findings_count)
                     FROM scans WHERE user_id = $1 AND status = 'completed'
                       AND completed_at IS NOT NULL GROUP BY 1) a
                 GROUP BY day) b
             WHERE scans <> 0 OR vulns <> 0 ORDER BY day",
        )
        .await,
    ]
    .concat();
    (kept, counted)
}

#[tokio::test]
async fn the_rollups_follow_every_change_of_a_scans_life_and_skip_the_others() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = target(&app, user.id, "rollups.example.com").await;
    let a = scan(&app, user.id, t, "queued", Duration::days(2), (0, 0, 0)).await;
    let b = scan(&app, user.id, t, "queued", Duration::zero(), (0, 0, 0)).await;
    let db = app.state.db.get().await.unwrap();
    let step = |sql: &'static str, id: Uuid| {
        let db = &db;
        async move {
            db.execute(sql, &[&id]).await.unwrap();
        }
    };
    // What the ingester does to a scan as it runs, then completes, and to
    // one that fails; then a completed scan is reopened by hand and moved.
    for (sql, id) in [
        ("UPDATE scans SET status = 'pending' WHERE id = $1", a),
        ("UPDATE scans SET status = 'running', progress = 10 WHERE id = $1", a),
        ("UPDATE scans SET findings_count = findings_count + 7, critical_count = 2, high_count = 3 WHERE id = $1", a),
        ("UPDATE scans SET status = 'running' WHERE id = $1", a),
        ("UPDATE scans SET status = 'completed', completed_at = now() WHERE id = $1", a),
        ("UPDATE scans SET status = 'running', findings_count = 4 WHERE id = $1", b),
        ("UPDATE scans SET status = 'failed', completed_at = now() WHERE id = $1", b),
        ("UPDATE scans SET status = 'running', completed_at = NULL WHERE id = $1", a),
        ("UPDATE scans SET status = 'completed', completed_at = now() - interval '1 day' WHERE id = $1", a),
    ] {
        step(sql, id).await;
        let (kept, counted) = rollups(&app, user.id).await;
        assert_eq!(kept, counted, "after {sql}");
    }
    let (kept, _) = rollups(&app, user.id).await;
    assert_eq!(kept[0], "totals 2 11 2 3", "{kept:?}");
    // A change of status between two states that are not `completed`, and
    // an update of other columns, leave the rollup rows untouched.
    let writes = |table: &'static str| {
        let db = &db;
        async move {
            db.query_one(
                "SELECT n_tup_ins + n_tup_upd FROM pg_stat_xact_user_tables
                 WHERE relname = $1",
                &[&table],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };
    let touched = || writes("user_scan_totals");
    db.batch_execute("BEGIN").await.unwrap();
    let before = touched().await;
    let days_before = writes("user_daily_activity").await;
    step("UPDATE scans SET status = 'pending' WHERE id = $1", b).await;
    step(
        "UPDATE scans SET status = 'running', progress = 50 WHERE id = $1",
        b,
    )
    .await;
    assert_eq!(
        touched().await,
        before,
        "status changes outside `completed`"
    );
    step(
        "UPDATE scans SET findings_count = findings_count + 1 WHERE id = $1",
        b,
    )
    .await;
    assert_eq!(
        touched().await,
        before + 1,
        "a count that changed moves the totals once"
    );
    assert_eq!(
        writes("user_daily_activity").await,
        days_before,
        "the counts of a scan not completed leave its days alone"
    );
    db.batch_execute("COMMIT").await.unwrap();
}

/// A scan's rollup stripe, as migration 0047 chooses it.
fn stripe(scan: Uuid) -> u8 {
    scan.as_bytes()[15] & 15
}

#[tokio::test]
async fn a_new_scan_does_not_wait_for_another_scan_of_its_user_being_recorded() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = target(&app, user.id, "stripes.example.com").await;
    let running = scan(&app, user.id, t, "running", Duration::zero(), (0, 0, 0)).await;
    // The ingester's transaction recording the running scan: its counts
    // moved, and it has not committed.
    let mut recording = app.state.db.get().await.unwrap();
    let tx = recording.transaction().await.unwrap();
    tx.execute(
        "UPDATE scans SET findings_count = findings_count + 3, high_count = high_count + 1
         WHERE id = $1",
        &[&running],
    )
    .await
    .unwrap();
    tx.execute(
        "UPDATE scans SET status = 'completed', completed_at = now() WHERE id = $1",
        &[&running],
    )
    .await
    .unwrap();
    // A new scan of the same user, on another stripe, is inserted at once:
    // it would wait for the commit if the user's rollup rows were shared.
    let new_id = std::iter::repeat_with(Uuid::now_v7)
        .find(|id| stripe(*id) != stripe(running))
        .unwrap();
    let other = app.state.db.get().await.unwrap();
    other
        .batch_execute("SET lock_timeout = '2s'")
        .await
        .unwrap();
    other
        .execute(
            "INSERT INTO scans (id, user_id, target_id, engine, status) VALUES ($1, $2, $3, 'full', 'queued')",
            &[&new_id, &user.id, &t],
        )
        .await
        .expect("the insert does not wait for the other scan's transaction");
    tx.commit().await.unwrap();
    let (kept, counted) = rollups(&app, user.id).await;
    assert_eq!(kept, counted);
    assert_eq!(kept[0], "totals 2 3 0 1", "{kept:?}");
    // The dashboard adds the stripes up.
    let r = app
        .get("/api/v1/dashboard/summary", &user.access_token)
        .await;
    assert_eq!(r.body["total_scans"], 2, "{}", r.text);
    assert_eq!(r.body["total_vulnerabilities"], 3, "{}", r.text);
    assert_eq!(r.body["high_count"], 1, "{}", r.text);
    let r = app
        .get("/api/v1/dashboard/charts", &user.access_token)
        .await;
    let days = r.body.as_array().unwrap();
    assert_eq!(days.len(), 1, "{}", r.text);
    assert_eq!(days[0]["scans"], 2, "{}", r.text);
    assert_eq!(days[0]["vulnerabilities"], 3, "{}", r.text);
}
