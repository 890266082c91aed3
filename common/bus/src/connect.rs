//! Redis clients that outlive the server they talk to: every client of the
//! api, the scheduler, the scanner nodes and the out-of-band server
//! (`scanfleet-oob`) is built here, with a reconnect policy, so a Redis
//! restart or a Sentinel failover costs a pause, never a client that stays
//! broken.
//!
//! - **Reconnects** forever, 50 to 500 ms apart. Commands issued while the
//!   connection is down wait in the client's queue and run once it is back,
//!   up to [`COMMAND_TIMEOUT`]; callers that must not wait (the rate
//!   limiter, a scan push) look at [`ClientLike::is_connected`] first.
//! - **Sentinel**: with `REDIS_SENTINELS` set (or a `redis-sentinel://` or
//!   `redis+sentinel://` URL) the client asks the sentinels for the master
//!   on every (re)connect, so it follows a promoted replica. A `READONLY`
//!   answer (a demoted master still reached) or `LOADING` (a restarted
//!   server reading its data) also reconnects.
//! - **Redis Cluster**: with `SCANFLEET_REDIS__CLUSTER_NODES` set the
//!   client learns the slots from those seeds (and, after a failover, from
//!   the nodes it knew: `ClusterDiscoveryPolicy::UseCache`), sends each
//!   command to the master of its key's slot and follows `MOVED` and `ASK`
//!   while slots move (at most `max_redirections` times a command). The
//!   URL gives the credentials only (a cluster has database 0 alone). Keys
//!   used together share a hash tag (`scanfleet_common::keys`).
//! - **A connection task that ends is started again**: fred ends it for
//!   good when a cluster command fails in its routing (see [`start`]).
//! - **A write that may be repeated is sent again until Redis answers**
//!   ([`until_redis_answers`]): a node's scan events and the end of its
//!   job, and the api's push of a new scan's job (for up to 3 s).
//! - **Metrics**, per client role: `scanfleet_redis_reconnects_total`,
//!   `scanfleet_redis_outage_seconds` (each outage, from the first error to
//!   the reconnect: its `_sum` is the time without Redis) and the gauge
//!   `scanfleet_redis_connected`.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fred::clients::{Client, SubscriberClient};
use fred::interfaces::{ClientLike, EventInterface};
use fred::prelude::{Builder, Config, ReconnectPolicy, Server, ServerConfig};
use fred::types::config::{ClusterDiscoveryPolicy, UnresponsiveConfig};
use scanfleet_common::chain::Chain;
use scanfleet_common::settings::RedisSettings;
use uuid::Uuid;

/// The longest a command waits, queued while Redis is away or in flight.
/// Longer than any blocking read of ours (at most a second).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the deployment's Redis is, parsed once from the settings.
#[derive(Clone)]
pub struct RedisTarget {
    config: Config,
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the password: name the servers only.
        f.debug_struct("RedisTarget")
            .field("server", &self.config.server)
            .finish()
    }
}

