//! The SSRF guard of outbound webhooks. A webhook URL is user input aimed
//! from inside our network, so in production it must be `https` and every
//! address its name resolves to must be public; a Slack webhook must be on
//! `hooks.slack.com`. The URL is checked when it is saved and again at
//! every connection: the dispatcher resolves the name, checks every
//! address, and connects to the addresses it checked (a per-request
//! resolver override), so a name that rebinds to an inside address after
//! the first check reaches nothing. Redirects are never followed.
//!
//! Dev mode admits `http://`; `SCANFLEET_WEBHOOKS__ALLOW_PRIVATE` admits
//! loopback and private addresses, for local receivers.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{NameServerConfigGroup, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::TokioResolver;
use reqwest::Url;
use scanfleet_common::settings::Mode;
use scanfleet_common::Settings;
use scanfleet_http::{classify, AddressClass, ClientConfig, HostsMap};

/// A name that takes longer to resolve is refused (a request waits on it).
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where Slack's incoming webhooks live.
pub const SLACK_HOST: &str = "hooks.slack.com";

/// Why a webhook URL is refused.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("not an absolute http(s) URL with a host")]
    NotAUrl(#[source] Option<url::ParseError>),
    #[error("must use https")]
    NotHttps,
    #[error("must not carry a user name or password")]
    Credentials,
    #[error("a Slack webhook must be an https://{SLACK_HOST}/ URL")]
    NotSlack,
    #[error("{host} resolves to {ip}, which is not a public address ({class})")]
    NotPublic {
        host: String,
        ip: IpAddr,
        class: AddressClass,
    },
    #[error("{host} cannot be resolved")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{host} has no address")]
    NoAddress { host: String },
}

/// What the guard admits.
#[derive(Clone)]
pub struct Guard {
    require_https: bool,
    slack_host_only: bool,
    allow_private: bool,
    /// The scanner's hosts map (`SCANFLEET_SCANNER__HOSTS`), asked first;
    /// with `SCANFLEET_SCANNER__HOSTS_ONLY` nothing else is (no DNS).
    hosts: HostsMap,
    hosts_only: bool,
    /// The configured DNS server, when there is one; else the system's.
    resolver: Option<TokioResolver>,
}

/// A checked URL and the addresses to connect to.
#[derive(Debug, Clone)]
pub struct Checked {
    pub url: Url,
    pub host: String,
    pub addrs: Vec<SocketAddr>,
}

impl Guard {
    pub fn from_settings(settings: &Settings) -> Guard {
        let production = settings.mode == Mode::Production;
        let resolver = settings.scanner.dns_server.map(|addr| {
            let mut builder = TokioResolver::builder_with_config(
                ResolverConfig::from_parts(
                    None,
                    Vec::new(),
                    NameServerConfigGroup::from_ips_clear(&[addr.ip()], addr.port(), true),
                ),
                TokioConnectionProvider::default(),
            );
            let opts: &mut ResolverOpts = builder.options_mut();
            // Every connection asks again: a cached answer would hide a rebinding.
            opts.cache_size = 0;
            opts.timeout = Duration::from_secs(3);
            opts.ndots = 0;
            builder.build()
        });
        // The api refuses to start with a malformed hosts map (the
        // ownership checks parse it first), so this default is not reached.
        let hosts = ClientConfig::parse_hosts(&settings.scanner.hosts).unwrap_or_default();
        Guard {
            require_https: production,
            slack_host_only: production,
            allow_private: settings.webhooks.allow_private,
            hosts,
            hosts_only: settings.scanner.hosts_only,
            resolver,
        }
    }

