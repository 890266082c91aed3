//! Scans: the counted insert of a new scan ([`insert_counted`]; the use
//! case around it is `crate::scans`), listing, stop, the forward-only status
//! transition the ingester applies, and what the reaper reads.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::{Engine, ScanJob};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::subscriptions;
use super::Page;
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct ScanRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub target_id: Uuid,
    pub schedule_id: Option<Uuid>,
    /// The target's domain.
    pub domain: String,
    pub engine: Engine,
    pub status: ScanStatus,
    pub stage: Option<String>,
    pub progress: i16,
    pub current_tool: Option<String>,
    pub error: Option<String>,
    pub findings_count: i32,
    pub critical_count: i32,
    pub high_count: i32,
    pub medium_count: i32,
    pub low_count: i32,
    pub info_count: i32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// Grows with every change to the scan or its findings (migration 13).
    pub revision: i64,
}

/// Columns of [`ScanRow`], for `scans s JOIN targets t`.
pub(crate) const COLUMNS: &str =
    "s.id, s.user_id, s.target_id, s.schedule_id, t.domain, s.engine, \
     s.status, s.stage, s.progress, s.current_tool, s.error, s.findings_count, s.critical_count, \
     s.high_count, s.medium_count, s.low_count, s.info_count, s.created_at, s.started_at, \
     s.completed_at, s.updated_at, s.revision";

impl TryFrom<&Row> for ScanRow {
    type Error = Error;

    /// Reads the columns of [`COLUMNS`] by name; an engine or status the
    /// code does not know is an error, never silently another value.
    fn try_from(row: &Row) -> Result<ScanRow, Error> {
        Ok(ScanRow {
            id: row.try_get("id")?,
            user_id: row.try_get("user_id")?,
            target_id: row.try_get("target_id")?,
            schedule_id: row.try_get("schedule_id")?,
            domain: row.try_get("domain")?,
            engine: row.try_get("engine")?,
            status: row.try_get("status")?,
            stage: row.try_get("stage")?,
            progress: row.try_get("progress")?,
            current_tool: row.try_get("current_tool")?,
            error: row.try_get("error")?,
            findings_count: row.try_get("findings_count")?,
            critical_count: row.try_get("critical_count")?,
            high_count: row.try_get("high_count")?,
            medium_count: row.try_get("medium_count")?,
            low_count: row.try_get("low_count")?,
            info_count: row.try_get("info_count")?,
            created_at: row.try_get("created_at")?,
            started_at: row.try_get("started_at")?,
            completed_at: row.try_get("completed_at")?,
            updated_at: row.try_get("updated_at")?,
            revision: row.try_get("revision")?,
        })
    }
}

/// What counting a new scan against the tier's limit gave.
#[derive(Debug)]
pub enum Counted {
    /// The scan counted and its `queued` row was inserted.
    Created(Box<ScanRow>),
    /// The period's scans are used up: nothing was inserted.
    LimitReached { tier_slug: String, limit: i32 },
}

