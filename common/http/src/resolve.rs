//! Turning a host and port into addresses the client may connect to.
//!
//! Order: `connect_to` overrides first, then IP literals, the hosts map
//! (exact names, then wildcards), then DNS unless `hosts_only` (the
//! configured DNS server, else the system resolver). Every
//! candidate is checked against the forbidden classes; the connected peer is
//! checked again in the client.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::address::classify;
use super::config::ClientConfig;
use super::dns::WireDns;
use super::error::{DnsFailure, HttpError};

/// How long a DNS answer is reused. Short, so a changed record is seen
/// soon; long enough that a scan does not ask the resolver per request.
const DNS_TTL: Duration = Duration::from_secs(30);
/// Size of the answer table above which expired answers are dropped.
const DNS_PRUNE_ABOVE: usize = 4096;

/// Recent DNS answers by name, and the configured DNS server when there is
/// one. Answers are checked against the address policy on every use, so
/// caching cannot let a forbidden address through.
#[derive(Default)]
pub(crate) struct DnsCache {
    /// Filled after each successful lookup, read before each lookup.
    answers: Mutex<HashMap<String, (Instant, Vec<IpAddr>)>>,
    /// Asks `ClientConfig::dns_server` when set; the system resolver
    /// answers otherwise.
    server: Option<WireDns>,
}

impl DnsCache {
    pub(crate) fn with_server(server: Option<WireDns>) -> DnsCache {
        DnsCache {
            answers: Mutex::default(),
            server,
        }
    }

    fn get(&self, name: &str) -> Option<Vec<IpAddr>> {
        let answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        answers
            .get(name)
            .filter(|(at, _)| at.elapsed() < DNS_TTL)
            .map(|(_, ips)| ips.clone())
    }

    fn put(&self, name: &str, ips: &[IpAddr]) {
        let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        if answers.len() > DNS_PRUNE_ABOVE {
            answers.retain(|_, (at, _)| at.elapsed() < DNS_TTL);
        }
        answers.insert(name.to_string(), (Instant::now(), ips.to_vec()));
    }
}

/// Addresses to try for `host:port`, in order, all allowed by the policy.
pub(crate) async fn resolve(
    cfg: &ClientConfig,
    cache: &DnsCache,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, HttpError> {
    let (name, port) = match cfg.connect_to.iter().find(|o| o.matches(host, port)) {
        Some(o) => (
            o.addr.as_deref().unwrap_or(host),
            o.addr_port.unwrap_or(port),
        ),
        None => (host, port),
    };
    lookup(cfg, cache, host, name, port).await
}

/// The addresses of `name` itself (no connect-to override): IP literal,
/// hosts map, then DNS; each checked against the address policy as `host`.
pub(crate) async fn lookup(
    cfg: &ClientConfig,
    cache: &DnsCache,
    host: &str,
    name: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, HttpError> {
    let ips: Vec<IpAddr> = if let Ok(ip) = name.parse::<IpAddr>() {
        vec![ip]
    } else if let Some(ip) = cfg.hosts.lookup(name) {
        vec![ip]
    } else if cfg.hosts_only {
        return Err(HttpError::Dns {
            host: name.to_string(),
            cause: DnsFailure::NotInHostsMap,
        });
    } else if let Some(ips) = cache.get(name) {
        ips
    } else {
        let found: Vec<IpAddr> = match &cache.server {
            Some(server) => server.ips(name).await?,
            None => tokio::net::lookup_host((name, port))
                .await
                .map_err(|e| HttpError::Dns {
                    host: name.to_string(),
                    cause: DnsFailure::System(e),
                })?
                .map(|a| a.ip())
                .collect(),
        };
        let mut ips: Vec<IpAddr> = Vec::new();
        for ip in found {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
        if !ips.is_empty() {
            cache.put(name, &ips);
        }
        ips
    };
    if ips.is_empty() {
        return Err(HttpError::Dns {
            host: name.to_string(),
            cause: DnsFailure::NoAddresses,
        });
    }
    let mut allowed = Vec::with_capacity(ips.len());
    let mut first_refusal = None;
    for ip in ips {
        match check_address(cfg, host, ip) {
            Ok(()) => allowed.push(SocketAddr::new(ip, port)),
            Err(e) => {
                first_refusal.get_or_insert(e);
            }
        }
    }
    match (allowed.is_empty(), first_refusal) {
        (true, Some(refusal)) => Err(refusal),
        _ => Ok(allowed),
    }
}

/// Refuses a non-public `ip` for `host` unless private addresses are allowed.
pub(crate) fn check_address(cfg: &ClientConfig, host: &str, ip: IpAddr) -> Result<(), HttpError> {
    if cfg.allow_private {
        return Ok(());
    }
    match classify(ip) {
        Some(class) => Err(HttpError::ForbiddenAddress {
            host: host.to_string(),
            addr: ip,
            class,
        }),
        None => Ok(()),
    }
}
