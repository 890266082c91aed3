//! The scan pipeline with real processes: the api, scanner nodes and the
//! scheduler started from their binaries, scanning lab servers on
//! 127.0.0.1 through the nodes' hosts map (issue 8).

use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::Method;
use scanfleet_tests::fleet::{fleet_with_lab, Fleet, PgProxy};
use scanfleet_tests::lab::{full_findings, lab_hosts, Lab, API_HOST, DOMAIN, PORTAL_HOST};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// Follows a scan's WebSocket to its close: the messages and the close code.
async fn follow(fleet: &Fleet, token: &str, scan: &str) -> (Vec<Value>, Option<u16>) {
    let mut ws = fleet.websocket(token, scan).await;
    let mut messages = Vec::new();
    let mut code = None;
    while let Some(m) = tokio::time::timeout(Duration::from_secs(90), ws.next())
        .await
        .expect("websocket went silent")
    {
        match m {
            Ok(Message::Text(t)) => messages.push(serde_json::from_str(&t).expect("json message")),
            Ok(Message::Close(frame)) => {
                code = frame.map(|f| u16::from(f.code));
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    (messages, code)
}

fn assert_well_formed(messages: &[Value], scan: &str) {
    let mut last_progress = 0;
    for m in messages {
        for field in scanfleet_tests::PROGRESS_MESSAGE_FIELDS {
            assert!(m.get(field).is_some(), "{field} missing in {m}");
        }
        assert_eq!(m["scan_id"], scan);
        assert!(
            matches!(m["type"].as_str(), Some("progress" | "finding" | "status")),
            "{m}"
        );
        let p = m["progress"].as_u64().unwrap();
        assert!(
            p >= last_progress,
            "progress went back from {last_progress} to {p}"
        );
        last_progress = p;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_scan_runs_on_two_nodes_and_is_followed_live_to_the_end() {
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let _a = fleet.node("node-a", &[]);
    let _b = fleet.node("node-b", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;

    let (messages, code) = follow(&fleet, &token, &scan).await;
    assert_eq!(code, Some(1000));
    assert_well_formed(&messages, &scan);
    let last = messages.last().expect("messages");
    assert_eq!(last["type"], "status");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["progress"], 100);
    assert_eq!(last["findings_count"], 12);
    assert!(messages.iter().any(|m| m["type"] == "finding"));
    assert!(messages.iter().any(|m| m["stage"] == "DISCOVER"));

    // The WebSocket relays the stream live; Postgres follows once ingested.
    let detail = fleet
        .wait_scan(&token, &scan, Duration::from_secs(10), |s| {
            s["status"] == "completed"
        })
        .await;
    assert_eq!(detail["status"], "completed");
    assert_eq!(detail["progress"], 100);
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    assert_eq!(detail["high_count"], 3);
    assert_eq!(detail["low_count"], 3);
    assert_eq!(detail["info_count"], 6);
    assert!(detail["completed_at"].is_string() && detail["started_at"].is_string());
    // The node closed what it kept alive to the scanned hosts at the end.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lab.open_connections() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} connection(s) still open on the lab after the scan",
            lab.open_connections()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let intel = fleet.get(&format!("/scans/{scan}/intel"), &token).await;
    let mut hosts: Vec<&str> = intel["hosts"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    hosts.sort();
    assert_eq!(hosts, vec![API_HOST, PORTAL_HOST, DOMAIN]);

    let summary = fleet.get("/dashboard/summary", &token).await;
    assert_eq!(summary["high_count"], 3, "{summary}");

    // A finding keeps the exchange the engine matched on and the
    // template's classification.
    let git = detail["vulnerabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["template_id"] == "git-config-exposure")
        .expect("the git finding");
    let one = fleet
        .get(
            &format!("/findings/{}", git["id"].as_str().unwrap()),
            &token,
        )
        .await;
    assert!(
        one["request"]
            .as_str()
            .unwrap()
            .starts_with("GET /.git/config HTTP/1.1\r\n"),
        "{one}"
    );
    let response = one["response"].as_str().unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{one}");
    assert!(response.contains("[core]"), "{one}");
    assert_eq!(
        one["classification"]["cwe_ids"],
        serde_json::json!(["CWE-538"])
    );
    assert_eq!(one["classification"]["cvss_score"], 7.5);
    assert_eq!(one["references"].as_array().unwrap().len(), 1);

    let notes = fleet.get("/notifications", &token).await;
    let done: Vec<&Value> = notes
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["scan_id"] == scan.as_str())
        .collect();
    assert_eq!(done.len(), 1, "{notes}");
    assert_eq!(done[0]["type"], "scan_complete");
    assert_eq!(done[0]["data"]["total_findings"], 12);
    assert_eq!(done[0]["data"]["low"], 3);
    assert_eq!(done[0]["data"]["high"], 3);

    // A listener arriving after the end gets the final snapshot and the close.
    let (late, code) = follow(&fleet, &token, &scan).await;
    assert_eq!(code, Some(1000));
    assert_eq!(late.len(), 1);
    assert_eq!(late[0]["status"], "completed");
    assert_eq!(late[0]["findings_count"], 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_and_recon_scans_run_their_narrower_selections_and_wildcards_add_no_hosts() {
    let lab = Lab::start(Duration::ZERO).await;
    let mut hosts = lab_hosts();
    hosts.extend(["wild.example.test", "*.wild.example.test"]);
    let fleet = fleet_with_lab(&lab, &hosts, &[]).await;
    let _api = fleet.api(&[]).await;
    let metrics_addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let _a = fleet.node(
        "node-a",
        &[("SCANFLEET_SCANNER__METRICS_BIND", metrics_addr.as_str())],
    );
    let token = fleet.user().await;

    let target = fleet.target(&token, DOMAIN).await;
    let quick = fleet.scan(&token, &target, "quick").await;
    let recon = fleet.scan(&token, &target, "recon").await;
    let quick = fleet
        .wait_finished(&token, &quick, Duration::from_secs(60))
        .await;
    assert_eq!(quick["status"], "completed", "{quick}");
    // The domain only; medium and above, plus the probe.
    assert_eq!(
        Fleet::finding_keys(&quick),
        vec![
            format!("git-config-exposure http://{DOMAIN}/.git/config"),
            format!("http-probe http://{DOMAIN}/"),
        ]
    );
    let recon = fleet
        .wait_finished(&token, &recon, Duration::from_secs(60))
        .await;
    assert_eq!(recon["status"], "completed", "{recon}");
    let mut expected: Vec<String> = lab_hosts()
        .iter()
        .flat_map(|h| {
            [
                format!("express-detect http://{h}/"),
                format!("http-probe http://{h}/"),
            ]
        })
        .collect();
    expected.sort();
    assert_eq!(Fleet::finding_keys(&recon), expected);

    // Every word resolves under a wildcard record: only the page's host counts.
    let wild = fleet.target(&token, "wild.example.test").await;
    let scan = fleet.scan(&token, &wild, "recon").await;
    let scan = fleet
        .wait_finished(&token, &scan, Duration::from_secs(60))
        .await;
    let probed: Vec<String> = Fleet::finding_keys(&scan)
        .into_iter()
        .filter(|k| k.starts_with("http-probe "))
        .collect();
    assert_eq!(
        probed,
        vec![
            "http-probe http://legacy-portal.wild.example.test/".to_string(),
            "http-probe http://wild.example.test/".to_string(),
        ]
    );

    // The node's own metrics listener saw the scans.
    let text = reqwest::get(format!("http://{metrics_addr}/metrics"))
        .await
        .expect("node metrics")
        .text()
        .await
        .unwrap();
    for name in [
        "scanfleet_scanner_findings_total",
        "scanfleet_scanner_scans_finished_total{status=\"completed\"} 3",
        "scanfleet_scanner_stage_duration_seconds",
        "scanfleet_scanner_template_jobs_total",
        "scanfleet_scanner_scans_running 0",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_running_scan_ends_it_on_its_node_and_records_nothing_after_the_stop() {
    let lab = Lab::start(Duration::from_millis(150)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let _a = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet
        .wait_scan(&token, &scan, Duration::from_secs(60), |s| {
            s["stage"] == "VALIDATE"
        })
        .await;
    assert!(fleet.running_node(&scan).await.is_some());

    let (status, body) = fleet
        .call(
            Method::POST,
            &format!("/scans/{scan}/stop"),
            &token,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "stopped");
    let stopped_at = Instant::now();
    // The node lets go of the scan within 2 seconds (its heartbeat ends).
    while fleet.running_node(&scan).await.is_some() {
        assert!(
            stopped_at.elapsed() < Duration::from_secs(2),
            "node still running the scan"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let requests = lab.requests.load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(lab.requests.load(std::sync::atomic::Ordering::Relaxed) <= requests + 25);

    // Findings recorded = distinct findings before the first terminal event.
    use fred::interfaces::StreamsInterface;
    let entries: Vec<(String, std::collections::HashMap<String, String>)> = fleet
        .redis()
        .await
        .xrange_values(
            fleet.keys().scan_events_stream(scan.parse().unwrap()),
            "-",
            "+",
            None,
        )
        .await
        .unwrap();
    let mut before_stop = std::collections::BTreeSet::new();
    let mut after_stop = 0;
    let mut stopped = false;
    for (_, fields) in &entries {
        let e: Value = serde_json::from_str(&fields["event"]).unwrap();
        if e["kind"] == "status" && e["status"] == "stopped" {
            stopped = true;
        } else if e["kind"] == "finding" {
            let key = format!(
                "{}:{}",
                e["template_id"].as_str().unwrap(),
                e["matched_at"].as_str().unwrap()
            );
            if stopped {
                after_stop += 1;
            } else {
                before_stop.insert(key);
            }
        }
    }
    assert!(stopped);
    // The ingester may still be applying the events before the stop.
    let expected = before_stop.len() as u64;
    let detail = fleet
        .wait_scan(&token, &scan, Duration::from_secs(10), |s| {
            s["findings_count"].as_u64() == Some(expected)
        })
        .await;
    assert_eq!(detail["status"], "stopped");
    assert!(
        after_stop > 0 || expected > 0,
        "the scan found nothing at all"
    );
    // And it stays there: nothing after the stop is recorded.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let detail = fleet.get(&format!("/scans/{scan}"), &token).await;
    assert_eq!(
        detail["findings_count"].as_u64(),
        Some(expected),
        "{after_stop} after the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_stopped_while_queued_is_never_run() {
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "quick").await;
    let (status, _) = fleet
        .call(
            Method::POST,
            &format!("/scans/{scan}/stop"),
            &token,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200);
    // A later scan on the same queue shows when the node has gone past it.
    let next = fleet.scan(&token, &target, "quick").await;
    let _a = fleet.node("node-a", &[]);
    fleet
        .wait_finished(&token, &next, Duration::from_secs(60))
        .await;
    let detail = fleet.get(&format!("/scans/{scan}"), &token).await;
    assert_eq!(detail["status"], "stopped");
    assert_eq!(detail["findings_count"], 0);
    let attempts = fleet.attempts(&scan).await;
    assert_eq!(attempts, None, "the node took up a stopped scan");
}

/// Waits for `scan` to fail, and checks its `scan_failed` notification
/// names `reason`.
async fn assert_failed_with(fleet: &Fleet, token: &str, scan: &str, reason: &str) {
    let detail = fleet
        .wait_finished(token, scan, Duration::from_secs(60))
        .await;
    assert_eq!(detail["status"], "failed", "{detail}");
    let notes = fleet.get("/notifications", token).await;
    let note = notes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["scan_id"] == scan)
        .cloned()
        .expect("notification");
    assert_eq!(note["type"], "scan_failed");
    assert!(note["message"].as_str().unwrap().contains(reason), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_scan_is_replaced_by_the_other_and_the_findings_are_exactly_a_clean_run()
{
    let lab = Lab::start(Duration::from_millis(60)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let mut a = fleet.node("node-a", &[]);
    let mut b = fleet.node("node-b", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    let node = fleet.running_on(&token, &scan).await;
    if node.starts_with("scanner-node-a") {
        a.kill9();
    } else {
        b.kill9();
    }
    let detail = fleet
        .wait_finished(&token, &scan, Duration::from_secs(90))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(detail["progress"], 100);
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    assert_eq!(detail["findings_count"], 12);
    let attempts = fleet.attempts(&scan).await;
    assert_eq!(attempts, Some(2), "node-a's log:\n{}", a.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_with_no_other_node_alive_fails_the_scan_with_a_notification() {
    let lab = Lab::start(Duration::from_millis(60)).await;
    let fleet = fleet_with_lab(
        &lab,
        &lab_hosts(),
        &[
            ("SCANFLEET_SCHEDULER__STUCK_AFTER_SECS", "4"),
            ("SCANFLEET_SCHEDULER__REAP_INTERVAL_SECS", "1"),
        ],
    )
    .await;
    let _api = fleet.api(&[]).await;
    let _scheduler = fleet.scheduler(&[]);
    let mut a = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &scan).await;
    a.kill9();
    let killed = Instant::now();
    let detail = fleet
        .wait_finished(&token, &scan, Duration::from_secs(30))
        .await;
    assert_eq!(detail["status"], "failed", "{detail}");
    // Silent for 4 s, found on a 1 s pass; the rest is slack for a busy machine.
    assert!(
        killed.elapsed() < Duration::from_secs(15),
        "{:?}",
        killed.elapsed()
    );
    let notes = fleet.get("/notifications", &token).await;
    let failed: Vec<&Value> = notes
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["scan_id"] == scan.as_str() && n["type"] == "scan_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{notes}");
    assert!(failed[0]["message"]
        .as_str()
        .unwrap()
        .contains("stopped responding"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_the_api_mid_scan_loses_no_event_and_a_reconnecting_listener_gets_the_snapshot()
{
    let lab = Lab::start(Duration::from_millis(40)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let mut api = fleet.api(&[]).await;
    let _a = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &scan).await;
    api.kill9();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _api = fleet.api(&[]).await;
    let (messages, code) = follow(&fleet, &token, &scan).await;
    assert_eq!(code, Some(1000));
    assert_well_formed(&messages, &scan);
    assert_eq!(messages[0]["type"], "status");
    let last = messages.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["findings_count"], 12);
    let detail = fleet
        .wait_scan(&token, &scan, Duration::from_secs(30), |s| {
            s["status"] == "completed"
        })
        .await;
    assert_eq!(detail["status"], "completed");
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_unreachable_for_ten_seconds_loses_nothing() {
    let lab = Lab::start(Duration::from_millis(20)).await;
    let proxy = PgProxy::start(PgProxy::upstream()).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let db_url = proxy.url(&fleet.db_name);
    let _api = fleet.api(&[("DATABASE_URL", db_url.as_str())]).await;
    let _a = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet
        .wait_scan(&token, &scan, Duration::from_secs(60), |s| {
            s["status"] == "running"
        })
        .await;
    proxy.set_down(true);
    tokio::time::sleep(Duration::from_secs(10)).await;
    proxy.set_down(false);
    let detail = fleet
        .wait_scan(&token, &scan, Duration::from_secs(60), |s| {
            s["status"] == "completed" && s["findings_count"] == 12
        })
        .await;
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    let notes = fleet.get("/notifications", &token).await;
    assert_eq!(
        notes
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["scan_id"] == scan.as_str())
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_cannot_be_reached_fails_with_the_reason_in_the_notification() {
    let lab = Lab::start(Duration::ZERO).await;
    // `down.example.test` resolves, but nothing listens where it points.
    let mut env = lab.node_env(&lab_hosts());
    env.retain(|(k, _)| k != "SCANFLEET_SCANNER__HOSTS" && k != "SCANFLEET_SCANNER__CONNECT_TO");
    env.push((
        "SCANFLEET_SCANNER__HOSTS".into(),
        "down.example.test=127.0.0.2".into(),
    ));
    let fleet = Fleet::new(&env).await;
    let _api = fleet.api(&[]).await;
    let _a = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let nowhere = fleet.target(&token, "nowhere.example.test").await;
    let down = fleet.target(&token, "down.example.test").await;
    let s1 = fleet.scan(&token, &nowhere, "quick").await;
    let s2 = fleet.scan(&token, &down, "quick").await;
    // The failure says why the host did not answer, not only that it did
    // not.
    for (scan, reason) in [(s1, "does not resolve"), (s2, "could not connect")] {
        assert_failed_with(&fleet, &token, &scan, reason).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_past_its_engine_deadline_or_taken_up_a_fourth_time_fails_with_the_reason() {
    let lab = Lab::start(Duration::from_millis(300)).await;
    let fleet = fleet_with_lab(
        &lab,
        &lab_hosts(),
        &[("SCANFLEET_SCANNER__DEADLINE_FULL_SECS", "2")],
    )
    .await;
    let _api = fleet.api(&[]).await;
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;

    // Three earlier attempts ended with their node gone.
    let crashed = fleet.scan(&token, &target, "quick").await;
    use fred::interfaces::KeysInterface;
    let _: () = fleet
        .redis()
        .await
        .set(
            fleet.keys().scan_attempts(crashed.parse().unwrap()),
            3,
            None,
            None,
            false,
        )
        .await
        .unwrap();
    let slow = fleet.scan(&token, &target, "full").await;
    let _a = fleet.node("node-a", &[]);

    for (scan, reason) in [(crashed, "interrupted 3 times"), (slow, "deadline of 2 s")] {
        assert_failed_with(&fleet, &token, &scan, reason).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_drained_by_sigterm_mid_scan_exits_in_its_grace_time_and_the_scan_completes_elsewhere(
) {
    // Slow enough that the scan outlasts the one-second drain: at 60 ms a
    // response it ended 1.4 s after it was taken, inside the drain, on a
    // quiet machine.
    let lab = Lab::start(Duration::from_millis(250)).await;
    let fleet = fleet_with_lab(
        &lab,
        &lab_hosts(),
        &[("SCANFLEET_SCANNER__DRAIN_SECS", "1")],
    )
    .await;
    let _api = fleet.api(&[]).await;
    let mut a = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    fleet.running_on(&token, &scan).await;
    // The replacement starts (a rolling restart), then the old node is told to go.
    let _b = fleet.node("node-b", &[]);
    assert!(
        a.terminate(Duration::from_secs(5)),
        "the node did not exit within its drain time:\n{}",
        a.log_text()
    );
    let detail = fleet
        .wait_finished(&token, &scan, Duration::from_secs(90))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(Fleet::finding_keys(&detail), full_findings(&lab_hosts()));
    // Handed back, not finished by the leaving node: the other one took it up.
    let attempts = fleet.attempts(&scan).await;
    assert_eq!(attempts, Some(2), "node-a's log:\n{}", a.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_left_pending_by_a_dead_api_process_are_claimed_and_ingested_by_another() {
    use fred::interfaces::StreamsInterface;
    let lab = Lab::start(Duration::ZERO).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let mut api = fleet.api(&[]).await;
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "quick").await;
    api.kill9();

    // A node's events, delivered to an api process that then died before
    // acknowledging them.
    let redis = fleet.redis().await;
    let stream = fleet.keys().scan_events_stream(scan.parse().unwrap());
    let index = fleet.keys().scan_events_index();
    let id: uuid::Uuid = scan.parse().unwrap();
    let finding = json!({"kind": "finding", "template_id": "git-config-exposure",
        "name": "Git config", "severity": "high", "host": DOMAIN,
        "matched_at": format!("http://{DOMAIN}/.git/config")});
    for event in [
        json!({"kind": "status", "status": "pending"}),
        json!({"kind": "status", "status": "running"}),
        finding,
        json!({"kind": "status", "status": "completed"}),
    ] {
        let mut e = event;
        e["scan_id"] = json!(id);
        e["at"] = json!(chrono::Utc::now());
        let _: String = redis
            .xadd(&stream, false, None, "*", ("event", e.to_string()))
            .await
            .unwrap();
    }
    let _: String = redis
        .xadd(&index, false, None, "*", ("scan_id", scan.as_str()))
        .await
        .unwrap();
    let taken: fred::types::Value = redis
        .xreadgroup(
            "ingesters",
            "api-that-died",
            Some(10),
            None,
            false,
            index.as_str(),
            ">",
        )
        .await
        .unwrap();
    assert!(!taken.is_null(), "the dead consumer did not take the entry");

    let _api = fleet.api(&[]).await;
    let detail = fleet
        .wait_scan(&token, &scan, Duration::from_secs(40), |s| {
            s["status"] == "completed"
        })
        .await;
    assert_eq!(detail["findings_count"], 1);
    assert_eq!(detail["progress"], 100);
}