/// Counts a scan against the user's tier limit for the period and inserts
/// its `queued` row, in one transaction (the usage upsert only increments
/// below the limit, so concurrent creates cannot overshoot it). `NotFound`
/// when the target is not the user's or was deleted meanwhile (or the
/// schedule was).
///
/// Four round trips: `BEGIN`; the lapsed subscription settled and the tier
/// and billing period read as that left them, two statements sent together
/// (Postgres runs them in order); the count and the insert in one
/// statement ([`COUNT_AND_INSERT`]); `COMMIT`. On a loaded machine every
/// round trip is a wait for the api and for Postgres to be scheduled, so
/// the count matters more than the statements' own work.
pub async fn insert_counted(
    db: &mut deadpool_postgres::Client,
    user_id: Uuid,
    target_id: Uuid,
    engine: Engine,
    schedule_id: Option<Uuid>,
) -> Result<Counted, Error> {
    let tx = db.transaction().await?;
    // Both prepared first (once a connection), so that each query is sent
    // on its future's first poll, in this order.
    let settle = tx.prepare_cached(subscriptions::SETTLE_LAPSED).await?;
    let read_tier = tx
        .prepare_cached(
            "SELECT t.slug, t.scan_limit, sub.current_period_start, sub.current_period_end
             FROM users u JOIN tiers t ON t.slug = u.tier_slug
                  LEFT JOIN subscriptions sub ON sub.user_id = u.id
             WHERE u.id = $1",
        )
        .await?;
    let user: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&user_id];
    let (_, tier) = tokio::try_join!(
        tx.query_opt(&settle, &user),
        tx.query_one(&read_tier, &user)
    )?;
    let tier_slug: String = tier.try_get("slug")?;
    let scan_limit: Option<i32> = tier.try_get("scan_limit")?;
    let limit_reached = || Counted::LimitReached {
        tier_slug: tier_slug.clone(),
        limit: scan_limit.unwrap_or(0),
    };
    if scan_limit.is_some_and(|limit| limit <= 0) {
        return Ok(limit_reached());
    }
    let start: Option<DateTime<Utc>> = tier.try_get("current_period_start")?;
    let end: Option<DateTime<Utc>> = tier.try_get("current_period_end")?;
    let (period_start, _) = subscriptions::period_of(&tier_slug, start.zip(end), Utc::now());
    let row = tx
        .query_one(
            &tx.prepare_cached(&COUNT_AND_INSERT).await?,
            &[
                &Uuid::now_v7(),
                &user_id,
                &target_id,
                &schedule_id,
                &engine,
                &period_start,
                &scan_limit,
            ],
        )
        .await
        .map_err(deleted_meanwhile)?;
    if !row.try_get::<_, bool>("target_found")? {
        return Err(Error::NotFound("target"));
    }
    if row.try_get::<_, Option<Uuid>>("id")?.is_none() {
        // Nothing was counted or inserted; the transaction rolls back.
        return Ok(limit_reached());
    }
    tx.commit().await?;
    Ok(Counted::Created(Box::new(ScanRow::try_from(&row)?)))
}

/// The scan counted in the period's usage (`$6`; only below the limit `$7`
/// when there is one; unlimited tiers are counted too, for usage reports)
/// and its row inserted when it was, both only when the target (`$3`) is
/// the user's (`$2`). One row always: `target_found`, then the scan's
/// columns, all null when nothing was inserted (the limit reached).
static COUNT_AND_INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH target AS (SELECT id FROM targets WHERE id = $3 AND user_id = $2),
         counted AS (
             INSERT INTO scan_usage (user_id, period_start, scans)
             SELECT $2::uuid, $6::timestamptz, 1 FROM target
             ON CONFLICT (user_id, period_start) DO UPDATE
             SET scans = scan_usage.scans + 1
             WHERE $7::int IS NULL OR scan_usage.scans < $7
             RETURNING scans),
         s AS (
             INSERT INTO scans (id, user_id, target_id, schedule_id, engine)
             SELECT $1::uuid, $2::uuid, target.id, $4::uuid, $5::text FROM target, counted
             RETURNING *)
         SELECT EXISTS (SELECT 1 FROM target) AS target_found, {COLUMNS}
         FROM (VALUES (1)) one
              LEFT JOIN (s JOIN targets t ON t.id = s.target_id) ON true"
    )
});

/// A foreign key violation on insert: the target (or schedule) was deleted
/// since it was checked.
fn deleted_meanwhile(e: tokio_postgres::Error) -> Error {
    if e.code() != Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION) {
        return e.into();
    }
    let constraint = e.as_db_error().and_then(|d| d.constraint()).unwrap_or("");
    if constraint.contains("schedule") {
        Error::NotFound("schedule")
    } else {
        Error::NotFound("target")
    }
}

/// Marks a scan whose job never reached the queue as failed.
pub async fn fail_unqueued(
    db: &impl GenericClient,
    scan_id: Uuid,
    error: &str,
) -> Result<(), Error> {
    db.execute(
        "UPDATE scans SET status = 'failed', error = $2, completed_at = now(), updated_at = now()
         WHERE id = $1 AND status = 'queued'",
        &[&scan_id, &error],
    )
    .await?;
    Ok(())
}

