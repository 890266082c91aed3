//! `DISCOVER`: hosts of the target domain beyond the domain itself.
//!
//! Two sources, and never a host outside the domain:
//! - a built-in wordlist of common subdomain labels, each resolved over DNS
//!   with bounded concurrency and a short timeout. Two random labels are
//!   resolved first: if they answer, the domain has a wildcard record, and a
//!   word whose answer is the wildcard's own is not a host of its own;
//! - same-domain host names found in the root page, `robots.txt` and
//!   `sitemap.xml`.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use regex::Regex;
use tokio_util::sync::CancellationToken;

use scanfleet_http::{HttpClient, Request, SendOptions, TargetUrl};

/// Common subdomain labels, most frequent first.
pub const WORDLIST: &[&str] = &[
    "www",
    "mail",
    "api",
    "dev",
    "staging",
    "test",
    "admin",
    "app",
    "blog",
    "shop",
    "store",
    "portal",
    "vpn",
    "beta",
    "cdn",
    "static",
    "assets",
    "m",
    "mobile",
    "ftp",
    "docs",
    "status",
    "support",
    "help",
    "git",
    "gitlab",
    "jenkins",
    "ci",
    "grafana",
    "kibana",
    "monitor",
    "dashboard",
    "auth",
    "login",
    "sso",
    "id",
    "accounts",
    "billing",
    "pay",
    "payments",
    "crm",
    "erp",
    "intranet",
    "internal",
    "remote",
    "webmail",
    "smtp",
    "imap",
    "pop",
    "mx",
    "ns1",
    "ns2",
    "dns",
    "db",
    "mysql",
    "postgres",
    "redis",
    "elastic",
    "search",
    "media",
    "images",
    "img",
    "files",
    "download",
    "downloads",
    "upload",
    "backup",
    "old",
    "new",
    "demo",
    "sandbox",
    "qa",
    "uat",
    "preprod",
    "prod",
    "stage",
    "v1",
    "v2",
    "graphql",
    "gateway",
    "proxy",
    "edge",
    "web",
    "www2",
    "forum",
    "community",
    "wiki",
    "news",
    "events",
    "careers",
    "jobs",
    "partners",
    "developer",
    "developers",
    "console",
    "manage",
    "panel",
    "cpanel",
    "webdisk",
    "autodiscover",
];

/// Host names of `domain` that answer DNS, sorted, without `domain` itself.
/// `on_step` is told after each unit of work (`done`, `planned`).
pub async fn discover(
    client: &HttpClient,
    domain: &str,
    dns_timeout: Duration,
    dns_concurrency: usize,
    cancel: &CancellationToken,
    mut on_step: impl FnMut(usize, usize),
) -> BTreeSet<String> {
    let planned = WORDLIST.len() + 3;
    let mut done = 0;
    let wildcard = wildcard_answers(client, domain, dns_timeout).await;
    let mut found = BTreeSet::new();

    // The futures own their client handle: a stream of futures borrowing
    // from this frame would not be `Send` for every lifetime.
    let owned = client.clone();
    let names: Vec<String> = WORDLIST.iter().map(|w| format!("{w}.{domain}")).collect();
    let mut words = futures::stream::iter(names)
        .map(move |name| {
            let client = owned.clone();
            async move {
                let ips = lookup(&client, &name, dns_timeout).await;
                (name, ips)
            }
        })
        .buffer_unordered(dns_concurrency.max(1));
    while let Some((name, ips)) = words.next().await {
        done += 1;
        on_step(done, planned);
        if cancel.is_cancelled() {
            return found;
        }
        if let Some(ips) = ips {
            let is_wildcard = wildcard
                .as_ref()
                .is_some_and(|w| ips.iter().all(|ip| w.contains(ip)));
            if !is_wildcard {
                found.insert(name);
            }
        }
    }

    // Names the site itself links to are real hosts even under a wildcard.
    let named = linked_hosts(client, domain, dns_timeout).await;
    done += 3;
    on_step(done, planned);
    for name in named {
        if cancel.is_cancelled() {
            break;
        }
        if name != domain && lookup(client, &name, dns_timeout).await.is_some() {
            found.insert(name);
        }
    }
    found.remove(domain);
    found
}

/// The answers two random labels get: `Some` when the domain has a
/// wildcard record.
async fn wildcard_answers(
    client: &HttpClient,
    domain: &str,
    timeout: Duration,
) -> Option<BTreeSet<IpAddr>> {
    let mut answers = BTreeSet::new();
    for _ in 0..2 {
        let label: String = format!("sf-{:016x}", rand::random::<u64>());
        if let Some(ips) = lookup(client, &format!("{label}.{domain}"), timeout).await {
            answers.extend(ips);
        }
    }
    (!answers.is_empty()).then_some(answers)
}

/// The addresses `name` resolves to (under the node's hosts map, connect-to
/// and address rules), or `None` when it does not resolve in time.
pub async fn lookup(client: &HttpClient, name: &str, timeout: Duration) -> Option<Vec<IpAddr>> {
    match tokio::time::timeout(timeout, client.resolve_name(name)).await {
        Ok(Ok(ips)) if !ips.is_empty() => Some(ips),
        _ => None,
    }
}

/// Same-domain host names in the root page, robots.txt and sitemap.xml of
/// `domain` (HTTPS first, then HTTP).
async fn linked_hosts(client: &HttpClient, domain: &str, timeout: Duration) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for scheme in ["https", "http"] {
        let Ok(base) = TargetUrl::parse(&format!("{scheme}://{domain}/")) else {
            continue;
        };
        let mut answered = false;
        for path in ["/", "/robots.txt", "/sitemap.xml"] {
            let req = Request::new(&base, "GET", path.as_bytes().to_vec());
            let opts = SendOptions {
                follow_redirects: true,
                max_redirects: 3,
                host_redirects_only: true,
                cookie_jar: None,
            };
            // Page fetches get a few DNS timeouts' worth of time each.
            match tokio::time::timeout(timeout * 5, client.send(&req, &opts)).await {
                Ok(Ok(resp)) => {
                    answered = true;
                    names.extend(hosts_in(&resp.body_text(), domain));
                }
                _ => continue,
            }
        }
        if answered {
            break;
        }
    }
    names
}

/// Host names under `domain` (or `domain` itself) mentioned in `text`.
pub fn hosts_in(text: &str, domain: &str) -> BTreeSet<String> {
    static NAME: OnceLock<Regex> = OnceLock::new();
    let re = NAME.get_or_init(|| {
        Regex::new(r"(?i)\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}\b")
            .expect("host name pattern")
    });
    let suffix = format!(".{domain}");
    re.find_iter(text)
        .map(|m| m.as_str().to_ascii_lowercase())
        .filter(|name| name == domain || name.ends_with(&suffix))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_under_the_domain_are_kept() {
        let text = r#"<a href="https://shop.example.test/x">s</a> api.example.test
            evil.com example.test.evil.com Docs.Example.Test sub.notexample.test"#;
        let found: Vec<String> = hosts_in(text, "example.test").into_iter().collect();
        assert_eq!(
            found,
            vec!["api.example.test", "docs.example.test", "shop.example.test"]
        );
    }

    #[test]
    fn the_wordlist_has_no_duplicates() {
        let set: BTreeSet<_> = WORDLIST.iter().collect();
        assert_eq!(set.len(), WORDLIST.len());
    }
}
