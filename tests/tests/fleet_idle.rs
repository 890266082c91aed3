//! Issue 34, item 3: idle scanner nodes cost Redis (almost) nothing and
//! still take a job at once. Twenty real `scanfleet-scanner worker`
//! processes on a private `redis-server`, production timings (heartbeat
//! 2 s, lease 10 s): the server's own count of commands over ten idle
//! seconds, per node; then the time from a push to a node taking the job.

use std::time::{Duration, Instant};

use fred::interfaces::HashesInterface;
use scanfleet_bus::{markers, ScanQueue};
use scanfleet_common::jobs::{Engine, ScanJob};
use scanfleet_common::keys::Keys;
use scanfleet_tests::fleet::{Fleet, Proc};
use scanfleet_tests::redis::{command, RedisServer};
use uuid::Uuid;

/// `total_commands_processed` of the server on `port`.
fn commands_processed(port: u16) -> u64 {
    let info = command(port, &["INFO", "stats"]).expect("INFO stats");
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("total_commands_processed")
}

/// Waits until `n` nodes are in the fleet's registry.
async fn wait_registered(redis: &fred::clients::Client, keys: &Keys, n: u64, nodes: &[Proc]) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let registered: u64 = redis.hlen(keys.nodes()).await.expect("HLEN");
        if registered >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{registered} of {n} nodes registered; last log:\n{}",
            nodes.last().map(Proc::log_text).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Pushes `n` jobs one after the other (of scans already over, which a
/// node drops as soon as it takes them) and times each from the push to
/// its job leaving the queue; sorted.
async fn pick_ups(queue: &ScanQueue, keys: &Keys, n: usize) -> Vec<Duration> {
    let mut times = Vec::new();
    for _ in 0..n {
        let scan_id = Uuid::now_v7();
        markers::close(queue.client(), keys, scan_id)
            .await
            .expect("closed marker");
        let job = ScanJob {
            scan_id,
            target_id: Uuid::now_v7(),
            domain: "idle.example.test".into(),
            engine: Engine::Quick,
            templates: Vec::new(),
            max_rps_per_host: None,
        };
        let pushed = Instant::now();
        assert!(queue.push(&job).await.expect("push"));
        loop {
            if queue.job(scan_id).await.expect("job").is_none() {
                break;
            }
            assert!(pushed.elapsed() < Duration::from_secs(30), "job not taken");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        times.push(pushed.elapsed());
    }
    times.sort();
    times
}

fn summary(times: &[Duration]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() * 9 / 10]),
        ms(times[times.len() - 1])
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_idle_nodes_cost_redis_under_two_commands_a_second_each_and_take_jobs_at_once() {
    let server = RedisServer::with_args(&[]);
    let fleet = Fleet::new(&[
        ("REDIS_URL".to_string(), server.url()),
        (
            "SCANFLEET_SCANNER__HEARTBEAT_SECS".to_string(),
            "2".to_string(),
        ),
        (
            "SCANFLEET_SCANNER__ORPHAN_AFTER_SECS".to_string(),
            "10".to_string(),
        ),
    ])
    .await;
    let keys = Keys::new(fleet.prefix.clone());
    let redis = fleet.redis().await;
    let queue = ScanQueue::new(redis.clone(), &keys);

    let mut nodes = vec![fleet.node("idle-0", &[])];
    wait_registered(&redis, &keys, 1, &nodes).await;
    let one = pick_ups(&queue, &keys, 20).await;

    for i in 1..20 {
        nodes.push(fleet.node(&format!("idle-{i}"), &[]));
    }
    wait_registered(&redis, &keys, 20, &nodes).await;
    // Every node past its start-up round.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let from = commands_processed(server.port);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let to = commands_processed(server.port);
    let seconds = started.elapsed().as_secs_f64();
    // The second INFO is counted too.
    let per_node = (to - from).saturating_sub(1) as f64 / 20.0 / seconds;
    let stats = command(server.port, &["INFO", "commandstats"]).unwrap_or_default();
    println!("commands while idle:\n{stats}");
    let twenty = pick_ups(&queue, &keys, 20).await;
    println!(
        "20 idle nodes: {per_node:.2} Redis commands a second per node ({} in {seconds:.1} s)",
        to - from
    );
    println!("pick-up, 1 idle node: {}", summary(&one));
    println!("pick-up, 20 idle nodes: {}", summary(&twenty));

    assert!(
        per_node < 2.0,
        "an idle node sends {per_node:.2} commands a second"
    );
    for times in [&one, &twenty] {
        assert!(
            times[times.len() / 2] < Duration::from_millis(50),
            "pick-up {}",
            summary(times)
        );
    }
}
