//! Webhook figures on this machine, with the api started as a real process
//! and a receiver on 127.0.0.1 (`scanfleet_tests::receiver`):
//!
//! - event-to-delivery latency over 1,000 events: from the event's
//!   `created_at` (stamped by Postgres in the transaction that writes it to
//!   the outbox) to its arrival at the receiver, one `ping` every 20 ms;
//! - outbox throughput: a completed scan with 5,000 findings writes 5,000
//!   `finding.new` events in the ingester's commit; deliveries a second
//!   from that commit until the receiver has them all (one api process).
//!
//! `cargo bench -p scanfleet-tests --bench webhooks` (debug binaries; with
//! `SCANFLEET_TEST_PROFILE=release` the release ones). Everything runs on
//! one machine, so the figures include the cost of sharing its cores.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::Method;
use scanfleet_common::events::{FindingEvent, ScanEvent, ScanEventKind, ScanStatus};
use scanfleet_common::severity::Severity;
use scanfleet_tests::fleet::Fleet;
use scanfleet_tests::receiver::Receiver;
use serde_json::json;
use uuid::Uuid;

const LATENCY_EVENTS: usize = 1000;
const THROUGHPUT_FINDINGS: usize = 5000;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len().max(1) - 1) as f64 * p).round() as usize;
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

/// Arrival time minus `created_at`, in ms, for every received event.
fn latencies(rx: &Receiver) -> Vec<f64> {
    let mut values: Vec<f64> = rx
        .received()
        .iter()
        .filter_map(|r| {
            let created: DateTime<Utc> = r.json()["created_at"].as_str()?.parse().ok()?;
            let arrived = Utc::now() - chrono::Duration::from_std(r.at.elapsed()).ok()?;
            Some((arrived - created).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    values.sort_by(|a, b| a.total_cmp(b));
    values
}

async fn webhook(fleet: &Fleet, token: &str, rx: &Receiver, events: &[&str]) -> String {
    let (status, body) = fleet
        .call(
            Method::POST,
            "/webhooks",
            token,
            Some(json!({"url": rx.url("/"), "events": events})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().expect("webhook id").to_string()
}

async fn latency(fleet: &Fleet, token: &str) {
    let rx = Receiver::start().await;
    let hook = webhook(fleet, token, &rx, &["scan.completed"]).await;
    for _ in 0..LATENCY_EVENTS {
        let (status, _) = fleet
            .call(Method::POST, &format!("/webhooks/{hook}/test"), token, None)
            .await;
        assert_eq!(status, 202);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rx.wait_for(Duration::from_secs(120), |r| r.len() >= LATENCY_EVENTS)
        .await;
    let values = latencies(&rx);
    println!(
        "event-to-delivery latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} events)",
        percentile(&values, 0.5),
        percentile(&values, 0.99),
        values.last().copied().unwrap_or(f64::NAN),
        values.len()
    );
}

async fn throughput(fleet: &Fleet, token: &str) {
    let rx = Receiver::start().await;
    webhook(fleet, token, &rx, &["finding.new"]).await;
    let target = fleet.target(token, "throughput.example.com").await;
    let scan: Uuid = fleet
        .scan(token, &target, "quick")
        .await
        .parse()
        .expect("scan id");
    let mut lines = Vec::with_capacity(THROUGHPUT_FINDINGS + 1);
    for i in 0..THROUGHPUT_FINDINGS {
        let finding = FindingEvent {
            template_id: format!("tpl-{i}"),
            name: format!("Finding {i}"),
            severity: Severity::ALL[i % 5],
            host: "throughput.example.com".into(),
            matched_at: format!("https://throughput.example.com/{i}"),
            description: String::new(),
            remediation: String::new(),
            extracted_results: Vec::new(),
            matcher_name: None,
            classification: Default::default(),
            evidence: None,
        };
        lines.push(ScanEvent::new(scan, ScanEventKind::Finding(finding)).to_json());
    }
    lines.push(ScanEvent::status(scan, ScanStatus::Completed, None).to_json());
    let redis = fleet.redis().await;
    let keys = scanfleet_common::keys::Keys::new(fleet.prefix.clone());
    let started = Instant::now();
    scanfleet_bus::events::append(&redis, &keys, scan, &lines)
        .await
        .expect("append");
    rx.wait_for(Duration::from_secs(600), |r| r.len() >= THROUGHPUT_FINDINGS)
        .await;
    let db = fleet.db().await;
    let row = db
        .query_one(
            "SELECT min(created_at) AS first FROM webhook_events WHERE type = 'finding.new'",
            &[],
        )
        .await
        .expect("events");
    let committed: DateTime<Utc> = row.get("first");
    let last = rx.received().iter().map(|r| r.at).max().expect("received");
    let since_commit =
        (Utc::now() - chrono::Duration::from_std(last.elapsed()).unwrap_or_default() - committed)
            .num_milliseconds() as f64
            / 1000.0;
    println!(
        "outbox throughput: {THROUGHPUT_FINDINGS} deliveries in {since_commit:.2} s from the commit \
         ({:.0} deliveries/s; {:.2} s from the events' append, ingestion included)",
        THROUGHPUT_FINDINGS as f64 / since_commit,
        (last - started).as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let fleet = Fleet::new(&[
        ("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE".into(), "true".into()),
        ("RUST_LOG".into(), "warn".into()),
    ])
    .await;
    let _api = fleet.api(&[]).await;
    let token = fleet.user().await;
    latency(&fleet, &token).await;
    throughput(&fleet, &token).await;
}
