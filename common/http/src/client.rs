//! The client: resolution and safety checks, pooled connections, one
//! exchange per hop, retries and redirects.

use std::borrow::Cow;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use scanfleet_common::chain::Chain;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::config::ClientConfig;
use super::conn::{Conn, Pool, PoolKey};
use super::cookies::CookieJar;
use super::dns::WireDns;
use super::error::{DnsFailure, HttpError, TlsFailure};
use super::rate::HostRateLimiter;
use super::request::{Request, WireDefaults};
use super::resolve::{check_address, resolve, DnsCache};
use super::response::Response;
use super::tls;
use super::url::{Scheme, TargetUrl};
use super::wire::{header_value, read_response, WireError, WireResponse};

/// Idle connections kept per (scheme, host, port, address). As many as
/// requests may be in flight to one host at the default concurrency: with
/// fewer, every request past the kept ones opened a new connection (and
/// the server closed one), which bounded a scan of one host far below
/// what the host could answer.
const POOL_PER_KEY: usize = 64;
/// Idle connections kept in total.
const POOL_TOTAL: usize = 512;
/// Idle connections older than this are not reused: many servers close
/// idle keep-alive connections after 5 to 15 seconds.
const POOL_IDLE: Duration = Duration::from_secs(10);

/// How one request is sent: redirect policy and the cookie jar of its run.
#[derive(Debug, Clone)]
pub struct SendOptions {
    pub follow_redirects: bool,
    /// Most redirects followed; the last redirect response is returned when
    /// the limit is reached.
    pub max_redirects: u32,
    /// Follow only redirects whose target host equals the current host.
    pub host_redirects_only: bool,
    pub cookie_jar: Option<CookieJar>,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            follow_redirects: false,
            max_redirects: 10,
            host_redirects_only: false,
            cookie_jar: None,
        }
    }
}

/// HTTP/1.1 client for scanning; cheap to clone, all clones share the
/// pool, the concurrency bound and the rate limiter.
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: ClientConfig,
    tls: tokio_rustls::TlsConnector,
    pool: Pool,
    /// Bounds exchanges in flight across every clone of the client. An
    /// exchange takes a permit after its name is resolved and holds it until
    /// its response is read; waiters queue in order. Never closed.
    permits: Semaphore,
    rate: HostRateLimiter,
    dns: DnsCache,
    /// Answers TXT questions: the configured DNS server, else the system
    /// resolver, built on first use; an error when DNS is off.
    txt: std::sync::OnceLock<Result<WireDns, Arc<HttpError>>>,
    /// Requests written to a connection, retries and redirect hops included.
    sent: AtomicU64,
    /// The same, per host name (lower-case): what each host received.
    sent_to: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

/// How an exchange uses its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnUse {
    /// A pooled connection if one is idle; given back after a complete
    /// response the server lets us reuse.
    KeepAlive,
    /// A fresh connection, closed after the response.
    OneShot,
    /// A fresh connection whose write side is shut down once the request is
    /// written. For an `unsafe` request whose header section never ends
    /// (no blank line): a server waits for the rest until its own timeout,
    /// so without the shutdown the exchange would cost our whole timeout.
    /// Told the request is over, a server answers what it got (often 400)
    /// or closes at once.
    HalfClose,
}

/// Outcome of one exchange on one connection.
enum RoundTrip {
    Done(WireResponse),
    /// The connection failed before any response byte arrived: for a pooled
    /// connection this means the server had closed it while idle.
    Stale(HttpError),
    Failed(HttpError),
}

