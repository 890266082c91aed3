//! The library's client against an interactsh server written in the test
//! from the crypto crates directly (not this crate's `crypto`), so the
//! client is checked against the protocol rather than against itself.

// Tests may unwrap: a panic there is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use aes::cipher::{AsyncStreamCipher, KeyIvInit, StreamCipher};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rand::RngCore;
use rsa::pkcs8::DecodePublicKey;
use rsa::{Oaep, RsaPublicKey};
use scanfleet_interactsh::{ClientError, Session};
use serde_json::{json, Value};

/// How the fake server encrypts its items.
#[derive(Clone, Copy)]
enum Mode {
    Ctr,
    Cfb,
}

struct Registration {
    id: String,
    secret: String,
    public: RsaPublicKey,
    aes: [u8; 32],
}

/// A one-session interactsh server.
struct FakeServer {
    mode: Mode,
    token: Option<String>,
    /// The last registration's raw `public-key` PEM, for assertions.
    pem: Mutex<String>,
    registration: Mutex<Option<Registration>>,
    /// Interaction JSON to hand out at the next poll.
    pending: Mutex<VecDeque<Value>>,
    deregistered: Mutex<bool>,
}

impl FakeServer {
    async fn start(mode: Mode, token: Option<&str>) -> (Arc<FakeServer>, String) {
        let server = Arc::new(FakeServer {
            mode,
            token: token.map(str::to_string),
            pem: Mutex::default(),
            registration: Mutex::default(),
            pending: Mutex::default(),
            deregistered: Mutex::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let shared = server.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let server = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let server = server.clone();
                        async move { Ok::<_, Infallible>(server.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (server, format!("http://{addr}"))
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let authorised = match &self.token {
            None => true,
            Some(token) => {
                req.headers().get("authorization").map(|v| v.as_bytes()) == Some(token.as_bytes())
            }
        };
        if !authorised {
            return reply(401, String::new());
        }
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let body = req.into_body().collect().await.unwrap().to_bytes();
        match path.as_str() {
            "/register" => self.register(&body),
            "/poll" => self.poll(&query),
            "/deregister" => {
                *self.deregistered.lock().unwrap() = true;
                reply(
                    200,
                    json!({"message": "deregistration successful"}).to_string(),
                )
            }
            _ => reply(404, String::new()),
        }
    }

    fn register(&self, body: &[u8]) -> Response<Full<Bytes>> {
        let request: Value = serde_json::from_slice(body).unwrap();
        let pem = String::from_utf8(B64.decode(request["public-key"].as_str().unwrap()).unwrap())
            .unwrap();
        let der_b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let public = RsaPublicKey::from_public_key_der(&B64.decode(der_b64).unwrap()).unwrap();
        let mut aes = [0u8; 32];
        rand::rng().fill_bytes(&mut aes);
        *self.pem.lock().unwrap() = pem;
        *self.registration.lock().unwrap() = Some(Registration {
            id: request["correlation-id"].as_str().unwrap().to_string(),
            secret: request["secret-key"].as_str().unwrap().to_string(),
            public,
            aes,
        });
        reply(
            200,
            json!({"message": "registration successful"}).to_string(),
        )
    }

    fn poll(&self, query: &str) -> Response<Full<Bytes>> {
        let registration = self.registration.lock().unwrap();
        let Some(reg) = registration
            .as_ref()
            .filter(|r| query == format!("id={}&secret={}", r.id, r.secret))
        else {
            let error = "could not get interactions: could not get correlation-id from cache";
            return reply(400, json!({ "error": error }).to_string());
        };
        let data: Vec<String> = self
            .pending
            .lock()
            .unwrap()
            .drain(..)
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
        // Go's encoder writes a nil slice as null, and tlddata is omitted.
        let answer = json!({"data": data, "extra": null, "aes_key": B64.encode(wrapped)});
        reply(200, answer.to_string())
    }

    fn correlation_id(&self) -> String {
        self.registration
            .lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .id
            .clone()
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

fn reply(status: u16, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    response
}

fn interaction(protocol: &str, unique_id: &str) -> Value {
    json!({
        "protocol": protocol,
        "unique-id": unique_id,
        "full-id": unique_id,
        "q-type": if protocol == "dns" { "A" } else { "" },
        "raw-request": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "remote-address": "127.0.0.1",
        "timestamp": "2024-05-01T10:00:00.123456789Z",
    })
}

#[tokio::test]
async fn a_session_registers_polls_decrypts_and_deregisters_against_an_independent_server() {
    let (server, url) = FakeServer::start(Mode::Ctr, None).await;
    let session = Session::register(&url, None).await.unwrap();
    let pem = server.pem.lock().unwrap().clone();
    assert!(pem.starts_with("-----BEGIN RSA PUBLIC KEY-----\n"), "{pem}");
    let id = server.correlation_id();
    assert_eq!(id, session.correlation_id());
    assert!(
        id.len() == 20
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'v').contains(&b))
    );
    let secret = server
        .registration
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .secret
        .clone();
    assert_eq!(uuid::Uuid::parse_str(&secret).unwrap().get_version_num(), 4);

    let host = session.payload_host();
    let unique = host.split('.').next().unwrap().to_string();
    server
        .pending
        .lock()
        .unwrap()
        .extend([interaction("dns", &unique), interaction("http", &unique)]);
    let polled = session.poll().await.unwrap();
    assert_eq!(polled.len(), 2);
    assert_eq!(
        (polled[0].protocol.as_str(), polled[0].q_type.as_str()),
        ("dns", "A")
    );
    assert_eq!(polled[1].unique_id, unique);
    assert_eq!(polled[1].remote_address, "127.0.0.1");
    assert!(session.poll().await.unwrap().is_empty());
    session.deregister().await.unwrap();
    assert!(*server.deregistered.lock().unwrap());
}

#[tokio::test]
async fn items_encrypted_with_cfb_by_an_older_server_still_decrypt() {
    let (server, url) = FakeServer::start(Mode::Cfb, None).await;
    let session = Session::register(&url, None).await.unwrap();
    let unique = session.payload_host()[..33].to_string();
    server
        .pending
        .lock()
        .unwrap()
        .push_back(interaction("http", &unique));
    let polled = session.poll().await.unwrap();
    assert_eq!(polled.len(), 1);
    assert_eq!(polled[0].unique_id, unique);
}

#[tokio::test]
async fn the_token_goes_as_the_raw_authorization_header_and_a_wrong_one_is_unauthorized() {
    let (_server, url) = FakeServer::start(Mode::Ctr, Some("tok-123")).await;
    assert!(Session::register(&url, Some("tok-123")).await.is_ok());
    let refused = Session::register(&url, Some("wrong")).await.unwrap_err();
    assert!(matches!(refused, ClientError::Unauthorized), "{refused:?}");
}

#[tokio::test]
async fn a_session_the_server_forgot_reports_evicted() {
    let (server, url) = FakeServer::start(Mode::Ctr, None).await;
    let session = Session::register(&url, None).await.unwrap();
    *server.registration.lock().unwrap() = None;
    let err = session.poll().await.unwrap_err();
    assert!(matches!(err, ClientError::Evicted { .. }), "{err:?}");
}

#[tokio::test]
async fn each_payload_host_carries_the_id_and_a_fresh_nonce_under_the_server_domain() {
    let (_server, url) = FakeServer::start(Mode::Ctr, None).await;
    let session = Session::register(&url, None).await.unwrap();
    let (a, b) = (session.payload_host(), session.payload_host());
    assert_ne!(a, b);
    let (label, domain) = a.split_once('.').unwrap();
    assert_eq!(label.len(), 33);
    assert!(label.starts_with(session.correlation_id()));
    assert_eq!(domain, "127.0.0.1");
    assert_eq!(
        scanfleet_interactsh::find_ids(&a)[0].correlation_id(),
        session.correlation_id()
    );
}

#[test]
fn a_session_can_be_shared_between_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Session>();
}
