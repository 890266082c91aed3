//! Starting and stopping scans: the one path every scan takes, from
//! `POST /scans`, a schedule's run-now and the scheduler.
//!
//! Starting checks the target is the user's and its ownership proven when
//! required (which may check an expired proof again over the network, so
//! it runs before any transaction opens), counts the scan against the
//! tier's limit and inserts its row ([`store::scans::insert_counted`]), then
//! pushes the job. The push happens after the commit, so a node never takes
//! a job whose row does not exist yet; if it fails, the scan is marked
//! `failed` (it would otherwise stay `queued` forever). The scan still
//! counts: every created scan does. While Redis is unreachable nothing is
//! created: the caller is told at once.

use std::time::Duration;

use apalis_core::backend::{TaskSink, TaskSinkError};
use fred::interfaces::ClientLike;
use scanfleet_bus::{markers, ScanTasks};
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::{Engine, ScanJob};
use uuid::Uuid;

use crate::error::{Error, Upgrade};
use crate::store::scans::{self, Counted, ScanRow};
use crate::store::users::User;
use crate::Core;

/// A push that takes longer than this is reported as a failure, so that a
/// hung Redis fails the request instead of holding it open.
const PUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where upgrade prompts point, under the versioned API's base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeLinks {
    /// `POST` here with the tier to buy (`/subscriptions/checkout`).
    pub checkout_url: String,
    /// The tiers and what they allow (`/subscriptions/tiers`).
    pub tiers_url: String,
}

impl UpgradeLinks {
    /// The links under `api_url` (`.../api/v1`).
    pub fn under(api_url: &str) -> UpgradeLinks {
        UpgradeLinks {
            checkout_url: format!("{api_url}/subscriptions/checkout"),
            tiers_url: format!("{api_url}/subscriptions/tiers"),
        }
    }
}

/// The tier above `current` and the upgrade prompt for a limit or feature
/// of `current`: its `url` is the checkout (issue 37, item 6: the action
/// that lifts the limit, not a list to read), `tiers_url` the tier list.
pub fn upgrade_prompt(
    links: &UpgradeLinks,
    current: &str,
    message: impl Into<String>,
) -> Box<Upgrade> {
    let tier_slug = match current {
        "demo" => "monthly",
        _ => "yearly",
    };
    Box::new(Upgrade {
        tier_slug: tier_slug.to_string(),
        url: links.checkout_url.clone(),
        tiers_url: links.tiers_url.clone(),
        message: message.into(),
    })
}

/// Starts a scan of `target_id` for `user` (see the module's doc).
#[tracing::instrument(skip_all, fields(user_id = %user.id, target_id = %target_id))]
pub async fn start_scan(
    core: &Core,
    user: &User,
    target_id: Uuid,
    engine: Engine,
    schedule_id: Option<Uuid>,
) -> Result<ScanRow, Error> {
    if !core.scan_queue.client().is_connected() {
        return Err(Error::unavailable("the scan queue (Redis) is unreachable"));
    }
    let mut db = core.db.get().await?;
    let target = crate::store::targets::find(&db, user.id, target_id)
        .await?
        .ok_or(Error::NotFound("target"))?;
    crate::ownership::ensure_may_scan(&core.ownership, &**db, user.id, &target).await?;
    let scan = match scans::insert_counted(&mut db, user.id, target_id, engine, schedule_id).await?
    {
        Counted::Created(scan) => *scan,
        Counted::LimitReached { tier_slug, limit } => {
            return Err(Error::UpgradeRequired {
                code: "scan_limit_reached",
                detail: format!(
                    "the {tier_slug} tier allows {limit} scans per period and they are used up"
                ),
                upgrade: upgrade_prompt(
                    &core.upgrade_links,
                    &tier_slug,
                    "Upgrade your plan to run more scans this period.",
                ),
            })
        }
    };
    let job = ScanJob {
        scan_id: scan.id,
        target_id: scan.target_id,
        domain: scan.domain.clone(),
        engine,
        templates: Vec::new(),
        max_rps_per_host: target.max_rps_per_host,
    };
    if let Err(e) = push(core, &job).await {
        tracing::error!(scan_id = %scan.id, error = %e, "could not enqueue the scan");
        scans::fail_unqueued(
            &**db,
            scan.id,
            "the scan could not be queued; start it again",
        )
        .await?;
        return Err(e);
    }
    tracing::info!(scan_id = %scan.id, engine = engine.as_str(), "scan queued");
    Ok(scan)
}

/// Submits a scan's job as an apalis task (its id the scan's) through the
/// queue's `TaskSink`, giving up after [`PUSH_TIMEOUT`] when Redis hangs.
pub(crate) async fn push(core: &Core, job: &ScanJob) -> Result<(), Error> {
    let mut tasks = ScanTasks::new(core.scan_queue.clone());
    let submit = tasks.push_task(ScanTasks::task(job.clone()));
    match tokio::time::timeout(PUSH_TIMEOUT, submit).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(TaskSinkError::PushError(e))) => Err(e.into()),
        Ok(Err(e)) => Err(Error::Unexpected(anyhow::Error::new(e))),
        Err(elapsed) => Err(Error::unavailable(elapsed)),
    }
}

/// Stops one of the user's scans: `NotFound` when it is not theirs,
/// `Conflict(scan_finished)` when it already finished. The stop is
/// published before the row changes, so a failed publish changes nothing.
#[tracing::instrument(skip_all, fields(scan_id = %scan_id))]
pub async fn stop_scan(core: &Core, user_id: Uuid, scan_id: Uuid) -> Result<ScanRow, Error> {
    let db = core.db.get().await?;
    let scan = scans::find(&db, user_id, scan_id)
        .await?
        .ok_or(Error::NotFound("scan"))?;
    let finished = || {
        Error::conflict(
            "scan_finished",
            "the scan has already finished and cannot be stopped",
        )
    };
    if scan.status.is_terminal() {
        return Err(finished());
    }
    markers::publish_stop(&core.redis, &core.keys, scan_id).await?;
    // The stop and its webhook event commit together.
    let mut tx_db = core.db.get().await?;
    let tx = tx_db.transaction().await?;
    let stopped = scans::mark_stopped(&*tx, user_id, scan_id).await?;
    if stopped.is_some() {
        crate::outbox::scan_finished(&tx, scan_id, user_id, ScanStatus::Stopped).await?;
    }
    tx.commit().await?;
    match stopped {
        Some(row) => Ok(row),
        // The ingester may have applied the stop event first; otherwise the
        // scan finished between the read and the update.
        None => match scans::find(&db, user_id, scan_id).await? {
            Some(scan) if scan.status == ScanStatus::Stopped => Ok(scan),
            _ => Err(finished()),
        },
    }
}

/// Fails an unfinished scan with `error` and its `scan_failed`
/// notification, in one transaction; false when it had finished already.
pub async fn fail_scan(
    db: &mut deadpool_postgres::Client,
    scan_id: Uuid,
    error: &str,
) -> Result<bool, Error> {
    let tx = db.transaction().await?;
    let changed = scans::set_scan_status(&tx, scan_id, ScanStatus::Failed, Some(error)).await?;
    if changed {
        crate::store::notifications::create_scan_failed(&tx, scan_id, error).await?;
    }
    tx.commit().await?;
    Ok(changed)
}
