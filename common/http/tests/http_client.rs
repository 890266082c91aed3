//! The HTTP client against real local servers that record the exact bytes
//! they receive: wire format, body decoding, pooling, retries, redirects,
//! cookies, timeouts, the address policy, name overrides, rate ceiling, TLS.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scanfleet_http::{
    AddressClass, ClientConfig, CookieJar, HttpClient, HttpError, Request, SendOptions, TargetUrl,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server received it, with the connection it came on.
#[derive(Debug, Clone)]
struct Seen {
    conn: usize,
    raw: Vec<u8>,
}

impl Seen {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }

    fn request_line(&self) -> String {
        self.text().lines().next().unwrap_or_default().to_string()
    }

    fn header(&self, name: &str) -> Option<String> {
        let text = self.text();
        let head = text
            .split("\r\n\r\n")
            .next()
            .unwrap_or_default()
            .to_string();
        head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// What the server does with one request.
enum Reply {
    /// Write these bytes, keep the connection for the next request.
    Send(Vec<u8>),
    /// Write these bytes, then close.
    SendAndClose(Vec<u8>),
    /// Write these bytes after a pause (a slow server).
    SendAfter(Duration, Vec<u8>),
    /// Abort the connection with a TCP reset.
    Reset,
    /// Never answer.
    Hang,
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

struct TestServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Connection ids of sentinel connections (see `connections_before_now`).
    sentinels: Arc<Mutex<Vec<usize>>>,
}

impl TestServer {
    async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sentinels = Arc::new(Mutex::new(Vec::new()));
        let handler: Handler = Arc::new(handler);
        let (seen2, sentinels2) = (seen.clone(), sentinels.clone());
        tokio::spawn(async move {
            let mut next_id = 0usize;
            while let Ok((stream, _)) = listener.accept().await {
                let id = next_id;
                next_id += 1;
                let (seen, sentinels, handler) =
                    (seen2.clone(), sentinels2.clone(), handler.clone());
                tokio::spawn(serve_plain(stream, id, handler, seen, sentinels));
            }
        });
        TestServer {
            addr,
            seen,
            sentinels,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn url(&self, path: &str) -> TargetUrl {
        TargetUrl::parse(&format!("http://127.0.0.1:{}{path}", self.port())).expect("url")
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }

    /// How many connections the server accepted before this call. The
    /// listener accepts in arrival order, so a sentinel connection made now
    /// gets the id equal to the number of earlier connections.
    async fn connections_before_now(&self) -> usize {
        let mut s = TcpStream::connect(self.addr)
            .await
            .expect("sentinel connects");
        s.write_all(b"SENTINEL\r\n\r\n")
            .await
            .expect("sentinel writes");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(id) = self.sentinels.lock().expect("lock").first().copied() {
                return id;
            }
            assert!(Instant::now() < deadline, "sentinel never arrived");
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn serve_plain(
    stream: TcpStream,
    id: usize,
    handler: Handler,
    seen: Arc<Mutex<Vec<Seen>>>,
    sentinels: Arc<Mutex<Vec<usize>>>,
) {
    let mut stream = stream;
    loop {
        let Some(raw) = read_request(&mut stream).await else {
            return;
        };
        if raw.starts_with(b"SENTINEL") {
            sentinels.lock().expect("lock").push(id);
            return;
        }
        let req = Seen { conn: id, raw };
        seen.lock().expect("lock").push(req.clone());
        match handler(&req) {
            Reply::Send(bytes) => {
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::SendAndClose(bytes) => {
                let _ = stream.write_all(&bytes).await;
                return;
            }
            Reply::SendAfter(pause, bytes) => {
                tokio::time::sleep(pause).await;
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Reset => {
                // Linger zero turns the close into a RST.
                let std = stream.into_std().expect("into std");
                let sock = with_linger_zero(std);
                drop(sock);
                return;
            }
            Reply::Hang => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                return;
            }
        }
    }
}

fn with_linger_zero(std: std::net::TcpStream) -> std::net::TcpStream {
    // SO_LINGER with a zero timeout, through the tokio API which wraps it.
    let tokio_stream = TcpStream::from_std(std).expect("from std");
    #[allow(deprecated)]
    tokio_stream
        .set_linger(Some(Duration::ZERO))
        .expect("linger");
    tokio_stream.into_std().expect("into std")
}

/// Reads one request: head up to the blank line, then Content-Length bytes.
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf)
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn redirect(status: u16, location: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
        .into_bytes()
}

fn lab_config() -> ClientConfig {
    ClientConfig {
        allow_private: true,
        timeout: Duration::from_secs(5),
        user_agent: "scanner-test/1".to_string(),
        ..ClientConfig::default()
    }
}

fn client(cfg: ClientConfig) -> HttpClient {
    HttpClient::new(cfg).expect("client builds")
}

fn follow(max: u32) -> SendOptions {
    SendOptions {
        follow_redirects: true,
        max_redirects: max,
        ..SendOptions::default()
    }
}

#[tokio::test]
async fn request_targets_reach_the_server_byte_for_byte() {
    let server = TestServer::start(|_| Reply::Send(ok("x"))).await;
    let c = client(lab_config());
    let targets: [&[u8]; 4] = [
        b"/..;/admin",
        b"/%2e%2e/etc",
        b"/a/../b",
        b"/%2E%2e/./x?q=%20a&b=../c",
    ];
    for target in targets {
        let req = Request::new(&server.url(""), "GET", target);
        let resp = c.send(&req, &SendOptions::default()).await.expect("sends");
        assert_eq!(resp.status, 200);
    }
    let lines: Vec<String> = server.seen().iter().map(Seen::request_line).collect();
    assert_eq!(
        lines,
        vec![
            "GET /..;/admin HTTP/1.1",
            "GET /%2e%2e/etc HTTP/1.1",
            "GET /a/../b HTTP/1.1",
            "GET /%2E%2e/./x?q=%20a&b=../c HTTP/1.1",
        ]
    );
}

#[tokio::test]
async fn the_wire_form_keeps_header_order_and_adds_defaults_once() {
    let server = TestServer::start(|_| Reply::Send(ok("x"))).await;
    let c = client(lab_config());
    let mut req = Request::new(&server.url(""), "POST", "/api");
    req.headers.push(("X-First".into(), "1".into()));
    req.headers.push(("accept".into(), "text/html".into()));
    req.headers.push(("Content-Length".into(), "999".into()));
    req.body = b"a=1&b=2".to_vec();
    c.send(&req, &SendOptions::default()).await.expect("sends");
    let port = server.port();
    assert_eq!(
        server.seen()[0].text(),
        format!(
            "POST /api HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-First: 1\r\naccept: text/html\r\n\
             Content-Length: 7\r\nUser-Agent: scanner-test/1\r\nAccept-Encoding: gzip\r\n\
             Connection: keep-alive\r\n\r\na=1&b=2"
        )
    );
}

#[tokio::test]
async fn a_raw_block_is_sent_with_crlf_merged_target_default_host_and_fresh_length() {
    let server = TestServer::start(|_| Reply::Send(ok("x"))).await;
    let c = client(lab_config());
    let base = server.url("/app?token=t");
    let raw = b"POST /login?next=/home HTTP/1.1\nContent-Type: application/x-www-form-urlencoded\nContent-Length: 1\n\nuser=admin&pass=admin\n";
    let req = Request::parse_raw(raw, &base).expect("parses");
    c.send(&req, &SendOptions::default()).await.expect("sends");
    let port = server.port();
    assert_eq!(
        server.seen()[0].text(),
        format!(
            "POST /app/login?token=t&next=/home HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 21\r\n\
             User-Agent: scanner-test/1\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\
             Connection: keep-alive\r\n\r\nuser=admin&pass=admin"
        )
    );
}

#[tokio::test]
async fn unsafe_bytes_go_out_verbatim_including_spaces_in_the_target() {
    let server = TestServer::start(|_| Reply::Send(ok("raw"))).await;
    let c = client(lab_config());
    let bytes = b"GET /a b/%2e%2e HTTP/1.1\r\nhost: whatever\r\nX:  spaced \r\n\r\n";
    let resp = c
        .send_raw(&server.url(""), bytes, &SendOptions::default())
        .await
        .expect("sends");
    assert_eq!(&resp.body[..], b"raw");
    assert_eq!(server.seen()[0].raw, bytes.to_vec());
}

/// A server that reads until the client has nothing more to send (EOF),
/// then answers 400 (`answer`) or closes without a word: how servers treat
/// a request whose header section never ends once they know it is over.
async fn start_eof_server(answer: bool) -> (TargetUrl, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local addr").port();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut got = Vec::new();
        let _ = stream.read_to_end(&mut got).await;
        if answer {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
        }
        let _ = tx.send(got);
    });
    let url = TargetUrl::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    (url, rx)
}

/// Engine issue 9 (speed): an unsafe request without the blank line that
/// ends its headers (the corpus's `AAAA / HTTP/1.1` honeypot check) used to
/// wait for the whole timeout. The client now says the request is over, so
/// a server that answers on EOF is heard long before the (one-minute)
/// timeout, and one that just closes is a protocol error, not retried.
#[tokio::test]
async fn an_unsafe_request_with_unterminated_headers_ends_the_write_side() {
    let c = client(ClientConfig {
        timeout: Duration::from_secs(60),
        retries: 1,
        ..lab_config()
    });
    let bytes = b"AAAA / HTTP/1.1\nHost: lab\n";
    let (url, seen) = start_eof_server(true).await;
    let resp = c
        .send_raw(&url, bytes, &SendOptions::default())
        .await
        .expect("answered once the request is known to be over");
    assert_eq!(resp.status, 400);
    assert_eq!(seen.await.expect("server saw it"), bytes.to_vec());

    let (url, _seen) = start_eof_server(false).await;
    let sent_before = c.requests_sent();
    let err = c
        .send_raw(&url, bytes, &SendOptions::default())
        .await
        .expect_err("no answer");
    assert!(matches!(err, HttpError::Protocol { .. }), "{err:?}");
    assert_eq!(c.requests_sent() - sent_before, 1, "not retried");
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).expect("gzip write");
    enc.finish().expect("gzip finish")
}

fn chunked(data: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for part in data.chunks(size) {
        out.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nX-Trailer: t\r\n\r\n");
    out
}

#[tokio::test]
async fn chunked_gzip_bodies_are_decoded_and_the_connection_reused() {
    let text = "<html>".to_string() + &"phpinfo() ".repeat(500) + "</html>";
    let compressed = gzip(text.as_bytes());
    let mut reply =
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    reply.extend_from_slice(&chunked(&compressed, 37));
    let server = TestServer::start(move |_| Reply::Send(reply.clone())).await;
    let c = client(lab_config());
    let req = Request::new(&server.url(""), "GET", "/");
    let first = c.send(&req, &SendOptions::default()).await.expect("sends");
    assert_eq!(first.body_text(), text);
    assert!(first.content_decoded && !first.body_truncated);
    assert!(first
        .raw_header()
        .starts_with("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"));
    let second = c
        .send(&req, &SendOptions::default())
        .await
        .expect("sends again");
    assert_eq!(second.body_text(), text);
    let conns: Vec<usize> = server.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, vec![0, 0]);
}

#[tokio::test]
async fn deflate_and_close_delimited_bodies_are_read() {
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zlib.write_all(b"deflated body").expect("write");
    let mut reply = b"HTTP/1.0 200 OK\r\nContent-Encoding: deflate\r\n\r\n".to_vec();
    reply.extend_from_slice(&zlib.finish().expect("finish"));
    let server = TestServer::start(move |_| Reply::SendAndClose(reply.clone())).await;
    let c = client(lab_config());
    let resp = c
        .send(
            &Request::new(&server.url(""), "GET", "/"),
            &SendOptions::default(),
        )
        .await
        .expect("sends");
    assert_eq!(resp.proto, "HTTP/1.0");
    assert_eq!(&resp.body[..], b"deflated body");
}

#[tokio::test]
async fn bodies_over_the_cap_are_truncated_and_flagged() {
    let big = "A".repeat(100_000);
    let compressed = gzip(big.as_bytes());
    let server = TestServer::start(move |s| {
        if s.request_line().contains("/gz") {
            let mut r = format!(
                "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
                compressed.len()
            )
            .into_bytes();
            r.extend_from_slice(&compressed);
            Reply::Send(r)
        } else {
            Reply::Send(ok(&"B".repeat(5000)))
        }
    })
    .await;
    let c = client(ClientConfig {
        body_cap: 1000,
        ..lab_config()
    });
    let plain = c
        .send(
            &Request::new(&server.url(""), "GET", "/plain"),
            &SendOptions::default(),
        )
        .await
        .expect("sends");
    assert_eq!(plain.body.len(), 1000);
    assert!(plain.body_truncated);
    let gz = c
        .send(
            &Request::new(&server.url(""), "GET", "/gz"),
            &SendOptions::default(),
        )
        .await
        .expect("sends");
    assert_eq!(gz.body, vec![b'A'; 1000]);
    assert!(gz.body_truncated);
    let small = c
        .send(
            &Request::new(&server.url(""), "GET", "/gz"),
            &SendOptions {
                ..SendOptions::default()
            },
        )
        .await
        .expect("sends");
    assert_eq!(small.body.len(), 1000);
}

#[tokio::test]
async fn two_requests_share_one_keep_alive_connection() {
    let server = TestServer::start(|s| {
        if s.request_line().starts_with("HEAD") {
            // A HEAD answer announces a length but carries no body.
            Reply::Send(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n".to_vec())
        } else {
            Reply::Send(ok("ok"))
        }
    })
    .await;
    let c = client(lab_config());
    let head = c
        .send(
            &Request::new(&server.url(""), "HEAD", "/"),
            &SendOptions::default(),
        )
        .await
        .expect("head");
    assert!(head.body.is_empty());
    let get = c
        .send(
            &Request::new(&server.url(""), "GET", "/"),
            &SendOptions::default(),
        )
        .await
        .expect("get");
    assert_eq!(&get.body[..], b"ok");
    assert_eq!(server.connections_before_now().await, 1);
    assert_eq!(c.idle_connections(), 1);
}

#[tokio::test]
async fn closing_a_hosts_idle_connections_closes_their_sockets_and_no_others() {
    // The server answers one request on a kept-alive connection, then
    // reports when the client closes it.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        read_request(&mut stream).await.expect("request");
        stream.write_all(&ok("ok")).await.expect("answer");
        let mut rest = [0u8; 64];
        let read = stream.read(&mut rest).await;
        let _ = closed_tx.send(matches!(read, Ok(0)));
    });
    let c = client(lab_config());
    let url = TargetUrl::parse(&format!("http://127.0.0.1:{port}/")).expect("url");
    c.send(&Request::new(&url, "GET", "/"), &SendOptions::default())
        .await
        .expect("get");
    assert_eq!(c.idle_connections(), 1);
    assert_eq!(c.close_idle_to(&["shop.test".to_string()]), 0);
    assert_eq!(c.idle_connections(), 1, "another host's connection stays");
    assert_eq!(c.close_idle_to(&["127.0.0.1".to_string()]), 1);
    assert_eq!(c.idle_connections(), 0);
    let closed = tokio::time::timeout(Duration::from_secs(5), closed_rx)
        .await
        .expect("the server saw the connection end in time")
        .expect("the server reports");
    assert!(closed, "the server read the end of the connection");
}

