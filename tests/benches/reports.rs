//! Report figures on this machine: a completed scan with 10,000 findings
//! (20 hosts, 50 templates, every severity, descriptions of a few hundred
//! characters, some in Cyrillic), each format fetched over HTTP from the
//! real app in-process against Postgres, so the time includes streaming
//! the rows out of Postgres, rendering and sending. Five requests per
//! format; the bar is under 2 s each.
//!
//! `cargo bench -p scanfleet-tests --bench reports`.

use std::time::Instant;

use scanfleet_common::events::{FindingEvent, ScanStatus};
use scanfleet_common::Severity;
use scanfleet_core::store::{findings, scans};
use scanfleet_tests::spawn_app;
use serde_json::json;

const FINDINGS: usize = 10_000;
const RUNS: usize = 5;

fn finding(i: usize) -> FindingEvent {
    let host = format!("host{:02}.example.com", i % 20);
    let template = format!("template-{:02}", i % 50);
    let description = if i.is_multiple_of(7) {
        "Панель администратора доступна без пароля; любой посетитель может изменить \
         настройки сайта и читать данные пользователей."
            .repeat(2)
    } else {
        "The response exposes configuration that should not be public: version \
         numbers, internal paths and, in some cases, credentials. An attacker can use \
         them to plan further attacks against the service."
            .to_string()
    };
    FindingEvent {
        template_id: template.clone(),
        name: format!("{template} exposure on {host}"),
        severity: Severity::ALL[i % 5],
        host: host.clone(),
        matched_at: format!("https://{host}/path/{i}/resource?id={i}"),
        description,
        remediation: "Restrict access to the resource, remove it from the web root, \
                      and rotate any credential it exposed."
            .into(),
        extracted_results: if i.is_multiple_of(3) {
            vec![format!("token-{i}"), "nginx/1.25.3".into()]
        } else {
            vec![]
        },
        matcher_name: Some("body".into()),
        classification: Default::default(),
        evidence: None,
    }
}

#[tokio::main]
async fn main() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({ "target_id": target }),
        )
        .await;
    let scan_id: uuid::Uuid = r.body["id"].as_str().unwrap().parse().unwrap();
    {
        let db = app.state.db.get().await.unwrap();
        let all: Vec<FindingEvent> = (0..FINDINGS).map(finding).collect();
        for batch in all.chunks(1000) {
            findings::insert_findings(&db, scan_id, user.id, batch)
                .await
                .unwrap();
        }
        for s in [
            ScanStatus::Pending,
            ScanStatus::Running,
            ScanStatus::Completed,
        ] {
            scans::set_scan_status(&db, scan_id, s, None).await.unwrap();
        }
    }
    println!("{FINDINGS} findings, {RUNS} requests per format");
    println!("| format | p50 | max | size |");
    println!("|---|---|---|---|");
    for format in ["html", "pdf", "json", "sarif", "csv"] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..RUNS {
            let started = Instant::now();
            let resp = app
                .client
                .get(app.url(&format!("/api/v1/scans/{scan_id}/report?format={format}")))
                .bearer_auth(&user.access_token)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let body = resp.bytes().await.unwrap();
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            size = body.len();
        }
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "| {format} | {:.0} ms | {:.0} ms | {:.1} MB |",
            times[RUNS / 2],
            times[RUNS - 1],
            size as f64 / 1e6
        );
    }
}
