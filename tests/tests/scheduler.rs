//! The scheduler turns due schedules into scans through the same path as
//! `POST /scans`, once per firing even with several schedulers.

use chrono::{Duration, Utc};
use scanfleet_scheduler::TickReport;
use scanfleet_tests::{spawn_app, TestApp, TestUser};
use serde_json::json;
use uuid::Uuid;

/// A target and an enabled every-15-minutes schedule on it, made due now.
async fn due_schedule(app: &TestApp, user: &TestUser) -> (Uuid, Uuid) {
    let target = app
        .new_target(user, &format!("s{}.example.com", Uuid::new_v4().simple()))
        .await;
    let s = app
        .post(
            "/api/v1/schedules",
            Some(&user.access_token),
            json!({"target_id": target, "engine": "quick", "cron_expression": "*/15 * * * *"}),
        )
        .await;
    assert_eq!(s.status, 201, "{}", s.text);
    let schedule: Uuid = s.body["id"].as_str().unwrap().parse().unwrap();
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE schedules SET next_run = now() - interval '1 minute' WHERE id = $1",
        &[&schedule],
    )
    .await
    .unwrap();
    (target, schedule)
}

async fn scans_of(app: &TestApp, schedule: Uuid) -> Vec<(Uuid, String, String)> {
    let db = app.state.db.get().await.unwrap();
    db.query(
        "SELECT id, status, engine FROM scans WHERE schedule_id = $1",
        &[&schedule],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

#[tokio::test]
async fn a_due_schedule_becomes_a_queued_scan_and_moves_to_its_next_run() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let (_, schedule) = due_schedule(&app, &u).await;
    let now = Utc::now();
    let report = app.scheduler().tick(now).await.unwrap();
    assert_eq!(
        report,
        TickReport {
            started: 1,
            skipped: 0,
            failed: 0
        }
    );
    let scans = scans_of(&app, schedule).await;
    assert_eq!(scans.len(), 1);
    assert_eq!(
        (scans[0].1.as_str(), scans[0].2.as_str()),
        ("queued", "quick")
    );

    let r = app.get("/api/v1/schedules", &u.access_token).await;
    let next: chrono::DateTime<Utc> = r.body[0]["next_run"].as_str().unwrap().parse().unwrap();
    assert!(next > now && next <= now + Duration::minutes(15), "{next}");
    // Not due any more: a second tick starts nothing.
    let again = app.scheduler().tick(now).await.unwrap();
    assert_eq!(again, TickReport::default());
    // The scheduled scan counts toward the user's usage.
    let usage = app
        .get("/api/v1/subscriptions/usage", &u.access_token)
        .await;
    assert_eq!(usage.body["scans_used"], 1);
}

#[tokio::test]
async fn concurrent_schedulers_start_each_firing_once() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    app.set_tier(u.id, "monthly").await;
    let mut schedules = vec![];
    for _ in 0..4 {
        schedules.push(due_schedule(&app, &u).await.1);
    }
    let now = Utc::now();
    let a = app.scheduler();
    let b = app.scheduler();
    let (ra, rb) = tokio::join!(a.tick(now), b.tick(now));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.started + rb.started, 4, "{ra:?} {rb:?}");
    for s in schedules {
        assert_eq!(scans_of(&app, s).await.len(), 1);
    }
}

#[tokio::test]
async fn a_firing_is_skipped_with_a_notification_while_the_previous_run_is_active() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let (_, schedule) = due_schedule(&app, &u).await;
    let scheduler = app.scheduler();
    assert_eq!(scheduler.tick(Utc::now()).await.unwrap().started, 1);
    // The first run is still queued when the schedule is due again.
    let later = Utc::now() + Duration::minutes(16);
    let report = scheduler.tick(later).await.unwrap();
    assert_eq!(
        report,
        TickReport {
            started: 0,
            skipped: 1,
            failed: 0
        }
    );
    assert_eq!(scans_of(&app, schedule).await.len(), 1);
    let n = app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(n.body[0]["type"], "schedule_skipped");
    assert_eq!(n.body[0]["schedule_id"], schedule.to_string());
    assert!(n.body[0]["data"]["reason"]
        .as_str()
        .unwrap()
        .contains("still active"));
}

