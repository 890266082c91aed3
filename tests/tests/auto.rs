//! The `auto` engine end to end (issue 35): scanner nodes started from
//! their binary scan the stack lab (hosts that present as WordPress,
//! Jenkins, Grafana, Tomcat, nginx, and one with nothing to detect;
//! `docker/lab/stacks.json`) with templates of the public corpus;
//! detection names each host's technologies with evidence, `full` finds
//! each host's known findings and `auto` the same, the coverage adds up,
//! and the per-host request ceiling holds.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use scanfleet_engine::engine::load::load_templates;
use scanfleet_scanner::auto::techmap::TechMap;
use scanfleet_tests::fleet::Fleet;
use scanfleet_tests::stacks::{
    corpus_subset, stack_host, stack_hosts, stack_templates, StackLab, BLANK, NGINX,
};
use serde_json::{json, Value};

async fn stack_fleet(lab: &StackLab, templates: Option<&std::path::Path>) -> Fleet {
    let mut env = lab.node_env(&stack_hosts());
    if let Some(dir) = templates {
        env.push((
            "SCANFLEET_SCANNER__TEMPLATES_DIR".into(),
            dir.display().to_string(),
        ));
    }
    Fleet::new(&env).await
}

async fn finished(fleet: &Fleet, token: &str, target: &str, engine: &str) -> (String, Value) {
    let scan = fleet.scan(token, target, engine).await;
    let detail = completed(fleet, token, &scan).await;
    (scan, detail)
}

/// `scan` once finished; it must have completed.
async fn completed(fleet: &Fleet, token: &str, scan: &str) -> Value {
    let detail = fleet
        .wait_finished(token, scan, Duration::from_secs(240))
        .await;
    assert_eq!(detail["status"], "completed", "{detail}");
    detail
}

/// The finding keys of a scan without the probe's own.
fn vulnerability_keys(detail: &Value) -> Vec<String> {
    Fleet::finding_keys(detail)
        .into_iter()
        .filter(|k| !k.starts_with("http-probe "))
        .collect()
}

