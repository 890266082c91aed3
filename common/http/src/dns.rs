//! DNS questions asked over the wire with hickory: TXT records (ownership
//! proof) always, and A/AAAA when a DNS server is configured (otherwise the
//! system resolver answers those, see `resolve`).
//!
//! hickory keeps no answers here (cache size 0): a user who has just added
//! the proof record asks again and must see it, and the scanner's own
//! address answers are cached in `resolve::DnsCache`, which re-checks the
//! address policy on every use.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::{ResolveError, TokioResolver};

use super::error::{DnsFailure, HttpError};

/// A stub resolver: the configured server, or the system's (`resolv.conf`).
/// Cheap to clone: clones share one resolver.
#[derive(Clone)]
pub(crate) struct WireDns {
    resolver: TokioResolver,
}

impl WireDns {
    pub(crate) fn new(server: Option<SocketAddr>, timeout: Duration) -> Result<WireDns, HttpError> {
        let mut builder = match server {
            Some(addr) => TokioResolver::builder_with_config(
                ResolverConfig::from_parts(
                    None,
                    Vec::new(),
                    NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true),
                ),
                TokioConnectionProvider::default(),
            ),
            None => TokioResolver::builder_tokio().map_err(HttpError::SystemDns)?,
        };
        let opts: &mut ResolverOpts = builder.options_mut();
        opts.cache_size = 0;
        opts.timeout = timeout;
        opts.attempts = 2;
        // Names are asked as given, never with search domains appended.
        opts.ndots = 0;
        Ok(WireDns {
            resolver: builder.build(),
        })
    }

    /// The TXT records of `name`, each as its strings joined (RFC 7208
    /// style); empty when the name has none or does not exist.
    pub(crate) async fn txt(&self, name: &str) -> Result<Vec<String>, HttpError> {
        match self.resolver.txt_lookup(fqdn(name)).await {
            Ok(found) => Ok(found
                .iter()
                .map(|txt| {
                    txt.txt_data()
                        .iter()
                        .map(|part| String::from_utf8_lossy(part).into_owned())
                        .collect::<String>()
                })
                .collect()),
            Err(e) if e.is_no_records_found() => Ok(Vec::new()),
            Err(e) => Err(dns_error(name, e)),
        }
    }

    /// The A and AAAA answers of `name`.
    pub(crate) async fn ips(&self, name: &str) -> Result<Vec<IpAddr>, HttpError> {
        match self.resolver.lookup_ip(fqdn(name)).await {
            Ok(found) => Ok(found.iter().collect()),
            Err(e) => Err(dns_error(name, e)),
        }
    }
}

fn fqdn(name: &str) -> String {
    if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    }
}

fn dns_error(name: &str, e: ResolveError) -> HttpError {
    let cause = if e.is_no_records_found() {
        DnsFailure::NoRecords
    } else {
        DnsFailure::Resolver(e)
    };
    HttpError::Dns {
        host: name.to_string(),
        cause,
    }
}
