//! Retesting one finding (issue 26): a scan of engine `retest` that runs
//! only the finding's template against its host. It is not counted in the
//! tier's scan usage; a user has at most [`MAX_RUNNING_RETESTS`] queued or
//! running. Found again, the fingerprint stays open with `last_seen_at`
//! moved; not found by the completed retest, it is fixed (the fixed rule
//! lets a retest fix only its own fingerprint).

use fred::interfaces::ClientLike;
use scanfleet_common::jobs::{Engine, ScanJob};
use uuid::Uuid;

use crate::error::Error;
use crate::store::fingerprints;
use crate::store::scans::{self, ScanRow};
use crate::store::users::User;
use crate::Core;

/// Retests a user may have queued or running at once.
pub const MAX_RUNNING_RETESTS: i64 = 5;
/// What a refused retest tells the client to wait.
const RETRY_AFTER_SECS: u64 = 30;

/// Starts a retest of one of the user's findings: `NotFound` when it is
/// not theirs, `RateLimited` with [`MAX_RUNNING_RETESTS`] running. The job
/// is pushed after the commit, as for every scan; a failed push fails the
/// scan.
#[tracing::instrument(skip_all, fields(user_id = %user.id, finding_id = %finding_id))]
pub async fn start_retest(core: &Core, user: &User, finding_id: Uuid) -> Result<ScanRow, Error> {
    if !core.scan_queue.client().is_connected() {
        return Err(Error::unavailable("the scan queue (Redis) is unreachable"));
    }
    let mut db = core.db.get().await?;
    let subject = fingerprints::retest_subject(&**db, user.id, finding_id)
        .await?
        .ok_or(Error::NotFound("finding"))?;
    let target = crate::store::targets::find(&db, user.id, subject.target_id)
        .await?
        .ok_or(Error::NotFound("finding"))?;
    crate::ownership::ensure_may_scan(&core.ownership, &**db, user.id, &target).await?;
    let scan = fingerprints::insert_retest(&mut db, user.id, &subject, MAX_RUNNING_RETESTS)
        .await?
        .ok_or(Error::RateLimited {
            retry_after_secs: RETRY_AFTER_SECS,
        })?;
    let job = ScanJob {
        scan_id: scan.id,
        target_id: scan.target_id,
        domain: subject.host.clone(),
        engine: Engine::Retest,
        templates: vec![subject.template_id.clone()],
        max_rps_per_host: target.max_rps_per_host,
    };
    if let Err(e) = crate::scans::push(core, &job).await {
        tracing::error!(scan_id = %scan.id, error = %e, "could not enqueue the retest");
        scans::fail_unqueued(
            &**db,
            scan.id,
            "the retest could not be queued; start it again",
        )
        .await?;
        return Err(e);
    }
    tracing::info!(scan_id = %scan.id, "retest queued");
    Ok(scan)
}
