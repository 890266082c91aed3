//! Schedules: recurring scans of one target. The cron expression is stored
//! as given and was validated ([`crate::cron::CronSpec`]) before it got
//! here; `next_run` is always computed by the caller from that spec.

use chrono::{DateTime, Utc};
use scanfleet_common::jobs::Engine;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::Page;
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct Schedule {
    pub id: Uuid,
    pub user_id: Uuid,
    pub target_id: Uuid,
    pub engine: Engine,
    pub cron_expression: String,
    pub enabled: bool,
    pub next_run: DateTime<Utc>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "s.id, s.user_id, s.target_id, s.engine, s.cron_expression, s.enabled, \
                       s.next_run, s.last_run_at, s.created_at, s.updated_at";

/// A row holding [`COLUMNS`], read by name; an engine the code does not
/// know (the table's CHECK constraint admits none) is an error, never
/// silently another engine.
impl TryFrom<&Row> for Schedule {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(Schedule {
            id: row.try_get("id")?,
            user_id: row.try_get("user_id")?,
            target_id: row.try_get("target_id")?,
            engine: row.try_get("engine")?,
            cron_expression: row.try_get("cron_expression")?,
            enabled: row.try_get("enabled")?,
            next_run: row.try_get("next_run")?,
            last_run_at: row.try_get("last_run_at")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }
}

pub struct NewSchedule<'a> {
    pub user_id: Uuid,
    pub target_id: Uuid,
    pub engine: Engine,
    pub cron_expression: &'a str,
    pub next_run: DateTime<Utc>,
}

/// Inserts an enabled schedule; a target that is missing or someone else's
/// is `NotFound("target")` (one statement: the insert selects the target).
pub async fn create(db: &impl GenericClient, new: NewSchedule<'_>) -> Result<Schedule, Error> {
    let row = db
        .query_opt(
            &format!(
                "INSERT INTO schedules AS s (id, user_id, target_id, engine, cron_expression, next_run)
                 SELECT $1, t.user_id, t.id, $4, $5, $6 FROM targets t
                 WHERE t.id = $3 AND t.user_id = $2
                 RETURNING {COLUMNS}"
            ),
            &[
                &Uuid::now_v7(),
                &new.user_id,
                &new.target_id,
                &new.engine,
                &new.cron_expression,
                &new.next_run,
            ],
        )
        .await?
        .ok_or(Error::NotFound("target"))?;
    Schedule::try_from(&row)
}

/// The user's schedule; someone else's is `None`.
pub async fn find(
    db: &impl GenericClient,
    user_id: Uuid,
    id: Uuid,
) -> Result<Option<Schedule>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM schedules s WHERE s.id = $1 AND s.user_id = $2"),
            &[&id, &user_id],
        )
        .await?;
    row.as_ref().map(Schedule::try_from).transpose()
}

/// Newest first, with the total count.
pub async fn list(
    db: &impl GenericClient,
    user_id: Uuid,
    page: Page,
) -> Result<(Vec<Schedule>, i64), Error> {
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM schedules s WHERE s.user_id = $1
                 ORDER BY s.created_at DESC, s.id DESC LIMIT $2 OFFSET $3"
            ),
            &[&user_id, &page.limit, &page.offset],
        )
        .await?;
    let total: i64 = db
        .query_one(
            "SELECT count(*) AS total FROM schedules WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .try_get("total")?;
    let schedules = rows
        .iter()
        .map(Schedule::try_from)
        .collect::<Result<_, _>>()?;
    Ok((schedules, total))
}

/// The new values of a schedule, computed by the caller from the old ones
/// and the request (so `next_run` always matches `cron_expression`).
pub struct ScheduleUpdate<'a> {
    pub engine: Engine,
    pub cron_expression: &'a str,
    pub enabled: bool,
    pub next_run: DateTime<Utc>,
}

