//! The fleet's registry with real processes: a node appears within a
//! heartbeat of starting, shows the scan it runs, turns `lost` after
//! SIGKILL, and leaves the list when it stops in good order; only
//! administrators read it.

use std::time::{Duration, Instant};

use scanfleet_tests::fleet::fleet_with_lab;
use scanfleet_tests::lab::{lab_hosts, Lab, DOMAIN};
use serde_json::Value;

/// Polls `GET /admin/nodes` until `done` holds for the list.
async fn wait_nodes(
    fleet: &scanfleet_tests::fleet::Fleet,
    token: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let list = fleet.get("/admin/nodes", token).await;
        let list = list.as_array().cloned().unwrap_or_default();
        if done(&list) {
            return list;
        }
        assert!(Instant::now() < deadline, "{what}: {list:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn named<'a>(list: &'a [Value], name: &str) -> Option<&'a Value> {
    list.iter().find(|n| {
        n["id"]
            .as_str()
            .is_some_and(|id| id.starts_with(&format!("scanner-{name}-")))
    })
}

#[tokio::test]
async fn nodes_appear_show_their_scans_turn_lost_when_killed_and_leave_when_stopped() {
    // Slow answers keep the scan running while it is looked at.
    let lab = Lab::start(Duration::from_millis(150)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    // The first user is made an administrator before its token is used
    // (the api keeps who a token is for a while).
    let token = fleet.user().await;
    fleet
        .db()
        .await
        .execute("UPDATE users SET role = 'admin'", &[])
        .await
        .expect("admin");
    // A user who is not an administrator is refused.
    let other = fleet.user().await;
    let (status, _) = fleet
        .call(reqwest::Method::GET, "/admin/nodes", &other, None)
        .await;
    assert_eq!(status, 403);

    let mut a = fleet.node("alpha", &[]);
    let mut b = fleet.node("beta", &[]);
    let list = wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(60),
        "both nodes live",
        |l| {
            ["alpha", "beta"]
                .iter()
                .all(|n| named(l, n).is_some_and(|n| n["state"] == "live"))
        },
    )
    .await;
    let alpha = named(&list, "alpha").expect("alpha");
    assert_eq!(alpha["host"], "alpha");
    assert_eq!(alpha["slots_total"], 2);
    assert_eq!(alpha["version"], env!("CARGO_PKG_VERSION"));
    assert!(alpha["heartbeat_age_secs"].as_f64().expect("age") < 3.0);

    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "full").await;
    let list = wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(30),
        "the scan on a node",
        |l| {
            l.iter().any(|n| {
                n["running_scan_ids"]
                    .as_array()
                    .is_some_and(|ids| ids.iter().any(|i| i == scan.as_str()))
            })
        },
    )
    .await;
    let holder = list
        .iter()
        .find(|n| n["slots_used"] == 1)
        .expect("the node running it");
    let holder_is_alpha = holder["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("scanner-alpha-"));
    let (killed, kept) = if holder_is_alpha {
        (&mut a, "beta")
    } else {
        (&mut b, "alpha")
    };
    let killed_name = killed.name.clone();
    killed.kill9();
    // Silent past its 3 s lease: lost.
    wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(20),
        "the killed node lost",
        |l| {
            named(l, &killed_name).is_some_and(|n| n["state"] == "lost")
                && named(l, kept).is_some_and(|n| n["state"] == "live")
        },
    )
    .await;

    // Stopped in good order (its scans stopped first, so it need not wait
    // for them), a node takes its entry away.
    let (status, body) = fleet
        .call(
            reqwest::Method::POST,
            &format!("/scans/{scan}/stop"),
            &token,
            None,
        )
        .await;
    assert!(status == 200 || status == 409, "{status} {body}");
    let survivor = if holder_is_alpha { &mut b } else { &mut a };
    assert!(
        survivor.terminate(Duration::from_secs(60)),
        "the node stops"
    );
    wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(10),
        "the stopped node gone",
        |l| named(l, kept).is_none(),
    )
    .await;
}

