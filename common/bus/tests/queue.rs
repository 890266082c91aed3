//! The scan queue and the event streams against a real Redis (`REDIS_URL`,
//! else the local default), each test under a prefix of its own.

// Tests may unwrap: a panic there is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{HashesInterface, KeysInterface, StreamsInterface};
use scanfleet_bus::events::{self, IngestIndex};
use scanfleet_bus::{markers, JobState, RedisTarget, Renewal, ScanQueue};
use scanfleet_common::events::{ScanEvent, ScanStatus};
use scanfleet_common::jobs::{Engine, ScanJob};
use scanfleet_common::keys::Keys;
use scanfleet_common::Settings;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);

async fn setup() -> (Client, Keys, ScanQueue) {
    let mut vars = HashMap::new();
    if let Ok(url) = std::env::var("REDIS_URL") {
        vars.insert("REDIS_URL".to_string(), url);
    }
    let settings = Settings::from_vars(&vars).expect("settings");
    let target = RedisTarget::from_settings(&settings.redis).expect("redis url");
    let redis = scanfleet_bus::connect(&target, "test")
        .await
        .expect("Redis for tests");
    let keys = Keys::new(format!("bus-test-{}", Uuid::new_v4().simple()));
    let queue = ScanQueue::new(redis.clone(), &keys);
    (redis, keys, queue)
}

fn job(domain: &str) -> ScanJob {
    ScanJob {
        scan_id: Uuid::now_v7(),
        target_id: Uuid::now_v7(),
        domain: domain.to_string(),
        engine: Engine::Quick,
        templates: vec![],
        max_rps_per_host: None,
    }
}

