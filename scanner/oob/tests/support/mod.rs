//! Test harness: boots the real server in-process on loopback ports with a
//! Redis prefix of its own, and an interactsh client written here from the
//! crypto crates directly (not `scanfleet-interactsh`), so the server is
//! checked against the protocol rather than against its own library.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use aes::cipher::{KeyIvInit, StreamCipher};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use rand::Rng;
use rsa::pkcs8::EncodePublicKey;
use rsa::{Oaep, RsaPrivateKey};
use scanfleet_oob::{Application, Settings};
use serde_json::{json, Value};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const DOMAIN: &str = "oob.test";

/// One running server.
pub struct TestServer {
    pub http: SocketAddr,
    pub dns: SocketAddr,
    pub https: Option<SocketAddr>,
    pub smtp: Option<SocketAddr>,
    pub ldap: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
    /// Cancelled by [`TestServer::stop`] (or on drop of the test).
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), scanfleet_oob::OobError>>,
}

impl TestServer {
    pub fn base(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Stops the server and waits until it has let go of everything.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

/// A Redis prefix no other test uses.
pub fn unique_prefix() -> String {
    format!("oobtest-{}", uuid::Uuid::new_v4().simple())
}

/// Settings on loopback for `prefix`, every optional listener off.
pub fn settings(prefix: &str) -> Settings {
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut settings = Settings::local(DOMAIN, &redis, prefix);
    // Leftovers of a failed test vanish on their own.
    settings.eviction_secs = 600;
    settings
}

pub async fn spawn(settings: Settings) -> TestServer {
    let app = Application::build(settings).await.expect("server starts");
    let shutdown = CancellationToken::new();
    TestServer {
        http: app.http_addr(),
        dns: app.dns_addr(),
        https: app.https_addr(),
        smtp: app.smtp_addr(),
        ldap: app.ldap_addr(),
        metrics: app.metrics_addr(),
        shutdown: shutdown.clone(),
        task: tokio::spawn(app.run_until_stopped(shutdown)),
    }
}

/// `n` random characters of `alphabet`.
fn random_chars(alphabet: &[u8], n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect()
}

/// An interactsh client built from the protocol description alone.
pub struct RawClient {
    pub http: reqwest::Client,
    pub base: String,
    pub token: Option<String>,
    pub private: RsaPrivateKey,
    pub id: String,
    pub secret: String,
}

impl RawClient {
    pub fn new(base: &str) -> RawClient {
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).unwrap();
        RawClient {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            base: base.to_string(),
            token: None,
            private,
            id: random_chars(b"0123456789abcdefghijklmnopqrstuv", 20),
            secret: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// `base64(PEM "RSA PUBLIC KEY" around the PKIX DER)`, written out by hand.
    pub fn public_key_field(&self) -> String {
        let der = self.private.to_public_key().to_public_key_der().unwrap();
        let body = B64.encode(der.as_bytes());
        let mut pem = String::from("-----BEGIN RSA PUBLIC KEY-----\n");
        for line in body.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap());
            pem.push('\n');
        }
        pem.push_str("-----END RSA PUBLIC KEY-----\n");
        B64.encode(pem)
    }

    /// A fresh payload host: id, 13-character nonce, the domain.
    pub fn host(&self) -> String {
        format!(
            "{}{}.{DOMAIN}",
            self.id,
            random_chars(b"ybndrfg8ejkmcpqxot1uwisza345h769", 13)
        )
    }

    fn with_token(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.header("Authorization", token),
            None => request,
        }
    }

    pub async fn register(&self) -> (u16, String) {
        let body = json!({
            "public-key": self.public_key_field(),
            "secret-key": self.secret,
            "correlation-id": self.id,
        });
        let request = self
            .http
            .post(format!("{}/register", self.base))
            .json(&body);
        answer(self.with_token(request).send().await.unwrap()).await
    }

    pub async fn deregister(&self) -> (u16, String) {
        let body = json!({"correlation-id": self.id, "secret-key": self.secret});
        let request = self
            .http
            .post(format!("{}/deregister", self.base))
            .json(&body);
        answer(self.with_token(request).send().await.unwrap()).await
    }

    pub async fn poll_raw(&self, secret: &str) -> (u16, String) {
        let url = format!("{}/poll?id={}&secret={secret}", self.base, self.id);
        answer(self.with_token(self.http.get(url)).send().await.unwrap()).await
    }

    /// Polls and decrypts: unwrap the AES key with RSA-OAEP(SHA-256), then
    /// each item is IV(16) || AES-256-CTR(json).
    pub async fn poll(&self) -> Vec<Value> {
        let (status, body) = self.poll_raw(&self.secret).await;
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        for field in ["data", "extra", "aes_key", "tlddata"] {
            assert!(
                answer.get(field).is_some(),
                "poll answer lacks {field}: {body}"
            );
        }
        let wrapped = B64.decode(answer["aes_key"].as_str().unwrap()).unwrap();
        let key = self
            .private
            .decrypt(Oaep::new::<sha2::Sha256>(), &wrapped)
            .unwrap();
        assert_eq!(key.len(), 32);
        let items = answer["data"].as_array().unwrap();
        items
            .iter()
            .map(|item| {
                let raw = B64.decode(item.as_str().unwrap()).unwrap();
                let (iv, body) = raw.split_at(16);
                let mut plain = body.to_vec();
                ctr::Ctr128BE::<aes::Aes256>::new(key.as_slice().into(), iv.into())
                    .apply_keystream(&mut plain);
                serde_json::from_slice(&plain).expect("CTR plaintext is JSON")
            })
            .collect()
    }
}

async fn answer(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// An HTTP callback to `addr` with `host` in the Host header.
pub async fn http_callback(addr: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let client = reqwest::Client::new();
    let response = client
        .get(format!("http://{addr}{path}"))
        .header("Host", host)
        .header("User-Agent", "oob-test")
        .send()
        .await
        .unwrap();
    answer(response).await
}

/// One DNS query over UDP; returns the answer and the sizes of the query
/// and of the answer on the wire.
pub async fn dns_query(
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
) -> (Message, usize, usize) {
    let mut query = Message::new();
    query.set_id(rand::random());
    query.set_recursion_desired(true);
    query.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    let bytes = query.to_vec().unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(&bytes, server).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let (len, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("DNS answer within 5 s")
        .unwrap();
    let answer = Message::from_vec(&buf[..len]).unwrap();
    assert_eq!(answer.id(), query.id());
    (answer, bytes.len(), len)
}
