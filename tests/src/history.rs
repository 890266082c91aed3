//! A target with a long history, laid with SQL for benchmarks: the
//! findings list and the console's pages at 100,000 fingerprints.

use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::TestApp;

/// `fingerprints` fingerprints on `target` and `scans` completed scans
/// finding each of them, laid with SQL (fast enough for 100,000 x 10).
/// Returns how long the app's search index (migration 0037) took to hold
/// the fingerprints after they were laid.
pub async fn lay_history(
    app: &TestApp,
    user: Uuid,
    target: Uuid,
    fingerprints: i64,
    scans: i64,
) -> Duration {
    let db = app.state.db.get().await.expect("db");
    db.execute(
        "INSERT INTO fingerprints (id, user_id, target_id, fingerprint, template_id, name,
                                   severity, severity_rank, host, matched_at, status, state,
                                   first_seen_at, last_seen_at, occurrences)
         SELECT gen_random_uuid(), $1, $2, 't' || (i % 300) || ':https://h' || (i % 40)
                    || '.example.com/p/' || i,
                't' || (i % 300), 'Finding ' || i,
                (ARRAY['critical','high','medium','low','info'])[1 + i % 5], (i % 5)::smallint,
                'h' || (i % 40) || '.example.com', 'https://h' || (i % 40) || '.example.com/p/' || i,
                CASE WHEN i % 97 = 0 THEN 'false_positive' ELSE 'open' END,
                CASE WHEN i % 13 = 0 THEN 'fixed' ELSE 'open' END,
                now() - interval '30 days', now() - (i % 1000) * interval '1 minute', $3
         FROM generate_series(1, $4::bigint) AS i",
        &[&user, &target, &(scans as i32), &fingerprints],
    )
    .await
    .expect("fingerprints");
    // The app's indexer moves them into the search index meanwhile.
    let indexed = wait_for_search_index(app, target).await;
    for n in 0..scans {
        let scan = Uuid::now_v7();
        db.execute(
            "INSERT INTO scans (id, user_id, target_id, engine, status, created_at, completed_at,
                                findings_count)
             VALUES ($1, $2, $3, 'full', 'completed', now() - ($4 || ' days')::interval, now(),
                     $5)",
            &[
                &scan,
                &user,
                &target,
                &(scans - n).to_string(),
                &(fingerprints as i32),
            ],
        )
        .await
        .expect("scan");
        db.execute(
            "INSERT INTO findings (id, scan_id, user_id, template_id, name, severity, host,
                                   matched_at, dedup_key, fingerprint_id, change, status)
             SELECT gen_random_uuid(), $1, $2, fp.template_id, fp.name, fp.severity, fp.host,
                    fp.matched_at, fp.fingerprint, fp.id,
                    CASE WHEN $3 = 0 THEN 'new' ELSE 'recurring' END, fp.status
             FROM fingerprints fp WHERE fp.target_id = $4",
            &[&scan, &user, &(n as i32), &target],
        )
        .await
        .expect("findings");
        // What completing the scan counts and keeps
        // (`fingerprints::complete`).
        db.execute(
            "INSERT INTO scan_changes (scan_id, new, recurring, regressed, fixed)
             VALUES ($1, CASE WHEN $2 = 0 THEN $3 ELSE 0 END,
                     CASE WHEN $2 = 0 THEN 0 ELSE $3 END, 0, 0)",
            &[&scan, &(n as i32), &(fingerprints as i32)],
        )
        .await
        .expect("changes");
        scanfleet_core::store::findings::keep_worst(&db, scan)
            .await
            .expect("worst findings");
        db.execute(
            "UPDATE fingerprints SET last_scan_id = $1, first_scan_id = COALESCE(first_scan_id, $1)
             WHERE target_id = $2",
            &[&scan, &target],
        )
        .await
        .expect("last scan");
    }
    // One statement each: VACUUM cannot run in the implicit transaction of
    // a multi-statement batch.
    for table in [
        "fingerprints",
        "findings",
        "fingerprint_search",
        "fingerprint_search_pending",
    ] {
        db.batch_execute(&format!("VACUUM ANALYZE {table}"))
            .await
            .expect("vacuum");
    }
    indexed
}

/// Waits until the app's indexer has moved every pending fingerprint of
/// `target` into the search index (migration 0037); how long that took.
pub async fn wait_for_search_index(app: &TestApp, target: Uuid) -> Duration {
    let db = app.state.db.get().await.expect("db");
    let started = Instant::now();
    loop {
        let pending: i64 = db
            .query_one(
                "SELECT count(*) FROM fingerprint_search_pending WHERE target_id = $1",
                &[&target],
            )
            .await
            .expect("pending")
            .get(0);
        if pending == 0 {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the search index did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
