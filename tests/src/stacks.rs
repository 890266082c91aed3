//! A lab of hosts that present as real products (issue 35), for the
//! `auto` engine's tests and its benchmark: one listener on 127.0.0.1
//! answering by `Host`, each host with only the responses the public
//! corpus's own detection and vulnerability templates look for (no product
//! code). Every other path is a 404.
//!
//! - `wordpress.stack.test`: WordPress 5.8.1 (generator tag, `wp-login.php`)
//!   on PHP, with the Better Search Replace plugin at 1.4.4 (its readme;
//!   CVE-2023-6933 reads the version from it).
//! - `jenkins.stack.test`: Jenkins 2.150.1 headers, its sign-in page and an
//!   open script console (`/script`).
//! - `grafana.stack.test`: `/` redirects to a Grafana 8.2.0 login page, and
//!   the plugin path traversal of CVE-2021-43798 answers `/etc/passwd`.
//! - `tomcat.stack.test`: an Apache Tomcat 9.0.30 default page and a
//!   manager (`/manager/html`) that takes `tomcat:tomcat`.
//! - `nginx.stack.test`: nginx 1.18.0's welcome page and a stray `.env`.
//! - `blank.stack.test`: one plain page, nothing to detect.
//!
//! Every answer carries the usual security headers, so the header checks
//! stay silent. The lab counts requests per host and per host and second
//! ([`StackLab::max_per_second`]), for the politeness test.

use crate::http1::next_request;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

pub const WORDPRESS: &str = "wordpress.stack.test";
pub const JENKINS: &str = "jenkins.stack.test";
pub const GRAFANA: &str = "grafana.stack.test";
pub const TOMCAT: &str = "tomcat.stack.test";
pub const NGINX: &str = "nginx.stack.test";
pub const BLANK: &str = "blank.stack.test";

/// Every host of the lab.
pub const STACK_HOSTS: [&str; 6] = [WORDPRESS, JENKINS, GRAFANA, TOMCAT, NGINX, BLANK];

/// The technologies detection must name on each host (a subset of what it
/// may name), each with the evidence it must show (a prefix of one of the
/// evidence strings).
pub fn expected_technologies(host: &str) -> Vec<(&'static str, &'static str)> {
    match host {
        WORDPRESS => vec![
            ("wordpress", "template:wordpress-detect"),
            ("php", "header:x-powered-by: PHP/7.4.3"),
        ],
        JENKINS => vec![("jenkins", "template:jenkins-detect")],
        GRAFANA => vec![("grafana", "template:")],
        TOMCAT => vec![("tomcat", "template:tomcat-detect")],
        NGINX => vec![("nginx", "header:server: nginx/1.18.0")],
        _ => vec![],
    }
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

    /// Node (or CLI) settings that send every name in `hosts` to the lab:
    /// the hosts map, HTTP to the lab's port, HTTPS to a closed port.
    pub fn node_env(&self, hosts: &[&str]) -> Vec<(String, String)> {
        crate::lab::node_env_for(self.port, hosts)
    }
}

/// One answer: status line, extra headers, content type, body.
struct Answer {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    content_type: &'static str,
    body: String,
}

fn page(body: impl Into<String>) -> Answer {
    Answer {
        status: "200 OK",
        headers: Vec::new(),
        content_type: "text/html; charset=utf-8",
        body: body.into(),
    }
}

fn text(body: impl Into<String>) -> Answer {
    Answer {
        status: "200 OK",
        headers: Vec::new(),
        content_type: "text/plain",
        body: body.into(),
    }
}

fn not_found() -> Answer {
    Answer {
        status: "404 Not Found",
        headers: Vec::new(),
        content_type: "text/plain",
        body: "not found".into(),
    }
}

fn with(mut a: Answer, name: &'static str, value: impl Into<String>) -> Answer {
    a.headers.push((name, value.into()));
    a
}

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
grafana:x:472:0::/home/grafana:/sbin/nologin\n";

