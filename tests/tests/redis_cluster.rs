//! The fleet on a Redis Cluster (issue 34, item 2): six private
//! `redis-server` processes (three masters, three replicas, made with
//! `redis-cli --cluster create`), every process of the fleet given them as
//! `SCANFLEET_REDIS__CLUSTER_NODES`. A full lab scan ends with the clean
//! scan's findings; a master killed mid-scan (its replica promoted) and
//! slots moved to other masters mid-scan (the queue's and the scan's by
//! hand, key by key, so `TRYAGAIN`, `ASK` and `MOVED` meet the clients,
//! then a master's whole range with `redis-cli --cluster reshard`) lose
//! and duplicate nothing, and new scans run after.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use scanfleet_tests::fleet::{fleet_with_lab, Fleet, Proc};
use scanfleet_tests::lab::{full_findings, lab_hosts, Lab, DOMAIN};
use scanfleet_tests::oob::{oob_templates_dir, OobServer, OOB_DOMAIN};
use scanfleet_tests::redis::{add_command_calls, Persistence, RedisCluster, RedisServer};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// A reaper that looks every second, as the restart tests have.
const SETTINGS: &[(&str, &str)] = &[
    ("SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS", "1"),
    ("SCANFLEET_SCHEDULER__STUCK_AFTER_SECS", "30"),
];

/// A fleet (api, scheduler, two nodes of one slot each) on `cluster`.
async fn fleet_on(cluster: &RedisCluster, lab: &Lab) -> Fleet {
    let nodes = cluster.nodes_setting();
    let mut settings = SETTINGS.to_vec();
    settings.push(("SCANFLEET_REDIS__CLUSTER_NODES", &nodes));
    fleet_with_lab(lab, &lab_hosts(), &settings).await
}

