//! Scans against the real app, Postgres and Redis: creation with the queue
//! push, tier scan limits (with the race), listing, detail, stop with its
//! Redis publication and intel ordering (reports: `reports.rs`).

use std::time::Duration;

use fred::interfaces::{ClientLike, EventInterface, KeysInterface, PubsubInterface};
use fred::prelude::{Builder, Config as RedisConfig};
use reqwest::Method;
use scanfleet_common::events::{FindingEvent, ScanStatus};
use scanfleet_common::jobs::{Engine, ScanJob};
use scanfleet_common::Severity;
use scanfleet_core::store::{findings, scans, subscriptions};
use scanfleet_tests::{spawn_app, Reply, TestApp, TestUser};
use serde_json::{json, Value};
use uuid::Uuid;

async fn start(app: &TestApp, user: &TestUser, body: Value) -> Reply {
    app.post("/api/v1/scans", Some(&user.access_token), body)
        .await
}

async fn scan(app: &TestApp, user: &TestUser, target_id: Uuid) -> Uuid {
    let r = start(app, user, json!({ "target_id": target_id })).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_str().unwrap().parse().unwrap()
}

/// The jobs waiting in the scan queue, in push order.
async fn queued_jobs(app: &TestApp) -> Vec<ScanJob> {
    let mut jobs = Vec::new();
    for id in app.state.scan_queue.waiting().await.unwrap() {
        jobs.push(
            app.state
                .scan_queue
                .job(id)
                .await
                .unwrap()
                .expect("a ScanJob"),
        );
    }
    jobs
}

fn finding(template: &str, severity: Severity, host: &str, path: &str) -> FindingEvent {
    FindingEvent {
        template_id: template.into(),
        name: format!("{template} name"),
        severity,
        host: host.into(),
        matched_at: format!("https://{host}{path}"),
        description: format!("{template} description"),
        remediation: format!("{template} remediation"),
        extracted_results: vec![],
        matcher_name: None,
        classification: Default::default(),
        evidence: None,
    }
}

async fn add_findings(app: &TestApp, scan_id: Uuid, user: &TestUser, list: &[FindingEvent]) {
    let db = app.state.db.get().await.unwrap();
    findings::insert_findings(&db, scan_id, user.id, list)
        .await
        .unwrap();
}

#[tokio::test]
async fn creating_a_scan_queues_a_row_and_pushes_its_job() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    let r = start(&app, &user, json!({ "target_id": t })).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["status"], "queued");
    assert_eq!(r.body["engine"], "full");
    assert_eq!(r.body["target_id"], t.to_string());
    assert_eq!(r.body["domain"], "example.com");
    assert_eq!(r.body["progress"], 0);
    assert!(r.body["created_at"].is_string());
    let id: Uuid = r.body["id"].as_str().unwrap().parse().unwrap();

    let jobs = queued_jobs(&app).await;
    assert_eq!(
        jobs,
        vec![ScanJob {
            scan_id: id,
            target_id: t,
            domain: "example.com".into(),
            engine: Engine::Full,
            templates: vec![],
            // The demo tier's ceiling, which the target took at creation.
            max_rps_per_host: Some(50),
        }]
    );
}

#[tokio::test]
async fn quick_recon_and_auto_engines_are_accepted_and_others_are_a_422_naming_engine() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    // `auto`: issue 35.
    for engine in ["quick", "recon", "auto"] {
        let r = start(&app, &user, json!({ "target_id": t, "engine": engine })).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["engine"], engine);
    }
    for engine in ["deep", "FULL", ""] {
        let r = start(&app, &user, json!({ "target_id": t, "engine": engine })).await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["engine"]);
    }
    let engines: Vec<Engine> = queued_jobs(&app).await.iter().map(|j| j.engine).collect();
    assert_eq!(engines, vec![Engine::Quick, Engine::Recon, Engine::Auto]);
}

#[tokio::test]
async fn scanning_another_users_or_a_missing_target_is_a_404() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let t = app.new_target(&alice, "example.com").await;
    start(&app, &bob, json!({ "target_id": t }))
        .await
        .assert_problem(404);
    start(&app, &alice, json!({ "target_id": Uuid::now_v7() }))
        .await
        .assert_problem(404);
    assert!(queued_jobs(&app).await.is_empty());
    let r = start(&app, &alice, json!({})).await;
    assert!(r.status.is_client_error(), "{}", r.status);
}

