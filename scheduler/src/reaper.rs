//! The stuck-scan reaper: every scan reaches a terminal state.
//!
//! - A `pending` or `running` scan that nobody has heard from for
//!   `SCANFLEET_SCHEDULER__STUCK_AFTER_SECS` (no event ingested, no
//!   heartbeat from a node), and whose job is not waiting in the queue to be
//!   taken up again, is failed with a `scan_failed` notification.
//! - A `queued` scan older than `SCANFLEET_SCHEDULER__QUEUED_AFTER_SECS`
//!   whose job is neither in the queue nor held by a live node is enqueued
//!   again once; the second time it is failed.
//!
//! A reaped scan gets its closed marker (a node that finds the job later
//! drops it) and a `failed` event on its stream (WebSocket listeners see
//! the end); the database change and the notification are one transaction.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use fred::interfaces::{
    HashesInterface, KeysInterface, ListInterface, SetsInterface, SortedSetsInterface,
};
use fred::types::Expiration;
use scanfleet_api::queue::{append_event, STOPPED_MARKER_TTL_SECS};
use scanfleet_api::state::AppState;
use scanfleet_api::store::scans::{self, StaleScan};
use scanfleet_api::Error;
use scanfleet_common::events::{ScanEvent, ScanStatus};
use scanfleet_common::jobs::ScanJob;
use uuid::Uuid;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReapReport {
    pub failed: usize,
    pub requeued: usize,
}

/// One pass over the stale scans.
pub async fn reap(state: &AppState) -> Result<ReapReport, Error> {
    let cfg = &state.settings.scheduler;
    let stale = {
        let db = state.db.get().await?;
        scans::stale_scans(
            &**db,
            cfg.stuck_after_secs as i64,
            cfg.queued_after_secs as i64,
        )
        .await?
    };
    let mut report = ReapReport::default();
    if stale.is_empty() {
        return Ok(report);
    }
    let waiting = scans_with_jobs(state).await?;
    for scan in stale {
        if waiting.contains(&scan.id) {
            continue;
        }
        let (changed, counter) = match scan.status {
            ScanStatus::Pending | ScanStatus::Running => {
                let alive: bool = state
                    .redis
                    .exists(state.keys.scan_heartbeat(scan.id))
                    .await?;
                if alive {
                    continue;
                }
                let error = format!(
                    "the scanner node running this scan stopped responding (nothing heard for {} s) \
                     and no other node took the scan up",
                    cfg.stuck_after_secs
                );
                (fail(state, scan.id, &error).await?, &mut report.failed)
            }
            ScanStatus::Queued if scan.requeued == 0 => {
                (requeue(state, &scan).await?, &mut report.requeued)
            }
            ScanStatus::Queued => {
                let error = "the scan's job was lost from the queue twice; start the scan again";
                (fail(state, scan.id, error).await?, &mut report.failed)
            }
            _ => continue,
        };
        if changed {
            *counter += 1;
        }
    }
    Ok(report)
}

/// Fails an unfinished scan everywhere; false when it had finished.
async fn fail(state: &AppState, scan_id: Uuid, error: &str) -> Result<bool, Error> {
    let _: () = state
        .redis
        .set(
            state.keys.scan_closed(scan_id),
            "1",
            Some(Expiration::EX(STOPPED_MARKER_TTL_SECS)),
            None,
            false,
        )
        .await?;
    let mut db = state.db.get().await?;
    let failed = scans::fail_scan(&mut db, scan_id, error).await?;
    if failed {
        tracing::warn!(%scan_id, %error, "scan reaped");
        append_event(
            &state.redis,
            &state.keys,
            &ScanEvent::status(scan_id, ScanStatus::Failed, Some(error.to_string())),
        )
        .await?;
    }
    Ok(failed)
}

async fn requeue(state: &AppState, scan: &StaleScan) -> Result<bool, Error> {
    let db = state.db.get().await?;
    if !scans::mark_requeued(&**db, scan.id).await? {
        return Ok(false);
    }
    tracing::warn!(scan_id = %scan.id, "queued scan had no job in the queue; enqueued again");
    state
        .scan_queue
        .push(ScanJob {
            scan_id: scan.id,
            target_id: scan.target_id,
            domain: scan.domain.clone(),
            engine: scan.engine,
        })
        .await?;
    Ok(true)
}

/// Scans whose job is waiting in the queue, or held by a node that is
/// still heartbeating.
async fn scans_with_jobs(state: &AppState) -> Result<HashSet<Uuid>, Error> {
    let config = state.scan_queue.config();
    // A pushed job waits in the scheduled set until a node's fetch moves it
    // to the active list (apalis pushes with "run at: now").
    let mut task_ids: Vec<String> = state.redis.lrange(config.active_jobs_list(), 0, -1).await?;
    let scheduled: Vec<String> = state
        .redis
        .zrangebyscore(config.scheduled_jobs_set(), "-inf", "+inf", false, None)
        .await?;
    task_ids.extend(scheduled);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as f64;
    let fresh_after = now - state.settings.scanner.orphan_after_secs as f64;
    let live_workers: Vec<String> = state
        .redis
        .zrangebyscore(config.workers_set(), fresh_after, "+inf", false, None)
        .await?;
    for worker in live_workers {
        let held: Vec<String> = state
            .redis
            .smembers(format!("{}:{worker}", config.inflight_jobs_set()))
            .await?;
        task_ids.extend(held);
    }
    if task_ids.is_empty() {
        return Ok(HashSet::new());
    }
    let jobs: Vec<Option<String>> = state.redis.hmget(config.job_data_hash(), task_ids).await?;
    Ok(jobs
        .into_iter()
        .flatten()
        .filter_map(|json| serde_json::from_str::<ScanJob>(&json).ok())
        .map(|job| job.scan_id)
        .collect())
}
