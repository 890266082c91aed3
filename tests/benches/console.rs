//! The web console's pages for a target with 100,000 fingerprints (issue
//! 33): server time per page, p50 and p99 over `REQUESTS` requests each,
//! beside a reference request through the same app and connection (the
//! API's one-row `GET /targets/{id}`), and each page's weight on first load
//! (HTML plus the style sheet and scripts it names, as sent).
//!
//! Then how long a live finding takes to reach the scan page: finding
//! events appended to a scan's stream (as a node appends them), received
//! by the page's server-sent events and by a WebSocket listener of the same
//! scan; the delay of each after the event's time, and of the page after
//! the WebSocket.
//!
//! `cargo bench -p scanfleet-tests --bench console` (release build).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use scanfleet_common::events::{FindingEvent, ScanEvent, ScanEventKind};
use scanfleet_common::Severity;
use scanfleet_tests::{spawn_app, TestApp};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

/// Live findings sent for the latency figures.
const LIVE_EVENTS: usize = 200;

const FINGERPRINTS: i64 = 100_000;
const SCANS: i64 = 10;
const REQUESTS: usize = 200;

/// The browser's cookie and CSRF token after signing in through the form.
async fn sign_in(app: &TestApp, email: &str) -> String {
    let page = app
        .client
        .get(app.url("/signin"))
        .send()
        .await
        .expect("signin");
    let cookie = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.split(';').next().filter(|kv| kv.starts_with("sf_csrf=")))
        .expect("form cookie")
        .to_string();
    let csrf = cookie.trim_start_matches("sf_csrf=").to_string();
    let resp = app
        .client
        .post(app.url("/signin"))
        .header("cookie", &cookie)
        .form(&[
            ("email", email),
            ("password", scanfleet_tests::PASSWORD),
            ("csrf", &csrf),
        ])
        .send()
        .await
        .expect("sign in");
    assert_eq!(resp.status(), 303);
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            v.split(';')
                .next()
                .filter(|kv| kv.starts_with("sf_session="))
        })
        .expect("session cookie")
        .to_string()
}

async fn time(app: &TestApp, path: &str, header: (&str, &str)) -> (Vec<Duration>, usize, String) {
    let mut times = Vec::with_capacity(REQUESTS);
    let mut size = 0;
    let mut body = String::new();
    for _ in 0..REQUESTS {
        let started = Instant::now();
        let r = app
            .client
            .get(app.url(path))
            .header(header.0, header.1)
            .send()
            .await
            .expect("request");
        let status = r.status();
        let bytes = r.bytes().await.expect("body");
        times.push(started.elapsed());
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&bytes));
        size = bytes.len();
        body = String::from_utf8_lossy(&bytes).into_owned();
    }
    times.sort();
    (times, size, body)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The assets a page names (`/assets/...`), fetched once: their sizes.
async fn asset_bytes(app: &TestApp, html: &str) -> usize {
    let mut total = 0;
    for part in html.split("\"/assets/").skip(1) {
        let Some(end) = part.find('"') else { continue };
        let path = format!("/assets/{}", &part[..end]);
        let r = app.client.get(app.url(&path)).send().await.expect("asset");
        total += r.bytes().await.expect("asset body").len();
    }
    total
}

/// Milliseconds of `received` after `sent`.
fn ms(received: DateTime<Utc>, sent: DateTime<Utc>) -> f64 {
    (received - sent).num_microseconds().unwrap_or(0) as f64 / 1000.0
}

fn summary(what: &str, mut samples: Vec<f64>) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "  {what:<44} p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms  ({} events)",
        at(0.5),
        at(0.99),
        at(1.0),
        samples.len()
    );
}