fn wordpress(path: &str) -> Answer {
    let a = match path {
        "/" => page(
            "<!DOCTYPE html><html lang=\"en-US\"><head><meta charset=\"UTF-8\">\
             <title>Lab Blog &#8211; Just another WordPress site</title>\
             <meta name=\"generator\" content=\"WordPress 5.8.1\" />\
             <link rel=\"stylesheet\" href=\"http://wordpress.stack.test/wp-content/themes/twentytwentyone/style.css?ver=1.4\" />\
             </head><body><a href=\"http://wordpress.stack.test/wp-login.php\">Log in</a>\
             </body></html>",
        ),
        "/wp-login.php" => page(
            "<!DOCTYPE html><html><head><title>Log In &lsaquo; Lab Blog &#8212; WordPress</title></head>\
             <body class=\"login\"><form name=\"loginform\" id=\"loginform\" action=\"http://wordpress.stack.test/wp-login.php\" method=\"post\">\
             <input type=\"text\" name=\"log\" id=\"user_login\"><input type=\"password\" name=\"pwd\" id=\"user_pass\">\
             <input type=\"submit\" name=\"wp-submit\" id=\"wp-submit\" value=\"Log In\"></form></body></html>",
        ),
        "/wp-content/plugins/better-search-replace/readme.txt" => text(
            "=== Better Search Replace ===\nContributors: wpengine, deliciousbrains\n\
             Tags: search replace, update urls, database, search replace database\n\
             Requires at least: 3.0.1\nTested up to: 6.4\nStable tag: 1.4.4\n\
             License: GPLv3 or later\n\nA simple plugin to search and replace data in your database.\n",
        ),
        _ => not_found(),
    };
    with(a, "X-Powered-By", "PHP/7.4.3")
}

fn jenkins(path: &str) -> Answer {
    let a = match path {
        "/" => page(
            "<!DOCTYPE html><html><head><title>Dashboard [Jenkins]</title></head>\
             <body><div id=\"jenkins\">Welcome to Jenkins!</div></body></html>",
        ),
        "/login" => page(
            "<!DOCTYPE html><html><head><title>Sign in [Jenkins]</title></head>\
             <body><form name=\"login\" action=\"j_spring_security_check\" method=\"post\">\
             <input name=\"j_username\"><input name=\"j_password\" type=\"password\"></form></body></html>",
        ),
        "/script" | "/script/" => page(
            "<!DOCTYPE html><html><head><title>Script Console [Jenkins]</title></head><body>\
             <h1>Script Console</h1><p>Type in an arbitrary Groovy script and execute it on the server. \
             Useful for trouble-shooting and diagnostics. Use the 'println' command to see the output \
             (e.g. println(Jenkins.instance.pluginManager.plugins))</p>\
             <textarea name=\"script\"></textarea></body></html>",
        ),
        _ => not_found(),
    };
    let a = with(a, "X-Jenkins", "2.150.1");
    let a = with(a, "X-Hudson", "1.395");
    with(a, "Server", "Jetty(9.4.z-SNAPSHOT)")
}

fn grafana(path: &str) -> Answer {
    if path.starts_with("/public/plugins/alertlist/") && path.contains("../") {
        return if path.ends_with("/etc/passwd") {
            text(PASSWD)
        } else {
            not_found()
        };
    }
    match path {
        "/" => Answer {
            status: "302 Found",
            headers: vec![("Location", "/login".to_string())],
            content_type: "text/html; charset=utf-8",
            body: "<a href=\"/login\">Found</a>.\n".into(),
        },
        "/login" => page(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>Grafana</title><base href=\"/\" /></head><body class=\"theme-dark\">\
             <grafana-app></grafana-app><script nonce=\"\">window.grafanaBootData = {\
             \"settings\":{\"buildInfo\":{\"version\":\"8.2.0\",\"commit\":\"d7f71e9eae\",\
             \"env\":\"production\"},\"appSubUrl\":\"\"},\
             \"navTree\":[{\"text\":\"Help\",\"subTitle\":\"Grafana v8.2.0 (d7f71e9eae)\"}]};\
             </script></body></html>",
        ),
        _ => not_found(),
    }
}

