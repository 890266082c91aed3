//! The execution engine against real local HTTP servers: request building,
//! payload attacks, multi-step templates, result multiplicity, safety.

use std::sync::Arc;

use scanfleet_engine::engine::{Engine, EngineConfig, RunReport, TargetErrorKind};
use scanfleet_http::{ClientConfig, TargetUrl};

mod support;
use support::{compile, ok, Lab, Reply, Seen};
use tokio::net::TcpListener;

fn engine(allow_private: bool) -> Engine {
    Engine::new(EngineConfig {
        client: ClientConfig {
            allow_private,
            ..ClientConfig::default()
        },
        ..EngineConfig::default()
    })
    .expect("engine")
}

async fn scan(yaml: &str, target: &str) -> RunReport {
    scan_all(&[yaml], target).await
}

async fn scan_all(yamls: &[&str], target: &str) -> RunReport {
    let templates: Vec<_> = yamls.iter().map(|y| compile(y)).collect();
    let target = TargetUrl::parse(target).expect("target");
    engine(true).run(&templates, &[target]).await
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The templates of a run's results, sorted (one a result).
fn template_ids(report: &RunReport) -> Vec<String> {
    sorted(
        report
            .results
            .iter()
            .map(|r| r.template_id.clone())
            .collect(),
    )
}

#[tokio::test]
async fn base_url_paths_join_onto_the_input_path_without_a_double_slash() {
    let lab = Lab::start(|_| ok("[core]")).await;
    let yaml = r#"
id: git-config
info: {name: Git config, severity: medium}
http:
  - method: GET
    path:
      - "{{BaseURL}}/.git/config"
    matchers:
      - type: word
        words: ["[core]"]
"#;
    let report = scan(yaml, &format!("{}/app/", lab.base)).await;
    assert_eq!(lab.targets(), vec!["/app/.git/config"]);
    assert_eq!(report.results.len(), 1);
    assert_eq!(
        report.results[0].matched_at,
        format!("{}/app/.git/config", lab.base)
    );
}

#[tokio::test]
async fn the_input_query_is_merged_before_the_template_query() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: q
info: {name: Q, severity: info}
http:
  - path:
      - "{{BaseURL}}/p?y=2"
      - "{{BaseURL}}?z=3"
"#;
    scan(yaml, &format!("{}/app?x=1", lab.base)).await;
    assert_eq!(lab.targets(), vec!["/app/p?x=1&y=2", "/app?x=1&z=3"]);
}

#[tokio::test]
async fn raw_request_targets_are_appended_to_the_input_path() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: raw
info: {name: Raw, severity: info}
http:
  - raw:
      - |
        GET /admin/..;/x HTTP/1.1
        Host: {{Hostname}}

"#;
    scan(yaml, &format!("{}/base", lab.base)).await;
    assert_eq!(lab.targets(), vec!["/base/admin/..;/x"]);
}

#[tokio::test]
async fn headers_and_bodies_are_interpolated_with_input_variables() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: interp
info: {name: Interp, severity: info}
variables:
  who: "{{to_upper('admin')}}"
http:
  - method: POST
    path:
      - "{{RootURL}}/login"
    headers:
      X-Target: "{{Hostname}}|{{Host}}|{{Port}}|{{Scheme}}"
    body: "user={{who}}&path={{Path}}&file={{File}}"
"#;
    let lab_url = format!("{}/dir/page.php", lab.base);
    scan(yaml, &lab_url).await;
    let reqs = lab.requests();
    assert_eq!(reqs.len(), 1);
    let authority = lab.base.trim_start_matches("http://");
    let port = authority.rsplit(':').next().unwrap_or_default();
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].target, "/login");
    assert_eq!(
        reqs[0].header("X-Target"),
        Some(format!("{authority}|127.0.0.1|{port}|http").as_str())
    );
    assert_eq!(
        String::from_utf8_lossy(&reqs[0].body),
        "user=ADMIN&path=/dir&file=page.php"
    );
}

#[tokio::test]
async fn clusterbomb_sends_every_combination() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: bomb
info: {name: Bomb, severity: info}
http:
  - path:
      - "{{BaseURL}}/{{a}}/{{b}}"
    attack: clusterbomb
    payloads:
      a: ["1", "2"]
      b: ["x", "y", "z"]
"#;
    scan(yaml, &lab.base).await;
    assert_eq!(
        sorted(lab.targets()),
        vec!["/1/x", "/1/y", "/1/z", "/2/x", "/2/y", "/2/z"]
    );
}

