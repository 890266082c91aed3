//! The stuck-scan reaper: every scan reaches a terminal state.
//!
//! - A `pending` or `running` scan that nobody has heard from for
//!   `SCANFLEET_SCHEDULER__STUCK_AFTER_SECS` (no event ingested) is failed
//!   with a `scan_failed` notification, unless its job is held by a node
//!   whose lease is live or waits in the queue to be taken up again. A job
//!   whose lease ran out and that nobody put back (no node is alive), or a
//!   job that is gone (Redis lost it and its node is gone too), does not
//!   save it.
//! - A `queued` scan older than `SCANFLEET_SCHEDULER__QUEUED_AFTER_SECS`
//!   whose job is not in the queue is enqueued again once; the second time
//!   it is failed.
//! - When Redis's data set is new (a restart without persistence lost the
//!   queue), the jobs of every `queued` scan are pushed again at once
//!   (pushing is idempotent per scan); running scans are written back by
//!   the nodes running them.
//!
//! A reaped scan gets its closed marker (a node that finds the job later
//! drops it) and a `failed` event on its stream (WebSocket listeners see
//! the end); the database change and the notification are one transaction.

use scanfleet_bus::{events, markers, JobState};
use scanfleet_common::events::{ScanEvent, ScanStatus};
use scanfleet_common::settings::SchedulerSettings;
use scanfleet_core::store::scans::{self, StaleScan};
use scanfleet_core::{Core, Error};
use uuid::Uuid;

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReapReport {
    pub failed: usize,
    pub requeued: usize,
    /// Jobs pushed again after Redis lost its data.
    pub restored: usize,
}

/// One pass over the stale scans.
pub async fn reap(state: &Core, cfg: &SchedulerSettings) -> Result<ReapReport, Error> {
    let mut report = ReapReport::default();
    if markers::data_set_is_new(&state.redis, &state.keys).await? {
        report.restored = restore_queue(state).await?;
    }
    let stale = {
        let db = state.db.get().await?;
        scans::stale_scans(
            &**db,
            cfg.stuck_after_secs as i64,
            cfg.queued_after_secs as i64,
        )
        .await?
    };
    if stale.is_empty() {
        return Ok(report);
    }
    let ids: Vec<Uuid> = stale.iter().map(|s| s.id).collect();
    let jobs = state.scan_queue.inspect(&ids).await?;
    for scan in stale {
        let job = jobs.get(&scan.id).cloned().unwrap_or(JobState::Missing);
        let (changed, counter) = match (scan.status, job) {
            (_, JobState::Waiting) | (_, JobState::Held { .. }) => continue,
            (ScanStatus::Pending | ScanStatus::Running, _) => {
                let error = format!(
                    "the scanner node running this scan stopped responding (nothing heard for {} s) \
                     and no other node took the scan up",
                    cfg.stuck_after_secs
                );
                (fail(state, scan.id, &error).await?, &mut report.failed)
            }
            (ScanStatus::Queued, JobState::Missing) if scan.requeued == 0 => {
                (requeue(state, &scan).await?, &mut report.requeued)
            }
            (ScanStatus::Queued, JobState::Missing) => {
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

/// Pushes the job of every queued scan; how many were missing.
async fn restore_queue(state: &Core) -> Result<usize, Error> {
    let queued = {
        let db = state.db.get().await?;
        scans::queued_scans(&**db).await?
    };
    let mut restored = 0;
    for scan in &queued {
        if state.scan_queue.push(&scan.job()).await? {
            restored += 1;
        }
    }
    if restored > 0 {
        tracing::warn!(
            restored,
            "Redis lost its data: pushed the jobs of queued scans again"
        );
    }
    Ok(restored)
}

/// Fails an unfinished scan everywhere; false when it had finished.
async fn fail(state: &Core, scan_id: Uuid, error: &str) -> Result<bool, Error> {
    markers::close(&state.redis, &state.keys, scan_id).await?;
    let mut db = state.db.get().await?;
    let failed = scanfleet_core::scans::fail_scan(&mut db, scan_id, error).await?;
    if failed {
        tracing::warn!(%scan_id, %error, "scan reaped");
        events::append_event(
            &state.redis,
            &state.keys,
            &ScanEvent::status(scan_id, ScanStatus::Failed, Some(error.to_string())),
        )
        .await?;
    }
    Ok(failed)
}

async fn requeue(state: &Core, scan: &StaleScan) -> Result<bool, Error> {
    let db = state.db.get().await?;
    if !scans::mark_requeued(&**db, scan.id).await? {
        return Ok(false);
    }
    tracing::warn!(scan_id = %scan.id, "queued scan had no job in the queue; enqueued again");
    state.scan_queue.push(&scan.job()).await?;
    Ok(true)
}