fn tomcat(path: &str, authorization: Option<&str>) -> Answer {
    match path {
        "/" => page(
            "<!DOCTYPE html><html lang=\"en\"><head><title>Apache Tomcat/9.0.30</title></head><body>\
             <h1>Apache Tomcat/9.0.30</h1><p>If you're seeing this, you've successfully installed Tomcat. \
             Congratulations!</p><a href=\"/manager/html\">Manager App</a> \
             <a href=\"/manager/status\">Server Status</a></body></html>",
        ),
        "/manager/html" => {
            // tomcat:tomcat
            if authorization == Some("Basic dG9tY2F0OnRvbWNhdA==") {
                page(
                    "<html><head><title>/manager</title></head><body>\
                     <h1>Tomcat Web Application Manager</h1><p>Apache Tomcat/9.0.30</p>\
                     <a href=\"/manager/html/list\">List Applications</a></body></html>",
                )
            } else {
                Answer {
                    status: "401 Unauthorized",
                    headers: vec![(
                        "WWW-Authenticate",
                        "Basic realm=\"Tomcat Manager Application\"".to_string(),
                    )],
                    content_type: "text/html;charset=utf-8",
                    body: "<html><head><title>401 Unauthorized</title></head><body>\
                           <h1>401 Unauthorized</h1><p>You are not authorized to view this page. \
                           If you have not changed any configuration files, please examine the file \
                           conf/tomcat-users.xml in your installation.</p></body></html>"
                        .into(),
                }
            }
        }
        _ => not_found(),
    }
}

fn nginx(path: &str) -> Answer {
    let a = match path {
        "/" => page(
            "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>\
             <h1>Welcome to nginx!</h1><p>If you see this page, the nginx web server is successfully \
             installed and working. Further configuration is required.</p>\
             <p><em>Thank you for using nginx.</em></p></body></html>",
        ),
        "/.env" => text(
            "APP_ENV=production\nAPP_KEY=base64:3x4mpl3k3yN0tR3alAtAll000000000000000000=\n\
             DB_HOST=127.0.0.1\nDB_PASSWORD=lab-password\nMAIL_PASSWORD=lab-mail\n",
        ),
        _ => not_found(),
    };
    with(a, "Server", "nginx/1.18.0")
}

fn route(host: &str, path: &str, authorization: Option<&str>) -> Answer {
    let path = path.split(['?', '#']).next().unwrap_or("/");
    // Repeated slashes merged, as nginx and most servers do
    // (`{{BaseURL}}/.env` on a base ending in `/`).
    let mut merged = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && merged.ends_with('/')) {
            merged.push(c);
        }
    }
    let path = merged.as_str();
    match host {
        WORDPRESS => wordpress(path),
        JENKINS => jenkins(path),
        GRAFANA => grafana(path),
        TOMCAT => tomcat(path, authorization),
        NGINX => nginx(path),
        _ if path == "/" => page("<!doctype html><html><body><p>ok</p></body></html>"),
        _ => not_found(),
    }
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
        let answer = route(&host, path, request.header("authorization"));
        let body = if method == "HEAD" {
            String::new()
        } else {
            answer.body
        };
        let mut response = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Content-Security-Policy: default-src 'self'\r\n\
             Strict-Transport-Security: max-age=31536000\r\nX-Frame-Options: DENY\r\n\
             X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
             Permissions-Policy: geolocation=()\r\n",
            answer.status,
            answer.content_type,
            body.len()
        );
        for (k, v) in &answer.headers {
            response.push_str(&format!("{k}: {v}\r\n"));
        }
        response.push_str("\r\n");
        response.push_str(&body);
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