#[tokio::test]
async fn pitchfork_pairs_the_lists_in_order() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: fork
info: {name: Fork, severity: info}
http:
  - path:
      - "{{BaseURL}}/{{user}}:{{pass}}"
    attack: pitchfork
    payloads:
      user: ["root", "admin"]
      pass: ["toor", "nimda"]
"#;
    scan(yaml, &lab.base).await;
    assert_eq!(sorted(lab.targets()), vec!["/admin:nimda", "/root:toor"]);
}

#[tokio::test]
async fn batteringram_puts_each_value_in_every_position() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: ram
info: {name: Ram, severity: info}
http:
  - path:
      - "{{BaseURL}}/{{p}}?again={{p}}"
    payloads:
      p: ["a", "b"]
"#;
    scan(yaml, &lab.base).await;
    assert_eq!(sorted(lab.targets()), vec!["/a?again=a", "/b?again=b"]);
}

#[tokio::test]
async fn an_internal_extractor_feeds_the_next_request_and_is_not_reported() {
    let lab = Lab::start(|s| {
        if s.target == "/login" {
            ok("token=abc123;")
        } else if s.target == "/use/abc123" {
            ok("welcome")
        } else {
            Reply {
                status: 404,
                headers: vec![],
                body: String::new(),
            }
        }
    })
    .await;
    let yaml = r#"
id: steps
info: {name: Steps, severity: high}
http:
  - path:
      - "{{BaseURL}}/login"
      - "{{BaseURL}}/use/{{token}}"
    extractors:
      - type: regex
        name: token
        internal: true
        group: 1
        regex: ["token=([a-z0-9]+)"]
    matchers:
      - type: word
        words: ["welcome"]
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/login", "/use/abc123"]);
    assert_eq!(report.results.len(), 1);
    assert!(report.results[0].extracted_results.is_empty());
    assert_eq!(
        report.results[0].matched_at,
        format!("{}/use/abc123", lab.base)
    );
}

#[tokio::test]
async fn req_condition_matches_once_on_the_numbered_history() {
    let lab = Lab::start(|s| match s.target.as_str() {
        "/one" => ok("first"),
        _ => Reply {
            status: 403,
            headers: vec![],
            body: "second".into(),
        },
    })
    .await;
    let yaml = r#"
id: cond
info: {name: Cond, severity: low}
http:
  - path:
      - "{{BaseURL}}/one"
      - "{{BaseURL}}/two"
    req-condition: true
    matchers:
      - type: dsl
        dsl:
          - "status_code_1 == 200 && status_code_2 == 403 && contains(body_1, 'first') && contains(body_2, 'second')"
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
    assert_eq!(report.results[0].matched_at, format!("{}/two", lab.base));
}

#[tokio::test]
async fn numbered_history_that_does_not_hold_gives_nothing() {
    let lab = Lab::start(|_| ok("same")).await;
    let yaml = r#"
id: cond-neg
info: {name: Cond, severity: low}
http:
  - path:
      - "{{BaseURL}}/one"
      - "{{BaseURL}}/two"
    req-condition: true
    matchers:
      - type: dsl
        dsl:
          - "body_1 != body_2"
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets().len(), 2);
    assert!(report.results.is_empty());
}