/// Filters of the scan list.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanFilter {
    pub target_id: Option<Uuid>,
    pub status: Option<ScanStatus>,
}

/// The user's scans, newest first, with the total count.
/// A page of the user's scans and their total: both statements prepared
/// once per connection and sent together, so one round trip.
pub async fn list(
    db: &deadpool_postgres::Client,
    user_id: Uuid,
    filter: ScanFilter,
    page: Page,
) -> Result<(Vec<ScanRow>, i64), Error> {
    // One statement: the page and the total, each with its own plan (the
    // count reads only the index). A page past the end is one row of NULLs
    // carrying the total.
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH page AS (
                 SELECT {COLUMNS} FROM scans s JOIN targets t ON t.id = s.target_id
                 WHERE s.user_id = $1 AND ($2::uuid IS NULL OR s.target_id = $2)
                   AND ($3::text IS NULL OR s.status = $3)
                 ORDER BY s.created_at DESC, s.id DESC LIMIT $4 OFFSET $5),
             total AS (
                 SELECT count(*) AS total FROM scans s WHERE s.user_id = $1
                   AND ($2::uuid IS NULL OR s.target_id = $2)
                   AND ($3::text IS NULL OR s.status = $3))
             SELECT page.*, total.total FROM total LEFT JOIN page ON true
             ORDER BY page.created_at DESC, page.id DESC"
        )
    });
    let stmt = db.prepare_cached(&SQL).await?;
    let rows = db
        .query(
            &stmt,
            &[
                &user_id,
                &filter.target_id,
                &filter.status,
                &page.limit,
                &page.offset,
            ],
        )
        .await?;
    let total: i64 = rows.first().map_or(Ok(0), |r| r.try_get("total"))?;
    let mut list = Vec::with_capacity(rows.len());
    for row in &rows {
        if row.try_get::<_, Option<Uuid>>("id")?.is_some() {
            list.push(ScanRow::try_from(row)?);
        }
    }
    Ok((list, total))
}

/// The revision of one of the user's scans (one index lookup), `None` when
/// the user has no such scan.
pub async fn revision(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    scan_id: Uuid,
) -> Result<Option<i64>, Error> {
    let stmt = db
        .prepare_cached("SELECT revision FROM scans WHERE id = $1 AND user_id = $2")
        .await?;
    let row = db.query_opt(&stmt, &[&scan_id, &user_id]).await?;
    row.map(|r| r.try_get("revision"))
        .transpose()
        .map_err(Error::from)
}

/// One of the user's scans.
pub async fn find(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    scan_id: Uuid,
) -> Result<Option<ScanRow>, Error> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT {COLUMNS} FROM scans s JOIN targets t ON t.id = s.target_id
             WHERE s.id = $1 AND s.user_id = $2"
        )
    });
    let stmt = db.prepare_cached(&SQL).await?;
    let row = db.query_opt(&stmt, &[&scan_id, &user_id]).await?;
    row.as_ref().map(ScanRow::try_from).transpose()
}

/// Any scan, by id (for the ingester and the scheduler).
pub async fn find_any(db: &impl GenericClient, scan_id: Uuid) -> Result<Option<ScanRow>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM scans s JOIN targets t ON t.id = s.target_id WHERE s.id = $1"
            ),
            &[&scan_id],
        )
        .await?;
    row.as_ref().map(ScanRow::try_from).transpose()
}

/// Marks one of the user's unfinished scans stopped; `None` when it was
/// not unfinished any more.
pub async fn mark_stopped(
    db: &impl GenericClient,
    user_id: Uuid,
    scan_id: Uuid,
) -> Result<Option<ScanRow>, Error> {
    let row = db
        .query_opt(
            &format!(
                "WITH s AS (
                     UPDATE scans SET status = 'stopped', completed_at = now(), updated_at = now()
                     WHERE id = $1 AND user_id = $2 AND status IN ('queued', 'pending', 'running')
                     RETURNING *)
                 SELECT {COLUMNS} FROM s JOIN targets t ON t.id = s.target_id"
            ),
            &[&scan_id, &user_id],
        )
        .await?;
    row.as_ref().map(ScanRow::try_from).transpose()
}

