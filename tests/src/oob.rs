//! Our out-of-band server, `scanfleet-oob`, started from its binary on
//! loopback ports with a Redis prefix of its own, for the out-of-band
//! tests; and the lab's out-of-band templates (`docker/lab/oob-templates`,
//! which `make run` uses too).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab::OobTarget;

/// The zone the test server answers for.
pub const OOB_DOMAIN: &str = "oob.lab.test";

/// A running `scanfleet-oob`, killed when dropped.
pub struct OobServer {
    pub http: std::net::SocketAddr,
    pub dns: std::net::SocketAddr,
    child: Child,
    log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl OobServer {
    /// Starts the server and waits until its HTTP listener answers.
    pub async fn start() -> OobServer {
        OobServer::start_with(&[]).await
    }

    /// [`start`](Self::start) with `extra` environment variables (a Redis
    /// Cluster's seeds).
    pub async fn start_with(extra: &[(&str, &str)]) -> OobServer {
        let http: std::net::SocketAddr = format!("127.0.0.1:{}", free_port())
            .parse()
            .expect("address");
        let dns: std::net::SocketAddr = format!("127.0.0.1:{}", free_port())
            .parse()
            .expect("address");
        let prefix = format!("oobtest-{}", uuid::Uuid::new_v4().simple());
        let log = std::env::temp_dir().join(format!("scanfleet-{prefix}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(crate::fleet::binary("scanfleet-oob"))
            .args(["--domain", OOB_DOMAIN, "--ip", "127.0.0.1"])
            .args(["--http", &http.to_string(), "--dns", &dns.to_string()])
            .env(
                "REDIS_URL",
                std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
            )
            .env("SCANFLEET_REDIS_PREFIX", &prefix)
            .env("RUST_LOG", "info")
            .envs(extra.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("starting scanfleet-oob");
        let server = OobServer {
            http,
            dns,
            child,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(http).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "scanfleet-oob did not start:\n{}",
                server.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        server
    }

    /// The API base URL scanners are given.
    pub fn url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Where a lab's blind routes call back to.
    pub fn target(&self) -> OobTarget {
        OobTarget {
            http: self.http,
            dns: self.dns,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for `scan` (of the lab with [`oob_templates_dir`]'s
    /// templates, on `node`) to end, and checks it completed with the
    /// blind lookup and SSRF called back through this server, and the
    /// probe; the logs of both when it did not.
    pub async fn assert_scan_found_the_callbacks(
        &self,
        fleet: &crate::fleet::Fleet,
        token: &str,
        scan: &str,
        node: &crate::fleet::Proc,
    ) {
        let scan = fleet
            .wait_finished(token, scan, Duration::from_secs(90))
            .await;
        assert_eq!(scan["status"], "completed", "{scan}");
        let keys = crate::fleet::Fleet::finding_keys(&scan);
        assert_eq!(
            keys.len(),
            3,
            "{keys:?}\n{}\n{}",
            node.log_text(),
            self.log_text()
        );
        assert!(keys[0].ends_with(".oob.lab.test"), "{keys:?}");
    }
}

impl Drop for OobServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lab's out-of-band templates: a blind SSRF (`/fetch?url=`) and a
/// blind name lookup (`/lookup?host=`).
pub fn oob_templates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docker/lab/oob-templates")
}
