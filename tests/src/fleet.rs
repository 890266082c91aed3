//! Real processes for pipeline and failure tests: the `scanfleet-api`,
//! `scanfleet-scanner worker` and `scanfleet-scheduler` binaries started
//! from the test against a fresh database and Redis prefix, plus typed
//! helpers for the calls these tests make.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::{database_url, JWT_SECRET, PASSWORD};

/// Path of a workspace binary, built once per test process when missing or
/// stale (`cargo build --bins` is a no-op when nothing changed). Debug
/// builds, or release ones with `SCANFLEET_TEST_PROFILE=release` (benches).
pub fn binary(name: &str) -> PathBuf {
    let release = std::env::var("SCANFLEET_TEST_PROFILE").is_ok_and(|p| p == "release");
    static BUILT: OnceLock<Mutex<bool>> = OnceLock::new();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let mut built = BUILT.get_or_init(|| Mutex::new(false)).lock().unwrap();
    if !*built {
        let mut args = vec!["build", "--quiet", "--bins"];
        if release {
            args.push("--release");
        }
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        // What cargo set for this test's own crate (`CARGO_MANIFEST_DIR`,
        // `CARGO_PKG_NAME`, `OUT_DIR`...) must not reach the nested build:
        // build scripts that watch those names (ring's does) would run
        // again, and every crate above them would be rebuilt here and then
        // once more by the next top-level `cargo build`.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name == "OUT_DIR"
                || name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_BIN_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_MANIFEST_LINKS",
                    "CARGO_CRATE_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "CARGO_RUSTC_CURRENT_DIR",
                ]
                .contains(&name.as_ref())
            {
                cargo.env_remove(name.as_ref());
            }
        }
        let status = cargo
            .args(&args)
            .current_dir(&root)
            .status()
            .expect("running cargo build --bins");
        assert!(status.success(), "cargo build --bins failed");
        *built = true;
    }
    target
        .join(if release { "release" } else { "debug" })
        .join(name)
}

/// A running process, killed when dropped.
pub struct Proc {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// `kill -9`.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait up to `within` for it to exit.
    pub fn terminate(&mut self, within: Duration) -> bool {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Whether the process has exited (and with success).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(status)) if status.success())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One deployment: a database, a Redis prefix, shared settings.