/// Ids of a target's queued, pending and running scans.
pub async fn active_ids_of_target(
    db: &impl GenericClient,
    target_id: Uuid,
) -> Result<Vec<Uuid>, Error> {
    let rows = db
        .query(
            "SELECT id FROM scans WHERE target_id = $1
               AND status IN ('queued', 'pending', 'running')",
            &[&target_id],
        )
        .await?;
    rows.iter()
        .map(|r| r.try_get("id").map_err(Error::from))
        .collect()
}

/// Moves a scan to `next` when [`ScanStatus::can_move_to`] allows it (only
/// forward, never out of a terminal status), stamping `started_at` when a
/// node takes it, `completed_at` on a terminal status and progress 100 on
/// completion. Returns whether the status changed; a replayed or late event
/// changes nothing.
pub async fn set_scan_status(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    next: ScanStatus,
    error: Option<&str>,
) -> Result<bool, Error> {
    let Some(row) = db
        .query_opt(
            &db.prepare_cached("SELECT status FROM scans WHERE id = $1 FOR UPDATE")
                .await?,
            &[&scan_id],
        )
        .await?
    else {
        return Ok(false);
    };
    let current: ScanStatus = row.try_get("status")?;
    if !current.can_move_to(next) {
        return Ok(false);
    }
    let starts = matches!(next, ScanStatus::Pending | ScanStatus::Running);
    let n = db
        .execute(
            &db.prepare_cached(
                "UPDATE scans SET status = $2,
                        error = COALESCE($3, error),
                        started_at = CASE WHEN $4 THEN COALESCE(started_at, now()) ELSE started_at END,
                        completed_at = CASE WHEN $5 THEN now() ELSE completed_at END,
                        progress = CASE WHEN $6 THEN 100 ELSE progress END,
                        updated_at = now()
                 WHERE id = $1",
            )
            .await?,
            &[
                &scan_id,
                &next,
                &error,
                &starts,
                &next.is_terminal(),
                &(next == ScanStatus::Completed),
            ],
        )
        .await?;
    Ok(n == 1)
}

/// Where the ingester stands in a scan's event stream, read with the scan's
/// row locked, so that two ingesters never apply the same scan's events at
/// once and each starts where the last commit left off.
#[derive(Debug, Clone)]
pub struct IngestPosition {
    pub user_id: Uuid,
    /// Last stream entry id applied (`0-0` before the first).
    pub cursor: String,
    /// The terminal event was applied; later entries are ignored.
    pub closed: bool,
    /// The scan's status as the lock found it.
    pub status: ScanStatus,
}

impl IngestPosition {
    /// `started` when the status the lock read may move to it (only
    /// forward, as [`set_scan_status`] moves it).
    pub fn may_start(&self, started: Option<ScanStatus>) -> Option<ScanStatus> {
        started.filter(|s| self.status.can_move_to(*s))
    }
}

/// Locks the scan's row for the rest of the transaction; `None` when the
/// scan no longer exists (its target or owner was deleted).
pub async fn lock_for_ingest(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<Option<IngestPosition>, Error> {
    let row = db
        .query_opt(
            &db.prepare_cached(
                "SELECT user_id, events_cursor, events_closed, status FROM scans
                 WHERE id = $1 FOR UPDATE",
            )
            .await?,
            &[&scan_id],
        )
        .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    Ok(Some(IngestPosition {
        user_id: r.try_get("user_id")?,
        cursor: r.try_get("events_cursor")?,
        closed: r.try_get("events_closed")?,
        status: r.try_get("status")?,
    }))
}

/// A scan's stage, progress (0 to 100) and current tool, as its last
/// progress event of a round gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub stage: String,
    pub progress: i16,
    pub current_tool: Option<String>,
}

/// What a scan's notifications say about it: owner, domain, and finding
/// counts (total, critical, high, medium, low, info).
#[derive(Debug, Clone)]
pub struct ScanFacts {
    pub user_id: Uuid,
    pub domain: String,
    pub counts: [i32; 6],
}