impl HttpClient {
    pub fn new(cfg: ClientConfig) -> Result<HttpClient, HttpError> {
        if cfg.max_concurrency == 0 {
            return Err(HttpError::InvalidConfig {
                reason: "max_concurrency must be at least 1".to_string(),
            });
        }
        if cfg.per_host_rps == Some(0) {
            return Err(HttpError::InvalidConfig {
                reason: "per_host_rps must be at least 1 when set".to_string(),
            });
        }
        if cfg.timeout.is_zero() {
            return Err(HttpError::InvalidConfig {
                reason: "timeout must be greater than zero".to_string(),
            });
        }
        let server = cfg
            .dns_server
            .map(|addr| WireDns::new(Some(addr), cfg.timeout))
            .transpose()?;
        let txt = std::sync::OnceLock::new();
        if let Some(server) = &server {
            let _ = txt.set(Ok(server.clone()));
        }
        Ok(HttpClient {
            inner: Arc::new(Inner {
                tls: tls::connector()?,
                pool: Pool::new(POOL_PER_KEY, POOL_TOTAL, POOL_IDLE),
                permits: Semaphore::new(cfg.max_concurrency),
                rate: HostRateLimiter::with_default(cfg.per_host_rps),
                sent_to: std::sync::Mutex::new(std::collections::HashMap::new()),
                dns: DnsCache::with_server(server),
                txt,
                sent: AtomicU64::new(0),
                cfg,
            }),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.cfg
    }

    /// The addresses of the name `host` (hosts map, then DNS; connect-to
    /// overrides do not apply: they redirect connections, not names), each
    /// allowed by the address policy. A scanner node uses it for its DNS
    /// stages; callers bound the wait.
    pub async fn resolve_name(&self, host: &str) -> Result<Vec<IpAddr>, HttpError> {
        let addrs =
            super::resolve::lookup(&self.inner.cfg, &self.inner.dns, host, host, 443).await?;
        Ok(addrs.into_iter().map(|a| a.ip()).collect())
    }

    /// The TXT records of `name` (each record's strings joined), from the
    /// configured DNS server or the system resolver; empty when there are
    /// none. Refused in hosts-only mode without a DNS server. Callers bound
    /// the wait.
    pub async fn txt_records(&self, name: &str) -> Result<Vec<String>, HttpError> {
        let cfg = &self.inner.cfg;
        let unresolved = |cause| HttpError::Dns {
            host: name.to_string(),
            cause,
        };
        if cfg.hosts_only {
            return Err(unresolved(DnsFailure::Off));
        }
        let dns = self
            .inner
            .txt
            .get_or_init(|| WireDns::new(None, cfg.timeout).map_err(Arc::new));
        match dns {
            Ok(dns) => dns.txt(name).await,
            Err(e) => Err(unresolved(DnsFailure::Unavailable(e.clone()))),
        }
    }

    /// Requests written so far by this client and its clones (each retry
    /// and redirect hop counts), what the servers received.
    pub fn requests_sent(&self) -> u64 {
        self.inner.sent.load(Ordering::Relaxed)
    }

    /// Requests written so far to `host` by this client and its clones
    /// (retries and redirect hops included). Two scans of one host on one
    /// node share the count.
    pub fn requests_sent_to(&self, host: &str) -> u64 {
        let by_host = self.inner.sent_to.lock().unwrap_or_else(|p| p.into_inner());
        by_host
            .get(host.to_ascii_lowercase().as_str())
            .copied()
            .unwrap_or(0)
    }

    /// Caps requests to `host` at `rps` a second from now on, in place of
    /// the client's own ceiling (`ClientConfig::per_host_rps`), for every
    /// clone of the client: a target's politeness setting, applied across
    /// all of a scan's work on the host.
    pub fn limit_host(&self, host: &str, rps: u32) {
        self.inner.rate.set_host_rps(host, rps);
    }

    /// Back to the client's own ceiling for `host`.
    pub fn unlimit_host(&self, host: &str) {
        self.inner.rate.clear_host_rps(host);
    }

    /// Closes the idle pooled connections to the host names `hosts` (any
    /// case, every scheme, port and address) and answers how many: a scan
    /// that is over leaves no connection open on the hosts it scanned.
    /// Connections in use are left to their request.
    pub fn close_idle_to(&self, hosts: &[String]) -> usize {
        self.inner
            .pool
            .close_where(|host| hosts.iter().any(|h| h.eq_ignore_ascii_case(host)))
    }

    /// Idle pooled connections (for tests and metrics).
    pub fn idle_connections(&self) -> usize {
        self.inner.pool.idle_count()
    }

    /// Sends one request; follows redirects per `opts`; returns the final
    /// response with the chain of URLs and the redirect responses before it.
    pub async fn send(&self, req: &Request, opts: &SendOptions) -> Result<Response, HttpError> {
        self.run(Cow::Borrowed(req), opts, Vec::new(), Duration::ZERO)
            .await
    }

    /// Sends `bytes` verbatim to `endpoint` (for `unsafe: true` templates):
    /// nothing is added or rewritten, and the connection is not pooled, since
    /// such requests are often built to desynchronise it. Set-Cookie answers
    /// still go to the jar; a followed redirect continues as a normal GET.
    pub async fn send_raw(
        &self,
        endpoint: &TargetUrl,
        bytes: &[u8],
        opts: &SendOptions,
    ) -> Result<Response, HttpError> {
        let line_end = bytes
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(bytes.len());
        let line = String::from_utf8_lossy(&bytes[..line_end]);
        let mut fields = line.split_ascii_whitespace();
        let method = fields.next().unwrap_or("GET").to_string();
        let target = fields.next().unwrap_or("/").as_bytes().to_vec();
        let conn_use = if header_section_ends(bytes) {
            ConnUse::OneShot
        } else {
            ConnUse::HalfClose
        };
        let (resp, took) = self
            .exchange(
                endpoint,
                bytes,
                method.eq_ignore_ascii_case("HEAD"),
                conn_use,
            )
            .await?;
        let current = Request {
            url: endpoint.clone(),
            method,
            target,
            headers: Vec::new(),
            body: Vec::new(),
        };
        if let Some(jar) = &opts.cookie_jar {
            store_cookies(jar, &current, &resp);
        }
        match next_hop(&current, &resp, opts, 0)? {
            Some(next) => {
                let hop = into_response(resp, current.full_url(), took, Vec::new(), Vec::new());
                self.run(Cow::Owned(next), opts, vec![hop], took).await
            }
            None => Ok(into_response(
                resp,
                current.full_url(),
                took,
                Vec::new(),
                Vec::new(),
            )),
        }
    }

    /// `current` is borrowed until a redirect replaces it: the request
    /// itself is not copied to be sent.
    async fn run(
        &self,
        mut current: Cow<'_, Request>,
        opts: &SendOptions,
        mut hops: Vec<Response>,
        mut spent: Duration,
    ) -> Result<Response, HttpError> {
        let defaults = WireDefaults {
            user_agent: &self.inner.cfg.user_agent,
        };
        loop {
            let cookie = opts
                .cookie_jar
                .as_ref()
                .and_then(|jar| jar.header_for(&current.url, &current.target));
            let wire = current.to_wire(&defaults, cookie.as_deref());
            let head = current.method.eq_ignore_ascii_case("HEAD");
            let conn_use = if current.allows_keep_alive() {
                ConnUse::KeepAlive
            } else {
                ConnUse::OneShot
            };
            let (resp, took) = self.exchange(&current.url, &wire, head, conn_use).await?;
            spent += took;
            if let Some(jar) = &opts.cookie_jar {
                store_cookies(jar, &current, &resp);
            }
            match next_hop(&current, &resp, opts, hops.len())? {
                Some(next) => {
                    hops.push(into_response(
                        resp,
                        current.full_url(),
                        took,
                        Vec::new(),
                        Vec::new(),
                    ));
                    current = Cow::Owned(next);
                }
                None => {
                    let chain = hops.iter().map(|h| h.final_url.clone()).collect();
                    return Ok(into_response(resp, current.full_url(), spent, chain, hops));
                }
            }
        }
    }

    /// One request/response exchange with `url`'s origin, retried per
    /// `cfg.retries` on refused or reset connections, bounded by
    /// `cfg.timeout`. Returns the response and the time spent on the wire.
    #[tracing::instrument(level = "debug", skip_all, fields(host = %url.host, port = url.port))]
    async fn exchange(
        &self,
        url: &TargetUrl,
        wire: &[u8],
        head: bool,
        conn_use: ConnUse,
    ) -> Result<(WireResponse, Duration), HttpError> {
        let cfg = &self.inner.cfg;
        let timed_out = || HttpError::Timeout {
            host: url.host.clone(),
            after: cfg.timeout,
        };
        // One budget covers resolution, connecting, writing and reading
        // (retries included); waiting for the rate limiter or a slot does not
        // use it, so a busy scanner does not time out healthy hosts.
        let resolving = Instant::now();
        let addrs = tokio::time::timeout(
            cfg.timeout,
            resolve(cfg, &self.inner.dns, &url.host, url.port),
        )
        .await
        .map_err(|_| timed_out())??;
        let budget = cfg.timeout.saturating_sub(resolving.elapsed());
        // The rate wait comes before the permit so that requests sleeping
        // for one slow-rated host do not hold slots other hosts could use.
        self.inner.rate.acquire(&url.host).await;
        let _permit = self
            .inner
            .permits
            .acquire()
            .await
            .map_err(|_| HttpError::InvalidConfig {
                reason: "the client's request slots were closed".to_string(),
            })?;
        let started = Instant::now();
        let attempts = async {
            let mut retries_left = cfg.retries;
            loop {
                match self.attempt(url, &addrs, wire, head, conn_use).await {
                    Err(e) if e.is_retryable_now() && retries_left > 0 => {
                        retries_left -= 1;
                        tracing::debug!(host = %url.host, error = %Chain(&e), "retrying after transport error");
                    }
                    other => return other,
                }
            }
        };
        let resp = tokio::time::timeout(budget, attempts)
            .await
            .map_err(|_| timed_out())??;
        Ok((resp, started.elapsed()))
    }

    /// One try: a pooled connection first (a stale one is replaced by a
    /// fresh one without counting as a retry), else a new connection.
    async fn attempt(
        &self,
        url: &TargetUrl,
        addrs: &[SocketAddr],
        wire: &[u8],
        head: bool,
        conn_use: ConnUse,
    ) -> Result<WireResponse, HttpError> {
        let keep_alive = conn_use == ConnUse::KeepAlive;
        let key_for = |addr: SocketAddr| PoolKey {
            scheme: url.scheme,
            host: url.host.clone(),
            port: url.port,
            addr,
        };
        if keep_alive {
            for &addr in addrs {
                let key = key_for(addr);
                while let Some(mut conn) = self.inner.pool.take(&key) {
                    match self.round_trip(&mut conn, url, wire, head, conn_use).await {
                        RoundTrip::Done(resp) => {
                            if resp.reusable {
                                self.inner.pool.put(key, conn);
                            }
                            return Ok(resp);
                        }
                        RoundTrip::Stale(e) => {
                            tracing::debug!(host = %url.host, error = %Chain(&e), "pooled connection was stale");
                        }
                        RoundTrip::Failed(e) => return Err(e),
                    }
                }
            }
        }
        let mut conn = self.connect(url, addrs).await?;
        match self.round_trip(&mut conn, url, wire, head, conn_use).await {
            RoundTrip::Done(resp) => {
                if keep_alive && resp.reusable {
                    self.inner.pool.put(key_for(conn.peer), conn);
                }
                Ok(resp)
            }
            RoundTrip::Stale(e) | RoundTrip::Failed(e) => Err(e),
        }
    }

    async fn round_trip(
        &self,
        conn: &mut Conn,
        url: &TargetUrl,
        wire: &[u8],
        head: bool,
        conn_use: ConnUse,
    ) -> RoundTrip {
        self.inner.sent.fetch_add(1, Ordering::Relaxed);
        {
            let mut by_host = self.inner.sent_to.lock().unwrap_or_else(|p| p.into_inner());
            match by_host.get_mut(url.host.as_str()) {
                Some(n) => *n += 1,
                None => {
                    by_host.insert(url.host.to_ascii_lowercase(), 1);
                }
            }
        }
        if let Err(source) = conn.write_all(wire).await {
            return RoundTrip::Stale(HttpError::Io {
                host: url.host.clone(),
                stage: "writing the request",
                source,
            });
        }
        let half_closed = conn_use == ConnUse::HalfClose;
        if half_closed {
            // A failed shutdown leaves the plain timeout in charge.
            let _ = conn.shutdown_write().await;
        }
        match read_response(conn, head, self.inner.cfg.body_cap).await {
            Ok(resp) => RoundTrip::Done(resp),
            // Closed without a byte after we said the request was over:
            // that is the server's answer, not a dropped connection to
            // retry.
            Err(WireError::Io {
                received_any: false,
                ..
            }) if half_closed => RoundTrip::Failed(HttpError::Protocol {
                host: url.host.clone(),
                reason: "the server closed the connection without answering \
                         an incomplete request (no blank line after the headers)"
                    .to_string(),
            }),
            Err(WireError::Io {
                source,
                received_any,
            }) => {
                let e = HttpError::Io {
                    host: url.host.clone(),
                    stage: "reading the response",
                    source,
                };
                if received_any {
                    RoundTrip::Failed(e)
                } else {
                    RoundTrip::Stale(e)
                }
            }
            Err(WireError::Protocol(reason)) => RoundTrip::Failed(HttpError::Protocol {
                host: url.host.clone(),
                reason,
            }),
        }
    }

    /// Connects to the first reachable address, checks the peer address
    /// (DNS rebinding cannot get past it) and does the TLS handshake.
    async fn connect(&self, url: &TargetUrl, addrs: &[SocketAddr]) -> Result<Conn, HttpError> {
        let cfg = &self.inner.cfg;
        let mut last_error = None;
        for &addr in addrs {
            check_address(cfg, &url.host, addr.ip())?;
            let tcp = match TcpStream::connect(addr).await {
                Ok(tcp) => tcp,
                Err(source) => {
                    last_error = Some(HttpError::Connect {
                        host: url.host.clone(),
                        addr,
                        source,
                    });
                    continue;
                }
            };
            let peer = tcp.peer_addr().unwrap_or(addr);
            check_address(cfg, &url.host, peer.ip())?;
            // Requests are small and written at once; Nagle would only add
            // latency to the header/body split.
            let _ = tcp.set_nodelay(true);
            return match url.scheme {
                Scheme::Http => Ok(Conn::new(Box::new(tcp), peer)),
                Scheme::Https => {
                    let name = tls::server_name(&url.host)?;
                    let stream =
                        self.inner
                            .tls
                            .connect(name, tcp)
                            .await
                            .map_err(|e| HttpError::Tls {
                                host: url.host.clone(),
                                cause: TlsFailure::Handshake(e),
                            })?;
                    Ok(Conn::new(Box::new(stream), peer))
                }
            };
        }
        Err(last_error.unwrap_or_else(|| HttpError::Dns {
            host: url.host.clone(),
            cause: DnsFailure::NothingToConnectTo,
        }))
    }
}

/// Whether a raw request's header section is closed by a blank line (line
/// ends CRLF or bare LF, in any mix: servers accept both).
fn header_section_ends(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'\n', bytes).any(|at| {
        let rest = &bytes[at + 1..];
        rest.starts_with(b"\n") || rest.starts_with(b"\r\n")
    })
}

fn store_cookies(jar: &CookieJar, req: &Request, resp: &WireResponse) {
    jar.store_from_headers(&req.url, &req.target, &resp.headers);
}

fn into_response(
    resp: WireResponse,
    final_url: String,
    duration: Duration,
    redirect_chain: Vec<String>,
    redirect_responses: Vec<Response>,
) -> Response {
    // A response may be kept for the rest of the scan (the response cache
    // shares it): without the room its buffers grew into.
    let (mut headers, mut body) = (resp.headers, resp.body);
    headers.shrink_to_fit();
    body.shrink_to_fit();
    Response {
        status: resp.status,
        proto: resp.proto,
        reason: resp.reason,
        headers,
        body: Bytes::from(body),
        body_truncated: resp.body_truncated,
        content_decoded: resp.content_decoded,
        final_url,
        duration,
        redirect_chain,
        redirect_responses,
    }
}

/// The request to send after `resp`, when it is a redirect to follow.
fn next_hop(
    current: &Request,
    resp: &WireResponse,
    opts: &SendOptions,
    followed: usize,
) -> Result<Option<Request>, HttpError> {
    if !opts.follow_redirects || !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
        return Ok(None);
    }
    if followed >= opts.max_redirects as usize {
        return Ok(None);
    }
    let Some(location) = header_value(&resp.headers, "location").filter(|l| !l.trim().is_empty())
    else {
        return Ok(None);
    };
    let (url, target) = current.url.resolve_location(&current.target, location)?;
    let same_host = url.host == current.url.host;
    if opts.host_redirects_only && !same_host {
        return Ok(None);
    }
    let is_post = current.method.eq_ignore_ascii_case("POST");
    let is_head = current.method.eq_ignore_ascii_case("HEAD");
    let to_get = (resp.status == 303 && !is_head) || (matches!(resp.status, 301 | 302) && is_post);
    let (method, body) = if to_get {
        ("GET".to_string(), Vec::new())
    } else {
        (current.method.clone(), current.body.clone())
    };
    // Host is recomputed for the new origin; body headers go with the body;
    // credentials do not travel to another host (as browsers and Go do).
    let headers = current
        .headers
        .iter()
        .filter(|(n, _)| {
            let n = n.to_ascii_lowercase();
            let body_header = matches!(
                n.as_str(),
                "content-length" | "content-type" | "transfer-encoding"
            );
            let credential = matches!(n.as_str(), "authorization" | "cookie" | "cookie2");
            n != "host" && !(to_get && body_header) && (!credential || same_host)
        })
        .cloned()
        .collect();
    Ok(Some(Request {
        url,
        method,
        target,
        headers,
        body,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unsafe_requests_whose_headers_never_end_are_half_closed() {
        assert!(header_section_ends(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(header_section_ends(b"GET / HTTP/1.1\nHost: a\n\nbody"));
        assert!(header_section_ends(b"GET / HTTP/1.1\r\nHost: a\r\n\n"));
        assert!(!header_section_ends(b"AAAA / HTTP/1.1\nHost: a\n"));
        assert!(!header_section_ends(b"GET / HTTP/1.1\r\nHost: a\r\n"));
    }
}
