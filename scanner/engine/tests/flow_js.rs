//! JavaScript `flow:` scripts run by the engine against a local server
//! (issue 9, part 2): `http(n)` / `http("id")`, `set`, `iterate`,
//! `template[...]`, and what happens when a script fails or runs out of
//! budget.

use std::collections::HashMap;

use scanfleet_engine::engine::{Engine, EngineConfig, RunReport, TargetErrorKind};
use scanfleet_http::{ClientConfig, TargetUrl};

mod support;
use support::{compile, not_found, ok, Lab};

/// A local server answering each request-target from a fixed table (404
/// otherwise), recording the request-targets it saw, in order.
async fn serve_pages(pages: &[(&str, &str)]) -> Lab {
    let pages: HashMap<String, String> = pages
        .iter()
        .map(|(p, b)| (p.to_string(), b.to_string()))
        .collect();
    Lab::start(move |s| pages.get(&s.target).map_or_else(not_found, |b| ok(b))).await
}

async fn scan_with(yaml: &str, target: &str, variables: &[(&str, &str)]) -> RunReport {
    let engine = Engine::new(EngineConfig {
        client: ClientConfig {
            allow_private: true,
            ..ClientConfig::default()
        },
        variables: variables
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..EngineConfig::default()
    })
    .expect("engine");
    let target = TargetUrl::parse(target).expect("target");
    engine.run(&[compile(yaml)], &[target]).await
}

async fn scan(yaml: &str, target: &str) -> RunReport {
    scan_with(yaml, target, &[]).await
}

fn matched_at(report: &RunReport) -> Vec<String> {
    let mut v: Vec<String> = report
        .results
        .iter()
        .map(|r| r.matched_at.clone())
        .collect();
    v.sort();
    v
}

const ITERATE_FLOW: &str = r#"
id: flow-iterate
info: {name: Flow iterate, severity: high}
flow: |
  http(1)
  for (let widget of iterate(template.widgets)) {
    set("widget", widget)
    http(2)
  }
http:
  - path: ["{{BaseURL}}/widgets"]
    extractors:
      - type: regex
        name: widgets
        internal: true
        group: 1
        regex: ["w=([a-z]+)"]
  - path: ["{{BaseURL}}/widget/{{widget}}"]
    matchers:
      - type: word
        words: ["secret"]
"#;

