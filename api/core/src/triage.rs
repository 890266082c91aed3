//! Triage: setting the status of several findings in one step, each
//! change written to the finding's status history in the same
//! transaction.

use uuid::Uuid;

use crate::error::Error;
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