#[tokio::test]
async fn a_firing_over_the_scan_limit_is_skipped_with_the_reason() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let (_, schedule) = due_schedule(&app, &u).await;
    let db = app.state.db.get().await.unwrap();
    let (period_start, _) = scanfleet_core::store::subscriptions::current_period(&db, u.id, "demo")
        .await
        .unwrap();
    db.execute(
        "INSERT INTO scan_usage (user_id, period_start, scans) VALUES ($1, $2, 10)",
        &[&u.id, &period_start],
    )
    .await
    .unwrap();
    let report = app.scheduler().tick(Utc::now()).await.unwrap();
    assert_eq!(
        report,
        TickReport {
            started: 0,
            skipped: 1,
            failed: 0
        }
    );
    assert!(scans_of(&app, schedule).await.is_empty());
    let n = app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(n.body[0]["type"], "schedule_skipped");
    assert!(
        n.body[0]["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("10 scans per period"),
        "{}",
        n.text
    );
}

#[tokio::test]
async fn disabled_schedules_do_not_fire() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let (_, schedule) = due_schedule(&app, &u).await;
    let r = app
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/schedules/{schedule}"),
            Some(&u.access_token),
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE schedules SET next_run = now() - interval '1 minute' WHERE id = $1",
        &[&schedule],
    )
    .await
    .unwrap();
    let report = app.scheduler().tick(Utc::now()).await.unwrap();
    assert_eq!(report, TickReport::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_scheduler_fires_a_schedule_within_two_seconds_of_its_time_without_polling() {
    let app = spawn_app().await;
    let u = app.new_user().await;
    let (_, schedule) = due_schedule(&app, &u).await;
    // Not due for now: the scheduler goes to sleep until far ahead.
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE schedules SET next_run = now() + interval '1 hour' WHERE id = $1",
        &[&schedule],
    )
    .await
    .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.scheduler().run_until_stopped(async {
        let _ = stopped.await;
    }));
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(scans_of(&app, schedule).await.is_empty());

    // A change wakes it; it then sleeps until exactly the new time.
    let due = Utc::now() + Duration::seconds(2);
    db.execute(
        "UPDATE schedules SET next_run = $2 WHERE id = $1",
        &[&schedule, &due],
    )
    .await
    .unwrap();
    loop {
        let scans = scans_of(&app, schedule).await;
        if !scans.is_empty() {
            assert_eq!(scans.len(), 1);
            break;
        }
        assert!(
            Utc::now() < due + Duration::seconds(2),
            "the schedule did not fire within 2 s of its time"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let fired = Utc::now();
    assert!(fired >= due, "fired early: {fired} < {due}");
    let _ = stop.send(());
    running.await.unwrap().unwrap();
}

/// A scan queued through the API on a new target.
async fn queued_scan(app: &TestApp, user: &TestUser, domain: &str) -> Uuid {
    let target = app.new_target(user, domain).await;
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({"target_id": target, "engine": "quick"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_queued_scan_whose_job_was_lost_is_enqueued_again_once_then_failed() {
    use fred::interfaces::KeysInterface;
    let app =
        scanfleet_tests::spawn_app_with(&[("SCANFLEET_SCHEDULER__QUEUED_AFTER_SECS", "1")]).await;
    let u = app.new_user().await;
    let scan = queued_scan(&app, &u, "lost.example.com").await;
    let keys = &app.state.keys;
    let queue_keys = vec![keys.scan_queue_jobs(), keys.scan_queue_waiting()];
    let waiting = || async { app.state.scan_queue.depth().await.unwrap() };
    // The data-set mark is written by the first pass; losing the job is
    // not losing Redis's data.
    scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    let lose_job_and_age = || async {
        let _: i64 = app.state.redis.del(queue_keys.clone()).await.unwrap();
        let db = app.state.db.get().await.unwrap();
        db.execute(
            "UPDATE scans SET updated_at = now() - interval '1 minute' WHERE id = $1",
            &[&scan],
        )
        .await
        .unwrap();
    };

    lose_job_and_age().await;
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.requeued, 1);
    assert_eq!(waiting().await, 1, "the job is back in the queue");
    // While its job waits in the queue, the scan is left alone.
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE scans SET updated_at = now() - interval '1 minute' WHERE id = $1",
        &[&scan],
    )
    .await
    .unwrap();
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report, scanfleet_scheduler::reaper::ReapReport::default());

    lose_job_and_age().await;
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.failed, 1);
    let detail = app
        .get(&format!("/api/v1/scans/{scan}"), &u.access_token)
        .await;
    assert_eq!(detail.body["status"], "failed");
    let notes = app.get("/api/v1/notifications", &u.access_token).await;
    assert_eq!(notes.body[0]["type"], "scan_failed");
    assert!(notes.body[0]["message"]
        .as_str()
        .unwrap()
        .contains("lost from the queue"));
}

