//! Out-of-band detection end to end (issue 25) with our own server,
//! `scanfleet-oob`, started from its binary: the lab's blind SSRF route
//! (`/fetch?url=`) fetches the payload URL from the server's HTTP
//! listener, its lookup route (`/lookup?host=`) asks the server's DNS
//! listener; the engine finds both through the CLI, and a scan through the
//! service (api, node) records them as findings.

use std::process::Command;
use std::time::Duration;

use scanfleet_tests::fleet::{binary, fleet_with_lab, Fleet};
use scanfleet_tests::lab::{Lab, DOMAIN};
use scanfleet_tests::oob::{oob_templates_dir, OobServer, OOB_DOMAIN};
use serde_json::{json, Value};

const SSRF: &str = "blind-ssrf-url-parameter";
const LOOKUP: &str = "blind-dns-host-parameter";

/// `scanfleet-scanner run` of the lab's out-of-band templates against
/// `target`, with `extra` flags: its JSON lines and its stderr.
async fn run_cli(target: String, extra: Vec<String>) -> (Vec<Value>, String) {
    let dir = oob_templates_dir();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(binary("scanfleet-scanner"))
            .arg("run")
            .arg("-t")
            .arg(dir)
            .args(["-u", &target, "--allow-private", "--jsonl"])
            .args(extra)
            .output()
            .expect("running the scanner")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (lines, String::from_utf8_lossy(&output.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_finds_the_labs_blind_ssrf_and_dns_lookup_through_scanfleet_oob() {
    let oob = OobServer::start().await;
    let lab = Lab::start_with_oob(Duration::ZERO, oob.target()).await;
    let target = format!("http://127.0.0.1:{}", lab.port);
    let flags = [
        "-iserver",
        &oob.url(),
        "--interactsh-domain",
        OOB_DOMAIN,
        "--interactions-poll-duration",
        "1",
        "--interactions-cooldown-period",
        "3",
    ];
    let (found, stderr) = run_cli(target.clone(), flags.map(String::from).to_vec()).await;
    let mut ids: Vec<&str> = found
        .iter()
        .map(|f| f["template_id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, [LOOKUP, SSRF], "{stderr}\n{}", oob.log_text());
    for f in &found {
        let at = f["matched_at"].as_str().unwrap();
        assert!(at.starts_with(&format!("{target}/")), "{at}");
        assert!(at.contains(".oob.lab.test"), "{at}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_server_or_with_no_interactsh_the_out_of_band_templates_are_refused() {
    let oob = OobServer::start().await;
    let lab = Lab::start_with_oob(Duration::ZERO, oob.target()).await;
    let target = format!("http://127.0.0.1:{}", lab.port);
    let (found, stderr) = run_cli(target.clone(), vec![]).await;
    assert!(found.is_empty());
    assert!(
        stderr.contains("needs interactsh (out-of-band)"),
        "{stderr}"
    );
    let flags = ["-iserver", &oob.url(), "-ni"].map(String::from).to_vec();
    let (found, stderr) = run_cli(target, flags).await;
    assert!(found.is_empty());
    assert!(stderr.contains("no runnable templates"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_through_the_service_records_the_labs_out_of_band_findings() {
    let oob = OobServer::start().await;
    let lab = Lab::start_with_oob(Duration::ZERO, oob.target()).await;
    let templates = oob_templates_dir();
    let fleet = fleet_with_lab(
        &lab,
        &[DOMAIN],
        &[
            ("SCANFLEET_SCANNER__INTERACTSH_SERVER", &oob.url()),
            ("SCANFLEET_SCANNER__INTERACTSH_DOMAIN", OOB_DOMAIN),
            (
                "SCANFLEET_SCANNER__TEMPLATES_DIR",
                templates.to_str().unwrap(),
            ),
        ],
    )
    .await;
    let _api = fleet.api(&[]).await;
    let node = fleet.node("node-a", &[]);
    let token = fleet.user().await;
    let target = fleet.target(&token, DOMAIN).await;
    let scan = fleet.scan(&token, &target, "quick").await;
    let scan = fleet
        .wait_finished(&token, &scan, Duration::from_secs(90))
        .await;
    assert_eq!(scan["status"], "completed", "{scan}");
    let keys = Fleet::finding_keys(&scan);
    let ssrf = format!("{SSRF} http://{DOMAIN}/fetch?url=http://");
    let lookup = format!("{LOOKUP} http://{DOMAIN}/lookup?host=");
    assert_eq!(keys.len(), 3, "{keys:?}\n{}", node.log_text());
    assert!(keys[0].starts_with(&lookup), "{keys:?}");
    assert!(keys[0].ends_with(".oob.lab.test"), "{keys:?}");
    assert!(keys[1].starts_with(&ssrf), "{keys:?}");
    assert_eq!(keys[2], format!("http-probe http://{DOMAIN}/"));

    // Scanned again, the same weaknesses are called back on fresh payload
    // hosts, and they are the same findings: recurring, nothing fixed.
    let again = fleet.scan(&token, &target, "quick").await;
    let again = fleet
        .wait_finished(&token, &again, Duration::from_secs(90))
        .await;
    assert_eq!(again["status"], "completed", "{again}");
    let keys_again = Fleet::finding_keys(&again);
    assert_eq!(keys_again.len(), 3, "{keys_again:?}");
    assert_ne!(keys_again[0], keys[0], "fresh payload hosts each scan");
    assert_eq!(
        again["changes"],
        json!({"new": 0, "recurring": 3, "regressed": 0, "fixed": 0}),
        "{again}"
    );
    for v in again["vulnerabilities"].as_array().unwrap() {
        let fingerprint = v["fingerprint"].as_str().unwrap();
        if v["template_id"] != "http-probe" {
            assert!(
                fingerprint.contains("{{interactsh-id}}.oob.lab.test"),
                "{fingerprint}"
            );
        }
    }
}