/// Lets a lease given as `Duration::from_millis(1)` run out.
async fn lapse() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test]
async fn jobs_are_claimed_oldest_first_once_each_and_a_second_push_adds_nothing() {
    let (_, _, queue) = setup().await;
    let (a, b) = (job("a.example"), job("b.example"));
    assert!(queue.push(&a).await.unwrap());
    assert!(queue.push(&b).await.unwrap());
    assert!(!queue.push(&a).await.unwrap(), "a scan has one job");
    assert_eq!(queue.depth().await.unwrap(), 2);
    assert_eq!(queue.claim("n1", LEASE).await.unwrap(), Some(a.clone()));
    assert_eq!(queue.claim("n2", LEASE).await.unwrap(), Some(b.clone()));
    assert_eq!(queue.claim("n1", LEASE).await.unwrap(), None);
    assert_eq!(
        queue.holder(a.scan_id).await.unwrap().as_deref(),
        Some("n1")
    );
    // Held, the job is still the scan's: pushing it again adds nothing.
    assert!(!queue.push(&a).await.unwrap());
    assert_eq!(queue.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn a_lapsed_lease_is_put_back_first_and_its_node_learns_it_was_taken_over() {
    let (_, _, queue) = setup().await;
    let (a, b) = (job("a.example"), job("b.example"));
    queue.push(&a).await.unwrap();
    queue.claim("dead", Duration::from_millis(1)).await.unwrap();
    queue.push(&b).await.unwrap();
    lapse().await;
    assert_eq!(queue.requeue_expired().await.unwrap(), vec![a.scan_id]);
    assert!(queue.requeue_expired().await.unwrap().is_empty());
    // Put back at the head: taken before the job that waited all along.
    assert_eq!(queue.claim("alive", LEASE).await.unwrap(), Some(a.clone()));
    assert_eq!(
        queue.renew(&a, "dead", LEASE).await.unwrap(),
        Renewal::TakenOver
    );
    assert_eq!(
        queue.renew(&a, "alive", LEASE).await.unwrap(),
        Renewal::Held
    );
}

#[tokio::test]
async fn a_node_whose_job_was_put_back_but_not_yet_taken_takes_it_again() {
    let (_, _, queue) = setup().await;
    let a = job("a.example");
    queue.push(&a).await.unwrap();
    queue.claim("slow", Duration::from_millis(1)).await.unwrap();
    lapse().await;
    queue.requeue_expired().await.unwrap();
    assert_eq!(queue.depth().await.unwrap(), 1);
    assert_eq!(
        queue.renew(&a, "slow", LEASE).await.unwrap(),
        Renewal::Retaken
    );
    assert_eq!(queue.depth().await.unwrap(), 0, "no longer waiting");
    assert_eq!(queue.claim("other", LEASE).await.unwrap(), None);
    assert_eq!(
        queue.holder(a.scan_id).await.unwrap().as_deref(),
        Some("slow")
    );
}

#[tokio::test]
async fn a_renewal_after_redis_lost_its_data_writes_the_job_back() {
    let (redis, keys, queue) = setup().await;
    let a = job("a.example");
    queue.push(&a).await.unwrap();
    queue.claim("n1", LEASE).await.unwrap();
    let _: i64 = redis
        .del(vec![
            keys.scan_queue_jobs(),
            keys.scan_queue_leases(),
            keys.scan_queue_holders(),
            keys.scan_queue_waiting(),
        ])
        .await
        .unwrap();
    assert_eq!(
        queue.renew(&a, "n1", LEASE).await.unwrap(),
        Renewal::Restored
    );
    assert_eq!(queue.job(a.scan_id).await.unwrap(), Some(a.clone()));
    let states = queue.inspect(&[a.scan_id]).await.unwrap();
    assert_eq!(states[&a.scan_id], JobState::Held { node: "n1".into() });
}

#[tokio::test]
async fn inspect_tells_waiting_held_lapsed_and_missing_jobs_apart() {
    let (_, _, queue) = setup().await;
    let (waiting, held, lapsed, missing) = (job("w"), job("h"), job("l"), job("m"));
    queue.push(&held).await.unwrap();
    queue.claim("n1", LEASE).await.unwrap();
    queue.push(&lapsed).await.unwrap();
    queue.claim("n2", Duration::from_millis(1)).await.unwrap();
    queue.push(&waiting).await.unwrap();
    lapse().await;
    let ids = [
        waiting.scan_id,
        held.scan_id,
        lapsed.scan_id,
        missing.scan_id,
    ];
    let states = queue.inspect(&ids).await.unwrap();
    assert_eq!(states[&waiting.scan_id], JobState::Waiting);
    assert_eq!(states[&held.scan_id], JobState::Held { node: "n1".into() });
    assert_eq!(
        states[&lapsed.scan_id],
        JobState::Lapsed { node: "n2".into() }
    );
    assert_eq!(states[&missing.scan_id], JobState::Missing);
}

#[tokio::test]
async fn finishing_removes_the_job_unless_another_node_holds_it_and_release_puts_it_first() {
    let (_, _, queue) = setup().await;
    let (a, b) = (job("a.example"), job("b.example"));
    queue.push(&a).await.unwrap();
    queue.push(&b).await.unwrap();
    queue.claim("n1", LEASE).await.unwrap();
    queue.finish(a.scan_id, "n2").await.unwrap();
    assert_eq!(queue.job(a.scan_id).await.unwrap(), Some(a.clone()));
    queue.release(a.scan_id, "n1").await.unwrap();
    assert_eq!(queue.waiting().await.unwrap(), vec![a.scan_id, b.scan_id]);
    queue.claim("n2", LEASE).await.unwrap();
    queue.finish(a.scan_id, "n2").await.unwrap();
    assert_eq!(queue.job(a.scan_id).await.unwrap(), None);
    assert_eq!(queue.holder(a.scan_id).await.unwrap(), None);
    // A waiting job finished (its scan is over) leaves the queue too.
    queue.finish(b.scan_id, "n3").await.unwrap();
    assert_eq!(queue.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn a_job_no_node_can_read_is_dropped_with_an_error_naming_its_scan() {
    let (redis, keys, queue) = setup().await;
    let id = Uuid::now_v7();
    let _: () = redis
        .hset(keys.scan_queue_jobs(), (id.to_string(), "{not json"))
        .await
        .unwrap();
    let _: () =
        fred::interfaces::ListInterface::rpush(&redis, keys.scan_queue_waiting(), id.to_string())
            .await
            .unwrap();
    match queue.claim("n1", LEASE).await {
        Err(scanfleet_bus::BusError::BadJob { scan_id, .. }) => assert_eq!(scan_id, id),
        other => panic!("expected a bad job, got {other:?}"),
    }
    assert_eq!(queue.job(id).await.ok().flatten(), None);
    assert_eq!(queue.claim("n1", LEASE).await.unwrap(), None);
}

#[tokio::test]
async fn events_go_to_the_scans_stream_and_the_index_names_the_scan() {
    let (redis, keys, _) = setup().await;
    let scan_id = Uuid::now_v7();
    let index = IngestIndex::new(redis.clone(), &keys, "c1".into());
    index.ensure_group().await.unwrap();
    events::append_event(
        &redis,
        &keys,
        &ScanEvent::status(scan_id, ScanStatus::Running, None),
    )
    .await
    .unwrap();
    let stream = keys.scan_events_stream(scan_id);
    let entries = events::range(&redis, &stream, "-", "+", 10).await.unwrap();
    assert_eq!(entries.len(), 1);
    let event = events::decode(&entries[0].1).expect("an event");
    assert_eq!(event.scan_id, scan_id);
    let pointers = index.read(">", 10, None).await.unwrap();
    assert_eq!(events::scans_named(&pointers), vec![scan_id]);
    index
        .done(pointers.iter().map(|(id, _)| id.clone()).collect())
        .await
        .unwrap();
    let left: u64 = redis.xlen(keys.scan_events_index()).await.unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn the_ingest_group_is_made_again_after_redis_lost_its_data() {
    let (redis, keys, _) = setup().await;
    let index = IngestIndex::new(redis.clone(), &keys, "c1".into());
    index.ensure_group().await.unwrap();
    index.ensure_group().await.unwrap();
    let _: i64 = redis.del(keys.scan_events_index()).await.unwrap();
    assert!(index.read(">", 10, None).await.is_err(), "no group");
    index.ensure_group().await.unwrap();
    let scan_id = Uuid::now_v7();
    events::append(&redis, &keys, scan_id, &["{}".to_string()])
        .await
        .unwrap();
    let pointers = index.read(">", 10, None).await.unwrap();
    assert_eq!(events::scans_named(&pointers), vec![scan_id]);
}

#[tokio::test]
async fn the_data_set_mark_is_new_once_then_again_after_it_is_lost() {
    let (redis, keys, _) = setup().await;
    assert!(markers::data_set_is_new(&redis, &keys).await.unwrap());
    assert!(!markers::data_set_is_new(&redis, &keys).await.unwrap());
    let _: i64 = redis.del(keys.bus_epoch()).await.unwrap();
    assert!(markers::data_set_is_new(&redis, &keys).await.unwrap());
}

#[tokio::test]
async fn take_ups_count_up_until_the_scan_is_closed_then_are_refused_uncounted() {
    let (redis, keys, _) = setup().await;
    let scan_id = Uuid::now_v7();
    let take_up = || markers::take_up(&redis, &keys, scan_id);
    assert_eq!(take_up().await.unwrap(), Some(1));
    assert_eq!(take_up().await.unwrap(), Some(2));
    let ttl: i64 = redis.ttl(keys.scan_attempts(scan_id)).await.unwrap();
    assert!(ttl > 0, "{ttl}");
    assert!(!markers::is_closed(&redis, &keys, scan_id).await.unwrap());
    markers::close(&redis, &keys, scan_id).await.unwrap();
    assert!(markers::is_closed(&redis, &keys, scan_id).await.unwrap());
    let ttl: i64 = redis.ttl(keys.scan_closed(scan_id)).await.unwrap();
    assert!(ttl > 0 && ttl <= markers::CLOSED_TTL_SECS, "{ttl}");
    // A closed scan is not taken up, and the refusal is not counted.
    assert_eq!(take_up().await.unwrap(), None);
    let count: i64 = redis.get(keys.scan_attempts(scan_id)).await.unwrap();
    assert_eq!(count, 2);
}

/// Issue 34, item 3: a push wakes one waiting node (at most one token per
/// waiting job), a claim keeps the tokens in step, and a wait with nothing
/// pushed times out.
#[tokio::test]
async fn a_push_wakes_one_waiting_node_and_tokens_never_outnumber_waiting_jobs() {
    use fred::interfaces::ListInterface;
    let (redis, keys, queue) = setup().await;
    let mut vars = HashMap::new();
    if let Ok(url) = std::env::var("REDIS_URL") {
        vars.insert("REDIS_URL".to_string(), url);
    }
    let settings = Settings::from_vars(&vars).expect("settings");
    let target = RedisTarget::from_settings(&settings.redis).expect("redis url");
    // The wait blocks its connection: a client of its own.
    let wake = scanfleet_bus::connect(&target, "test-wake").await.unwrap();
    let tokens = || async { redis.llen::<u64, _>(keys.scan_queue_wake()).await.unwrap() };

    assert!(!queue
        .wait_for_work(&wake, Duration::from_millis(200))
        .await
        .unwrap());
    let waiter = {
        let (queue, wake) = (queue.clone(), wake.clone());
        tokio::spawn(async move { queue.wait_for_work(&wake, Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let (a, b, c) = (job("a.example"), job("b.example"), job("c.example"));
    queue.push(&a).await.unwrap();
    assert!(waiter.await.unwrap().unwrap(), "the push woke the waiter");
    assert!(started.elapsed() < Duration::from_secs(1));
    queue.push(&b).await.unwrap();
    queue.push(&c).await.unwrap();
    assert_eq!(tokens().await, 2, "one token per job still waiting");
    // A node claiming without a token: the tokens follow the queue down.
    assert_eq!(queue.claim("n1", LEASE).await.unwrap(), Some(a));
    assert_eq!(queue.claim("n1", LEASE).await.unwrap(), Some(b));
    assert_eq!(tokens().await, 1);
    assert_eq!(queue.claim("n1", LEASE).await.unwrap(), Some(c));
    assert_eq!(tokens().await, 0, "nothing waits: no token");
}

/// Issue 34, item 3: one node at a time sweeps expired leases; the lock's
/// holder sweeps and keeps it, another cannot take it meanwhile.
#[tokio::test]
async fn only_the_sweep_locks_holder_puts_back_expired_jobs() {
    use scanfleet_bus::nodes;
    let (_, keys, queue) = setup().await;
    let a = job("a.example");
    queue.push(&a).await.unwrap();
    queue.claim("dead", Duration::from_millis(1)).await.unwrap();
    lapse().await;
    let ttl = Duration::from_secs(5);
    assert_eq!(nodes::sweep(&queue, &keys, "n1", ttl).await.unwrap(), None);
    assert!(nodes::take_sweep_lock(&queue, &keys, "n1", ttl)
        .await
        .unwrap());
    assert!(!nodes::take_sweep_lock(&queue, &keys, "n2", ttl)
        .await
        .unwrap());
    assert_eq!(nodes::sweep(&queue, &keys, "n2", ttl).await.unwrap(), None);
    assert_eq!(
        nodes::sweep(&queue, &keys, "n1", ttl).await.unwrap(),
        Some(vec![a.scan_id])
    );
    assert_eq!(queue.waiting().await.unwrap(), vec![a.scan_id]);
    assert_eq!(
        nodes::sweep(&queue, &keys, "n1", ttl).await.unwrap(),
        Some(vec![])
    );
}
