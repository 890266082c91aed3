//! Private Redis servers for the failure tests: a `redis-server` process on a
//! free loopback port with a data directory of its own, which a test kills
//! (`SIGKILL`) and starts again on the same port and data, and a Sentinel
//! set (a master, a replica and three sentinels) whose master a test kills
//! to see the replica promoted.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the server writes to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Append-only file, fsync after every write: a restart loses nothing.
    AofAlways,
    /// Nothing on disk: a restart loses everything.
    None,
}

/// One `redis-server` process, killed when dropped.
pub struct RedisServer {
    pub port: u16,
    dir: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "scanfleet-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).expect("redis data dir");
    dir
}

/// One command over RESP, with its first reply line.
pub fn command(port: u16, args: &[&str]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = vec![0u8; 16 * 1024];
    let mut n = stream.read(&mut reply).ok()?;
    // A bulk string (`INFO`, `CLUSTER NODES`) may come in several reads.
    let text = String::from_utf8_lossy(&reply[..n]).into_owned();
    if let Some((head, _)) = text.strip_prefix('$').and_then(|t| t.split_once("\r\n")) {
        let want = head.len() + 1 + 2 + head.parse::<usize>().unwrap_or(0) + 2;
        reply.resize(want.max(reply.len()), 0);
        while n < want {
            match stream.read(&mut reply[n..]).ok()? {
                0 => break,
                more => n += more,
            }
        }
    }
    Some(String::from_utf8_lossy(&reply[..n]).into_owned())
}

impl RedisServer {
    /// Starts a server that persists as `persistence` says.
    pub fn start(persistence: Persistence) -> RedisServer {
        let args = match persistence {
            Persistence::AofAlways => vec!["--appendonly", "yes", "--appendfsync", "always"],
            Persistence::None => vec!["--appendonly", "no"],
        };
        RedisServer::with_args(&args)
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn with_args(extra: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            port: free_port(),
            dir: temp_dir("redis"),
            args: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        server.spawn();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("redis.log"))
            .expect("redis log");
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.dir.to_str().expect("utf-8 temp dir"),
                "--save",
                "",
                "--daemonize",
                "no",
            ])
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("starting redis-server (is it installed?)");
        self.child = Some(child);
        wait_until_answers(self.port);
    }

    /// `kill -9`: no shutdown, no last write.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until the server on `port` answers `PING` with `PONG` (not
/// `LOADING`).
fn wait_until_answers(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if command(port, &["PING"]).is_some_and(|r| r.starts_with("+PONG")) {
            return;
        }
        assert!(Instant::now() < deadline, "redis on {port} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A master, a replica and three sentinels watching the master as
/// `mymaster` (quorum 2, down after 1 s).
pub struct SentinelSet {
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinel_ports: Vec<u16>,
    sentinels: Vec<Child>,
    dir: PathBuf,
}

pub const SENTINEL_MASTER: &str = "mymaster";

impl SentinelSet {
    pub fn start() -> SentinelSet {
        let master = RedisServer::start(Persistence::AofAlways);
        let master_port = master.port.to_string();
        let replica = RedisServer::with_args(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--replicaof",
            "127.0.0.1",
            &master_port,
        ]);
        let dir = temp_dir("sentinels");
        let mut sentinels = Vec::new();
        let mut sentinel_ports = Vec::new();
        for i in 0..3 {
            let port = free_port();
            let conf = dir.join(format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 5000\n\
                     sentinel parallel-syncs {SENTINEL_MASTER} 1\n",
                    dir = dir.display()
                ),
            )
            .expect("sentinel config");
            let log = std::fs::File::create(dir.join(format!("sentinel-{i}.log"))).expect("log");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("starting redis-server --sentinel");
            wait_until_answers(port);
            sentinels.push(child);
            sentinel_ports.push(port);
        }
        let set = SentinelSet {
            master,
            replica,
            sentinel_ports,
            sentinels,
            dir,
        };
        set.wait_until_ready();
        set
    }

    /// Waits until every sentinel knows the replica and the two other
    /// sentinels, so a failover can be agreed on.
    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self.sentinel_ports.iter().all(|port| {
                command(*port, &["SENTINEL", "MASTER", SENTINEL_MASTER]).is_some_and(|r| {
                    field(&r, "num-other-sentinels") == Some("2")
                        && field(&r, "num-slaves") == Some("1")
                })
            });
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "the sentinels did not meet");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `REDIS_SENTINELS` for the processes.
    pub fn sentinels_setting(&self) -> String {
        self.sentinel_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The master's port as the first sentinel sees it now.
    pub fn master_port(&self) -> Option<u16> {
        let reply = command(
            self.sentinel_ports[0],
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER],
        )?;
        reply.lines().rev().find_map(|l| l.parse().ok())
    }
}

