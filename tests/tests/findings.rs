//! Findings against the real app and Postgres: the storage functions the
//! ingester calls (dedup, severity rule, counters, forward-only status) and
//! `PATCH /findings/{finding_id}`.

use scanfleet_common::events::{Classification, Evidence, FindingEvent, ScanStatus};
use scanfleet_common::Severity;
use scanfleet_core::store::{findings, fingerprints, scans};
use scanfleet_tests::{spawn_app, spawn_app_with, Reply, TestApp, TestUser};
use serde_json::json;
use uuid::Uuid;

async fn new_scan(app: &TestApp, user: &TestUser) -> Uuid {
    let r = app
        .post(
            "/api/v1/targets",
            Some(&user.access_token),
            json!({"domain": format!("t{}.example.com", Uuid::new_v4().simple())}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({"target_id": r.body["id"]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_str().unwrap().parse().unwrap()
}

fn finding(template: &str, severity: Severity, path: &str) -> FindingEvent {
    FindingEvent {
        template_id: template.into(),
        name: format!("{template} name"),
        severity,
        host: "example.com".into(),
        matched_at: format!("https://example.com{path}"),
        description: String::new(),
        remediation: String::new(),
        extracted_results: vec!["v1".into()],
        matcher_name: Some("m".into()),
        classification: Default::default(),
        evidence: None,
    }
}

async fn insert(app: &TestApp, scan_id: Uuid, user: &TestUser, list: &[FindingEvent]) -> u64 {
    let db = app.state.db.get().await.unwrap();
    findings::insert_findings(&db, scan_id, user.id, list)
        .await
        .unwrap()
}

/// (findings_count, critical, high, medium, low, info) of a scan.
async fn counters(app: &TestApp, scan_id: Uuid) -> [i32; 6] {
    let db = app.state.db.get().await.unwrap();
    let row = db
        .query_one(
            "SELECT findings_count, critical_count, high_count, medium_count, low_count, info_count
             FROM scans WHERE id = $1",
            &[&scan_id],
        )
        .await
        .unwrap();
    [0, 1, 2, 3, 4, 5].map(|i| row.get(i))
}

async fn detail(app: &TestApp, user: &TestUser, scan_id: Uuid) -> Reply {
    app.get(&format!("/api/v1/scans/{scan_id}"), &user.access_token)
        .await
}

#[tokio::test]
async fn inserting_the_same_findings_twice_records_them_once() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    let batch = [
        finding("git-config", Severity::High, "/.git/config"),
        finding("env-file", Severity::Critical, "/.env"),
        finding("tech", Severity::Info, "/"),
    ];
    assert_eq!(insert(&app, s, &user, &batch).await, 3);
    assert_eq!(insert(&app, s, &user, &batch).await, 0);
    assert_eq!(counters(&app, s).await, [3, 1, 1, 0, 0, 1]);
    let r = detail(&app, &user, s).await;
    assert_eq!(r.body["vulnerabilities"].as_array().unwrap().len(), 3);
    assert_eq!(r.body["summary"]["total_findings"], 3);
}

#[tokio::test]
async fn the_first_occurrence_of_a_dedup_key_wins_within_and_across_batches() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    let mut first = finding("git-config", Severity::High, "/.git/config");
    first.name = "first".into();
    let mut second = first.clone();
    second.name = "second".into();
    second.severity = Severity::Low;
    // Same template elsewhere and another template at the same place are
    // different keys.
    let elsewhere = finding("git-config", Severity::High, "/app/.git/config");
    let other_template = finding("git-head", Severity::Medium, "/.git/config");
    assert_eq!(
        insert(
            &app,
            s,
            &user,
            &[first, second.clone(), elsewhere, other_template]
        )
        .await,
        3
    );
    let mut third = second;
    third.name = "third".into();
    assert_eq!(insert(&app, s, &user, &[third]).await, 0);
    let db = app.state.db.get().await.unwrap();
    let rows = db
        .query(
            "SELECT name, severity FROM findings
             WHERE scan_id = $1 AND dedup_key = 'git-config:https://example.com/.git/config'",
            &[&s],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), "first");
    assert_eq!(rows[0].get::<_, String>(1), "high");
    assert_eq!(counters(&app, s).await, [3, 0, 2, 1, 0, 0]);
}

#[tokio::test]
async fn an_unknown_severity_is_stored_as_info() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    let odd = finding("odd", Severity::normalize("urgent"), "/odd");
    let empty = finding("empty", Severity::normalize(""), "/empty");
    assert_eq!(insert(&app, s, &user, &[odd, empty]).await, 2);
    let r = detail(&app, &user, s).await;
    for v in r.body["vulnerabilities"].as_array().unwrap() {
        assert_eq!(v["severity"], "info");
    }
    assert_eq!(counters(&app, s).await, [2, 0, 0, 0, 0, 2]);
}

