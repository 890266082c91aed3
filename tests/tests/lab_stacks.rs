//! The docker lab serves the stack lab (issue 35): `docker/lab/lab_site.py`,
//! run as a plain process on loopback, answers every route of every host
//! of `docker/lab/stacks.json` byte for byte as the tests' own stack lab
//! ([`StackLab`]) does, by `Host` on its one port; and a name that is not a
//! stack host still gets the static site; and the `auto` engine, run by a
//! scanner node with the fixture's corpus templates, finds on each stack
//! host of `lab_site.py` exactly its known findings. With
//! `SCANFLEET_LAB_SITE` set (`ADDR:PORT`, e.g. a running `scanfleet-lab`
//! container) that server is compared and scanned instead.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scanfleet_tests::fleet::Fleet;
use scanfleet_tests::stacks::{
    corpus_subset, route_requests, stack_host, stack_hosts, stack_templates, StackLab,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `lab_site.py` on a loopback port, killed when dropped; or the server
/// `SCANFLEET_LAB_SITE` names.
struct LabSite {
    addr: String,
    child: Option<Child>,
}

impl Drop for LabSite {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl LabSite {
    /// None when python3 cannot be run here.
    async fn start() -> Option<LabSite> {
        if let Ok(addr) = std::env::var("SCANFLEET_LAB_SITE") {
            return Some(LabSite { addr, child: None });
        }
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docker/lab/lab_site.py");
        let site = std::env::temp_dir().join(format!(
            "scanfleet-lab-site-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&site).expect("site dir");
        std::fs::write(site.join("index.html"), "<h1>Lab shop</h1>\n").expect("index");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let child = match Command::new("python3")
            .arg(&script)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--directory")
            .arg(&site)
            .stdin(Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                println!("python3 cannot be run ({e}); skipping");
                return None;
            }
        };
        let lab = LabSite {
            addr: format!("127.0.0.1:{port}"),
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&lab.addr).await.is_err() {
            assert!(Instant::now() < deadline, "lab_site.py did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(lab)
    }
}

/// One request on a fresh connection; the response's bytes, head and body
/// (read to its `Content-Length`).
async fn exchange(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut got = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            let body = if request.starts_with("HEAD ") {
                0
            } else {
                length
            };
            if got.len() >= end + 4 + body {
                return text.into_owned();
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("an answer within 10 s")
            .expect("read");
        if n == 0 {
            return String::from_utf8_lossy(&got).into_owned();
        }
        got.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docker_labs_site_answers_each_stack_host_as_the_tests_stack_lab() {
    let Some(site) = LabSite::start().await else {
        return;
    };
    let lab = StackLab::start().await;
    let lab_addr = format!("127.0.0.1:{}", lab.port);
    let mut compared = 0;
    for host in stack_hosts() {
        for (path, authorization) in route_requests(host) {
            for method in ["GET", "HEAD", "POST"] {
                let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n");
                if let Some(a) = &authorization {
                    request.push_str(&format!("Authorization: {a}\r\n"));
                }
                if method == "POST" {
                    request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
                    request.push_str("Content-Length: 7\r\n\r\na=b&c=d");
                } else {
                    request.push_str("\r\n");
                }
                let expected = exchange(&lab_addr, &request).await;
                let got = exchange(&site.addr, &request).await;
                assert_eq!(got, expected, "lab_site.py on {request:?}");
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "{compared} requests compared");

    // Keep-alive on a stack host: two requests on one connection.
    let mut stream = TcpStream::connect(&site.addr).await.expect("connect");
    let two = "GET / HTTP/1.1\r\nHost: nginx.stack.test\r\n\r\n\
               GET /.env HTTP/1.1\r\nHost: nginx.stack.test:80\r\nConnection: close\r\n\r\n";
    stream.write_all(two.as_bytes()).await.expect("write");
    let mut both = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut both))
        .await
        .expect("closed within 10 s")
        .expect("read");
    assert_eq!(both.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{both}");
    assert!(both.contains("DB_PASSWORD=lab-password"), "{both}");

    // Any other name: the static site.
    let other = exchange(
        &site.addr,
        "GET / HTTP/1.1\r\nHost: lab.scanfleet.test\r\n\r\n",
    )
    .await;
    assert!(other.contains("<h1>Lab shop</h1>"), "{other}");
    assert!(other.contains("Server: SimpleHTTP"), "{other}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_on_the_docker_labs_site_finds_each_stack_hosts_known_findings() {
    let Some(templates) = corpus_subset(&stack_templates()) else {
        println!("template corpus not found; skipping");
        return;
    };
    let Some(site) = LabSite::start().await else {
        return;
    };
    // Every stack name to the site's address, port 80 to its port; nothing
    // else is reached.
    let (ip, port) = site.addr.rsplit_once(':').expect("ADDR:PORT");
    let hosts = stack_hosts();
    let env: Vec<(String, String)> = vec![
        (
            "SCANFLEET_SCANNER__HOSTS".into(),
            hosts
                .iter()
                .map(|h| format!("{h}={ip}"))
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("SCANFLEET_SCANNER__HOSTS_ONLY".into(), "true".into()),
        ("SCANFLEET_SCANNER__ALLOW_PRIVATE".into(), "true".into()),
        (
            "SCANFLEET_SCANNER__CONNECT_TO".into(),
            format!(":80:{ip}:{port},:443:127.0.0.1:9"),
        ),
        (
            "SCANFLEET_SCANNER__TEMPLATES_DIR".into(),
            templates.display().to_string(),
        ),
    ];
    let fleet = Fleet::new(&env).await;
    let _api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[("SCANFLEET_SCANNER__CONCURRENCY", "3")]);
    let token = fleet.user().await;
    let mut scans = Vec::new();
    for host in &hosts {
        let target = fleet.target(&token, host).await;
        scans.push((*host, fleet.scan(&token, &target, "auto").await));
    }
    for (host, scan) in scans {
        let detail = fleet
            .wait_finished(&token, &scan, Duration::from_secs(300))
            .await;
        assert_eq!(detail["status"], "completed", "{host}: {detail}");
        let found: Vec<String> = Fleet::finding_keys(&detail)
            .into_iter()
            .filter(|k| !k.starts_with("http-probe "))
            .collect();
        assert_eq!(
            found,
            stack_host(host).findings,
            "{host}: auto on lab_site.py ({})",
            site.addr
        );
    }
}