/// Follows a scan's WebSocket to its close: the messages.
async fn follow(fleet: &Fleet, token: &str, scan: &str) -> Vec<Value> {
    let mut ws = fleet.websocket(token, scan).await;
    let mut messages = Vec::new();
    while let Some(m) = tokio::time::timeout(Duration::from_secs(120), ws.next())
        .await
        .expect("websocket went silent")
    {
        match m {
            Ok(Message::Text(t)) => messages.push(serde_json::from_str(&t).expect("json message")),
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    messages
}

/// The scan ended completed with the clean scan's findings, each once,
/// one notification, taken up `attempts` times at most.
async fn assert_clean(fleet: &Fleet, token: &str, scan: &str, attempts: i64) {
    let detail = fleet
        .wait_finished(token, scan, Duration::from_secs(120))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    assert_eq!(detail["findings_count"], 12, "{detail}");
    let notes = fleet.scan_notifications(token, scan).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    let taken = fleet.attempts(scan).await.unwrap_or(0);
    assert!((1..=attempts).contains(&taken), "taken up {taken} times");
}

/// Calls by command between two `INFO commandstats`, and their total.
fn spent(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> (u64, String) {
    let mut total = 0;
    let mut by: Vec<(u64, &str)> = after
        .iter()
        .map(|(name, n)| (n - before.get(name).copied().unwrap_or(0), name.as_str()))
        .filter(|(n, _)| *n > 0)
        .collect();
    by.sort_by(|a, b| b.cmp(a));
    let text = by
        .iter()
        .map(|(n, name)| {
            total += n;
            format!("{name}={n}")
        })
        .collect::<Vec<_>>()
        .join(" ");
    (total, text)
}

/// One full scan of the lab on a fleet of one node, the commands Redis
/// ran meanwhile (`calls` reads `INFO commandstats`).
async fn commands_of_one_scan(
    fleet: &Fleet,
    calls: impl Fn() -> BTreeMap<String, u64>,
) -> (u64, String, Duration) {
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let before = calls();
    let started = Instant::now();
    let scan = fleet.scan(&token, &target, "full").await;
    assert_clean(fleet, &token, &scan, 1).await;
    let took = started.elapsed();
    let (total, by) = spent(&before, &calls());
    (total, by, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_lab_scan_on_a_redis_cluster_ends_with_the_clean_scans_findings() {
    let started = Instant::now();
    let cluster = RedisCluster::start();
    println!("cluster up in {:?}", started.elapsed());
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_on(&cluster, &lab).await;
    let _api = fleet.api(&[]).await;
    println!("fleet up in {:?}", started.elapsed());
    let _scheduler = fleet.scheduler(&[]);
    let _a = fleet.node("node-a", &[]);
    let _b = fleet.node("node-b", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;

    // Followed live through the hub's per-slot reads.
    let messages = follow(&fleet, &token, &scan).await;
    let last = messages.last().expect("messages");
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["findings_count"], 12, "{last}");
    assert!(messages.iter().any(|m| m["type"] == "finding"));
    assert_clean(&fleet, &token, &scan, 1).await;

    // The queue's keys in one slot; the scan's stream in its own.
    let keys = fleet.keys();
    let queue_slot = cluster.slot(&keys.scan_queue_jobs());
    assert_eq!(cluster.slot(&keys.scan_queue_sweep_lock()), queue_slot);
    let id = scan.parse().unwrap();
    let scan_slot = cluster.slot(&keys.scan_events_stream(id));
    assert_eq!(cluster.slot(&keys.scan_closed(id)), scan_slot);
    println!(
        "queue slot {queue_slot} on :{}, scan slot {scan_slot} on :{}",
        cluster.master_of(queue_slot).port,
        cluster.master_of(scan_slot).port
    );
}

/// A full scan running on one of two nodes that take one scan at a time,
/// with an api and a scheduler; the processes live as long as `_procs`.
struct Running {
    _procs: Vec<Proc>,
    token: String,
    target: String,
    scan: String,
}

async fn run_a_scan_on_two_nodes(fleet: &Fleet) -> Running {
    let one_at_a_time = [("SCANFLEET_SCANNER__CONCURRENCY", "1")];
    let procs = vec![
        fleet.api(&[]).await,
        fleet.scheduler(&[]),
        fleet.node("node-a", &one_at_a_time),
        fleet.node("node-b", &one_at_a_time),
    ];
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &scan).await;
    Running {
        _procs: procs,
        token,
        target,
        scan,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_scan_loses_and_duplicates_nothing_and_new_scans_run() {
    let mut cluster = RedisCluster::start();
    let lab = Lab::start(Duration::from_millis(60)).await;
    let fleet = fleet_on(&cluster, &lab).await;
    let Running {
        _procs,
        token,
        target,
        scan,
    } = run_a_scan_on_two_nodes(&fleet).await;

    // The master of the queue's slot: jobs, leases and wake-ups.
    let queue_slot = cluster.slot(&fleet.keys().scan_queue_jobs());
    let master = cluster.master_of(queue_slot);
    cluster.kill9(master.port);
    let killed = Instant::now();
    let promoted = loop {
        let now = cluster.nodes();
        let serving = now
            .iter()
            .find(|n| n.master && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&queue_slot)));
        if let Some(n) = serving.filter(|n| n.port != master.port) {
            break n.port;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no replica promoted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "master :{} killed; replica :{promoted} serves slot {queue_slot} after {:?}",
        master.port,
        killed.elapsed()
    );

    assert_clean(&fleet, &token, &scan, 2).await;
    let fresh = fleet.scan(&token, &target, "full").await;
    assert_clean(&fleet, &token, &fresh, 1).await;
    println!(
        "the scan and a new one done {:?} after the kill",
        killed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_moved_mid_scan_lose_nothing() {
    let cluster = RedisCluster::start();
    let lab = Lab::start(Duration::from_millis(60)).await;
    let fleet = fleet_on(&cluster, &lab).await;
    let Running {
        _procs,
        token,
        target,
        scan,
    } = run_a_scan_on_two_nodes(&fleet).await;
    let _ws = fleet.websocket(&token, &scan).await;

    // First the queue's slot and the scan's slot, by hand, one key every
    // 300 ms (the scripts meet split keys: `TRYAGAIN`, then `ASK`, then
    // `MOVED`), each to another master.
    let keys = fleet.keys();
    let id = scan.parse().unwrap();
    let started = Instant::now();
    for slot in [
        cluster.slot(&keys.scan_queue_jobs()),
        cluster.slot(&keys.scan_events_stream(id)),
    ] {
        let from = cluster.master_of(slot);
        let to = cluster
            .nodes()
            .into_iter()
            .find(|n| n.master && n.id != from.id)
            .expect("another master");
        let moved = tokio::task::block_in_place(|| {
            cluster.move_slot(slot, &to, Duration::from_millis(300))
        });
        assert_eq!(cluster.master_of(slot).port, to.port);
        println!(
            "slot {slot}: {moved} keys moved from :{} to :{} ({:?} in)",
            from.port,
            to.port,
            started.elapsed()
        );
    }
    let detail = fleet.get(&format!("/scans/{scan}"), &token).await;
    println!("the scan was {} when its slots had moved", detail["status"]);

    // Then a whole master's range with `redis-cli --cluster reshard`.
    let queue_slot = cluster.slot(&keys.scan_queue_jobs());
    let from = cluster.master_of(queue_slot);
    let to = cluster
        .nodes()
        .into_iter()
        .find(|n| n.master && n.id != from.id)
        .expect("another master");
    let count: u32 = from.slots.iter().map(|(a, b)| u32::from(b - a) + 1).sum();
    let resharding = Instant::now();
    let out = tokio::task::block_in_place(|| cluster.reshard(&from.id, &to.id, count));
    assert!(
        out.status.success(),
        "reshard: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    println!(
        "resharded {count} slots from :{} to :{} in {:?}",
        from.port,
        to.port,
        resharding.elapsed()
    );

    // Seen once (22:37 run of 2026-11-27): while the queue's keys were
    // split, one node's client answered "Max attempts reached" (fred's
    // redirections) and then timed out for about 15 s, its lease lapsed
    // and the other node took the scan over: run twice, recorded once.
    // The clients allow more attempts a command since; a second take-up
    // is still allowed here, as that run was never reproduced at will.
    assert_clean(&fleet, &token, &scan, 2).await;
    // Started as the reshard ends, the fresh scan may meet a client that
    // the moves left without a connection for seconds (seen on
    // 2026-11-29): a second take-up is allowed, as for the first.
    let fresh = fleet.scan(&token, &target, "full").await;
    assert_clean(&fleet, &token, &fresh, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_out_of_band_server_keeps_its_sessions_on_a_redis_cluster() {
    let cluster = RedisCluster::start();
    let nodes = cluster.nodes_setting();
    let oob = OobServer::start_with(&[("SCANFLEET_REDIS__CLUSTER_NODES", &nodes)]).await;
    let lab = Lab::start_with_oob(Duration::ZERO, oob.target()).await;
    let templates = oob_templates_dir();
    let fleet = fleet_with_lab(
        &lab,
        &[DOMAIN],
        &[
            ("SCANFLEET_REDIS__CLUSTER_NODES", &nodes),
            ("SCANFLEET_SCANNER__INTERACTSH_SERVER", &oob.url()),
            ("SCANFLEET_SCANNER__INTERACTSH_DOMAIN", OOB_DOMAIN),
            (
                "SCANFLEET_SCANNER__TEMPLATES_DIR",
                templates.to_str().unwrap(),
            ),
        ],
    )
    .await;
    let _api = fleet.api(&[]).await;
    let node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "quick").await;
    oob.assert_scan_found_the_callbacks(&fleet, &token, &scan, &node)
        .await;
}

/// Redis commands one full lab scan costs (api, scheduler, one node), on a
/// single server and on the cluster, from `INFO commandstats` before and
/// after: a measurement, run by hand
/// (`cargo nextest run -p scanfleet-tests --test redis_cluster --run-ignored only --no-capture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn redis_commands_per_lab_scan_on_a_single_server_and_on_a_cluster() {
    let lab = Lab::start(Duration::ZERO).await;

    let single = RedisServer::start(Persistence::None);
    let url = single.url();
    let mut settings = SETTINGS.to_vec();
    settings.push(("REDIS_URL", &url));
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &settings).await;
    let api = fleet.api(&[]).await;
    let scheduler = fleet.scheduler(&[]);
    let node = fleet.node("node-a", &[]);
    let port = single.port;
    let (total, by, took) = commands_of_one_scan(&fleet, || {
        let mut calls = BTreeMap::new();
        add_command_calls(&mut calls, port);
        calls
    })
    .await;
    println!("single server: {total} commands in {took:?}: {by}");
    drop((api, scheduler, node));

    let cluster = RedisCluster::start();
    let fleet = fleet_on(&cluster, &lab).await;
    let _api = fleet.api(&[]).await;
    let _scheduler = fleet.scheduler(&[]);
    let _node = fleet.node("node-a", &[]);
    let (total, by, took) = commands_of_one_scan(&fleet, || cluster.command_calls()).await;
    println!("cluster (3 masters): {total} commands in {took:?}: {by}");
}
