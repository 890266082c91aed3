//! The scanfleet scheduler: turns due cron schedules into scans through the
//! api crate's storage layer, so limits and queueing exist once.
//!
//! Data flow: Postgres `schedules` -> **scheduler** -> scan row + Redis job
//! queue -> scanner nodes.
//!
//! Each tick claims the due schedules with `FOR UPDATE SKIP LOCKED` and moves
//! their `next_run` forward in the same transaction, so several schedulers
//! can run side by side and a firing starts once. A firing whose previous run
//! is still active, or whose owner is at the scan limit, is skipped with a
//! `schedule_skipped` notification. The stuck-scan reaper is not provided yet:
//! scanner nodes do not take jobs in this version, so every scan would look
//! stuck.
//!
//! # Layout
//! - [`Scheduler`]: the process; [`Scheduler::tick`] is one pass, with the
//!   clock passed in so tests choose the time.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use scanfleet_api::cron::CronSpec;
use scanfleet_api::state::AppState;
use scanfleet_api::store::{notifications, scans, schedules, users};
use scanfleet_api::Error;
use scanfleet_common::Settings;

/// Due schedules claimed per transaction.
const BATCH: i64 = 100;

pub struct Scheduler {
    state: AppState,
    interval: Duration,
}

/// What one tick did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    /// Scans created.
    pub started: usize,
    /// Firings skipped with a notification (previous run active, limit reached).
    pub skipped: usize,
    /// Firings that failed for another reason (logged).
    pub failed: usize,
}

impl Scheduler {
    /// Connects like the api does (migrations run under an advisory lock, so
    /// start order does not matter).
    pub async fn build(settings: Settings) -> anyhow::Result<Scheduler> {
        Ok(Scheduler::from_state(AppState::connect(settings).await?))
    }

    pub fn from_state(state: AppState) -> Scheduler {
        Scheduler {
            state,
            interval: Duration::from_secs(15),
        }
    }

    /// Ticks every 15 seconds until `shutdown` resolves.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        loop {
            match self.tick(Utc::now()).await {
                Ok(report) if report != TickReport::default() => {
                    tracing::info!(?report, "scheduler tick")
                }
                Ok(_) => {}
                // A database hiccup must not stop the scheduler; the next
                // tick retries, and nothing was claimed by a failed one.
                Err(e) => tracing::error!(error = %e, "scheduler tick failed"),
            }
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(self.interval) => {}
            }
        }
    }

    /// Starts every schedule due at `now`.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, Error> {
        let mut report = TickReport::default();
        loop {
            let claimed = {
                let mut db = self.state.db.get().await?;
                schedules::claim_due(&mut db, now, BATCH, |s| {
                    CronSpec::parse(&s.cron_expression)
                        .ok()
                        .and_then(|spec| spec.next_after(now))
                })
                .await?
            };
            let full_batch = claimed.len() as i64 == BATCH;
            for schedule in claimed {
                match self.fire(&schedule).await {
                    Ok(true) => report.started += 1,
                    Ok(false) => report.skipped += 1,
                    Err(e) => {
                        report.failed += 1;
                        tracing::error!(schedule_id = %schedule.id, error = %e, "scheduled scan not started");
                    }
                }
            }
            if !full_batch {
                return Ok(report);
            }
        }
    }

    /// Starts one firing; false when it was skipped (and the owner told why).
    async fn fire(&self, schedule: &schedules::Schedule) -> Result<bool, Error> {
        let db = self.state.db.get().await?;
        let Some(user) = users::find(&**db, schedule.user_id).await? else {
            return Ok(false);
        };
        if user.disabled {
            return Ok(false);
        }
        if schedules::has_active_run(&**db, schedule.id).await? {
            notifications::create_schedule_skipped(
                &**db,
                user.id,
                schedule.id,
                "the previous run is still active",
            )
            .await?;
            return Ok(false);
        }
        match scans::create_scan(
            &self.state,
            &user,
            schedule.target_id,
            schedule.engine,
            Some(schedule.id),
        )
        .await
        {
            Ok(scan) => {
                tracing::info!(schedule_id = %schedule.id, scan_id = %scan.id, "scheduled scan started");
                Ok(true)
            }
            Err(Error::UpgradeRequired { detail, .. }) => {
                notifications::create_schedule_skipped(&**db, user.id, schedule.id, &detail)
                    .await?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}
