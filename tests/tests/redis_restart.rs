//! Redis going away under a running fleet (issue 28): a private
//! `redis-server` killed with SIGKILL mid-scan and started again on the same
//! port, with and without persistence, and a Sentinel set whose master is
//! killed. Real processes (api, scheduler, scanner nodes) scan the lab on
//! 127.0.0.1. Every scan must end (completed with the clean scan's
//! findings, or failed with a reason), new scans must run, and no request
//! may wait on a dead connection.

use std::time::{Duration, Instant};

use reqwest::Method;
use scanfleet_tests::fleet::{fleet_with_lab, Fleet};
use scanfleet_tests::lab::{full_findings, lab_hosts, Lab, DOMAIN};
use scanfleet_tests::oob::{oob_templates_dir, OobServer, OOB_DOMAIN};
use scanfleet_tests::redis::{Persistence, RedisServer, SentinelSet, SENTINEL_MASTER};
use serde_json::json;

/// The fleet's settings for these tests: rate limiting on (its fallback is
/// under test), a reaper that looks every second.
const SETTINGS: &[(&str, &str)] = &[
    ("SCANFLEET_RATE__ENABLED", "true"),
    ("SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS", "1"),
    ("SCANFLEET_SCHEDULER__STUCK_AFTER_SECS", "30"),
];

/// How long one scan detail takes to answer.
async fn detail_latency(fleet: &Fleet, token: &str, scan: &str) -> Duration {
    let started = Instant::now();
    let (status, _) = fleet
        .call(Method::GET, &format!("/scans/{scan}"), token, None)
        .await;
    assert_eq!(status, 200);
    started.elapsed()
}

/// The median of `n` scan detail latencies.
async fn median_latency(fleet: &Fleet, token: &str, scan: &str, n: usize) -> Duration {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(detail_latency(fleet, token, scan).await);
    }
    samples.sort();
    samples[n / 2]
}

