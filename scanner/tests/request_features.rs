//! Request features of issue 9, part 2, against local servers: `wait_for`,
//! `iterate-all`, Digest authentication and the `@tls-sni` annotation.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use md5::{Digest, Md5};
use scanfleet_scanner::engine::{
    CompiledTemplate, Engine, EngineConfig, RunReport, TargetErrorKind,
};
use scanfleet_scanner::http::{ClientConfig, TargetUrl};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    /// The TLS server name of the connection, for TLS labs.
    sni: Option<String>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

fn ok(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("Content-Type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

fn not_found() -> Reply {
    Reply {
        status: 404,
        headers: vec![],
        body: "not found".into(),
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

struct Lab {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Reads one request head, answers it, closes.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    sni: Option<String>,
    handler: Handler,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let headers = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let seen = Seen {
        method,
        target,
        headers,
        sni,
    };
    let reply = handler(&seen);
    log.lock().expect("lock").push(seen);
    let mut out = format!("HTTP/1.1 {} X\r\n", reply.status);
    for (n, v) in &reply.headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
        reply.body.len(),
        reply.body
    ));
    let _ = sock.write_all(out.as_bytes()).await;
    let _ = sock.shutdown().await;
}

impl Lab {
    async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Lab {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler: Handler = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock, None, handler.clone(), log.clone()));
            }
        });
        Lab {
            base: format!("http://{addr}"),
            seen,
        }
    }

    /// A TLS server with a self-signed certificate, recording each
    /// connection's SNI; `base` names `secure.test` at its port.
    async fn start_tls(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Lab {
        let cert =
            rcgen::generate_simple_self_signed(vec!["secure.test".to_string()]).expect("cert");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler: Handler = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let (handler, log) = (handler.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let sni = tls.get_ref().1.server_name().map(str::to_string);
                    serve(tls, sni, handler, log).await;
                });
            }
        });
        Lab {
            base: format!("https://secure.test:{}", addr.port()),
            seen,
        }
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }

    fn targets(&self) -> Vec<String> {
        self.requests().into_iter().map(|s| s.target).collect()
    }
}

fn compile(yaml: &str) -> Arc<CompiledTemplate> {
    let template = scanfleet_scanner::template::parse_str(yaml, std::path::Path::new("test.yaml"))
        .expect("template parses");
    Arc::new(CompiledTemplate::compile(template).expect("template compiles"))
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
    let lab = Lab::start(|_| ok("done")).await;
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
    let lab = Lab::start(|_| ok("done")).await;
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
        "/content.json" => ok(r#"["/a", "/b", "/c"]"#),
        "/b" => ok(r#"{"rep:privileges": []}"#),
        "/a" | "/c" => ok("{}"),
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
        "/repos" => ok(r#"{"values": [{"key": "K1", "slug": "s1"}, {"key": "K2", "slug": "s2"}, {"key": "K3", "slug": "s3"}]}"#),
        "/p/K2/r/s2" => ok("boom"),
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
            ok("management-major-version")
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
    let lab = Lab::start(|_| ok("management-major-version")).await;
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
        let lab = Lab::start_tls(|_| ok("hello")).await;
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
        let lab = Lab::start_tls(|_| ok("hello")).await;
        let yaml = SNI.replace("VALUE", value).replace("VARIABLES", variables);
        let report = scan(&yaml, &lab.base).await;
        assert!(lab.requests().is_empty(), "{value}");
        assert!(report.results.is_empty());
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        assert_eq!(report.errors[0].kind, TargetErrorKind::Skipped);
        assert!(report.errors[0].message.contains("@tls-sni"));
    }
}

#[tokio::test]
async fn a_host_annotation_to_another_host_is_not_sent_even_through_a_variable() {
    let lab = Lab::start(|_| ok("hello")).await;
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
}
