//! Out-of-band detection end to end in the engine: templates with
//! `{{interactsh-url}}` and `interactsh_*` matchers scanned against a local
//! target, with an interactsh server written here from the crypto crates
//! (RSA-OAEP key wrap, AES-256-CTR or CFB items), independent of
//! `scanfleet-interactsh`'s own crypto. The target "calls back" by telling
//! that server about an interaction with the payload host it was sent.

// Test code throughout, helpers included: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aes::cipher::{AsyncStreamCipher, KeyIvInit, StreamCipher};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use rand::RngCore;
use rsa::pkcs8::DecodePublicKey;
use rsa::{Oaep, RsaPublicKey};
use scanfleet_engine::engine::{Engine, EngineConfig, Interactsh, OobTiming, RunReport};
use scanfleet_engine::template::{self, CheckOptions};
use scanfleet_http::{ClientConfig, TargetUrl};
use scanfleet_interactsh::{Session, SessionConfig};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

mod support;
use support::{compile, ok, Lab, Seen};

/// The payload domain the sessions use.
const DOMAIN: &str = "oob.test";

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Ctr,
    Cfb,
}

struct Registration {
    secret: String,
    public: RsaPublicKey,
    aes: [u8; 32],
}

/// An interactsh server holding its sessions in memory.
struct FakeServer {
    mode: Mode,
    registrations: Mutex<HashMap<String, Registration>>,
    pending: Mutex<HashMap<String, Vec<Value>>>,
    url: String,
}

impl FakeServer {
    async fn start(mode: Mode) -> Arc<FakeServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Arc::new(FakeServer {
            mode,
            registrations: Mutex::default(),
            pending: Mutex::default(),
            url: format!("http://{}", listener.local_addr().unwrap()),
        });
        let shared = server.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(shared.clone().serve(sock));
            }
        });
        server
    }

    /// One request per connection: read it, answer, close.
    async fn serve(self: Arc<Self>, mut sock: tokio::net::TcpStream) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let (head_end, len) = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map(|v| v.trim().parse::<usize>().unwrap())
                    .unwrap_or(0);
                break (i + 4, len);
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        while buf.len() < head_end + len {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let line = String::from_utf8_lossy(&buf[..head_end])
            .lines()
            .next()
            .unwrap()
            .to_string();
        let target = line.split(' ').nth(1).unwrap().to_string();
        let body = &buf[head_end..head_end + len];
        let (status, answer) = match target.split_once('?').map_or((target.as_str(), ""), |p| p) {
            ("/register", _) => self.register(body),
            ("/poll", query) => self.poll(query),
            ("/deregister", _) => (200, json!({"message": "deregistration successful"})),
            _ => (404, json!({})),
        };
        let text = answer.to_string();
        let out = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
        let _ = sock.write_all(out.as_bytes()).await;
        let _ = sock.shutdown().await;
    }

    fn register(&self, body: &[u8]) -> (u16, Value) {
        let request: Value = serde_json::from_slice(body).unwrap();
        let pem = String::from_utf8(B64.decode(request["public-key"].as_str().unwrap()).unwrap())
            .unwrap();
        assert!(pem.starts_with("-----BEGIN RSA PUBLIC KEY-----"), "{pem}");
        let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let public = RsaPublicKey::from_public_key_der(&B64.decode(der).unwrap()).unwrap();
        let mut aes = [0u8; 32];
        rand::rng().fill_bytes(&mut aes);
        let id = request["correlation-id"].as_str().unwrap().to_string();
        assert_eq!(id.len(), 20);
        let secret = request["secret-key"].as_str().unwrap().to_string();
        self.registrations.lock().unwrap().insert(
            id,
            Registration {
                secret,
                public,
                aes,
            },
        );
        (200, json!({"message": "registration successful"}))
    }

    fn poll(&self, query: &str) -> (u16, Value) {
        let params: HashMap<&str, &str> =
            query.split('&').filter_map(|p| p.split_once('=')).collect();
        let registrations = self.registrations.lock().unwrap();
        let Some(reg) = registrations
            .get(params["id"])
            .filter(|r| r.secret == params["secret"])
        else {
            let error = "could not get interactions: could not get correlation-id from cache";
            return (400, json!({ "error": error }));
        };
        let items = self
            .pending
            .lock()
            .unwrap()
            .remove(params["id"])
            .unwrap_or_default();
        let data: Vec<String> = items
            .iter()
            .map(|item| encrypt(self.mode, &reg.aes, item.to_string().as_bytes()))
            .collect();
        let wrapped = reg
            .public
            .encrypt(
                &mut rsa::rand_core::OsRng,
                Oaep::new::<sha2::Sha256>(),
                &reg.aes,
            )
            .unwrap();
        (
            200,
            json!({"data": data, "extra": null, "aes_key": B64.encode(wrapped)}),
        )
    }

    /// The target contacted `host` (a payload host) over `protocol`.
    fn record(&self, host: &str, protocol: &str, raw_request: &str) {
        let unique_id = host.split('.').next().unwrap().to_ascii_lowercase();
        let correlation_id = unique_id[..20].to_string();
        let item = json!({
            "protocol": protocol,
            "unique-id": unique_id,
            "full-id": unique_id,
            "q-type": if protocol == "dns" { "A" } else { "" },
            "raw-request": raw_request,
            "raw-response": "",
            "remote-address": "127.0.0.1",
            "timestamp": "2026-01-01T00:00:00Z",
        });
        self.pending
            .lock()
            .unwrap()
            .entry(correlation_id)
            .or_default()
            .push(item);
    }
}

