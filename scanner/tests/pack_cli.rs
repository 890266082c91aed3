//! The default template pack through the real binary: `run` over the pack
//! against the engine's lab server (scanner/engine/tests/lab).

#[allow(dead_code)]
#[path = "../engine/tests/lab/mod.rs"]
mod lab;

use std::collections::BTreeSet;

use serde_json::Value;

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The done-when check of the pack, through the real binary: `run -t
/// templates/ -u <lab> --jsonl --allow-private` prints the expected findings
/// and nothing for the hardened routes; without `--allow-private` the
/// loopback lab is refused with a clear message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_the_pack_findings_for_the_lab_and_refuses_it_without_allow_private() {
    let lab = lab::Lab::start().await.expect("start the lab");
    let pack_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/engine/templates");
    let cases = [
        "git-config-exposure",
        "cookie-without-secure",
        "open-redirect-parameter",
        "graphql-introspection",
    ];
    let mut args = vec!["run".to_string(), "-t".to_string(), pack_dir.to_string()];
    for case in cases {
        args.extend(["-u".to_string(), lab.vulnerable_url(case)]);
        args.extend(["-u".to_string(), lab.hardened_url(case)]);
    }
    args.push("--jsonl".to_string());

    let binary = env!("CARGO_BIN_EXE_scanfleet-scanner");
    let allowed = tokio::process::Command::new(binary)
        .args(&args)
        .arg("--allow-private")
        .env_remove("SCANFLEET_SCANNER__ALLOW_PRIVATE")
        .output()
        .await
        .expect("run the scanner binary");
    let stdout = String::from_utf8_lossy(&allowed.stdout);
    assert!(
        allowed.status.success(),
        "exit {:?}: {}",
        allowed.status,
        String::from_utf8_lossy(&allowed.stderr)
    );
    let mut found = BTreeSet::new();
    for line in stdout.lines() {
        let finding: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        let matched_at = text(&finding, "/matched_at");
        let case = cases
            .iter()
            .find(|c| matched_at.starts_with(&format!("{}/", lab.vulnerable_url(c))))
            .unwrap_or_else(|| panic!("finding outside the vulnerable routes: {line}"));
        found.insert((text(&finding, "/template_id").to_string(), case.to_string()));
    }
    let expected: BTreeSet<(String, String)> = cases
        .iter()
        .map(|c| (c.to_string(), c.to_string()))
        .collect();
    assert_eq!(found, expected, "stdout:\n{stdout}");

    let refused = tokio::process::Command::new(binary)
        .args(&args)
        .env_remove("SCANFLEET_SCANNER__ALLOW_PRIVATE")
        .output()
        .await
        .expect("run the scanner binary");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "loopback lab was scanned without --allow-private"
    );
    assert!(
        refused.stdout.is_empty(),
        "findings without --allow-private"
    );
    assert!(
        stderr.contains("--allow-private"),
        "unclear refusal: {stderr}"
    );
}