    /// The URL's form: scheme, host, no credentials, Slack's host for a
    /// Slack webhook.
    pub fn parse(&self, raw: &str, slack: bool) -> Result<Url, GuardError> {
        let url = Url::parse(raw.trim()).map_err(|e| GuardError::NotAUrl(Some(e)))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(GuardError::NotAUrl(None));
        }
        if self.require_https && url.scheme() != "https" {
            return Err(GuardError::NotHttps);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(GuardError::Credentials);
        }
        if slack && self.slack_host_only && url.host_str() != Some(SLACK_HOST) {
            return Err(GuardError::NotSlack);
        }
        Ok(url)
    }

    /// Parses, resolves and checks every address (see the module doc).
    pub async fn check(&self, raw: &str, slack: bool) -> Result<Checked, GuardError> {
        let url = self.parse(raw, slack)?;
        let host = url
            .host_str()
            .ok_or(GuardError::NotAUrl(None))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = url.port_or_known_default().unwrap_or(443);
        let ips = self.resolve(&host).await?;
        if ips.is_empty() {
            return Err(GuardError::NoAddress { host });
        }
        for &ip in &ips {
            if let Some(class) = classify(ip) {
                if !self.allow_private {
                    return Err(GuardError::NotPublic { host, ip, class });
                }
            }
        }
        let addrs = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect();
        Ok(Checked { url, host, addrs })
    }

    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, GuardError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let failed = |source: std::io::Error| GuardError::Resolve {
            host: host.to_string(),
            source,
        };
        let lookup = self.lookup(host);
        match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
            Ok(found) => found.map_err(failed),
            Err(elapsed) => Err(failed(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                elapsed,
            ))),
        }
    }

    async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, std::io::Error> {
        if let Some(ip) = self.hosts.lookup(host) {
            return Ok(vec![ip]);
        }
        if self.hosts_only {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not in the hosts map, and SCANFLEET_SCANNER__HOSTS_ONLY forbids DNS",
            ));
        }
        match &self.resolver {
            Some(resolver) => match resolver.lookup_ip(format!("{host}.")).await {
                Ok(found) => Ok(found.iter().collect()),
                Err(e) => Err(std::io::Error::other(e)),
            },
            None => Ok(tokio::net::lookup_host((host, 0))
                .await?
                .map(|a| a.ip())
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn guard(production: bool, allow_private: bool) -> Guard {
        let mut vars = HashMap::new();
        if production {
            vars.insert("SCANFLEET_MODE".to_string(), "production".to_string());
            vars.insert("SCANFLEET_JWT_SECRET".to_string(), "x".repeat(32));
            vars.insert("SCANFLEET_PAYMENTS__SECRET_KEY".to_string(), "sk".into());
        }
        vars.insert(
            "SCANFLEET_WEBHOOKS__ALLOW_PRIVATE".to_string(),
            allow_private.to_string(),
        );
        Guard::from_settings(&Settings::from_vars(&vars).unwrap())
    }

    #[tokio::test]
    async fn production_refuses_http_private_addresses_and_credentials() {
        let g = guard(true, false);
        assert!(matches!(
            g.check("http://example.com/", false).await,
            Err(GuardError::NotHttps)
        ));
        for inside in [
            "https://127.0.0.1/",
            "https://10.1.2.3/",
            "https://169.254.169.254/latest",
            "https://[::1]:8443/",
        ] {
            assert!(
                matches!(
                    g.check(inside, false).await,
                    Err(GuardError::NotPublic { .. })
                ),
                "{inside}"
            );
        }
        assert!(matches!(
            g.check("https://u:p@example.com/", false).await,
            Err(GuardError::Credentials)
        ));
        assert!(matches!(
            g.check("https://example.com/hook", true).await,
            Err(GuardError::NotSlack)
        ));
        assert!(matches!(
            g.check("ftp://x/", false).await,
            Err(GuardError::NotAUrl(_))
        ));
    }

    /// CI's contract checks run hosts-only: a webhook URL made up by the
    /// fuzzer must not cause a DNS question outside the machine.
    #[tokio::test]
    async fn hosts_only_answers_from_the_hosts_map_and_never_asks_dns() {
        let mut vars = HashMap::new();
        vars.insert(
            "SCANFLEET_SCANNER__HOSTS_ONLY".to_string(),
            "true".to_string(),
        );
        vars.insert(
            "SCANFLEET_SCANNER__HOSTS".to_string(),
            "hook.test=93.184.216.34".to_string(),
        );
        let g = Guard::from_settings(&Settings::from_vars(&vars).unwrap());
        let c = g.check("http://hook.test/x", false).await.unwrap();
        assert_eq!(c.addrs, vec!["93.184.216.34:80".parse().unwrap()]);
        assert!(matches!(
            g.check("http://example.com/", false).await,
            Err(GuardError::Resolve { .. })
        ));
    }

    #[tokio::test]
    async fn dev_with_allow_private_admits_local_receivers() {
        let g = guard(false, true);
        let c = g.check("http://127.0.0.1:9/x", false).await.unwrap();
        assert_eq!(c.addrs, vec!["127.0.0.1:9".parse().unwrap()]);
        assert!(guard(false, false)
            .check("http://127.0.0.1:9/x", false)
            .await
            .is_err());
    }
}
