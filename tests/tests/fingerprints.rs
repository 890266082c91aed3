//! Findings with a memory (issue 26), with real processes: the api and a
//! scanner node scanning the lab, whose exposed Git configuration the test
//! switches off (fixed) and on again (regressed) between scans.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use scanfleet_core::store::{self, migrate};
use scanfleet_tests::database_url;
use scanfleet_tests::fleet::{fleet_with_lab, Fleet};
use scanfleet_tests::lab::{lab_hosts, Lab, API_HOST, DOMAIN};
use scanfleet_tests::receiver::Receiver;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const GIT: &str = "git-config-exposure";
const XPB: &str = "x-powered-by-disclosure";

/// Runs a scan of `engine` to its end; its detail.
async fn scan_to_end(fleet: &Fleet, token: &str, target: &str, engine: &str) -> Value {
    let scan = fleet.scan(token, target, engine).await;
    let detail = fleet
        .wait_finished(token, &scan, Duration::from_secs(120))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    detail
}

/// The scan's vulnerabilities by `template_id matched_at`.
fn by_key(scan: &Value) -> BTreeMap<String, Value> {
    scan["vulnerabilities"]
        .as_array()
        .expect("vulnerabilities")
        .iter()
        .map(|v| {
            (
                format!(
                    "{} {}",
                    v["template_id"].as_str().unwrap(),
                    v["matched_at"].as_str().unwrap()
                ),
                v.clone(),
            )
        })
        .collect()
}

fn key(template: &str, host: &str) -> String {
    match template {
        GIT => format!("{GIT} http://{host}/.git/config"),
        other => format!("{other} http://{host}/"),
    }
}

fn changes(new: u64, recurring: u64, regressed: u64, fixed: u64) -> Value {
    json!({"new": new, "recurring": recurring, "regressed": regressed, "fixed": fixed})
}

/// `GET` with its `X-Total-Count`.
async fn get_list(fleet: &Fleet, path: &str, token: &str) -> (Vec<Value>, i64) {
    let resp = fleet
        .http
        .get(format!("{}/api/v1{path}", fleet.base()))
        .bearer_auth(token)
        .send()
        .await
        .expect("list");
    assert_eq!(resp.status().as_u16(), 200, "GET {path}");
    let total: i64 = resp.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body: Vec<Value> = resp.json().await.expect("list body");
    (body, total)
}

/// The target's fixed findings, with their total.
async fn fixed_of(fleet: &Fleet, token: &str, target: &str) -> (Vec<Value>, i64) {
    get_list(
        fleet,
        &format!("/targets/{target}/findings?state=fixed"),
        token,
    )
    .await
}

async fn patch_status(fleet: &Fleet, token: &str, finding: &Value, body: Value) -> Value {
    let id = finding["id"].as_str().unwrap();
    let (status, reply) = fleet
        .call(Method::PATCH, &format!("/findings/{id}"), token, Some(body))
        .await;
    assert_eq!(status, 200, "{reply}");
    reply
}

/// A WebSocket listener of a scan, connected before its node starts so
/// that it sees every finding message; `finish` gives the messages.
struct Listener(tokio::task::JoinHandle<Vec<Value>>);

impl Listener {
    async fn connect(fleet: &Fleet, token: &str, scan: &str) -> Listener {
        let mut ws = fleet.websocket(token, scan).await;
        Listener(tokio::spawn(async move {
            let mut messages = Vec::new();
            while let Ok(Some(Ok(m))) =
                tokio::time::timeout(Duration::from_secs(120), ws.next()).await
            {
                match m {
                    Message::Text(t) => messages.push(serde_json::from_str(&t).expect("json")),
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            messages
        }))
    }

    /// The `finding` objects of the finding messages, by `template_id
    /// matched_at`.
    async fn findings(self) -> BTreeMap<String, Value> {
        let messages = self.0.await.expect("listener");
        assert_eq!(
            messages.last().map(|m| m["status"].clone()),
            Some(json!("completed"))
        );
        let mut found = BTreeMap::new();
        for m in messages.iter().filter(|m| m["type"] == "finding") {
            let f = &m["finding"];
            let k = format!(
                "{} {}",
                f["template_id"].as_str().expect("template_id"),
                f["matched_at"].as_str().expect("matched_at")
            );
            found.insert(k, f.clone());
        }
        for m in messages.iter().filter(|m| m["type"] != "finding") {
            assert!(m.get("finding").is_none(), "{m}");
        }
        found
    }
}

/// The per-target counts the list's total comes from agree with the
/// fingerprints themselves.
async fn assert_counts_agree(db: &tokio_postgres::Client) {
    let row = db
        .query_one(
            "WITH real AS (
                 SELECT target_id, state, status, severity_rank,
                        COALESCE(accepted_until, 'infinity') AS accepted_until, last_change,
                        count(*) AS n
                 FROM fingerprints GROUP BY 1, 2, 3, 4, 5, 6),
             kept AS (SELECT target_id, state, status, severity_rank, accepted_until,
                             last_change, n
                      FROM fingerprint_counts WHERE n <> 0)
             SELECT (SELECT count(*) FROM real FULL JOIN kept
                     USING (target_id, state, status, severity_rank, accepted_until, last_change)
                     WHERE real.n IS DISTINCT FROM kept.n) AS differ,
                    (SELECT COALESCE(sum(n), 0)::bigint FROM kept) AS counted",
            &[],
        )
        .await
        .expect("counts");
    let differ: i64 = row.get("differ");
    let counted: i64 = row.get("counted");
    assert_eq!(differ, 0, "fingerprint_counts differ from the fingerprints");
    assert!(counted > 0);
}

fn time(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("a time: {v}"))
}

