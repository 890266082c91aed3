//! Client settings and the parsers for the name-resolution overrides.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::error::HttpError;

/// Settings of one [`super::HttpClient`], shared by every request it sends.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Bound on one exchange: connect, TLS, write, and reading the response.
    pub timeout: Duration,
    /// Largest response body kept, after decompression; the rest is dropped
    /// and `Response::body_truncated` is set.
    pub body_cap: usize,
    /// Allow loopback, private and other non-public addresses (tests, labs).
    pub allow_private: bool,
    /// `HOST:PORT:ADDR:PORT` overrides of where a host:port connects to.
    pub connect_to: Vec<ConnectOverride>,
    /// Name answers that take precedence over DNS.
    pub hosts: HostsMap,
    /// Answer names from `hosts` only, never from DNS.
    pub hosts_only: bool,
    /// The DNS server asked for names (and TXT records) instead of the
    /// system resolver, when set.
    pub dns_server: Option<SocketAddr>,
    /// Most requests in flight at once across all tasks.
    pub max_concurrency: usize,
    /// Ceiling on requests per second to one host, when set.
    pub per_host_rps: Option<u32>,
    /// User-Agent sent when a request has none.
    pub user_agent: String,
    /// Immediate retries after a refused or reset connection.
    pub retries: u32,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_secs(10),
            body_cap: 10 * 1024 * 1024,
            allow_private: false,
            connect_to: Vec::new(),
            hosts: HostsMap::default(),
            hosts_only: false,
            dns_server: None,
            max_concurrency: 50,
            per_host_rps: None,
            user_agent: format!("scanfleet-scanner/{}", env!("CARGO_PKG_VERSION")),
            retries: 1,
        }
    }
}

impl ClientConfig {
    /// The network settings every part of the fleet shares (address
    /// safety, connect-to overrides, hosts map, DNS server), so that a scan
    /// and an ownership check reach a name the same way.
    pub fn from_settings(
        scanner: &scanfleet_common::settings::ScannerSettings,
    ) -> Result<ClientConfig, HttpError> {
        let named = |name: &'static str, e: HttpError| HttpError::Setting {
            name,
            source: Box::new(e),
        };
        let mut client = ClientConfig {
            allow_private: scanner.allow_private,
            hosts_only: scanner.hosts_only,
            dns_server: scanner.dns_server,
            ..ClientConfig::default()
        };
        if !scanner.connect_to.is_empty() {
            client.connect_to = ClientConfig::parse_connect_to(&scanner.connect_to)
                .map_err(|e| named("SCANFLEET_SCANNER__CONNECT_TO", e))?;
        }
        if !scanner.hosts.is_empty() {
            client.hosts = ClientConfig::parse_hosts(&scanner.hosts)
                .map_err(|e| named("SCANFLEET_SCANNER__HOSTS", e))?;
        }
        client.per_host_rps = (scanner.per_host_rps > 0).then_some(scanner.per_host_rps);
        Ok(client)
    }

    /// Parses comma-separated `HOST:PORT:ADDR:PORT` entries (curl's
    /// `--connect-to` syntax). An empty HOST or PORT on the left matches any;
    /// an empty ADDR or PORT on the right keeps the request's host or port
    /// (not both: such an entry would change nothing). IPv6 addresses go
    /// in brackets.
    pub fn parse_connect_to(s: &str) -> Result<Vec<ConnectOverride>, HttpError> {
        s.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(ConnectOverride::parse)
            .collect()
    }

    /// Parses comma-separated `name=ip` entries; a name may be a wildcard
    /// `*.example.test`, which matches every name below `example.test`.
    pub fn parse_hosts(s: &str) -> Result<HostsMap, HttpError> {
        let mut map = HostsMap::default();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, ip) = entry
                .split_once('=')
                .ok_or_else(|| HttpError::InvalidConfig {
                    reason: format!("hosts entry {entry:?} is not name=ip"),
                })?;
            let ip_text = ip.trim().trim_start_matches('[').trim_end_matches(']');
            let ip: IpAddr = ip_text.parse().map_err(|_| HttpError::InvalidConfig {
                reason: format!("hosts entry {entry:?}: {ip_text:?} is not an IP address"),
            })?;
            map.insert(name.trim(), ip)?;
        }
        Ok(map)
    }
}

/// One `HOST:PORT:ADDR:PORT` override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOverride {
    /// Host to match (lower case); `None` matches any host.
    pub host: Option<String>,
    /// Port to match; `None` matches any port.
    pub port: Option<u16>,
    /// Name or IP literal to connect to instead; `None` keeps the request's
    /// host (resolved as usual, through the hosts map or DNS).
    pub addr: Option<String>,
    /// Port to connect to instead; `None` keeps the request's port.
    pub addr_port: Option<u16>,
}

