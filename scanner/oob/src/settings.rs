//! The OOB server's own settings: command-line flags, each also read from
//! a `SCANFLEET_OOB__*` environment variable (flags win), plus the shared
//! `REDIS_URL` and `SCANFLEET_REDIS_PREFIX`.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::Parser;
use scanfleet_common::secret::Secret;
use scanfleet_common::settings::{host_port, RedisSettings};

/// Everything `scanfleet-oob` is told at start-up.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "scanfleet-oob",
    version,
    about = "scanfleet's out-of-band interaction server (interactsh-compatible)",
    long_about = "Records DNS, HTTP(S), SMTP and LDAP interactions with payload hosts under \
                  --domain and serves them to interactsh clients (the scanfleet engine, nuclei \
                  -iserver) through /register, /poll and /deregister on the HTTP listener. \
                  State lives in Redis, so several instances can serve one domain."
)]
pub struct Settings {
    /// The zone this server is authoritative for (payload hosts are
    /// `<id><nonce>.<domain>`).
    #[arg(long, env = "SCANFLEET_OOB__DOMAIN", value_parser = parse_domain)]
    pub domain: String,
    /// The public address(es) DNS answers give for the domain and every
    /// name under it (IPv4 for A, IPv6 for AAAA); comma-separated in the
    /// environment.
    #[arg(
        long,
        env = "SCANFLEET_OOB__IP",
        value_delimiter = ',',
        required = true
    )]
    pub ip: Vec<IpAddr>,
    /// HTTP listener: callbacks and the register/poll/deregister API.
    #[arg(long, env = "SCANFLEET_OOB__HTTP", default_value = "0.0.0.0:80")]
    pub http: SocketAddr,
    /// DNS listener, UDP and TCP on the same port.
    #[arg(long, env = "SCANFLEET_OOB__DNS", default_value = "0.0.0.0:53")]
    pub dns: SocketAddr,
    /// HTTPS listener (needs --cert and --key); off when not given.
    #[arg(long, env = "SCANFLEET_OOB__HTTPS", requires_all = ["cert", "key"])]
    pub https: Option<SocketAddr>,
    /// PEM certificate chain for HTTPS.
    #[arg(long, env = "SCANFLEET_OOB__CERT")]
    pub cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    #[arg(long, env = "SCANFLEET_OOB__KEY")]
    pub key: Option<PathBuf>,
    /// SMTP listener; off when not given.
    #[arg(long, env = "SCANFLEET_OOB__SMTP")]
    pub smtp: Option<SocketAddr>,
    /// LDAP listener; off when not given.
    #[arg(long, env = "SCANFLEET_OOB__LDAP")]
    pub ldap: Option<SocketAddr>,
    /// When set, register/poll/deregister need this exact `Authorization`
    /// header (interactsh's token semantics).
    #[arg(long, env = "SCANFLEET_OOB__TOKEN", hide_env_values = true, value_parser = parse_secret)]
    pub token: Option<Secret>,
    /// Seconds a registration and its pending interactions live without a
    /// register, callback or poll (sliding).
    #[arg(long, env = "SCANFLEET_OOB__EVICTION_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub eviction_secs: u64,
    /// Prometheus text at `/metrics` on this address; off when not given.
    #[arg(long, env = "SCANFLEET_OOB__METRICS")]
    pub metrics: Option<SocketAddr>,
    /// The Redis holding registrations and interactions.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379",
          hide_env_values = true, value_parser = parse_secret)]
    pub redis_url: Secret,
    /// Seed nodes (`host:port`, comma-separated in the environment) of a
    /// Redis Cluster; when given they win over the URL's server, whose
    /// credentials still count.
    #[arg(
        long,
        env = "SCANFLEET_REDIS__CLUSTER_NODES",
        value_delimiter = ',',
        value_parser = parse_host_port
    )]
    pub redis_cluster_nodes: Vec<(String, u16)>,
    /// Sentinels (`host:port`, comma-separated in the environment) asked
    /// for the master on every (re)connect, so the server follows a
    /// promoted replica; the URL then gives the password and database.
    #[arg(
        long,
        env = "REDIS_SENTINELS",
        value_delimiter = ',',
        value_parser = parse_sentinel
    )]
    pub redis_sentinels: Vec<(String, u16)>,
    /// The master's name among the sentinels.
    #[arg(long, env = "REDIS_SENTINEL_MASTER", default_value = "mymaster")]
    pub redis_sentinel_master: String,
    /// Prefix of every Redis key (`{prefix}:oob:...`); no braces.
    #[arg(long, env = "SCANFLEET_REDIS_PREFIX", default_value = "scanfleet",
          value_parser = parse_prefix)]
    pub redis_prefix: String,
}

impl Settings {
    /// Settings for `domain` with every listener on an ephemeral loopback
    /// port and the optional ones off: what tests and benches start from.
    pub fn local(domain: &str, redis_url: &str, redis_prefix: &str) -> Settings {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        Settings {
            domain: normalise_domain(domain),
            ip: vec![IpAddr::from([127, 0, 0, 1])],
            http: any_port,
            dns: any_port,
            https: None,
            cert: None,
            key: None,
            smtp: None,
            ldap: None,
            token: None,
            eviction_secs: 3600,
            metrics: None,
            redis_url: Secret::new(redis_url),
            redis_cluster_nodes: Vec::new(),
            redis_sentinels: Vec::new(),
            redis_sentinel_master: "mymaster".to_string(),
            redis_prefix: redis_prefix.to_string(),
        }
    }