pub struct Fleet {
    pub db_name: String,
    pub prefix: String,
    pub env: HashMap<String, String>,
    pub api_port: u16,
    pub http: reqwest::Client,
    logs: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Fleet {
    /// A fresh database and prefix; `extra` settings go to every process.
    pub async fn new(extra: &[(String, String)]) -> Fleet {
        let id = Uuid::new_v4().simple().to_string();
        let db_name = format!("scanfleet_fleet_{id}");
        let prefix = format!("fleet-{id}");
        let admin = database_url("postgres");
        let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
            .await
            .expect("Postgres for tests");
        tokio::spawn(conn);
        client
            .batch_execute(&format!("CREATE DATABASE \"{db_name}\""))
            .await
            .expect("creating the fleet database");
        let api_port = free_port();
        let mut env: HashMap<String, String> = HashMap::new();
        for (k, v) in [
            ("DATABASE_URL", database_url(&db_name)),
            (
                "REDIS_URL",
                std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
            ),
            ("SCANFLEET_REDIS_PREFIX", prefix.clone()),
            ("SCANFLEET_API__BIND", format!("127.0.0.1:{api_port}")),
            ("SCANFLEET_JWT_SECRET", JWT_SECRET.into()),
            ("SCANFLEET_RATE__ENABLED", "false".into()),
            ("SCANFLEET_SCANNER__HEARTBEAT_SECS", "1".into()),
            ("SCANFLEET_SCANNER__ORPHAN_AFTER_SECS", "3".into()),
            ("RUST_LOG", "info".into()),
        ] {
            env.insert(k.into(), v);
        }
        for (k, v) in extra {
            env.insert(k.clone(), v.clone());
        }
        let logs = std::env::temp_dir().join(format!("scanfleet-{prefix}"));
        std::fs::create_dir_all(&logs).expect("log dir");
        Fleet {
            db_name,
            prefix,
            env,
            api_port,
            http: reqwest::Client::new(),
            logs,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }

    fn spawn(&self, name: &str, bin: &str, args: &[&str], extra: &[(&str, &str)]) -> Proc {
        let log = self.logs.join(format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let mut cmd = Command::new(binary(bin));
        cmd.args(args)
            .envs(&self.env)
            .env("HOSTNAME", name)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        Proc {
            name: name.to_string(),
            child: cmd
                .spawn()
                .unwrap_or_else(|e| panic!("starting {bin}: {e}")),
            log,
        }
    }

    /// Starts the api and waits until it is ready.
    pub async fn api(&self, extra: &[(&str, &str)]) -> Proc {
        let p = self.spawn("api", "scanfleet-api", &[], extra);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = self
                .http
                .get(format!("{}/readyz", self.base()))
                .send()
                .await
            {
                if r.status() == 200 {
                    return p;
                }
            }
            assert!(
                Instant::now() < deadline,
                "api not ready:\n{}",
                p.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Starts a scanner node named `name` (its node id starts with it).
    pub fn node(&self, name: &str, extra: &[(&str, &str)]) -> Proc {
        self.spawn(name, "scanfleet-scanner", &["worker"], extra)
    }

    pub fn scheduler(&self, extra: &[(&str, &str)]) -> Proc {
        self.spawn("scheduler", "scanfleet-scheduler", &[], extra)
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}/api/v1{path}", self.base()))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, token, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// The notifications about `scan` (of the user's latest 500).
    pub async fn scan_notifications(&self, token: &str, scan: &str) -> Vec<Value> {
        let notes = self.get("/notifications?limit=500", token).await;
        notes
            .as_array()
            .expect("a list")
            .iter()
            .filter(|n| n["scan_id"] == scan)
            .cloned()
            .collect()
    }

    /// Registers and logs in a user on the admin tier (no scan limits); the
    /// access token.
    pub async fn user(&self) -> String {
        let email = format!("u{}@example.com", Uuid::new_v4().simple());
        let base = self.base();
        let r = self
            .http
            .post(format!("{base}/api/v1/auth/register"))
            .json(&json!({"email": email, "password": PASSWORD, "full_name": "Fleet"}))
            .send()
            .await
            .expect("register");
        assert_eq!(r.status(), 201);
        let db = self.db().await;
        db.execute(
            "UPDATE users SET tier_slug = 'admin' WHERE email = $1",
            &[&email],
        )
        .await
        .expect("tier");
        let r: Value = self
            .http
            .post(format!("{base}/api/v1/auth/login"))
            .json(&json!({"email": email, "password": PASSWORD}))
            .send()
            .await
            .expect("login")
            .json()
            .await
            .expect("login body");
        r["access_token"].as_str().expect("token").to_string()
    }

    pub async fn target(&self, token: &str, domain: &str) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/targets",
                token,
                Some(json!({"domain": domain})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().expect("target id").to_string()
    }

    /// Starts a scan. A 503 (Redis could not take the job just then, as
    /// while a cluster moves slots: the scan was failed, "start it again")
    /// is answered as a client would, by starting it again, for up to 20 s.
    pub async fn scan(&self, token: &str, target: &str, engine: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, body) = self
                .call(
                    reqwest::Method::POST,
                    "/scans",
                    token,
                    Some(json!({"target_id": target, "engine": engine})),
                )
                .await;
            if status == 503 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            assert!(status == 201 || status == 202, "{status} {body}");
            return body["id"].as_str().expect("scan id").to_string();
        }
    }

    /// Polls the scan until `done(scan)` holds; panics after `within`.
    pub async fn wait_scan(
        &self,
        token: &str,
        scan: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let (status, body) = self
                .call(reqwest::Method::GET, &format!("/scans/{scan}"), token, None)
                .await;
            if status == 200 && done(&body) {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "scan {scan} did not get there in {within:?}; last: {status} {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn wait_finished(&self, token: &str, scan: &str, within: Duration) -> Value {
        self.wait_scan(token, scan, within, |s| {
            matches!(
                s["status"].as_str(),
                Some("completed" | "failed" | "stopped")
            )
        })
        .await
    }

    /// The scan's findings as sorted `template_id matched_at` lines.
    pub fn finding_keys(scan: &Value) -> Vec<String> {
        let mut keys: Vec<String> = scan["vulnerabilities"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                format!(
                    "{} {}",
                    f["template_id"].as_str().unwrap_or(""),
                    f["matched_at"].as_str().unwrap_or("")
                )
            })
            .collect();
        keys.sort();
        keys
    }

    /// A WebSocket following `scan` on the api, connected.
    pub async fn websocket(
        &self,
        token: &str,
        scan: &str,
    ) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>
    {
        let url = format!(
            "ws://127.0.0.1:{}/api/v1/ws/scans/{scan}?token={token}",
            self.api_port
        );
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("ws connect");
        ws
    }

    pub async fn db(&self) -> tokio_postgres::Client {
        let (client, conn) =
            tokio_postgres::connect(&database_url(&self.db_name), tokio_postgres::NoTls)
                .await
                .expect("fleet database");
        tokio::spawn(conn);
        client
    }

    /// A client of the fleet's Redis, as the processes reach it (a single
    /// server, Sentinel's master or a cluster).
    pub async fn redis(&self) -> fred::clients::Client {
        let settings = scanfleet_common::Settings::from_vars(&self.env).expect("fleet settings");
        let target =
            scanfleet_bus::RedisTarget::from_settings(&settings.redis).expect("redis settings");
        scanfleet_bus::connect(&target, "test")
            .await
            .expect("redis")
    }

    /// The fleet's key names.
    pub fn keys(&self) -> scanfleet_common::keys::Keys {
        scanfleet_common::keys::Keys::new(self.prefix.clone())
    }

    /// How many times a node took up `scan` (the node's own count).
    /// Read again for up to 10 s while Redis does not answer (a cluster
    /// still settling after a reshard).
    pub async fn attempts(&self, scan: &str) -> Option<i64> {
        use fred::interfaces::KeysInterface;
        let key = self.keys().scan_attempts(scan.parse().ok()?);
        let redis = self.redis().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match redis.get(&key).await {
                Ok(n) => return n,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("reading the attempts again: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("attempts: {e:?}"),
            }
        }
    }

    /// Waits until `scan` is in VALIDATE on some node, and returns that node.
    pub async fn running_on(&self, token: &str, scan: &str) -> String {
        self.wait_scan(token, scan, Duration::from_secs(60), |s| {
            s["stage"] == "VALIDATE"
        })
        .await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(node) = self.running_node(scan).await {
                return node;
            }
            assert!(Instant::now() < deadline, "no node holds {scan}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The node currently holding the job of `scan` in the queue.
    pub async fn running_node(&self, scan: &str) -> Option<String> {
        let queue = scanfleet_bus::ScanQueue::new(self.redis().await, &self.keys());
        queue.holder(scan.parse().ok()?).await.ok().flatten()
    }
}

/// A fleet whose nodes send `hosts` to `lab`, with `extra` settings.
pub async fn fleet_with_lab(
    lab: &crate::lab::Lab,
    hosts: &[&str],
    extra: &[(&str, &str)],
) -> Fleet {
    let mut env = lab.node_env(hosts);
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Fleet::new(&env).await
}

impl Drop for Fleet {
    fn drop(&mut self) {
        crate::drop_database(&database_url("postgres"), &self.db_name);
    }
}

/// A TCP proxy in front of Postgres that the test can cut: while down it
/// closes every connection and refuses new ones, as an unreachable server
/// would look to the api.
pub struct PgProxy {
    pub port: u16,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bumped on every cut; connections of an older generation close.
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl PgProxy {
    pub async fn start(upstream: std::net::SocketAddr) -> PgProxy {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy bind");
        let port = listener.local_addr().expect("proxy addr").port();
        let down = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let (d, g) = (down.clone(), generation.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    continue;
                };
                if d.load(Ordering::SeqCst) {
                    continue; // dropped: refused
                }
                let born = g.load(Ordering::SeqCst);
                let g = g.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let copy = tokio::io::copy_bidirectional(&mut client, &mut server);
                    let cut = async {
                        while g.load(Ordering::SeqCst) == born {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    };
                    tokio::select! {
                        _ = copy => {}
                        _ = cut => {}
                    }
                });
            }
        });
        PgProxy {
            port,
            down,
            generation,
            task,
        }
    }

    pub fn set_down(&self, down: bool) {
        use std::sync::atomic::Ordering;
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The Postgres server tests use (from `DATABASE_URL`), as an address.
    pub fn upstream() -> std::net::SocketAddr {
        let url = database_url("postgres");
        let after_scheme = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let authority = after_scheme.split('/').next().unwrap_or("");
        let host_port = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
        let host = if host.is_empty() || host == "localhost" {
            "127.0.0.1"
        } else {
            host
        };
        format!("{host}:{port}")
            .parse()
            .expect("Postgres address of DATABASE_URL")
    }

    /// `DATABASE_URL` of `db` through the proxy.
    pub fn url(&self, db: &str) -> String {
        let direct = database_url(db);
        let (scheme, rest) = direct.split_once("://").expect("database url scheme");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = authority
            .rsplit_once('@')
            .map(|(u, _)| format!("{u}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