/// `POST /scans` until it answers 201, at most `within` from now; the new
/// scan's id.
async fn create_when_back(fleet: &Fleet, token: &str, target: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = fleet
            .call(
                Method::POST,
                "/scans",
                token,
                Some(json!({"target_id": target, "engine": "quick"})),
            )
            .await;
        if status == 201 {
            return body["id"].as_str().expect("scan id").to_string();
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            Instant::now() < deadline,
            "POST /scans still {status}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until a node took `scan` (its status left `queued`).
async fn wait_taken(fleet: &Fleet, token: &str, scan: &str, within: Duration) {
    fleet
        .wait_scan(token, scan, within, |s| s["status"] != "queued")
        .await;
}

/// While Redis is away: requests that do not need it answer at once, and
/// `POST /scans` fails at once with 503.
async fn assert_nothing_waits_on_redis(fleet: &Fleet, token: &str, scan: &str, target: &str) {
    // Until the clients notice the connection is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..5 {
        let took = detail_latency(fleet, token, scan).await;
        assert!(took < Duration::from_millis(400), "a detail took {took:?}");
    }
    let started = Instant::now();
    let (status, body) = fleet
        .call(
            Method::POST,
            "/scans",
            token,
            Some(json!({"target_id": target, "engine": "quick"})),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_mid_scan_with_aof_always_loses_nothing_and_new_scans_run_at_once() {
    let mut redis = RedisServer::start(Persistence::AofAlways);
    let lab = Lab::start(Duration::from_millis(60)).await;
    let url = redis.url();
    let mut settings = SETTINGS.to_vec();
    settings.push(("REDIS_URL", &url));
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &settings).await;
    let _api = fleet.api(&[]).await;
    let _scheduler = fleet.scheduler(&[]);
    let one_at_a_time = [("SCANFLEET_SCANNER__CONCURRENCY", "1")];
    let _a = fleet.node("node-a", &one_at_a_time);
    let _b = fleet.node("node-b", &one_at_a_time);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &scan).await;
    let before = median_latency(&fleet, &token, &scan, 11).await;

    redis.kill9();
    assert_nothing_waits_on_redis(&fleet, &token, &scan, &target).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.restart();
    let back = Instant::now();

    let fresh = create_when_back(&fleet, &token, &target, Duration::from_secs(10)).await;
    let accepted = back.elapsed();
    wait_taken(&fleet, &token, &fresh, Duration::from_secs(10)).await;
    let taken = back.elapsed();
    println!("redis back -> POST /scans 201: {accepted:?}; -> the new scan taken: {taken:?}");
    let after = median_latency(&fleet, &token, &scan, 11).await;
    println!("scan detail median latency: before {before:?}, after {after:?}");
    assert!(
        after <= (before * 3).max(Duration::from_millis(50)),
        "before {before:?}, after {after:?}"
    );

    // The api counted the outage of its own client.
    let metrics = fleet
        .http
        .get(format!("{}/metrics", fleet.base()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics.contains(r#"scanfleet_redis_reconnects_total{client="api"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"scanfleet_redis_outage_seconds_count{client="api"} 1"#),
        "{metrics}"
    );

    let detail = fleet
        .wait_finished(&token, &scan, Duration::from_secs(120))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    let done = fleet
        .wait_finished(&token, &fresh, Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    for id in [&scan, &fresh] {
        let notes = fleet.scan_notifications(&token, id).await;
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0]["type"], "scan_complete");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_without_persistence_still_ends_every_scan_and_runs_the_queued_one() {
    let mut redis = RedisServer::start(Persistence::None);
    let lab = Lab::start(Duration::from_millis(60)).await;
    let url = redis.url();
    let mut settings = SETTINGS.to_vec();
    settings.push(("REDIS_URL", &url));
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &settings).await;
    let _api = fleet.api(&[]).await;
    let _scheduler = fleet.scheduler(&[]);
    let _a = fleet.node("node-a", &[("SCANFLEET_SCANNER__CONCURRENCY", "1")]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let running = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &running).await;
    // The only node is busy: this one waits in the queue.
    let queued = fleet.scan(&token, &target, "quick").await;

    redis.kill9();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Everything Redis held is gone: the job, the lease, the streams.
    redis.restart();
    let back = Instant::now();
    let fresh = create_when_back(&fleet, &token, &target, Duration::from_secs(10)).await;
    println!(
        "redis back (empty) -> POST /scans 201: {:?}",
        back.elapsed()
    );

    // The node wrote its job and the scan's events back: a clean result.
    let detail = fleet
        .wait_finished(&token, &running, Duration::from_secs(120))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    // The scheduler pushed the lost job again.
    for id in [&queued, &fresh] {
        let done = fleet
            .wait_finished(&token, id, Duration::from_secs(90))
            .await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    for id in [&running, &queued, &fresh] {
        let notes = fleet.scan_notifications(&token, id).await;
        assert_eq!(notes.len(), 1, "{id}: {notes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_mid_scan_ends_the_scan_and_new_scans_run_on_the_promoted_replica() {
    let mut set = SentinelSet::start();
    let lab = Lab::start(Duration::from_millis(60)).await;
    let url = set.master.url();
    let sentinels = set.sentinels_setting();
    let mut settings = SETTINGS.to_vec();
    settings.extend([
        ("REDIS_URL", url.as_str()),
        ("REDIS_SENTINELS", sentinels.as_str()),
        ("REDIS_SENTINEL_MASTER", SENTINEL_MASTER),
    ]);
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &settings).await;
    let _api = fleet.api(&[]).await;
    let _scheduler = fleet.scheduler(&[]);
    let one_at_a_time = [("SCANFLEET_SCANNER__CONCURRENCY", "1")];
    let _a = fleet.node("node-a", &one_at_a_time);
    let _b = fleet.node("node-b", &one_at_a_time);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &scan).await;

    let old_master = set.master.port;
    set.master.kill9();
    let killed = Instant::now();
    let fresh = create_when_back(&fleet, &token, &target, Duration::from_secs(30)).await;
    let accepted = killed.elapsed();
    // The sentinel asked here may learn the new master a moment after the
    // one that led the failover (and that the services followed).
    let told = Instant::now();
    while set.master_port() != Some(set.replica.port) && told.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        set.master_port(),
        Some(set.replica.port),
        "the replica is master"
    );
    assert_ne!(set.master_port(), Some(old_master));
    wait_taken(&fleet, &token, &fresh, Duration::from_secs(15)).await;
    println!(
        "master killed -> POST /scans 201: {accepted:?}; -> the new scan taken: {:?}",
        killed.elapsed()
    );

    let detail = fleet
        .wait_finished(&token, &scan, Duration::from_secs(120))
        .await;
    match detail["status"].as_str() {
        Some("completed") => {
            assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()))
        }
        Some("failed") => assert!(detail["error"].is_string(), "{detail}"),
        other => panic!("the scan ended {other:?}: {detail}"),
    }
    let done = fleet
        .wait_finished(&token, &fresh, Duration::from_secs(60))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
}

/// The out-of-band server follows a Sentinel failover as the other
/// processes do: after the master is killed and its replica promoted, a
/// scan of the lab's out-of-band checks still registers with the server
/// and gets its callbacks, kept on the new master. (Before, the server
/// kept reconnecting to the dead master: no out-of-band finding.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_out_of_band_server_follows_a_sentinel_failover() {
    let mut set = SentinelSet::start();
    let url = set.master.url();
    let sentinels = set.sentinels_setting();
    let redis = [
        ("REDIS_URL", url.as_str()),
        ("REDIS_SENTINELS", sentinels.as_str()),
        ("REDIS_SENTINEL_MASTER", SENTINEL_MASTER),
    ];
    let oob = OobServer::start_with(&redis).await;
    let lab = Lab::start_with_oob(Duration::ZERO, oob.target()).await;
    let templates = oob_templates_dir();
    let server = oob.url();
    let mut settings = redis.to_vec();
    settings.extend([
        ("SCANFLEET_SCANNER__INTERACTSH_SERVER", server.as_str()),
        ("SCANFLEET_SCANNER__INTERACTSH_DOMAIN", OOB_DOMAIN),
        (
            "SCANFLEET_SCANNER__TEMPLATES_DIR",
            templates.to_str().expect("path"),
        ),
    ]);
    let fleet = fleet_with_lab(&lab, &[DOMAIN], &settings).await;
    let _api = fleet.api(&[]).await;
    let node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;

    set.master.kill9();
    let told = Instant::now();
    while set.master_port() != Some(set.replica.port) && told.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        set.master_port(),
        Some(set.replica.port),
        "the replica is master"
    );
    let scan = create_when_back(&fleet, &token, &target, Duration::from_secs(30)).await;
    oob.assert_scan_found_the_callbacks(&fleet, &token, &scan, &node)
        .await;
}