    /// The Redis settings as the other processes hold them, so the server
    /// connects as they do (`scanfleet_bus::connect`).
    pub fn redis(&self) -> RedisSettings {
        RedisSettings {
            url: self.redis_url.clone(),
            sentinels: self.redis_sentinels.clone(),
            sentinel_master: self.redis_sentinel_master.clone(),
            cluster_nodes: self.redis_cluster_nodes.clone(),
            prefix: self.redis_prefix.clone(),
        }
    }
}

fn normalise_domain(raw: &str) -> String {
    raw.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// A `--domain` that is not a plain ASCII host name.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a domain name (ASCII letters, digits and hyphens, dots between)")]
pub struct InvalidDomain(String);

fn parse_domain(raw: &str) -> Result<String, InvalidDomain> {
    let domain = normalise_domain(raw);
    let valid = !domain.is_empty()
        && domain.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if valid {
        Ok(domain)
    } else {
        Err(InvalidDomain(raw.to_string()))
    }
}

fn parse_secret(raw: &str) -> Result<Secret, Infallible> {
    Ok(Secret::new(raw))
}

/// A cluster seed that is not `host:port`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not host:port")]
pub struct InvalidHostPort(String);

/// `host:port`, the port 6379 when left out (as the other processes read
/// `SCANFLEET_REDIS__CLUSTER_NODES`).
fn parse_host_port(raw: &str) -> Result<(String, u16), InvalidHostPort> {
    host_port(raw, 6379).ok_or_else(|| InvalidHostPort(raw.to_string()))
}

/// A sentinel's `host:port` (port 26379 when left out).
fn parse_sentinel(raw: &str) -> Result<(String, u16), InvalidHostPort> {
    host_port(raw, 26379).ok_or_else(|| InvalidHostPort(raw.to_string()))
}

fn parse_prefix(raw: &str) -> Result<String, scanfleet_common::settings::SettingsError> {
    scanfleet_common::settings::redis_prefix(raw.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_defaults_and_the_domain_is_normalised() {
        let s = Settings::try_parse_from([
            "scanfleet-oob",
            "--domain",
            "OOB.Example.com.",
            "--ip",
            "192.0.2.1",
        ])
        .unwrap();
        assert_eq!(s.domain, "oob.example.com");
        assert_eq!(s.eviction_secs, 3600);
        assert!(s.https.is_none() && s.smtp.is_none() && s.token.is_none());
        assert!(s.redis_cluster_nodes.is_empty());
    }

    #[test]
    fn cluster_seeds_are_host_port_pairs() {
        let s = Settings::try_parse_from([
            "scanfleet-oob",
            "--domain",
            "a.b",
            "--ip",
            "192.0.2.1",
            "--redis-cluster-nodes",
            "10.0.0.1:7000,[::1]:7001,redis-c",
        ])
        .unwrap();
        assert_eq!(
            s.redis_cluster_nodes,
            vec![
                ("10.0.0.1".to_string(), 7000),
                ("::1".to_string(), 7001),
                ("redis-c".to_string(), 6379)
            ]
        );
        let bad = [
            "scanfleet-oob",
            "--domain",
            "a.b",
            "--ip",
            "192.0.2.1",
            "--redis-cluster-nodes",
            "10.0.0.1:port",
        ];
        assert!(Settings::try_parse_from(bad).is_err());
    }

    #[test]
    fn sentinels_default_to_port_26379_and_reach_the_redis_settings() {
        let s = Settings::try_parse_from([
            "scanfleet-oob",
            "--domain",
            "a.b",
            "--ip",
            "192.0.2.1",
            "--redis-sentinels",
            "s1,s2:26380",
            "--redis-sentinel-master",
            "queue",
        ])
        .unwrap();
        let redis = s.redis();
        assert_eq!(
            redis.sentinels,
            vec![("s1".to_string(), 26379), ("s2".to_string(), 26380)]
        );
        assert_eq!(redis.sentinel_master, "queue");
        assert_eq!(redis.prefix, "scanfleet");
        let default = Settings::local("a.b", "redis://127.0.0.1:6379", "p").redis();
        assert!(default.sentinels.is_empty() && default.cluster_nodes.is_empty());
    }

    #[test]
    fn https_without_a_certificate_and_a_bad_domain_are_refused() {
        let https = [
            "scanfleet-oob",
            "--domain",
            "a.b",
            "--ip",
            "192.0.2.1",
            "--https",
            "0.0.0.0:443",
        ];
        assert!(Settings::try_parse_from(https).is_err());
        let bad = ["scanfleet-oob", "--domain", "a b", "--ip", "192.0.2.1"];
        assert!(Settings::try_parse_from(bad).is_err());
    }

    #[test]
    fn debug_output_hides_the_token() {
        let args = [
            "scanfleet-oob",
            "--domain",
            "a.b",
            "--ip",
            "192.0.2.1",
            "--token",
            "hunter2",
        ];
        let s = Settings::try_parse_from(args).unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
