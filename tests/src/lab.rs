//! A lab web server for pipeline tests: one listener on 127.0.0.1 that
//! answers for every host name a scanner node is pointed at (through the
//! node's hosts map and connect-to settings), with a known set of
//! weaknesses, so the findings of a scan are known in advance.
//!
//! Every host it serves shows:
//! - `/`: an HTML page titled "Lab shop" that names `legacy-portal.<domain>`
//!   (a host only the page reveals, not in the discovery wordlist) and an
//!   outside host that discovery must ignore;
//! - `/.git/config`: a Git configuration (`git-config-exposure`, high);
//! - `X-Powered-By: Express` (`express-detect`, info) and every security
//!   header the header templates look for, so those stay silent.
//!
//! Requests can be slowed down (`delay`) so a scan lasts long enough to be
//! stopped or have its node killed half-way, and the Git configuration can
//! be switched off and on again between scans ([`Lab::set_git_exposed`]) so
//! that a finding is fixed and comes back.
//!
//! Started with an out-of-band server ([`Lab::start_with_oob`]), it also
//! has two blind weaknesses that show nothing in their answers:
//! - `/fetch?url=http://NAME/PATH` fetches the URL (a blind SSRF), over
//!   HTTP to the OOB server's HTTP port on 127.0.0.1 with `Host: NAME`;
//! - `/lookup?host=NAME` resolves NAME (an A question) at the OOB server's
//!   DNS port on 127.0.0.1 (a DNS-only callback).

use crate::http1::next_request;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// The lab's shop, as a target's domain.
pub const DOMAIN: &str = "shop.example.test";
/// Found by the wordlist.
pub const API_HOST: &str = "api.shop.example.test";
/// Named only on the lab's root page.
pub const PORTAL_HOST: &str = "legacy-portal.shop.example.test";

/// Every host of the shop a full scan finds.
pub fn lab_hosts() -> Vec<&'static str> {
    vec![DOMAIN, API_HOST, PORTAL_HOST]
}

/// What a full scan of the lab finds, as sorted `template_id matched_at`
/// lines: on every host, the probe, the exposed Git configuration (high),
/// the X-Powered-By disclosure (low) and the Express detection (info).
pub fn full_findings(hosts: &[&str]) -> Vec<String> {
    let mut keys = Vec::new();
    for h in hosts {
        keys.push(format!("http-probe http://{h}/"));
        keys.push(format!("git-config-exposure http://{h}/.git/config"));
        keys.push(format!("x-powered-by-disclosure http://{h}/"));
        keys.push(format!("express-detect http://{h}/"));
    }
    keys.sort();
    keys
}

