//! Request features of issue 9, part 2, against local servers: `wait_for`,
//! `iterate-all`, Digest authentication and the `@tls-sni` annotation.

use std::time::{Duration, Instant};

use md5::{Digest, Md5};
use scanfleet_engine::engine::{Engine, EngineConfig, RunReport, TargetErrorKind};
use scanfleet_http::{ClientConfig, TargetUrl};

mod support;
use support::{compile, not_found, ok, Lab, Reply, Seen};

/// A 200 JSON answer.
fn json(body: &str) -> Reply {
    Reply {
        headers: vec![("Content-Type".into(), "application/json".into())],
        ..ok(body)
    }
}

fn lab_client() -> ClientConfig {
    ClientConfig {
        allow_private: true,
        hosts: ClientConfig::parse_hosts("secure.test=127.0.0.1").expect("hosts"),
        ..ClientConfig::default()
    }
}

async fn scan_with(yaml: &str, target: &str, client: ClientConfig) -> RunReport {
    let engine = Engine::new(EngineConfig {
        client,
        ..EngineConfig::default()
    })
    .expect("engine");
    let target = TargetUrl::parse(target).expect("target");
    engine.run(&[compile(yaml)], &[target]).await
}

async fn scan(yaml: &str, target: &str) -> RunReport {
    scan_with(yaml, target, lab_client()).await
}

// ---- wait_for ----

#[tokio::test]
async fn wait_for_delays_the_request_it_is_written_in() {
    let lab = Lab::start(|_| json("done")).await;
    let yaml = r#"
id: wait
info: {name: Wait, severity: info}
http:
  - raw:
      - |
        GET /slow?{{wait_for(1)}} HTTP/1.1
        Host: {{Hostname}}

    matchers:
      - type: word
        words: ["done"]
"#;
    let started = Instant::now();
    let report = scan(yaml, &lab.base).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // Nuclei's wait_for returns true, which is what the marker becomes.
    assert_eq!(lab.targets(), vec!["/slow?true"]);
    assert_eq!(report.results.len(), 1);
}

#[tokio::test]
async fn wait_for_never_waits_longer_than_the_request_timeout() {
    let lab = Lab::start(|_| json("done")).await;
    let yaml = r#"
id: wait-long
info: {name: Wait long, severity: info}
http:
  - path: ["{{BaseURL}}/x?{{wait_for(3600)}}"]
"#;
    let client = ClientConfig {
        timeout: Duration::from_secs(1),
        ..lab_client()
    };
    let started = Instant::now();
    scan_with(yaml, &lab.base, client).await;
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(lab.targets(), vec!["/x?true"]);
}

// ---- iterate-all ----

const LISTING: &str = r#"
id: listing
info: {name: Listing, severity: high}
http:
  - method: GET
    path:
      - "{{BaseURL}}/content.json"
      - "{{BaseURL}}{{path}}"
    ITERATE
    extractors:
      - type: json
        part: body
        name: path
        json: ['.[]']
        internal: true
    matchers:
      - type: word
        words: ["rep:privileges"]
"#;