/// A Redis setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("REDIS_URL is not a valid Redis URL")]
pub struct BadRedisUrl(#[source] fred::error::Error);

impl RedisTarget {
    /// `REDIS_URL`, or the sentinels of `REDIS_SENTINELS` with the URL's
    /// credentials and database, or the cluster of
    /// `SCANFLEET_REDIS__CLUSTER_NODES` with the URL's credentials.
    pub fn from_settings(settings: &RedisSettings) -> Result<RedisTarget, BadRedisUrl> {
        let url = settings.url.expose();
        // redis-rs spells the sentinel scheme `redis+sentinel`; fred parses
        // `redis-sentinel`.
        let url = match url.strip_prefix("redis+sentinel://") {
            Some(rest) => format!("redis-sentinel://{rest}"),
            None => match url.strip_prefix("rediss+sentinel://") {
                Some(rest) => format!("rediss-sentinel://{rest}"),
                None => url.to_string(),
            },
        };
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        if !matches!(
            scheme,
            "redis" | "rediss" | "redis-sentinel" | "rediss-sentinel"
        ) {
            return Err(BadRedisUrl(fred::error::Error::new(
                fred::error::ErrorKind::Config,
                "expected redis://, rediss:// or redis-sentinel://",
            )));
        }
        let mut config = Config::from_url(&url).map_err(BadRedisUrl)?;
        if !settings.sentinels.is_empty() {
            config.server = ServerConfig::Sentinel {
                hosts: settings
                    .sentinels
                    .iter()
                    .map(|(host, port)| Server::new(host.as_str(), *port))
                    .collect(),
                service_name: settings.sentinel_master.clone(),
            };
        }
        if !settings.cluster_nodes.is_empty() {
            config.server = ServerConfig::Clustered {
                hosts: settings
                    .cluster_nodes
                    .iter()
                    .map(|(host, port)| Server::new(host.as_str(), *port))
                    .collect(),
                // The seeds, then every node the client knew: after the
                // seed it used dies, a replica promoted elsewhere is found.
                policy: ClusterDiscoveryPolicy::UseCache,
            };
            config.database = None;
        }
        Ok(RedisTarget { config })
    }

    /// Whether the clients find the master through sentinels.
    pub fn is_sentinel(&self) -> bool {
        self.config.server.is_sentinel()
    }

    /// Whether the deployment's Redis is a cluster.
    pub fn is_cluster(&self) -> bool {
        self.config.server.is_clustered()
    }

    fn builder(&self) -> Builder {
        let mut builder = Builder::from_config(self.config.clone());
        builder
            .with_connection_config(|c| {
                c.connection_timeout = Duration::from_secs(2);
                c.internal_command_timeout = Duration::from_secs(2);
                // A silent connection (a host gone without closing it) is
                // dropped and reconnected instead of waited on.
                c.unresponsive = UnresponsiveConfig {
                    max_timeout: Some(Duration::from_secs(10)),
                    interval: Duration::from_secs(1),
                };
                // While a cluster moves a slot key by key, one command can
                // meet `MOVED`, then `ASK` (each followed by a new write);
                // with fred's defaults (3 attempts, 5 redirections) a
                // command of the queue once ran out of attempts mid-move
                // ("Max attempts reached") and its node lost its lease.
                // The command timeout still bounds the whole.
                c.max_command_attempts = 10;
                c.max_redirections = 10;
            })
            .with_performance_config(|p| {
                p.default_command_timeout = COMMAND_TIMEOUT;
            })
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 500, 2));
        builder
    }
}

/// A connected client for `role` (a metrics label: `api`, `ingester`, ...).
/// Fails when Redis cannot be reached now; once connected it reconnects by
/// itself for good.
pub async fn connect(
    target: &RedisTarget,
    role: &'static str,
) -> Result<Client, fred::error::Error> {
    let client = target.builder().build()?;
    watch(&client, role);
    start(&client, role).await?;
    Ok(client)
}

/// A connected pub/sub client for `role` that subscribes again to its
/// channels after every reconnect.
pub async fn subscriber(
    target: &RedisTarget,
    role: &'static str,
) -> Result<SubscriberClient, fred::error::Error> {
    let client = target.builder().build_subscriber_client()?;
    watch(&client, role);
    start(&client, role).await?;
    // The task ends with the client.
    drop(client.manage_subscriptions());
    Ok(client)
}

/// How long a client's connection task waits before it is started again
/// the first time; each quick end doubles it, up to [`RESTART_PAUSE_MAX`].
const RESTART_PAUSE: Duration = Duration::from_millis(50);
/// The longest wait before a connection task is started again.
const RESTART_PAUSE_MAX: Duration = Duration::from_secs(2);
/// A task that ran this long before it ended is started again after the
/// first pause: its end is news, not the next of a series.
const RESTART_SETTLED: Duration = Duration::from_secs(10);

/// The wait before a connection task that ran for `ran` is started again,
/// after a wait of `last` before its own start (none for the first task).
fn restart_pause(last: Option<Duration>, ran: Duration) -> Duration {
    match last {
        Some(last) if ran < RESTART_SETTLED => (last * 2).min(RESTART_PAUSE_MAX),
        _ => RESTART_PAUSE,
    }
}

