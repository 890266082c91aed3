//! A lab of hosts that present as real products (issue 35), for the
//! `auto` engine's tests and its benchmark: one listener on 127.0.0.1
//! answering by `Host`. The hosts, their answers and what a scan must find
//! on each live in one fixture, `docker/lab/stacks.json`, which the docker
//! lab (`docker/lab/lab_site.py`) serves too; see its `about`. In short:
//!
//! - `wordpress.stack.test`: WordPress 5.8.1 on PHP, with the Better Search
//!   Replace plugin at 1.4.4 (its readme; CVE-2023-6933 reads the version
//!   from it).
//! - `jenkins.stack.test`: Jenkins 2.150.1 headers, its sign-in page and an
//!   open script console (`/script`).
//! - `grafana.stack.test`: `/` redirects to a Grafana 8.2.0 login page, and
//!   the plugin path traversal of CVE-2021-43798 answers `/etc/passwd`.
//! - `tomcat.stack.test`: an Apache Tomcat 9.0.30 default page and a
//!   manager (`/manager/html`) that takes `tomcat:tomcat`.
//! - `nginx.stack.test`: nginx 1.18.0's welcome page and a stray `.env`.
//! - `blank.stack.test`: one plain page, nothing to detect. A name the
//!   fixture does not hold answers as this host.
//!
//! The lab counts requests per host and per host and second
//! ([`StackLab::max_per_second`]), for the politeness test.

use crate::http1::next_request;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

pub const NGINX: &str = "nginx.stack.test";
pub const BLANK: &str = "blank.stack.test";

/// `docker/lab/stacks.json`, the one description of the lab's hosts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    #[allow(dead_code)] // for the reader of the file
    about: Vec<String>,
    /// Corpus templates (relative to its `http/`) the findings are found with.
    templates: Vec<String>,
    /// Headers of every answer, after `Content-Type` and `Content-Length`.
    headers: Vec<(String, String)>,
    not_found: Answer,
    hosts: Vec<StackHost>,
}

/// One host of the lab.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackHost {
    pub host: String,
    pub presents_as: String,
    /// Headers of every answer of this host, after the route's.
    headers: Vec<(String, String)>,
    routes: Vec<Route>,
    /// What detection must name here (a subset of what it may name).
    pub technologies: Vec<Technology>,
    /// `template_id matched_at` of every finding a `full` scan with the
    /// fixture's templates gets here, the probe's own left out; sorted.
    pub findings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Technology {
    pub name: String,
    /// A prefix of one of the evidence strings detection shows.
    pub evidence: String,
    /// The version detection must extract, where it reads one.
    pub version: Option<String>,
}

/// A route: the paths (or the pattern) it answers, and its answer (its
/// fields beside the route's: serde cannot deny unknown fields there).
#[derive(Deserialize)]
struct Route {
    #[serde(default)]
    paths: Vec<String>,
    prefix: Option<String>,
    contains: Option<String>,
    suffix: Option<String>,
    /// The `Authorization` header this answer needs, if any.
    authorization: Option<String>,
    #[serde(flatten)]
    answer: Answer,
}

#[derive(Deserialize)]
struct Answer {
    status: u16,
    #[serde(default)]
    headers: Vec<(String, String)>,
    content_type: String,
    body: String,
}

impl Route {
    fn answers(&self, path: &str, authorization: Option<&str>) -> bool {
        let by_pattern =
            (self.prefix.is_some() || self.contains.is_some() || self.suffix.is_some())
                && self.prefix.as_deref().is_none_or(|p| path.starts_with(p))
                && self.contains.as_deref().is_none_or(|c| path.contains(c))
                && self.suffix.as_deref().is_none_or(|s| path.ends_with(s));
        (self.paths.iter().any(|p| p == path) || by_pattern)
            && self
                .authorization
                .as_deref()
                .is_none_or(|a| authorization == Some(a))
    }
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../docker/lab/stacks.json"))
        .expect("docker/lab/stacks.json")
});

/// Every host of the lab, in the fixture's order.
pub fn stack_hosts() -> Vec<&'static str> {
    FIXTURE.hosts.iter().map(|h| h.host.as_str()).collect()
}

/// The fixture's description of `host`; panics on a name it does not hold.
pub fn stack_host(host: &str) -> &'static StackHost {
    FIXTURE
        .hosts
        .iter()
        .find(|h| h.host == host)
        .unwrap_or_else(|| panic!("{host} is not in docker/lab/stacks.json"))
}

/// The corpus templates (relative to its `http/`) the fixture's findings
/// are found with.
pub fn stack_templates() -> Vec<&'static str> {
    FIXTURE.templates.iter().map(String::as_str).collect()
}

/// Requests answered, per host and per (host, second since the epoch).
#[derive(Default)]
struct Counts {
    by_host: HashMap<String, u64>,
    by_second: HashMap<(String, u64), u64>,
}

