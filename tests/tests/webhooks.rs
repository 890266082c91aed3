//! Outbound webhooks and Slack (issue 27): deliveries to a receiver in the
//! test that checks every signature with its own implementation of the
//! Standard Webhooks scheme, retries, disabling, rotation, the SSRF guard
//! in production mode, Slack's limits and isolation between users.

use std::net::Ipv4Addr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Method;
use scanfleet_common::events::{FindingEvent, ScanEvent, ScanEventKind, ScanStatus};
use scanfleet_common::severity::Severity;
use scanfleet_tests::dns::DnsLab;
use scanfleet_tests::fleet::Fleet;
use scanfleet_tests::receiver::{verify, Answer, Receiver};
use scanfleet_tests::{spawn_app_with, TestApp, TestUser};
use serde_json::{json, Value};
use uuid::Uuid;

/// Local receivers, quick polls, and retries 500 times faster.
const DEV: &[(&str, &str)] = &[
    ("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE", "true"),
    ("SCANFLEET_WEBHOOKS__POLL_INTERVAL_MS", "50"),
    ("SCANFLEET_WEBHOOKS__RETRY_SCALE", "0.002"),
];

async fn paid_user(app: &TestApp) -> TestUser {
    let u = app.new_user().await;
    app.set_tier(u.id, "monthly").await;
    u
}

/// Creates a webhook; its id and secret.
async fn webhook(app: &TestApp, u: &TestUser, body: Value) -> (String, String) {
    let r = app
        .post("/api/v1/webhooks", Some(&u.access_token), body)
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    (
        r.body["id"].as_str().unwrap().to_string(),
        r.body["secret"].as_str().unwrap().to_string(),
    )
}

fn finding(i: usize, severity: Severity) -> ScanEvent {
    ScanEvent::new(
        Uuid::nil(),
        ScanEventKind::Finding(FindingEvent {
            template_id: format!("tpl-{i}"),
            name: format!("Finding {i}"),
            severity,
            host: "lab.example.com".into(),
            matched_at: format!("https://lab.example.com/{i}"),
            description: String::new(),
            remediation: String::new(),
            extracted_results: Vec::new(),
            matcher_name: None,
            classification: Default::default(),
            evidence: None,
        }),
    )
}

