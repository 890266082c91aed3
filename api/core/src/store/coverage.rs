//! What each scan did on each live host (issue 35): technologies found,
//! templates run and skipped by reason, requests sent. Written by the
//! ingester from the nodes' coverage events; a replayed event writes the
//! same row again.

use std::collections::BTreeMap;

use scanfleet_common::events::{CoverageEvent, TechnologyEvent};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::error::Error;

/// One host's coverage as stored.
#[derive(Debug, Clone)]
pub struct CoverageRow {
    pub host: String,
    pub technologies: Vec<TechnologyEvent>,
    pub total: i64,
    pub run: i64,
    pub skipped: BTreeMap<String, i64>,
    pub requests: i64,
}

fn bad_json(what: &str, e: serde_json::Error) -> Error {
    Error::Unexpected(anyhow::anyhow!("scan_host_coverage.{what}: {e}"))
}

impl TryFrom<&Row> for CoverageRow {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        let technologies: serde_json::Value = row.try_get("technologies")?;
        let skipped: serde_json::Value = row.try_get("skipped")?;
        Ok(CoverageRow {
            host: row.try_get("host")?,
            technologies: serde_json::from_value(technologies)
                .map_err(|e| bad_json("technologies", e))?,
            total: row.try_get("total")?,
            run: row.try_get("run")?,
            skipped: serde_json::from_value(skipped).map_err(|e| bad_json("skipped", e))?,
            requests: row.try_get("requests")?,
        })
    }
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Writes the hosts' coverage of `scan_id` (a host reported again replaces
/// its row).
pub async fn save(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
    hosts: &[CoverageEvent],
) -> Result<(), Error> {
    if hosts.is_empty() {
        return Ok(());
    }
    let upsert = db
        .prepare_cached(
            "INSERT INTO scan_host_coverage
                 (scan_id, host, technologies, total, run, skipped, requests)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (scan_id, host) DO UPDATE SET
                 technologies = EXCLUDED.technologies, total = EXCLUDED.total,
                 run = EXCLUDED.run, skipped = EXCLUDED.skipped,
                 requests = EXCLUDED.requests",
        )
        .await?;
    for c in hosts {
        db.execute(
            &upsert,
            &[
                &scan_id,
                &c.host,
                &serde_json::json!(c.technologies),
                &clamp(c.total),
                &clamp(c.run),
                &serde_json::json!(c.skipped),
                &clamp(c.requests),
            ],
        )
        .await?;
    }
    Ok(())
}

/// The coverage of a scan, by host name.
pub async fn of_scan(db: &impl GenericClient, scan_id: Uuid) -> Result<Vec<CoverageRow>, Error> {
    let rows = db
        .query(
            "SELECT host, technologies, total, run, skipped, requests
             FROM scan_host_coverage WHERE scan_id = $1 ORDER BY host",
            &[&scan_id],
        )
        .await?;
    rows.iter().map(CoverageRow::try_from).collect()
}