fn encrypt(mode: Mode, key: &[u8; 32], plain: &[u8]) -> String {
    let mut iv = [0u8; 16];
    rand::rng().fill_bytes(&mut iv);
    let mut body = plain.to_vec();
    match mode {
        Mode::Ctr => {
            ctr::Ctr128BE::<aes::Aes256>::new(key.into(), (&iv).into()).apply_keystream(&mut body)
        }
        Mode::Cfb => {
            cfb_mode::Encryptor::<aes::Aes256>::new(key.into(), (&iv).into()).encrypt(&mut body)
        }
    }
    let mut out = iv.to_vec();
    out.extend_from_slice(&body);
    B64.encode(out)
}

/// Every payload host in what the target was sent, in order.
fn payload_hosts(seen: &Seen) -> Vec<String> {
    let mut text = seen.target.clone();
    for (n, v) in &seen.headers {
        text.push_str(&format!("\n{n}: {v}"));
    }
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&seen.body));
    let pattern = regex::Regex::new(r"[0-9a-v]{20}[0-9a-z]{13}\.oob\.test").unwrap();
    pattern
        .find_iter(&text)
        .map(|m| m.as_str().to_string())
        .collect()
}

fn timing(poll_ms: u64, cooldown_ms: u64, eviction_ms: u64) -> OobTiming {
    OobTiming {
        poll: Duration::from_millis(poll_ms),
        cooldown: Duration::from_millis(cooldown_ms),
        eviction: Duration::from_millis(eviction_ms),
    }
}

async fn engine(server: &FakeServer, timing: OobTiming) -> Engine {
    let session = Session::register_with(SessionConfig {
        server_url: server.url.clone(),
        payload_domain: Some(DOMAIN.to_string()),
        ..SessionConfig::default()
    })
    .await
    .expect("registers");
    Engine::new(EngineConfig {
        client: ClientConfig {
            allow_private: true,
            ..ClientConfig::default()
        },
        ..EngineConfig::default()
    })
    .expect("engine")
    .with_interactsh(Interactsh {
        session: Arc::new(session),
        timing,
    })
}

async fn scan(engine: &Engine, yaml: &str, lab: &Lab) -> RunReport {
    let target = TargetUrl::parse(&lab.base).unwrap();
    engine.run(&[compile(yaml)], &[target]).await
}

/// A blind SSRF: the URL is fetched, nothing shows in the response.
const HTTP_TEMPLATE: &str = r#"
id: oob-http
info: {name: OOB over HTTP, severity: high}
http:
  - method: GET
    path: ["{{BaseURL}}/fetch?url=http://{{interactsh-url}}/probe"]
    matchers-condition: and
    matchers:
      - type: word
        part: interactsh_protocol
        words: [http]
      - type: dsl
        dsl: ['contains(interactsh_request, "GET /probe")']