/// Connects `client` (its first connect must succeed) and keeps its
/// connection task running. fred ends that task for good when a command
/// fails in its routing: on a cluster moving slots, an `ASKING` retried
/// past its attempts ("Max attempts reached") disconnects every node and
/// leaves later commands queued until each times out, for as long as the
/// process lives. The task is started again instead, 50 ms later, and up
/// to 2 s later while it keeps ending within seconds; only `quit` ends it.
async fn start<C>(client: &C, role: &'static str) -> Result<(), fred::error::Error>
where
    C: ClientLike + Clone + Send + Sync + 'static,
{
    let mut task = client.init().await?;
    let client = client.clone();
    tokio::spawn(async move {
        let mut began = Instant::now();
        let mut pause = None;
        loop {
            match (&mut task).await {
                Ok(Ok(())) => return,
                Ok(Err(e)) if e.is_canceled() => return,
                Ok(Err(e)) => tracing::warn!(
                    client = role,
                    error = %e,
                    "the Redis client's connection task ended; starting it again"
                ),
                Err(e) => tracing::warn!(
                    client = role,
                    error = %e,
                    "the Redis client's connection task failed; starting it again"
                ),
            }
            let wait = restart_pause(pause, began.elapsed());
            pause = Some(wait);
            tokio::time::sleep(wait).await;
            began = Instant::now();
            task = client.connect();
        }
    });
    Ok(())
}

/// When a client last came back after losing Redis, shared with whoever
/// asks ([`Link`]); `u64::MAX` until it first does.
#[derive(Debug, Clone)]
pub struct Link {
    started: Instant,
    /// Milliseconds after `started` of the last reconnect.
    reconnected_ms: Arc<AtomicU64>,
}

impl Link {
    /// Follows `client`'s reconnects.
    pub fn of(client: &impl EventInterface) -> Link {
        let link = Link {
            started: Instant::now(),
            reconnected_ms: Arc::new(AtomicU64::new(u64::MAX)),
        };
        let mut reconnects = client.reconnect_rx();
        let shared = link.clone();
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            while let Ok(_) | Err(RecvError::Lagged(_)) = reconnects.recv().await {
                let ms = shared.started.elapsed().as_millis() as u64;
                shared.reconnected_ms.store(ms, Ordering::Relaxed);
            }
        });
        link
    }

    /// Whether the client reconnected less than `within` ago.
    pub fn reconnected_within(&self, within: Duration) -> bool {
        match self.reconnected_ms.load(Ordering::Relaxed) {
            u64::MAX => false,
            ms => self.started.elapsed() < Duration::from_millis(ms) + within,
        }
    }
}

