//! Pipeline figures on this machine, with the release binaries started as
//! real processes (api, scanner nodes) against a lab server on 127.0.0.1:
//!
//! - enqueue-to-pickup latency with idle nodes: from the scan's creation
//!   (its row's `created_at`) to the node's `pending` event (the stream
//!   entry's Redis timestamp), one scan at a time;
//! - scanner-event-to-WebSocket latency: from the event's `at` (stamped by
//!   the node just before it is written) to its arrival at a WebSocket
//!   client;
//! - scans per minute of small scans (`quick` on a lab host answering each
//!   request after 50 ms, a distinct host per scan) with one and with two
//!   nodes (two scans at once per node).
//!
//! `cargo bench -p scanfleet-tests --bench pipeline`. Everything runs on
//! one machine, so the figures include the cost of sharing its cores.
//!
//! The fleet alone: `BENCH_FLEET=1,8,32,64 cargo bench -p scanfleet-tests
//! --bench pipeline` runs `BENCH_SCANS_PER_NODE` (16) paced `quick` scans
//! per node for each node count and prints scans a minute and the ratio to
//! the first count. `SCANFLEET_TEST_PROFILE=debug` with `cargo test
//! --bench pipeline` runs it on debug builds (no release build needed).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use scanfleet_tests::fleet::Fleet;
use scanfleet_tests::lab::Lab;
use tokio_tungstenite::tungstenite::Message;

const PICKUPS: usize = 40;
const THROUGHPUT_SCANS: usize = 40;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut values: Vec<f64>) {
    values.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{name}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} samples)",
        percentile(&values, 0.5),
        percentile(&values, 0.99),
        values.last().copied().unwrap_or(f64::NAN),
        values.len()
    );
}

async fn fleet(lab: &Lab) -> Fleet {
    let mut env = lab.node_env(&["bench.test", "*.bench.test"]);
    env.push(("RUST_LOG".into(), "warn".into()));
    Fleet::new(&env).await
}

/// Entry-id milliseconds of the scan's first `pending` event.
async fn pickup_ms(fleet: &Fleet, scan: &str) -> Option<i64> {
    use fred::interfaces::StreamsInterface;
    let entries: Vec<(String, std::collections::HashMap<String, String>)> = fleet
        .redis()
        .await
        .xrange_values(
            fleet.keys().scan_events_stream(scan.parse().unwrap()),
            "-",
            "+",
            Some(20),
        )
        .await
        .ok()?;
    entries.iter().find_map(|(id, f)| {
        let e: serde_json::Value = serde_json::from_str(f.get("event")?).ok()?;
        (e["kind"] == "status" && e["status"] == "pending")
            .then(|| id.split('-').next()?.parse().ok())
            .flatten()
    })
}

async fn pickup_latency(lab: &Lab) {
    let fleet = fleet(lab).await;
    let _api = fleet.api(&[]).await;
    let _a = fleet.node("bench-a", &[]);
    let _b = fleet.node("bench-b", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, "pickup.bench.test").await;
    let db = fleet.db().await;
    // Let both nodes register and go idle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut samples = Vec::new();
    for _ in 0..PICKUPS {
        let scan = fleet.scan(&token, &target, "quick").await;
        fleet
            .wait_finished(&token, &scan, Duration::from_secs(60))
            .await;
        let id: uuid::Uuid = scan.parse().unwrap();
        let created: DateTime<Utc> = db
            .query_one("SELECT created_at FROM scans WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get(0);
        if let Some(ms) = pickup_ms(&fleet, &scan).await {
            samples.push((ms - created.timestamp_millis()) as f64);
        }
    }
    summary("enqueue-to-pickup, idle nodes", samples);
}

async fn websocket_latency(lab: &Lab) {
    let fleet = fleet(lab).await;
    let _api = fleet.api(&[]).await;
    let _a = fleet.node("bench-a", &[]);
    let token = fleet.user().await;
    let mut samples = Vec::new();
    for i in 0..5 {
        let target = fleet.target(&token, &format!("ws{i}.bench.test")).await;
        let scan = fleet.scan(&token, &target, "full").await;
        let url = format!(
            "ws://127.0.0.1:{}/api/v1/ws/scans/{scan}?token={token}",
            fleet.api_port
        );
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut first = true;
        while let Some(Ok(m)) = ws.next().await {
            let received = Utc::now();
            match m {
                Message::Text(t) => {
                    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                    // The first message is the snapshot, not a live event.
                    if !first {
                        let at: DateTime<Utc> = v["at"].as_str().unwrap().parse().unwrap();
                        samples.push((received - at).num_microseconds().unwrap() as f64 / 1000.0);
                    }
                    first = false;
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    }
    summary("scanner event to WebSocket client", samples);
}

async fn throughput(lab: &Lab, nodes: usize, count: usize) -> f64 {
    let fleet = fleet(lab).await;
    let _api = fleet.api(&[]).await;
    let _nodes: Vec<_> = (0..nodes)
        .map(|i| fleet.node(&format!("bench-{i}"), &[]))
        .collect();
    let token = fleet.user().await;
    let mut targets = Vec::new();
    for i in 0..count {
        targets.push(fleet.target(&token, &format!("t{i}.bench.test")).await);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let start = Instant::now();
    let mut scans = Vec::new();
    for t in &targets {
        scans.push(fleet.scan(&token, t, "quick").await);
    }
    for s in &scans {
        let done = fleet
            .wait_finished(&token, s, Duration::from_secs(600))
            .await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    let per_minute = count as f64 / start.elapsed().as_secs_f64() * 60.0;
    println!(
        "small scans with {nodes} node(s): {per_minute:.0} scans/min ({count} scans in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    per_minute
}

/// The fleet alone (`BENCH_FLEET=1,8`): for each node count, `quick` scans
/// of the paced lab (`BENCH_SCANS_PER_NODE` per node, 16 unless set), and
/// each count's ratio to the first.
async fn fleet_scaling(counts: &str) {
    let per_node: usize = std::env::var("BENCH_SCANS_PER_NODE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16);
    let slow = Lab::start(Duration::from_millis(50)).await;
    let mut first: Option<(usize, f64)> = None;
    for nodes in counts
        .split(',')
        .filter_map(|n| n.trim().parse::<usize>().ok())
    {
        let rate = throughput(&slow, nodes, nodes * per_node).await;
        let (base_nodes, base) = *first.get_or_insert((nodes, rate));
        println!(
            "{nodes} node(s) / {base_nodes} node(s): {:.2}x",
            rate / base
        );
    }
}

fn main() {
    // Release binaries unless the run asks for others (`debug`).
    if std::env::var("SCANFLEET_TEST_PROFILE").is_err() {
        std::env::set_var("SCANFLEET_TEST_PROFILE", "release");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if let Ok(counts) = std::env::var("BENCH_FLEET") {
            return fleet_scaling(&counts).await;
        }
        let fast = Lab::start(Duration::ZERO).await;
        pickup_latency(&fast).await;
        websocket_latency(&fast).await;
        let slow = Lab::start(Duration::from_millis(50)).await;
        let one = throughput(&slow, 1, THROUGHPUT_SCANS).await;
        let two = throughput(&slow, 2, THROUGHPUT_SCANS).await;
        println!("two nodes / one node: {:.2}x", two / one);
    });
}
