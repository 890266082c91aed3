//! Notifications: created by the ingester on terminal scan events and by the
//! scheduler on skipped runs; read and marked read by their owner.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::fingerprints::ChangeCounts;
use super::scans::{self, ScanFacts};
use super::Page;
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct Notification {
    pub id: Uuid,
    pub kind: String,
    pub title: String,
    pub message: String,
    pub scan_id: Option<Uuid>,
    pub schedule_id: Option<Uuid>,
    pub data: Value,
    pub read: bool,
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, type, title, message, scan_id, schedule_id, data, read, created_at";

/// A row holding [`COLUMNS`], read by name.
impl TryFrom<&Row> for Notification {
    type Error = Error;

    fn try_from(r: &Row) -> Result<Self, Error> {
        Ok(Notification {
            id: r.try_get("id")?,
            kind: r.try_get("type")?,
            title: r.try_get("title")?,
            message: r.try_get("message")?,
            scan_id: r.try_get("scan_id")?,
            schedule_id: r.try_get("schedule_id")?,
            data: r.try_get("data")?,
            read: r.try_get("read")?,
            created_at: r.try_get("created_at")?,
        })
    }
}

/// Newest first, with the total; `unread_only` keeps the unread ones.
pub async fn list(
    db: &impl GenericClient,
    user_id: Uuid,
    unread_only: bool,
    page: Page,
) -> Result<(Vec<Notification>, i64), Error> {
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM notifications
                 WHERE user_id = $1 AND (NOT $2 OR NOT read)
                 ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4"
            ),
            &[&user_id, &unread_only, &page.limit, &page.offset],
        )
        .await?;
    let total: i64 = db
        .query_one(
            "SELECT count(*) AS total FROM notifications
             WHERE user_id = $1 AND (NOT $2 OR NOT read)",
            &[&user_id, &unread_only],
        )
        .await?
        .try_get("total")?;
    let notifications = rows
        .iter()
        .map(Notification::try_from)
        .collect::<Result<_, _>>()?;
    Ok((notifications, total))
}

/// Marks one of the user's notifications read; `None` when it is not theirs.
pub async fn mark_read(
    db: &impl GenericClient,
    user_id: Uuid,
    id: Uuid,
) -> Result<Option<Notification>, Error> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE notifications SET read = true WHERE id = $1 AND user_id = $2 RETURNING {COLUMNS}"
            ),
            &[&id, &user_id],
        )
        .await?;
    row.as_ref().map(Notification::try_from).transpose()
}

/// Marks every unread notification of the user read; returns how many.
pub async fn mark_all_read(db: &impl GenericClient, user_id: Uuid) -> Result<u64, Error> {
    Ok(db
        .execute(
            "UPDATE notifications SET read = true WHERE user_id = $1 AND NOT read",
            &[&user_id],
        )
        .await?)
}

pub async fn unread_count(db: &impl GenericClient, user_id: Uuid) -> Result<i64, Error> {
    Ok(db
        .query_one(
            "SELECT count(*) AS unread FROM notifications WHERE user_id = $1 AND NOT read",
            &[&user_id],
        )
        .await?
        .try_get("unread")?)
}

/// `scan_complete` with the scan's finding counts, from the scan row. Safe to
/// call again for the same scan (a replayed event): the second call is a no-op.
/// Returns whether a notification was created.
pub async fn create_scan_complete(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<bool, Error> {
    let Some(facts) = scans::facts(db, scan_id).await? else {
        return Ok(false);
    };
    // The changes are counted (fingerprints::complete) before this runs.
    let changes = crate::store::fingerprints::changes_of(db, scan_id).await?;
    scan_complete(db, scan_id, facts, changes).await
}

/// [`create_scan_complete`] with the scan's facts and changes as the
/// caller has them (the ingester, from the statements that wrote them).
pub async fn scan_complete(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    facts: ScanFacts,
    changes: Option<ChangeCounts>,
) -> Result<bool, Error> {
    let ScanFacts {
        user_id,
        domain,
        counts,
    } = facts;
    let [total, critical, high, medium, low, info] = counts;
    let mut data = json!({
        "total_findings": total,
        "critical": critical,
        "high": high,
        "medium": medium,
        "low": low,
        "info": info,
    });
    let mut message = format!(
        "Scan of {domain} completed with {total} findings ({critical} critical, {high} high, \
         {medium} medium, {low} low, {info} info)."
    );
    if let Some(changes) = changes {
        data["new"] = json!(changes.new);
        data["fixed"] = json!(changes.fixed);
        data["regressed"] = json!(changes.regressed);
        message.push_str(&format!(
            " {} new, {} fixed since the previous scans.",
            changes.new, changes.fixed
        ));
    }
    let title = format!("Scan of {domain} completed");
    insert_for_scan(
        db,
        user_id,
        scan_id,
        "scan_complete",
        &title,
        &message,
        data,
    )
    .await
}

/// `scan_failed` with the error message; idempotent like [`create_scan_complete`].
pub async fn create_scan_failed(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    error: &str,
) -> Result<bool, Error> {
    let Some(facts) = scans::facts(db, scan_id).await? else {
        return Ok(false);
    };
    scan_failed(db, scan_id, facts, error).await
}

/// [`create_scan_failed`] with the scan's facts as the caller has them.
pub async fn scan_failed(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    facts: ScanFacts,
    error: &str,
) -> Result<bool, Error> {
    let ScanFacts {
        user_id, domain, ..
    } = facts;
    insert_for_scan(
        db,
        user_id,
        scan_id,
        "scan_failed",
        &format!("Scan of {domain} failed"),
        &format!("Scan of {domain} failed: {error}"),
        json!({ "error": error }),
    )
    .await
}

async fn insert_for_scan(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    scan_id: Uuid,
    kind: &str,
    title: &str,
    message: &str,
    data: Value,
) -> Result<bool, Error> {
    let stmt = db
        .prepare_cached(
            "INSERT INTO notifications (id, user_id, type, title, message, scan_id, data)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (scan_id, type) WHERE scan_id IS NOT NULL DO NOTHING",
        )
        .await?;
    let inserted = db
        .execute(
            &stmt,
            &[
                &Uuid::now_v7(),
                &user_id,
                &kind,
                &title,
                &message,
                &scan_id,
                &data,
            ],
        )
        .await?;
    Ok(inserted == 1)
}

/// `schedule_skipped`: a scheduled run was not started, with the reason.
pub async fn create_schedule_skipped(
    db: &impl GenericClient,
    user_id: Uuid,
    schedule_id: Uuid,
    reason: &str,
) -> Result<(), Error> {
    db.execute(
        "INSERT INTO notifications (id, user_id, type, title, message, schedule_id, data)
         VALUES ($1, $2, 'schedule_skipped', 'Scheduled scan skipped', $3, $4, $5)",
        &[
            &Uuid::now_v7(),
            &user_id,
            &format!("A scheduled scan was not started: {reason}"),
            &schedule_id,
            &json!({ "reason": reason }),
        ],
    )
    .await?;
    Ok(())
}