#[tokio::test]
async fn a_failed_queue_push_fails_the_scan_and_answers_503() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    // A string where the queue keeps its job hash: the push script errors.
    let data_key = app.state.keys.scan_queue_jobs();
    let _: () = app
        .state
        .redis
        .set(data_key, "not a hash", None, None, false)
        .await
        .unwrap();
    let r = start(&app, &user, json!({ "target_id": t })).await;
    r.assert_problem(503);
    let r = app.get("/api/v1/scans", &user.access_token).await;
    assert_eq!(r.header("x-total-count"), Some("1"));
    assert_eq!(r.body[0]["status"], "failed");
    assert!(r.body[0]["error"].as_str().unwrap().contains("queued"));
    assert!(r.body[0]["completed_at"].is_string());
}

#[tokio::test]
async fn the_demo_scan_limit_is_ten_then_403_with_an_upgrade_prompt() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    for _ in 0..10 {
        scan(&app, &user, t).await;
    }
    let r = start(&app, &user, json!({ "target_id": t })).await;
    let body = r.assert_problem(403);
    assert_eq!(body["code"], "scan_limit_reached");
    assert_eq!(body["upgrade"]["tier_slug"], "monthly");
    // Issue 37, item 6: the checkout, the action that lifts the limit;
    // the tier list beside it.
    assert_eq!(
        body["upgrade"]["url"],
        format!(
            "{}/api/v1/subscriptions/checkout",
            app.state.settings.api.public_url
        )
    );
    assert_eq!(
        body["upgrade"]["tiers_url"],
        format!(
            "{}/api/v1/subscriptions/tiers",
            app.state.settings.api.public_url
        )
    );
    assert!(!body["upgrade"]["message"].as_str().unwrap().is_empty());
    let r = app.get("/api/v1/scans", &user.access_token).await;
    assert_eq!(r.header("x-total-count"), Some("10"));
    assert_eq!(queued_jobs(&app).await.len(), 10);
}

