//! The web console's pages for a target with 100,000 fingerprints (issue
//! 33): server time per page, p50 and p99 over `REQUESTS` requests each,
//! beside a reference request through the same app and connection (the
//! API's one-row `GET /targets/{id}`), and each page's weight on first load
//! (HTML plus the style sheet and scripts it names, as sent).
//!
//! `cargo bench -p scanfleet-tests --bench console` (release build).

use std::time::{Duration, Instant};

use scanfleet_tests::{spawn_app, TestApp};
use uuid::Uuid;

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

#[tokio::main]
async fn main() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "admin").await;
    app.make_admin(user.id).await;
    let big = app.new_target(&user, "big.example.com").await;
    let laying = Instant::now();
    scanfleet_tests::history::lay_history(&app, user.id, big, FINGERPRINTS, SCANS).await;
    println!(
        "laid {FINGERPRINTS} fingerprints and {} findings in {:.0?}",
        FINGERPRINTS * SCANS,
        laying.elapsed()
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
        (
            "target ?q=finding 4242",
            format!("/targets/{big}?q=finding+4242"),
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
