//! The recording HTTP server the engine's integration tests scan: it keeps
//! every request it saw and answers each through a handler. Plain tokio, one
//! request per connection, on 127.0.0.1 only; `start_tls` adds TLS with a
//! self-signed certificate and records the SNI.
//!
//! Each test file that uses it compiles its own copy, and none uses all of
//! it.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use scanfleet_engine::engine::CompiledTemplate;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the test server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The TLS server name of the connection, for TLS labs.
    pub sni: Option<String>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A canned answer.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

pub fn ok(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![],
        body: body.to_string(),
    }
}

pub fn not_found() -> Reply {
    Reply {
        status: 404,
        headers: vec![],
        body: "not found".into(),
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A local server that records every request and answers via its handler.
pub struct Lab {
    pub base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// Reads one request (head and `Content-Length` body), answers it, closes.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    sni: Option<String>,
    handler: Handler,
    log: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let seen = Seen {
        method,
        target,
        headers,
        body: buf[head_end..(head_end + len).min(buf.len())].to_vec(),
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

/// A listener on a free loopback port and the log its requests go to.
async fn listen() -> (TcpListener, std::net::SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr, Arc::default())
}

impl Lab {
    pub async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Lab {
        let (listener, addr, seen) = listen().await;
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
    pub async fn start_tls(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Lab {
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
        let (listener, addr, seen) = listen().await;
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

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }

    pub fn targets(&self) -> Vec<String> {
        self.requests().into_iter().map(|s| s.target).collect()
    }
}

pub fn compile(yaml: &str) -> Arc<CompiledTemplate> {
    let template = scanfleet_engine::template::parse_str(yaml, std::path::Path::new("test.yaml"))
        .expect("template parses");
    Arc::new(CompiledTemplate::compile(template).expect("template compiles"))
}
