//! Adding, importing, verifying and deleting targets: the steps of each in
//! one place, for the API and the web console alike.

use uuid::Uuid;

use crate::domain::Domain;
use crate::error::Error;
use crate::ownership;
use crate::scans::upgrade_prompt;
use crate::store::scans;
use crate::store::targets::{self, AddError, ImportLine, TargetRow};
use crate::Core;

fn limit_error(core: &Core, tier_slug: &str, limit: i32) -> Error {
    Error::UpgradeRequired {
        code: "target_limit_reached",
        detail: format!("the {tier_slug} tier allows {limit} targets"),
        upgrade: upgrade_prompt(
            &core.upgrade_links,
            tier_slug,
            "Upgrade your plan to add more targets.",
        ),
    }
}

/// Adds a target: `Conflict(target_exists)` when the user has the domain,
/// `UpgradeRequired` at the tier's target limit.
pub async fn add(
    core: &Core,
    user_id: Uuid,
    domain: &Domain,
    organization: &str,
    max_rps_per_host: Option<u32>,
) -> Result<TargetRow, Error> {
    let mut db = core.db.get().await?;
    let tx = db.transaction().await?;
    let target =
        match targets::create(&*tx, user_id, domain, organization, max_rps_per_host).await? {
            Ok(t) => t,
            Err(AddError::Duplicate) => {
                return Err(Error::conflict(
                    "target_exists",
                    format!("you already have the target {domain}"),
                ))
            }
            Err(AddError::LimitReached { tier_slug, limit }) => {
                return Err(limit_error(core, &tier_slug, limit))
            }
        };
    tx.commit().await?;
    Ok(target)
}

/// Imports domains in one transaction; each line says what became of its
/// domain.
pub async fn import(
    core: &Core,
    user_id: Uuid,
    domains: &[String],
) -> Result<Vec<ImportLine>, Error> {
    let mut db = core.db.get().await?;
    let tx = db.transaction().await?;
    let lines = targets::import(&*tx, user_id, domains).await?;
    tx.commit().await?;
    Ok(lines)
}

/// Checks the ownership proof of one of the user's targets now:
/// `VerificationFailed` naming what each method found when none holds.
pub async fn verify(core: &Core, user_id: Uuid, target_id: Uuid) -> Result<TargetRow, Error> {
    let db = core.db.get().await?;
    let target = targets::find(&db, user_id, target_id)
        .await?
        .ok_or(Error::NotFound("target"))?;
    let own = &core.ownership;
    match ownership::verify_target(&own.checker, &**db, &target, own.ttl_days).await? {
        Ok(row) => Ok(row),
        Err(found) => Err(Error::VerificationFailed {
            detail: format!("no proof of ownership of {} was found", target.domain),
            errors: found,
            help: Box::new(ownership::help_for(&target, &own.api_url)),
        }),
    }
}

/// Deletes one of the user's targets with its scans, findings and
/// schedules, stopping its active scans first: `NotFound` when it is not
/// theirs.
pub async fn delete(core: &Core, user_id: Uuid, target_id: Uuid) -> Result<(), Error> {
    let mut db = core.db.get().await?;
    let tx = db.transaction().await?;
    // Locked first, so a scan created concurrently either commits before
    // (and is stopped below) or fails on the deleted target.
    if !targets::lock_owned(&*tx, user_id, target_id).await? {
        return Err(Error::NotFound("target"));
    }
    // Stop before deleting: once the rows are gone the nodes running
    // these scans would have nowhere to report to.
    for scan_id in scans::active_ids_of_target(&*tx, target_id).await? {
        scanfleet_bus::markers::publish_stop(&core.redis, &core.keys, scan_id).await?;
    }
    if !targets::delete(&*tx, user_id, target_id).await? {
        return Err(Error::NotFound("target"));
    }
    tx.commit().await?;
    tracing::info!(%target_id, "target deleted");
    Ok(())
}