#[tokio::test]
async fn stop_at_first_match_sends_nothing_after_the_first_match() {
    let lab = Lab::start(|_| ok("hit")).await;
    let yaml = r#"
id: stop
info: {name: Stop, severity: info}
http:
  - path:
      - "{{BaseURL}}/a"
      - "{{BaseURL}}/b"
      - "{{BaseURL}}/c"
    stop-at-first-match: true
    matchers:
      - type: word
        words: ["hit"]
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/a"]);
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn stop_at_first_match_is_not_triggered_by_extractor_results_alone() {
    let lab = Lab::start(|s| ok(&format!("token={}", &s.target[1..]))).await;
    let yaml = r#"
id: extract-all
info: {name: Extract all, severity: info}
http:
  - path:
      - "{{BaseURL}}/a"
      - "{{BaseURL}}/b"
      - "{{BaseURL}}/c"
    stop-at-first-match: true
    extractors:
      - type: regex
        group: 1
        regex: ["token=([a-z]+)"]
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/a", "/b", "/c"]);
    let values: Vec<Vec<String>> = report
        .results
        .iter()
        .map(|r| r.extracted_results.clone())
        .collect();
    assert_eq!(values, vec![vec!["a"], vec!["b"], vec!["c"]]);
}

fn redirecting_lab_handler(s: &Seen) -> Reply {
    if s.target == "/old" {
        Reply {
            status: 302,
            headers: vec![("Location".into(), "/new".into())],
            body: String::new(),
        }
    } else {
        ok("landed")
    }
}

const REDIRECT_TEMPLATE: &str = r#"
id: redir
info: {name: Redir, severity: info}
http:
  - path:
      - "{{BaseURL}}/old"
    redirects: REDIRECTS
    matchers:
      - type: status
        status: [302]
"#;

#[tokio::test]
async fn a_302_matches_when_redirects_are_off() {
    let lab = Lab::start(redirecting_lab_handler).await;
    let report = scan(&REDIRECT_TEMPLATE.replace("REDIRECTS", "false"), &lab.base).await;
    assert_eq!(lab.targets(), vec!["/old"]);
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn an_intermediate_redirect_hop_can_match_and_is_reported_at_its_own_url() {
    let lab = Lab::start(redirecting_lab_handler).await;
    let report = scan(&REDIRECT_TEMPLATE.replace("REDIRECTS", "true"), &lab.base).await;
    assert_eq!(lab.targets(), vec!["/old", "/new"]);
    assert_eq!(report.results.len(), 1);
    assert_eq!(report.results[0].matched_at, format!("{}/old", lab.base));

    // Each hop is judged on its own: the hop's header and the landing
    // page's body match separately, each reported at its own URL.
    let yaml = r#"
id: hops
info: {name: Hops, severity: info}
http:
  - path:
      - "{{BaseURL}}/old"
    redirects: true
    matchers:
      - type: word
        name: moved
        part: header
        words: ["Location: /new"]
      - type: word
        name: landed
        part: body
        words: ["landed"]
      - type: dsl
        name: never-both
        dsl: ["status_code == 302 && contains(body, 'landed')"]
"#;
    let report = scan(yaml, &lab.base).await;
    let mut got: Vec<(String, String)> = report
        .results
        .iter()
        .map(|r| {
            (
                r.matcher_name.clone().unwrap_or_default(),
                r.matched_at.clone(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("landed".to_string(), format!("{}/new", lab.base)),
            ("moved".to_string(), format!("{}/old", lab.base)),
        ]
    );
}

#[tokio::test]
async fn cookies_set_by_one_request_are_sent_with_the_next() {
    let lab = Lab::start(|s| {
        if s.target == "/set" {
            Reply {
                status: 200,
                headers: vec![("Set-Cookie".into(), "sid=s3cr3t; Path=/".into())],
                body: String::new(),
            }
        } else {
            ok("")
        }
    })
    .await;
    let yaml = r#"
id: jar
info: {name: Jar, severity: info}
http:
  - path:
      - "{{BaseURL}}/set"
      - "{{BaseURL}}/check"
"#;
    scan(yaml, &lab.base).await;
    let reqs = lab.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].header("Cookie"), None);
    assert_eq!(reqs[1].header("Cookie"), Some("sid=s3cr3t"));
}

#[tokio::test]
async fn a_request_with_an_unresolved_variable_is_skipped_with_a_reason() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: unresolved
info: {name: U, severity: info}
http:
  - path:
      - "{{BaseURL}}/{{nowhere}}"
      - "{{BaseURL}}/fine"
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/fine"]);
    let skip = report
        .errors
        .iter()
        .find(|e| e.kind == TargetErrorKind::Skipped)
        .expect("a skip is reported");
    assert_eq!(skip.message(), "unresolved variables {{nowhere}} in path");
}

#[tokio::test]
async fn each_matched_named_matcher_gives_its_own_result_under_or() {
    let lab = Lab::start(|_| ok("apache and php")).await;
    let yaml = r#"
id: tech
info: {name: Tech, severity: info}
http:
  - path:
      - "{{BaseURL}}/"
    matchers:
      - type: word
        name: apache
        words: ["apache"]
      - type: word
        name: php
        words: ["php"]
      - type: word
        name: nginx
        words: ["nginx"]
"#;
    let report = scan(yaml, &lab.base).await;
    let names = sorted(
        report
            .results
            .iter()
            .filter_map(|r| r.matcher_name.clone())
            .collect(),
    );
    assert_eq!(names, vec!["apache", "php"]);
}

#[tokio::test]
async fn and_condition_gives_a_single_result_only_when_all_match() {
    let lab = Lab::start(|_| ok("apache only")).await;
    let yaml = r#"
id: both
info: {name: Both, severity: info}
http:
  - path:
      - "{{BaseURL}}/"
    matchers-condition: and
    matchers:
      - type: word
        words: ["apache"]
      - type: status
        status: [200]
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(report.results.len(), 1);
    let failing = yaml.replace("[200]", "[500]");
    assert!(scan(&failing, &lab.base).await.results.is_empty());
}

#[tokio::test]
async fn extractor_only_templates_report_one_result_per_named_extractor() {
    let lab = Lab::start(|_| Reply {
        status: 200,
        headers: vec![("Server".into(), "demo/1.2".into())],
        body: "<title>Home</title>".into(),
    })
    .await;
    let yaml = r#"
id: extract
info: {name: Extract, severity: info}
http:
  - path:
      - "{{BaseURL}}/"
    extractors:
      - type: regex
        name: title
        group: 1
        regex: ["<title>([^<]+)</title>"]
      - type: kval
        name: server
        kval: ["server"]
      - type: regex
        name: absent
        regex: ["nothing-here"]
"#;
    let report = scan(yaml, &lab.base).await;
    let mut got: Vec<(String, Vec<String>)> = report
        .results
        .iter()
        .map(|r| {
            (
                r.matcher_name.clone().unwrap_or_default(),
                r.extracted_results.clone(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("server".to_string(), vec!["demo/1.2".to_string()]),
            ("title".to_string(), vec!["Home".to_string()]),
        ]
    );
}

#[tokio::test]
async fn named_extractors_give_one_result_each_when_an_unnamed_matcher_matched() {
    let lab = Lab::start(|s| {
        let marker = if s.target == "/hit" { "hit" } else { "miss" };
        ok(&format!("{marker} user=alice role=admin"))
    })
    .await;
    let yaml = r#"
id: who
info: {name: Who, severity: info}
http:
  - path:
      - "{{BaseURL}}/hit"
      - "{{BaseURL}}/miss"
    matchers:
      - type: word
        words: ["hit"]
    extractors:
      - type: regex
        name: user
        group: 1
        regex: ["user=([a-z]+)"]
      - type: regex
        name: role
        group: 1
        regex: ["role=([a-z]+)"]
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/hit", "/miss"]);
    // `/miss` extracts the same values but matches nothing: no result.
    let mut got: Vec<(String, Vec<String>, String)> = report
        .results
        .iter()
        .map(|r| {
            (
                r.matcher_name.clone().unwrap_or_default(),
                r.extracted_results.clone(),
                r.matched_at.clone(),
            )
        })
        .collect();
    got.sort();
    let hit = format!("{}/hit", lab.base);
    assert_eq!(
        got,
        vec![
            ("role".to_string(), vec!["admin".to_string()], hit.clone()),
            ("user".to_string(), vec!["alice".to_string()], hit),
        ]
    );
}

#[tokio::test]
async fn a_var_option_overrides_the_template_variable_of_the_same_name() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: vars
info: {name: Vars, severity: info}
variables:
  dir: "from-template"
  page: "{{dir}}/index"
http:
  - path:
      - "{{BaseURL}}/{{page}}"
"#;
    let engine = Engine::new(EngineConfig {
        client: ClientConfig {
            allow_private: true,
            ..ClientConfig::default()
        },
        variables: vec![("dir".to_string(), "from-option".to_string())],
        ..EngineConfig::default()
    })
    .expect("engine");
    let target = TargetUrl::parse(&lab.base).expect("target");
    engine.run(&[compile(yaml)], &[target]).await;
    // Later variables see the overridden value too.
    assert_eq!(lab.targets(), vec!["/from-option/index"]);
}

#[tokio::test]
async fn a_private_target_is_refused_with_a_clear_error_without_allow_private() {
    let lab = Lab::start(|_| ok("anything")).await;
    let yaml = r#"
id: any
info: {name: Any, severity: info}
http:
  - path: ["{{BaseURL}}/"]
    matchers:
      - type: word
        words: ["anything"]
"#;
    let template = compile(yaml);
    let target = TargetUrl::parse(&lab.base).expect("target");
    let report = engine(false).run(&[template], &[target]).await;
    assert!(report.results.is_empty());
    assert!(lab.targets().is_empty());
    let refusal = report
        .errors
        .iter()
        .find(|e| e.kind == TargetErrorKind::Refused)
        .expect("refusal reported");
    assert!(
        refusal.message().contains("127.0.0.1"),
        "{}",
        refusal.message()
    );
}

#[tokio::test]
async fn identical_simple_requests_of_several_templates_are_sent_once() {
    let lab = Lab::start(|_| ok("shared body")).await;
    let a = r#"
id: one
info: {name: One, severity: info}
http:
  - method: GET
    path: ["{{BaseURL}}/same"]
    matchers:
      - type: word
        words: ["shared"]
"#;
    let b = r#"
id: two
info: {name: Two, severity: low}
http:
  - method: GET
    path: ["{{BaseURL}}/same"]
    matchers:
      - type: word
        words: ["body"]
"#;
    let c = r#"
id: three
info: {name: Three, severity: low}
http:
  - method: GET
    path: ["{{BaseURL}}/same"]
    matchers:
      - type: word
        words: ["absent"]
"#;
    let report = scan_all(&[a, b, c], &lab.base).await;
    assert_eq!(lab.targets(), vec!["/same"]);
    let ids = template_ids(&report);
    assert_eq!(ids, vec!["one", "two"]);
}

#[tokio::test]
async fn unsafe_raw_requests_go_out_byte_for_byte() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = "
id: unsafe
info: {name: Unsafe, severity: info}
http:
  - raw:
      - \"GET /%2e%2e/x HTTP/1.1\\r\\nHost: {{Hostname}}\\r\\nX-Dup: 1\\r\\nX-Dup: 2\\r\\n\\r\\n\"
    unsafe: true
";
    scan(yaml, &lab.base).await;
    let reqs = lab.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].target, "/%2e%2e/x");
    let dups: Vec<_> = reqs[0]
        .headers
        .iter()
        .filter(|(n, _)| n == "X-Dup")
        .map(|(_, v)| v.clone())
        .collect();
    assert_eq!(dups, vec!["1", "2"]);
}