pub struct StackLab {
    pub port: u16,
    counts: Arc<Mutex<Counts>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StackLab {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StackLab {
    pub async fn start() -> StackLab {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("stack lab bind");
        let port = listener.local_addr().expect("stack lab addr").port();
        let counts = Arc::new(Mutex::new(Counts::default()));
        let shared = counts.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let counts = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, counts).await;
                });
            }
        });
        StackLab { port, counts, task }
    }

    /// Requests `host` received so far.
    pub fn requests(&self, host: &str) -> u64 {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.by_host.get(host).copied().unwrap_or(0)
    }

    /// The most requests `host` received within one wall-clock second.
    pub fn max_per_second(&self, host: &str) -> u64 {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.by_second
            .iter()
            .filter(|((h, _), _)| h == host)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0)
    }

    /// The whole seconds from `host`'s first request to its last, both
    /// counted.
    pub fn seconds_spanned(&self, host: &str) -> u64 {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let seconds = c
            .by_second
            .keys()
            .filter(|(h, _)| h == host)
            .map(|(_, s)| *s);
        match (seconds.clone().min(), seconds.max()) {
            (Some(first), Some(last)) => last - first + 1,
            _ => 0,
        }
    }

    /// Node (or CLI) settings that send every name in `hosts` to the lab:
    /// the hosts map, HTTP to the lab's port, HTTPS to a closed port.
    pub fn node_env(&self, hosts: &[&str]) -> Vec<(String, String)> {
        crate::lab::node_env_for(self.port, hosts)
    }
}

/// The answer of `host` (as `blank.stack.test` when the fixture does not
/// hold it) to `path`: the answer and the host's own headers.
fn route<'a>(
    host: &str,
    path: &str,
    authorization: Option<&str>,
) -> (&'a Answer, &'a [(String, String)]) {
    let fixture: &'a Fixture = &FIXTURE;
    let path = path.split(['?', '#']).next().unwrap_or("/");
    // Repeated slashes merged, as nginx and most servers do
    // (`{{BaseURL}}/.env` on a base ending in `/`).
    let mut merged = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && merged.ends_with('/')) {
            merged.push(c);
        }
    }
    let stack = fixture
        .hosts
        .iter()
        .find(|h| h.host == host)
        .unwrap_or_else(|| stack_host(BLANK));
    let answer = stack
        .routes
        .iter()
        .find(|r| r.answers(&merged, authorization))
        .map_or(&fixture.not_found, |r| &r.answer);
    (answer, &stack.headers)
}

/// The whole response (head and body) to one request.
fn respond(method: &str, host: &str, path: &str, authorization: Option<&str>) -> String {
    let (answer, host_headers) = route(host, path, authorization);
    let body = if method == "HEAD" { "" } else { &answer.body };
    let reason = reqwest::StatusCode::from_u16(answer.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    let mut response = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        answer.status,
        answer.content_type,
        body.len()
    );
    for (k, v) in FIXTURE
        .headers
        .iter()
        .chain(&answer.headers)
        .chain(host_headers)
    {
        response.push_str(&format!("{k}: {v}\r\n"));
    }
    response.push_str("\r\n");
    response.push_str(body);
    response
}

async fn serve(mut stream: TcpStream, counts: Arc<Mutex<Counts>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some(request) =
            next_request(&mut stream, &mut buf, Some(Duration::from_secs(30))).await?
        else {
            return Ok(());
        };
        let (method, path) = (request.method.as_str(), request.path.as_str());
        let host = request
            .host()
            .split(':')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        {
            let second = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
            *c.by_host.entry(host.clone()).or_insert(0) += 1;
            *c.by_second.entry((host.clone(), second)).or_insert(0) += 1;
        }
        let response = respond(method, &host, path, request.header("authorization"));
        stream.write_all(response.as_bytes()).await?;
    }
}

/// The public corpus's `http/` directory (test data beside the checkout),
/// if present.
pub fn corpus_dir() -> Option<std::path::PathBuf> {
    let candidates = [
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/corpus/nuclei-templates/http"),
        std::path::PathBuf::from("/work/shared/corpus/nuclei-templates/http"),
    ];
    candidates.into_iter().find(|p| p.is_dir())
}

/// A template directory holding only `parts` of the corpus (directories or
/// files, relative to its `http/`), linked into a fresh `.../http/` so
/// that their paths keep the corpus's layout; None without the corpus.
pub fn corpus_subset(parts: &[&str]) -> Option<std::path::PathBuf> {
    let corpus = corpus_dir()?;
    let root = std::env::temp_dir()
        .join(format!(
            "scanfleet-subset-{}",
            uuid::Uuid::new_v4().simple()
        ))
        .join("http");
    for part in parts {
        let to = root.join(part);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).expect("subset dir");
        }
        std::os::unix::fs::symlink(corpus.join(part), &to).expect("subset link");
    }
    Some(root)
}

/// Requests that reach every route of `host` (each of its paths, or one
/// that its pattern matches, with the authorization it needs), plus one
/// that no route answers, each as `(path, authorization)`: for comparing
/// two servers of the fixture.
pub fn route_requests(host: &str) -> Vec<(String, Option<String>)> {
    let mut requests = vec![("/no-such-page".to_string(), None)];
    for route in &stack_host(host).routes {
        let mut paths = route.paths.clone();
        if route.prefix.is_some() || route.contains.is_some() || route.suffix.is_some() {
            paths.push(format!(
                "{}{}{}",
                route.prefix.as_deref().unwrap_or(""),
                route.contains.as_deref().unwrap_or("").repeat(8),
                route.suffix.as_deref().unwrap_or("")
            ));
        }
        for path in paths {
            requests.push((path.clone(), route.authorization.clone()));
            requests.push((format!("/{path}?q=1"), None));
        }
    }
    requests
}