fn listing_lab_handler(s: &Seen) -> Reply {
    match s.target.as_str() {
        "/content.json" => json(r#"["/a", "/b", "/c"]"#),
        "/b" => json(r#"{"rep:privileges": []}"#),
        "/a" | "/c" => json("{}"),
        _ => not_found(),
    }
}

#[tokio::test]
async fn iterate_all_sends_a_later_request_once_per_extracted_value() {
    let lab = Lab::start(listing_lab_handler).await;
    let report = scan(&LISTING.replace("ITERATE", "iterate-all: true"), &lab.base).await;
    assert_eq!(lab.targets(), vec!["/content.json", "/a", "/b", "/c"]);
    let at: Vec<&str> = report
        .results
        .iter()
        .map(|r| r.matched_at.as_str())
        .collect();
    assert_eq!(at, vec![format!("{}/b", lab.base)]);

    // Without it, only the first value is used, as before.
    let lab = Lab::start(listing_lab_handler).await;
    let report = scan(&LISTING.replace("ITERATE", ""), &lab.base).await;
    assert_eq!(lab.targets(), vec!["/content.json", "/a"]);
    assert!(report.results.is_empty());
}

#[tokio::test]
async fn iterate_all_takes_lists_in_step_and_stops_at_the_first_match() {
    // After CVE-2022-36804: the project key and slug of each repository.
    let lab = Lab::start(|s| match s.target.as_str() {
        "/repos" => json(r#"{"values": [{"key": "K1", "slug": "s1"}, {"key": "K2", "slug": "s2"}, {"key": "K3", "slug": "s3"}]}"#),
        "/p/K2/r/s2" => json("boom"),
        _ => not_found(),
    })
    .await;
    let yaml = r#"
id: in-step
info: {name: In step, severity: high}
http:
  - raw:
      - |
        GET /repos HTTP/1.1
        Host: {{Hostname}}
      - |
        GET /p/{{key}}/r/{{slug}} HTTP/1.1
        Host: {{Hostname}}

    iterate-all: true
    stop-at-first-match: true
    extractors:
      - type: json
        name: key
        internal: true
        json: ['.values[] | .key']
      - type: json
        name: slug
        internal: true
        json: ['.values[] | .slug']
    matchers:
      - type: word
        words: ["boom"]
"#;
    let report = scan(yaml, &lab.base).await;
    assert_eq!(lab.targets(), vec!["/repos", "/p/K1/r/s1", "/p/K2/r/s2"]);
    assert_eq!(report.results.len(), 1);
}

// ---- digest authentication ----

const REALM: &str = "lab";
const NONCE: &str = "dcd98b7102dd2f0e8b11d0f600bfb0c093";

fn md5_hex(s: &str) -> String {
    hex::encode(Md5::digest(s.as_bytes()))
}

/// The value of `name` in a Digest `Authorization` header.
fn param<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    let at = header.find(&format!("{name}="))? + name.len() + 1;
    let rest = &header[at..];
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split(',').next().map(str::trim),
    }
}

/// Answers 200 only to a correct Digest response for admin / `password`,
/// checked the way a server does: recomputed from the header's fields.
fn digest_server(password: &'static str) -> impl Fn(&Seen) -> Reply + Send + Sync {
    move |s: &Seen| {
        let challenge = Reply {
            status: 401,
            headers: vec![
                ("WWW-Authenticate".into(), r#"Basic realm="lab""#.into()),
                (
                    "WWW-Authenticate".into(),
                    format!(
                        r#"Digest realm="{REALM}", qop="auth,auth-int", nonce="{NONCE}", opaque="op4que""#
                    ),
                ),
            ],
            body: "who are you".into(),
        };
        let Some(auth) = s.header("Authorization") else {
            return challenge;
        };
        let field = |n: &str| param(auth, n).unwrap_or_default().to_string();
        if !auth.starts_with("Digest ")
            || field("username") != "admin"
            || field("uri") != s.target
            || field("opaque") != "op4que"
            || field("nonce") != NONCE
        {
            return challenge;
        }
        let ha1 = md5_hex(&format!("admin:{REALM}:{password}"));
        let ha2 = md5_hex(&format!("{}:{}", s.method, s.target));
        let expected = md5_hex(&format!(
            "{ha1}:{NONCE}:{}:{}:{}:{ha2}",
            field("nc"),
            field("cnonce"),
            field("qop")
        ));
        if field("response") == expected {
            json("management-major-version")
        } else {
            challenge
        }
    }
}

const DIGEST: &str = r#"
id: digest
info: {name: Digest, severity: high}
http:
  - raw:
      - |
        GET /management?x=1 HTTP/1.1
        Host: {{Hostname}}

    digest-username: admin
    digest-password: PASSWORD
    matchers-condition: and
    matchers:
      - type: word
        words: ["management-major-version"]
      - type: status
        status: [200]
"#;

#[tokio::test]
async fn digest_auth_answers_the_challenge_of_the_401_with_the_authorised_request() {
    let lab = Lab::start(digest_server("s3cret")).await;
    let report = scan(&DIGEST.replace("PASSWORD", "s3cret"), &lab.base).await;
    let reqs = lab.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].header("Authorization"), None);
    let auth = reqs[1].header("Authorization").expect("authorised retry");
    assert_eq!(param(auth, "uri"), Some("/management?x=1"));
    assert_eq!(param(auth, "qop"), Some("auth"));
    assert_eq!(param(auth, "nc"), Some("00000001"));
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);

    // A wrong password gets the 401 again, which does not match.
    let lab = Lab::start(digest_server("s3cret")).await;
    let report = scan(&DIGEST.replace("PASSWORD", "guess"), &lab.base).await;
    assert_eq!(lab.requests().len(), 2);
    assert!(report.results.is_empty());
}

