//! Scan jobs as apalis tasks ([`ScanTasks`]) against a real Redis
//! (`REDIS_URL`, else the local default), each test under a prefix of its
//! own: jobs submitted through apalis' `TaskSink`, run by an apalis
//! `Worker` with a concurrency limit, and a worker stopped while it waits.

// Tests may unwrap: a panic there is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apalis::prelude::{Data, TaskSink, WorkerBuilder, WorkerBuilderExt, WorkerError};
use fred::clients::Client;
use fred::interfaces::ListInterface;
use scanfleet_bus::{RedisTarget, ScanQueue, ScanTasks, Taking};
use scanfleet_common::jobs::{Engine, ScanJob};
use scanfleet_common::keys::Keys;
use scanfleet_common::Settings;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

async fn client(name: &'static str) -> Client {
    let mut vars = HashMap::new();
    if let Ok(url) = std::env::var("REDIS_URL") {
        vars.insert("REDIS_URL".to_string(), url);
    }
    let settings = Settings::from_vars(&vars).expect("settings");
    let target = RedisTarget::from_settings(&settings.redis).expect("redis url");
    scanfleet_bus::connect(&target, name)
        .await
        .expect("Redis for tests")
}

fn job() -> ScanJob {
    ScanJob {
        scan_id: Uuid::now_v7(),
        target_id: Uuid::now_v7(),
        domain: "tasks.example".to_string(),
        engine: Engine::Quick,
        templates: vec![],
        max_rps_per_host: None,
    }
}

/// What the test's task saw.
#[derive(Clone, Default)]
struct Seen {
    ids: Arc<Mutex<Vec<Uuid>>>,
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

async fn run_one(job: ScanJob, seen: Data<Seen>, queue: Data<ScanQueue>) {
    let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
    seen.most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(150)).await;
    seen.ids.lock().unwrap().push(job.scan_id);
    seen.running.fetch_sub(1, Ordering::SeqCst);
    queue.finish(job.scan_id, "node-a").await.unwrap();
}

/// An apalis worker named `node-a` on `queue`, two tasks at once, running
/// [`run_one`] until `stop` fires.
async fn start_worker(
    queue: &ScanQueue,
    stop: &CancellationToken,
    seen: &Seen,
) -> JoinHandle<Result<(), WorkerError>> {
    let taking = Taking {
        wake: client("wake").await,
        node: "node-a".into(),
        lease: Duration::from_secs(30),
        idle_wait: Duration::from_secs(20),
        stop: stop.clone(),
    };
    let worker = WorkerBuilder::new("node-a")
        .backend(ScanTasks::taking(queue.clone(), taking))
        .concurrency(2)
        .data(seen.clone())
        .data(queue.clone())
        .build(run_one);
    tokio::spawn(worker.run())
}

#[tokio::test]
async fn submitted_tasks_run_once_each_never_more_at_once_than_the_slots() {
    let redis = client("test").await;
    let keys = Keys::new(format!("tasks-test-{}", Uuid::new_v4().simple()));
    let queue = ScanQueue::new(redis.clone(), &keys);
    let mut sink = ScanTasks::new(queue.clone());
    let jobs: Vec<ScanJob> = (0..6).map(|_| job()).collect();
    for job in &jobs {
        sink.push(job.clone()).await.unwrap();
    }
    // The same scan again, as a task with its id: nothing added.
    sink.push_task(ScanTasks::task(jobs[0].clone()))
        .await
        .unwrap();
    assert_eq!(queue.depth().await.unwrap(), 6, "one job per scan");

    let stop = CancellationToken::new();
    let seen = Seen::default();
    let running = start_worker(&queue, &stop, &seen).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.ids.lock().unwrap().len() < jobs.len() {
        assert!(Instant::now() < deadline, "the worker ran {:?}", seen.ids);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the worker ends once stopped")
        .unwrap()
        .unwrap();

    let mut ran = seen.ids.lock().unwrap().clone();
    ran.sort();
    let mut pushed: Vec<Uuid> = jobs.iter().map(|j| j.scan_id).collect();
    pushed.sort();
    assert_eq!(ran, pushed, "every job once");
    assert_eq!(
        seen.most.load(Ordering::SeqCst),
        2,
        "two at once, never more"
    );
    assert_eq!(queue.depth().await.unwrap(), 0);
    assert!(queue.waiting().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_stopped_worker_ends_at_once_and_leaves_no_wait_to_take_a_wake_up() {
    let redis = client("test").await;
    let keys = Keys::new(format!("tasks-test-{}", Uuid::new_v4().simple()));
    let queue = ScanQueue::new(redis.clone(), &keys);
    let stop = CancellationToken::new();
    let seen = Seen::default();
    let running = start_worker(&queue, &stop, &seen).await;
    // Let it claim nothing and block on the wake-up list (20 s wait).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopped = Instant::now();
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the worker ends once stopped")
        .unwrap()
        .unwrap();
    assert!(stopped.elapsed() < Duration::from_secs(5));

    // A push now leaves its wake-up token for another node: no abandoned
    // `BLPOP` of the stopped worker took it.
    let mut sink = ScanTasks::new(queue.clone());
    sink.push(job()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let tokens: i64 = redis.llen(keys.scan_queue_wake()).await.unwrap();
    assert_eq!(tokens, 1, "the wake-up token is still there");
    assert_eq!(queue.waiting().await.unwrap().len(), 1);
    assert!(seen.ids.lock().unwrap().is_empty(), "nothing ran");
}
