//! Dashboard queries. Totals and per-day figures come from rollup tables kept
//! by a trigger on `scans` (migration 0004), so both queries read a handful of
//! indexed rows whatever the number of scans and findings: 16 stripes a user
//! (migration 0047), added up here.

use chrono::{DateTime, NaiveDate, Utc};
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::Engine;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::error::Error;

#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub total_targets: i64,
    pub total_scans: i64,
    pub active_scans: i64,
    pub total_vulnerabilities: i64,
    pub critical_count: i64,
    pub high_count: i64,
    pub recent_scans: Vec<RecentScan>,
}

#[derive(Debug, Clone)]
pub struct RecentScan {
    pub id: Uuid,
    pub target_domain: String,
    pub engine: Engine,
    pub status: ScanStatus,
    pub progress: i16,
    pub created_at: DateTime<Utc>,
    pub findings_count: i32,
    pub critical_count: i32,
    pub high_count: i32,
    pub medium_count: i32,
    pub low_count: i32,
}

/// How many scans `recent_scans` lists.
pub const RECENT_SCANS: i64 = 5;
/// Days covered by the charts, today included.
pub const CHART_DAYS: i32 = 30;

/// Both statements are prepared once per connection and sent together: one
/// round trip.
pub async fn summary(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
) -> Result<Summary, Error> {
    // One statement: the totals and the recent scans, each with its own
    // plan; without scans it is one row of totals and NULLs.
    const SQL: &str = "WITH totals AS (
             SELECT (SELECT count(*) FROM targets WHERE user_id = $1) AS total_targets,
                    COALESCE(t.scans, 0) AS total_scans,
                    COALESCE(t.findings_count, 0) AS total_vulnerabilities,
                    COALESCE(t.critical_count, 0) AS critical_total,
                    COALESCE(t.high_count, 0) AS high_total,
                    (SELECT count(*) FROM scans
                     WHERE user_id = $1 AND status IN ('pending', 'running')) AS active_scans
             FROM (SELECT sum(scans)::bigint AS scans,
                          sum(findings_count)::bigint AS findings_count,
                          sum(critical_count)::bigint AS critical_count,
                          sum(high_count)::bigint AS high_count
                   FROM user_scan_totals WHERE user_id = $1) t),
         recent AS (
             SELECT s.id AS scan_id, t.domain AS target_domain, s.engine, s.status, s.progress,
                    s.created_at, s.findings_count, s.critical_count, s.high_count,
                    s.medium_count, s.low_count
             FROM scans s JOIN targets t ON t.id = s.target_id
             WHERE s.user_id = $1 ORDER BY s.created_at DESC, s.id DESC LIMIT $2)
         SELECT totals.*, recent.* FROM totals LEFT JOIN recent ON true
         ORDER BY recent.created_at DESC, recent.scan_id DESC";
    let stmt = db.prepare_cached(SQL).await?;
    let rows = db.query(&stmt, &[&user_id, &RECENT_SCANS]).await?;
    let row = rows
        .first()
        .ok_or_else(|| Error::Unexpected(anyhow::anyhow!("the dashboard totals row is missing")))?;
    let mut recent_scans = Vec::with_capacity(rows.len());
    for r in &rows {
        // Without scans the one row has NULLs on the recent side.
        if r.try_get::<_, Option<Uuid>>("scan_id")?.is_some() {
            recent_scans.push(RecentScan::try_from(r)?);
        }
    }
    Ok(Summary {
        total_targets: row.try_get("total_targets")?,
        total_scans: row.try_get("total_scans")?,
        total_vulnerabilities: row.try_get("total_vulnerabilities")?,
        critical_count: row.try_get("critical_total")?,
        high_count: row.try_get("high_total")?,
        active_scans: row.try_get("active_scans")?,
        recent_scans,
    })
}

/// The recent side of a [`summary`] row, read by name.
impl TryFrom<&Row> for RecentScan {
    type Error = Error;

    fn try_from(r: &Row) -> Result<Self, Error> {
        let status: ScanStatus = r.try_get("status")?;
        let progress: i16 = r.try_get("progress")?;
        Ok(RecentScan {
            id: r.try_get("scan_id")?,
            target_domain: r.try_get("target_domain")?,
            engine: r.try_get("engine")?,
            // A completed scan reads 100 whatever its last progress event said.
            progress: if status == ScanStatus::Completed {
                100
            } else {
                progress
            },
            status,
            created_at: r.try_get("created_at")?,
            findings_count: r.try_get("findings_count")?,
            critical_count: r.try_get("critical_count")?,
            high_count: r.try_get("high_count")?,
            medium_count: r.try_get("medium_count")?,
            low_count: r.try_get("low_count")?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartDay {
    pub date: NaiveDate,
    pub scans: i64,
    pub vulnerabilities: i64,
}

/// The last [`CHART_DAYS`] UTC days, oldest first, days without activity omitted.
pub async fn charts(db: &impl GenericClient, user_id: Uuid) -> Result<Vec<ChartDay>, Error> {
    let rows = db
        .query(
            "SELECT day, sum(scans)::bigint AS scans,
                    sum(vulnerabilities)::bigint AS vulnerabilities
             FROM user_daily_activity
             WHERE user_id = $1 AND day > (now() AT TIME ZONE 'UTC')::date - $2::int
             GROUP BY day
             HAVING sum(scans) > 0 OR sum(vulnerabilities) > 0
             ORDER BY day",
            &[&user_id, &CHART_DAYS],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ChartDay {
                date: r.try_get("day")?,
                scans: r.try_get("scans")?,
                vulnerabilities: r.try_get("vulnerabilities")?,
            })
        })
        .collect()
}
