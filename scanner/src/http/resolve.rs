//! Turning a host and port into addresses the client may connect to.
//!
//! Order: `connect_to` overrides first, then IP literals, the hosts map
//! (exact names, then wildcards), then DNS unless `hosts_only`. Every
//! candidate is checked against the forbidden classes; the connected peer is
//! checked again in the client.

use std::net::{IpAddr, SocketAddr};

use super::address::classify;
use super::config::ClientConfig;
use super::error::HttpError;

/// Addresses to try for `host:port`, in order, all allowed by the policy.
pub(crate) async fn resolve(
    cfg: &ClientConfig,
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, HttpError> {
    let (name, port) = match cfg.connect_to.iter().find(|o| o.matches(host, port)) {
        Some(o) => (o.addr.as_str(), o.addr_port.unwrap_or(port)),
        None => (host, port),
    };
    let ips: Vec<IpAddr> = if let Ok(ip) = name.parse::<IpAddr>() {
        vec![ip]
    } else if let Some(ip) = cfg.hosts.lookup(name) {
        vec![ip]
    } else if cfg.hosts_only {
        return Err(HttpError::Dns {
            host: name.to_string(),
            reason: "not in the hosts map, and DNS is off (hosts-only mode)".to_string(),
        });
    } else {
        let found = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| HttpError::Dns {
                host: name.to_string(),
                reason: e.to_string(),
            })?;
        let mut ips: Vec<IpAddr> = Vec::new();
        for addr in found {
            if !ips.contains(&addr.ip()) {
                ips.push(addr.ip());
            }
        }
        ips
    };
    if ips.is_empty() {
        return Err(HttpError::Dns {
            host: name.to_string(),
            reason: "no addresses found".to_string(),
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