#[tokio::test]
async fn digest_auth_sends_once_when_no_challenge_comes() {
    let lab = Lab::start(|_| json("management-major-version")).await;
    let report = scan(&DIGEST.replace("PASSWORD", "x"), &lab.base).await;
    assert_eq!(lab.requests().len(), 1);
    assert_eq!(lab.requests()[0].header("Authorization"), None);
    assert_eq!(report.results.len(), 1);
}

// ---- @tls-sni ----

const SNI: &str = r#"
id: sni
info: {name: SNI, severity: info}
VARIABLES
http:
  - raw:
      - |
        @tls-sni: VALUE
        GET /x HTTP/1.1
        Host: {{Hostname}}

    matchers:
      - type: word
        words: ["hello"]
"#;

#[tokio::test]
async fn a_tls_sni_annotation_naming_the_target_sends_its_name_in_the_handshake() {
    for (value, variables) in [
        ("{{Hostname}}", ""),
        ("{{sni}}", "variables:\n  sni: '{{Host}}'"),
    ] {
        let lab = Lab::start_tls(|_| json("hello")).await;
        let yaml = SNI.replace("VALUE", value).replace("VARIABLES", variables);
        let report = scan(&yaml, &lab.base).await;
        let reqs = lab.requests();
        assert_eq!(reqs.len(), 1, "{value}: {:?}", report.errors);
        assert_eq!(reqs[0].sni.as_deref(), Some("secure.test"));
        assert_eq!(reqs[0].target, "/x");
        // The annotation is not sent as a header.
        assert!(
            reqs[0].headers.iter().all(|(n, _)| !n.contains("tls-sni")),
            "{:?}",
            reqs[0].headers
        );
        assert_eq!(report.results.len(), 1);
    }
}

#[tokio::test]
async fn a_tls_sni_annotation_naming_another_host_sends_nothing() {
    // `templates check` refuses such a template; a variable replaced at
    // scan time is caught when the request is built.
    for (value, variables) in [
        ("other.test", ""),
        ("{{sni}}", "variables:\n  sni: other.test"),
    ] {
        let lab = Lab::start_tls(|_| json("hello")).await;
        let yaml = SNI.replace("VALUE", value).replace("VARIABLES", variables);
        let report = scan(&yaml, &lab.base).await;
        assert!(lab.requests().is_empty(), "{value}");
        assert!(report.results.is_empty());
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        assert_eq!(report.errors[0].kind, TargetErrorKind::Skipped);
        assert!(report.errors[0].message().contains("@tls-sni"));
    }
}

#[tokio::test]
async fn a_host_annotation_to_another_host_is_not_sent_even_through_a_variable() {
    let lab = Lab::start(|_| json("hello")).await;
    let yaml = r#"
id: host-var
info: {name: Host var, severity: info}
variables:
  target: other.test
http:
  - raw:
      - |
        @Host: http://{{target}}:80
        GET / HTTP/1.1
        Host: {{Hostname}}

"#;
    let report = scan(yaml, &lab.base).await;
    assert!(lab.requests().is_empty());
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(report.errors[0].kind, TargetErrorKind::Skipped);
    assert_eq!(
        report.errors[0].message(),
        "@Host annotation \"http://other.test:80\" names another host than the target"
    );
}