#[tokio::test]
async fn a_later_block_sees_an_earlier_block_by_its_id() {
    let lab = Lab::start(|s| match s.target.as_str() {
        "/version" => ok("v=7"),
        _ => ok("other"),
    })
    .await;
    let yaml = r#"
id: blocks
info: {name: Blocks, severity: info}
http:
  - id: probe
    path: ["{{BaseURL}}/version"]
  - path: ["{{BaseURL}}/next"]
    matchers:
      - type: dsl
        dsl:
          - "contains(probe_body, 'v=7') && contains(body, 'other')"
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/version", "/next"]);
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn option_variables_and_rendered_payload_values_reach_the_request() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: opts
info: {name: Opts, severity: info}
http:
  - path:
      - "{{BaseURL}}/{{token}}/{{who}}"
    payloads:
      who: ["user@{{Host}}"]
"#;
    let template = compile(yaml);
    let engine = Engine::new(EngineConfig {
        client: ClientConfig {
            allow_private: true,
            ..ClientConfig::default()
        },
        variables: vec![("token".into(), "t0k".into())],
        ..EngineConfig::default()
    })
    .expect("engine");
    let target = TargetUrl::parse(&lab.base).expect("target");
    let report = engine.run(&[template], &[target]).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(lab.targets(), vec!["/t0k/user@127.0.0.1"]);
}

