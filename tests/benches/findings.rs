//! Findings-with-a-memory figures on this machine (issue 26), against the
//! real app in-process and Postgres:
//! - ingest throughput: one scan of 10,000 findings recorded through
//!   `findings::insert_findings` in pages of 1,000 (the ingester's page),
//!   each page in its own transaction; once for a first scan (every
//!   fingerprint new), then a second and a third scan of the same target
//!   (every fingerprint recurring); the same three on a new target with
//!   the fingerprint list index of before migration 0043 (no sighting a
//!   HOT update); and, for comparison, the same pages through the insert
//!   statement the ingester ran before fingerprints (findings only, no
//!   fingerprint upsert); the ceiling of any memory of findings against
//!   it: the same insert plus one row holding only a fingerprint's key
//!   (inserted on a first scan, found on a rescan); and 2,000 pages of one
//!   finding each (the fleet's
//!   small scans write pages of one or two), findings only and with
//!   fingerprints, for what a page costs however few rows it holds;
//! - `GET /targets/{id}/findings` p50/p95 for a target with 100,000
//!   fingerprints and a user with 1,000,000 findings (10 completed scans of
//!   100,000 findings, laid with SQL), over several filters and pages.
//!
//! `cargo bench -p scanfleet-tests --bench findings`
//! (`BENCH_INGEST_ONLY=1` for the ingest figures alone).

use std::time::{Duration, Instant};

use scanfleet_common::events::FindingEvent;
use scanfleet_common::Severity;
use scanfleet_core::fingerprint::{fingerprint_of_normalised, normalise_matched_at, FindingStatus};
use scanfleet_core::store::findings;
use scanfleet_core::store::fingerprints::{self, FingerprintFilter};
use scanfleet_tests::history::wait_for_search_index;
use scanfleet_tests::{spawn_app, TestApp, TestUser};
use uuid::Uuid;

const FINDINGS: usize = 10_000;
const PAGE: usize = 1_000;
/// One-finding pages timed for the fixed cost of a page.
const SMALL_PAGES: usize = 2_000;
const FINGERPRINTS: i64 = 100_000;
const SCANS: i64 = 10;
const REQUESTS_PER_QUERY: usize = 60;

fn finding(i: usize) -> FindingEvent {
    let host = format!("host{:02}.example.com", i % 20);
    let template = format!("template-{:02}", i % 50);
    FindingEvent {
        template_id: template.clone(),
        name: format!("{template} exposure on {host}"),
        severity: Severity::ALL[i % 5],
        host: host.clone(),
        matched_at: format!("https://{host}/path/{i}/resource?id={i}"),
        description: "The response exposes configuration that should not be public.".into(),
        remediation: "Restrict access to the resource.".into(),
        extracted_results: vec![],
        matcher_name: Some("body".into()),
        classification: Default::default(),
        evidence: None,
    }
}

async fn new_scan(app: &TestApp, user: Uuid, target: Uuid) -> Uuid {
    let db = app.state.db.get().await.expect("db");
    let id = Uuid::now_v7();
    db.execute(
        "INSERT INTO scans (id, user_id, target_id, engine, status) VALUES ($1, $2, $3, 'full', 'running')",
        &[&id, &user, &target],
    )
    .await
    .expect("scan");
    id
}

/// Findings a second through `insert_findings`, in pages of `PAGE`.
async fn ingest(app: &TestApp, user: Uuid, scan: Uuid, events: &[FindingEvent]) -> f64 {
    ingest_in_pages(app, user, scan, events, PAGE).await
}

/// Findings a second through `insert_findings`, in pages of `page`.
async fn ingest_in_pages(
    app: &TestApp,
    user: Uuid,
    scan: Uuid,
    events: &[FindingEvent],
    page: usize,
) -> f64 {
    let mut db = app.state.db.get().await.expect("db");
    let started = Instant::now();
    for page in events.chunks(page) {
        let tx = db.transaction().await.expect("tx");
        let n = findings::insert_findings(&tx, scan, user, page)
            .await
            .expect("insert");
        assert_eq!(n as usize, page.len());
        tx.commit().await.expect("commit");
    }
    events.len() as f64 / started.elapsed().as_secs_f64()
}

