//! The scanfleet scheduler: turns due cron schedules into scans through the
//! core's use case (`scanfleet_core::scans::start_scan`), so limits and
//! queueing exist once, and reaps stuck scans.
//!
//! Data flow: Postgres `schedules` -> **scheduler** -> scan row + Redis job
//! queue -> scanner nodes.
//!
//! Each tick claims the due schedules with `FOR UPDATE SKIP LOCKED` and moves
//! their `next_run` forward in the same transaction, so several schedulers
//! can run side by side and a firing starts once. A firing whose previous run
//! is still active, whose owner is at the scan limit, or whose target's
//! ownership is not proven (when proof is required) is skipped with a
//! `schedule_skipped` notification; the schedule stays enabled.
//!
//! The scheduler does not poll: it sleeps until the earliest `next_run`, and
//! a trigger on `schedules` (`LISTEN scanfleet_schedules`) wakes it when a
//! schedule is created, changed or deleted. It also runs the stuck-scan
//! [`reaper`] every `SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS`.
//!
//! # Imports
//! It may import `scanfleet-core`, `scanfleet-bus` and `scanfleet-common`
//! (and the Postgres and Redis clients the core uses); it must not import
//! the api (no HTTP server, no tokens, no password hashing, no reports) or
//! the scanner engine. The scheduler links core and bus only, never poem,
//! argon2, jsonwebtoken, krilla or boa: `cargo tree -e normal -p
//! scanfleet-scheduler` shows none of them. Only the tests import it.
//!
//! # Layout
//! - [`Scheduler`]: the process; [`Scheduler::tick`] is one pass, with the
//!   clock passed in so tests choose the time.
//! - [`reaper`]: fails scans whose node died, re-enqueues lost jobs.

pub mod reaper;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use scanfleet_common::settings::SchedulerSettings;
use scanfleet_common::{Secret, Settings};
use scanfleet_core::cron::CronSpec;
use scanfleet_core::store::listen::wake_on;
use scanfleet_core::store::{notifications, schedules, users};
use scanfleet_core::{Core, Error, Links};
use tokio_util::sync::CancellationToken;

/// Due schedules claimed per transaction.
const BATCH: i64 = 100;

pub struct Scheduler {
    core: Core,
    config: SchedulerSettings,
    /// For the `LISTEN` connection of schedule changes.
    database_url: Secret,
}

/// The longest the scheduler sleeps even with nothing due, in case a
/// change notification was lost while its listening connection was down.
const MAX_SLEEP: Duration = Duration::from_secs(30);

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
    /// Connects the core like the api does (migrations run under an
    /// advisory lock, so start order does not matter).
    pub async fn build(settings: Settings) -> anyhow::Result<Scheduler> {
        let api_url = format!("{}/api/v1", settings.api.public_url);
        let links = Links { api_url };
        let core = Core::connect(&settings, links, "scheduler").await?;
        Ok(Scheduler::new(
            core,
            settings.scheduler.clone(),
            settings.database_url.clone(),
        ))
    }

    pub fn new(core: Core, config: SchedulerSettings, database_url: Secret) -> Scheduler {
        Scheduler {
            core,
            config,
            database_url,
        }
    }

    /// Starts due schedules and reaps stuck scans until `shutdown` resolves.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        let changed = Arc::new(tokio::sync::Notify::new());
        let stop_listening = CancellationToken::new();
        // Every schedule change wakes the loop (a permit is kept if it is
        // mid-tick, so the change is seen by one more pass).
        let waker = changed.clone();
        let listener = tokio::spawn(wake_on(
            self.database_url.expose().to_string(),
            schedules::CHANGED_CHANNEL,
            "scheduler",
            stop_listening.clone(),
            move || waker.notify_one(),
        ));
        let reap_every = Duration::from_secs(self.config.reap_interval_secs);
        let mut next_reap = tokio::time::Instant::now();
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
            if tokio::time::Instant::now() >= next_reap {
                match reaper::reap(&self.core, &self.config).await {
                    Ok(r) if r != reaper::ReapReport::default() => {
                        tracing::info!(report = ?r, "reaper pass")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "reaper pass failed"),
                }
                next_reap = tokio::time::Instant::now() + reap_every;
            }
            let due_in = self.next_due_in().await.unwrap_or(MAX_SLEEP);
            let wake = tokio::time::Instant::now() + due_in.min(MAX_SLEEP);
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep_until(wake.min(next_reap)) => {}
                _ = changed.notified() => {}
            }
        }
        stop_listening.cancel();
        let _ = listener.await;
        Ok(())
    }

    /// Time until the earliest enabled schedule is due (zero when overdue).
    async fn next_due_in(&self) -> Option<Duration> {
        let db = self.core.db.get().await.ok()?;
        let next = schedules::next_due(&**db).await.ok()??;
        // A few milliseconds late rather than early: `tick` claims what is
        // due at its own clock reading.
        let wait = (next - Utc::now()).to_std().unwrap_or_default();
        Some(wait + Duration::from_millis(5))
    }

    /// Starts every schedule due at `now`.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, Error> {
        let mut report = TickReport::default();
        loop {
            let claimed = {
                let mut db = self.core.db.get().await?;
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
        let db = self.core.db.get().await?;
        let Some(user) = users::find(&**db, schedule.user_id).await? else {
            return Ok(false);
        };
        if user.disabled {
            return Ok(false);
        }
        if schedules::has_active_run(&**db, schedule.id).await? {
            drop(db);
            self.skip(user.id, schedule.id, "the previous run is still active")
                .await?;
            return Ok(false);
        }
        match scanfleet_core::scans::start_scan(
            &self.core,
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
            // An unverified target (when proof is required): the run is
            // skipped and the owner told why; the schedule stays enabled and
            // fires again once ownership is proven.
            Err(Error::UpgradeRequired { detail, .. } | Error::TargetUnverified { detail, .. }) => {
                drop(db);
                self.skip(user.id, schedule.id, &detail).await?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A skipped firing: the owner's notification and the `schedule.skipped`
    /// webhook event commit together.
    async fn skip(
        &self,
        user_id: uuid::Uuid,
        schedule_id: uuid::Uuid,
        reason: &str,
    ) -> Result<(), Error> {
        let mut db = self.core.db.get().await?;
        let tx = db.transaction().await?;
        notifications::create_schedule_skipped(&*tx, user_id, schedule_id, reason).await?;
        scanfleet_core::outbox::schedule_skipped(&tx, user_id, schedule_id, reason).await?;
        tx.commit().await?;
        Ok(())
    }
}