pub struct Lab {
    pub port: u16,
    /// Requests answered so far.
    pub requests: Arc<AtomicU64>,
    /// Connections open now (accepted and not yet closed).
    open: Arc<AtomicU64>,
    /// How `/.git/config` answers.
    git: Arc<GitSwitch>,
    /// Loopback addresses past 127.0.0.1 the lab also answers on, on the
    /// same port ([`Lab::start_spread`]).
    spread: u8,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// How the lab answers `/.git/config`: served (on at the start) or a 404;
/// and whether it hangs (for a minute) before answering.
#[derive(Debug)]
struct GitSwitch {
    exposed: AtomicBool,
    hangs: AtomicBool,
}

const GIT_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\
[remote \"origin\"]\n\turl = https://git.internal.invalid/shop.git\n";

/// Where the lab's blind routes call back: an out-of-band server's HTTP
/// and DNS listeners (on 127.0.0.1).
#[derive(Debug, Clone, Copy)]
pub struct OobTarget {
    pub http: SocketAddr,
    pub dns: SocketAddr,
}

impl Lab {
    /// Starts the lab; every answer waits `delay` first.
    pub async fn start(delay: Duration) -> Lab {
        Lab::start_inner(delay, None).await
    }

    /// Starts the lab with its blind routes calling back to `oob`.
    pub async fn start_with_oob(delay: Duration, oob: OobTarget) -> Lab {
        Lab::start_inner(delay, Some(oob)).await
    }

    /// Starts the lab on 127.0.0.1 and on `spread` more loopback
    /// addresses (127.0.1.1 up), all on one port, for a fleet of many
    /// scans: the targets of [`Lab::spread_host`] are spread over them as
    /// a real fleet's targets are over their own addresses. With one
    /// address, every connection of every node goes to one address and
    /// port, and once tens of thousands of them have closed the kernel
    /// searches long for a free local port on each connect (a tenth of
    /// the machine at 64 nodes).
    pub async fn start_spread(delay: Duration, spread: u8) -> Lab {
        for _ in 0..5 {
            let first = TcpListener::bind("127.0.0.1:0").await.expect("lab bind");
            let port = first.local_addr().expect("lab addr").port();
            let mut listeners = vec![first];
            for k in 1..=spread {
                match TcpListener::bind((Ipv4Addr::new(127, 0, 1, k), port)).await {
                    Ok(l) => listeners.push(l),
                    Err(_) => break,
                }
            }
            if listeners.len() == usize::from(spread) + 1 {
                return Lab::serve_on(listeners, spread, delay, None);
            }
        }
        panic!("lab: no port free on 127.0.0.1 and 127.0.1.1 to 127.0.1.{spread}");
    }

    async fn start_inner(delay: Duration, oob: Option<OobTarget>) -> Lab {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("lab bind");
        Lab::serve_on(vec![listener], 0, delay, oob)
    }

    /// Serves on `listeners`, the first on 127.0.0.1, the `spread` others
    /// on 127.0.1.1 up.
    fn serve_on(
        listeners: Vec<TcpListener>,
        spread: u8,
        delay: Duration,
        oob: Option<OobTarget>,
    ) -> Lab {
        let port = listeners[0].local_addr().expect("lab addr").port();
        let requests = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicU64::new(0));
        let git = Arc::new(GitSwitch {
            exposed: AtomicBool::new(true),
            hangs: AtomicBool::new(false),
        });
        let tasks = listeners
            .into_iter()
            .map(|listener| {
                let counter = requests.clone();
                let open = open.clone();
                let switch = git.clone();
                tokio::spawn(async move {
                    loop {
                        let stream = match listener.accept().await {
                            Ok((stream, _)) => stream,
                            // Out of descriptors, say: wait for some to
                            // close rather than spin on the error.
                            Err(_) => {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                                continue;
                            }
                        };
                        let counter = counter.clone();
                        let switch = switch.clone();
                        let open = Open::count(&open);
                        tokio::spawn(async move {
                            let _ = serve(stream, delay, counter, switch, oob).await;
                            drop(open);
                        });
                    }
                })
            })
            .collect();
        Lab {
            port,
            requests,
            open,
            git,
            spread,
            tasks,
        }
    }

    /// The `i`th target host below `domain` of a lab started with
    /// [`Lab::start_spread`]: on the lab's addresses in turn, through the
    /// hosts map of [`Lab::spread_env`].
    pub fn spread_host(&self, i: usize, domain: &str) -> String {
        format!("t{i}.g{}.{domain}", i % usize::from(self.spread.max(1)))
    }

    /// Node settings that send `domain` and every name below it to this
    /// lab, the names of [`Lab::spread_host`] each to its own address: the
    /// hosts map, HTTP to the lab's port on the address the name has,
    /// HTTPS to a closed port.
    pub fn spread_env(&self, domain: &str) -> Vec<(String, String)> {
        let mut map = vec![
            format!("{domain}=127.0.0.1"),
            format!("*.{domain}=127.0.0.1"),
        ];
        map.extend((0..self.spread).map(|k| format!("*.g{k}.{domain}=127.0.1.{}", k + 1)));
        lab_env(&map, &format!(":80::{}", self.port))
    }

    /// Connections open on the lab now: those a client keeps alive
    /// included, until it closes them.
    pub fn open_connections(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }

    /// Serves `/.git/config` (the weakness on) or a 404 (fixed).
    pub fn set_git_exposed(&self, exposed: bool) {
        self.git.exposed.store(exposed, Ordering::SeqCst);
    }

    /// Makes `/.git/config` answer only after a minute (a scan whose
    /// deadline is shorter fails while the templates wait for it).
    pub fn set_git_hangs(&self, hangs: bool) {
        self.git.hangs.store(hangs, Ordering::SeqCst);
    }

    /// Node settings that send every name in `hosts` to this lab.
    pub fn node_env(&self, hosts: &[&str]) -> Vec<(String, String)> {
        node_env_for(self.port, hosts)
    }
}

/// Node (or CLI) settings that send every name in `hosts` to a lab on
/// 127.0.0.1:`port`: the hosts map, HTTP to the lab's port, HTTPS to a
/// closed port.
pub fn node_env_for(port: u16, hosts: &[&str]) -> Vec<(String, String)> {
    let map: Vec<String> = hosts.iter().map(|h| format!("{h}=127.0.0.1")).collect();
    lab_env(&map, &format!(":80:127.0.0.1:{port}"))
}

/// Settings for the hosts map `map` (only those names, private addresses
/// allowed), HTTP sent as `http` says, HTTPS to a closed port.
fn lab_env(map: &[String], http: &str) -> Vec<(String, String)> {
    vec![
        ("SCANFLEET_SCANNER__HOSTS".into(), map.join(",")),
        ("SCANFLEET_SCANNER__HOSTS_ONLY".into(), "true".into()),
        ("SCANFLEET_SCANNER__ALLOW_PRIVATE".into(), "true".into()),
        (
            "SCANFLEET_SCANNER__CONNECT_TO".into(),
            format!("{http},:443:127.0.0.1:9"),
        ),
    ]
}

/// One open connection of the lab, counted while it lives.
struct Open(Arc<AtomicU64>);

impl Open {
    fn count(open: &Arc<AtomicU64>) -> Open {
        open.fetch_add(1, Ordering::SeqCst);
        Open(open.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(
    mut stream: TcpStream,
    delay: Duration,
    counter: Arc<AtomicU64>,
    git: Arc<GitSwitch>,
    oob: Option<OobTarget>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some(request) = next_request(&mut stream, &mut buf, None).await? else {
            return Ok(());
        };
        let host = request.host().to_string();
        let (method, path) = (request.method, request.path);
        let domain = host.split(':').next().unwrap_or("").to_string();
        counter.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
        if path == "/.git/config" && git.hangs.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        let (status, content_type, body) = match oob {
            Some(oob) if is_blind_route(&path) => blind_route(&path, oob).await,
            _ => route(&path, &domain, git.exposed.load(Ordering::SeqCst)),
        };
        let body = if method == "HEAD" {
            String::new()
        } else {
            body
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             Server: scanfleet-lab\r\nX-Powered-By: Express\r\n\
             Content-Security-Policy: default-src 'self'\r\n\
             Strict-Transport-Security: max-age=31536000\r\nX-Frame-Options: DENY\r\n\
             X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await?;
    }
}

fn route(path: &str, domain: &str, git_exposed: bool) -> (&'static str, &'static str, String) {
    let path = path.split('?').next().unwrap_or("/");
    match path {
        "/" => (
            "200 OK",
            "text/html; charset=utf-8",
            format!(
                "<!doctype html><html><head><title>Lab shop</title></head><body>\
                 <a href=\"http://legacy-portal.{domain}/\">old portal</a> \
                 <a href=\"https://partner.example.org/\">partner</a></body></html>"
            ),
        ),
        "/.git/config" if git_exposed => ("200 OK", "text/plain", GIT_CONFIG.to_string()),
        _ => ("404 Not Found", "text/plain", "not found".to_string()),
    }
}

fn is_blind_route(path: &str) -> bool {
    path.starts_with("/fetch?") || path.starts_with("/lookup?")
}

/// The blind routes: the callback is made before the answer, and the
/// answer is the same whatever happened.
async fn blind_route(path: &str, oob: OobTarget) -> (&'static str, &'static str, String) {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map(percent_decode)
    };
    let timeout = Duration::from_secs(3);
    match (route, param("url"), param("host")) {
        ("/fetch", Some(url), _) => {
            let _ = tokio::time::timeout(timeout, fetch(&url, oob.http)).await;
        }
        ("/lookup", _, Some(host)) => {
            let _ = tokio::time::timeout(timeout, lookup(&host, oob.dns)).await;
        }
        _ => {}
    }
    ("200 OK", "text/plain", "request accepted".to_string())
}

/// `GET` of an `http://name[:port]/path` URL, sent to `to` with the URL's
/// host as `Host`.
async fn fetch(url: &str, to: SocketAddr) -> std::io::Result<()> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = TcpStream::connect(to).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: lab-fetcher\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    Ok(())
}

/// One DNS question (`A`, recursion desired) for `name`, sent to `to`
/// over UDP; the answer is read and ignored.
async fn lookup(name: &str, to: SocketAddr) -> std::io::Result<()> {
    let mut query = vec![0x4c, 0x61, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        let label = &label.as_bytes()[..label.len().min(63)];
        query.push(label.len() as u8);
        query.extend_from_slice(label);
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    socket.send_to(&query, to).await?;
    let mut answer = [0u8; 512];
    socket.recv_from(&mut answer).await?;
    Ok(())
}

/// `%XX` escapes decoded (a URL handed over in a query string).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