/// Findings a second through the insert the ingester ran before issue 26
/// (no fingerprint, no change), with the same counter update.
async fn ingest_without_fingerprints(
    app: &TestApp,
    user: Uuid,
    scan: Uuid,
    events: &[FindingEvent],
    page: usize,
) -> f64 {
    ingest_findings_only(app, user, scan, events, page, None).await
}

/// The table behind [`ingest_with_least_fingerprint`]: a fingerprint's key
/// and nothing else.
const LEAST_FINGERPRINTS: &str = "CREATE TABLE IF NOT EXISTS bench_fingerprint_keys (
    target_id uuid NOT NULL,
    fingerprint text COLLATE \"C\" NOT NULL,
    PRIMARY KEY (target_id, fingerprint))";

/// The ceiling of what any memory of findings can reach against
/// [`ingest_without_fingerprints`]: the same statements, plus the least
/// that remembering a finding across scans writes, one row holding only its
/// fingerprint's key on target `target` (inserted when new, found by its
/// key when recurring), in the same transaction. No state, no index but
/// the key, no trigger, no count.
async fn ingest_with_least_fingerprint(
    app: &TestApp,
    user: Uuid,
    target: Uuid,
    scan: Uuid,
    events: &[FindingEvent],
) -> f64 {
    ingest_findings_only(app, user, scan, events, PAGE, Some(target)).await
}

/// [`ingest_without_fingerprints`], also writing each finding's key row of
/// [`ingest_with_least_fingerprint`] when `keys_on` names a target.
async fn ingest_findings_only(
    app: &TestApp,
    user: Uuid,
    scan: Uuid,
    events: &[FindingEvent],
    page: usize,
    keys_on: Option<Uuid>,
) -> f64 {
    let mut db = app.state.db.get().await.expect("db");
    let started = Instant::now();
    for page in events.chunks(page) {
        let tx = db.transaction().await.expect("tx");
        let ids: Vec<Uuid> = page.iter().map(|_| Uuid::now_v7()).collect();
        let col = |f: fn(&FindingEvent) -> String| page.iter().map(f).collect::<Vec<String>>();
        let extracted: Vec<serde_json::Value> = page
            .iter()
            .map(|f| serde_json::json!(f.extracted_results))
            .collect();
        let matchers: Vec<Option<String>> = page.iter().map(|f| f.matcher_name.clone()).collect();
        let rows = tx
            .query(
                "INSERT INTO findings (id, scan_id, user_id, template_id, name, severity, host,
                                       matched_at, description, remediation, matcher_name,
                                       extracted_results, dedup_key)
                 SELECT n.id, $1, $2, n.template_id, n.name, n.severity, n.host, n.matched_at,
                        n.description, n.remediation, n.matcher_name, n.extracted, n.dedup_key
                 FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                             $8::text[], $9::text[], $10::text[], $11::text[], $12::jsonb[],
                             $13::text[])
                      WITH ORDINALITY AS n(id, template_id, name, severity, host, matched_at,
                                           description, remediation, matcher_name, extracted,
                                           dedup_key, ord)
                 ORDER BY n.ord
                 ON CONFLICT (scan_id, dedup_key) DO NOTHING
                 RETURNING severity",
                &[
                    &scan,
                    &user,
                    &ids,
                    &col(|f| f.template_id.clone()),
                    &col(|f| f.name.clone()),
                    &col(|f| f.severity.as_str().to_string()),
                    &col(|f| f.host.clone()),
                    &col(|f| f.matched_at.clone()),
                    &col(|f| f.description.clone()),
                    &col(|f| f.remediation.clone()),
                    &matchers,
                    &extracted,
                    &col(FindingEvent::dedup_key),
                ],
            )
            .await
            .expect("insert");
        let total = rows.len() as i32;
        tx.execute(
            "UPDATE scans SET findings_count = findings_count + $2, updated_at = now()
             WHERE id = $1",
            &[&scan, &total],
        )
        .await
        .expect("counters");
        if let Some(target) = keys_on {
            let keys: Vec<String> = page
                .iter()
                .map(|f| {
                    fingerprint_of_normalised(&f.template_id, &normalise_matched_at(&f.matched_at))
                })
                .collect();
            tx.execute(
                "INSERT INTO bench_fingerprint_keys (target_id, fingerprint)
                 SELECT $1, k FROM unnest($2::text[]) AS k
                 ON CONFLICT DO NOTHING",
                &[&target, &keys],
            )
            .await
            .expect("keys");
        }
        tx.commit().await.expect("commit");
    }
    events.len() as f64 / started.elapsed().as_secs_f64()
}