pub async fn update(
    db: &impl GenericClient,
    user_id: Uuid,
    id: Uuid,
    change: ScheduleUpdate<'_>,
) -> Result<Schedule, Error> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE schedules s SET engine = $3, cron_expression = $4, enabled = $5,
                        next_run = $6, updated_at = now()
                 WHERE s.id = $1 AND s.user_id = $2 RETURNING {COLUMNS}"
            ),
            &[
                &id,
                &user_id,
                &change.engine,
                &change.cron_expression,
                &change.enabled,
                &change.next_run,
            ],
        )
        .await?
        .ok_or(Error::NotFound("schedule"))?;
    Schedule::try_from(&row)
}

/// Deletes the user's schedule; someone else's is `NotFound`. Its past scans
/// stay (their `schedule_id` becomes NULL).
pub async fn delete(db: &impl GenericClient, user_id: Uuid, id: Uuid) -> Result<(), Error> {
    let n = db
        .execute(
            "DELETE FROM schedules WHERE id = $1 AND user_id = $2",
            &[&id, &user_id],
        )
        .await?;
    if n == 0 {
        return Err(Error::NotFound("schedule"));
    }
    Ok(())
}

/// Records that a run of the schedule was started (run-now or the scheduler).
pub async fn mark_run(db: &impl GenericClient, id: Uuid, at: DateTime<Utc>) -> Result<(), Error> {
    db.execute(
        "UPDATE schedules SET last_run_at = $2, updated_at = now() WHERE id = $1",
        &[&id, &at],
    )
    .await?;
    Ok(())
}

/// Claims up to `limit` enabled schedules due at `now` and moves each one's
/// `next_run` to `next(schedule)` (or disables it when it never fires again),
/// all in one transaction. `FOR UPDATE SKIP LOCKED` makes concurrent
/// schedulers claim disjoint sets, so a firing is started once.
pub async fn claim_due(
    db: &mut deadpool_postgres::Client,
    now: DateTime<Utc>,
    limit: i64,
    next: impl Fn(&Schedule) -> Option<DateTime<Utc>>,
) -> Result<Vec<Schedule>, Error> {
    let tx = db.transaction().await?;
    let due: Vec<Schedule> = tx
        .query(
            &format!(
                "SELECT {COLUMNS} FROM schedules s
                 WHERE s.enabled AND s.next_run <= $1
                 ORDER BY s.next_run LIMIT $2 FOR UPDATE SKIP LOCKED"
            ),
            &[&now, &limit],
        )
        .await?
        .iter()
        .map(Schedule::try_from)
        .collect::<Result<_, _>>()?;
    for s in &due {
        match next(s) {
            Some(at) => {
                tx.execute(
                    "UPDATE schedules SET next_run = $2, last_run_at = $3, updated_at = now()
                     WHERE id = $1",
                    &[&s.id, &at, &now],
                )
                .await?
            }
            None => {
                tx.execute(
                    "UPDATE schedules SET enabled = false, last_run_at = $2, updated_at = now()
                     WHERE id = $1",
                    &[&s.id, &now],
                )
                .await?
            }
        };
    }
    tx.commit().await?;
    Ok(due)
}

/// Whether a scan started by this schedule is still queued, pending or running.
pub async fn has_active_run(db: &impl GenericClient, schedule_id: Uuid) -> Result<bool, Error> {
    Ok(db
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM scans WHERE schedule_id = $1
                            AND status IN ('queued', 'pending', 'running')) AS active",
            &[&schedule_id],
        )
        .await?
        .try_get("active")?)
}

/// When the next enabled schedule is due, if any (the scheduler sleeps
/// until then).
pub async fn next_due(db: &impl GenericClient) -> Result<Option<DateTime<Utc>>, Error> {
    Ok(db
        .query_one(
            "SELECT min(next_run) AS next_run FROM schedules WHERE enabled",
            &[],
        )
        .await?
        .try_get("next_run")?)
}

/// The channel a trigger on `schedules` notifies on every change.
pub const CHANGED_CHANNEL: &str = "scanfleet_schedules";