/// The coverage of a scan, once the ingester has it (it follows the
/// terminal status by a moment at most).
async fn coverage(fleet: &Fleet, token: &str, scan: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let c = fleet.get(&format!("/scans/{scan}/coverage"), token).await;
        if c["hosts"].as_array().is_some_and(|h| !h.is_empty())
            || tokio::time::Instant::now() > deadline
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Run plus every skip is the node's template count, for every host.
fn assert_adds_up(c: &Value, templates_total: u64) {
    for h in c["hosts"].as_array().expect("hosts") {
        let t = &h["templates"];
        let skipped: u64 = t["skipped"]
            .as_object()
            .expect("skipped")
            .values()
            .map(|v| v.as_u64().expect("count"))
            .sum();
        assert_eq!(
            t["run"].as_u64().unwrap() + skipped,
            t["total"].as_u64().unwrap(),
            "{h}"
        );
        assert_eq!(t["total"].as_u64().unwrap(), templates_total, "{h}");
        assert!(t["run"].as_u64().unwrap() > 0, "never zero templates: {h}");
        assert!(h["requests"].as_u64().unwrap() > 0, "{h}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detection_names_each_hosts_technologies_and_auto_finds_what_full_finds() {
    // The lab products' own templates and every detection template.
    let Some(templates) = corpus_subset(&stack_templates()) else {
        println!("template corpus not found; skipping");
        return;
    };
    let lab = StackLab::start().await;
    let fleet = stack_fleet(&lab, Some(&templates)).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[("SCANFLEET_SCANNER__CONCURRENCY", "3")]);
    let token = fleet.user().await;

    // Every host's two scans are queued at once (the node runs three at a
    // time), then read as each finishes.
    let mut scans = Vec::new();
    for host in stack_hosts() {
        let target = fleet.target(&token, host).await;
        let full_scan = fleet.scan(&token, &target, "full").await;
        let auto_scan = fleet.scan(&token, &target, "auto").await;
        scans.push((host, full_scan, auto_scan));
    }
    let mut per_host: BTreeMap<&str, (Vec<String>, Vec<String>, Value)> = BTreeMap::new();
    for (host, full_scan, auto_scan) in scans {
        let full = completed(&fleet, &token, &full_scan).await;
        let auto = completed(&fleet, &token, &auto_scan).await;
        let c = coverage(&fleet, &token, &auto_scan).await;
        let full_c = coverage(&fleet, &token, &full_scan).await;
        // Full runs every runnable template: nothing absent.
        for h in full_c["hosts"].as_array().unwrap() {
            assert!(
                h["templates"]["skipped"]["technology_absent"].is_null(),
                "{h}"
            );
        }
        per_host.insert(
            host,
            (vulnerability_keys(&full), vulnerability_keys(&auto), c),
        );
    }

    let total = per_host.values().next().expect("hosts").2["hosts"][0]["templates"]["total"]
        .as_u64()
        .expect("total");
    for (host, (full, auto, c)) in &per_host {
        assert_eq!(full, auto, "{host}: auto must find what full finds");
        assert_adds_up(c, total);
        let hosts = c["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 1, "{c}");
        assert_eq!(hosts[0]["host"], *host);
        let techs = hosts[0]["technologies"].as_array().unwrap();
        let known = stack_host(host);
        assert_eq!(
            full,
            &known.findings,
            "{host}: full must find the known findings of docker/lab/stacks.json; it found {}",
            serde_json::to_string_pretty(full).unwrap_or_default()
        );
        for expected in &known.technologies {
            let t = techs
                .iter()
                .find(|t| t["name"] == expected.name)
                .unwrap_or_else(|| panic!("{host}: {} not detected in {techs:?}", expected.name));
            assert!(
                t["evidence"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e.as_str().unwrap().starts_with(&expected.evidence)),
                "{host}: {} lacks evidence {}: {t}",
                expected.name,
                expected.evidence
            );
            if let Some(version) = &expected.version {
                assert_eq!(t["version"], version.as_str(), "{host}: {t}");
            }
        }
    }
    // The blank host: nothing detected, the baseline ran.
    let blank = &per_host[BLANK].2["hosts"][0];
    assert_eq!(blank["technologies"], json!([]), "{blank}");
    assert!(
        blank["templates"]["skipped"]["technology_absent"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_on_a_host_with_nothing_to_detect_runs_the_baseline_and_coverage_is_the_owners() {
    let lab = StackLab::start().await;
    // The built-in pack.
    let fleet = stack_fleet(&lab, None).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, BLANK).await;
    let (scan, detail) = finished(&fleet, &token, &target, "auto").await;
    assert_eq!(detail["engine"], "auto");

    let pack = load_templates(&[]).expect("pack");
    let map = TechMap::build(&pack.templates);
    let expected_run = (map.detect_stage().len() + map.baseline().len()) as u64;
    let c = coverage(&fleet, &token, &scan).await;
    assert_adds_up(&c, (pack.templates.len() + pack.left_out.len()) as u64);
    let host = &c["hosts"][0];
    assert_eq!(host["host"], BLANK);
    assert_eq!(host["technologies"], json!([]));
    assert_eq!(host["templates"]["run"], expected_run, "{host}");
    assert!(map.baseline().len() >= 10, "a real baseline");
    assert!(
        host["templates"]["skipped"]["technology_absent"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Another user sees neither the scan nor its coverage.
    let other = fleet.user().await;
    let (status, _) = fleet
        .call(
            Method::GET,
            &format!("/scans/{scan}/coverage"),
            &other,
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = fleet
        .call(
            Method::GET,
            &format!("/scans/{}/coverage", uuid::Uuid::now_v7()),
            &token,
            None,
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_targets_max_rps_per_host_holds_across_the_whole_scan() {
    let lab = StackLab::start().await;
    let fleet = stack_fleet(&lab, None).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let limit = 10;
    let (status, body) = fleet
        .call(
            Method::POST,
            "/targets",
            &token,
            Some(json!({"domain": NGINX, "max_rps_per_host": limit})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["max_rps_per_host"], limit);
    let target = body["id"].as_str().unwrap().to_string();
    let (status, body) = fleet
        .call(
            Method::POST,
            "/targets",
            &token,
            Some(json!({"domain": "other.stack.test", "max_rps_per_host": 0})),
        )
        .await;
    assert_eq!(status, 422, "{body}");

    let (_, detail) = finished(&fleet, &token, &target, "full").await;
    assert_eq!(detail["status"], "completed");
    let sent = lab.requests(NGINX);
    assert!(sent >= 40, "a scan long enough to tell: {sent} requests");
    // Over the scan the rate is the limit's. Starts are spaced by the
    // interval, so a span of whole arrival seconds holds `limit` a second
    // plus the one at the edge; and a request the loaded machine delayed
    // can land beside the next second's: a fifth more is allowed, over the
    // span as within one second (50, the default, would be five times
    // more).
    let span = lab.seconds_spanned(NGINX);
    assert!(
        sent <= limit * span + limit / 5,
        "{sent} requests in {span} s (limit {limit} a second)"
    );
    let most = lab.max_per_second(NGINX);
    assert!(
        most <= limit + limit / 5,
        "{most} requests within one second (limit {limit})"
    );
}