/// Finding events appended to a queued scan's stream, one every 10 ms,
/// followed on the console's server-sent events and on the WebSocket.
async fn live_latency(app: &TestApp, cookie: &str, token: &str) {
    let user_target = app
        .client
        .post(app.url("/api/v1/targets"))
        .bearer_auth(token)
        .json(&serde_json::json!({"domain": "live.example.com"}))
        .send()
        .await
        .expect("target");
    let target: serde_json::Value = user_target.json().await.expect("target json");
    let scan: serde_json::Value = app
        .client
        .post(app.url("/api/v1/scans"))
        .bearer_auth(token)
        .json(&serde_json::json!({"target_id": target["id"], "engine": "quick"}))
        .send()
        .await
        .expect("scan")
        .json()
        .await
        .expect("scan json");
    let scan: Uuid = scan["id"].as_str().expect("id").parse().expect("uuid");
    // The page's events.
    let mut sse = app
        .client
        .get(app.url(&format!("/scans/{scan}/events")))
        .header("cookie", cookie)
        .send()
        .await
        .expect("events");
    assert_eq!(sse.status(), 200);
    let (tx, mut page_rx) = tokio::sync::mpsc::unbounded_channel::<(String, DateTime<Utc>)>();
    tokio::spawn(async move {
        let mut buffer = String::new();
        while let Ok(Some(chunk)) = sse.chunk().await {
            let received = Utc::now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                for line in event.lines() {
                    let Some(data) = line.strip_prefix("data: ") else {
                        continue;
                    };
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                        continue;
                    };
                    if let Some(m) = v["finding"]["matched_at"].as_str() {
                        let _ = tx.send((m.to_string(), received));
                    }
                }
            }
        }
    });
    // The WebSocket's.
    let url = format!(
        "ws://{}/api/v1/ws/scans/{scan}?token={token}",
        app.base.trim_start_matches("http://")
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.expect("ws");
    let (wtx, mut ws_rx) = tokio::sync::mpsc::unbounded_channel::<(String, DateTime<Utc>)>();
    tokio::spawn(async move {
        while let Some(Ok(m)) = ws.next().await {
            let received = Utc::now();
            if let Message::Text(t) = m {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) else {
                    continue;
                };
                if let Some(m) = v["finding"]["matched_at"].as_str() {
                    let _ = wtx.send((m.to_string(), received));
                }
            }
        }
    });
    // Both are connected once their snapshots came; a moment for that.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sent = HashMap::new();
    for i in 0..LIVE_EVENTS {
        let matched_at = format!("https://live.example.com/path/{i}");
        let event = ScanEvent::new(
            scan,
            ScanEventKind::Finding(FindingEvent {
                template_id: "live-template".into(),
                name: format!("Live finding {i}"),
                severity: Severity::ALL[i % 5],
                host: "live.example.com".into(),
                matched_at: matched_at.clone(),
                description: String::new(),
                remediation: String::new(),
                extracted_results: vec![],
                matcher_name: None,
                classification: Default::default(),
                evidence: None,
            }),
        );
        sent.insert(matched_at, event.at);
        scanfleet_bus::events::append_event(&app.state.redis, &app.state.keys, &event)
            .await
            .expect("append");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut page = HashMap::new();
    let mut socket = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while (page.len() < LIVE_EVENTS || socket.len() < LIVE_EVENTS) && Instant::now() < deadline {
        tokio::select! {
            Some((m, at)) = page_rx.recv() => { page.insert(m, at); }
            Some((m, at)) = ws_rx.recv() => { socket.insert(m, at); }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    println!(
        "live findings: {} sent, {} reached the page, {} the WebSocket",
        LIVE_EVENTS,
        page.len(),
        socket.len()
    );
    let after = |got: &HashMap<String, DateTime<Utc>>| {
        got.iter()
            .filter_map(|(m, at)| sent.get(m).map(|s| ms(*at, *s)))
            .collect::<Vec<_>>()
    };
    summary("event to the page (server-sent events)", after(&page));
    summary("event to the WebSocket listener", after(&socket));
    summary(
        "page after the WebSocket (negative: before)",
        page.iter()
            .filter_map(|(m, at)| socket.get(m).map(|w| ms(*at, *w)))
            .collect(),
    );
}

#[tokio::main]
async fn main() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "admin").await;
    app.make_admin(user.id).await;
    let big = app.new_target(&user, "big.example.com").await;
    let laying = Instant::now();
    let indexed =
        scanfleet_tests::history::lay_history(&app, user.id, big, FINGERPRINTS, SCANS).await;
    println!(
        "laid {FINGERPRINTS} fingerprints and {} findings in {:.0?}; the search index held \
         the fingerprints {:.1?} after they were laid (the indexer looks every second)",
        FINGERPRINTS * SCANS,
        laying.elapsed(),
        indexed
    );
    let db = app.state.db.get().await.expect("db");
    let scan: Uuid = db
        .query_one(
            "SELECT id FROM scans WHERE target_id = $1 ORDER BY created_at DESC LIMIT 1",
            &[&big],
        )
        .await
        .expect("scan")
        .get(0);
    let finding: Uuid = db
        .query_one(
            "SELECT id FROM findings WHERE scan_id = $1 LIMIT 1",
            &[&scan],
        )
        .await
        .expect("finding")
        .get(0);
    let cookie = sign_in(&app, &user.email).await;
    live_latency(&app, &cookie, &user.access_token).await;
    let bearer = format!("Bearer {}", user.access_token);
    let (reference, _, _) = time(
        &app,
        &format!("/api/v1/targets/{big}"),
        ("authorization", &bearer),
    )
    .await;
    println!(
        "reference: API GET /targets/{{id}}, {REQUESTS} requests: p50 {:>6.1?}  p99 {:>6.1?}",
        percentile(&reference, 0.5),
        percentile(&reference, 0.99)
    );
    let pages = [
        ("dashboard", "/".to_string()),
        ("targets", "/targets".to_string()),
        ("target (worst first)", format!("/targets/{big}")),
        (
            "target ?severity=high",
            format!("/targets/{big}?severity=high"),
        ),
        (
            "target ?status=false_positive",
            format!("/targets/{big}?status=false_positive"),
        ),
        (
            "target ?change=fixed",
            format!("/targets/{big}?change=fixed"),
        ),
        ("target ?change=new", format!("/targets/{big}?change=new")),
        (
            "target ?q=h7.example (2,500 match)",
            format!("/targets/{big}?q=h7.example"),
        ),
        (
            "target ?q=finding 4242",
            format!("/targets/{big}?q=finding+4242"),
        ),
        (
            "target ?q=example.com (all match)",
            format!("/targets/{big}?q=example.com"),
        ),
        ("target page 1000", format!("/targets/{big}?offset=50000")),
        ("scans", "/scans".to_string()),
        ("scan (100,000 findings)", format!("/scans/{scan}")),
        ("finding", format!("/findings/{finding}")),
        ("schedules", "/schedules".to_string()),
        ("notifications", "/notifications".to_string()),
        ("webhooks", "/webhooks".to_string()),
        ("account", "/account".to_string()),
        ("admin", "/admin".to_string()),
    ];
    println!("console pages, {REQUESTS} requests each; weight = HTML + its assets on first load:");
    for (name, path) in pages {
        let (times, size, body) = time(&app, &path, ("cookie", &cookie)).await;
        let assets = asset_bytes(&app, &body).await;
        println!(
            "  {name:<32} p50 {:>7.1?}  p99 {:>7.1?}  ({:.1}x the reference p99)  {:>6.1} KB + {:.1} KB assets",
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            percentile(&times, 0.99).as_secs_f64() / percentile(&reference, 0.99).as_secs_f64(),
            size as f64 / 1024.0,
            assets as f64 / 1024.0
        );
    }
}
