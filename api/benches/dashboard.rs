//! Dashboard latency on a large account: seeds 100,000 scans and 1,000,000
//! findings for one user in a fresh database on the server of DATABASE_URL,
//! then times the summary and charts queries. Prints figures; run with
//! `cargo bench -p scanfleet-api --bench dashboard`.
//!
//! Scans are spread over the last 365 days (so about 8,200 fall in the
//! charts' 30-day window), one in 50 still running, each with 10 findings.

// Tests may unwrap: a panic there is the failure report.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use scanfleet_core::store::{self, dashboard, migrate};
use uuid::Uuid;

const SCANS: i64 = 100_000;
const FINDINGS_PER_SCAN: i64 = 10;
const ROUNDS: usize = 200;

fn server_url(db: &str) -> String {
    let base = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (head, _) = base.split_once('?').unwrap_or((&base, ""));
    let cut = head
        .rfind('/')
        .filter(|&i| i > head.find("://").map_or(0, |j| j + 2))
        .unwrap_or(head.len());
    format!("{}/{db}", &head[..cut])
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{name:<18} rounds={} mean={:.2} ms p50={:.2} ms p95={:.2} ms max={:.2} ms",
        samples.len(),
        mean.as_secs_f64() * 1e3,
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.95).as_secs_f64() * 1e3,
        pct(1.0).as_secs_f64() * 1e3,
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let name = format!("scanfleet_bench_{}", Uuid::new_v4().simple());
    let (admin, conn) =
        tokio_postgres::connect(&server_url("postgres"), tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await?;

    let result = run(&server_url(&name)).await;
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await?;
    result
}

async fn run(url: &str) -> anyhow::Result<()> {
    let pool = store::connect(url)?;
    migrate::run(&pool).await?;
    let db = pool.get().await?;
    let user = Uuid::now_v7();
    seed(&db, user).await?;
    measure(&db, user).await
}

/// One user with 100 targets, `SCANS` scans and their findings.
async fn seed(db: &deadpool_postgres::Object, user: Uuid) -> anyhow::Result<()> {
    let started = Instant::now();
    db.execute(
        "INSERT INTO users (id, email, password_hash) VALUES ($1, 'bench@example.com', 'x')",
        &[&user],
    )
    .await?;
    db.execute(
        "INSERT INTO targets (id, user_id, domain)
         SELECT gen_random_uuid(), $1, 't' || i || '.example.com' FROM generate_series(1, 100) i",
        &[&user],
    )
    .await?;
    db.execute(
        "INSERT INTO scans (id, user_id, target_id, engine, status, progress, findings_count,
                            critical_count, high_count, medium_count, low_count, info_count,
                            created_at, started_at, completed_at)
         SELECT gen_random_uuid(), $1, t.id, 'full',
                CASE WHEN i % 50 = 0 THEN 'running' ELSE 'completed' END,
                CASE WHEN i % 50 = 0 THEN 40 ELSE 100 END,
                $2, 1, 2, 3, 2, 2,
                now() - (i % 365) * interval '1 day' - (i % 1440) * interval '1 minute',
                now() - (i % 365) * interval '1 day' - (i % 1440) * interval '1 minute',
                CASE WHEN i % 50 = 0 THEN NULL
                     ELSE now() - (i % 365) * interval '1 day' - (i % 1440) * interval '1 minute' + interval '3 minutes' END
         FROM generate_series(1, $3::bigint) i
         JOIN (SELECT id, row_number() OVER () - 1 AS n FROM targets) t ON t.n = i % 100",
        &[&user, &(FINDINGS_PER_SCAN as i32), &SCANS],
    )
    .await?;
    db.execute(
        "INSERT INTO findings (id, scan_id, user_id, template_id, name, severity, host, matched_at, dedup_key)
         SELECT gen_random_uuid(), s.id, s.user_id, 'tpl-' || g, 'Finding ' || g,
                (ARRAY['critical','high','high','medium','medium','medium','low','low','info','info'])[g],
                'www.example.com', 'https://www.example.com/p' || g,
                'tpl-' || g || ':https://www.example.com/p' || g
         FROM scans s CROSS JOIN generate_series(1, $1::int) g",
        &[&(FINDINGS_PER_SCAN as i32)],
    )
    .await?;
    db.batch_execute("ANALYZE").await?;
    let counts = db
        .query_one(
            "SELECT (SELECT count(*) FROM scans) AS scans,
                    (SELECT count(*) FROM findings) AS findings",
            &[],
        )
        .await?;
    let scans: i64 = counts.try_get("scans")?;
    let findings: i64 = counts.try_get("findings")?;
    println!(
        "seeded {scans} scans and {findings} findings for one user in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `ROUNDS` reads of the summary and the charts, after one to warm up.
async fn measure(db: &deadpool_postgres::Object, user: Uuid) -> anyhow::Result<()> {
    // Warm the cache once, as a live service would be.
    dashboard::summary(db, user).await?;
    dashboard::charts(&***db, user).await?;

    let mut summary = Vec::with_capacity(ROUNDS);
    let mut charts = Vec::with_capacity(ROUNDS);
    let mut last = None;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let s = dashboard::summary(db, user).await?;
        summary.push(t.elapsed());
        let t = Instant::now();
        let c = dashboard::charts(&***db, user).await?;
        charts.push(t.elapsed());
        last = Some((s, c));
    }
    if let Some((s, c)) = last {
        assert_eq!(s.total_scans, SCANS);
        assert_eq!(s.recent_scans.len(), 5);
        println!(
            "summary: total_scans={} active_scans={} total_vulnerabilities={}; charts: {} days",
            s.total_scans,
            s.active_scans,
            s.total_vulnerabilities,
            c.len()
        );
    }
    report("dashboard summary", summary);
    report("dashboard charts", charts);
    Ok(())
}
