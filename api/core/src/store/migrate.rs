//! Forward-only migrations: SQL files under `api/migrations`, compiled into
//! the binary, applied in order at start-up inside one transaction each.
//! An advisory lock serialises concurrent starts of several api processes.

use deadpool_postgres::Pool;

use crate::error::Error;

/// (version, name, sql), in order. Add new files at the end; never edit one
/// that has been released.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "init", include_str!("../../migrations/0001_init.sql")),
    (
        4,
        "dashboard_rollups",
        include_str!("../../migrations/0004_dashboard_rollups.sql"),
    ),
    (
        6,
        "scan_pipeline",
        include_str!("../../migrations/0006_scan_pipeline.sql"),
    ),
    (
        10,
        "payments",
        include_str!("../../migrations/0010_payments.sql"),
    ),
    (
        11,
        "target_verification",
        include_str!("../../migrations/0011_target_verification.sql"),
    ),
    (
        12,
        "auth_cache",
        include_str!("../../migrations/0012_auth_cache.sql"),
    ),
    (
        13,
        "scan_revision",
        include_str!("../../migrations/0013_scan_revision.sql"),
    ),
    (
        14,
        "finding_fingerprints",
        include_str!("../../migrations/0014_finding_fingerprints.sql"),
    ),
    (
        27,
        "webhooks",
        include_str!("../../migrations/0027_webhooks.sql"),
    ),
    (
        28,
        "fingerprint_counts",
        include_str!("../../migrations/0028_fingerprint_counts.sql"),
    ),
    (
        29,
        "console_sessions",
        include_str!("../../migrations/0029_console_sessions.sql"),
    ),
    (
        30,
        "finding_status_history",
        include_str!("../../migrations/0030_finding_status_history.sql"),
    ),
    (
        31,
        "finding_evidence",
        include_str!("../../migrations/0031_finding_evidence.sql"),
    ),
    (
        32,
        "fingerprint_write_path",
        include_str!("../../migrations/0032_fingerprint_write_path.sql"),
    ),
    (
        35,
        "auto_engine",
        include_str!("../../migrations/0035_auto_engine.sql"),
    ),
    (
        36,
        "fingerprint_counts_by_change",
        include_str!("../../migrations/0036_fingerprint_counts_by_change.sql"),
    ),
    (
        37,
        "fingerprint_search",
        include_str!("../../migrations/0037_fingerprint_search.sql"),
    ),
    (
        38,
        "fingerprint_search_by_target",
        include_str!("../../migrations/0038_fingerprint_search_by_target.sql"),
    ),
    (
        39,
        "tier_rps_per_host",
        include_str!("../../migrations/0039_tier_rps_per_host.sql"),
    ),
    (
        40,
        "scan_worst_findings",
        include_str!("../../migrations/0040_scan_worst_findings.sql"),
    ),
    (
        41,
        "scan_rollup_on_change",
        include_str!("../../migrations/0041_scan_rollup_on_change.sql"),
    ),
    (
        42,
        "drop_webhook_severity_rank",
        include_str!("../../migrations/0042_drop_webhook_severity_rank.sql"),
    ),
    (
        43,
        "fingerprint_sightings_hot",
        include_str!("../../migrations/0043_fingerprint_sightings_hot.sql"),
    ),
    (
        44,
        "finding_keys_per_statement",
        include_str!("../../migrations/0044_finding_keys_per_statement.sql"),
    ),
    (
        45,
        "scan_rollup_deltas",
        include_str!("../../migrations/0045_scan_rollup_deltas.sql"),
    ),
    (
        46,
        "page_fixed_costs",
        include_str!("../../migrations/0046_page_fixed_costs.sql"),
    ),
    (
        47,
        "striped_rollups",
        include_str!("../../migrations/0047_striped_rollups.sql"),
    ),
    (
        48,
        "fingerprint_sightings_all_hot",
        include_str!("../../migrations/0048_fingerprint_sightings_all_hot.sql"),
    ),
];

/// Arbitrary constant naming the migration lock.
const MIGRATION_LOCK: i64 = 0x5ca9_f1ee_7001;

pub async fn run(pool: &Pool) -> Result<(), Error> {
    let mut client = pool.get().await?;
    // Lock before touching anything: two processes starting together (the
    // api and the scheduler under `make run`) would otherwise race even on
    // `CREATE TABLE IF NOT EXISTS`, which Postgres does not make atomic.
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let result = create_ledger_and_apply(&mut client).await;
    // Release on every path: the connection goes back to the pool.
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    result?;
    unlocked?;
    Ok(())
}

async fn create_ledger_and_apply(client: &mut deadpool_postgres::Client) -> Result<(), Error> {
    // Created only when missing: `CREATE TABLE IF NOT EXISTS` on every
    // start makes Postgres send a notice ("relation already exists,
    // skipping") that the driver logs at info (issue 37, item 10). Under
    // the lock, nobody creates it between the look and the create.
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('schema_migrations') IS NOT NULL AS exists",
            &[],
        )
        .await?
        .try_get("exists")?;
    if !exists {
        client
            .batch_execute(
                "CREATE TABLE schema_migrations (
                     version integer PRIMARY KEY,
                     name text NOT NULL,
                     applied_at timestamptz NOT NULL DEFAULT now())",
            )
            .await?;
    }
    apply_pending(client).await
}

async fn apply_pending(client: &mut deadpool_postgres::Client) -> Result<(), Error> {
    let applied: Vec<i32> = client
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|r| r.try_get("version"))
        .collect::<Result<_, _>>()?;
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let tx = client.transaction().await?;
        tx.batch_execute(sql)
            .await
            .map_err(|e| anyhow::anyhow!("migration {version} ({name}) failed: {e}"))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(version, name, "applied migration");
    }
    Ok(())
}