#[tokio::test]
async fn cancelling_a_run_ends_it_while_a_request_is_still_waiting() {
    // A server that accepts and never answers: only cancellation can end
    // the run before the client's 10 s timeout.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let accepted = Arc::new(tokio::sync::Notify::new());
    let signal = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
            signal.notify_one();
        }
    });
    let yaml = r#"
id: slow
info: {name: Slow, severity: info}
http:
  - path: ["{{BaseURL}}/wait"]
"#;
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut events = engine(true).start(
        vec![compile(yaml)],
        vec![TargetUrl::parse(&base).expect("target")],
        cancel.clone(),
    );
    accepted.notified().await;
    let started = std::time::Instant::now();
    cancel.cancel();
    let drained = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while events.recv().await.is_some() {}
    })
    .await;
    assert!(drained.is_ok(), "the run did not stop after cancellation");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test]
async fn response_headers_and_cookies_are_dsl_variables() {
    let lab = Lab::start(|_| Reply {
        status: 200,
        headers: vec![
            ("X-Powered-By".into(), "PHP/8.1".into()),
            ("Set-Cookie".into(), "SID=abc; HttpOnly".into()),
        ],
        body: "hello".into(),
    })
    .await;
    let yaml = r#"
id: vars
info: {name: Vars, severity: info}
http:
  - path: ["{{BaseURL}}/"]
    matchers:
      - type: dsl
        dsl:
          - "contains(x_powered_by, 'PHP/8') && sid == 'abc' && content_length == 5 && status_code == 200"
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
    let negative = yaml.replace("sid == 'abc'", "sid == 'xyz'");
    assert!(scan(&negative, &lab.base).await.results.is_empty());
}

