//! Dashboard queries. Totals and per-day figures come from rollup tables kept
//! by a trigger on `scans` (migration 0004), so both queries read a handful of
//! indexed rows whatever the number of scans and findings.

use chrono::{DateTime, NaiveDate, Utc};
use tokio_postgres::GenericClient;
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
    pub engine: String,
    pub status: String,
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
             FROM (SELECT 1) one LEFT JOIN user_scan_totals t ON t.user_id = $1),
         recent AS (
             SELECT s.id, t.domain, s.engine, s.status, s.progress, s.created_at,
                    s.findings_count, s.critical_count, s.high_count, s.medium_count,
                    s.low_count
             FROM scans s JOIN targets t ON t.id = s.target_id
             WHERE s.user_id = $1 ORDER BY s.created_at DESC, s.id DESC LIMIT $2)
         SELECT totals.*, recent.* FROM totals LEFT JOIN recent ON true
         ORDER BY recent.created_at DESC, recent.id DESC";
    let stmt = db.prepare_cached(SQL).await?;
    let rows = db.query(&stmt, &[&user_id, &RECENT_SCANS]).await?;
    let row = rows
        .first()
        .ok_or_else(|| Error::Unexpected(anyhow::anyhow!("the dashboard totals row is missing")))?;
    // Columns 0-5 are the totals, 6 onwards a recent scan (R + n).
    const R: usize = 6;
    Ok(Summary {
        total_targets: row.get(0),
        total_scans: row.get(1),
        total_vulnerabilities: row.get(2),
        critical_count: row.get(3),
        high_count: row.get(4),
        active_scans: row.get(5),
        recent_scans: rows
            .iter()
            .filter(|r| r.get::<_, Option<Uuid>>(R).is_some())
            .map(|r| {
                let status: String = r.get(R + 3);
                let progress: i16 = r.get(R + 4);
                RecentScan {
                    id: r.get(R),
                    target_domain: r.get(R + 1),
                    engine: r.get(R + 2),
                    // A completed scan reads 100 whatever its last progress event said.
                    progress: if status == "completed" { 100 } else { progress },
                    status,
                    created_at: r.get(R + 5),
                    findings_count: r.get(R + 6),
                    critical_count: r.get(R + 7),
                    high_count: r.get(R + 8),
                    medium_count: r.get(R + 9),
                    low_count: r.get(R + 10),
                }
            })
            .collect(),
    })
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
            "SELECT day, scans, vulnerabilities FROM user_daily_activity
             WHERE user_id = $1
               AND day > (now() AT TIME ZONE 'UTC')::date - $2::int
               AND (scans > 0 OR vulnerabilities > 0)
             ORDER BY day",
            &[&user_id, &CHART_DAYS],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ChartDay {
            date: r.get(0),
            scans: r.get(1),
            vulnerabilities: r.get(2),
        })
        .collect())
}
