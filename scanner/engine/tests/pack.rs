//! The default template pack: every embedded file is a well-formed template of
//! this project, uses only features the engine implements, and has a case in
//! the lab server (tests/lab) with a vulnerable and a hardened route.

mod lab;

#[path = "lab/engine_pack.rs"]
mod engine_pack;

use std::collections::{BTreeMap, BTreeSet};

use scanfleet_engine::pack;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SEVERITIES: &[&str] = &["info", "low", "medium", "high", "critical"];
const REQUEST_KEYS: &[&str] = &[
    "method",
    "path",
    "raw",
    "headers",
    "body",
    "payloads",
    "attack",
    "redirects",
    "max-redirects",
    "stop-at-first-match",
    "matchers-condition",
    "matchers",
    "extractors",
];
const MATCHER_TYPES: &[&str] = &["word", "regex", "status", "size", "binary", "dsl"];
const EXTRACTOR_TYPES: &[&str] = &["regex", "kval", "json", "dsl"];

/// Every pack file parsed into a generic YAML value, with its path.
fn parsed_pack() -> Vec<(&'static str, Value)> {
    pack::default_pack()
        .iter()
        .map(|(path, yaml)| {
            let value: Value = serde_saphyr::from_str(yaml)
                .unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}"));
            (*path, value)
        })
        .collect()
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn requests(template: &Value) -> &[Value] {
    template
        .get("http")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn the_pack_holds_at_least_sixty_five_templates() {
    let count = pack::default_pack().len();
    assert!(count >= 65, "only {count} templates in the pack");
}

#[test]
fn every_pack_file_is_yaml_with_the_required_info_fields() {
    for (path, template) in parsed_pack() {
        for field in [
            "/id",
            "/info/name",
            "/info/author",
            "/info/severity",
            "/info/tags",
        ] {
            assert!(
                !text(&template, field).trim().is_empty(),
                "{path}: {field} is missing"
            );
        }
        assert_eq!(
            text(&template, "/info/author"),
            "scanfleet",
            "{path}: author"
        );
        assert!(!requests(&template).is_empty(), "{path}: no http requests");
    }
}

#[test]
fn every_severity_is_one_of_the_five_and_description_and_remediation_are_filled() {
    for (path, template) in parsed_pack() {
        let severity = text(&template, "/info/severity");
        assert!(
            SEVERITIES.contains(&severity),
            "{path}: severity {severity:?}"
        );
        for field in ["/info/description", "/info/remediation"] {
            let value = text(&template, field).trim();
            assert!(
                value.len() >= 30,
                "{path}: {field} is empty or too short: {value:?}"
            );
        }
    }
}

#[test]
fn template_ids_are_unique_and_match_their_file_names() {
    let mut seen = BTreeMap::new();
    for (path, template) in parsed_pack() {
        let id = text(&template, "/id").to_string();
        let file_stem = path
            .rsplit('/')
            .next()
            .unwrap_or(path)
            .trim_end_matches(".yaml");
        assert_eq!(id, file_stem, "{path}: id differs from the file name");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{path}: id {id:?} is not lower-case kebab"
        );
        if let Some(other) = seen.insert(id.clone(), path) {
            panic!("id {id} is used by {other} and {path}");
        }
    }
}

#[test]
fn pack_ids_agree_with_the_parsed_documents() {
    let parsed: Vec<String> = parsed_pack()
        .iter()
        .map(|(_, t)| text(t, "/id").to_string())
        .collect();
    let listed: Vec<String> = pack::ids().into_iter().map(str::to_string).collect();
    assert_eq!(listed, parsed);
}

#[test]
fn every_template_sticks_to_the_supported_request_and_operator_features() {
    for (path, template) in parsed_pack() {
        for request in requests(&template) {
            let keys = request
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>());
            for key in keys.unwrap_or_default() {
                assert!(
                    REQUEST_KEYS.contains(&key.as_str()),
                    "{path}: request key {key}"
                );
            }
            let matchers = request.get("matchers").and_then(Value::as_array);
            let matchers = matchers.map(Vec::as_slice).unwrap_or(&[]);
            assert!(!matchers.is_empty(), "{path}: a request without matchers");
            for matcher in matchers {
                let kind = text(matcher, "/type");
                assert!(
                    MATCHER_TYPES.contains(&kind),
                    "{path}: matcher type {kind:?}"
                );
            }
            let extractors = request.get("extractors").and_then(Value::as_array);
            for extractor in extractors.map(Vec::as_slice).unwrap_or(&[]) {
                let kind = text(extractor, "/type");
                assert!(
                    EXTRACTOR_TYPES.contains(&kind),
                    "{path}: extractor type {kind:?}"
                );
            }
        }
    }
}