/// Counts reconnects and the time without Redis, and logs both ends of an
/// outage once.
fn watch(client: &impl EventInterface, role: &'static str) {
    let mut errors = client.error_rx();
    let mut reconnects = client.reconnect_rx();
    metrics::gauge!("scanfleet_redis_connected", "client" => role).set(0.0);
    tokio::spawn(async move {
        use tokio::sync::broadcast::error::RecvError;
        let mut down_since: Option<Instant> = None;
        let mut connected_once = false;
        loop {
            tokio::select! {
                error = errors.recv() => match error {
                    Ok((e, _)) => {
                        if down_since.is_none() {
                            down_since = Some(Instant::now());
                            metrics::gauge!("scanfleet_redis_connected", "client" => role).set(0.0);
                            tracing::warn!(client = role, error = %e, "lost Redis; reconnecting");
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                },
                server = reconnects.recv() => match server {
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        metrics::gauge!("scanfleet_redis_connected", "client" => role).set(1.0);
                        // The first connect is not a reconnect.
                        if connected_once {
                            metrics::counter!("scanfleet_redis_reconnects_total", "client" => role)
                                .increment(1);
                        }
                        connected_once = true;
                        if let Some(since) = down_since.take() {
                            let down = since.elapsed();
                            metrics::histogram!("scanfleet_redis_outage_seconds", "client" => role)
                                .record(down.as_secs_f64());
                            tracing::info!(
                                client = role,
                                down_ms = down.as_millis() as u64,
                                "Redis is back"
                            );
                        }
                    }
                    Err(RecvError::Closed) => break,
                },
            }
        }
    });
}

/// The longest pause between two tries of a write while Redis is away.
const MAX_RETRY_PAUSE: Duration = Duration::from_secs(2);

/// Runs `write` (a write for scan `scan_id` that may be repeated: each is
/// idempotent or its repeat is harmless) until Redis answers it, or until
/// `within` has passed (then its last error): a restart, a failover or a
/// cluster moving slots is a pause, not a lost write. Logs one line per
/// outage, then one every ten attempts.
pub async fn until_redis_answers<T, F, Fut, E>(
    scan_id: Uuid,
    what: &str,
    within: Option<Duration>,
    mut write: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::error::Error + 'static,
{
    let deadline = within.map(|w| tokio::time::Instant::now() + w);
    let mut pause = Duration::from_millis(100);
    let mut failures = 0u32;
    loop {
        match write().await {
            Ok(answer) => return Ok(answer),
            Err(e) if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) => return Err(e),
            Err(e) => {
                failures += 1;
                if failures % 10 == 1 {
                    tracing::warn!(
                        scan_id = %scan_id,
                        error = %Chain(&e),
                        failures,
                        "{what} failed; retrying until Redis answers"
                    );
                }
                // The last try at the deadline, not a pause past it.
                let wait = deadline.map_or(pause, |d| {
                    pause.min(d.saturating_duration_since(tokio::time::Instant::now()))
                });
                tokio::time::sleep(wait).await;
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scanfleet_common::Settings;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> RedisSettings {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_vars(&vars).expect("settings").redis
    }

    #[test]
    fn a_connection_task_that_keeps_ending_is_started_again_less_often() {
        let quick = Duration::from_millis(5);
        let mut pause = None;
        let mut pauses = vec![];
        for _ in 0..8 {
            let wait = restart_pause(pause, quick);
            pause = Some(wait);
            pauses.push(wait.as_millis());
        }
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
        // A task that ran a while is started again after the first pause.
        assert_eq!(restart_pause(pause, RESTART_SETTLED), RESTART_PAUSE);
    }

    #[test]
    fn sentinels_replace_the_server_of_the_url() {
        let target = RedisTarget::from_settings(&settings(&[
            ("REDIS_URL", "redis://:pw@127.0.0.1:6379/2"),
            ("REDIS_SENTINELS", "127.0.0.1:26379,127.0.0.1:26380"),
            ("REDIS_SENTINEL_MASTER", "main"),
        ]))
        .unwrap();
        assert!(target.is_sentinel());
        assert_eq!(target.config.database, Some(2));
        match &target.config.server {
            ServerConfig::Sentinel {
                hosts,
                service_name,
            } => {
                assert_eq!(service_name, "main");
                assert_eq!(hosts.len(), 2);
                assert_eq!(hosts[1].port, 26380);
            }
            other => panic!("not a sentinel config: {other:?}"),
        }
        assert!(!format!("{target:?}").contains("pw"));
    }

    #[test]
    fn both_spellings_of_the_sentinel_scheme_are_accepted() {
        for scheme in ["redis-sentinel", "redis+sentinel"] {
            let target = RedisTarget::from_settings(&settings(&[(
                "REDIS_URL",
                &format!("{scheme}://127.0.0.1:26379/0?sentinelServiceName=main"),
            )]))
            .unwrap();
            assert!(target.is_sentinel(), "{scheme}");
        }
        let plain = RedisTarget::from_settings(&settings(&[])).unwrap();
        assert!(!plain.is_sentinel());
        assert!(!plain.is_cluster());
        assert!(RedisTarget::from_settings(&settings(&[("REDIS_URL", "http://x")])).is_err());
    }

    #[test]
    fn cluster_nodes_win_over_the_url_and_the_sentinels() {
        let target = RedisTarget::from_settings(&settings(&[
            ("REDIS_URL", "redis://:pw@127.0.0.1:6379/2"),
            ("REDIS_SENTINELS", "127.0.0.1:26379"),
            (
                "SCANFLEET_REDIS__CLUSTER_NODES",
                "10.0.0.1:7000,10.0.0.2:7001",
            ),
        ]))
        .unwrap();
        assert!(target.is_cluster());
        assert!(!target.is_sentinel());
        // A cluster has database 0 only; the password still counts.
        assert_eq!(target.config.database, None);
        assert_eq!(target.config.password.as_deref(), Some("pw"));
        match &target.config.server {
            ServerConfig::Clustered { hosts, policy } => {
                assert_eq!(hosts.len(), 2);
                assert_eq!(hosts[1].port, 7001);
                assert_eq!(*policy, ClusterDiscoveryPolicy::UseCache);
            }
            other => panic!("not a cluster config: {other:?}"),
        }
        assert!(!format!("{target:?}").contains("pw"));
    }

    async fn attempt(fail: bool) -> Result<(), std::io::Error> {
        match fail {
            true => Err(std::io::Error::other("MOVED")),
            false => Ok(()),
        }
    }

    #[tokio::test]
    async fn a_write_is_sent_again_until_it_succeeds_or_its_time_is_up() {
        let id = Uuid::now_v7();
        let mut tries = 0;
        let answered = until_redis_answers(id, "a write", None, || {
            tries += 1;
            attempt(tries < 3)
        })
        .await;
        assert!(answered.is_ok());
        assert_eq!(tries, 3);

        let mut tries = 0;
        let began = tokio::time::Instant::now();
        let within = Duration::from_millis(250);
        let answered = until_redis_answers(id, "a write", Some(within), || {
            tries += 1;
            attempt(true)
        })
        .await;
        assert!(answered.is_err());
        // Tried at once, after its pauses, and once more at the deadline.
        assert!(began.elapsed() >= within, "{:?}", began.elapsed());
        assert!(tries >= 3, "{tries}");
    }
}