async fn set_usage(app: &TestApp, user: &TestUser, scans_used: i32) {
    let db = app.state.db.get().await.unwrap();
    let tier: String = db
        .query_one("SELECT tier_slug FROM users WHERE id = $1", &[&user.id])
        .await
        .unwrap()
        .get(0);
    let (start, _) = subscriptions::current_period(&db, user.id, &tier)
        .await
        .unwrap();
    db.execute(
        "INSERT INTO scan_usage (user_id, period_start, scans) VALUES ($1, $2, $3)
         ON CONFLICT (user_id, period_start) DO UPDATE SET scans = $3",
        &[&user.id, &start, &scans_used],
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn two_concurrent_creates_at_one_below_the_limit_yield_exactly_one_scan() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    for round in 0..5 {
        set_usage(&app, &user, 9).await;
        let body = json!({ "target_id": t });
        let (a, b) = tokio::join!(start(&app, &user, body.clone()), start(&app, &user, body));
        let mut statuses = [a.status.as_u16(), b.status.as_u16()];
        statuses.sort();
        assert_eq!(
            statuses,
            [201, 403],
            "round {round}: {} / {}",
            a.text,
            b.text
        );
        let refused = if a.status == 403 { &a } else { &b };
        assert_eq!(refused.body["code"], "scan_limit_reached");
        let r = app.get("/api/v1/scans", &user.access_token).await;
        assert_eq!(
            r.header("x-total-count"),
            Some(format!("{}", round + 1).as_str())
        );
    }
}

#[tokio::test]
async fn paid_tiers_count_scans_in_the_billing_period_and_admins_are_unlimited() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let db = app.state.db.get().await.unwrap();
    let period_start: chrono::DateTime<chrono::Utc> = db
        .query_one(
            "INSERT INTO subscriptions (user_id, tier_slug, current_period_start, current_period_end)
             VALUES ($1, 'monthly', date_trunc('second', now()) - interval '3 days',
                     date_trunc('second', now()) + interval '27 days')
             RETURNING current_period_start",
            &[&user.id],
        )
        .await
        .unwrap()
        .get(0);
    let t = app.new_target(&user, "example.com").await;
    scan(&app, &user, t).await;
    let used: i32 = db
        .query_one(
            "SELECT scans FROM scan_usage WHERE user_id = $1 AND period_start = $2",
            &[&user.id, &period_start],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(used, 1);
    set_usage(&app, &user, 60).await;
    let body = start(&app, &user, json!({ "target_id": t }))
        .await
        .assert_problem(403)
        .clone();
    assert_eq!(body["upgrade"]["tier_slug"], "yearly");

    let admin = app.new_user().await;
    app.make_admin(admin.id).await;
    let t = app.new_target(&admin, "admin.example.com").await;
    set_usage(&app, &admin, 1_000_000).await;
    scan(&app, &admin, t).await;
}

/// A lapsed paid subscription (set to end, its period over): the count of
/// a new scan reads the tier as the settle left it, in the same round trip
/// (the scheduler's path, with no request that settled it first).
#[tokio::test]
async fn a_scan_of_a_lapsed_subscription_counts_on_the_demo_tier_in_the_calendar_month() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let t = app.new_target(&user, "example.com").await;
    let mut db = app.state.db.get().await.unwrap();
    db.execute(
        "INSERT INTO subscriptions (user_id, tier_slug, status, current_period_start,
                                    current_period_end, cancel_at_period_end)
         VALUES ($1, 'monthly', 'active', now() - interval '31 days', now() - interval '1 day',
                 true)",
        &[&user.id],
    )
    .await
    .unwrap();
    let (month, _) = subscriptions::calendar_month(chrono::Utc::now());
    // The demo tier's ten used this month: refused, and nothing written.
    db.execute(
        "INSERT INTO scan_usage (user_id, period_start, scans) VALUES ($1, $2, 10)",
        &[&user.id, &month],
    )
    .await
    .unwrap();
    match scans::insert_counted(&mut db, user.id, t, Engine::Quick, None)
        .await
        .unwrap()
    {
        scans::Counted::LimitReached { tier_slug, limit } => {
            assert_eq!((tier_slug.as_str(), limit), ("demo", 10));
        }
        scans::Counted::Created(scan) => panic!("counted on the lapsed tier: {scan:?}"),
    }
    let tier: String = db
        .query_one("SELECT tier_slug FROM users WHERE id = $1", &[&user.id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tier, "monthly", "a refused count rolls the settle back");
    // One left: counted in the calendar month, the user now on demo.
    db.execute(
        "UPDATE scan_usage SET scans = 9 WHERE user_id = $1",
        &[&user.id],
    )
    .await
    .unwrap();
    let created = scans::insert_counted(&mut db, user.id, t, Engine::Quick, None)
        .await
        .unwrap();
    assert!(matches!(created, scans::Counted::Created(_)), "{created:?}");
    let row = db
        .query_one(
            "SELECT u.tier_slug, su.scans FROM users u
             JOIN scan_usage su ON su.user_id = u.id AND su.period_start = $2
             WHERE u.id = $1",
            &[&user.id, &month],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0).as_str(), row.get::<_, i32>(1)),
        ("demo", 10)
    );
}