#[tokio::test]
async fn randstr_is_one_random_value_per_template_usable_in_requests_and_matchers() {
    // The server reflects the request-target, as an injectable page would.
    let lab = Lab::start(|s| ok(&format!("you asked for {}", s.target))).await;
    let yaml = r#"
id: reflect
info: {name: Reflect, severity: medium}
http:
  - method: GET
    path:
      - "{{BaseURL}}/?q={{randstr}}"
    matchers:
      - type: word
        words: ["{{randstr}}"]
"#;
    let report = scan(yaml, &lab.base).await;
    let targets = lab.targets();
    assert_eq!(targets.len(), 1);
    let sent = targets[0].trim_start_matches("/?q=");
    assert_eq!(sent.len(), 27, "{sent}");
    assert!(sent.chars().all(|c| c.is_ascii_alphanumeric()));
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn a_port_written_after_base_url_overrides_the_input_port() {
    let lab = Lab::start(|_| ok("on the other port")).await;
    let lab_port = lab.base.rsplit(':').next().unwrap_or_default().to_string();
    // The input names a port nothing listens on; only the override reaches the lab.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let closed_port = closed.local_addr().expect("addr").port();
    drop(closed);
    let yaml = format!(
        r#"
id: port
info: {{name: Port, severity: info}}
http:
  - path:
      - "{{{{BaseURL}}}}:{lab_port}/admin"
    matchers:
      - type: word
        words: ["other port"]
"#
    );
    let report = scan(&yaml, &format!("http://127.0.0.1:{closed_port}/app")).await;
    assert_eq!(lab.targets(), vec!["/app/admin"]);
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
    assert_eq!(
        report.results[0].matched_at,
        format!("{}/app/admin", lab.base)
    );
}

#[tokio::test]
async fn skip_variables_check_sends_unresolved_markers_as_written() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: skipcheck
info: {name: Skip, severity: info}
http:
  - raw:
      - |
        GET /t HTTP/1.1
        Host: {{Hostname}}
        X-Template: {{not_a_variable}}

    skip-variables-check: true
"#;
    let report = scan(yaml, &lab.base).await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let reqs = lab.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("X-Template"), Some("{{not_a_variable}}"));
}

#[tokio::test]
async fn disable_cookie_keeps_each_request_free_of_earlier_cookies() {
    let lab = Lab::start(|s| {
        if s.target == "/set" {
            Reply {
                status: 200,
                headers: vec![("Set-Cookie".into(), "sid=s3cr3t; Path=/".into())],
                body: String::new(),
            }
        } else {
            ok("")
        }
    })
    .await;
    let yaml = r#"
id: nojar
info: {name: No jar, severity: info}
http:
  - path:
      - "{{BaseURL}}/set"
      - "{{BaseURL}}/check"
    disable-cookie: true
"#;
    scan(yaml, &lab.base).await;
    let reqs = lab.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].header("Cookie"), None);
}

/// A lab for flow tests: `/probe` answers `probe_body`, every other path
/// echoes its own request-target.
async fn flow_lab(probe_body: &'static str) -> Lab {
    Lab::start(move |s| {
        if s.target == "/probe" {
            ok(probe_body)
        } else {
            ok(&format!("hit {}", s.target))
        }
    })
    .await
}

const AND_FLOW: &str = r#"
id: flow-and
info: {name: Flow and, severity: high}
flow: http(1) && http(2)
http:
  - path: ["{{BaseURL}}/probe"]
    matchers:
      - type: word
        internal: true
        words: ["product-x"]
  - path: ["{{BaseURL}}/exploit"]
    matchers:
      - type: word
        words: ["hit /exploit"]
"#;

