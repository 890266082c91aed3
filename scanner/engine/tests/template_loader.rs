//! The template loader: model fields, lenient shapes, parse errors with
//! positions, directory loading, and payload files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use scanfleet_common::Severity;
use scanfleet_engine::template::{
    load_dir, load_file, parse_str, LoadError, LoadOptions, PayloadDef,
};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "scanfleet-template-loader-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        p
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const FULL: &str = r#"
id: git-config-exposure
info:
  name: Git Config Exposure
  author: alice, bob
  severity: medium
  description: The .git/config file is readable.
  remediation: Deny access to .git.
  impact: Source code disclosure.
  tags: exposure,git
  reference:
    - https://example.com/a
    - https://example.com/b
  classification:
    cve-id: CVE-2020-1234
    cwe-id: CWE-200,CWE-538
    cvss-score: 5
    cvss-metrics: CVSS:3.1/AV:N
    epss-score: 0.5
  metadata:
    max-request: 2
    verified: true
    shodan-query: http.title:"git"
variables:
  first: "{{rand_base(4)}}"
  second: "{{first}}-x"
  number: 7
http:
  - method: GET
    path:
      - "{{BaseURL}}/.git/config"
    headers:
      X-Test: "1"
      X-Num: 2
    matchers-condition: and
    matchers:
      - type: word
        words:
          - "[core]"
      - type: status
        status:
          - 200
    extractors:
      - type: regex
        name: url
        group: 1
        regex:
          - 'url = (.*)'
"#;

#[test]
fn a_full_template_loads_every_info_field_in_order() {
    let t = parse_str(FULL, Path::new("mem/git.yaml")).expect("parses");
    assert_eq!(t.id, "git-config-exposure");
    assert_eq!(t.info.name, "Git Config Exposure");
    assert_eq!(t.info.author, vec!["alice", "bob"]);
    assert_eq!(t.info.severity, Severity::Medium);
    assert_eq!(
        t.info.description.as_deref(),
        Some("The .git/config file is readable.")
    );
    assert_eq!(t.info.remediation.as_deref(), Some("Deny access to .git."));
    assert_eq!(t.info.tags, vec!["exposure", "git"]);
    assert_eq!(t.info.reference.len(), 2);
    let c = t.info.classification.as_ref().expect("classification");
    assert_eq!(c.cve_id, vec!["CVE-2020-1234"]);
    assert_eq!(c.cwe_id, vec!["CWE-200", "CWE-538"]);
    assert_eq!(c.cvss_score, Some(5.0));
    assert_eq!(c.epss_score, Some(0.5));
    let meta: Vec<&str> = t.info.metadata.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(meta, vec!["max-request", "verified", "shodan-query"]);
    let vars: Vec<(&str, &str)> = t
        .variables
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        vars,
        vec![
            ("first", "{{rand_base(4)}}"),
            ("second", "{{first}}-x"),
            ("number", "7")
        ]
    );
    assert_eq!(t.http.len(), 1);
    let b = &t.http[0];
    assert_eq!(b.method.as_deref(), Some("GET"));
    assert_eq!(b.path, vec!["{{BaseURL}}/.git/config"]);
    assert_eq!(
        b.headers,
        vec![
            ("X-Test".to_string(), "1".to_string()),
            ("X-Num".to_string(), "2".to_string())
        ]
    );
    assert_eq!(b.matchers_condition.as_deref(), Some("and"));
    assert_eq!(b.matchers.len(), 2);
    assert_eq!(b.extractors[0].group, Some(1));
    assert!(t.unknown_fields.is_empty(), "{:?}", t.unknown_fields);
    assert_eq!(t.path.as_deref(), Some(Path::new("mem/git.yaml")));
}

fn with_severity(line: &str) -> String {
    format!("id: s\ninfo:\n  name: s\n  author: a\n{line}\nhttp:\n  - path: ['{{{{BaseURL}}}}']\n")
}

#[test]
fn severities_outside_the_five_levels_and_a_missing_one_become_info() {
    let cases = [
        ("  severity: unknown", Severity::Info),
        ("  severity: ''", Severity::Info),
        ("  severity: 7", Severity::Info),
        ("", Severity::Info),
        ("  severity: HIGH", Severity::High),
        ("  severity: critical", Severity::Critical),
        ("  severity: low", Severity::Low),
    ];
    for (line, want) in cases {
        let t = parse_str(&with_severity(line), Path::new("s.yaml")).expect("parses");
        assert_eq!(t.info.severity, want, "for {line:?}");
    }
}

#[test]
fn the_legacy_requests_key_is_read_as_http() {
    let y = "id: old\ninfo: {name: o, author: a}\nrequests:\n  - method: GET\n    path: ['{{BaseURL}}/x']\n";
    let t = parse_str(y, Path::new("o.yaml")).expect("parses");
    assert_eq!(t.http.len(), 1);
    assert_eq!(t.http[0].path, vec!["{{BaseURL}}/x"]);
}