/// Issue 34, item 5: an administrator drains a node through the API. It
/// lists itself `draining` at once, takes no more jobs (a new scan goes to
/// the other node), lets its running scan finish, then leaves the list and
/// exits cleanly. An unknown node is a 404 problem, a user who is not an
/// administrator a 403; the metrics count the nodes by state.
#[tokio::test]
async fn a_node_drained_through_the_api_finishes_its_scan_takes_no_more_and_exits() {
    let lab = Lab::start(Duration::from_millis(100)).await;
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[]).await;
    let _api = fleet.api(&[]).await;
    let token = fleet.user().await;
    fleet
        .db()
        .await
        .execute("UPDATE users SET role = 'admin'", &[])
        .await
        .expect("admin");
    let one_slot = [("SCANFLEET_SCANNER__CONCURRENCY", "1")];
    let mut first = fleet.node("first", &one_slot);
    let list = wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(60),
        "the first node live",
        |l| named(l, "first").is_some_and(|n| n["state"] == "live"),
    )
    .await;
    let first_id = named(&list, "first").expect("first")["id"]
        .as_str()
        .expect("id")
        .to_string();

    let target = fleet.target(&token, DOMAIN).await;
    let running = fleet.scan(&token, &target, "full").await;
    wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(30),
        "the scan on the first node",
        |l| {
            named(l, "first").is_some_and(|n| {
                n["running_scan_ids"]
                    .as_array()
                    .is_some_and(|ids| ids.iter().any(|i| i == running.as_str()))
            })
        },
    )
    .await;

    let other = fleet.user().await;
    let path = format!("/admin/nodes/{first_id}/drain");
    let (status, _) = fleet.call(reqwest::Method::POST, &path, &other, None).await;
    assert_eq!(status, 403);
    let (status, body) = fleet
        .call(
            reqwest::Method::POST,
            "/admin/nodes/scanner-nobody-0/drain",
            &token,
            None,
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["status"], 404, "a problem: {body}");
    let (status, body) = fleet.call(reqwest::Method::POST, &path, &token, None).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["id"], first_id.as_str());
    assert_eq!(body["state"], "draining");

    // A scan created now waits: the draining node takes no more jobs.
    let queued = fleet.scan(&token, &target, "quick").await;
    let listed = wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(10),
        "the node says it drains",
        |l| named(l, "first").is_some_and(|n| n["state"] == "draining"),
    )
    .await;
    assert_eq!(named(&listed, "first").expect("first")["slots_used"], 1);
    let metrics = fleet
        .http
        .get(format!("{}/metrics", fleet.base()))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    for line in [
        r#"scanfleet_nodes{state="draining"} 1"#,
        r#"scanfleet_nodes{state="live"} 0"#,
        "scanfleet_slots_total 1",
        "scanfleet_slots_used 1",
        "scanfleet_queue_depth 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        metrics.contains("scanfleet_queue_oldest_waiting_seconds"),
        "{metrics}"
    );

    // The running scan completes; the node leaves and exits by itself.
    let done = fleet
        .wait_finished(&token, &running, Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !first.exited() {
        assert!(Instant::now() < deadline, "the drained node did not exit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_nodes(
        &fleet,
        &token,
        Duration::from_secs(10),
        "the drained node gone",
        |l| named(l, "first").is_none(),
    )
    .await;
    let (_, queued_now) = fleet
        .call(
            reqwest::Method::GET,
            &format!("/scans/{queued}"),
            &token,
            None,
        )
        .await;
    assert_eq!(queued_now["status"], "queued", "{queued_now}");
    let log = first.log_text();
    assert!(
        !log.contains(&queued),
        "the drained node took the new scan:\n{log}"
    );

    // Another node takes the waiting scan at once.
    let _second = fleet.node("second", &[]);
    let done = fleet
        .wait_finished(&token, &queued, Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "completed", "{done}");
}