/// `REQUESTS_PER_QUERY` timed GETs of `path`, sorted; the body read as
/// bytes.
async fn time_get(app: &TestApp, path: &str, token: &str) -> Vec<Duration> {
    let mut times = Vec::with_capacity(REQUESTS_PER_QUERY);
    for _ in 0..REQUESTS_PER_QUERY {
        let started = Instant::now();
        let r = app
            .client
            .get(app.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("request");
        let status = r.status();
        let body = r.bytes().await.expect("body");
        times.push(started.elapsed());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    times.sort();
    times
}

/// The same list through the store alone, `REQUESTS_PER_QUERY` times,
/// sorted.
async fn time_store(
    db: &deadpool_postgres::Object,
    user: Uuid,
    target: Uuid,
    query: &str,
) -> Vec<Duration> {
    let param = |name: &str| {
        query
            .trim_start_matches('?')
            .split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_string)
    };
    let filter = FingerprintFilter {
        state: param("state"),
        status: param("status").and_then(|s| FindingStatus::parse(&s)),
        severity: param("severity")
            .and_then(|s| Severity::ALL.into_iter().find(|x| x.as_str() == s)),
        ..FingerprintFilter::default()
    };
    let limit = param("limit").map_or(50, |l| l.parse().expect("limit"));
    let offset = param("offset").map_or(0, |o| o.parse().expect("offset"));
    let mut times = Vec::with_capacity(REQUESTS_PER_QUERY);
    for _ in 0..REQUESTS_PER_QUERY {
        let started = Instant::now();
        fingerprints::list_for_target(db, user, target, &filter, (limit, offset))
            .await
            .expect("list")
            .expect("the user's target");
        times.push(started.elapsed());
    }
    times.sort();
    times
}

/// A first and a second scan of a new target recorded with the search
/// index's triggers disabled (and enabled again after).
async fn without_search_triggers(
    app: &TestApp,
    user: &TestUser,
    events: &[FindingEvent],
) -> (f64, f64) {
    let triggers = |on: bool| {
        let verb = if on { "ENABLE" } else { "DISABLE" };
        format!(
            "ALTER TABLE fingerprints {verb} TRIGGER fingerprint_search_added;
             ALTER TABLE fingerprints {verb} TRIGGER fingerprint_search_changed"
        )
    };
    let db = app.state.db.get().await.expect("db");
    db.batch_execute(&triggers(false)).await.expect("disable");
    let target = app.new_target(user, "unlisted.example.com").await;
    let scan = new_scan(app, user.id, target).await;
    let first = ingest(app, user.id, scan, events).await;
    let scan = new_scan(app, user.id, target).await;
    let second = ingest(app, user.id, scan, events).await;
    db.batch_execute(&triggers(true)).await.expect("enable");
    (first, second)
}

/// Three scans of a new target (first, second, third) recorded with the
/// fingerprint list index and fill factor of before migration 0043 (the
/// index holding `last_seen_at`, so no sighting is a HOT update), then
/// today's put back: the two layouts side by side in one run.
async fn with_the_list_index_before_0043(
    app: &TestApp,
    user: &TestUser,
    events: &[FindingEvent],
) -> [f64; 3] {
    let index = |key: &str, fill: &str| {
        format!(
            "DROP INDEX fingerprints_target_list_idx;
             CREATE INDEX fingerprints_target_list_idx
                 ON fingerprints (target_id, severity_rank, {key} DESC, id)
                 INCLUDE (state, status, accepted_until);
             ALTER TABLE fingerprints SET (fillfactor = {fill})"
        )
    };
    let db = app.state.db.get().await.expect("db");
    // Today's fill factor, put back after.
    let today: String = db
        .query_one(
            "SELECT COALESCE((SELECT option_value FROM pg_options_to_table(reloptions)
                              WHERE option_name = 'fillfactor'), '100')
             FROM pg_class WHERE oid = 'fingerprints'::regclass",
            &[],
        )
        .await
        .expect("fill factor")
        .get(0);
    db.batch_execute(&index("last_seen_at", "100"))
        .await
        .expect("old index");
    let target = app.new_target(user, "before-0043.example.com").await;
    let mut rates = [0.0; 3];
    for rate in &mut rates {
        let scan = new_scan(app, user.id, target).await;
        *rate = ingest(app, user.id, scan, events).await;
    }
    db.batch_execute(&index("first_seen_at", &today))
        .await
        .expect("index of today");
    rates
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "admin").await;
    let events: Vec<FindingEvent> = (0..FINDINGS).map(finding).collect();

    let before_target = app.new_target(&user, "before.example.com").await;
    let scan = new_scan(&app, user.id, before_target).await;
    let before = ingest_without_fingerprints(&app, user.id, scan, &events, PAGE).await;
    let target = app.new_target(&user, "example.com").await;
    let scan = new_scan(&app, user.id, target).await;
    let first = ingest(&app, user.id, scan, &events).await;
    // The search index's own work, after the write path: measured apart
    // so that it does not land on the next scan's figure.
    let indexed = wait_for_search_index(&app, target).await;
    let scan = new_scan(&app, user.id, target).await;
    let second = ingest(&app, user.id, scan, &events).await;
    let scan = new_scan(&app, user.id, target).await;
    let third = ingest(&app, user.id, scan, &events).await;
    // The ceiling: findings only plus a key row a fingerprint, a first scan
    // then a rescan of one target.
    app.state
        .db
        .get()
        .await
        .expect("db")
        .batch_execute(LEAST_FINGERPRINTS)
        .await
        .expect("key table");
    let least_target = app.new_target(&user, "least.example.com").await;
    let scan = new_scan(&app, user.id, least_target).await;
    let least_first =
        ingest_with_least_fingerprint(&app, user.id, least_target, scan, &events).await;
    let scan = new_scan(&app, user.id, least_target).await;
    let least_second =
        ingest_with_least_fingerprint(&app, user.id, least_target, scan, &events).await;
    println!("ingest, one scan of {FINDINGS} findings in pages of {PAGE}:");
    println!("  before (findings only)          {before:>9.0} findings/s");
    println!("  after, first scan (all new)     {first:>9.0} findings/s");
    println!("  after, second scan (recurring)  {second:>9.0} findings/s");
    println!("  after, third scan (recurring)   {third:>9.0} findings/s");
    println!(
        "  ceiling (findings only + one key row a fingerprint, no state): first {least_first:.0} \
         ({:.2}), second {least_second:.0} ({:.2}) findings/s",
        least_first / before,
        least_second / before
    );
    println!(
        "  search index of the first scan's {FINDINGS} new fingerprints: caught up {:.0?} after \
         its last page (the indexer looks every second)",
        indexed
    );
    // The same without the search index's triggers (migration 0037): what
    // listing new text as pending costs the write path.
    let [old_first, old_second, old_third] =
        with_the_list_index_before_0043(&app, &user, &events).await;
    println!(
        "  list index before migration 0043 (last_seen_at, fill 100): first {old_first:.0}, \
         second {old_second:.0}, third {old_third:.0} findings/s"
    );
    let (unlisted_first, unlisted_second) = without_search_triggers(&app, &user, &events).await;
    println!("  after, first scan, search triggers off  {unlisted_first:>9.0} findings/s");
    println!("  after, second scan, search triggers off {unlisted_second:>9.0} findings/s");
    println!(
        "  ratio to findings only: first {:.2}, second {:.2}, third {:.2}; before 0043: {:.2}, \
         {:.2}, {:.2}; triggers off: {:.2}, {:.2}",
        first / before,
        second / before,
        third / before,
        old_first / before,
        old_second / before,
        old_third / before,
        unlisted_first / before,
        unlisted_second / before
    );

    // The fleet's shape: a small scan's pages hold one or two findings (what
    // it found since its last event), so what a page costs however few
    // rows it holds sets Postgres' share of the scan.
    let small: Vec<FindingEvent> = (0..SMALL_PAGES).map(finding).collect();
    let t = app.new_target(&user, "pages-before.example.com").await;
    let scan = new_scan(&app, user.id, t).await;
    let small_before = ingest_without_fingerprints(&app, user.id, scan, &small, 1).await;
    let t = app.new_target(&user, "pages.example.com").await;
    let scan = new_scan(&app, user.id, t).await;
    let small_first = ingest_in_pages(&app, user.id, scan, &small, 1).await;
    let scan = new_scan(&app, user.id, t).await;
    let small_second = ingest_in_pages(&app, user.id, scan, &small, 1).await;
    println!(
        "ingest, {SMALL_PAGES} pages of one finding, each in its own transaction: findings only \
         {small_before:.0}, first scan {small_first:.0}, second scan {small_second:.0} pages/s \
         ({:.2}, {:.2} of findings only)",
        small_first / small_before,
        small_second / small_before
    );

    // `BENCH_INGEST_ONLY=1`: the ingest figures alone (the list's data
    // takes minutes to lay).
    if std::env::var("BENCH_INGEST_ONLY").is_ok_and(|v| v == "1") {
        return;
    }
    let big = app.new_target(&user, "big.example.com").await;
    let laying = Instant::now();
    scanfleet_tests::history::lay_history(&app, user.id, big, FINGERPRINTS, SCANS).await;
    println!(
        "laid {FINGERPRINTS} fingerprints and {} findings in {:.0?}",
        FINGERPRINTS * SCANS,
        laying.elapsed()
    );
    let queries = [
        String::new(),
        "?state=open".into(),
        "?state=fixed&severity=high".into(),
        "?status=false_positive".into(),
        "?severity=critical&limit=500".into(),
        "?offset=50000".into(),
    ];
    // What Postgres itself spends (the HTTP figures add the app's work and
    // this machine's load).
    let db = app.state.db.get().await.expect("db");
    for sql in [
        "SELECT count(*) FROM fingerprints fp WHERE fp.target_id = $1",
        "SELECT sum(n) FROM fingerprint_counts fp WHERE fp.target_id = $1",
        "SELECT fp.id FROM fingerprints fp WHERE fp.target_id = $1
         ORDER BY fp.severity_rank, fp.first_seen_at DESC, fp.id LIMIT 50",
    ] {
        let plan = db
            .query(&format!("EXPLAIN (ANALYZE, FORMAT JSON) {sql}"), &[&big])
            .await
            .expect("explain");
        let plan: serde_json::Value = plan[0].get(0);
        println!(
            "  postgres: {:.1} ms for {}",
            plan[0]["Execution Time"].as_f64().unwrap_or(f64::NAN),
            sql.split_whitespace().take(4).collect::<Vec<_>>().join(" ")
        );
    }
    // The reference: a one-row read of the same target through the same
    // app, auth and connection (what any request costs here), beside the
    // store's own time for each list (Postgres and row decoding, no HTTP).
    // Bodies are read as bytes: the client's JSON parsing is not timed.
    let reference = time_get(&app, &format!("/api/v1/targets/{big}"), &user.access_token).await;
    println!(
        "reference GET /targets/{{id}}, {REQUESTS_PER_QUERY} requests: p50 {:>6.1?}  p95 {:>6.1?}",
        percentile(&reference, 0.5),
        percentile(&reference, 0.95)
    );
    let mut all = Vec::new();
    println!("GET /targets/{{id}}/findings, {REQUESTS_PER_QUERY} requests each (store: the core's list_for_target alone):");
    for q in &queries {
        let path = format!("/api/v1/targets/{big}/findings{q}");
        let times = time_get(&app, &path, &user.access_token).await;
        let store_times = time_store(&db, user.id, big, q).await;
        println!(
            "  {:<32} p50 {:>6.1?}  p95 {:>6.1?}   store p50 {:>6.1?}  p95 {:>6.1?}",
            if q.is_empty() { "(no filter)" } else { q },
            percentile(&times, 0.5),
            percentile(&times, 0.95),
            percentile(&store_times, 0.5),
            percentile(&store_times, 0.95)
        );
        all.extend(times);
    }
    all.sort();
    println!(
        "  all                              p50 {:>6.1?}  p95 {:>6.1?}",
        percentile(&all, 0.5),
        percentile(&all, 0.95)
    );
}