#[tokio::test]
async fn a_pooled_connection_closed_by_the_server_is_replaced_without_using_the_retry() {
    // The server closes after every answer without saying so, as many do
    // when their keep-alive timeout fires.
    let server = TestServer::start(|_| Reply::SendAndClose(ok("fresh"))).await;
    let c = client(ClientConfig {
        retries: 0,
        ..lab_config()
    });
    let req = Request::new(&server.url(""), "GET", "/");
    c.send(&req, &SendOptions::default()).await.expect("first");
    let second = c
        .send(&req, &SendOptions::default())
        .await
        .expect("second on a fresh connection");
    assert_eq!(&second.body[..], b"fresh");
    let conns: Vec<usize> = server.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, vec![0, 1]);
}

#[tokio::test]
async fn a_reset_connection_is_retried_once() {
    let server = TestServer::start(|s| {
        if s.conn == 0 {
            Reply::Reset
        } else {
            Reply::Send(ok("second try"))
        }
    })
    .await;
    let c = client(lab_config());
    let resp = c
        .send(
            &Request::new(&server.url(""), "GET", "/"),
            &SendOptions::default(),
        )
        .await
        .expect("succeeds on the retry");
    assert_eq!(&resp.body[..], b"second try");
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn without_retries_a_reset_is_a_transient_error() {
    let server = TestServer::start(|_| Reply::Reset).await;
    let c = client(ClientConfig {
        retries: 0,
        ..lab_config()
    });
    let err = c
        .send(
            &Request::new(&server.url(""), "GET", "/"),
            &SendOptions::default(),
        )
        .await
        .expect_err("reset");
    assert!(matches!(err, HttpError::Io { .. }), "{err:?}");
    assert!(err.is_transient());
    assert_eq!(server.connections_before_now().await, 1);
}

#[tokio::test]
async fn a_silent_server_times_out_and_is_not_retried() {
    let server = TestServer::start(|_| Reply::Hang).await;
    let c = client(ClientConfig {
        timeout: Duration::from_millis(300),
        retries: 1,
        ..lab_config()
    });
    let started = Instant::now();
    let err = c
        .send(
            &Request::new(&server.url(""), "GET", "/"),
            &SendOptions::default(),
        )
        .await
        .expect_err("times out");
    assert!(matches!(err, HttpError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.connections_before_now().await, 1);
}

#[tokio::test]
async fn a_body_that_stalls_midway_times_out_without_a_retry() {
    let server = TestServer::start(|_| {
        Reply::Send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..".to_vec())
    })
    .await;
    let c = client(ClientConfig {
        timeout: Duration::from_millis(300),
        ..lab_config()
    });
    let err = c
        .send(&Request::get(&server.url("/")), &SendOptions::default())
        .await
        .expect_err("times out");
    assert!(matches!(err, HttpError::Timeout { .. }), "{err:?}");
    assert!(err.is_transient());
    assert_eq!(server.connections_before_now().await, 1);
}

#[tokio::test]
async fn refused_connections_report_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let c = client(lab_config());
    let url = TargetUrl::parse(&format!("http://127.0.0.1:{port}/")).expect("url");
    let err = c
        .send(&Request::get(&url), &SendOptions::default())
        .await
        .expect_err("refused");
    assert!(matches!(err, HttpError::Connect { .. }), "{err:?}");
    assert!(err.is_transient());
}

fn redirect_server() -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    |s: &Seen| {
        let line = s.request_line();
        let target = line.split(' ').nth(1).unwrap_or_default().to_string();
        match target.as_str() {
            "/start" => Reply::Send(redirect(302, "/middle")),
            "/middle" => Reply::Send(redirect(301, "end")),
            "/end" => Reply::Send(ok("end")),
            "/form" => Reply::Send(redirect(303, "/done")),
            "/keep" => Reply::Send(redirect(307, "/done")),
            "/done" => Reply::Send(ok("done")),
            t if t.starts_with("/away") => {
                let port = s
                    .header("host")
                    .and_then(|h| h.rsplit(':').next().map(str::to_string))
                    .unwrap_or_default();
                Reply::Send(redirect(302, &format!("http://elsewhere.test:{port}/end")))
            }
            _ => Reply::Send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec()),
        }
    }
}