fn day(offset: i64) -> String {
    (chrono::Utc::now().date_naive() + chrono::Duration::days(offset)).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_are_new_then_recurring_fixed_when_gone_and_regressed_when_back_with_sticky_triage(
) {
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet
        .api(&[
            ("SCANFLEET_WEBHOOKS__ALLOW_PRIVATE", "true"),
            ("SCANFLEET_WEBHOOKS__POLL_INTERVAL_MS", "50"),
        ])
        .await;
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;

    // Queued (no node yet): the times are there, null, and so are the changes.
    let first = fleet.scan(&token, &target, "full").await;
    let queued = fleet.get(&format!("/scans/{first}"), &token).await;
    for field in ["started_at", "completed_at", "changes"] {
        assert!(
            queued.as_object().unwrap().contains_key(field),
            "{field}: {queued}"
        );
        assert!(queued[field].is_null(), "{field}: {queued}");
    }
    let listener = Listener::connect(&fleet, &token, &first).await;
    let mut node = fleet.node("node-a", &[]);
    let s1 = fleet
        .wait_finished(&token, &first, Duration::from_secs(120))
        .await;
    // Live, each finding comes with its identity: all new.
    let live = listener.findings().await;
    assert_eq!(live.len(), 12, "{live:?}");
    for (k, f) in &live {
        let (template, matched) = k.split_once(' ').unwrap();
        assert_eq!(f["fingerprint"], format!("{template}:{matched}"), "{f}");
        assert_eq!(f["change"], "new", "{f}");
        // When the target first had it: during this scan.
        let first = time(&f["first_seen_at"]);
        assert!(first >= time(&s1["created_at"]), "{f}");
        assert!(first <= time(&s1["completed_at"]), "{f}");
        assert!(f["severity"].is_string() && f["name"].is_string(), "{f}");
    }
    assert_eq!(s1["status"], "completed", "{s1}");
    assert_eq!(s1["changes"], changes(12, 0, 0, 0), "{s1}");
    let v1 = by_key(&s1);
    assert_eq!(v1.len(), 12);
    for (k, v) in &v1 {
        assert_eq!(v["change"], "new", "{k}");
        let (template, matched) = k.split_once(' ').unwrap();
        assert_eq!(v["fingerprint"], format!("{template}:{matched}"));
        assert!(v["first_seen_at"].is_string());
    }
    // Worst first, as the reports list them.
    let severities: Vec<&str> = s1["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["severity"].as_str().unwrap())
        .collect();
    let mut sorted = severities.clone();
    sorted.sort_by_key(|s| {
        ["critical", "high", "medium", "low", "info"]
            .iter()
            .position(|x| x == s)
    });
    assert_eq!(severities, sorted);
    assert_eq!(severities[0], "high");

    // Triage on the first scan's findings.
    let git_domain = &v1[&key(GIT, DOMAIN)];
    let reply = patch_status(
        &fleet,
        &token,
        git_domain,
        json!({"status": "false_positive"}),
    )
    .await;
    assert_eq!(reply["status"], "false_positive");
    patch_status(
        &fleet,
        &token,
        &v1[&key(XPB, DOMAIN)],
        json!({"status": "accepted_risk", "until": day(30)}),
    )
    .await;
    patch_status(
        &fleet,
        &token,
        &v1[&key(XPB, API_HOST)],
        json!({"status": "accepted_risk", "until": day(-1)}),
    )
    .await;
    let (status, problem) = fleet
        .call(
            Method::PATCH,
            &format!("/findings/{}", git_domain["id"].as_str().unwrap()),
            &token,
            Some(json!({"status": "open", "until": day(3)})),
        )
        .await;
    assert_eq!(status, 422, "{problem}");

    // Second scan: the same fingerprints, recurring, with their triage.
    let s2 = scan_to_end(&fleet, &token, &target, "full").await;
    assert_eq!(s2["changes"], changes(0, 12, 0, 0), "{s2}");
    let v2 = by_key(&s2);
    assert_eq!(v2.keys().collect::<Vec<_>>(), v1.keys().collect::<Vec<_>>());
    for (k, v) in &v2 {
        assert_eq!(v["change"], "recurring", "{k}");
        assert_eq!(v["fingerprint"], v1[k]["fingerprint"]);
        assert_eq!(v["first_seen_at"], v1[k]["first_seen_at"]);
    }
    assert_eq!(v2[&key(GIT, DOMAIN)]["status"], "false_positive");
    assert_eq!(v2[&key(XPB, DOMAIN)]["status"], "accepted_risk");
    // Accepted until yesterday: open again.
    assert_eq!(v2[&key(XPB, API_HOST)]["status"], "open");
    assert_eq!(v2[&key(GIT, API_HOST)]["status"], "open");
    // The first scan's finding shows the fingerprint's status too.
    let s1_again = fleet.get(&format!("/scans/{first}"), &token).await;
    assert_eq!(
        by_key(&s1_again)[&key(GIT, DOMAIN)]["status"],
        "false_positive"
    );

    let (list, total) = get_list(&fleet, &format!("/targets/{target}/findings"), &token).await;
    assert_eq!(total, 12);
    assert!(list
        .iter()
        .all(|f| f["occurrences"] == 2 && f["state"] == "open"));
    let (fp, total) = get_list(
        &fleet,
        &format!("/targets/{target}/findings?status=false_positive"),
        &token,
    )
    .await;
    assert_eq!(total, 1);
    assert_eq!(fp[0]["fingerprint"], git_domain["fingerprint"]);
    let (page, total) = get_list(
        &fleet,
        &format!("/targets/{target}/findings?severity=info&limit=2&offset=1"),
        &token,
    )
    .await;
    assert_eq!((page.len(), total), (2, 6));
    // The change filter, its total from the kept counts: after a rescan of
    // the same findings every one recurs.
    let list_of = |q: &str| format!("/targets/{target}/findings?{q}");
    let (page, total) = get_list(&fleet, &list_of("change=recurring&limit=5"), &token).await;
    assert_eq!((page.len(), total), (5, 12));
    let (page, total) = get_list(&fleet, &list_of("change=new"), &token).await;
    assert_eq!((page.len(), total), (0, 0));
    let (page, total) = get_list(&fleet, &list_of("change=recurring&severity=high"), &token).await;
    assert_eq!((page.len(), total), (3, 3));
    // Text, any case, over name, template, host and URL; the total and the
    // page from one read, an empty page keeping its total.
    let (page, total) = get_list(&fleet, &list_of("q=GIT/CONFIG&limit=2"), &token).await;
    assert_eq!((page.len(), total), (2, 3));
    assert!(page.iter().all(|f| f["template_id"] == GIT), "{page:?}");
    let (page, total) = get_list(&fleet, &list_of("q=git/config&offset=5"), &token).await;
    assert_eq!((page.len(), total), (0, 3));
    let (page, total) = get_list(&fleet, &list_of("q=no%25such_thing"), &token).await;
    assert_eq!((page.len(), total), (0, 0));
    let (page, total) = get_list(
        &fleet,
        &list_of(&format!("q={API_HOST}&change=recurring&severity=high")),
        &token,
    )
    .await;
    assert_eq!((page.len(), total), (1, 1));
    assert_counts_agree(&fleet.db().await).await;

    // The weakness is mended: a full scan fixes the three Git findings.
    lab.set_git_exposed(false);
    let s3 = scan_to_end(&fleet, &token, &target, "full").await;
    assert_eq!(s3["changes"], changes(0, 9, 0, 3), "{s3}");
    let (fixed, total) = fixed_of(&fleet, &token, &target).await;
    assert_eq!(total, 3);
    assert!(fixed
        .iter()
        .all(|f| f["template_id"] == GIT && f["fixed_at"].is_string()));
    let s3_id = s3["id"].as_str().unwrap();
    let diff = fleet.get(&format!("/scans/{s3_id}/diff"), &token).await;
    assert_eq!(diff["against_scan_id"], s2["id"]);
    assert_eq!(diff["fixed"].as_array().unwrap().len(), 3, "{diff}");
    assert_eq!(diff["new"], json!([]));
    assert_eq!(diff["unchanged"], 9);
    // A user's `fixed` goes back to open when the finding comes back.
    patch_status(
        &fleet,
        &token,
        &v2[&key(GIT, API_HOST)],
        json!({"status": "fixed"}),
    )
    .await;

    // It comes back: regressed, live on the WebSocket (a listener set
    // before a node takes the scan), in the detail and as webhooks.
    let rx = Receiver::start().await;
    let (status, hook) = fleet
        .call(
            Method::POST,
            "/webhooks",
            &token,
            Some(json!({"url": rx.url("/hook"), "events": ["finding.regressed"]})),
        )
        .await;
    assert_eq!(status, 201, "{hook}");
    lab.set_git_exposed(true);
    assert!(node.terminate(Duration::from_secs(20)), "node-a stops");
    let s4_id = fleet.scan(&token, &target, "full").await;
    let listener = Listener::connect(&fleet, &token, &s4_id).await;
    let _node = fleet.node("node-b", &[]);
    let s4 = fleet
        .wait_finished(&token, &s4_id, Duration::from_secs(120))
        .await;
    assert_eq!(s4["status"], "completed", "{s4}");
    assert_eq!(s4["changes"], changes(0, 9, 3, 0), "{s4}");
    let v4 = by_key(&s4);
    let live = listener.findings().await;
    assert_eq!(live.len(), 12, "{live:?}");
    for host in lab_hosts() {
        assert_eq!(v4[&key(GIT, host)]["change"], "regressed");
        assert_eq!(v4[&key(XPB, host)]["change"], "recurring");
        for k in [key(GIT, host), key(XPB, host)] {
            assert_eq!(live[&k]["change"], v4[&k]["change"], "{k}");
            assert_eq!(live[&k]["fingerprint"], v4[&k]["fingerprint"], "{k}");
            assert_eq!(
                time(&live[&k]["first_seen_at"]),
                time(&v1[&k]["first_seen_at"]),
                "{k}"
            );
        }
    }
    rx.wait_for(Duration::from_secs(20), |r| r.len() >= 3).await;
    // And no more than one each.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rx.received();
    let mut regressed: Vec<String> = got
        .iter()
        .map(|r| {
            let body = r.json();
            assert_eq!(body["type"], "finding.regressed", "{body}");
            assert_eq!(body["data"]["finding"]["change"], "regressed", "{body}");
            body["data"]["finding"]["matched_at"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    regressed.sort();
    let mut expected: Vec<String> = lab_hosts()
        .iter()
        .map(|h| format!("http://{h}/.git/config"))
        .collect();
    expected.sort();
    assert_eq!(
        regressed, expected,
        "one finding.regressed per regressed fingerprint"
    );
    assert_counts_agree(&fleet.db().await).await;
    assert_eq!(v4[&key(GIT, API_HOST)]["status"], "open");
    assert_eq!(v4[&key(GIT, DOMAIN)]["status"], "false_positive");
    let (_, total) = fixed_of(&fleet, &token, &target).await;
    assert_eq!(total, 0);
    let s4_id = s4_id.as_str();
    // SARIF carries each result's baseline state (regressed is `updated`),
    // the JSON report each finding's change.
    let sarif = fleet
        .get(&format!("/scans/{s4_id}/report/sarif"), &token)
        .await;
    let mut states: Vec<(String, String)> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap().to_string(),
                r["baselineState"].as_str().unwrap_or("none").to_string(),
            )
        })
        .collect();
    states.sort();
    states.dedup();
    assert_eq!(
        states,
        vec![
            ("express-detect".to_string(), "unchanged".to_string()),
            (GIT.to_string(), "updated".to_string()),
            ("http-probe".to_string(), "unchanged".to_string()),
            (XPB.to_string(), "unchanged".to_string()),
        ]
    );
    let report = fleet
        .get(&format!("/scans/{s4_id}/report/json"), &token)
        .await;
    let regressed = report["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["change"] == "regressed")
        .count();
    assert_eq!(regressed, 3, "{report}");
    // Intel's vulnerabilities carry them too.
    let intel = fleet.get(&format!("/scans/{s4_id}/intel"), &token).await;
    let intel_regressed: Vec<&Value> = intel["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["change"] == "regressed")
        .collect();
    assert_eq!(intel_regressed.len(), 3, "{intel}");
    for v in intel_regressed {
        let k = format!(
            "{} {}",
            v["template_id"].as_str().unwrap(),
            v["matched_at"].as_str().unwrap()
        );
        assert_eq!(v["fingerprint"], v4[&k]["fingerprint"], "{intel}");
        assert_eq!(v["first_seen_at"], v1[&k]["first_seen_at"], "{intel}");
    }
    // Against a chosen scan: the one that fixed them, and the first.
    let diff = fleet
        .get(&format!("/scans/{s4_id}/diff?against={s3_id}"), &token)
        .await;
    assert_eq!(diff["regressed"].as_array().unwrap().len(), 3, "{diff}");
    assert_eq!(
        (diff["unchanged"].clone(), diff["fixed"].clone()),
        (json!(9), json!([]))
    );
    let diff = fleet
        .get(&format!("/scans/{s4_id}/diff?against={first}"), &token)
        .await;
    assert_eq!(diff["unchanged"], 12, "{diff}");
    assert_eq!(diff["regressed"], json!([]));

    // Another user sees none of it.
    let other = fleet.user().await;
    let other_target = fleet.target(&other, DOMAIN).await;
    let finding = v4[&key(GIT, DOMAIN)]["id"].as_str().unwrap().to_string();
    for (method, path, body) in [
        (
            Method::PATCH,
            format!("/findings/{finding}"),
            Some(json!({"status": "open"})),
        ),
        (Method::GET, format!("/targets/{target}/findings"), None),
        (Method::GET, format!("/scans/{s4_id}/diff"), None),
    ] {
        let (status, reply) = fleet.call(method, &path, &other, body).await;
        assert_eq!(status, 404, "{path}: {reply}");
    }
    // Nor can they compare with it, and a scan of another target is refused.
    let (status, _) = fleet
        .call(
            Method::GET,
            &format!("/targets/{other_target}/findings"),
            &other,
            None,
        )
        .await;
    assert_eq!(status, 200);
    let their_scan = fleet.scan(&other, &other_target, "quick").await;
    let (status, reply) = fleet
        .call(
            Method::GET,
            &format!("/scans/{their_scan}/diff?against={s4_id}"),
            &other,
            None,
        )
        .await;
    assert_eq!(status, 404, "{reply}");
    let target2 = fleet.target(&token, "api.shop.example.test").await;
    let s5 = fleet.scan(&token, &target2, "quick").await;
    let (status, reply) = fleet
        .call(
            Method::GET,
            &format!("/scans/{s4_id}/diff?against={s5}"),
            &token,
            None,
        )
        .await;
    assert_eq!(status, 422, "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_and_recon_scans_fix_only_what_they_would_have_found() {
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let full = scan_to_end(&fleet, &token, &target, "full").await;
    assert_eq!(full["changes"], changes(12, 0, 0, 0));

    // A quick scan looks at the domain only, medium and worse: the low and
    // info findings there, and everything on the other hosts, stay open.
    let quick = scan_to_end(&fleet, &token, &target, "quick").await;
    assert_eq!(quick["changes"], changes(0, 2, 0, 0), "{quick}");
    // Recon runs no vulnerability template: the Git findings it does not
    // see stay open.
    lab.set_git_exposed(false);
    let recon = scan_to_end(&fleet, &token, &target, "recon").await;
    assert_eq!(recon["changes"], changes(0, 6, 0, 0), "{recon}");
    let (_, total) = fixed_of(&fleet, &token, &target).await;
    assert_eq!(total, 0);

    // A quick scan without the Git configuration fixes it on the domain only.
    let quick = scan_to_end(&fleet, &token, &target, "quick").await;
    assert_eq!(quick["changes"], changes(0, 1, 0, 1), "{quick}");
    let (fixed, _) = fixed_of(&fleet, &token, &target).await;
    let fixed: Vec<&str> = fixed
        .iter()
        .map(|f| f["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(fixed, vec![format!("{GIT}:http://{DOMAIN}/.git/config")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_scan_fixes_nothing() {
    let lab = Lab::start(Duration::from_millis(40)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let full = scan_to_end(&fleet, &token, &target, "full").await;
    assert_eq!(full["changes"], changes(12, 0, 0, 0));

    lab.set_git_exposed(false);
    let scan = fleet.scan(&token, &target, "full").await;
    fleet
        .wait_scan(&token, &scan, Duration::from_secs(60), |s| {
            s["stage"] == "VALIDATE"
        })
        .await;
    let (status, body) = fleet
        .call(
            Method::POST,
            &format!("/scans/{scan}/stop"),
            &token,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let stopped = fleet
        .wait_finished(&token, &scan, Duration::from_secs(30))
        .await;
    assert_eq!(stopped["status"], "stopped");
    assert_fixed_nothing(&fleet, &token, &target, &scan).await;
}

/// The scan ended without completing, and once the ingester has applied
/// its terminal event (its stream is closed: nothing later is recorded)
/// it has no changes and the target no fixed finding.
async fn assert_fixed_nothing(fleet: &Fleet, token: &str, target: &str, scan: &str) -> Value {
    let db = fleet.db().await;
    let scan_id: uuid::Uuid = scan.parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !db
        .query_one("SELECT events_closed FROM scans WHERE id = $1", &[&scan_id])
        .await
        .unwrap()
        .get::<_, bool>("events_closed")
    {
        assert!(std::time::Instant::now() < deadline, "stream never closed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ended = fleet.get(&format!("/scans/{scan}"), token).await;
    assert!(ended["changes"].is_null(), "{ended}");
    let (_, total) = fixed_of(fleet, token, target).await;
    assert_eq!(total, 0);
    ended
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_scan_with_findings_fixes_nothing() {
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let mut node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let full = scan_to_end(&fleet, &token, &target, "full").await;
    assert_eq!(full["changes"], changes(12, 0, 0, 0));

    // The Git weakness is mended, but the path hangs, and the next full
    // scan runs out of time waiting for it, after probing the hosts (their
    // findings recorded): it fails.
    lab.set_git_exposed(false);
    lab.set_git_hangs(true);
    assert!(node.terminate(Duration::from_secs(20)), "node-a stops");
    let _short = fleet.node("node-b", &[("SCANFLEET_SCANNER__DEADLINE_FULL_SECS", "8")]);
    let scan = fleet.scan(&token, &target, "full").await;
    let failed = fleet
        .wait_finished(&token, &scan, Duration::from_secs(60))
        .await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let failed = assert_fixed_nothing(&fleet, &token, &target, &scan).await;
    let probes: Vec<&Value> = failed["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["template_id"] == "http-probe")
        .collect();
    assert!(
        !probes.is_empty(),
        "the failed scan reached hosts: {failed}"
    );
    assert!(
        probes.iter().all(|v| v["change"] == "recurring"),
        "{failed}"
    );
}

/// Applies the migrations before 0014 by hand (recording them in the
/// ledger as `migrate::run` does), so that data from before it can be laid.
async fn database_before_fingerprints(name: &str) -> tokio_postgres::Client {
    let (db, conn) = tokio_postgres::connect(&database_url(name), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    db.batch_execute(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
                                         applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .unwrap();
    let before: [(i32, &str); 7] = [
        (1, include_str!("../../api/core/migrations/0001_init.sql")),
        (
            4,
            include_str!("../../api/core/migrations/0004_dashboard_rollups.sql"),
        ),
        (
            6,
            include_str!("../../api/core/migrations/0006_scan_pipeline.sql"),
        ),
        (
            10,
            include_str!("../../api/core/migrations/0010_payments.sql"),
        ),
        (
            11,
            include_str!("../../api/core/migrations/0011_target_verification.sql"),
        ),
        (
            12,
            include_str!("../../api/core/migrations/0012_auth_cache.sql"),
        ),
        (
            13,
            include_str!("../../api/core/migrations/0013_scan_revision.sql"),
        ),
    ];
    for (version, sql) in before {
        db.batch_execute(sql).await.unwrap();
        db.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, 'before')",
            &[&version],
        )
        .await
        .unwrap();
    }
    db
}

#[tokio::test]
async fn the_migration_gives_findings_stored_before_it_their_history_in_scan_order() {
    let name = scanfleet_tests::create_database().await;
    let db = database_before_fingerprints(&name).await;
    db.batch_execute(
        "INSERT INTO users (id, email, password_hash, full_name)
         VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com', 'x', 'A');
         INSERT INTO targets (id, user_id, domain) VALUES
           ('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-000000000001',
            'shop.example.test');
         INSERT INTO scans (id, user_id, target_id, engine, status, created_at) VALUES
           ('00000000-0000-0000-0000-0000000000b2', '00000000-0000-0000-0000-000000000001',
            '00000000-0000-0000-0000-0000000000a1', 'full', 'completed', now() - interval '1 day'),
           ('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-000000000001',
            '00000000-0000-0000-0000-0000000000a1', 'full', 'completed', now() - interval '2 days');
         INSERT INTO findings (id, scan_id, user_id, template_id, name, severity, host,
                               matched_at, dedup_key, status, created_at) VALUES
           ('00000000-0000-0000-0000-0000000000c1', '00000000-0000-0000-0000-0000000000b1',
            '00000000-0000-0000-0000-000000000001', 'git', 'Git', 'high', 'shop.example.test',
            'HTTP://Shop.Example.test:80/.git/config', 'a', 'open', now() - interval '2 days'),
           ('00000000-0000-0000-0000-0000000000c2', '00000000-0000-0000-0000-0000000000b2',
            '00000000-0000-0000-0000-000000000001', 'git', 'Git', 'high', 'shop.example.test',
            'http://shop.example.test/.git/config', 'a', 'false_positive', now() - interval '1 day'),
           ('00000000-0000-0000-0000-0000000000c3', '00000000-0000-0000-0000-0000000000b2',
            '00000000-0000-0000-0000-000000000001', 'probe', 'Probe', 'info', 'shop.example.test',
            'https://shop.example.test:443/', 'b', 'open', now() - interval '1 day');",
    )
    .await
    .unwrap();
    let pool = store::connect(&database_url(&name)).unwrap();
    migrate::run(&pool).await.unwrap();

    let rows = db
        .query(
            "SELECT fingerprint, status, state, occurrences, first_scan_id::text AS first,
                    last_scan_id::text AS last
             FROM fingerprints ORDER BY fingerprint",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String, String, i32, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.get("fingerprint"),
                r.get("status"),
                r.get("state"),
                r.get("occurrences"),
                r.get("first"),
                r.get("last"),
            )
        })
        .collect();
    let b1 = "00000000-0000-0000-0000-0000000000b1".to_string();
    let b2 = "00000000-0000-0000-0000-0000000000b2".to_string();
    assert_eq!(
        got,
        vec![
            (
                "git:http://shop.example.test/.git/config".to_string(),
                "false_positive".to_string(),
                "open".to_string(),
                2,
                b1.clone(),
                b2.clone()
            ),
            (
                "probe:https://shop.example.test/".to_string(),
                "open".to_string(),
                "open".to_string(),
                1,
                b2.clone(),
                b2.clone()
            ),
        ]
    );
    // The list's counts start from the fingerprints the migration built.
    assert_counts_agree(&db).await;
    let changes: Vec<(String, String, String)> = db
        .query(
            "SELECT id::text AS id, change, status FROM findings ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get("id"), r.get("change"), r.get("status")))
        .collect();
    assert_eq!(
        changes,
        vec![
            (
                "00000000-0000-0000-0000-0000000000c1".into(),
                "new".into(),
                "false_positive".into()
            ),
            (
                "00000000-0000-0000-0000-0000000000c2".into(),
                "recurring".into(),
                "false_positive".into()
            ),
            (
                "00000000-0000-0000-0000-0000000000c3".into(),
                "new".into(),
                "open".into()
            ),
        ]
    );
    let counts: (i32, i32) = {
        let r = db
            .query_one(
                "SELECT new, recurring FROM scan_changes WHERE scan_id = $1",
                &[&b2.parse::<uuid::Uuid>().unwrap()],
            )
            .await
            .unwrap();
        (r.get("new"), r.get("recurring"))
    };
    assert_eq!(counts, (1, 1));
    drop(pool);
    drop(db);
    scanfleet_tests::drop_database(&database_url("postgres"), &name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retest_keeps_a_finding_still_there_open_and_fixes_one_that_is_gone() {
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let full = scan_to_end(&fleet, &token, &target, "full").await;
    let git_api = by_key(&full)[&key(GIT, API_HOST)].clone();
    let finding = git_api["id"].as_str().unwrap();
    let fingerprint = git_api["fingerprint"].as_str().unwrap();
    let fingerprint_row = |list: &[Value]| {
        list.iter()
            .find(|f| f["fingerprint"] == fingerprint)
            .cloned()
            .expect("the retested fingerprint")
    };
    let (list, _) = get_list(&fleet, &format!("/targets/{target}/findings"), &token).await;
    let before = fingerprint_row(&list);

    // Still there: open, seen again.
    let (status, scan) = fleet
        .call(
            Method::POST,
            &format!("/findings/{finding}/retest"),
            &token,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 202, "{scan}");
    assert_eq!(scan["engine"], "retest");
    let retest = fleet
        .wait_finished(
            &token,
            scan["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(retest["status"], "completed", "{retest}");
    // Only its template, only its host (and the probe of that host).
    assert_eq!(
        Fleet::finding_keys(&retest),
        vec![key(GIT, API_HOST), key("http-probe", API_HOST)]
    );
    let (list, _) = get_list(&fleet, &format!("/targets/{target}/findings"), &token).await;
    let after = fingerprint_row(&list);
    assert_eq!(after["state"], "open");
    assert!(after["last_seen_at"].as_str() > before["last_seen_at"].as_str());
    assert_eq!(after["occurrences"], 2);

    // Gone: the retest fixes it, and nothing else.
    lab.set_git_exposed(false);
    let (status, scan) = fleet
        .call(
            Method::POST,
            &format!("/findings/{finding}/retest"),
            &token,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 202, "{scan}");
    let retest = fleet
        .wait_finished(
            &token,
            scan["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(retest["changes"]["fixed"], 1, "{retest}");
    let (fixed, total) = fixed_of(&fleet, &token, &target).await;
    assert_eq!(total, 1);
    assert_eq!(fixed[0]["fingerprint"], fingerprint);
}

#[tokio::test]
async fn retests_are_not_counted_in_the_scan_limit_five_run_at_once_and_others_get_404() {
    use scanfleet_common::events::FindingEvent;
    use scanfleet_common::Severity;
    let app = scanfleet_tests::spawn_app().await;
    let user = app.new_user().await;
    let target = app.new_target(&user, "example.com").await;
    let r = app
        .post(
            "/api/v1/scans",
            Some(&user.access_token),
            json!({"target_id": target}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let scan: uuid::Uuid = r.body["id"].as_str().unwrap().parse().unwrap();
    let db = app.state.db.get().await.unwrap();
    scanfleet_core::store::findings::insert_findings(
        &db,
        scan,
        user.id,
        &[FindingEvent {
            template_id: "git-config".into(),
            name: "Git".into(),
            severity: Severity::High,
            host: "example.com".into(),
            matched_at: "https://example.com/.git/config".into(),
            description: String::new(),
            remediation: String::new(),
            extracted_results: vec![],
            matcher_name: None,
            classification: Default::default(),
            evidence: None,
        }],
    )
    .await
    .unwrap();
    let detail = app
        .get(&format!("/api/v1/scans/{scan}"), &user.access_token)
        .await;
    let finding = detail.body["vulnerabilities"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let usage = || async {
        db.query_one(
            "SELECT COALESCE(sum(scans), 0)::bigint AS n FROM scan_usage WHERE user_id = $1",
            &[&user.id],
        )
        .await
        .unwrap()
        .get::<_, i64>("n")
    };
    let used = usage().await;
    let path = format!("/api/v1/findings/{finding}/retest");
    for _ in 0..5 {
        let r = app.post(&path, Some(&user.access_token), json!({})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!(r.body["engine"], "retest");
        assert_eq!(r.body["status"], "queued");
    }
    app.post(&path, Some(&user.access_token), json!({}))
        .await
        .assert_problem(429);
    assert_eq!(usage().await, used, "retests are not counted");
    // Its job names the one template and the finding's host.
    let mut retests = 0;
    for id in app.state.scan_queue.waiting().await.unwrap() {
        let job = app.state.scan_queue.job(id).await.unwrap().unwrap();
        if job.engine == scanfleet_common::jobs::Engine::Retest {
            assert_eq!(job.templates, vec!["git-config".to_string()]);
            assert_eq!(job.domain, "example.com");
            retests += 1;
        } else {
            assert!(job.templates.is_empty());
        }
    }
    assert_eq!(retests, 5);

    // `retest` is not an engine POST /scans takes.
    app.post(
        "/api/v1/scans",
        Some(&user.access_token),
        json!({"target_id": target, "engine": "retest"}),
    )
    .await
    .assert_problem(422);

    let other = app.new_user().await;
    app.post(&path, Some(&other.access_token), json!({}))
        .await
        .assert_problem(404);
}

/// A target's fingerprints laid with SQL for the search tests: `n` of them,
/// `Finding {i}` on `h{i % 40}.example.com`.
async fn lay_fingerprints(
    db: &deadpool_postgres::Client,
    user: uuid::Uuid,
    target: uuid::Uuid,
    n: i64,
) {
    db.execute(
        "INSERT INTO fingerprints (id, user_id, target_id, fingerprint, template_id, name,
                                   severity, severity_rank, host, matched_at, first_seen_at,
                                   last_seen_at)
         SELECT gen_random_uuid(), $1, $2, 't' || (i % 30) || ':https://h' || (i % 40)
                    || '.example.com/p/' || i,
                't' || (i % 30), 'Finding ' || i, 'high', 1::smallint,
                'h' || (i % 40) || '.example.com', 'https://h' || (i % 40) || '.example.com/p/' || i,
                now(), now() - i * interval '1 second'
         FROM generate_series(1, $3::bigint) AS i",
        &[&user, &target, &n],
    )
    .await
    .unwrap();
}

/// The names a text search of the target gives (every page), and its total.
async fn search(
    db: &deadpool_postgres::Client,
    user: uuid::Uuid,
    target: uuid::Uuid,
    text: &str,
) -> Option<(Vec<String>, i64)> {
    let filter = store::fingerprints::FingerprintFilter {
        text: Some(text.to_string()),
        ..Default::default()
    };
    let (mut names, mut offset) = (Vec::new(), 0);
    loop {
        let (page, total) =
            store::fingerprints::list_for_target(db, user, target, &filter, (500, offset))
                .await
                .unwrap()?;
        if page.is_empty() {
            names.sort();
            return Some((names, total));
        }
        offset += page.len() as i64;
        names.extend(page.into_iter().map(|r| r.name));
    }
}

async fn pending(db: &deadpool_postgres::Client) -> i64 {
    db.query_one("SELECT count(*) FROM fingerprint_search_pending", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_text_search_gives_the_same_answer_before_and_after_the_index_catches_up() {
    use store::fingerprint_search::{index_pending, BATCH};
    use store::fingerprints::SEARCH_CANDIDATES;
    let name = scanfleet_tests::create_database().await;
    let pool = store::connect(&database_url(&name)).unwrap();
    migrate::run(&pool).await.unwrap();
    let db = pool.get().await.unwrap();
    let (user, other_user) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let (target, other) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    for (u, t, domain) in [
        (user, target, "big.example.com"),
        (other_user, other, "other.example.com"),
    ] {
        db.execute(
            "INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')",
            &[&u, &format!("{u}@example.com")],
        )
        .await
        .unwrap();
        db.execute(
            "INSERT INTO targets (id, user_id, domain) VALUES ($1, $2, $3)",
            &[&t, &u, &domain],
        )
        .await
        .unwrap();
    }
    // Past the candidates a search fetches by id, so that a broad text
    // reads every fingerprint instead.
    let n = SEARCH_CANDIDATES + 50;
    lay_fingerprints(&db, user, target, n).await;
    lay_fingerprints(&db, other_user, other, 100).await;
    assert_eq!(
        pending(&db).await,
        n + 100,
        "every new fingerprint is pending"
    );

    // Narrow (`Finding 4242`, `Finding 42420`...), middling (one host in
    // 40) and broad (every fingerprint: past the candidates fetched by id).
    let texts = [
        "FINDING 4242",
        "h7.example.com/p/",
        "example.com",
        "no such text",
    ];
    let mut before = Vec::new();
    for text in texts {
        before.push(search(&db, user, target, text).await.unwrap());
    }
    let expect = |f: &dyn Fn(i64) -> bool| -> Vec<String> {
        let mut v: Vec<String> = (1..=n)
            .filter(|&i| f(i))
            .map(|i| format!("Finding {i}"))
            .collect();
        v.sort();
        v
    };
    let narrow = expect(&|i| i.to_string().starts_with("4242"));
    let middling = expect(&|i| i % 40 == 7);
    assert_eq!(before[0], (narrow.clone(), narrow.len() as i64));
    assert_eq!(before[1], (middling.clone(), middling.len() as i64));
    assert_eq!(before[2].1, n);
    assert_eq!(before[2].0.len() as i64, n);
    assert_eq!(before[3], (vec![], 0));

    // The index catches up, batch by batch; the answers do not change.
    let mut moved = 0;
    loop {
        let m = index_pending(&db, BATCH).await.unwrap();
        moved += m;
        if m == 0 {
            break;
        }
    }
    assert_eq!(moved as i64, n + 100);
    assert_eq!(pending(&db).await, 0);
    for (text, was) in texts.iter().zip(&before) {
        assert_eq!(
            &search(&db, user, target, text).await.unwrap(),
            was,
            "{text}"
        );
    }

    // A sighting that renames a fingerprint lists it again: found by its
    // new name at once (the index still holds the old one), not by the old.
    db.execute(
        "UPDATE fingerprints SET name = 'Renamed check' WHERE target_id = $1 AND name = 'Finding 4242'",
        &[&target],
    )
    .await
    .unwrap();
    // A sighting that changes nothing lists nothing.
    db.execute(
        "UPDATE fingerprints SET name = name, last_seen_at = now() WHERE target_id = $1",
        &[&target],
    )
    .await
    .unwrap();
    assert_eq!(pending(&db).await, 1);
    let renamed = (vec!["Renamed check".to_string()], 1);
    for round in ["pending", "indexed"] {
        assert_eq!(
            search(&db, user, target, "renamed").await.unwrap(),
            renamed,
            "{round}"
        );
        let (names, _) = search(&db, user, target, "finding 4242").await.unwrap();
        assert!(
            !names.contains(&"Finding 4242".to_string()),
            "{round}: {names:?}"
        );
        assert_eq!(names.len(), narrow.len() - 1, "{round}");
        index_pending(&db, BATCH).await.unwrap();
    }

    // Another user's target is not found; its fingerprints are not in
    // this target's answers, nor this target's in its owner's.
    assert!(search(&db, other_user, target, "finding").await.is_none());
    assert_eq!(
        search(&db, other_user, other, "finding 4242")
            .await
            .unwrap()
            .1,
        0
    );
    assert_eq!(
        search(&db, other_user, other, "finding 42")
            .await
            .unwrap()
            .1,
        1
    );

    // A deleted target's fingerprints leave the index.
    db.execute("DELETE FROM targets WHERE id = $1", &[&target])
        .await
        .unwrap();
    let left: i64 = db
        .query_one("SELECT count(*) FROM fingerprint_search", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 100);
    drop(db);
    drop(pool);
    scanfleet_tests::drop_database(&database_url("postgres"), &name);
}

/// Issue 33: a text that matches most of a target's fingerprints is
/// answered from the search table's text (not every fingerprint's row),
/// with the other filters and at any offset: the same page and total as
/// reading every fingerprint, with part of the target still pending and a
/// renamed fingerprint whose indexed text is behind.
#[tokio::test]
async fn a_broad_text_search_with_other_filters_gives_what_reading_every_fingerprint_gives() {
    use store::fingerprint_search::index_pending;
    use store::fingerprints::{list_for_target, FingerprintFilter, SEARCH_CANDIDATES};
    let name = scanfleet_tests::create_database().await;
    let pool = store::connect(&database_url(&name)).unwrap();
    migrate::run(&pool).await.unwrap();
    let db = pool.get().await.unwrap();
    let (user, target) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    db.execute(
        "INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')",
        &[&user, &format!("{user}@example.com")],
    )
    .await
    .unwrap();
    db.execute(
        "INSERT INTO targets (id, user_id, domain) VALUES ($1, $2, 'big.example.com')",
        &[&target, &user],
    )
    .await
    .unwrap();
    // Severity, status, state and change vary; one in nine on another host.
    let n = SEARCH_CANDIDATES + 2_000;
    db.execute(
        "INSERT INTO fingerprints (id, user_id, target_id, fingerprint, template_id, name,
                                   severity, severity_rank, host, matched_at, status, state,
                                   last_change, first_seen_at, last_seen_at)
         SELECT gen_random_uuid(), $1, $2, 't:' || i, 't' || (i % 30), 'Finding ' || i,
                (ARRAY['critical','high','medium','low','info'])[1 + i % 5], (i % 5)::smallint,
                CASE WHEN i % 9 = 0 THEN 'other.test' ELSE 'h' || (i % 40) || '.example.com' END,
                'https://h' || (i % 40) || '/p/' || i,
                CASE WHEN i % 17 = 0 THEN 'false_positive' ELSE 'open' END,
                CASE WHEN i % 13 = 0 THEN 'fixed' ELSE 'open' END,
                CASE WHEN i % 3 = 0 THEN 'new' ELSE 'recurring' END,
                now(), now() - (i % 500) * interval '1 second'
         FROM generate_series(1, $3::bigint) AS i",
        &[&user, &target, &n],
    )
    .await
    .unwrap();
    // Most of the target indexed, the rest pending; then a renamed one
    // pending with its old text still in the index.
    index_pending(&db, n - 1_500).await.unwrap();
    let renamed = db
        .execute(
            "UPDATE fingerprints SET name = 'Renamed check', host = 'renamed.test'
             WHERE target_id = $1 AND name IN ('Finding 18', 'Finding 20')",
            &[&target],
        )
        .await
        .unwrap();
    assert_eq!(renamed, 2);
    let expected = |filter: &FingerprintFilter, (limit, offset): (i64, i64)| {
        let db = &db;
        let filter = filter.clone();
        async move {
            let rank = filter.severity.map(|s| i16::from(s.rank()));
            let pattern = format!("%{}%", filter.text.clone().unwrap().to_lowercase());
            let rows = db
                .query(
                    "SELECT fp.id FROM fingerprints fp
                     WHERE fp.target_id = $1 AND ($2::text IS NULL OR fp.state = $2)
                       AND ($3::text IS NULL OR fp.status = $3)
                       AND ($4::smallint IS NULL OR fp.severity_rank = $4)
                       AND ($5::text IS NULL OR CASE WHEN $5 = 'fixed' THEN fp.state = 'fixed'
                            ELSE fp.state = 'open' AND fp.last_change = $5 END)
                       AND lower(fp.name || ' ' || fp.template_id || ' ' || fp.host || ' '
                                 || fp.matched_at) LIKE $6
                     ORDER BY fp.severity_rank, fp.first_seen_at DESC, fp.id",
                    &[
                        &target,
                        &filter.state,
                        &filter.status,
                        &rank,
                        &filter.change,
                        &pattern,
                    ],
                )
                .await
                .unwrap();
            let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.get(0)).collect();
            let total = ids.len() as i64;
            let page = ids
                .into_iter()
                .skip(offset as usize)
                .take(limit as usize)
                .collect::<Vec<_>>();
            (page, total)
        }
    };
    let text = |t: &str| Some(t.to_string());
    let filters = [
        FingerprintFilter {
            text: text("EXAMPLE.com"),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("finding"),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("example.com"),
            severity: Some(scanfleet_common::Severity::Low),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("example.com"),
            status: Some(scanfleet_core::fingerprint::FindingStatus::FalsePositive),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("/p/"),
            change: Some("fixed".into()),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("/p/"),
            state: Some("open".into()),
            change: Some("new".into()),
            ..Default::default()
        },
        // A third of the target: sampled as broad, many missed.
        FingerprintFilter {
            text: text("h1"),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("h1"),
            severity: Some(scanfleet_common::Severity::High),
            ..Default::default()
        },
        FingerprintFilter {
            text: text("renamed"),
            ..Default::default()
        },
    ];
    for round in ["some pending", "all indexed"] {
        for filter in &filters {
            for page in [(50, 0), (500, 9_000), (50, 11_990), (50, 20_000)] {
                let (rows, total) = list_for_target(&db, user, target, filter, page)
                    .await
                    .unwrap()
                    .unwrap();
                let got: Vec<uuid::Uuid> = rows.iter().map(|r| r.id).collect();
                assert_eq!(
                    (got, total),
                    expected(filter, page).await,
                    "{round}: {filter:?} {page:?}"
                );
            }
        }
        while index_pending(&db, 5_000).await.unwrap() > 0 {}
    }
    drop(db);
    drop(pool);
    scanfleet_tests::drop_database(&database_url("postgres"), &name);
}