#[tokio::test]
async fn a_flow_and_runs_the_second_block_only_after_the_first_matched() {
    // Issue 9: `http(1) && http(2)` short-circuits like JavaScript.
    let lab = flow_lab("product-x 1.0").await;
    let report = scan(AND_FLOW, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe", "/exploit"]);
    // The first block's matchers are all internal: only the second reports.
    assert_eq!(report.results.len(), 1);
    assert_eq!(
        report.results[0].matched_at,
        format!("{}/exploit", lab.base)
    );

    let lab = flow_lab("something else").await;
    let report = scan(AND_FLOW, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe"]);
    assert!(report.results.is_empty());
}

#[tokio::test]
async fn a_flow_or_runs_the_second_block_only_when_the_first_did_not_match() {
    let yaml = r#"
id: flow-or
info: {name: Flow or, severity: low}
flow: http(1) || (http(2) && http(3))
http:
  - path: ["{{BaseURL}}/probe"]
    matchers:
      - type: word
        words: ["product-x"]
  - path: ["{{BaseURL}}/second"]
  - path: ["{{BaseURL}}/third"]
    matchers:
      - type: word
        words: ["hit /third"]
"#;
    let lab = flow_lab("product-x").await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe"]);
    assert_eq!(report.results.len(), 1);

    // Block 2 has no operators: a response is enough to make it true.
    let lab = flow_lab("nothing").await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe", "/second", "/third"]);
    assert_eq!(report.results.len(), 1);
    assert_eq!(report.results[0].matched_at, format!("{}/third", lab.base));
}

#[tokio::test]
async fn a_flow_step_without_matchers_is_true_only_when_it_extracted_something() {
    let yaml = r#"
id: flow-extract
info: {name: Flow extract, severity: info}
flow: http(1) && http(2)
variables:
  marked: "v-{{token}}"
http:
  - path: ["{{BaseURL}}/probe"]
    extractors:
      - type: regex
        name: token
        internal: true
        group: 1
        regex: ["token=([a-z0-9]+)"]
  - path: ["{{BaseURL}}/use?t={{token}}&m={{marked}}"]
    matchers:
      - type: word
        words: ["hit /use"]
"#;
    let lab = flow_lab("token=abc123").await;
    let report = scan(yaml, &lab.base).await;
    // The variable built on the extracted value resolves after step 1.
    assert_eq!(lab.targets(), vec!["/probe", "/use?t=abc123&m=v-abc123"]);
    assert_eq!(report.results.len(), 1);

    let lab = flow_lab("no token here").await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe"]);
    assert!(report.results.is_empty());
}

#[tokio::test]
async fn a_single_ampersand_flow_runs_both_blocks() {
    let yaml = r#"
id: flow-both
info: {name: Flow both, severity: info}
flow: http(1) & http(2)
http:
  - path: ["{{BaseURL}}/probe"]
    matchers:
      - type: word
        words: ["never there"]
  - path: ["{{BaseURL}}/after"]
"#;
    let lab = flow_lab("x").await;
    scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe", "/after"]);
}

#[tokio::test]
async fn a_host_annotation_sends_the_raw_request_to_the_targets_other_port() {
    let scanned = Lab::start(|_| ok("scanned")).await;
    let other = Lab::start(|_| ok("other port")).await;
    let other_port = other.base.rsplit(':').next().expect("port").to_string();
    let yaml = format!(
        r#"
id: host-annotation
info: {{name: Host annotation, severity: info}}
variables:
  other: "{other_port}"
http:
  - raw:
      - |
        @Host: {{{{Host}}}}:{{{{other}}}}
        GET /status HTTP/1.1
        Host: {{{{Hostname}}}}

    matchers:
      - type: word
        words: ["other port"]
"#
    );
    let report = scan(&yaml, &scanned.base).await;
    assert!(scanned.targets().is_empty());
    assert_eq!(other.targets(), vec!["/status"]);
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn a_once_request_goes_out_with_the_first_payload_only() {
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: once
info: {name: Once, severity: info}
http:
  - raw:
      - |
        @once
        GET /login HTTP/1.1
        Host: {{Hostname}}

      - |
        GET /try?p={{p}} HTTP/1.1
        Host: {{Hostname}}

    payloads:
      p: [a, b, c]
"#;
    scan(yaml, &lab.base).await;
    assert_eq!(
        lab.targets(),
        vec!["/login", "/try?p=a", "/try?p=b", "/try?p=c"]
    );
}

#[tokio::test]
async fn identical_safe_requests_of_different_templates_go_out_once_per_target() {
    // Issue 9: requests shared beyond clustering, raw ones included.
    let lab = Lab::start(|s| ok(&format!("page {}", s.target))).await;
    let first = r#"
id: shares-a
info: {name: A, severity: info}
http:
  - path: ["{{BaseURL}}/only-a", "{{BaseURL}}/shared"]
    matchers:
      - type: word
        words: ["page /shared"]
"#;
    let second = r#"
id: shares-b
info: {name: B, severity: info}
http:
  - raw:
      - |
        GET /shared HTTP/1.1
        Host: {{Hostname}}

      - |
        POST /shared HTTP/1.1
        Host: {{Hostname}}

        x=1
    matchers:
      - type: word
        words: ["page /shared"]
"#;
    let report = scan_all(&[first, second], &lab.base).await;
    let mut seen: Vec<String> = lab
        .requests()
        .iter()
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    seen.sort();
    // The GET of /shared once; the POST is never shared.
    assert_eq!(seen, vec!["GET /only-a", "GET /shared", "POST /shared"]);
    // Both templates still judge the shared answer: A once, B twice.
    let ids = template_ids(&report);
    assert_eq!(ids, vec!["shares-a", "shares-b", "shares-b"]);
}

#[tokio::test]
async fn answers_are_shared_across_redirect_policies_only_when_following_could_not_change_them() {
    // Issue 9: the redirect policy is out of the sharing key. A page that
    // is not a redirect is the same answer whether redirects are followed
    // or not, so it goes out once; a redirect is answered differently
    // (first hop or the landing page), so each policy sends its own.
    let lab = Lab::start(redirecting_lab_handler).await;
    let follows = r#"
id: follows
info: {name: Follows, severity: info}
http:
  - path: ["{{BaseURL}}/plain", "{{BaseURL}}/old"]
    redirects: true
    matchers:
      - type: word
        words: ["landed"]
"#;
    let stays = r#"
id: stays
info: {name: Stays, severity: info}
http:
  - path: ["{{BaseURL}}/plain", "{{BaseURL}}/old"]
    matchers:
      - type: status
        status: [302]
"#;
    let report = scan_all(&[follows, stays], &lab.base).await;
    let seen = sorted(lab.targets());
    assert_eq!(seen, vec!["/new", "/old", "/old", "/plain"]);
    let mut found: Vec<String> = report
        .results
        .iter()
        .map(|r| format!("{} {}", r.template_id, r.matched_at))
        .collect();
    found.sort();
    // `follows` matches the landing page of /old and /plain's body;
    // `stays` sees the 302 itself, never the landing page.
    assert_eq!(
        found,
        vec![
            format!("follows {}/new", lab.base),
            format!("follows {}/plain", lab.base),
            format!("stays {}/old", lab.base),
        ]
    );
}

#[tokio::test]
async fn a_template_that_repeats_a_request_sends_it_again() {
    // A cache-poisoning check asks twice on purpose: its second answer
    // must be the server's, not the first one again.
    let lab = Lab::start(|_| ok("")).await;
    let yaml = r#"
id: twice
info: {name: Twice, severity: info}
http:
  - path: ["{{BaseURL}}/page", "{{BaseURL}}/page"]
"#;
    scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/page", "/page"]);
}

#[tokio::test]
async fn a_flow_step_naming_a_missing_block_is_false_after_the_earlier_steps_ran() {
    let yaml = r#"
id: flow-missing
info: {name: Flow missing, severity: info}
flow: http(1) && http(2)
http:
  - path: ["{{BaseURL}}/probe"]
    matchers:
      - type: word
        words: ["x"]
"#;
    let lab = flow_lab("x").await;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/probe"]);
    assert_eq!(report.results.len(), 1);
    assert!(report
        .errors
        .iter()
        .any(|e| e.kind == TargetErrorKind::Skipped && e.message().contains("http(2)")));
}

/// `n` templates that cluster (one GET of `/{path}`), member `i` matching
/// when the page holds `<word-i>`.
fn cluster_of(n: usize, path: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "id: {path}-{i}\ninfo: {{name: M{i}, severity: info}}\nhttp:\n  - method: GET\n    \
                 path: [\"{{{{BaseURL}}}}/{path}\"]\n    matchers:\n      - type: word\n        \
                 words: [\"<word-{i}>\"]\n"
            )
        })
        .collect()
}

#[tokio::test]
async fn a_small_cluster_and_a_large_one_each_send_once_and_judge_every_member() {
    // Three members are matched on the task that got the answer, twenty on
    // rayon: the same results either way.
    let lab = Lab::start(|s| {
        let words: Vec<String> = (0..20)
            .filter(|i| i % 2 == 0 || s.target == "/small")
            .map(|i| format!("<word-{i}>"))
            .collect();
        ok(&words.join(" "))
    })
    .await;
    let mut yamls = cluster_of(3, "small");
    yamls.extend(cluster_of(20, "large"));
    let refs: Vec<&str> = yamls.iter().map(String::as_str).collect();
    let report = scan_all(&refs, &lab.base).await;
    let mut seen: Vec<String> = lab.requests().iter().map(|s| s.target.clone()).collect();
    seen.sort();
    assert_eq!(seen, vec!["/large", "/small"], "each cluster sends once");
    let ids = template_ids(&report);
    let mut want: Vec<String> = (0..3).map(|i| format!("small-{i}")).collect();
    want.extend((0..20).filter(|i| i % 2 == 0).map(|i| format!("large-{i}")));
    assert_eq!(ids, sorted(want));
}