/// A status code alone proves nothing on sites that answer 200 to every path,
/// so every AND-combined request must also look at content or headers.
#[test]
fn no_template_relies_on_the_status_code_alone() {
    for (path, template) in parsed_pack() {
        for request in requests(&template) {
            let matchers = request.get("matchers").and_then(Value::as_array);
            let kinds: Vec<&str> = matchers
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .filter(|m| !m.get("negative").and_then(Value::as_bool).unwrap_or(false))
                .map(|m| text(m, "/type"))
                .collect();
            assert!(
                kinds.iter().any(|k| *k != "status" && *k != "size"),
                "{path}: only status or size matchers"
            );
        }
    }
}

#[test]
fn every_regex_in_the_pack_compiles() {
    for (path, template) in parsed_pack() {
        for request in requests(&template) {
            for list in ["matchers", "extractors"] {
                let operators = request.get(list).and_then(Value::as_array);
                for operator in operators.map(Vec::as_slice).unwrap_or(&[]) {
                    for pattern in strings(operator.get("regex")) {
                        if let Err(e) = regex::Regex::new(&pattern) {
                            panic!("{path}: regex {pattern:?} does not compile: {e}");
                        }
                    }
                    for hex_value in strings(operator.get("binary")) {
                        assert!(
                            hex::decode(&hex_value).is_ok(),
                            "{path}: binary {hex_value:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_lab_has_exactly_one_case_per_template() {
    let templates: BTreeSet<String> = pack::ids().into_iter().map(str::to_string).collect();
    let cases: BTreeSet<String> = lab::CASES.iter().map(|c| c.to_string()).collect();
    assert_eq!(lab::CASES.len(), cases.len(), "a lab case is listed twice");
    let missing: Vec<_> = templates.difference(&cases).collect();
    let extra: Vec<_> = cases.difference(&templates).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "no lab case for {missing:?}; no template for {extra:?}"
    );
}

/// One raw HTTP/1.1 exchange, so this check depends on nothing but tokio.
async fn fetch(addr: std::net::SocketAddr, method: &str, target: &str, headers: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect to the lab");
    let request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    response
}

/// Checks the lab is wired at the paths the templates request: for every
/// template, at least one of its requests is answered differently on the
/// vulnerable route than on the hardened route, and than on the catch-all
/// site. (The engine-driven checks live in lab/engine_pack.rs.)
#[tokio::test]
async fn the_lab_answers_differently_on_vulnerable_and_hardened_routes() {
    let lab = lab::Lab::start().await.expect("start the lab");
    let addr = lab.addr();
    let origin = format!("http://{addr}");
    let mut undistinguished = Vec::new();
    for (path, template) in parsed_pack() {
        let id = text(&template, "/id");
        let bases = [
            lab.vulnerable_url(id),
            lab.hardened_url(id),
            lab.catchall_url(id),
        ];
        let [vulnerable_base, hardened_base, catchall_base] =
            bases.map(|url| url.trim_start_matches(&origin).to_string());
        let (mut differs_from_hardened, mut differs_from_catchall) = (false, false);
        for request in requests(&template) {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("GET");
            let headers: String = request
                .get("headers")
                .and_then(Value::as_object)
                .map(|map| {
                    map.iter()
                        .map(|(name, value)| {
                            format!("{name}: {}\r\n", value.as_str().unwrap_or(""))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut targets: Vec<(String, String)> = strings(request.get("path"))
                .into_iter()
                .map(|p| (method.to_string(), p.replace("{{BaseURL}}", "")))
                .collect();
            for raw in strings(request.get("raw")) {
                let mut line = raw.lines().next().unwrap_or("").split(' ');
                let (m, t) = (line.next().unwrap_or("GET"), line.next().unwrap_or("/"));
                targets.push((m.to_string(), t.to_string()));
            }
            for (method, target) in targets {
                // Payload placeholders: try the payload the lab honours.
                let target = target.replace("{{param}}", "redirect");
                let vulnerable = fetch(
                    addr,
                    &method,
                    &format!("{vulnerable_base}{target}"),
                    &headers,
                )
                .await;
                let hardened =
                    fetch(addr, &method, &format!("{hardened_base}{target}"), &headers).await;
                let catchall =
                    fetch(addr, &method, &format!("{catchall_base}{target}"), &headers).await;
                differs_from_hardened |= vulnerable != hardened;
                differs_from_catchall |= vulnerable != catchall;
            }
        }
        if !(differs_from_hardened && differs_from_catchall) {
            undistinguished.push(path);
        }
    }
    assert!(
        undistinguished.is_empty(),
        "same answers on the vulnerable and a safe route: {undistinguished:?}"
    );
}