/// The count and the insert are one statement: a target that is not the
/// user's is not found and counts nothing.
#[tokio::test]
async fn a_scan_of_another_users_target_is_not_found_and_not_counted() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let bobs = app.new_target(&bob, "bob.example.com").await;
    let mut db = app.state.db.get().await.unwrap();
    let err = scans::insert_counted(&mut db, alice.id, bobs, Engine::Quick, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, scanfleet_core::Error::NotFound("target")),
        "{err:?}"
    );
    let counted: i64 = db
        .query_one(
            "SELECT count(*) FROM scan_usage WHERE user_id = $1",
            &[&alice.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(counted, 0);
    let scans_of_alice: i64 = db
        .query_one(
            "SELECT count(*) FROM scans WHERE user_id = $1",
            &[&alice.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(scans_of_alice, 0);
}

#[tokio::test]
async fn scans_are_listed_newest_first_with_filters_and_a_total_count() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let t1 = app.new_target(&alice, "one.example.com").await;
    let t2 = app.new_target(&alice, "two.example.com").await;
    let s1 = scan(&app, &alice, t1).await;
    let s2 = scan(&app, &alice, t2).await;
    let s3 = scan(&app, &alice, t1).await;
    let tb = app.new_target(&bob, "bob.example.com").await;
    scan(&app, &bob, tb).await;
    {
        let db = app.state.db.get().await.unwrap();
        assert!(scans::set_scan_status(&db, s3, ScanStatus::Running, None)
            .await
            .unwrap());
    }
    let ids = |r: &Reply| -> Vec<String> {
        r.body
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    let r = app.get("/api/v1/scans", &alice.access_token).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("3"));
    assert_eq!(ids(&r), [s3, s2, s1].map(|s| s.to_string()));
    let r = app
        .get(
            &format!("/api/v1/scans?target_id={t1}"),
            &alice.access_token,
        )
        .await;
    assert_eq!(r.header("x-total-count"), Some("2"));
    assert_eq!(ids(&r), [s3, s1].map(|s| s.to_string()));
    let r = app
        .get("/api/v1/scans?status=queued", &alice.access_token)
        .await;
    assert_eq!(ids(&r), [s2, s1].map(|s| s.to_string()));
    let r = app
        .get(
            &format!("/api/v1/scans?status=running&target_id={t1}"),
            &alice.access_token,
        )
        .await;
    assert_eq!(ids(&r), [s3.to_string()]);
    let r = app
        .get("/api/v1/scans?limit=1&offset=2", &alice.access_token)
        .await;
    assert_eq!(ids(&r), [s1.to_string()]);
    assert_eq!(r.header("x-total-count"), Some("3"));
    let r = app
        .get("/api/v1/scans?status=done", &alice.access_token)
        .await;
    r.assert_problem(422);
    assert_eq!(r.error_fields(), vec!["status"]);
    let r = app
        .get(
            &format!("/api/v1/scans?target_id={tb}"),
            &alice.access_token,
        )
        .await;
    assert_eq!(r.header("x-total-count"), Some("0"));
}

#[tokio::test]
async fn scan_detail_carries_findings_in_both_shapes_and_a_summary() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let t = app.new_target(&alice, "example.com").await;
    let s = scan(&app, &alice, t).await;
    add_findings(
        &app,
        s,
        &alice,
        &[
            finding("git-config", Severity::High, "example.com", "/.git/config"),
            finding("tech-nginx", Severity::Info, "www.example.com", "/"),
            finding("env-file", Severity::Critical, "example.com", "/.env"),
        ],
    )
    .await;
    let r = app
        .get(&format!("/api/v1/scans/{s}"), &alice.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    for field in [
        "id",
        "target_id",
        "domain",
        "engine",
        "status",
        "created_at",
    ] {
        assert!(r.body[field].is_string(), "{field}");
    }
    assert_eq!(r.body["domain"], "example.com");
    assert_eq!(r.body["progress"], 0);
    assert_eq!(
        r.body["summary"],
        json!({"total_findings": 3, "critical": 1, "high": 1, "medium": 0, "low": 0, "info": 1})
    );
    // Worst first, in the order found within a severity (issue 26, item 7).
    let order: Vec<&str> = r.body["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["severity"].as_str().unwrap())
        .collect();
    assert_eq!(order, vec!["critical", "high", "info"]);
    let f = &r.body["findings"][1];
    assert_eq!(f["severity"], "high");
    assert_eq!(f["title"], "git-config name");
    assert_eq!(f["path"], "https://example.com/.git/config");
    assert_eq!(f["tool"], "scanfleet-templates");
    assert_eq!(f["description"], "git-config description");
    let v = &r.body["vulnerabilities"][1];
    assert_eq!(v["scan_id"], s.to_string());
    assert_eq!(v["name"], "git-config name");
    assert_eq!(v["status"], "open");
    assert_eq!(v["template_id"], "git-config");
    assert_eq!(v["host"], "example.com");
    assert_eq!(v["matched_at"], "https://example.com/.git/config");
    assert_eq!(v["remediation"], "git-config remediation");
    assert_eq!(v["id"], f["id"]);
    assert_eq!(r.body["vulnerabilities"].as_array().unwrap().len(), 3);

    app.get(&format!("/api/v1/scans/{s}"), &bob.access_token)
        .await
        .assert_problem(404);
    app.get(
        &format!("/api/v1/scans/{}", Uuid::now_v7()),
        &alice.access_token,
    )
    .await
    .assert_problem(404);
}

#[tokio::test]
async fn stopping_a_queued_scan_publishes_the_stop_and_marks_it() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    let s = scan(&app, &user, t).await;

    let subscriber =
        Builder::from_config(RedisConfig::from_url(app.state.settings.redis.url.expose()).unwrap())
            .build_subscriber_client()
            .unwrap();
    subscriber.init().await.unwrap();
    let mut messages = subscriber.message_rx();
    subscriber
        .subscribe(app.state.keys.scan_stop_channel())
        .await
        .unwrap();

    let r = app
        .post(
            &format!("/api/v1/scans/{s}/stop"),
            Some(&user.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["status"], "stopped");
    assert!(r.body["completed_at"].is_string());

    let message = tokio::time::timeout(Duration::from_secs(5), messages.recv())
        .await
        .expect("no stop was published")
        .unwrap();
    assert_eq!(message.value.convert::<String>().unwrap(), s.to_string());
    let key = app.state.keys.scan_closed(s);
    let ttl: i64 = app.state.redis.ttl(&key).await.unwrap();
    assert!((86_000..=86_400).contains(&ttl), "ttl {ttl}");
    let _ = subscriber.quit().await;

    let r = app
        .post(
            &format!("/api/v1/scans/{s}/stop"),
            Some(&user.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.assert_problem(409)["code"], "scan_finished");
}

#[tokio::test]
async fn pending_and_running_scans_stop_but_finished_ones_are_a_409() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let t = app.new_target(&alice, "example.com").await;
    let db = app.state.db.get().await.unwrap();
    for (status, expected) in [
        (ScanStatus::Pending, 200),
        (ScanStatus::Running, 200),
        (ScanStatus::Completed, 409),
        (ScanStatus::Failed, 409),
    ] {
        let s = scan(&app, &alice, t).await;
        assert!(scans::set_scan_status(&db, s, status, None).await.unwrap());
        let path = format!("/api/v1/scans/{s}/stop");
        app.post(&path, Some(&bob.access_token), json!({}))
            .await
            .assert_problem(404);
        let r = app.post(&path, Some(&alice.access_token), json!({})).await;
        assert_eq!(r.status, expected, "{status:?}: {}", r.text);
        if expected == 409 {
            assert_eq!(r.body["code"], "scan_finished");
            let marker: Option<String> = app
                .state
                .redis
                .get(app.state.keys.scan_closed(s))
                .await
                .unwrap();
            assert_eq!(marker, None, "a finished scan must not be marked stopped");
        }
    }
}

#[tokio::test]
async fn intel_sorts_by_severity_and_groups_by_host() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let t = app.new_target(&alice, "example.com").await;
    let s = scan(&app, &alice, t).await;
    add_findings(
        &app,
        s,
        &alice,
        &[
            finding("tech", Severity::Info, "www.example.com", "/"),
            finding("headers", Severity::Low, "example.com", "/"),
            finding("odd", Severity::normalize("urgent"), "example.com", "/odd"),
            finding("rce", Severity::Critical, "api.example.com", "/run"),
            finding("listing", Severity::Medium, "www.example.com", "/files/"),
            finding("cve", Severity::High, "example.com", "/cgi"),
            finding("rce2", Severity::Critical, "example.com", "/exec"),
        ],
    )
    .await;
    let r = app
        .get(&format!("/api/v1/scans/{s}/intel"), &alice.access_token)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["scan_id"], s.to_string());
    assert_eq!(r.body["domain"], "example.com");
    let order: Vec<(&str, &str)> = r.body["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["severity"].as_str().unwrap(),
                v["template_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("critical", "rce"),
            ("critical", "rce2"),
            ("high", "cve"),
            ("medium", "listing"),
            ("low", "headers"),
            ("info", "tech"),
            ("info", "odd"),
        ]
    );
    assert_eq!(
        r.body["severity_counts"],
        json!({"critical": 2, "high": 1, "medium": 1, "low": 1, "info": 2})
    );
    let hosts = r.body["hosts"].as_object().unwrap();
    let mut names: Vec<&String> = hosts.keys().collect();
    names.sort();
    assert_eq!(names, ["api.example.com", "example.com", "www.example.com"]);
    let of = |host: &str| -> Vec<&str> {
        hosts[host]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["template_id"].as_str().unwrap())
            .collect()
    };
    assert_eq!(of("example.com"), ["rce2", "cve", "headers", "odd"]);
    assert_eq!(of("www.example.com"), ["listing", "tech"]);
    assert_eq!(of("api.example.com"), ["rce"]);
    app.get(&format!("/api/v1/scans/{s}/intel"), &bob.access_token)
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn scan_operations_need_authentication() {
    let app = spawn_app().await;
    let r = app.call(Method::GET, "/api/v1/scans", None, None).await;
    r.assert_problem(401);
    let r = app
        .post("/api/v1/scans", None, json!({"target_id": Uuid::now_v7()}))
        .await;
    r.assert_problem(401);
}

/// The other end of the queue: a scanner node claims from the same queue,
/// and it must receive the job `POST /scans` pushed, once.
#[tokio::test]
async fn a_node_claiming_from_the_scan_queue_takes_the_pushed_job_once() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    let s = scan(&app, &user, t).await;

    let lease = Duration::from_secs(10);
    let job = app
        .state
        .scan_queue
        .claim("test-node", lease)
        .await
        .unwrap()
        .expect("the node received no job");
    assert_eq!(job.scan_id, s);
    assert_eq!(job.target_id, t);
    assert_eq!(job.domain, "example.com");
    assert_eq!(job.engine, Engine::Full);
    assert!(app
        .state
        .scan_queue
        .claim("another-node", lease)
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        app.state.scan_queue.holder(s).await.unwrap().as_deref(),
        Some("test-node")
    );
}

