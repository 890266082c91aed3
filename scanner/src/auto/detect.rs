//! Technologies of a host, with what named each: what the `PROBE` stage
//! saw (headers, cookies, title, page markers, each hop of the redirect
//! chain) and the results of the detection templates run in `DETECT`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use scanfleet_common::events::TechnologyEvent;
use scanfleet_engine::engine::ScanResult;
use scanfleet_http::Response;

use super::techmap::{canonical, TechMap};

/// Page markers: (lower-case text in the body, technology).
const MARKERS: &[(&str, &str)] = &[
    ("wp-content/", "wordpress"),
    ("/_next/", "next.js"),
    ("data-reactroot", "react"),
    ("jquery", "jquery"),
    ("drupal-settings-json", "drupal"),
];

/// Cookie name prefixes: (prefix, technology).
const COOKIES: &[(&str, &str)] = &[
    ("PHPSESSID", "php"),
    ("JSESSIONID", "java"),
    ("ASP.NET_SessionId", "asp.net"),
    ("laravel_session", "laravel"),
    ("grafana_session", "grafana"),
    ("wordpress_", "wordpress"),
    ("_gitlab_session", "gitlab"),
    ("csrftoken", "django"),
];

/// Headers that name their product: (header, technology or None when the
/// value names it).
const HEADERS: &[(&str, Option<&str>)] = &[
    ("server", None),
    ("x-powered-by", None),
    ("x-jenkins", Some("jenkins")),
    ("x-hudson", Some("jenkins")),
    ("x-grafana-version", Some("grafana")),
    ("x-gitlab-meta", Some("gitlab")),
    ("x-aspnet-version", Some("asp.net")),
    ("x-drupal-cache", Some("drupal")),
    ("x-generator", None),
];

fn version_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\bv?(\d+(?:\.\d+)+)").expect("version"))
}

/// The first version number in `text` (`nginx/1.25.3` -> `1.25.3`).
pub fn version_in(text: &str) -> Option<String> {
    version_re()
        .captures(text)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_string())
}

fn tech(name: &str, version: Option<String>, evidence: String) -> TechnologyEvent {
    TechnologyEvent {
        name: canonical(name),
        version,
        evidence: vec![evidence],
    }
}

/// What one response shows: headers naming a product, cookies, a
/// `generator` meta tag, page markers.
pub fn observe(resp: &Response, body: &str) -> Vec<TechnologyEvent> {
    static GENERATOR: OnceLock<Regex> = OnceLock::new();
    let mut found = Vec::new();
    for (header, named) in HEADERS {
        for value in resp.header_values(header) {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            let evidence = format!("header:{header}: {value}");
            match named {
                Some(name) => found.push(tech(name, version_in(value), evidence)),
                None => {
                    // "nginx/1.25.3 (Ubuntu)" -> nginx 1.25.3; "PHP/8.1.2" -> php
                    let product = value.split(['/', ' ', ';', ',']).next().unwrap_or(value);
                    if product.chars().any(|c| c.is_ascii_alphabetic()) {
                        found.push(tech(product, version_in(value), evidence));
                    }
                }
            }
        }
    }
    for cookie in resp.header_values("set-cookie") {
        let name = cookie.split('=').next().unwrap_or("").trim();
        if let Some((_, t)) = COOKIES.iter().find(|(p, _)| name.starts_with(p)) {
            found.push(tech(t, None, format!("cookie:{name}")));
        }
    }
    let generator = GENERATOR.get_or_init(|| {
        Regex::new(r#"(?i)<meta[^>]+name=["']generator["'][^>]+content=["']([^"']+)"#)
            .expect("generator")
    });
    if let Some(c) = generator.captures(body).and_then(|c| c.get(1)) {
        let content = c.as_str();
        let product = content.split([' ', '/']).next().unwrap_or(content);
        if !product.is_empty() {
            found.push(tech(
                product,
                version_in(content),
                format!("meta:generator: {content}"),
            ));
        }
    }
    let lower = body.to_ascii_lowercase();
    for (marker, name) in MARKERS {
        if lower.contains(marker) {
            found.push(tech(name, None, format!("body:{marker}")));
        }
    }
    merge(found)
}

/// The technologies one detection result names, by the map's reading of
/// its template: a matcher's name for a multi-technology template
/// (`tech-detect:nginx`), else the template's product or tags.
pub fn from_result(map: &TechMap, result: &ScanResult) -> Vec<TechnologyEvent> {
    let Some(facts) = map.facts_by_id(&result.template_id) else {
        return Vec::new();
    };
    if !facts.detector {
        return Vec::new();
    }
    let version = result.extracted_results.iter().find_map(|e| version_in(e));
    if facts.multi_tech {
        return match &result.matcher_name {
            Some(m) => vec![tech(
                m,
                version,
                format!("template:{}:{m}", result.template_id),
            )],
            None => Vec::new(),
        };
    }
    facts
        .names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            tech(
                n,
                // The extracted version belongs to the template's product.
                if i == 0 { version.clone() } else { None },
                format!("template:{}", result.template_id),
            )
        })
        .collect()
}

/// One entry per technology: evidence joined, the first version kept.
pub fn merge(list: Vec<TechnologyEvent>) -> Vec<TechnologyEvent> {
    let mut by_name: BTreeMap<String, TechnologyEvent> = BTreeMap::new();
    for t in list {
        if t.name.is_empty() {
            continue;
        }
        match by_name.get_mut(&t.name) {
            Some(have) => {
                if have.version.is_none() {
                    have.version = t.version;
                }
                for e in t.evidence {
                    if !have.evidence.contains(&e) {
                        have.evidence.push(e);
                    }
                }
            }
            None => {
                by_name.insert(t.name.clone(), t);
            }
        }
    }
    by_name.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_header_values() {
        assert_eq!(
            version_in("nginx/1.25.3 (Ubuntu)").as_deref(),
            Some("1.25.3")
        );
        assert_eq!(version_in("Jetty(9.4.z-SNAPSHOT)").as_deref(), Some("9.4"));
        assert_eq!(version_in("Jetty"), None);
        assert_eq!(version_in("v2.4"), Some("2.4".into()));
    }

    #[test]
    fn merged_technologies_keep_all_evidence() {
        let merged = merge(vec![
            tech("Nginx", None, "header:server: nginx".into()),
            tech("nginx", Some("1.2".into()), "template:nginx-version".into()),
        ]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].version.as_deref(), Some("1.2"));
        assert_eq!(merged[0].evidence.len(), 2);
    }
}
