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
//! per node for each node count, spread over `BENCH_USERS` (16) users, and
//! prints scans a minute and the ratio to the first count, then the
//! pick-up of `FLEET_PICKUPS` scans submitted one at a time to that many
//! idle nodes (each stopped once taken, so every one finds a free slot).
//! The lab
//! answers on `BENCH_LAB_ADDRESSES` (16) loopback addresses besides
//! 127.0.0.1, the targets spread over them (see [`Lab::start_spread`]).
//! `SCANFLEET_TEST_PROFILE=debug` with `cargo test
//! --bench pipeline` runs it on debug builds (no release build needed).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use scanfleet_tests::fleet::Fleet;
use scanfleet_tests::lab::Lab;
use tokio_tungstenite::tungstenite::Message;

const PICKUPS: usize = 40;
/// Pick-ups timed with each fleet size, its scans over.
const FLEET_PICKUPS: usize = 100;
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
    let mut env = lab.spread_env("bench.test");
    env.push(("RUST_LOG".into(), "warn".into()));
    Fleet::new(&env).await
}

/// When the scan's first `pending` event was made: its `at` (stamped by
/// the node, to the microsecond), else its entry id's millisecond.
async fn pickup_at(fleet: &Fleet, scan: &str) -> Option<DateTime<Utc>> {
    use fred::interfaces::StreamsInterface;
    let entries: Vec<(String, HashMap<String, String>)> = fleet
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
        if e["kind"] != "status" || e["status"] != "pending" {
            return None;
        }
        e["at"]
            .as_str()
            .and_then(|at| at.parse().ok())
            .or_else(|| DateTime::from_timestamp_millis(id.split('-').next()?.parse().ok()?))
    })
}

/// Milliseconds from the scan's row to its `pending` event; `None` when
/// no node took it within 10 s.
async fn pickup_of(fleet: &Fleet, db: &tokio_postgres::Client, scan: &str) -> Option<f64> {
    let id: uuid::Uuid = scan.parse().unwrap();
    let created: DateTime<Utc> = db
        .query_one("SELECT created_at FROM scans WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(at) = pickup_at(fleet, scan).await {
            return Some((at - created).num_microseconds()? as f64 / 1000.0);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// Pick-ups with the fleet's nodes idle: `FLEET_PICKUPS` scans one at a
/// time, each stopped once a node has it, and the next submitted once it
/// is over.
async fn idle_pickups(fleet: &Fleet, token: &str, target: &str) -> Vec<f64> {
    let db = fleet.db().await;
    let mut samples = Vec::new();
    for _ in 0..FLEET_PICKUPS {
        let scan = fleet.scan(token, target, "quick").await;
        if let Some(ms) = pickup_of(fleet, &db, &scan).await {
            samples.push(ms);
        }
        let (status, body) = fleet
            .call(
                reqwest::Method::POST,
                &format!("/scans/{scan}/stop"),
                token,
                Some(serde_json::json!({})),
            )
            .await;
        assert!(status == 200 || status == 409, "{status} {body}");
        fleet
            .wait_finished(token, &scan, Duration::from_secs(60))
            .await;
    }
    samples
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
        if let Some(ms) = pickup_of(&fleet, &db, &scan).await {
            samples.push(ms);
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

/// CPU time (user and system, clock ticks) of process `pid`, with its
/// waited-for children's when `children`.
fn cpu_ticks(pid: u32, children: bool) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses), from the
    // state letter (field 3) on: utime, stime, cutime and cstime are
    // fields 14 to 17.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let at = |field: usize| {
        fields
            .get(field - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    at(14) + at(15) + if children { at(16) + at(17) } else { 0 }
}

/// The Redis server's process id and commands processed so far.
fn redis_stats() -> Option<(u32, u64)> {
    let port = std::env::var("REDIS_URL")
        .ok()
        .and_then(|u| u.rsplit(':').next()?.trim_end_matches('/').parse().ok())
        .unwrap_or(6379);
    let info = scanfleet_tests::redis::command(port, &["INFO"])?;
    let field = |name: &str| {
        info.lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(':')?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some((
        u32::try_from(field("process_id")?).ok()?,
        field("total_commands_processed")?,
    ))
}

/// One reading of where the CPU went, in clock ticks.
struct Cpu {
    /// Every process by id: its command name and CPU ticks, with those of
    /// the children it waited for (Postgres backends that ended).
    processes: HashMap<u32, (String, u64)>,
    redis_pid: u32,
    redis_commands: u64,
    /// The whole machine, every core (`/proc/stat`).
    machine: u64,
}

/// Every process of the machine by id: command name and CPU ticks.
fn process_ticks() -> HashMap<u32, (String, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some((pid, (comm.trim().to_string(), cpu_ticks(pid, true))))
        })
        .collect()
}

/// Busy clock ticks of the whole machine (user, nice, system, irq,
/// softirq, steal).
fn machine_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| cpu.get(i)).sum()
}