async fn api_key(app: &TestApp, user: &TestUser, permissions: &[&str]) -> String {
    let r = app
        .post(
            "/api/v1/api-keys",
            Some(&user.access_token),
            json!({"name": "ci", "permissions": permissions}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["key"].as_str().unwrap().to_string()
}

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
    TestApp::read(req.send().await.unwrap()).await
}

#[tokio::test]
async fn api_keys_need_read_to_list_scan_to_start_and_stop_and_write_for_targets() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let t = app.new_target(&user, "example.com").await;
    let read = api_key(&app, &user, &["read"]).await;
    let scan_key = api_key(&app, &user, &["scan"]).await;
    let write = api_key(&app, &user, &["write"]).await;

    let body = json!({ "target_id": t });
    let r = with_key(
        &app,
        Method::POST,
        "/api/v1/scans",
        &read,
        Some(body.clone()),
    )
    .await;
    r.assert_problem(403);
    let r = with_key(&app, Method::POST, "/api/v1/scans", &scan_key, Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let s = r.body["id"].as_str().unwrap().to_string();
    let r = with_key(&app, Method::GET, "/api/v1/scans", &read, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("x-total-count"), Some("1"));
    let r = with_key(
        &app,
        Method::GET,
        &format!("/api/v1/scans/{s}"),
        &scan_key,
        None,
    )
    .await;
    r.assert_problem(403);
    let stop = format!("/api/v1/scans/{s}/stop");
    with_key(&app, Method::POST, &stop, &read, Some(json!({})))
        .await
        .assert_problem(403);
    let r = with_key(&app, Method::POST, &stop, &scan_key, Some(json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let new_target = json!({"domain": "keyed.example.com"});
    with_key(
        &app,
        Method::POST,
        "/api/v1/targets",
        &read,
        Some(new_target.clone()),
    )
    .await
    .assert_problem(403);
    let r = with_key(
        &app,
        Method::POST,
        "/api/v1/targets",
        &write,
        Some(new_target),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = with_key(
        &app,
        Method::DELETE,
        &format!("/api/v1/targets/{t}"),
        &scan_key,
        None,
    )
    .await;
    r.assert_problem(403);
    let r = with_key(
        &app,
        Method::DELETE,
        &format!("/api/v1/targets/{t}"),
        &write,
        None,
    )
    .await;
    assert_eq!(r.status, 204, "{}", r.text);
}

#[tokio::test]
async fn demo_scans_count_in_the_calendar_month_even_when_the_push_fails() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let t = app.new_target(&user, "example.com").await;
    scan(&app, &user, t).await;
    let data_key = app.state.keys.scan_queue_jobs();
    let _: () = app.state.redis.del(&data_key).await.unwrap();
    let _: () = app
        .state
        .redis
        .set(&data_key, "not a hash", None, None, false)
        .await
        .unwrap();
    start(&app, &user, json!({ "target_id": t }))
        .await
        .assert_problem(503);
    let db = app.state.db.get().await.unwrap();
    let rows = db
        .query(
            "SELECT scans, period_start = date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
             FROM scan_usage WHERE user_id = $1",
            &[&user.id],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), 2, "the failed scan counts too");
    assert!(
        rows[0].get::<_, bool>(1),
        "the period is the calendar month"
    );
}

#[tokio::test]
async fn the_scan_list_pages_filters_and_counts_in_one_answer() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let a = app.new_target(&user, "a.example.com").await;
    let b = app.new_target(&user, "b.example.com").await;
    let first = scan(&app, &user, a).await;
    let second = scan(&app, &user, b).await;
    let third = scan(&app, &user, a).await;
    let list = |query: &str| {
        let (app, token, query) = (&app, &user.access_token, query.to_string());
        async move {
            let r = app.get(&format!("/api/v1/scans{query}"), token).await;
            assert_eq!(r.status, 200, "{query}: {}", r.text);
            let ids: Vec<String> = r
                .body
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_string())
                .collect();
            (ids, r.header("x-total-count").unwrap().to_string())
        }
    };
    let ids = |list: &[Uuid]| list.iter().map(Uuid::to_string).collect::<Vec<_>>();
    assert_eq!(list("").await, (ids(&[third, second, first]), "3".into()));
    assert_eq!(list("?limit=2").await, (ids(&[third, second]), "3".into()));
    assert_eq!(list("?limit=2&offset=2").await, (ids(&[first]), "3".into()));
    // Past the end: no items, the total still told.
    assert_eq!(list("?offset=5").await, (vec![], "3".into()));
    assert_eq!(
        list(&format!("?target_id={a}")).await,
        (ids(&[third, first]), "2".into())
    );
    assert_eq!(
        list("?status=queued&limit=1").await,
        (ids(&[third]), "3".into())
    );
    assert_eq!(list("?status=completed").await, (vec![], "0".into()));
    let other = app.new_user().await;
    let r = app.get("/api/v1/scans", &other.access_token).await;
    assert_eq!(
        (r.body.as_array().unwrap().len(), r.header("x-total-count")),
        (0, Some("0"))
    );
}