/// The value after `name` in a flat RESP array reply of names and values.
fn field<'a>(reply: &'a str, name: &str) -> Option<&'a str> {
    let lines: Vec<&str> = reply
        .lines()
        .filter(|l| !l.starts_with(['*', '$']))
        .collect();
    lines
        .iter()
        .position(|l| *l == name)
        .and_then(|i| lines.get(i + 1).copied())
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for child in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A local Redis Cluster: three masters and three replicas, each a
/// `redis-server` process with AOF on (`appendfsync everysec`), made with
/// `redis-cli --cluster create --cluster-replicas 1`; a node fails over
/// after one second of silence.
pub struct RedisCluster {
    pub servers: Vec<RedisServer>,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub master: bool,
    /// Slot ranges served (masters only), inclusive.
    pub slots: Vec<(u16, u16)>,
}

/// Whether the server on `port` is a master, or a replica whose link to
/// its master is up (one that never synced cannot be promoted when its
/// master dies).
fn replica_in_sync(port: u16) -> bool {
    command(port, &["INFO", "replication"])
        .is_some_and(|r| r.contains("role:master") || r.contains("master_link_status:up"))
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let servers: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::with_args(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    "--appendonly",
                    "yes",
                ])
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for s in &servers {
            create.arg(format!("127.0.0.1:{}", s.port));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { servers };
        cluster.wait_until_ok(Duration::from_secs(30));
        cluster
    }

    /// `SCANFLEET_REDIS__CLUSTER_NODES`: every node as a seed.
    pub fn nodes_setting(&self) -> String {
        self.servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A port of a server still running.
    fn live_port(&self) -> u16 {
        self.servers
            .iter()
            .find(|s| s.child.is_some())
            .expect("a live node")
            .port
    }

    /// Waits until every live node says `cluster_state:ok` and agrees on
    /// three masters covering every slot.
    pub fn wait_until_ok(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let ok = self.servers.iter().filter(|s| s.child.is_some()).all(|s| {
                command(s.port, &["CLUSTER", "INFO"])
                    .is_some_and(|r| r.contains("cluster_state:ok"))
                    && replica_in_sync(s.port)
            }) && self.covered();
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster is not ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the live masters serve all 16,384 slots, with three
    /// replicas (every node's view agreed after `cluster create`).
    fn covered(&self) -> bool {
        let nodes = self.nodes();
        let slots: u32 = nodes
            .iter()
            .filter(|n| n.master)
            .flat_map(|n| n.slots.iter())
            .map(|(a, b)| u32::from(b - a) + 1)
            .sum();
        slots == 16384 && nodes.iter().filter(|n| !n.master).count() == 3
    }

    /// The nodes as a live node sees them (failed ones left out).
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let reply = command(self.live_port(), &["CLUSTER", "NODES"]).unwrap_or_default();
        reply
            .lines()
            .filter(|l| !l.starts_with('$') && !l.is_empty())
            .filter_map(|line| {
                let parts: Vec<&str> = line.split_whitespace().collect();
                let flags = *parts.get(2)?;
                if flags.contains("fail") {
                    return None;
                }
                let addr = parts.get(1)?.split('@').next()?;
                let port = addr.rsplit_once(':')?.1.parse().ok()?;
                let slots = parts
                    .iter()
                    .skip(8)
                    .filter(|s| !s.starts_with('['))
                    .filter_map(|s| match s.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => s.parse().ok().map(|n| (n, n)),
                    })
                    .collect();
                Some(ClusterNode {
                    id: parts[0].to_string(),
                    port,
                    master: flags.contains("master"),
                    slots,
                })
            })
            .collect()
    }

    /// The slot of `key`.
    pub fn slot(&self, key: &str) -> u16 {
        let reply = command(self.live_port(), &["CLUSTER", "KEYSLOT", key]).expect("KEYSLOT");
        reply
            .trim()
            .trim_start_matches(':')
            .parse()
            .expect("a slot number")
    }

    /// The master serving `slot` now.
    pub fn master_of(&self, slot: u16) -> ClusterNode {
        self.nodes()
            .into_iter()
            .find(|n| n.master && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .expect("a master for the slot")
    }

    /// SIGKILL of the server on `port`.
    pub fn kill9(&mut self, port: u16) {
        if let Some(s) = self.servers.iter_mut().find(|s| s.port == port) {
            s.kill9();
        }
    }

    /// Moves `slots` slots from the master `from` to the master `to`
    /// (`redis-cli --cluster reshard`), keys and all; blocks until done.
    pub fn reshard(&self, from: &str, to: &str, slots: u32) -> std::process::Output {
        Command::new("redis-cli")
            .args([
                "--cluster",
                "reshard",
                &format!("127.0.0.1:{}", self.live_port()),
                "--cluster-from",
                from,
                "--cluster-to",
                to,
                "--cluster-slots",
                &slots.to_string(),
                "--cluster-yes",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster reshard")
    }

    /// Moves one slot from its master to the master `to` by hand, as
    /// `redis-cli --cluster reshard` does, but one key at a time with
    /// `pause` between keys: while the slot is half moved, clients meet
    /// `ASK` (a key already moved), `TRYAGAIN` (a script whose keys are
    /// split) and, once it is done, `MOVED`. Returns how many keys moved.
    pub fn move_slot(&self, slot: u16, to: &ClusterNode, pause: Duration) -> usize {
        let from = self.master_of(slot);
        let slot_arg = slot.to_string();
        let ok = |port: u16, args: &[&str]| {
            let reply = command(port, args).unwrap_or_default();
            assert!(reply.starts_with('+'), "{args:?} on :{port}: {reply}");
        };
        ok(
            to.port,
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from.id],
        );
        ok(
            from.port,
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to.id],
        );
        let to_port = to.port.to_string();
        let mut moved = 0;
        loop {
            let reply = command(from.port, &["CLUSTER", "GETKEYSINSLOT", &slot_arg, "1"])
                .unwrap_or_default();
            // `*1\r\n$<len>\r\n<key>\r\n`, or `*0` when none is left.
            let Some(key) = reply.lines().nth(2).filter(|_| reply.starts_with("*1")) else {
                break;
            };
            let answer = command(
                from.port,
                &[
                    "MIGRATE",
                    "127.0.0.1",
                    &to_port,
                    "",
                    "0",
                    "5000",
                    "KEYS",
                    key,
                ],
            )
            .unwrap_or_default();
            assert!(
                answer.starts_with("+OK") || answer.starts_with("+NOKEY"),
                "{answer}"
            );
            moved += 1;
            std::thread::sleep(pause);
        }
        for node in self.nodes().into_iter().filter(|n| n.master) {
            ok(
                node.port,
                &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to.id],
            );
        }
        moved
    }

    /// `INFO commandstats` summed over the masters: calls by command.
    pub fn command_calls(&self) -> std::collections::BTreeMap<String, u64> {
        let mut calls = std::collections::BTreeMap::new();
        for node in self.nodes().into_iter().filter(|n| n.master) {
            add_command_calls(&mut calls, node.port);
        }
        calls
    }
}

/// Adds the `calls=` of each `cmdstat_*` line of the server on `port`.
pub fn add_command_calls(calls: &mut std::collections::BTreeMap<String, u64>, port: u16) {
    let reply = command(port, &["INFO", "commandstats"]).unwrap_or_default();
    for line in reply.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, stats)) = rest.split_once(':') else {
            continue;
        };
        let n = stats
            .split(',')
            .find_map(|f| f.strip_prefix("calls="))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        *calls.entry(name.to_string()).or_default() += n;
    }
}
