//! `PROBE`: which hosts serve HTTP, and what they show. HTTPS is tried
//! first, then HTTP; the first that answers is the host's base URL for the
//! templates, and what it showed (status, title, server, technologies) is
//! reported as an `info` finding.

use std::sync::OnceLock;
use std::time::Duration;

use regex::Regex;
use scanfleet_common::chain::Chain;
use scanfleet_common::events::{FindingEvent, TechnologyEvent};
use scanfleet_common::Severity;

use scanfleet_http::{HttpClient, HttpError, Request, Response, SendOptions, TargetUrl};

/// Template id of probe findings.
pub const PROBE_TEMPLATE_ID: &str = "http-probe";

/// A host that answered, and the URL it answered at.
#[derive(Debug, Clone)]
pub struct LiveHost {
    pub host: String,
    pub base: TargetUrl,
    pub finding: FindingEvent,
    /// Technologies the answer showed (headers, cookies, generator, page
    /// markers, on every hop of the redirect chain), with evidence.
    pub seen: Vec<TechnologyEvent>,
}

/// Why a host is not live.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The host name does not make a URL.
    #[error("{url}")]
    BadUrl {
        url: String,
        #[source]
        source: HttpError,
    },
    /// Neither scheme answered.
    #[error("{host} did not answer ({})", join(.misses))]
    NoAnswer { host: String, misses: Vec<Miss> },
}

/// How one scheme failed.
#[derive(Debug, thiserror::Error)]
pub enum Miss {
    #[error("{scheme}")]
    Failed {
        scheme: &'static str,
        #[source]
        source: HttpError,
    },
    #[error("{scheme}: no answer within {timeout:?}")]
    TimedOut {
        scheme: &'static str,
        timeout: Duration,
    },
}

fn join(misses: &[Miss]) -> String {
    let texts: Vec<String> = misses.iter().map(|m| Chain(m).to_string()).collect();
    texts.join("; ")
}

/// Probes `host`; `Err` says why neither scheme answered.
pub async fn probe(
    client: &HttpClient,
    host: &str,
    timeout: Duration,
) -> Result<LiveHost, ProbeError> {
    let mut misses = Vec::new();
    for scheme in ["https", "http"] {
        let url = format!("{scheme}://{host}/");
        let base = match TargetUrl::parse(&url) {
            Ok(base) => base,
            Err(source) => return Err(ProbeError::BadUrl { url, source }),
        };
        let opts = SendOptions {
            follow_redirects: true,
            max_redirects: 5,
            host_redirects_only: true,
            cookie_jar: None,
        };
        match tokio::time::timeout(timeout, client.send(&Request::get(&base), &opts)).await {
            Ok(Ok(resp)) => {
                let finding = describe(host, &url, &resp);
                let mut seen = Vec::new();
                for hop in resp.redirect_responses.iter().chain([&resp]) {
                    seen.extend(crate::auto::detect::observe(hop, &hop.body_text()));
                }
                return Ok(LiveHost {
                    host: host.to_string(),
                    base,
                    finding,
                    seen: crate::auto::detect::merge(seen),
                });
            }
            Ok(Err(source)) => misses.push(Miss::Failed { scheme, source }),
            Err(_) => misses.push(Miss::TimedOut { scheme, timeout }),
        }
    }
    Err(ProbeError::NoAnswer {
        host: host.to_string(),
        misses,
    })
}

fn describe(host: &str, url: &str, resp: &Response) -> FindingEvent {
    let body = resp.body_text();
    let title = title_of(&body);
    let server = resp.header("server").map(str::to_string);
    let technologies = technologies(resp, &body);
    let mut facts = vec![format!("status={}", resp.status)];
    if let Some(t) = &title {
        facts.push(format!("title={t}"));
    }
    if let Some(s) = &server {
        facts.push(format!("server={s}"));
    }
    facts.extend(technologies.iter().map(|t| format!("tech={t}")));
    let description = format!(
        "{url} answered with status {}{}{}{}.",
        resp.status,
        title
            .as_ref()
            .map(|t| format!(", title \"{t}\""))
            .unwrap_or_default(),
        server
            .as_ref()
            .map(|s| format!(", server {s}"))
            .unwrap_or_default(),
        if technologies.is_empty() {
            String::new()
        } else {
            format!(", technologies: {}", technologies.join(", "))
        }
    );
    FindingEvent {
        template_id: PROBE_TEMPLATE_ID.to_string(),
        name: "HTTP service".to_string(),
        severity: Severity::Info,
        host: host.to_string(),
        matched_at: url.to_string(),
        description,
        remediation: String::new(),
        extracted_results: facts,
        matcher_name: None,
        classification: Default::default(),
        evidence: None,
    }
}

fn title_of(body: &str) -> Option<String> {
    static TITLE: OnceLock<Regex> = OnceLock::new();
    let re = TITLE.get_or_init(|| Regex::new(r"(?is)<title[^>]*>(.*?)</title>").expect("title"));
    let raw = re.captures(body)?.get(1)?.as_str();
    let text = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then(|| text.chars().take(200).collect())
}

/// Technologies named by headers and common page markers.
fn technologies(resp: &Response, body: &str) -> Vec<String> {
    static GENERATOR: OnceLock<Regex> = OnceLock::new();
    let mut found: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        let name = name.trim();
        if !name.is_empty() && !found.iter().any(|f| f.eq_ignore_ascii_case(name)) {
            found.push(name.to_string());
        }
    };
    if let Some(server) = resp.header("server") {
        // "nginx/1.25.3 (Ubuntu)" -> "nginx"
        if let Some(product) = server.split(['/', ' ']).next() {
            add(product);
        }
    }
    for v in resp.header_values("x-powered-by") {
        add(v.split('/').next().unwrap_or(v));
    }
    let generator = GENERATOR.get_or_init(|| {
        Regex::new(r#"(?i)<meta[^>]+name=["']generator["'][^>]+content=["']([^"'/ ]+)"#)
            .expect("generator")
    });
    if let Some(c) = generator.captures(body).and_then(|c| c.get(1)) {
        add(c.as_str());
    }
    for (marker, name) in [
        ("wp-content/", "WordPress"),
        ("/_next/", "Next.js"),
        ("data-reactroot", "React"),
        ("jquery", "jQuery"),
        ("drupal-settings-json", "Drupal"),
    ] {
        if body.to_ascii_lowercase().contains(marker) {
            add(name);
        }
    }
    if resp
        .header_values("set-cookie")
        .any(|c| c.starts_with("PHPSESSID="))
    {
        add("PHP");
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_trimmed_and_joined() {
        assert_eq!(
            title_of("<html><TITLE>\n  Shop \n home</TITLE>").as_deref(),
            Some("Shop home")
        );
        assert_eq!(title_of("<title> </title>"), None);
        assert_eq!(title_of("no title"), None);
    }
}