#[tokio::test]
async fn new_findings_are_open_and_their_status_can_be_set() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    insert(
        &app,
        s,
        &user,
        &[finding("git-config", Severity::High, "/")],
    )
    .await;
    let r = detail(&app, &user, s).await;
    let v = &r.body["vulnerabilities"][0];
    assert_eq!(v["status"], "open");
    let id = v["id"].as_str().unwrap().to_string();
    for status in [
        "confirmed",
        "false_positive",
        "accepted_risk",
        "fixed",
        "open",
    ] {
        let r = app
            .call(
                reqwest::Method::PATCH,
                &format!("/api/v1/findings/{id}"),
                Some(&user.access_token),
                Some(json!({ "status": status })),
            )
            .await;
        assert_eq!(r.status, 200, "{status}: {}", r.text);
        assert_eq!(r.body["status"], status);
        assert_eq!(r.body["id"], id);
        assert_eq!(r.body["template_id"], "git-config");
        let r = detail(&app, &user, s).await;
        assert_eq!(r.body["vulnerabilities"][0]["status"], status);
    }
}

#[tokio::test]
async fn an_unknown_finding_status_is_a_422_naming_status() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    insert(
        &app,
        s,
        &user,
        &[finding("git-config", Severity::High, "/")],
    )
    .await;
    let id = detail(&app, &user, s).await.body["vulnerabilities"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for bad in ["closed", "OPEN", ""] {
        let r = app
            .call(
                reqwest::Method::PATCH,
                &format!("/api/v1/findings/{id}"),
                Some(&user.access_token),
                Some(json!({ "status": bad })),
            )
            .await;
        r.assert_problem(422);
        assert_eq!(r.error_fields(), vec!["status"]);
    }
}

#[tokio::test]
async fn another_users_finding_is_a_404() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let s = new_scan(&app, &alice).await;
    insert(
        &app,
        s,
        &alice,
        &[finding("git-config", Severity::High, "/")],
    )
    .await;
    let id = detail(&app, &alice, s).await.body["vulnerabilities"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (who, path) in [
        (&bob, format!("/api/v1/findings/{id}")),
        (&alice, format!("/api/v1/findings/{}", Uuid::now_v7())),
    ] {
        let r = app
            .call(
                reqwest::Method::PATCH,
                &path,
                Some(&who.access_token),
                Some(json!({ "status": "fixed" })),
            )
            .await;
        r.assert_problem(404);
    }
    let r = detail(&app, &alice, s).await;
    assert_eq!(r.body["vulnerabilities"][0]["status"], "open");
}