#[test]
fn scalars_are_accepted_wherever_text_is_expected() {
    let y = r#"
id: 2021
info:
  name: 42
  author: [a, b]
  severity: info
http:
  - path: "{{BaseURL}}/one"
    payloads:
      path:
        -
        - admin/
        - 8080
    headers:
      Content-Length: 0
    matchers:
      - type: word
        words:
          - 200
          - true
"#;
    let t = parse_str(y, Path::new("x.yaml")).expect("parses");
    assert_eq!(t.id, "2021");
    assert_eq!(t.info.name, "42");
    assert_eq!(t.info.author, vec!["a", "b"]);
    let b = &t.http[0];
    assert_eq!(b.path, vec!["{{BaseURL}}/one"]);
    assert_eq!(
        b.payloads,
        vec![(
            "path".to_string(),
            vec!["".to_string(), "admin/".to_string(), "8080".to_string()]
        )]
    );
    assert_eq!(
        b.headers,
        vec![("Content-Length".to_string(), "0".to_string())]
    );
    let words = b.matchers[0].words.as_ref().expect("words").to_vec();
    assert_eq!(words, vec!["200", "true"]);
}

#[test]
fn a_repeated_key_keeps_its_last_value_as_go_does() {
    // The loader reads streaming first and falls back to a last-wins read;
    // both a plain repeat and one whose first value has a shape the model
    // refuses must give the last value, with unknown fields listed once.
    let y = "id: first\ninfo: {name: n, author: a}\nid: last\nextra: 1\nhttp:\n  - path: ['{{BaseURL}}/a']\n    redirects: [1, 2]\n    redirects: true\n";
    let t = parse_str(y, Path::new("d.yaml")).expect("parses");
    assert_eq!(t.id, "last");
    assert!(t.http[0].redirects);
    assert_eq!(t.unknown_fields, vec!["extra".to_string()]);
}

#[test]
fn a_yaml_syntax_error_carries_its_line_and_column() {
    let y = "id: broken\ninfo:\n  name: b\n  author: a\nhttp:\n  - path: [\"{{BaseURL}}\"\n    method: GET\n";
    let err = parse_str(y, Path::new("broken.yaml")).expect_err("must fail");
    match &err {
        LoadError::Parse { line, column, .. } => {
            let line = line.expect("a line number");
            assert!((6..=8).contains(&line), "line {line}: {err}");
            assert!(column.is_some(), "{err}");
        }
        other => panic!("not a parse error: {other}"),
    }
    assert!(err.to_string().starts_with("broken.yaml:"), "{err}");
}

#[test]
fn a_field_of_the_wrong_shape_is_a_parse_error_at_its_line() {
    let y = "id: t\ninfo:\n  name: t\n  author: a\nhttp:\n  - path: ['{{BaseURL}}']\n    redirects: [1, 2]\n";
    let err = parse_str(y, Path::new("t.yaml")).expect_err("must fail");
    assert_eq!(err.line(), Some(7), "{err}");
}

#[test]
fn unknown_keys_are_kept_with_their_path_not_rejected() {
    let y = "id: u\ninfo: {name: u, author: a, extra-info: 1}\nconstants:\n  a: b\nhttp:\n  - path: ['{{BaseURL}}']\n    analyzer:\n      name: time_delay\n";
    let t = parse_str(y, Path::new("u.yaml")).expect("parses");
    assert!(
        t.unknown_fields.contains(&"constants".to_string()),
        "{:?}",
        t.unknown_fields
    );
    assert!(
        t.unknown_fields.contains(&"http.0.analyzer".to_string()),
        "{:?}",
        t.unknown_fields
    );
    assert!(
        t.unknown_fields.contains(&"info.extra-info".to_string()),
        "{:?}",
        t.unknown_fields
    );
}

#[test]
fn other_protocol_sections_are_recognised_by_name() {
    let y = "id: d\ninfo: {name: d, author: a}\ndns:\n  - name: '{{FQDN}}'\n    type: A\nheadless:\n  - steps: []\n";
    let t = parse_str(y, Path::new("d.yaml")).expect("parses");
    assert_eq!(t.other_protocols, vec!["dns", "headless"]);
    assert!(t.http.is_empty());
}

