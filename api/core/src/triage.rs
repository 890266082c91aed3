//! Triage: setting the status of one finding, or of several in one step,
//! each change written to the finding's status history in the same
//! transaction.

use uuid::Uuid;

use crate::error::Error;
use crate::fingerprint::FindingStatus;
use crate::store::findings::{self, FindingRow, StatusChange};
use crate::Core;

/// Sets `change` on each of the user's findings `ids`, all or none:
/// `NotFound` when one is not theirs.
pub async fn set_statuses(
    core: &Core,
    user_id: Uuid,
    ids: &[Uuid],
    change: &StatusChange<'_>,
) -> Result<Vec<FindingRow>, Error> {
    let mut db = core.db.get().await?;
    let tx = db.transaction().await?;
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        let row = findings::set_status(&*tx, user_id, *id, change)
            .await?
            .ok_or(Error::NotFound("finding"))?;
        rows.push(row);
    }
    tx.commit().await?;
    Ok(rows)
}

/// Sets `change` on one of the user's findings: `NotFound` when it is not
/// theirs, then `Invalid(until)` when `until` comes with another status than
/// `accepted_risk` (another user's finding is a 404 whatever the change).
pub async fn set_status(
    core: &Core,
    user_id: Uuid,
    finding_id: Uuid,
    change: &StatusChange<'_>,
) -> Result<FindingRow, Error> {
    let mut db = core.db.get().await?;
    let tx = db.transaction().await?;
    let finding = findings::set_status(&*tx, user_id, finding_id, change)
        .await?
        .ok_or(Error::NotFound("finding"))?;
    // After the ownership check; the transaction is dropped, not committed.
    if change.until.is_some() && change.status != FindingStatus::AcceptedRisk {
        return Err(Error::invalid(
            "until",
            "is only taken with status accepted_risk",
        ));
    }
    tx.commit().await?;
    Ok(finding)
}
