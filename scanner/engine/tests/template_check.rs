//! The runnability check: each reason a template cannot run, and the
//! features that do run.

use std::path::Path;

use scanfleet_engine::template::{check, parse_str, Reason, Template};

fn load(yaml: &str) -> Template {
    parse_str(yaml, Path::new("mem/t.yaml")).unwrap_or_else(|e| panic!("fixture must parse: {e}"))
}

/// A template with one block made of `block` (YAML indented by four).
fn with_block(block: &str) -> String {
    format!(
        "id: t\ninfo:\n  name: t\n  author: a\n  severity: low\nhttp:\n  - {}\n",
        block.trim_start()
    )
}

fn reasons(yaml: &str) -> Vec<String> {
    match check(&load(yaml)) {
        Ok(()) => Vec::new(),
        Err(u) => u.reasons().iter().map(ToString::to_string).collect(),
    }
}

fn primary(yaml: &str) -> String {
    match check(&load(yaml)) {
        Ok(()) => "runnable".to_string(),
        Err(u) => u.primary().to_string(),
    }
}

const MATCH_200: &str = "    matchers:\n      - type: status\n        status: [200]\n";

// Long because the template it checks is written out whole.
#[allow(clippy::too_many_lines)]
#[test]
fn a_template_using_every_supported_feature_is_runnable() {
    let yaml = r#"
id: everything
info:
  name: everything
  author: a
  severity: high
variables:
  token: "{{rand_base(8)}}"
  marker: "{{md5(token)}}"
http:
  - method: POST
    path:
      - "{{BaseURL}}/login"
    headers:
      Content-Type: application/x-www-form-urlencoded
    body: "user={{username}}&pass={{url_encode(password)}}"
    payloads:
      username: [admin, root]
      password: [admin, toor]
    attack: clusterbomb
    redirects: true
    max-redirects: 3
    cookie-reuse: true
    stop-at-first-match: true
    threads: 5
    max-size: 4096
    extractors:
      - type: regex
        name: session
        internal: true
        group: 1
        regex: ['session=([a-z0-9]+)']
      - type: kval
        kval: [set_cookie]
      - type: json
        json: ['.token']
      - type: xpath
        attribute: href
        xpath: ['//a']
      - type: dsl
        dsl: ['len(body)']
    matchers-condition: and
    matchers:
      - type: word
        part: header
        words: ["Set-Cookie"]
        case-insensitive: true
      - type: regex
        regex: ['(?i)welcome']
      - type: status
        status: [200, 302]
      - type: size
        size: [1234]
        negative: true
      - type: binary
        binary: ['504b0304']
      - type: xpath
        xpath: ['/html/head/title']
      - type: dsl
        dsl:
          - 'contains(to_lower(body), "ok") && status_code == 200'
          - 'compare_versions(version, "< 2.0")'
  - raw:
      - |
        @timeout: 20s
        GET /account?session={{session}} HTTP/1.1
        Host: {{Hostname}}

      - |
        GET /..;/admin HTTP/1.1
        Host: {{Hostname}}
    unsafe: true
    req-condition: true
    payloads:
      path: ['a', 'b']
    attack: pitchfork
    matchers:
      - type: dsl
        dsl:
          - 'status_code_1 == 200 && contains(body_2, "{{marker}}")'
"#;
    assert_eq!(reasons(yaml), Vec::<String>::new());
}