#[test]
fn a_directory_load_survives_broken_files_and_counts_every_template() {
    let s = Scratch::new();
    s.write("a/one.yaml", FULL);
    s.write("a/b/two.yml", &with_severity("  severity: low"));
    s.write("a/b/bad.yaml", "id: [unclosed\n");
    s.write("a/notes.txt", "not a template");
    s.write("empty.yaml", "");
    s.write(".github/workflows/ci.yml", "on: push\n");
    let report = load_dir(s.path());
    assert_eq!(report.found, 4, "{report}");
    assert_eq!(report.parsed(), 2, "{report}");
    assert_eq!(report.failures.len(), 2, "{report}");
    let failed: Vec<String> = report
        .failures
        .iter()
        .map(|e| e.path().file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(failed, vec!["bad.yaml", "empty.yaml"]);
    assert!(report.walk_errors.is_empty());
}

#[test]
fn loading_a_missing_file_is_an_io_error_naming_it() {
    let err = load_file(Path::new("/nonexistent/scanfleet/x.yaml")).expect_err("missing");
    assert!(matches!(err, LoadError::Io { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/scanfleet/x.yaml"));
}

const WITH_PAYLOAD_FILE: &str = r#"
id: p
info: {name: p, author: a}
http:
  - raw:
      - |
        GET /{{word}} HTTP/1.1
        Host: {{Hostname}}
    payloads:
      word: PAYLOAD_PATH
      inline:
        - x
    attack: clusterbomb
    matchers:
      - type: status
        status: [200]
"#;

#[test]
fn a_payload_file_is_read_relative_to_the_template() {
    let s = Scratch::new();
    s.write("t/words.txt", "alpha\n\nbeta\r\ngamma\n");
    let path = s.write(
        "t/p.yaml",
        &WITH_PAYLOAD_FILE.replace("PAYLOAD_PATH", "words.txt"),
    );
    let t = load_file(&path).expect("loads");
    let b = &t.http[0];
    assert_eq!(
        b.payloads,
        vec![
            (
                "word".to_string(),
                vec!["alpha".to_string(), "beta".to_string(), "gamma".to_string()]
            ),
            ("inline".to_string(), vec!["x".to_string()]),
        ]
    );
    assert_eq!(b.payload_files.len(), 1);
    assert_eq!(
        b.payload_files[0].resolved.as_deref(),
        Some(s.path().join("t/words.txt").as_path())
    );
}

#[test]
fn a_payload_file_is_found_at_the_root_of_the_templates_tree() {
    let s = Scratch::new();
    s.write("helpers/wordlists/users.txt", "admin\nroot\n");
    s.write(
        "http/cves/2021/p.yaml",
        &WITH_PAYLOAD_FILE.replace("PAYLOAD_PATH", "helpers/wordlists/users.txt"),
    );
    // Loading `http/` looks in the template's folders up to the checkout root.
    let report = load_dir(&s.path().join("http"));
    assert_eq!(report.parsed(), 1, "{report}");
    let b = &report.templates[0].http[0];
    assert_eq!(b.payloads[0].1, vec!["admin", "root"]);

    // A single file with an explicit root finds it too.
    let options = LoadOptions {
        roots: vec![s.path().to_path_buf()],
    };
    let t = scanfleet_engine::template::load_file_with(
        &s.path().join("http/cves/2021/p.yaml"),
        &options,
    )
    .expect("loads");
    assert_eq!(t.http[0].payloads[0].1, vec!["admin", "root"]);
}

#[test]
fn a_missing_payload_file_leaves_the_template_parsed_but_unresolved() {
    let s = Scratch::new();
    let path = s.write(
        "t/p.yaml",
        &WITH_PAYLOAD_FILE.replace("PAYLOAD_PATH", "nope.txt"),
    );
    let t = load_file(&path).expect("still parses");
    let b = &t.http[0];
    assert_eq!(b.payload_files.len(), 1);
    assert_eq!(b.payload_files[0].path, "nope.txt");
    assert!(b.payload_files[0].resolved.is_none());
    assert!(b.payloads.iter().all(|(name, _)| name != "word"));
}

#[test]
fn payload_paths_that_leave_the_template_tree_are_not_read() {
    let s = Scratch::new();
    s.write("secret.txt", "do-not-send\n");
    for written in ["../secret.txt", "/etc/hostname"] {
        let path = s.write(
            "t/p.yaml",
            &WITH_PAYLOAD_FILE.replace("PAYLOAD_PATH", written),
        );
        let t = load_file(&path).expect("parses");
        assert!(
            t.http[0].payload_files[0].resolved.is_none(),
            "{written} was read"
        );
    }
}

#[test]
fn a_multi_line_payload_string_is_an_inline_list() {
    let y = "id: m\ninfo: {name: m, author: a}\nhttp:\n  - path: ['{{BaseURL}}/{{p}}']\n    payloads:\n      p: \"a\\nb\"\n";
    let t = parse_str(y, Path::new("m.yaml")).expect("parses");
    assert_eq!(
        t.http[0].payload_defs[0].1,
        PayloadDef::List(vec!["a".into(), "b".into()])
    );
    assert_eq!(t.http[0].payloads[0].1, vec!["a", "b"]);
    assert!(t.http[0].payload_files.is_empty());
}