/// Starts a scan through the API and completes it through the ingester,
/// as a node would: the findings, then `completed`.
async fn completed_scan(app: &TestApp, u: &TestUser, findings: &[Severity]) -> String {
    let target = app
        .new_target(u, &format!("t{}.example.com", Uuid::new_v4().simple()))
        .await;
    let r = app
        .post(
            "/api/v1/scans",
            Some(&u.access_token),
            json!({"target_id": target, "engine": "quick"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let scan_id: Uuid = r.body["id"].as_str().unwrap().parse().unwrap();
    let mut lines = vec![ScanEvent::status(scan_id, ScanStatus::Running, None).to_json()];
    for (i, severity) in findings.iter().enumerate() {
        let mut event = finding(i, *severity);
        event.scan_id = scan_id;
        lines.push(event.to_json());
    }
    lines.push(ScanEvent::status(scan_id, ScanStatus::Completed, None).to_json());
    scanfleet_bus::events::append(&app.state.redis, &app.state.keys, scan_id, &lines)
        .await
        .unwrap();
    scan_id.to_string()
}

async fn deliveries(app: &TestApp, u: &TestUser, hook: &str) -> Vec<Value> {
    let r = app
        .get(
            &format!("/api/v1/webhooks/{hook}/deliveries?limit=500"),
            &u.access_token,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body.as_array().unwrap().clone()
}

#[tokio::test]
async fn a_completed_scan_sends_one_signed_scan_completed_and_its_new_findings() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    let (_, secret) = webhook(
        &app,
        &u,
        json!({"url": rx.url("/hook"), "events": ["scan.completed", "finding.new"], "min_severity": "high"}),
    )
    .await;
    let scan = completed_scan(
        &app,
        &u,
        &[
            Severity::Critical,
            Severity::Low,
            Severity::High,
            Severity::Info,
        ],
    )
    .await;
    rx.wait_for(Duration::from_secs(20), |r| r.len() >= 3).await;
    // Nothing more arrives: one scan.completed, one finding.new per finding
    // at or above `high`.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = rx.received();
    assert_eq!(got.len(), 3, "{got:#?}");
    for r in &got {
        assert!(verify(&secret, r), "signature of {}", r.body);
        assert_eq!(r.header("content-type"), "application/json");
        let body = r.json();
        assert_eq!(body["data"]["scan"]["id"], scan.as_str());
        assert!(body["created_at"]
            .as_str()
            .unwrap()
            .parse::<DateTime<Utc>>()
            .is_ok());
        assert!(r.header("webhook-id").starts_with("msg_"));
    }
    let types: Vec<String> = got
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types.iter().filter(|t| *t == "scan.completed").count(), 1);
    let completed = got
        .iter()
        .find(|r| r.json()["type"] == "scan.completed")
        .unwrap()
        .json();
    assert_eq!(completed["data"]["scan"]["status"], "completed");
    assert_eq!(completed["data"]["scan"]["findings_count"], 4);
    let mut severities: Vec<String> = got
        .iter()
        .map(|r| r.json())
        .filter(|b| b["type"] == "finding.new")
        .map(|b| {
            b["data"]["finding"]["severity"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    severities.sort();
    assert_eq!(severities, ["critical", "high"]);
    let ids: std::collections::HashSet<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 3, "one webhook-id per event");
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_three_attempts_with_one_webhook_id_all_logged() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    rx.script(&[
        Answer::Status(500),
        Answer::Status(500),
        Answer::Status(200),
    ]);
    let (hook, secret) = webhook(
        &app,
        &u,
        json!({"url": rx.url("/"), "events": ["scan.failed"]}),
    )
    .await;
    let r = app
        .post(
            &format!("/api/v1/webhooks/{hook}/test"),
            Some(&u.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let got = rx.wait_for(Duration::from_secs(20), |r| r.len() >= 3).await;
    let id = got[0].header("webhook-id");
    assert!(got.iter().all(|r| r.header("webhook-id") == id));
    assert!(got.iter().all(|r| verify(&secret, r)));
    assert_eq!(got[0].json()["type"], "ping");
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "the same body every time"
    );
    // The second retry waits the scaled 5 minutes (0.6 s).
    assert!(got[2].at - got[1].at >= Duration::from_millis(550));
    let log = loop {
        let log = deliveries(&app, &u, &hook).await;
        if log.len() == 3 {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Newest first.
    let codes: Vec<i64> = log
        .iter()
        .map(|a| a["status_code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, [200, 500, 500]);
    let attempts: Vec<i64> = log.iter().map(|a| a["attempt"].as_i64().unwrap()).collect();
    assert_eq!(attempts, [3, 2, 1]);
    assert!(log
        .iter()
        .all(|a| a["message_id"] == id && a["event_type"] == "ping"));
    assert!(log[0]["delivered_at"].is_string());
    assert!(log[1]["next_attempt_at"].is_string());
    assert_eq!(log[0]["response_body"], "received");
    // A redelivery sends the same message again, with the same id.
    let delivery = log[0]["delivery_id"].as_str().unwrap();
    let r = app
        .post(
            &format!("/api/v1/webhooks/{hook}/deliveries/{delivery}/redeliver"),
            Some(&u.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let got = rx.wait_for(Duration::from_secs(10), |r| r.len() >= 4).await;
    assert_eq!(got[3].header("webhook-id"), id);
}

#[tokio::test]
async fn a_receiver_that_never_answers_is_retried_on_the_scaled_schedule_then_disabled() {
    // Scale 1e-5: retries after 0.05 ms, 3 ms, 18 ms, 72 ms, 180 ms, ...;
    // disabled after 4.3 s of failures.
    let app = spawn_app_with(&[
        ("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE", "true"),
        ("SCANFLEET_WEBHOOKS__POLL_INTERVAL_MS", "20"),
        ("SCANFLEET_WEBHOOKS__RETRY_SCALE", "0.00001"),
        ("SCANFLEET_WEBHOOKS__TIMEOUT_SECS", "1"),
    ])
    .await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    rx.always(Answer::Silence);
    let (hook, _) = webhook(
        &app,
        &u,
        json!({"url": rx.url("/"), "events": ["scan.completed"]}),
    )
    .await;
    app.post(
        &format!("/api/v1/webhooks/{hook}/test"),
        Some(&u.access_token),
        json!({}),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = app
            .get(&format!("/api/v1/webhooks/{hook}"), &u.access_token)
            .await;
        if r.body["enabled"] == false {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never disabled");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut log = deliveries(&app, &u, &hook).await;
    log.reverse();
    assert!(log.len() >= 5, "{log:#?}");
    assert!(log
        .iter()
        .all(|a| a["status_code"].is_null() && a["error"].is_string()));
    for pair in log.windows(2) {
        let due: DateTime<Utc> = pair[0]["next_attempt_at"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let next: DateTime<Utc> = pair[1]["attempted_at"].as_str().unwrap().parse().unwrap();
        assert!(
            next >= due,
            "attempt {} came before it was due",
            pair[1]["attempt"]
        );
    }
    let n = app.get("/api/v1/notifications", &u.access_token).await;
    let disabled: Vec<&Value> = n
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["type"] == "webhook_disabled")
        .collect();
    assert_eq!(disabled.len(), 1, "{}", n.text);
    // A disabled webhook is not sent to, and its test is refused.
    let r = app
        .post(
            &format!("/api/v1/webhooks/{hook}/test"),
            Some(&u.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.text);
}

#[tokio::test]
async fn after_a_rotation_deliveries_are_signed_with_both_secrets() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    let (hook, old) = webhook(
        &app,
        &u,
        json!({"url": rx.url("/"), "events": ["scan.completed"]}),
    )
    .await;
    let r = app
        .post(
            &format!("/api/v1/webhooks/{hook}/rotate-secret"),
            Some(&u.access_token),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let new = r.body["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let until: DateTime<Utc> = r.body["previous_secret_expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(until > Utc::now() + chrono::Duration::hours(23));
    app.post(
        &format!("/api/v1/webhooks/{hook}/test"),
        Some(&u.access_token),
        json!({}),
    )
    .await;
    let got = rx
        .wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    assert_eq!(got[0].header("webhook-signature").split(' ').count(), 2);
    assert!(verify(&old, &got[0]));
    assert!(verify(&new, &got[0]));
    assert!(!verify(
        &scanfleet_api::webhooks::sign::new_secret(),
        &got[0]
    ));
}

#[tokio::test]
async fn production_refuses_http_private_addresses_and_a_name_that_rebinds_inward() {
    let dns = DnsLab::start().await;
    let (dns_name, dns_addr) = dns.env();
    let app = spawn_app_with(&[
        ("SCANFLEET_MODE", "production"),
        ("SCANFLEET_PAYMENTS__SECRET_KEY", "sk_test_unused"),
        ("SCANFLEET_WEBHOOKS__POLL_INTERVAL_MS", "50"),
        (&dns_name, &dns_addr),
    ])
    .await;
    let u = paid_user(&app).await;
    for (url, why) in [
        ("http://hooks.example.net/x", "https"),
        ("https://10.0.0.7/x", "public"),
        ("https://127.0.0.1/x", "public"),
    ] {
        let r = app
            .post(
                "/api/v1/webhooks",
                Some(&u.access_token),
                json!({"url": url, "events": ["scan.completed"]}),
            )
            .await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), ["url"], "{url}");
        assert!(r.text.contains(why), "{url}: {}", r.text);
    }
    let r = app
        .post(
            "/api/v1/webhooks",
            Some(&u.access_token),
            json!({"url": "https://hook.example.net/x", "kind": "slack", "events": ["scan.completed"]}),
        )
        .await;
    r.assert_problem(422);
    // Public when created (the address is only resolved, never reached) ...
    dns.set_a("hook.example.net", Ipv4Addr::new(93, 184, 216, 34));
    let (hook, _) = webhook(
        &app,
        &u,
        json!({"url": "https://hook.example.net/x", "events": ["scan.completed"]}),
    )
    .await;
    // ... and loopback at delivery time: refused before any connection.
    dns.set_a("hook.example.net", Ipv4Addr::LOCALHOST);
    app.post(
        &format!("/api/v1/webhooks/{hook}/test"),
        Some(&u.access_token),
        json!({}),
    )
    .await;
    let log = loop {
        let log = deliveries(&app, &u, &hook).await;
        if !log.is_empty() {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let error = log[0]["error"].as_str().unwrap();
    assert!(
        error.contains("127.0.0.1") && error.contains("not a public address"),
        "{error}"
    );
    assert!(log[0]["status_code"].is_null());
}

#[tokio::test]
async fn a_slack_webhook_gets_block_kit_within_slack_limits_for_500_findings() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    webhook(
        &app,
        &u,
        json!({"url": rx.url("/services/T/B/x"), "kind": "slack", "events": ["scan.completed"]}),
    )
    .await;
    let severities: Vec<Severity> = (0..500).map(|i| Severity::ALL[i % 5]).collect();
    let scan = completed_scan(&app, &u, &severities).await;
    let got = rx
        .wait_for(Duration::from_secs(20), |r| !r.is_empty())
        .await;
    let m = got[0].json();
    let blocks = m["blocks"].as_array().unwrap();
    assert!(blocks.len() <= 50);
    assert_eq!(blocks[0]["type"], "header");
    assert!(blocks[0]["text"]["text"].as_str().unwrap().chars().count() <= 150);
    for b in &blocks[1..] {
        assert!(b["text"]["text"].as_str().unwrap().chars().count() <= 3000);
    }
    let text = m.to_string();
    assert!(
        text.contains("*500* findings: 100 critical, 100 high"),
        "{text}"
    );
    assert_eq!(text.matches("• [").count(), 5, "the top five findings");
    assert!(text.contains(&format!("/api/v1/scans/{scan}")));
}

#[tokio::test]
async fn another_users_webhook_is_404_everywhere_and_demo_is_refused() {
    let app = spawn_app_with(DEV).await;
    let owner = paid_user(&app).await;
    let other = paid_user(&app).await;
    let rx = Receiver::start().await;
    let (hook, _) = webhook(
        &app,
        &owner,
        json!({"url": rx.url("/"), "events": ["scan.completed"]}),
    )
    .await;
    app.post(
        &format!("/api/v1/webhooks/{hook}/test"),
        Some(&owner.access_token),
        json!({}),
    )
    .await;
    rx.wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    let delivery = loop {
        let log = deliveries(&app, &owner, &hook).await;
        if let Some(a) = log.first() {
            break a["delivery_id"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let t = Some(other.access_token.as_str());
    for (method, path, body) in [
        (Method::GET, format!("/api/v1/webhooks/{hook}"), None),
        (
            Method::PATCH,
            format!("/api/v1/webhooks/{hook}"),
            Some(json!({"enabled": false})),
        ),
        (Method::DELETE, format!("/api/v1/webhooks/{hook}"), None),
        (
            Method::POST,
            format!("/api/v1/webhooks/{hook}/rotate-secret"),
            None,
        ),
        (Method::POST, format!("/api/v1/webhooks/{hook}/test"), None),
        (
            Method::GET,
            format!("/api/v1/webhooks/{hook}/deliveries"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/webhooks/{hook}/deliveries/{delivery}/redeliver"),
            None,
        ),
    ] {
        let r = app.call(method.clone(), &path, t, body).await;
        r.assert_problem(404);
        assert!(!r.text.contains(&rx.url("/")), "{method} {path}");
    }
    let r = app.get("/api/v1/webhooks", &other.access_token).await;
    assert_eq!(r.header("x-total-count"), Some("0"));
    let r = app
        .get(&format!("/api/v1/webhooks/{hook}"), &owner.access_token)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["enabled"], true, "the other user changed nothing");
    assert!(r.body.get("secret").is_none(), "the secret is shown once");
    let demo = app.new_user().await;
    let r = app.get("/api/v1/webhooks", &demo.access_token).await;
    r.assert_problem(403);
}

#[tokio::test]
async fn bad_webhook_input_is_422_naming_the_field() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    for (body, field) in [
        (
            json!({"url": "not a url", "events": ["scan.completed"]}),
            "url",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "events": ["scan.exploded"]}),
            "events",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "events": []}),
            "events",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "events": ["ping"], "kind": "teams"}),
            "kind",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "events": ["scan.failed"], "min_severity": "urgent"}),
            "min_severity",
        ),
        (
            json!({"url": "http://127.0.0.1:9/", "events": ["scan.failed"], "description": "x".repeat(501)}),
            "description",
        ),
    ] {
        let r = app
            .post("/api/v1/webhooks", Some(&u.access_token), body.clone())
            .await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), [field], "{body}");
    }
}

/// The api killed -9 after the ingester committed a scan's completion and
/// before any delivery: another api process delivers the event, once.
#[tokio::test]
async fn the_api_killed_between_commit_and_delivery_still_delivers_exactly_once() {
    let rx = Receiver::start().await;
    let fleet = Fleet::new(&[
        ("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE".into(), "true".into()),
        ("SCANFLEET_WEBHOOKS__POLL_INTERVAL_MS".into(), "50".into()),
    ])
    .await;
    // This process ingests but does not deliver.
    let mut api = fleet.api(&[("SCANFLEET_WEBHOOKS__DISPATCHERS", "0")]).await;
    let token = fleet.user().await;
    let (status, body) = fleet
        .call(
            Method::POST,
            "/webhooks",
            &token,
            Some(json!({"url": rx.url("/"), "events": ["scan.completed"]})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let secret = body["secret"].as_str().unwrap().to_string();
    let target = fleet.target(&token, "killed.example.com").await;
    let scan: Uuid = fleet.scan(&token, &target, "quick").await.parse().unwrap();
    let redis = fleet.redis().await;
    let keys = scanfleet_common::keys::Keys::new(fleet.prefix.clone());
    let line = ScanEvent::status(scan, ScanStatus::Completed, None).to_json();
    scanfleet_bus::events::append(&redis, &keys, scan, &[line])
        .await
        .unwrap();
    let db = fleet.db().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while db
        .query_one("SELECT count(*) AS n FROM webhook_deliveries", &[])
        .await
        .unwrap()
        .get::<_, i64>("n")
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the outbox stayed empty"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.kill9();
    assert!(rx.received().is_empty());
    let _api = fleet.api(&[]).await;
    rx.wait_for(Duration::from_secs(20), |r| !r.is_empty())
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = rx.received();
    assert_eq!(got.len(), 1, "exactly once");
    assert!(verify(&secret, &got[0]));
    assert_eq!(got[0].json()["type"], "scan.completed");
    assert_eq!(got[0].json()["data"]["scan"]["id"], scan.to_string());
}

#[tokio::test]
async fn stopping_a_scan_sends_scan_stopped_once() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    let (_, secret) = webhook(
        &app,
        &u,
        json!({"url": rx.url("/"), "events": ["scan.stopped", "scan.completed"]}),
    )
    .await;
    let target = app
        .new_target(&u, &format!("s{}.example.com", Uuid::new_v4().simple()))
        .await;
    let r = app
        .post(
            "/api/v1/scans",
            Some(&u.access_token),
            json!({"target_id": target, "engine": "quick"}),
        )
        .await;
    let scan = r.body["id"].as_str().unwrap().to_string();
    let r = app
        .post(
            &format!("/api/v1/scans/{scan}/stop"),
            Some(&u.access_token),
            json!({}),
        )
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    rx.wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = rx.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(verify(&secret, &got[0]));
    let body = got[0].json();
    assert_eq!(body["type"], "scan.stopped");
    assert_eq!(body["data"]["scan"]["id"], scan.as_str());
    assert_eq!(body["data"]["scan"]["status"], "stopped");
}

#[tokio::test]
async fn a_skipped_firing_sends_schedule_skipped_with_the_schedule_and_reason() {
    let app = spawn_app_with(DEV).await;
    let u = paid_user(&app).await;
    let rx = Receiver::start().await;
    let (_, secret) = webhook(
        &app,
        &u,
        json!({"url": rx.url("/"), "events": ["schedule.skipped"]}),
    )
    .await;
    let target = app
        .new_target(&u, &format!("k{}.example.com", Uuid::new_v4().simple()))
        .await;
    let s = app
        .post(
            "/api/v1/schedules",
            Some(&u.access_token),
            json!({"target_id": target, "engine": "quick", "cron_expression": "*/15 * * * *"}),
        )
        .await;
    assert_eq!(s.status, 201, "{}", s.text);
    let schedule = s.body["id"].as_str().unwrap().to_string();
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE schedules SET next_run = now() - interval '1 minute' WHERE id = $1::text::uuid",
        &[&schedule],
    )
    .await
    .unwrap();
    let scheduler = app.scheduler();
    assert_eq!(scheduler.tick(Utc::now()).await.unwrap().started, 1);
    // The first run is still queued when the schedule is due again.
    let later = Utc::now() + chrono::Duration::minutes(16);
    assert_eq!(scheduler.tick(later).await.unwrap().skipped, 1);
    let got = rx
        .wait_for(Duration::from_secs(10), |r| !r.is_empty())
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.received().len(), 1);
    assert!(verify(&secret, &got[0]));
    let body = got[0].json();
    assert_eq!(body["type"], "schedule.skipped");
    assert_eq!(body["data"]["schedule_id"], schedule.as_str());
    assert_eq!(body["data"]["schedule"]["id"], schedule.as_str());
    assert!(body["data"]["reason"]
        .as_str()
        .unwrap()
        .contains("still active"));
}