#[tokio::test]
async fn redirects_are_returned_as_is_when_not_followed() {
    let server = TestServer::start(redirect_server()).await;
    let c = client(lab_config());
    let resp = c
        .send(
            &Request::new(&server.url(""), "GET", "/start"),
            &SendOptions::default(),
        )
        .await
        .expect("sends");
    assert_eq!(resp.status, 302);
    assert_eq!(resp.header("location"), Some("/middle"));
    assert_eq!(
        resp.final_url,
        format!("http://127.0.0.1:{}/start", server.port())
    );
    assert!(resp.redirect_chain.is_empty());
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn followed_redirects_resolve_relative_locations_and_record_the_chain() {
    let server = TestServer::start(redirect_server()).await;
    let c = client(lab_config());
    let resp = c
        .send(&Request::new(&server.url(""), "GET", "/start"), &follow(10))
        .await
        .expect("sends");
    let root = format!("http://127.0.0.1:{}", server.port());
    assert_eq!(resp.status, 200);
    assert_eq!(&resp.body[..], b"end");
    assert_eq!(resp.final_url, format!("{root}/end"));
    assert_eq!(
        resp.redirect_chain,
        vec![format!("{root}/start"), format!("{root}/middle")]
    );
    // Each redirect response is kept whole, under its own URL.
    let hops: Vec<(u16, &str, Option<&str>)> = resp
        .redirect_responses
        .iter()
        .map(|h| (h.status, h.final_url.as_str(), h.header("location")))
        .collect();
    assert_eq!(hops.len(), 2);
    assert_eq!(hops[0].1, resp.redirect_chain[0]);
    assert_eq!(hops[1].1, resp.redirect_chain[1]);
    assert!(hops
        .iter()
        .all(|h| (300..400).contains(&h.0) && h.2.is_some()));
}

#[tokio::test]
async fn the_redirect_limit_returns_the_last_redirect_response() {
    let server = TestServer::start(redirect_server()).await;
    let c = client(lab_config());
    let resp = c
        .send(&Request::new(&server.url(""), "GET", "/start"), &follow(1))
        .await
        .expect("sends");
    assert_eq!(resp.status, 301);
    assert!(resp.final_url.ends_with("/middle"));
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn host_only_redirects_stop_at_another_host_and_others_follow_it() {
    let server = TestServer::start(redirect_server()).await;
    let mut cfg = lab_config();
    cfg.hosts = ClientConfig::parse_hosts("elsewhere.test=127.0.0.1").expect("hosts");
    let c = client(cfg);
    let req = Request::new(&server.url(""), "GET", "/away");
    let host_only = SendOptions {
        host_redirects_only: true,
        ..follow(10)
    };
    let stopped = c.send(&req, &host_only).await.expect("sends");
    assert_eq!(stopped.status, 302);
    let followed = c.send(&req, &follow(10)).await.expect("sends");
    assert_eq!(&followed.body[..], b"end");
    assert_eq!(
        followed.final_url,
        format!("http://elsewhere.test:{}/end", server.port())
    );
    let last = server.seen().last().cloned().expect("a request");
    assert_eq!(
        last.header("host"),
        Some(format!("elsewhere.test:{}", server.port()))
    );
}

#[tokio::test]
async fn see_other_turns_a_post_into_a_bodyless_get_and_307_keeps_it() {
    let server = TestServer::start(redirect_server()).await;
    let c = client(lab_config());
    for (target, want_line) in [
        ("/form", "GET /done HTTP/1.1"),
        ("/keep", "POST /done HTTP/1.1"),
    ] {
        let mut req = Request::new(&server.url(""), "POST", target);
        req.headers
            .push(("Content-Type".into(), "text/plain".into()));
        req.body = b"payload".to_vec();
        let resp = c.send(&req, &follow(10)).await.expect("sends");
        assert_eq!(&resp.body[..], b"done");
        let hop = server.seen().last().cloned().expect("second hop");
        assert_eq!(hop.request_line(), want_line);
        if want_line.starts_with("GET") {
            assert_eq!(hop.header("content-length"), None);
            assert_eq!(hop.header("content-type"), None);
            assert!(hop.text().ends_with("\r\n\r\n"));
        } else {
            assert!(hop.text().ends_with("\r\n\r\npayload"));
        }
    }
}

#[tokio::test]
async fn the_cookie_jar_returns_cookies_set_earlier_and_during_redirects() {
    let server = TestServer::start(|s| match s.request_line().split(' ').nth(1).unwrap_or_default() {
        "/login" => Reply::Send(
            b"HTTP/1.1 302 Found\r\nSet-Cookie: sid=abc123; Path=/; HttpOnly\r\nLocation: /home\r\nContent-Length: 0\r\n\r\n"
                .to_vec(),
        ),
        _ => Reply::Send(ok(&s.header("cookie").unwrap_or_else(|| "none".to_string()))),
    })
    .await;
    let c = client(lab_config());
    let jar = CookieJar::new();
    let opts = SendOptions {
        cookie_jar: Some(jar.clone()),
        ..follow(10)
    };
    let landed = c
        .send(&Request::new(&server.url(""), "POST", "/login"), &opts)
        .await
        .expect("login");
    assert_eq!(&landed.body[..], b"sid=abc123");
    let mut later = Request::new(&server.url(""), "GET", "/profile");
    later.headers.push(("Cookie".into(), "lang=en".into()));
    let profile = c.send(&later, &opts).await.expect("profile");
    assert_eq!(&profile.body[..], b"lang=en; sid=abc123");
    let no_jar = c
        .send(
            &Request::new(&server.url(""), "GET", "/profile"),
            &SendOptions::default(),
        )
        .await
        .expect("no jar");
    assert_eq!(&no_jar.body[..], b"none");
}

#[tokio::test]
async fn loopback_targets_are_refused_without_allow_private() {
    let server = TestServer::start(|_| Reply::Send(ok("should not be reached"))).await;
    let c = client(ClientConfig {
        allow_private: false,
        ..lab_config()
    });
    let err = c
        .send(&Request::get(&server.url("/")), &SendOptions::default())
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "refusing to connect to 127.0.0.1 (loopback address) for host 127.0.0.1: private addresses are not allowed (set --allow-private)"
    );
    assert!(!err.is_transient());
    let via_raw = c
        .send_raw(
            &server.url("/"),
            b"GET / HTTP/1.1\r\n\r\n",
            &SendOptions::default(),
        )
        .await
        .expect_err("refused");
    assert!(matches!(via_raw, HttpError::ForbiddenAddress { .. }));
    // A name answered by the system resolver is checked the same way.
    let by_name = TargetUrl::parse(&format!("http://localhost:{}/", server.port())).expect("url");
    match c
        .send(&Request::get(&by_name), &SendOptions::default())
        .await
    {
        Err(HttpError::ForbiddenAddress { host, class, .. }) => {
            assert_eq!(
                (host.as_str(), class),
                ("localhost", AddressClass::Loopback)
            );
        }
        other => panic!("expected a refusal for localhost, got {other:?}"),
    }
    assert_eq!(server.connections_before_now().await, 0);
}

#[tokio::test]
async fn a_resolved_name_falls_back_across_its_addresses() {
    // localhost may resolve to ::1 first, where nothing listens; the client
    // moves on to 127.0.0.1.
    let server = TestServer::start(|_| Reply::Send(ok("found"))).await;
    let c = client(lab_config());
    let url = TargetUrl::parse(&format!("http://localhost:{}/", server.port())).expect("url");
    let resp = c
        .send(&Request::get(&url), &SendOptions::default())
        .await
        .expect("reaches the IPv4 listener");
    assert_eq!(&resp.body[..], b"found");
    assert_eq!(
        server.seen()[0].header("host"),
        Some(format!("localhost:{}", server.port()))
    );
}

#[tokio::test]
async fn names_and_overrides_that_lead_to_private_addresses_are_refused() {
    let server = TestServer::start(|_| Reply::Send(ok("x"))).await;
    let port = server.port();
    let mut cfg = ClientConfig {
        allow_private: false,
        hosts: ClientConfig::parse_hosts(
            "internal.test=10.1.2.3,meta.test=169.254.169.254,v6.test=::ffff:127.0.0.1",
        )
        .expect("hosts"),
        connect_to: ClientConfig::parse_connect_to(&format!("public.test:80:127.0.0.1:{port}"))
            .expect("connect-to"),
        ..lab_config()
    };
    cfg.hosts_only = true;
    let c = client(cfg);
    let cases = [
        ("http://internal.test/", AddressClass::Private),
        ("http://meta.test/", AddressClass::LinkLocal),
        ("http://v6.test/", AddressClass::Loopback),
        ("http://public.test/", AddressClass::Loopback),
        ("http://[::1]:1/", AddressClass::Loopback),
        ("http://100.64.1.1/", AddressClass::SharedCgnat),
    ];
    for (url, want) in cases {
        let url = TargetUrl::parse(url).expect("url");
        match c.send(&Request::get(&url), &SendOptions::default()).await {
            Err(HttpError::ForbiddenAddress { host, class, .. }) => {
                assert_eq!(class, want, "{url}");
                assert_eq!(host, url.host);
            }
            other => panic!("{url}: expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(server.connections_before_now().await, 0);
}

#[tokio::test]
async fn hosts_map_wildcards_and_connect_to_overrides_route_requests() {
    let server = TestServer::start(|_| Reply::Send(ok("routed"))).await;
    let port = server.port();
    let cfg = ClientConfig {
        hosts: ClientConfig::parse_hosts("*.lab.test=127.0.0.1").expect("hosts"),
        hosts_only: true,
        // The last two keep the request's host (curl's empty HOST2), so
        // it is resolved as usual and only the port changes.
        connect_to: ClientConfig::parse_connect_to(&format!(
            "example.invalid:80:127.0.0.1:{port},kept.lab.test:80::{port},gone.test:80::{port}"
        ))
        .expect("connect-to"),
        ..lab_config()
    };
    let c = client(cfg);
    let kept = TargetUrl::parse("http://kept.lab.test/k").expect("url");
    let resp = c
        .send(&Request::get(&kept), &SendOptions::default())
        .await
        .expect("the kept host, through the hosts map");
    assert_eq!(&resp.body[..], b"routed");
    let gone = TargetUrl::parse("http://gone.test/").expect("url");
    match c.send(&Request::get(&gone), &SendOptions::default()).await {
        Err(HttpError::Dns { host, .. }) => assert_eq!(host, "gone.test"),
        other => panic!("gone.test is in no hosts map: {other:?}"),
    }
    let wildcard = TargetUrl::parse(&format!("http://app.lab.test:{port}/x")).expect("url");
    let resp = c
        .send(&Request::get(&wildcard), &SendOptions::default())
        .await
        .expect("wildcard");
    assert_eq!(&resp.body[..], b"routed");
    let overridden = TargetUrl::parse("http://example.invalid/y").expect("url");
    c.send(&Request::get(&overridden), &SendOptions::default())
        .await
        .expect("override");
    let seen = server.seen();
    assert_eq!(seen[0].header("host"), Some("kept.lab.test".to_string()));
    assert_eq!(seen[0].request_line(), "GET /k HTTP/1.1");
    assert_eq!(seen[1].header("host"), Some(format!("app.lab.test:{port}")));
    assert_eq!(seen[1].request_line(), "GET /x HTTP/1.1");
    assert_eq!(seen[2].header("host"), Some("example.invalid".to_string()));
    let unknown = TargetUrl::parse("http://unknown.test/").expect("url");
    let err = c
        .send(&Request::get(&unknown), &SendOptions::default())
        .await
        .expect_err("no DNS in hosts-only mode");
    assert!(matches!(err, HttpError::Dns { .. }), "{err:?}");
}

#[tokio::test]
async fn the_per_host_rate_ceiling_spaces_requests() {
    let server = TestServer::start(|_| Reply::Send(ok("x"))).await;
    let c = client(ClientConfig {
        per_host_rps: Some(10),
        ..lab_config()
    });
    let req = Request::get(&server.url("/"));
    let started = Instant::now();
    for _ in 0..4 {
        c.send(&req, &SendOptions::default()).await.expect("sends");
    }
    // Four starts at 10/s need at least three intervals of 100 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_concurrency_bound_limits_requests_in_flight() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (f, p) = (in_flight.clone(), peak.clone());
    let server = TestServer::start(move |_| {
        let now = f.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        Reply::SendAfter(Duration::from_millis(50), ok("x"))
    })
    .await;
    let c = client(ClientConfig {
        max_concurrency: 2,
        ..lab_config()
    });
    let counter = in_flight.clone();
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let c = c.clone();
            let req = Request::get(&server.url("/"));
            let counter = counter.clone();
            tokio::spawn(async move {
                let r = c.send(&req, &SendOptions::default()).await;
                counter.fetch_sub(1, Ordering::SeqCst);
                r
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task").expect("request");
    }
    assert_eq!(server.seen().len(), 6);
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn interim_responses_are_skipped() {
    let server = TestServer::start(|_| {
        let mut r =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
                .to_vec();
        r.extend_from_slice(&ok("final"));
        Reply::Send(r)
    })
    .await;
    let c = client(lab_config());
    let resp = c
        .send(&Request::get(&server.url("/")), &SendOptions::default())
        .await
        .expect("sends");
    assert_eq!((resp.status, &resp.body[..]), (200, b"final".as_slice()));
}

#[tokio::test]
async fn a_response_that_is_not_http_is_a_protocol_error() {
    let server =
        TestServer::start(|_| Reply::SendAndClose(b"SSH-2.0-OpenSSH_9.6\r\n".to_vec())).await;
    let c = client(lab_config());
    let err = c
        .send(&Request::get(&server.url("/")), &SendOptions::default())
        .await
        .expect_err("not HTTP");
    assert!(matches!(err, HttpError::Protocol { .. }), "{err:?}");
}

/// A TLS server with a fresh self-signed certificate; reports the SNI and
/// ALPN of each handshake.
async fn start_tls_server() -> (
    SocketAddr,
    Arc<Mutex<Vec<(Option<String>, Option<Vec<u8>>, Vec<u8>)>>>,
) {
    let cert = rcgen::generate_simple_self_signed(vec!["not-the-requested-name.test".to_string()])
        .expect("cert");
    let cert_der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert_der], key)
    .expect("server config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let log = log2.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let (sni, alpn) = {
                    let (_, session) = tls.get_ref();
                    (
                        session.server_name().map(str::to_string),
                        session.alpn_protocol().map(<[u8]>::to_vec),
                    )
                };
                while let Some(raw) = read_request(&mut tls).await {
                    log.lock()
                        .expect("lock")
                        .push((sni.clone(), alpn.clone(), raw));
                    if write_tls(&mut tls, &ok("secret")).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, log)
}

async fn write_tls<S: AsyncWrite + Unpin>(s: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    s.write_all(bytes).await?;
    s.flush().await
}

#[tokio::test]
async fn https_accepts_a_self_signed_certificate_and_sends_sni_for_names_only() {
    let (addr, log) = start_tls_server().await;
    let c = client(ClientConfig {
        hosts: ClientConfig::parse_hosts("secure.test=127.0.0.1").expect("hosts"),
        ..lab_config()
    });
    let named =
        TargetUrl::parse(&format!("https://secure.test:{}/..;/admin", addr.port())).expect("url");
    let resp = c
        .send(&Request::get(&named), &SendOptions::default())
        .await
        .expect("named");
    assert_eq!(&resp.body[..], b"secret");
    assert_eq!(
        resp.final_url,
        format!("https://secure.test:{}/..;/admin", addr.port())
    );
    let by_ip = TargetUrl::parse(&format!("https://127.0.0.1:{}/", addr.port())).expect("url");
    c.send(&Request::get(&by_ip), &SendOptions::default())
        .await
        .expect("by ip");
    let log = log.lock().expect("lock").clone();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].0.as_deref(), Some("secure.test"));
    assert_eq!(log[0].1.as_deref(), Some(b"http/1.1".as_slice()));
    assert!(String::from_utf8_lossy(&log[0].2).starts_with("GET /..;/admin HTTP/1.1\r\n"));
    assert_eq!(log[1].0, None);
}