#[tokio::test]
async fn a_finding_reads_with_its_references_classification_and_exchange() {
    let app = spawn_app().await;
    let alice = app.new_user().await;
    let bob = app.new_user().await;
    let s = new_scan(&app, &alice).await;
    let mut with = finding("git-config", Severity::High, "/.git/config");
    with.classification = Box::new(Classification {
        references: vec!["https://example.org/advisory".into()],
        cve_ids: vec![],
        cwe_ids: vec!["CWE-538".into()],
        cvss_score: Some(7.5),
        cvss_metrics: Some("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N".into()),
    });
    with.evidence = Some(Box::new(Evidence::of(
        b"GET /.git/config HTTP/1.1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n\r\n[core]\0",
    )));
    let without = finding("plain", Severity::Low, "/");
    insert(&app, s, &alice, &[with, without]).await;
    let list = detail(&app, &alice, s).await.body["vulnerabilities"].clone();
    let id_of = |template: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|v| v["template_id"] == template)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let r = app
        .get(
            &format!("/api/v1/findings/{}", id_of("git-config")),
            &alice.access_token,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["template_id"], "git-config");
    assert_eq!(r.body["severity"], "high");
    assert_eq!(
        r.body["references"],
        json!(["https://example.org/advisory"])
    );
    assert_eq!(r.body["classification"]["cwe_ids"], json!(["CWE-538"]));
    assert_eq!(r.body["classification"]["cve_ids"], json!([]));
    assert_eq!(r.body["classification"]["cvss_score"], 7.5);
    assert_eq!(r.body["request"], "GET /.git/config HTTP/1.1\r\n\r\n");
    // A NUL cannot be stored as text: it is the replacement character.
    assert_eq!(r.body["response"], "HTTP/1.1 200 OK\r\n\r\n[core]\u{FFFD}");

    let r = app
        .get(
            &format!("/api/v1/findings/{}", id_of("plain")),
            &alice.access_token,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["references"], json!([]));
    assert!(
        r.body.get("request").is_none() && r.body.get("response").is_none(),
        "{}",
        r.body
    );
    assert!(r.body["classification"].get("cvss_score").is_none());

    let r = app
        .get(
            &format!("/api/v1/findings/{}", id_of("git-config")),
            &bob.access_token,
        )
        .await;
    r.assert_problem(404);
    let r = app
        .get(
            &format!("/api/v1/findings/{}", Uuid::now_v7()),
            &alice.access_token,
        )
        .await;
    r.assert_problem(404);
}

#[tokio::test]
async fn scan_status_only_moves_forward_and_stamps_its_times() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    let db = app.state.db.get().await.unwrap();
    let set = |status| {
        let db = &db;
        async move { scans::set_scan_status(db, s, status, None).await.unwrap() }
    };
    assert!(set(ScanStatus::Pending).await);
    let r = detail(&app, &user, s).await;
    assert_eq!(r.body["status"], "pending");
    let started = r.body["started_at"].clone();
    assert!(started.is_string());
    // Present and null until set (issue 26, item 8).
    assert!(r.body["completed_at"].is_null());
    assert!(r.body.as_object().unwrap().contains_key("completed_at"));

    assert!(set(ScanStatus::Running).await);
    assert!(!set(ScanStatus::Pending).await, "backwards");
    assert!(!set(ScanStatus::Running).await, "same status");
    let r = detail(&app, &user, s).await;
    assert_eq!(r.body["status"], "running");
    assert_eq!(r.body["started_at"], started, "started_at is kept");

    assert!(set(ScanStatus::Completed).await);
    let r = detail(&app, &user, s).await;
    assert_eq!(r.body["status"], "completed");
    assert_eq!(r.body["progress"], 100);
    assert!(r.body["completed_at"].is_string());
    assert!(
        !set(ScanStatus::Failed).await,
        "terminal statuses never change"
    );
    assert!(!set(ScanStatus::Running).await);
    assert_eq!(detail(&app, &user, s).await.body["status"], "completed");

    let s2 = new_scan(&app, &user).await;
    assert!(
        scans::set_scan_status(&db, s2, ScanStatus::Failed, Some("node lost"))
            .await
            .unwrap()
    );
    let r = detail(&app, &user, s2).await;
    assert_eq!(r.body["status"], "failed");
    assert_eq!(r.body["error"], "node lost");
    assert_eq!(r.body["progress"], 0);
    assert!(
        !scans::set_scan_status(&db, Uuid::now_v7(), ScanStatus::Running, None)
            .await
            .unwrap()
    );
}