#[test]
fn an_interpolated_probe_that_is_not_a_helper_call_stays_runnable() {
    // `{{7*7}}` and `{{phpinfo()}}` are template-injection probes sent as written.
    let y = with_block(&format!(
        "path:\n      - \"{{{{BaseURL}}}}/?q={{{{7*7}}}}&r={{{{phpinfo()}}}}\"\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "runnable");
}

#[test]
fn another_protocol_is_reported_by_name() {
    let y = "id: t\ninfo: {name: t, author: a}\ndns:\n  - name: '{{FQDN}}'\n    type: A\n";
    assert_eq!(primary(y), "unsupported protocol: dns");
    let y = "id: t\ninfo: {name: t, author: a}\nheadless:\n  - steps: []\n";
    assert_eq!(primary(y), "unsupported protocol: headless");
}

#[test]
fn a_template_without_any_request_section_has_no_http_requests() {
    assert_eq!(
        primary("id: t\ninfo: {name: t, author: a}\n"),
        "no http requests"
    );
}

#[test]
fn a_boolean_flow_over_existing_blocks_is_runnable_but_javascript_is_not() {
    // Issue 9: `&&`, `||` and parentheses over `http(n)` run natively.
    let two = format!(
        "{}  - path: ['{{{{BaseURL}}}}/b']\n{MATCH_200}",
        with_block(&format!("path: ['{{{{BaseURL}}}}']\n{MATCH_200}"))
    );
    assert_eq!(
        primary(&format!("flow: http(1) && http(2)\n{two}")),
        "runnable"
    );
    assert_eq!(
        primary(&format!("flow: (http(1) || http(2)) && http(1)\n{two}")),
        "runnable"
    );
    // A step naming a missing block is false at run time, as in Nuclei.
    assert_eq!(
        primary(&format!("flow: http(1) && http(3)\n{two}")),
        "runnable"
    );
    let js =
        "flow: |\n  http(1)\n  for (let p of iterate(template.paths)) { set('p', p); http(2) }\n";
    // JavaScript runs in the embedded engine; only a script that does not
    // parse is refused.
    assert_eq!(primary(&format!("{js}{two}")), "runnable");
    let broken = "flow: |\n  http(1)\n  for (let p of iterate(template.paths)) { http(2)\n";
    assert_eq!(
        primary(&format!("{broken}{two}")),
        "flow script does not parse"
    );
}

#[test]
fn self_contained_templates_and_blocks_are_not_runnable() {
    let y = format!(
        "self-contained: true\n{}",
        with_block(&format!(
            "path: ['https://api.example.com/me']\n{MATCH_200}"
        ))
    );
    assert_eq!(primary(&y), "self-contained request");
    let y = with_block(&format!(
        "self-contained: true\n    path: ['https://api.example.com/me']\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "self-contained request");
}

#[test]
fn interactsh_anywhere_needs_an_out_of_band_server() {
    let in_path = with_block(&format!(
        "path: ['{{{{BaseURL}}}}/?u=http://{{{{interactsh-url}}}}']\n{MATCH_200}"
    ));
    assert_eq!(primary(&in_path), "needs interactsh (out-of-band)");
    let in_part = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: word\n        part: interactsh_protocol\n        words: [http]\n",
    );
    assert_eq!(primary(&in_part), "needs interactsh (out-of-band)");
    let in_header = with_block(&format!(
        "path: ['{{{{BaseURL}}}}']\n    headers:\n      X-Forwarded-Host: '{{{{interactsh-url}}}}'\n{MATCH_200}"
    ));
    assert_eq!(primary(&in_header), "needs interactsh (out-of-band)");
}

#[test]
fn request_features_the_engine_lacks_are_named() {
    let cases = [
        (
            "fuzzing:\n      - part: query\n        type: postfix\n",
            "unsupported feature: fuzzing",
        ),
        (
            "race: true\n    race_count: 10\n",
            "unsupported feature: race",
        ),
        ("pipeline: true\n", "unsupported feature: pipeline"),
        (
            "global-matchers: true\n",
            "unsupported feature: global-matchers",
        ),
        (
            "disable-path-automerge: true\n",
            "unsupported feature: disable-path-automerge",
        ),
        ("signature: AWS\n", "unsupported feature: signature"),
        (
            "analyzer:\n      name: time_delay\n",
            "unsupported feature: analyzer",
        ),
    ];
    for (extra, want) in cases {
        let y = with_block(&format!(
            "path: ['{{{{BaseURL}}}}']\n    {extra}{MATCH_200}"
        ));
        assert_eq!(primary(&y), want, "for {extra:?}");
    }
    let y = with_block(&format!(
        "path: ['{{{{BaseURL}}}}']\n    iterate-all: true\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "runnable");
    let y = with_block(&format!(
        "path: ['{{{{BaseURL}}}}']\n    digest-username: admin\n    digest-password: admin\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "runnable");
}

#[test]
fn an_unknown_top_level_key_is_an_unsupported_feature_but_unknown_info_keys_are_not() {
    let y = format!(
        "constants:\n  a: b\n{}",
        with_block(&format!("path: ['{{{{BaseURL}}}}']\n{MATCH_200}"))
    );
    assert_eq!(primary(&y), "unsupported feature: constants");
    let y = with_block(&format!("path: ['{{{{BaseURL}}}}']\n{MATCH_200}"))
        .replace("  severity: low\n", "  severity: low\n  owner: someone\n");
    assert_eq!(primary(&y), "runnable");
}

#[test]
fn a_host_annotation_may_only_change_the_targets_port_or_scheme() {
    let raw = |host: &str| {
        with_block(&format!(
            "raw:\n      - |\n        @Host: {host}\n        GET / HTTP/1.1\n        Host: {{{{Hostname}}}}\n\n{MATCH_200}"
        ))
    };
    assert_eq!(
        primary(&raw("https://other.example:443")),
        "unsupported feature: @Host annotation to another host"
    );
    assert_eq!(
        primary(&raw("localhost")),
        "unsupported feature: @Host annotation to another host"
    );
    assert_eq!(
        primary(&raw("{{Hostname}}.evil.example")),
        "unsupported feature: @Host annotation to another host"
    );
    assert_eq!(primary(&raw("{{Hostname}}:9780")), "runnable");
    assert_eq!(primary(&raw("http://{{Host}}:43800")), "runnable");
}

#[test]
fn a_path_that_is_an_absolute_url_to_another_host_is_refused() {
    let y = with_block(&format!(
        "path: ['https://www.rdap.net/domain/{{{{Host}}}}']\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "request to a fixed third-party host");
    let y = with_block(&format!(
        "path: ['http://{{{{Hostname}}}}/x', '{{{{BaseURL}}}}/y']\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "runnable");
}

#[test]
fn raw_annotations_other_than_timeout_host_once_and_tls_sni_are_unsupported() {
    let y = with_block(&format!(
        "raw:\n      - |\n        @proxy: http://x\n        GET / HTTP/1.1\n        Host: {{{{Hostname}}}}\n\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "unsupported feature: @proxy annotation");
}

#[test]
fn a_tls_sni_annotation_may_only_name_the_target_directly_or_through_variables() {
    let raw = |sni: &str, variables: &str| {
        format!(
            "{variables}{}",
            with_block(&format!(
                "raw:\n      - |\n        @tls-sni: {sni}\n        GET / HTTP/1.1\n        Host: {{{{Hostname}}}}\n\n{MATCH_200}"
            ))
        )
    };
    assert_eq!(primary(&raw("{{Hostname}}", "")), "runnable");
    assert_eq!(primary(&raw("{{Host}}", "")), "runnable");
    assert_eq!(
        primary(&raw("{{sni}}", "variables:\n  sni: '{{Host}}'\n")),
        "runnable"
    );
    assert_eq!(
        primary(&raw(
            "{{sni}}",
            "variables:\n  sni: '{{name}}'\n  name: '{{FQDN}}'\n"
        )),
        "runnable"
    );
    for (sni, variables) in [
        ("evil.example", ""),
        ("{{sni}}", "variables:\n  sni: evil.example\n"),
        ("{{sni}}.evil.example", "variables:\n  sni: '{{Host}}'\n"),
        ("{{undefined}}", ""),
    ] {
        assert_eq!(
            primary(&raw(sni, variables)),
            "unsupported feature: @tls-sni annotation naming another host",
            "{sni} with {variables:?}"
        );
    }
}

#[test]
fn matcher_and_extractor_types_outside_the_supported_set_are_named() {
    let y = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: favicon\n        hash: ['1']\n",
    );
    let r = reasons(&y);
    assert!(
        r.contains(&"unsupported matcher type: favicon".to_string()),
        "{r:?}"
    );
    assert!(
        r.contains(&"unsupported feature: hash".to_string()),
        "{r:?}"
    );
    let y = with_block(&format!(
        "path: ['{{{{BaseURL}}}}']\n    extractors:\n      - type: jq\n        jq: ['.a']\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "unsupported extractor type: jq");
}

#[test]
fn a_dsl_helper_the_engine_cannot_run_is_named() {
    let y = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: dsl\n        dsl:\n          - 'wait_for(5) && status_code == 200'\n",
    );
    // `wait_for` waits before a request is sent; in a matcher it would
    // wait for nothing.
    assert_eq!(primary(&y), "unsupported DSL helper: wait_for in a matcher");
    let y = with_block(&format!(
        "raw:\n      - |\n        GET /?{{{{wait_for(9)}}}} HTTP/1.1\n        Host: {{{{Hostname}}}}\n\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "runnable");
    // In request text too, when the marker is a real helper call.
    let y = with_block(&format!(
        "path: ['{{{{BaseURL}}}}/?ip={{{{public_ip()}}}}']\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "unsupported DSL helper: public_ip");
}

#[test]
fn a_dsl_function_nuclei_does_not_have_is_an_unsupported_helper() {
    let y = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: dsl\n        dsl:\n          - 'no_such_helper(body)'\n",
    );
    assert_eq!(primary(&y), "unsupported DSL helper: no_such_helper");
}

#[test]
fn a_dsl_expression_that_does_not_parse_is_reported() {
    let y = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: dsl\n        dsl:\n          - 'status_code == (200'\n",
    );
    assert_eq!(primary(&y), "unsupported DSL expression");
}

#[test]
fn payload_problems_are_reasons() {
    let missing = with_block(&format!(
        "path: ['{{{{BaseURL}}}}/{{{{p}}}}']\n    payloads:\n      p: helpers/wordlists/none.txt\n{MATCH_200}"
    ));
    assert_eq!(primary(&missing), "missing payload file");
    let empty = with_block(&format!(
        "path: ['{{{{BaseURL}}}}/{{{{p}}}}']\n    payloads:\n      p: []\n{MATCH_200}"
    ));
    assert_eq!(primary(&empty), "empty payload list");
    let attack = with_block(&format!(
        "path: ['{{{{BaseURL}}}}/{{{{p}}}}']\n    payloads:\n      p: [a]\n    attack: sniper\n{MATCH_200}"
    ));
    assert_eq!(primary(&attack), "unsupported attack type: sniper");
}

#[test]
fn a_block_without_path_or_raw_cannot_send_anything() {
    let y = with_block(&format!("method: GET\n{MATCH_200}"));
    assert_eq!(primary(&y), "http block without path or raw");
}

#[test]
fn the_most_fundamental_reason_comes_first_and_all_are_kept() {
    let y = format!(
        "flow: set('a', 1) &&& {{\nself-contained: true\n{}",
        with_block(&format!(
            "path: ['{{{{BaseURL}}}}/{{{{interactsh-url}}}}']\n    race: true\n{MATCH_200}"
        ))
    );
    let u = check(&load(&y)).expect_err("not runnable");
    assert_eq!(u.primary(), &Reason::Flow);
    let all: Vec<String> = u.reasons().iter().map(ToString::to_string).collect();
    assert_eq!(
        all,
        vec![
            "flow script does not parse",
            "self-contained request",
            "needs interactsh (out-of-band)",
            "unsupported feature: race",
        ]
    );
    assert_eq!(
        u.to_string(),
        "flow script does not parse; self-contained request; needs interactsh (out-of-band); unsupported feature: race"
    );
}

#[test]
fn pitchfork_lists_of_different_lengths_run_up_to_the_shortest() {
    let y = with_block(&format!(
        "path: ['{{{{BaseURL}}}}/{{{{u}}}}/{{{{p}}}}']\n    payloads:\n      u: [a, b]\n      p: [c]\n    attack: pitchfork\n{MATCH_200}"
    ));
    assert_eq!(primary(&y), "runnable");
    let even = y.replace("p: [c]", "p: [c, d]");
    assert_eq!(primary(&even), "runnable");
}

#[test]
fn operators_that_do_not_compile_are_named_by_kind() {
    let bad_regex = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: regex\n        regex: ['(?)broken']\n",
    );
    assert_eq!(primary(&bad_regex), "invalid operator: regex");
    let no_words = with_block(
        "path: ['{{BaseURL}}']\n    matchers:\n      - type: word\n        part: body\n",
    );
    assert_eq!(primary(&no_words), "invalid operator: no values");
}