impl ScanFacts {
    fn read(r: &Row) -> Result<ScanFacts, Error> {
        Ok(ScanFacts {
            user_id: r.try_get("user_id")?,
            domain: r.try_get("domain")?,
            counts: [
                r.try_get("findings_count")?,
                r.try_get("critical_count")?,
                r.try_get("high_count")?,
                r.try_get("medium_count")?,
                r.try_get("low_count")?,
                r.try_get("info_count")?,
            ],
        })
    }
}

/// A scan's [`ScanFacts`]; `None` when it does not exist.
pub async fn facts(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<Option<ScanFacts>, Error> {
    let stmt = db
        .prepare_cached(
            "SELECT s.user_id, t.domain, s.findings_count, s.critical_count, s.high_count,
                    s.medium_count, s.low_count, s.info_count
             FROM scans s JOIN targets t ON t.id = s.target_id WHERE s.id = $1",
        )
        .await?;
    let row = db.query_opt(&stmt, &[&scan_id]).await?;
    row.as_ref().map(ScanFacts::read).transpose()
}

/// What an ingest round writes to its scan's row, in one statement (one
/// row version of the scan a round, and no second read of the row the
/// round has locked).
#[derive(Debug, Default)]
pub struct Round<'a> {
    /// The last stream entry applied.
    pub cursor: &'a str,
    /// The terminal event was applied.
    pub closed: bool,
    /// The stage and tool, and the progress (which never goes down, and
    /// stays under 100 until completion), written only while the scan has
    /// not finished.
    pub progress: Option<&'a Progress>,
    /// A status that starts the scan, stamping `started_at` as
    /// [`set_scan_status`] would; the caller checked it against the status
    /// [`lock_for_ingest`] read.
    pub started: Option<ScanStatus>,
    /// The terminal status and its error, as [`set_scan_status`] would
    /// apply them (`completed_at`, progress 100 on completion); the caller
    /// checked that the status (moved by `started`) can move to it.
    pub ended: Option<(ScanStatus, Option<&'a str>)>,
}

/// Saves an ingest round (see [`Round`]); also marks the scan as heard
/// from now. Answers the scan's [`ScanFacts`] as the round leaves them
/// when it ended the scan.
pub async fn save_ingest_position(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    round: &Round<'_>,
) -> Result<Option<ScanFacts>, Error> {
    debug_assert!(round.started.is_none_or(|s| !s.is_terminal()));
    debug_assert!(round.ended.is_none_or(|(s, _)| s.is_terminal()));
    let (ended, error) = round.ended.unzip();
    let row = db
        .query_opt(
            &db.prepare_cached(
                "UPDATE scans SET events_cursor = $2, events_closed = events_closed OR $3,
                        status = COALESCE($8, $7, status),
                        error = CASE WHEN $8::text IS NOT NULL THEN COALESCE($9, error)
                                     ELSE error END,
                        started_at = CASE WHEN $7::text IS NOT NULL
                                          THEN COALESCE(started_at, now()) ELSE started_at END,
                        completed_at = CASE WHEN $8::text IS NOT NULL THEN now()
                                            ELSE completed_at END,
                        stage = CASE WHEN $4::text IS NOT NULL
                                          AND status IN ('queued', 'pending', 'running')
                                     THEN $4 ELSE stage END,
                        current_tool = CASE WHEN $4::text IS NOT NULL
                                                 AND status IN ('queued', 'pending', 'running')
                                            THEN COALESCE($6, current_tool) ELSE current_tool END,
                        progress = CASE WHEN $8::text = 'completed' THEN 100
                                        WHEN $4::text IS NOT NULL
                                             AND status IN ('queued', 'pending', 'running')
                                        THEN GREATEST(progress, LEAST($5::smallint, 99))
                                        ELSE progress END,
                        updated_at = now()
                 WHERE id = $1
                 RETURNING user_id, findings_count, critical_count, high_count, medium_count,
                           low_count, info_count,
                           CASE WHEN $8::text IS NOT NULL
                                THEN (SELECT domain FROM targets WHERE id = scans.target_id)
                           END AS domain",
            )
            .await?,
            &[
                &scan_id,
                &round.cursor,
                &round.closed,
                &round.progress.map(|p| p.stage.as_str()),
                &round.progress.map(|p| p.progress),
                &round.progress.and_then(|p| p.current_tool.as_deref()),
                &round.started,
                &ended,
                &error.flatten(),
            ],
        )
        .await?;
    match row {
        Some(row) if ended.is_some() => Ok(Some(ScanFacts::read(&row)?)),
        _ => Ok(None),
    }
}

/// A scan the reaper looks at.
#[derive(Debug, Clone)]
pub struct StaleScan {
    pub id: Uuid,
    pub target_id: Uuid,
    pub domain: String,
    pub engine: Engine,
    pub status: ScanStatus,
    pub requeued: i16,
    /// A retest's one template (its `domain` is then the finding's host).
    pub retest_template: Option<String>,
    /// The target's per-host request-rate ceiling, when it sets one.
    pub max_rps_per_host: Option<u32>,
}

/// `pending` and `running` scans not heard from for `silent_secs`, and
/// `queued` scans created more than `queued_secs` ago.
pub async fn stale_scans(
    db: &impl GenericClient,
    silent_secs: i64,
    queued_secs: i64,
) -> Result<Vec<StaleScan>, Error> {
    let rows = db
        .query(
            "SELECT s.id, s.target_id, COALESCE(rf.host, t.domain) AS domain, s.engine,
                    s.status, s.requeued, rf.template_id AS retest_template,
                    t.max_rps_per_host
             FROM scans s JOIN targets t ON t.id = s.target_id
             LEFT JOIN fingerprints rf ON rf.id = s.retest_of
             WHERE (s.status IN ('pending', 'running')
                    AND s.updated_at < now() - make_interval(secs => $1))
                OR (s.status = 'queued' AND s.updated_at < now() - make_interval(secs => $2))
             ORDER BY s.updated_at LIMIT 500",
            &[&(silent_secs as f64), &(queued_secs as f64)],
        )
        .await?;
    rows.iter().map(StaleScan::try_from).collect()
}

/// Every `queued` scan, oldest first: their jobs are pushed again after
/// Redis lost its data.
pub async fn queued_scans(db: &impl GenericClient) -> Result<Vec<StaleScan>, Error> {
    let rows = db
        .query(
            "SELECT s.id, s.target_id, COALESCE(rf.host, t.domain) AS domain, s.engine,
                    s.status, s.requeued, rf.template_id AS retest_template,
                    t.max_rps_per_host
             FROM scans s JOIN targets t ON t.id = s.target_id
             LEFT JOIN fingerprints rf ON rf.id = s.retest_of
             WHERE s.status = 'queued' ORDER BY s.created_at",
            &[],
        )
        .await?;
    rows.iter().map(StaleScan::try_from).collect()
}

impl TryFrom<&Row> for StaleScan {
    type Error = Error;

    fn try_from(r: &Row) -> Result<StaleScan, Error> {
        Ok(StaleScan {
            id: r.try_get("id")?,
            target_id: r.try_get("target_id")?,
            domain: r.try_get("domain")?,
            engine: r.try_get("engine")?,
            status: r.try_get("status")?,
            requeued: r.try_get("requeued")?,
            retest_template: r.try_get("retest_template")?,
            max_rps_per_host: r
                .try_get::<_, Option<i32>>("max_rps_per_host")?
                .and_then(|v| u32::try_from(v).ok()),
        })
    }
}

impl StaleScan {
    /// The job that runs the scan.
    pub fn job(&self) -> ScanJob {
        ScanJob {
            scan_id: self.id,
            target_id: self.target_id,
            domain: self.domain.clone(),
            engine: self.engine,
            templates: self.retest_template.iter().cloned().collect(),
            max_rps_per_host: self.max_rps_per_host,
        }
    }
}

/// Counts a re-enqueue of a queued scan and restarts its clock; false when
/// the scan is no longer queued or was re-enqueued already.
pub async fn mark_requeued(db: &impl GenericClient, scan_id: Uuid) -> Result<bool, Error> {
    let n = db
        .execute(
            "UPDATE scans SET requeued = requeued + 1, updated_at = now()
             WHERE id = $1 AND status = 'queued' AND requeued = 0",
            &[&scan_id],
        )
        .await?;
    Ok(n == 1)
}