/// What the ingester makes of a scan's progress, written with its
/// position (one update of the scan's row a round): the last stage, the
/// best progress (never down), a status that skips one between; and the
/// stage of the round that ends the scan, written before its status.
#[tokio::test]
async fn the_ingester_keeps_the_last_stage_and_the_best_progress_of_each_round() {
    use scanfleet_common::events::{ScanEvent, ScanEventKind, Stage};
    let app = spawn_app().await;
    let user = app.new_user().await;
    let target = app
        .new_target(&user, &format!("t{}.example.com", Uuid::new_v4().simple()))
        .await;
    let id = scan(&app, &user, target).await;
    let progress = |stage, progress| {
        ScanEvent::new(
            id,
            ScanEventKind::Progress {
                stage,
                progress,
                current_tool: Some(format!("{stage:?}")),
            },
        )
        .to_json()
    };
    let append = |lines: Vec<String>| {
        let app = &app;
        async move {
            scanfleet_bus::events::append(&app.state.redis, &app.state.keys, id, &lines)
                .await
                .unwrap();
        }
    };
    let settled = |want: Value| {
        let (app, user) = (&app, &user);
        async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let r = app
                    .get(&format!("/api/v1/scans/{id}"), &user.access_token)
                    .await;
                let got = json!({
                    "status": r.body["status"],
                    "stage": r.body["stage"],
                    "progress": r.body["progress"],
                });
                if got == want {
                    return;
                }
                assert!(std::time::Instant::now() < deadline, "{got} != {want}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    append(vec![
        ScanEvent::status(id, ScanStatus::Running, None).to_json(),
        progress(Stage::Probe, 40),
        progress(Stage::Validate, 60),
        progress(Stage::Validate, 50),
    ])
    .await;
    settled(json!({"status": "running", "stage": "VALIDATE", "progress": 60})).await;
    // Later rounds do not take progress back either: once the ingester's
    // position has moved past the round, the scan reads as before.
    let db = app.state.db.get().await.unwrap();
    let cursor = || async {
        db.query_one("SELECT events_cursor FROM scans WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get::<_, String>(0)
    };
    let before = cursor().await;
    append(vec![progress(Stage::Validate, 30)]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cursor().await == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the round was not ingested"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    settled(json!({"status": "running", "stage": "VALIDATE", "progress": 60})).await;
    append(vec![
        progress(Stage::Report, 90),
        ScanEvent::status(id, ScanStatus::Failed, Some("the node gave up".into())).to_json(),
    ])
    .await;
    settled(json!({"status": "failed", "stage": "REPORT", "progress": 90})).await;
    append(vec![progress(Stage::Validate, 95)]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    settled(json!({"status": "failed", "stage": "REPORT", "progress": 90})).await;
}