impl Cpu {
    fn read() -> Cpu {
        let (redis_pid, redis_commands) = redis_stats().unwrap_or((0, 0));
        Cpu {
            processes: process_ticks(),
            redis_pid,
            redis_commands,
            machine: machine_ticks(),
        }
    }

    /// Ticks of the processes `pids` between the two readings (all of a
    /// process started between them, such as a new Postgres backend).
    fn spent(&self, later: &Cpu, pids: impl IntoIterator<Item = u32>) -> u64 {
        pids.into_iter()
            .filter_map(|pid| {
                let before = self.processes.get(&pid).map_or(0, |(_, t)| *t);
                let (_, after) = later.processes.get(&pid)?;
                Some(after.saturating_sub(before))
            })
            .sum()
    }

    /// Per scan between `self` and `later`, in CPU-milliseconds: the api
    /// (`api`), the nodes (`nodes`), Postgres, Redis, this process and the
    /// whole machine, then every process by command name.
    fn print_per_scan(&self, later: &Cpu, scans: usize, api: u32, nodes: &[u32]) {
        let hz: f64 = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
            .unwrap_or(100.0);
        let ms = |ticks: u64| ticks as f64 * 1000.0 / hz / scans as f64;
        let named = |name: &str| {
            self.spent(
                later,
                later
                    .processes
                    .iter()
                    .filter(|(_, (n, _))| n == name)
                    .map(|(pid, _)| *pid),
            )
        };
        println!(
            "  CPU-ms a scan: api (ingester included) {:.1}, postgres {:.1}, redis {:.1}, \
             nodes (engine included) {:.1}, lab and client {:.1}, whole machine {:.1}; \
             Redis commands a scan {:.0}",
            ms(self.spent(later, [api])),
            ms(named("postgres")),
            ms(self.spent(later, [self.redis_pid])),
            ms(self.spent(later, nodes.iter().copied())),
            ms(self.spent(later, [std::process::id()])),
            ms(later.machine.saturating_sub(self.machine)),
            (later.redis_commands.saturating_sub(self.redis_commands)) as f64 / scans as f64
        );
        // By command name: what else the machine spent its time on.
        let mut by_name: HashMap<&str, u64> = HashMap::new();
        for (pid, (name, _)) in &later.processes {
            *by_name.entry(name.as_str()).or_default() += self.spent(later, [*pid]);
        }
        let mut by_name: Vec<_> = by_name.into_iter().filter(|(_, t)| *t > 0).collect();
        by_name.sort_by_key(|b| std::cmp::Reverse(b.1));
        let top: Vec<String> = by_name
            .iter()
            .take(8)
            .map(|(name, t)| format!("{name} {:.1}", ms(*t)))
            .collect();
        println!("  CPU-ms a scan by process name: {}", top.join(", "));
    }
}