"#;

/// A DNS-only callback, matched on the lower-cased request.
const DNS_TEMPLATE: &str = r#"
id: oob-dns
info: {name: OOB over DNS, severity: critical}
http:
  - method: GET
    path: ["{{BaseURL}}/lookup?name={{interactsh-url}}"]
    matchers-condition: and
    matchers:
      - type: word
        part: interactsh_protocol
        words: [dns]
      - type: word
        part: interactsh_request
        words: ["question section"]
"#;

/// A lab that reports each payload host it is sent over `protocol`, after
/// `delay` (in a task), and answers at once.
async fn calling_lab(server: Arc<FakeServer>, protocol: &'static str, delay: Duration) -> Lab {
    Lab::start(move |seen| {
        for host in payload_hosts(seen) {
            let server = server.clone();
            let raw = match protocol {
                "dns" => format!(";; QUESTION SECTION:\n;{}.\tIN\tA", host.to_uppercase()),
                _ => format!("GET /probe HTTP/1.1\r\nHost: {host}\r\n\r\n"),
            };
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                server.record(&host, protocol, &raw);
            });
        }
        ok("nothing to see")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_callback_to_the_payload_host_is_a_finding() {
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "http", Duration::ZERO).await;
    let engine = engine(&server, timing(100, 1000, 10_000)).await;
    let report = scan(&engine, HTTP_TEMPLATE, &lab).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
    let r = &report.results[0];
    assert_eq!(r.template_id, "oob-http");
    assert!(
        r.matched_at
            .starts_with(&format!("{}/fetch?url=http://", lab.base)),
        "{}",
        r.matched_at
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dns_callback_is_matched_on_its_lower_cased_request() {
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "dns", Duration::ZERO).await;
    let engine = engine(&server, timing(100, 1000, 10_000)).await;
    let report = scan(&engine, DNS_TEMPLATE, &lab).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
    // The same callback over HTTP is not what the DNS template asks for.
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "http", Duration::ZERO).await;
    let engine = self::engine(&server, timing(100, 600, 10_000)).await;
    assert!(scan(&engine, DNS_TEMPLATE, &lab).await.results.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_that_arrives_before_the_response_is_held_and_matched() {
    let server = FakeServer::start(Mode::Ctr).await;
    let recorder = server.clone();
    // The callback is made at once, the answer only after 1 s: the poller
    // (every 100 ms) fetches the interaction before the request is recorded.
    let lab = Lab::start(move |seen| {
        for host in payload_hosts(seen) {
            recorder.record(&host, "http", "GET /probe HTTP/1.1\r\n\r\n");
        }
        std::thread::sleep(Duration::from_millis(1000));
        ok("slow")
    })
    .await;
    let engine = engine(&server, timing(100, 500, 10_000)).await;
    let report = scan(&engine, HTTP_TEMPLATE, &lab).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_after_the_eviction_time_is_not_matched() {
    let server = FakeServer::start(Mode::Ctr).await;
    // Eviction 500 ms, the callback 1.2 s after the request, the run still
    // polling (cooldown 2 s) when it comes.
    let lab = calling_lab(server.clone(), "http", Duration::from_millis(1200)).await;
    let engine = engine(&server, timing(100, 2000, 500)).await;
    let report = scan(&engine, HTTP_TEMPLATE, &lab).await;
    assert!(report.results.is_empty(), "{:?}", report.results);
    // The same late callback within a longer eviction time is a finding.
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "http", Duration::from_millis(1200)).await;
    let engine = self::engine(&server, timing(100, 2000, 5000)).await;
    assert_eq!(scan(&engine, HTTP_TEMPLATE, &lab).await.results.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_callback_there_is_no_finding_and_the_run_ends_within_the_cooldown() {
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = Lab::start(|_| ok("nothing")).await;
    let engine = engine(&server, timing(100, 1000, 10_000)).await;
    let started = Instant::now();
    let report = scan(&engine, HTTP_TEMPLATE, &lab).await;
    let took = started.elapsed();
    assert!(report.results.is_empty());
    assert_eq!(lab.requests().len(), 1);
    // The cooldown, then one last poll: not the eviction time (10 s).
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    assert!(took < Duration::from_millis(2000), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_from_a_server_that_encrypts_with_cfb_still_match() {
    let server = FakeServer::start(Mode::Cfb).await;
    let lab = calling_lab(server.clone(), "http", Duration::ZERO).await;
    let engine = engine(&server, timing(100, 1000, 10_000)).await;
    let report = scan(&engine, HTTP_TEMPLATE, &lab).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_marker_occurrence_is_a_fresh_payload_host_of_the_session() {
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = Lab::start(|_| ok("nothing")).await;
    let engine = engine(&server, timing(100, 200, 10_000)).await;
    let yaml = r#"
id: oob-markers
info: {name: markers, severity: info}
http:
  - raw:
      - |
        POST /a?u={{interactsh-url}}&v=%7B%7Binteractsh-url%7D%7D HTTP/1.1
        Host: {{Hostname}}
        X-Callback: {{interactsh-url_1}}
        X-Server: {{interactsh-server}}

        {"a":"{{interactsh-url}}","b":"{{interactsh-url}}"}
    matchers:
      - type: word
        part: interactsh_protocol
        words: [http]
"#;
    scan(&engine, yaml, &lab).await;
    let seen = &lab.requests()[0];
    let hosts = payload_hosts(seen);
    assert_eq!(hosts.len(), 5, "{seen:?}");
    let distinct: std::collections::HashSet<&String> = hosts.iter().collect();
    assert_eq!(distinct.len(), 5, "{hosts:?}");
    let id = engine
        .interactsh()
        .unwrap()
        .session
        .correlation_id()
        .to_string();
    assert!(hosts.iter().all(|h| h.starts_with(&id)), "{hosts:?}");
    assert_eq!(seen.header("x-server"), Some(DOMAIN));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_value_with_a_marker_is_called_back_and_matched() {
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "http", Duration::ZERO).await;
    let engine = engine(&server, timing(100, 800, 10_000)).await;
    let yaml = r#"
id: oob-payloads
info: {name: payloads, severity: high}
http:
  - method: GET
    path: ["{{BaseURL}}/x?p={{probe}}"]
    payloads:
      probe:
        - "http://{{interactsh-url}}/probe"
    matchers:
      - type: dsl
        dsl: ['interactsh_protocol == "http"']
"#;
    let report = scan(&engine, yaml, &lab).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
}

#[test]
fn out_of_band_templates_run_only_when_a_server_is_configured() {
    let t = template::parse_str(HTTP_TEMPLATE, std::path::Path::new("t.yaml")).unwrap();
    let refused = template::check(&t).expect_err("refused without a server");
    assert_eq!(refused.primary(), &template::Reason::Interactsh);
    template::check_for(&t, CheckOptions { interactsh: true }).expect("runnable with one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_derived_interactsh_id_is_the_id_the_callback_names() {
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "dns", Duration::ZERO).await;
    let engine = engine(&server, timing(100, 800, 10_000)).await;
    let yaml = r#"
id: oob-id
info: {name: derived id, severity: high}
http:
  - method: GET
    path: ["{{BaseURL}}/lookup?name={{interactsh-url}}"]
    matchers-condition: and
    matchers:
      - type: word
        part: interactsh_request
        words: ["{{interactsh-id}}.{{interactsh-server}}"]
      - type: word
        part: interactsh_ip
        words: ["127.0.0.1"]
"#;
    let report = scan(&engine, yaml, &lab).await;
    assert_eq!(report.results.len(), 1, "{:?}", report.errors);
    // A word naming another id does not match the same callback.
    let other = yaml.replace("{{interactsh-id}}.", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
    let server = FakeServer::start(Mode::Ctr).await;
    let lab = calling_lab(server.clone(), "dns", Duration::ZERO).await;
    let engine = self::engine(&server, timing(100, 800, 10_000)).await;
    assert!(scan(&engine, &other, &lab).await.results.is_empty());
}