/// A page of findings writes its scan's row once (its counts, which move
/// its revision), not again for the revision alone; and a transaction that
/// writes the scan and then its findings still shows both on the next read.
#[tokio::test]
async fn a_page_writes_its_scan_once_and_a_kept_detail_still_follows() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    assert_eq!(detail(&app, &user, s).await.body["findings_count"], 0);
    let mut db = app.state.db.get().await.unwrap();
    let tx = db.transaction().await.unwrap();
    let page = [finding("git-config", Severity::High, "/.git/config")];
    assert_eq!(
        findings::insert_findings(&tx, s, user.id, &page)
            .await
            .unwrap(),
        1
    );
    let writes: i64 = tx
        .query_one(
            "SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'scans'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(writes, 1, "the scan's row written once by a page");
    tx.commit().await.unwrap();
    assert_eq!(detail(&app, &user, s).await.body["findings_count"], 1);

    let tx = db.transaction().await.unwrap();
    tx.execute("UPDATE scans SET progress = 7 WHERE id = $1", &[&s])
        .await
        .unwrap();
    tx.execute(
        "UPDATE findings SET description = 'seen' WHERE scan_id = $1",
        &[&s],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let r = detail(&app, &user, s).await;
    assert_eq!(r.body["progress"], 7);
    assert_eq!(r.body["findings"][0]["description"], "seen");
}

/// Scan details are kept in memory by revision; every change, made by
/// another api process or straight in the database, shows on the next read.
#[tokio::test]
async fn a_kept_scan_detail_follows_every_change_made_anywhere() {
    let app = spawn_app().await;
    let other = spawn_app_with(&[
        ("SCANFLEET_REDIS_PREFIX", &app.redis_prefix),
        ("DATABASE_URL", app.state.settings.database_url.expose()),
    ])
    .await;
    let user = app.new_user().await;
    let s = new_scan(&app, &user).await;
    let first = detail(&app, &user, s).await;
    assert_eq!(first.body["findings"].as_array().unwrap().len(), 0);
    assert_eq!(detail(&app, &user, s).await.text, first.text);
    assert!(app.state.detail_cache.bytes() > 0);

    // Findings recorded (as the ingester does, from any process).
    insert(
        &app,
        s,
        &user,
        &[finding("git-config", Severity::High, "/.git/config")],
    )
    .await;
    let r = detail(&app, &user, s).await;
    assert_eq!(r.body["vulnerabilities"][0]["template_id"], "git-config");
    assert_eq!(r.body["findings_count"], 1);

    // Triage through the other process.
    let id = r.body["vulnerabilities"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let patched = other
        .call(
            reqwest::Method::PATCH,
            &format!("/api/v1/findings/{id}"),
            Some(&user.access_token),
            Some(json!({ "status": "confirmed" })),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(
        detail(&app, &user, s).await.body["vulnerabilities"][0]["status"],
        "confirmed"
    );

    // A change to the scan row itself, straight in the database.
    let db = app.state.db.get().await.unwrap();
    db.execute("UPDATE scans SET progress = 42 WHERE id = $1", &[&s])
        .await
        .unwrap();
    assert_eq!(detail(&app, &user, s).await.body["progress"], 42);
    db.execute(
        "UPDATE findings SET description = 'edited' WHERE scan_id = $1",
        &[&s],
    )
    .await
    .unwrap();
    assert_eq!(
        detail(&app, &user, s).await.body["findings"][0]["description"],
        "edited"
    );
    db.execute("DELETE FROM findings WHERE scan_id = $1", &[&s])
        .await
        .unwrap();
    assert_eq!(
        detail(&app, &user, s).await.body["findings"]
            .as_array()
            .unwrap()
            .len(),
        0
    );

    // A kept answer is never another user's.
    let stranger = app.new_user().await;
    detail(&app, &stranger, s).await.assert_problem(404);
}

/// Starts a scan of `engine` on `target`.
async fn scan_of(app: &TestApp, user: &TestUser, target: Uuid, engine: &str) -> Uuid {
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({"target_id": target, "engine": engine}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_str().unwrap().parse().unwrap()
}

/// Records `list` as the scan's findings and completes it as the ingester
/// does (status, then the fixed rule and the counts of its changes).
async fn scan_finds(app: &TestApp, user: &TestUser, scan_id: Uuid, list: &[FindingEvent]) {
    insert(app, scan_id, user, list).await;
    let db = app.state.db.get().await.unwrap();
    for step in [
        ScanStatus::Pending,
        ScanStatus::Running,
        ScanStatus::Completed,
    ] {
        scans::set_scan_status(&db, scan_id, step, None)
            .await
            .unwrap();
    }
    fingerprints::complete(&db, scan_id).await.unwrap();
    scanfleet_core::store::findings::keep_worst(&db, scan_id)
        .await
        .unwrap();
}

/// The `template_id`s of a diff list, sorted.
fn templates(list: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["template_id"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// Issue 37, item 1: the diff agrees with the scan's own changes. A full
/// scan compared with a quick one does not call `new` what the quick scan
/// could not have found (a low finding, recurring or new); a quick scan
/// compared with a full one fixes only what it would have found; by
/// default a scan is compared with the previous completed scan of its own
/// engine, and the answer names it.
#[tokio::test]
async fn a_diff_against_another_engines_scan_calls_new_and_fixed_only_what_it_could_have_found() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let probe = finding(fingerprints::PROBE_TEMPLATE_ID, Severity::Info, "/");
    let high = finding("git-config", Severity::High, "/.git/config");
    let low = finding("tech-nginx", Severity::Low, "/server");
    let new_high = finding("cve-2099-0001", Severity::High, "/api");
    let new_low = finding("cookie-flags", Severity::Low, "/login");

    let full1 = scan_of(&app, &user, target, "full").await;
    scan_finds(
        &app,
        &user,
        full1,
        &[probe.clone(), high.clone(), low.clone()],
    )
    .await;
    // A quick scan does not run low templates: it neither finds nor fixes `low`.
    let quick1 = scan_of(&app, &user, target, "quick").await;
    scan_finds(&app, &user, quick1, &[probe.clone(), high.clone()]).await;
    let full2 = scan_of(&app, &user, target, "full").await;
    let found = [
        probe.clone(),
        high.clone(),
        low.clone(),
        new_high.clone(),
        new_low.clone(),
    ];
    scan_finds(&app, &user, full2, &found).await;
    let s = detail(&app, &user, full2).await;
    assert_eq!(
        s.body["changes"],
        json!({"new": 2, "recurring": 3, "regressed": 0, "fixed": 0}),
        "{}",
        s.text
    );

    // By default: the previous full scan, named with its engine.
    let d = app
        .get(&format!("/api/v1/scans/{full2}/diff"), &user.access_token)
        .await;
    assert_eq!(d.status, 200, "{}", d.text);
    assert_eq!(d.body["engine"], "full");
    assert_eq!(d.body["against_scan_id"], full1.to_string());
    assert_eq!(d.body["against_engine"], "full");
    assert!(d.body["against_completed_at"].is_string(), "{}", d.text);
    assert_eq!(templates(&d.body["new"]), ["cookie-flags", "cve-2099-0001"]);
    assert_eq!(
        (
            &d.body["fixed"],
            &d.body["unchanged"],
            &d.body["not_compared"]
        ),
        (&json!([]), &json!(3), &json!(0))
    );

    // Against the quick scan: only the new high finding is new; the
    // recurring low one and the new low one are beyond a quick scan.
    let d = app
        .get(
            &format!("/api/v1/scans/{full2}/diff?against={quick1}"),
            &user.access_token,
        )
        .await;
    assert_eq!(d.status, 200, "{}", d.text);
    assert_eq!(d.body["against_engine"], "quick");
    assert_eq!(templates(&d.body["new"]), ["cve-2099-0001"]);
    for list in ["new", "regressed"] {
        for v in d.body[list].as_array().unwrap() {
            assert_eq!(v["change"], list, "{}", d.text);
        }
    }
    assert_eq!(
        (&d.body["regressed"], &d.body["fixed"]),
        (&json!([]), &json!([]))
    );
    assert_eq!(
        (&d.body["unchanged"], &d.body["not_compared"]),
        (&json!(2), &json!(2))
    );

    // A quick scan that finds only the probe fixes the two high findings,
    // not the low ones.
    let quick2 = scan_of(&app, &user, target, "quick").await;
    scan_finds(&app, &user, quick2, std::slice::from_ref(&probe)).await;
    let s = detail(&app, &user, quick2).await;
    assert_eq!(s.body["changes"]["fixed"], 2, "{}", s.text);
    let d = app
        .get(&format!("/api/v1/scans/{quick2}/diff"), &user.access_token)
        .await;
    assert_eq!(d.body["against_scan_id"], quick1.to_string());
    assert_eq!(templates(&d.body["fixed"]), ["git-config"]);
    assert_eq!(d.body["not_compared"], 0, "{}", d.text);
    let d = app
        .get(
            &format!("/api/v1/scans/{quick2}/diff?against={full2}"),
            &user.access_token,
        )
        .await;
    assert_eq!(d.body["against_engine"], "full");
    assert_eq!(templates(&d.body["fixed"]), ["cve-2099-0001", "git-config"]);
    assert_eq!(d.body["new"], json!([]));
    assert_eq!(
        (&d.body["unchanged"], &d.body["not_compared"]),
        (&json!(1), &json!(2))
    );

    // The report's changes name the scan before it, whatever its engine.
    let r = app
        .get(
            &format!("/api/v1/scans/{full2}/report/html"),
            &user.access_token,
        )
        .await;
    assert_eq!(r.status, 200);
    assert!(
        r.text
            .contains("Compared with the target&#39;s previous completed scan, a quick scan"),
        "{}",
        r.text
    );
}

/// Issue 37, item 7: a target finding names both of its ids plainly; the
/// one `PATCH /findings/{finding_id}` takes is `finding_id`, and `id`
/// stays the fingerprint's, as `fingerprint_id` says.
#[tokio::test]
async fn the_target_findings_list_names_the_id_that_patch_takes() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    app.set_tier(user.id, "monthly").await;
    let target = app.new_target(&user, "example.com").await;
    let scan = scan_of(&app, &user, target, "full").await;
    let git = finding("git-config", Severity::High, "/.git/config");
    scan_finds(&app, &user, scan, &[git]).await;
    let r = app
        .get(
            &format!("/api/v1/targets/{target}/findings"),
            &user.access_token,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let item = &r.body[0];
    assert_eq!(item["fingerprint_id"], item["id"], "{item}");
    assert_ne!(item["finding_id"], item["id"], "{item}");
    let patched = app
        .call(
            reqwest::Method::PATCH,
            &format!("/api/v1/findings/{}", item["finding_id"].as_str().unwrap()),
            Some(&user.access_token),
            Some(json!({"status": "confirmed"})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(patched.body["fingerprint"], item["fingerprint"]);
}

/// Regression test for issue 36: the references a finding and a fingerprint
/// hold to their scan and fingerprint are no longer foreign keys (checked
/// on every ingested row) but are still cleared when what they name goes,
/// and a target's deletion still takes its fingerprints and findings along.
#[tokio::test]
async fn deleting_a_scan_or_a_fingerprint_clears_the_references_to_it() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let first = new_scan(&app, &user).await;
    let list = [
        finding("t-a", Severity::High, "/a"),
        finding("t-b", Severity::Low, "/b"),
    ];
    assert_eq!(insert(&app, first, &user, &list).await, 2);
    let db = app.state.db.get().await.unwrap();
    let target: Uuid = db
        .query_one("SELECT target_id FROM scans WHERE id = $1", &[&first])
        .await
        .unwrap()
        .get(0);
    let second = Uuid::now_v7();
    db.execute(
        "INSERT INTO scans (id, user_id, target_id, engine, status)
         VALUES ($1, $2, $3, 'full', 'running')",
        &[&second, &user.id, &target],
    )
    .await
    .unwrap();
    assert_eq!(insert(&app, second, &user, &list[..1]).await, 1);
    let scan_refs = |id: Uuid| {
        let db = &db;
        async move {
            let row = db
                .query_one(
                    "SELECT count(*) FILTER (WHERE first_scan_id = $1) AS first,
                            count(*) FILTER (WHERE last_scan_id = $1) AS last
                     FROM fingerprints",
                    &[&id],
                )
                .await
                .unwrap();
            (row.get::<_, i64>("first"), row.get::<_, i64>("last"))
        }
    };
    assert_eq!(scan_refs(first).await, (2, 1));
    assert_eq!(scan_refs(second).await, (0, 1));

    db.execute("DELETE FROM scans WHERE id = $1", &[&first])
        .await
        .unwrap();
    assert_eq!(scan_refs(first).await, (0, 0));
    assert_eq!(scan_refs(second).await, (0, 1));
    let nulls: i64 = db
        .query_one(
            "SELECT count(*) FROM fingerprints WHERE target_id = $1 AND first_scan_id IS NULL",
            &[&target],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        nulls, 2,
        "both fingerprints outlive the scan that found them"
    );

    db.execute(
        "DELETE FROM fingerprints WHERE target_id = $1 AND template_id = 't-a'",
        &[&target],
    )
    .await
    .unwrap();
    let row = db
        .query_one(
            "SELECT count(*) AS findings, count(fingerprint_id) AS with_fingerprint
             FROM findings WHERE scan_id = $1",
            &[&second],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>("findings"), 1, "the finding stays");
    assert_eq!(row.get::<_, i64>("with_fingerprint"), 0);

    db.execute("DELETE FROM targets WHERE id = $1", &[&target])
        .await
        .unwrap();
    let left: i64 = db
        .query_one(
            "SELECT (SELECT count(*) FROM fingerprints WHERE target_id = $1)
                  + (SELECT count(*) FROM findings WHERE scan_id = $2)",
            &[&target, &second],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
}

/// Issue 33: a completed scan's page reads the worst findings kept when it
/// completed, and they are the rows, in the order, that picking them from
/// all its findings gives (before and after completing, and with a
/// finding triaged since: the status is read as it stands).
#[tokio::test]
async fn a_completed_scans_kept_worst_findings_are_the_ones_picked_from_all_its_findings() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let scan = new_scan(&app, &user).await;
    let severities = Severity::ALL;
    let list: Vec<FindingEvent> = (0..450)
        .map(|i| FindingEvent {
            host: format!("h{}.example.com", i % 7),
            ..finding(
                &format!("t{}", i % 11),
                severities[i % severities.len()],
                &format!("/p/{i}"),
            )
        })
        .collect();
    insert(&app, scan, &user, &list).await;
    let db = app.state.db.get().await.unwrap();
    let worst = |limit: i64| {
        let db = &db;
        async move {
            findings::worst_of_scan(&***db, scan, limit)
                .await
                .unwrap()
                .iter()
                .map(|r| format!("{r:?}"))
                .collect::<Vec<_>>()
        }
    };
    let running = worst(findings::KEPT_WORST).await;
    assert_eq!(running.len() as i64, findings::KEPT_WORST);
    let everything = worst(1000).await;
    assert_eq!(everything.len(), 450);
    assert_eq!(running[..], everything[..running.len()]);

    scan_finds(&app, &user, scan, &[]).await;
    let kept: Vec<Uuid> = db
        .query_one(
            "SELECT worst_findings FROM scan_changes WHERE scan_id = $1",
            &[&scan],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept.len() as i64, findings::KEPT_WORST);
    assert_eq!(worst(findings::KEPT_WORST).await, running);
    assert_eq!(worst(10).await, running[..10]);
    assert_eq!(worst(1000).await, everything);

    // Triage after completion shows on the kept rows.
    let first = findings::worst_of_scan(&**db, scan, 1).await.unwrap();
    db.execute(
        "UPDATE fingerprints SET status = 'false_positive'
         WHERE id = (SELECT fingerprint_id FROM findings WHERE id = $1)",
        &[&first[0].id],
    )
    .await
    .unwrap();
    let triaged = worst(findings::KEPT_WORST).await;
    assert!(
        triaged[0].contains("status: FalsePositive"),
        "{}",
        triaged[0]
    );
    assert_eq!(triaged[..], worst(1000).await[..triaged.len()]);

    // A scan with fewer findings than are kept: all of them, at any limit.
    let small = new_scan(&app, &user).await;
    scan_finds(&app, &user, small, &list[..3]).await;
    let all = findings::worst_of_scan(&**db, small, 1000).await.unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].severity, Severity::Critical);
}

/// Issue 36: a sighting of a known fingerprint changes no indexed column
/// (the list orders by when a fingerprint was first seen, which a rescan
/// does not move), so a rescan's sightings are heap-only updates, all of
/// them, since each page has room for them (migration 0048). Before
/// migration 0043 the list index held `last_seen_at`, and no sighting was.
#[tokio::test]
async fn a_rescans_sightings_are_heap_only_updates() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let first = new_scan(&app, &user).await;
    let list: Vec<FindingEvent> = (0..200)
        .map(|i| {
            finding(
                &format!("t{}", i % 5),
                Severity::ALL[i % 5],
                &format!("/p/{i}"),
            )
        })
        .collect();
    scan_finds(&app, &user, first, &list).await;
    let mut db = app.state.db.get().await.unwrap();
    let target: Uuid = db
        .query_one("SELECT target_id FROM scans WHERE id = $1", &[&first])
        .await
        .unwrap()
        .get(0);
    let second = scan_of(&app, &user, target, "full").await;
    let tx = db.transaction().await.unwrap();
    findings::insert_findings(&tx, second, user.id, &list)
        .await
        .unwrap();
    // This transaction's own counts of the table's updates.
    let row = tx
        .query_one(
            "SELECT pg_stat_get_xact_tuples_updated('fingerprints'::regclass) AS updated,
                    pg_stat_get_xact_tuples_hot_updated('fingerprints'::regclass) AS hot",
            &[],
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (updated, hot): (i64, i64) = (row.get("updated"), row.get("hot"));
    assert_eq!(updated, 200);
    // Every one: the page leaves room for one new version of each of its
    // rows (fill factor 45, migration 0048; at 70 about half were, at 50
    // all but two).
    assert_eq!(hot, updated, "{hot} of {updated} sightings were HOT");
}

/// Migration 0044 checks a finding's scan and user, and a fingerprint's
/// target, once per statement instead of once per row: a row naming a
/// missing one is still refused, the keys do not move, and deletes still
/// take what hung off the deleted rows, also when the delete meets a
/// writer that has not committed yet.
#[tokio::test]
async fn the_keys_of_findings_are_checked_once_a_statement_and_deletes_still_cascade() {
    let app = spawn_app().await;
    let user = app.new_user().await;
    let scan = new_scan(&app, &user).await;
    let list: Vec<FindingEvent> = (0..20)
        .map(|i| finding("t", Severity::High, &format!("/p/{i}")))
        .collect();
    assert_eq!(insert(&app, scan, &user, &list).await, 20);
    let mut db = app.state.db.get().await.unwrap();
    let target: Uuid = db
        .query_one("SELECT target_id FROM scans WHERE id = $1", &[&scan])
        .await
        .unwrap()
        .get(0);
    let missing = Uuid::now_v7();
    let refused = |sql: &'static str, args: [Uuid; 3]| {
        let db = &db;
        async move {
            let err = db
                .execute(sql, &[&args[0], &args[1], &args[2]])
                .await
                .expect_err(sql);
            assert_eq!(
                err.code(),
                Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION),
                "{sql}: {err:?}"
            );
        }
    };
    let finding_sql = "INSERT INTO findings (id, scan_id, user_id, template_id, name, severity,
                                            host, matched_at, dedup_key)
                       VALUES ($1, $2, $3, 't', 'n', 'info', 'h', 'm', 'k')";
    refused(finding_sql, [Uuid::now_v7(), missing, user.id]).await;
    refused(finding_sql, [Uuid::now_v7(), scan, missing]).await;
    refused(
        "INSERT INTO fingerprints (id, user_id, target_id, fingerprint, template_id, name,
                                   severity, severity_rank, host, matched_at, first_seen_at,
                                   last_seen_at)
         VALUES ($1, $2, $3, 'f', 't', 'n', 'info', 4, 'h', 'm', now(), now())",
        [Uuid::now_v7(), user.id, missing],
    )
    .await;
    refused(
        "UPDATE findings SET scan_id = $1 WHERE scan_id = $2 AND user_id = $3",
        [Uuid::now_v7(), scan, user.id],
    )
    .await;
    refused(
        "UPDATE fingerprints SET target_id = $1 WHERE target_id = $2 AND user_id = $3",
        [Uuid::now_v7(), target, user.id],
    )
    .await;

    // A writer that has not committed holds the scan: its delete waits,
    // then takes the writer's findings with the rest.
    let writer = db.transaction().await.unwrap();
    writer
        .execute(finding_sql, &[&Uuid::now_v7(), &scan, &user.id])
        .await
        .unwrap();
    let deleter = app.state.db.get().await.unwrap();
    let delete = tokio::spawn(async move {
        deleter
            .execute("DELETE FROM scans WHERE id = $1", &[&scan])
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !delete.is_finished(),
        "the delete did not wait for the writer"
    );
    writer.commit().await.unwrap();
    assert_eq!(delete.await.unwrap(), 1);
    let count = |sql: &'static str, id: Uuid| {
        let db = &db;
        async move {
            let n: i64 = db.query_one(sql, &[&id]).await.unwrap().get(0);
            n
        }
    };
    let findings_of_scan = "SELECT count(*) FROM findings WHERE scan_id = $1";
    let fingerprints_of_target = "SELECT count(*) FROM fingerprints WHERE target_id = $1";
    assert_eq!(
        count(findings_of_scan, scan).await,
        0,
        "findings outlived their scan"
    );

    // A target's fingerprints go with it.
    assert_eq!(count(fingerprints_of_target, target).await, 20);
    db.execute("DELETE FROM targets WHERE id = $1", &[&target])
        .await
        .unwrap();
    assert_eq!(
        count(fingerprints_of_target, target).await,
        0,
        "fingerprints outlived their target"
    );
}
