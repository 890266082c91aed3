//! A webhook receiver on 127.0.0.1 for the webhook tests: a bare HTTP/1.1
//! server (no framework) that records every request and answers from a
//! script (a status, a `Retry-After`, or no answer at all), and a check of
//! Standard Webhooks signatures written here from the specification with
//! its own HMAC-SHA256 (RFC 2104 over `sha2`), independent of the api's.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::Value;
use sha2_sig::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// A status with `Retry-After: <secs>`.
    RetryAfter(u16, u64),
    /// Reads the request and never answers.
    Silence,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Lower-case header names.
    pub headers: HashMap<String, String>,
    pub body: String,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    script: VecDeque<Answer>,
    fallback: Option<Answer>,
}

pub struct Receiver {
    pub port: u16,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    /// Answers 200 unless scripted otherwise.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("receiver bind");
        let port = listener.local_addr().expect("receiver addr").port();
        let shared: Arc<Mutex<Shared>> = Arc::default();
        let state = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, state.clone()));
            }
        });
        Receiver { port, shared, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The next answers, in order; then the fallback.
    pub fn script(&self, answers: &[Answer]) {
        self.shared.lock().unwrap().script.extend(answers);
    }

    /// The answer once the script is used up (200 when unset).
    pub fn always(&self, answer: Answer) {
        self.shared.lock().unwrap().fallback = Some(answer);
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.lock().unwrap().received.clone()
    }

    /// Waits until `done(received)` holds; panics after `within`.
    pub async fn wait_for(
        &self,
        within: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.received();
            if done(&got) {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "receiver: condition not met; got {} requests: {:#?}",
                got.len(),
                got.iter().map(|r| r.body.clone()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Mutex<Shared>>) {
    let Some((headers, body)) = read_request(&mut stream).await else {
        return;
    };
    let answer = {
        let mut s = shared.lock().unwrap();
        s.received.push(Received {
            headers,
            body,
            at: Instant::now(),
        });
        let fallback = s.fallback.unwrap_or(Answer::Status(200));
        s.script.pop_front().unwrap_or(fallback)
    };
    let (status, extra) = match answer {
        Answer::Status(s) => (s, String::new()),
        Answer::RetryAfter(s, secs) => (s, format!("retry-after: {secs}\r\n")),
        Answer::Silence => {
            // Hold the connection open until the client gives up.
            let mut sink = [0u8; 64];
            while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            return;
        }
    };
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: 8\r\n{extra}connection: close\r\n\r\nreceived"
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn read_request(stream: &mut TcpStream) -> Option<(HashMap<String, String>, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let headers: HashMap<String, String> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
    Some((headers, body))
}

/// HMAC-SHA256 (RFC 2104), written here so the check does not share code
/// with the signer.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Whether one of the `v1,` signatures of `r` is `secret`'s over
/// `"{id}.{timestamp}.{body}"`, with the timestamp within 5 minutes.
pub fn verify(secret: &str, r: &Received) -> bool {
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|k| STANDARD.decode(k).ok())
    else {
        return false;
    };
    let (id, ts) = (r.header("webhook-id"), r.header("webhook-timestamp"));
    let Ok(seconds) = ts.parse::<i64>() else {
        return false;
    };
    if (chrono::Utc::now().timestamp() - seconds).abs() > 300 {
        return false;
    }
    let expected = STANDARD.encode(hmac_sha256(
        &key,
        format!("{id}.{ts}.{}", r.body).as_bytes(),
    ));
    r.header("webhook-signature")
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|s| s == expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
