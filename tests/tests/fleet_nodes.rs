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