/// A scan's push that Redis refuses for a moment (here: out of memory,
/// every write refused; in a cluster: a slot moving past the client's
/// redirections) is sent again until Redis takes it, and the job is there
/// once; a push refused for longer than its bound fails, so the api can
/// answer 503 instead of hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_redis_refuses_for_a_moment_is_sent_again_and_one_refused_longer_fails() {
    use scanfleet_bus::{RedisTarget, ScanQueue};
    use scanfleet_common::jobs::{Engine, ScanJob};
    use scanfleet_common::keys::Keys;
    use scanfleet_tests::redis::command;

    let server = RedisServer::with_args(&["--maxmemory-policy", "noeviction"]);
    let port = server.port;
    let mut vars = std::collections::HashMap::new();
    vars.insert("REDIS_URL".to_string(), server.url());
    let settings = scanfleet_common::Settings::from_vars(&vars).expect("settings");
    let target = RedisTarget::from_settings(&settings.redis).expect("redis url");
    let redis = scanfleet_bus::connect(&target, "push-test")
        .await
        .expect("redis");
    let queue = ScanQueue::new(redis, &Keys::new("push-test"));
    let job = |id| ScanJob {
        scan_id: id,
        target_id: uuid::Uuid::now_v7(),
        domain: "push.example".to_string(),
        engine: Engine::Quick,
        templates: vec![],
        max_rps_per_host: None,
    };
    let refuse = || command(port, &["CONFIG", "SET", "maxmemory", "1"]).expect("refuse");
    let accept = || command(port, &["CONFIG", "SET", "maxmemory", "0"]).expect("accept");

    // Refused for 600 ms, then taken.
    let first = uuid::Uuid::now_v7();
    refuse();
    let began = Instant::now();
    let pushing = tokio::spawn({
        let queue = queue.clone();
        let job = job(first);
        async move { queue.push(&job).await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !pushing.is_finished(),
        "the push gave up while Redis refused it"
    );
    accept();
    let added = pushing
        .await
        .expect("join")
        .expect("pushed once Redis took it");
    assert!(added, "the job was added");
    assert!(began.elapsed() >= Duration::from_millis(600));
    let states = queue.inspect(&[first]).await.expect("inspect");
    assert_eq!(
        states.get(&first),
        Some(&scanfleet_bus::JobState::Waiting),
        "{states:?}"
    );
    assert!(
        !queue.push(&job(first)).await.expect("again"),
        "a second push adds nothing"
    );

    // Refused throughout: the push fails within its bound (3 s) and a
    // little, and adds nothing.
    let second = uuid::Uuid::now_v7();
    refuse();
    let began = Instant::now();
    let refused = tokio::time::timeout(Duration::from_secs(10), queue.push(&job(second)))
        .await
        .expect("the push gave up rather than hang");
    let took = began.elapsed();
    accept();
    assert!(refused.is_err(), "{refused:?}");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let states = queue.inspect(&[second]).await.expect("inspect");
    assert_eq!(
        states.get(&second),
        Some(&scanfleet_bus::JobState::Missing),
        "{states:?}"
    );
}
