//! Webhook events into the outbox, in the transaction that records what
//! they report: the ingester's commit of a terminal status, a stop, a
//! skipped schedule firing. A rollback takes the event with it and a commit
//! cannot lose it; the api's dispatcher sends it afterwards (see
//! [`crate::store::webhooks`] for the tables).
//!
//! Events name what they report (`scan_id`, `finding_id`, `schedule_id`);
//! the dispatcher renders the body in the API's own shapes when it first
//! sends the event.

use deadpool_postgres::GenericClient;
use scanfleet_common::events::ScanStatus;
use serde_json::json;
use uuid::Uuid;

use crate::error::Error;
use crate::store::webhooks::{self, NewEvent};

/// Event types, as webhooks subscribe to them.
pub const SCAN_COMPLETED: &str = "scan.completed";
pub const SCAN_FAILED: &str = "scan.failed";
pub const SCAN_STOPPED: &str = "scan.stopped";
pub const FINDING_NEW: &str = "finding.new";
pub const FINDING_REGRESSED: &str = "finding.regressed";
pub const SCHEDULE_SKIPPED: &str = "schedule.skipped";
pub const PING: &str = "ping";

/// Every type a webhook may subscribe to (`ping` is always sent).
pub const SUBSCRIBABLE: [&str; 6] = [
    SCAN_COMPLETED,
    SCAN_FAILED,
    SCAN_STOPPED,
    FINDING_NEW,
    FINDING_REGRESSED,
    SCHEDULE_SKIPPED,
];

/// The event of a scan reaching `status` (and, for a completed scan, its
/// new findings). Call it in the transaction that made the transition.
pub async fn scan_finished(
    db: &impl GenericClient,
    scan_id: Uuid,
    user_id: Uuid,
    status: ScanStatus,
) -> Result<(), Error> {
    let kind = match status {
        ScanStatus::Completed => SCAN_COMPLETED,
        ScanStatus::Failed => SCAN_FAILED,
        ScanStatus::Stopped => SCAN_STOPPED,
        _ => return Ok(()),
    };
    webhooks::record_event(
        db,
        &NewEvent {
            user_id,
            kind,
            data: json!({ "scan_id": scan_id }),
            severity: None,
            only_webhook: None,
        },
    )
    .await?;
    if status == ScanStatus::Completed {
        webhooks::record_new_findings_of_scan(db, scan_id).await?;
    }
    Ok(())
}

/// `schedule.skipped`, with the reason the run was not started.
pub async fn schedule_skipped(
    db: &impl GenericClient,
    user_id: Uuid,
    schedule_id: Uuid,
    reason: &str,
) -> Result<(), Error> {
    webhooks::record_event(
        db,
        &NewEvent {
            user_id,
            kind: SCHEDULE_SKIPPED,
            data: json!({ "schedule_id": schedule_id, "reason": reason }),
            severity: None,
            only_webhook: None,
        },
    )
    .await?;
    Ok(())
}

/// A `ping` to one webhook; false when it is disabled (nothing is sent).
pub async fn ping(db: &impl GenericClient, user_id: Uuid, webhook_id: Uuid) -> Result<bool, Error> {
    let created = webhooks::record_event(
        db,
        &NewEvent {
            user_id,
            kind: PING,
            data: json!({ "webhook_id": webhook_id }),
            severity: None,
            only_webhook: Some(webhook_id),
        },
    )
    .await?;
    Ok(created > 0)
}