#[tokio::test]
async fn a_running_scan_whose_node_holds_a_live_lease_is_not_reaped() {
    let app =
        scanfleet_tests::spawn_app_with(&[("SCANFLEET_SCHEDULER__STUCK_AFTER_SECS", "1")]).await;
    let u = app.new_user().await;
    let scan = queued_scan(&app, &u, "busy.example.com").await;
    // A node took the job and runs the scan.
    let job = app
        .state
        .scan_queue
        .claim("node-x", std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the job");
    assert_eq!(job.scan_id, scan);
    let db = app.state.db.get().await.unwrap();
    db.execute(
        "UPDATE scans SET status = 'running', updated_at = now() - interval '1 minute' WHERE id = $1",
        &[&scan],
    )
    .await
    .unwrap();
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.failed, 0);
    // The node dies: its lease runs out and no node is left to put the job
    // back.
    app.state
        .scan_queue
        .renew(&job, "node-x", std::time::Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.failed, 1);
}

#[tokio::test]
async fn after_redis_lost_its_data_the_jobs_of_queued_scans_are_pushed_again_at_once() {
    use fred::interfaces::KeysInterface;
    let app = scanfleet_tests::spawn_app().await;
    let u = app.new_user().await;
    let first = queued_scan(&app, &u, "one.example.com").await;
    let second = queued_scan(&app, &u, "two.example.com").await;
    // The first pass writes the data-set mark and finds both jobs there.
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.restored, 0);
    // Redis restarts without persistence: every key of the deployment goes.
    let keys = &app.state.keys;
    let _: i64 = app
        .state
        .redis
        .del(vec![
            keys.bus_epoch(),
            keys.scan_queue_jobs(),
            keys.scan_queue_waiting(),
        ])
        .await
        .unwrap();
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.restored, 2);
    let waiting = app.state.scan_queue.waiting().await.unwrap();
    assert_eq!(waiting, vec![first, second], "oldest first");
    // Once is enough: the next pass finds the mark.
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report, scanfleet_scheduler::reaper::ReapReport::default());
}

#[tokio::test]
async fn after_an_upgrade_from_the_untagged_key_layout_queued_scans_are_pushed_again_under_the_new_names(
) {
    use fred::interfaces::{HashesInterface, KeysInterface, ListInterface};
    let app = scanfleet_tests::spawn_app().await;
    let u = app.new_user().await;
    let scan = queued_scan(&app, &u, "upgraded.example.com").await;
    // What the previous layout (before the Redis Cluster hash tags) left:
    // its data-set mark and the job under the old names; nothing under
    // the new ones.
    let keys = &app.state.keys;
    let prefix = keys.prefix();
    let job = app.state.scan_queue.job(scan).await.unwrap().expect("job");
    for key in [
        keys.bus_epoch(),
        keys.scan_queue_jobs(),
        keys.scan_queue_waiting(),
        keys.scan_queue_wake(),
    ] {
        let _: i64 = app.state.redis.del(key).await.unwrap();
    }
    let redis = &app.state.redis;
    let _: () = redis
        .set(format!("{prefix}:epoch"), "old", None, None, false)
        .await
        .unwrap();
    let _: i64 = redis
        .hset(
            format!("{prefix}:queue:scans:jobs"),
            (scan.to_string(), serde_json::to_string(&job).unwrap()),
        )
        .await
        .unwrap();
    let _: i64 = redis
        .rpush(format!("{prefix}:queue:scans:waiting"), scan.to_string())
        .await
        .unwrap();

    // The new processes find no mark of their layout: Redis "lost its
    // data", and the queue is rebuilt from Postgres.
    let report = scanfleet_scheduler::reaper::reap(&app.state, &app.state.settings.scheduler)
        .await
        .unwrap();
    assert_eq!(report.restored, 1);
    assert_eq!(app.state.scan_queue.waiting().await.unwrap(), vec![scan]);
    assert_eq!(app.state.scan_queue.job(scan).await.unwrap(), Some(job));
}