impl ConnectOverride {
    fn parse(entry: &str) -> Result<ConnectOverride, HttpError> {
        let invalid = |why: &str| HttpError::InvalidConfig {
            reason: format!("connect-to entry {entry:?} {why} (expected HOST:PORT:ADDR:PORT)"),
        };
        let fields = split_colon_fields(entry).ok_or_else(|| invalid("has an unclosed '['"))?;
        let [host, port, addr, addr_port]: [String; 4] = fields
            .try_into()
            .map_err(|_| invalid("does not have four fields"))?;
        let port_of = |p: &str| -> Result<Option<u16>, HttpError> {
            if p.is_empty() {
                Ok(None)
            } else {
                p.parse()
                    .map(Some)
                    .map_err(|_| invalid("has an invalid port"))
            }
        };
        let strip = |h: &str| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase()
        };
        if addr.is_empty() && addr_port.is_empty() {
            return Err(invalid("changes nothing: its ADDR and PORT are both empty"));
        }
        Ok(ConnectOverride {
            host: (!host.is_empty()).then(|| strip(&host)),
            port: port_of(&port)?,
            addr: (!addr.is_empty()).then(|| strip(&addr)),
            addr_port: port_of(&addr_port)?,
        })
    }

    pub(crate) fn matches(&self, host: &str, port: u16) -> bool {
        self.host.as_deref().is_none_or(|h| h == host) && self.port.is_none_or(|p| p == port)
    }
}

/// Splits on ':' outside of square brackets.
fn split_colon_fields(s: &str) -> Option<Vec<String>> {
    let mut fields = vec![String::new()];
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1)?,
            ':' if depth == 0 => {
                fields.push(String::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = fields.last_mut() {
            last.push(c);
        }
    }
    (depth == 0).then_some(fields)
}

/// Name-to-address answers consulted before DNS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostsMap {
    exact: HashMap<String, IpAddr>,
    /// `(suffix including the leading dot, ip)`, longest suffix first so the
    /// most specific wildcard wins.
    wildcards: Vec<(String, IpAddr)>,
}

impl HostsMap {
    /// Adds `name` (or `*.domain`) answering `ip`.
    pub fn insert(&mut self, name: &str, ip: IpAddr) -> Result<(), HttpError> {
        let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
        if let Some(domain) = name.strip_prefix("*.") {
            if domain.is_empty() || domain.contains('*') {
                return Err(HttpError::InvalidConfig {
                    reason: format!("hosts wildcard {name:?} must look like *.example.test"),
                });
            }
            self.wildcards.push((format!(".{domain}"), ip));
            self.wildcards.sort_by_key(|w| std::cmp::Reverse(w.0.len()));
        } else if name.is_empty() || name.contains('*') {
            return Err(HttpError::InvalidConfig {
                reason: format!("hosts name {name:?} is empty or has a misplaced '*'"),
            });
        } else {
            self.exact.insert(name, ip);
        }
        Ok(())
    }

    /// The answer for `name`: an exact entry first, then the most specific
    /// wildcard. A wildcard does not match its bare domain.
    pub fn lookup(&self, name: &str) -> Option<IpAddr> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(ip) = self.exact.get(&name) {
            return Some(*ip);
        }
        self.wildcards
            .iter()
            .find(|(suffix, _)| name.len() > suffix.len() && name.ends_with(suffix.as_str()))
            .map(|(_, ip)| *ip)
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcards.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_map_prefers_exact_names_then_the_most_specific_wildcard() {
        let map = ClientConfig::parse_hosts(
            "*.example.test=10.0.0.1, *.deep.example.test=10.0.0.2,api.example.test=10.0.0.3,v6.test=[::1]",
        )
        .expect("parses");
        let ip = |s: &str| Some(s.parse::<IpAddr>().expect("ip"));
        assert_eq!(map.lookup("www.example.test"), ip("10.0.0.1"));
        assert_eq!(map.lookup("a.b.example.test"), ip("10.0.0.1"));
        assert_eq!(map.lookup("x.deep.example.test"), ip("10.0.0.2"));
        assert_eq!(map.lookup("API.example.test."), ip("10.0.0.3"));
        assert_eq!(map.lookup("v6.test"), ip("::1"));
        assert_eq!(map.lookup("example.test"), None);
        assert_eq!(map.lookup("badexample.test"), None);
    }

    #[test]
    fn malformed_hosts_entries_are_rejected() {
        for bad in ["name", "name=not-an-ip", "*.=1.2.3.4", "a*b=1.2.3.4"] {
            assert!(ClientConfig::parse_hosts(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn connect_to_entries_parse_with_wildcards_and_ipv6() {
        let list =
            ClientConfig::parse_connect_to("example.test:443:127.0.0.1:8443, ::[::1]:, :80::8080")
                .expect("parses");
        assert_eq!(
            list[0],
            ConnectOverride {
                host: Some("example.test".into()),
                port: Some(443),
                addr: Some("127.0.0.1".into()),
                addr_port: Some(8443),
            }
        );
        assert_eq!(
            list[1],
            ConnectOverride {
                host: None,
                port: None,
                addr: Some("::1".into()),
                addr_port: None
            }
        );
        // curl's empty HOST2: the request's own host, on another port.
        assert_eq!(
            list[2],
            ConnectOverride {
                host: None,
                port: Some(80),
                addr: None,
                addr_port: Some(8080)
            }
        );
        assert!(list[0].matches("example.test", 443));
        assert!(!list[0].matches("example.test", 80));
        assert!(list[1].matches("anything", 1));
        for bad in ["a:1:b", "a:x:b:1", "a:1::", ":::", "a:1:[::1:1"] {
            assert!(ClientConfig::parse_connect_to(bad).is_err(), "{bad}");
        }
    }
}