async fn throughput(lab: &Lab, nodes: usize, count: usize) -> f64 {
    let fleet = fleet(lab).await;
    let api = fleet.api(&[]).await;
    let node_procs: Vec<_> = (0..nodes)
        .map(|i| fleet.node(&format!("bench-{i}"), &[]))
        .collect();
    let node_pids: Vec<u32> = node_procs.iter().map(|p| p.pid()).collect();
    // The scans belong to `BENCH_USERS` users (16 unless set), in turn: a
    // service has many, and one user's rows (its usage count, its
    // dashboard rollups) are written by each of its scans in turn.
    let users: usize = std::env::var("BENCH_USERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16)
        .clamp(1, count.max(1));
    let mut tokens = Vec::with_capacity(users);
    for _ in 0..users {
        tokens.push(fleet.user().await);
    }
    let mut targets = Vec::new();
    for i in 0..count {
        let token = &tokens[i % users];
        targets.push((
            token,
            fleet.target(token, &lab.spread_host(i, "bench.test")).await,
        ));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let db = fleet.db().await;
    let db_stats = || async {
        let row = db
            .query_one(
                "SELECT xact_commit, tup_inserted, tup_updated, tup_fetched
                 FROM pg_stat_database WHERE datname = current_database()",
                &[],
            )
            .await
            .expect("pg_stat_database");
        (0..4).map(|i| row.get::<_, i64>(i)).collect::<Vec<i64>>()
    };
    let db_before = db_stats().await;
    let lab_before = lab.requests.load(std::sync::atomic::Ordering::Relaxed);
    let cpu = Cpu::read();
    let start = Instant::now();
    // Submitted as many users and the scheduler would: several at once
    // (`BENCH_SUBMITTERS`, 16 unless set), so that the fleet, not one
    // client's round trips, sets the pace.
    let submitters: usize = std::env::var("BENCH_SUBMITTERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16);
    let fleet_ref = &fleet;
    let scans: Vec<(&String, String)> = futures::stream::iter(&targets)
        .map(|(token, t)| async move { (*token, fleet_ref.scan(token, t, "quick").await) })
        .buffered(submitters)
        .collect()
        .await;
    let submitted = start.elapsed();
    // Waited for with one count a poll, not one scan's detail over the api
    // a poll (a thousand reads of the api and Postgres while the fleet
    // runs, which are the bench's own load, not the fleet's); every scan's
    // detail is read over the api at the end, once the figures are taken.
    let ids: Vec<uuid::Uuid> = scans.iter().map(|(_, s)| s.parse().unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let finished: i64 = db
            .query_one(
                "SELECT count(*) FROM scans
                 WHERE id = ANY($1) AND status IN ('completed', 'failed', 'stopped')",
                &[&ids],
            )
            .await
            .expect("finished scans")
            .get(0);
        if finished as usize == ids.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{finished} of {} scans finished",
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = start.elapsed();
    let cpu_after = Cpu::read();
    let lab_after = lab.requests.load(std::sync::atomic::Ordering::Relaxed);
    let per_minute = count as f64 / elapsed.as_secs_f64() * 60.0;
    println!(
        "small scans with {nodes} node(s): {per_minute:.0} scans/min ({count} scans of {users} \
         user(s) in {:.1} s, submitted in the first {:.1} s)",
        elapsed.as_secs_f64(),
        submitted.as_secs_f64()
    );
    cpu.print_per_scan(&cpu_after, count, api.pid(), &node_pids);
    println!(
        "  lab requests a scan: {:.1}",
        (lab_after - lab_before) as f64 / count as f64
    );
    // The statistics collector reports a backend's counts when its
    // transaction ends, at most once a second.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let db_after = db_stats().await;
    // The tables read most, for where Postgres' time goes.
    let tables = db
        .query(
            "SELECT relname::text, seq_tup_read + coalesce(idx_tup_fetch, 0) AS read,
                    n_tup_upd, seq_scan
             FROM pg_stat_user_tables ORDER BY 2 DESC LIMIT 6",
            &[],
        )
        .await
        .expect("pg_stat_user_tables");
    let tables: Vec<String> = tables
        .iter()
        .map(|r| {
            format!(
                "{} {:.0} read ({} full scans), {:.1} updated",
                r.get::<_, String>(0),
                r.get::<_, i64>(1) as f64 / count as f64,
                r.get::<_, i64>(3),
                r.get::<_, i64>(2) as f64 / count as f64
            )
        })
        .collect();
    println!("  tables a scan: {}", tables.join("; "));
    let per_scan = |i: usize| (db_after[i] - db_before[i]) as f64 / count as f64;
    println!(
        "  Postgres a scan: {:.1} commits, {:.1} rows inserted, {:.1} updated, {:.0} fetched",
        per_scan(0),
        per_scan(1),
        per_scan(2),
        per_scan(3)
    );
    for (token, s) in &scans {
        let done = fleet.get(&format!("/scans/{s}"), token).await;
        assert_eq!(done["status"], "completed", "{done}");
    }
    let (token, target) = &targets[0];
    summary(
        &format!("  pick-up, {nodes} idle node(s)"),
        idle_pickups(&fleet, token, target).await,
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
    // The targets spread over `BENCH_LAB_ADDRESSES` loopback addresses
    // besides 127.0.0.1 (16 unless set; 0 puts them all on 127.0.0.1).
    let addresses: u8 = std::env::var("BENCH_LAB_ADDRESSES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16);
    let slow = Lab::start_spread(Duration::from_millis(50), addresses).await;
    println!("lab on 127.0.0.1 and {addresses} more loopback address(es)");
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