#[tokio::test]
async fn a_flow_iterates_over_every_extracted_value_and_sets_it_for_the_next_block() {
    let lab = serve_pages(&[
        ("/widgets", "w=alpha w=beta w=gamma"),
        ("/widget/beta", "the secret"),
    ])
    .await;
    let report = scan(ITERATE_FLOW, &lab.base).await;
    assert_eq!(
        lab.targets(),
        vec!["/widgets", "/widget/alpha", "/widget/beta", "/widget/gamma"]
    );
    assert_eq!(
        matched_at(&report),
        vec![format!("{}/widget/beta", lab.base)]
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
}

const CREDENTIALS_FLOW: &str = r#"
id: flow-credentials
info: {name: Flow credentials, severity: critical}
flow: |
  if (!template.hasOwnProperty('username') || !template.hasOwnProperty('password')) {
    http("unauth")
  } else {
    http("login") && http("auth")
  }
http:
  - id: unauth
    path: ["{{BaseURL}}/unauth"]
    matchers:
      - type: status
        status: [200]
  - id: login
    path: ["{{BaseURL}}/login?u={{username}}&p={{password}}"]
    matchers:
      - type: word
        internal: true
        words: ["welcome"]
  - id: auth
    path: ["{{BaseURL}}/auth"]
    matchers:
      - type: status
        status: [200]
"#;

#[tokio::test]
async fn a_flow_branches_on_template_variables_and_calls_blocks_by_id() {
    let pages = [
        ("/unauth", "open"),
        ("/login?u=admin&p=pw", "welcome admin"),
        ("/auth", "inside"),
    ];
    let lab = serve_pages(&pages).await;
    let report = scan(CREDENTIALS_FLOW, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/unauth"]);
    assert_eq!(matched_at(&report), vec![format!("{}/unauth", lab.base)]);

    // `--var` values are template variables: the other branch runs, and
    // `&&` stops after a login that did not match.
    let lab = serve_pages(&pages).await;
    let report = scan_with(
        CREDENTIALS_FLOW,
        &lab.base,
        &[("username", "admin"), ("password", "pw")],
    )
    .await;
    assert_eq!(lab.targets(), vec!["/login?u=admin&p=pw", "/auth"]);
    assert_eq!(matched_at(&report), vec![format!("{}/auth", lab.base)]);

    let lab = serve_pages(&pages).await;
    scan_with(
        CREDENTIALS_FLOW,
        &lab.base,
        &[("username", "admin"), ("password", "wrong")],
    )
    .await;
    assert_eq!(lab.targets(), vec!["/login?u=admin&p=wrong"]);
}

#[tokio::test]
async fn a_flow_computes_values_in_javascript_for_later_requests() {
    // After CVE-2024-6670: an extracted value reshaped by the script.
    let yaml = r#"
id: flow-compute
info: {name: Flow compute, severity: high}
flow: |
  http(1);
  const digits = template.code[0].match(/\d+/g);
  const hex = digits.map(value => parseInt(value).toString(16).padStart(2, '0'));
  log(hex);
  set("hex", '0x' + hex.join(''));
  http(2);
http:
  - path: ["{{BaseURL}}/code"]
    extractors:
      - type: regex
        name: code
        internal: true
        regex: ["code-[0-9-]+"]
  - path: ["{{BaseURL}}/check?v={{hex}}"]
    matchers:
      - type: status
        status: [200]
"#;
    let lab = serve_pages(&[("/code", "code-10-255-7"), ("/check?v=0x0aff07", "ok")]).await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/code", "/check?v=0x0aff07"]);
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn a_flow_that_throws_keeps_the_results_before_and_reports_the_error() {
    let yaml = r#"
id: flow-throws
info: {name: Flow throws, severity: low}
flow: |
  http(1);
  template.nothing.length;
  http(2);
http:
  - path: ["{{BaseURL}}/one"]
    matchers:
      - type: status
        status: [200]
  - path: ["{{BaseURL}}/two"]
    matchers:
      - type: status
        status: [200]
"#;
    let lab = serve_pages(&[("/one", "1"), ("/two", "2")]).await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/one"]);
    assert_eq!(matched_at(&report), vec![format!("{}/one", lab.base)]);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].kind, TargetErrorKind::Flow);
    assert!(
        report.errors[0].message().contains("TypeError"),
        "{}",
        report.errors[0].message()
    );
}

#[tokio::test]
async fn an_endless_flow_is_stopped_by_its_step_budget() {
    let yaml = r#"
id: flow-endless
info: {name: Flow endless, severity: low}
flow: |
  http(1);
  while (true) { try { set("x", 1) } catch (e) {} }
http:
  - path: ["{{BaseURL}}/one"]
    matchers:
      - type: status
        status: [200]
"#;
    let lab = serve_pages(&[("/one", "1")]).await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/one"]);
    assert_eq!(report.results.len(), 1);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].kind, TargetErrorKind::Flow);
    assert!(
        report.errors[0].message().contains("step budget"),
        "{}",
        report.errors[0].message()
    );
}

#[tokio::test]
async fn a_flow_naming_a_block_that_does_not_exist_skips_the_step() {
    let yaml = r#"
id: flow-missing
info: {name: Flow missing, severity: low}
flow: |
  if (!http("nope")) { http(1) }
http:
  - path: ["{{BaseURL}}/one"]
    matchers:
      - type: status
        status: [200]
"#;
    let lab = serve_pages(&[("/one", "1")]).await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/one"]);
    assert_eq!(report.results.len(), 1);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].kind, TargetErrorKind::Skipped);
}
