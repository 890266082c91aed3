//! Every request that is not an API call: a small 200 (shaped like the Go
//! server's, with the payload label reversed in the body so a template can
//! match on it), recorded when the `Host` carries a registered id.

use std::fmt::Write as _;
use std::net::IpAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};
use scanfleet_interactsh::find_ids;

use super::HttpContext;
use crate::recorder::Seen;

/// Answers one callback and records it.
pub async fn handle(
    ctx: &HttpContext,
    parts: &Parts,
    body: &Bytes,
    remote: IpAddr,
    protocol: &'static str,
) -> Response<Full<Bytes>> {
    let host = request_host(parts);
    let matches = find_ids(host_without_port(&host));
    // The Go server reflects the last label that holds an id.
    let reflection: String = matches
        .last()
        .and_then(|m| m.full_id.rsplit('.').next())
        .map(|label| label.chars().rev().collect())
        .unwrap_or_default();
    let (content_type, text) = page(parts.uri.path(), &reflection, &ctx.domain);
    if !matches.is_empty() {
        let seen = Seen {
            protocol,
            raw_request: dump_request(parts, &host, body),
            raw_response: dump_response(content_type, &ctx.domain, &text),
            ..Seen::default()
        };
        ctx.recorder.record(&matches, remote, &seen).await;
    }
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    if let Ok(server) = hyper::header::HeaderValue::from_str(&ctx.domain) {
        headers.insert(hyper::header::SERVER, server);
    }
    response
}

/// The `Host` header, else the request target's authority (HTTP/1.0
/// absolute-form requests).
fn request_host(parts: &Parts) -> String {
    parts
        .headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| parts.uri.authority().map(|a| a.as_str().to_string()))
        .unwrap_or_default()
}

fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The body by path, as the Go server picks it: a banner at `/` without an
/// id, `robots.txt`, JSON and XML shapes, else a tiny HTML page.
fn page(path: &str, reflection: &str, domain: &str) -> (&'static str, String) {
    let lower = path.to_ascii_lowercase();
    if path == "/" && reflection.is_empty() {
        let banner = format!(
            "<h1>scanfleet OOB server</h1>\n<p>This server records DNS, HTTP, SMTP and LDAP \
             interactions with names under <b>*.{domain}</b> for security testing. If you see \
             such names in your logs, someone has been testing an application for out-of-band \
             vulnerabilities.</p>\n"
        );
        ("text/html; charset=utf-8", banner)
    } else if lower == "/robots.txt" {
        (
            "text/plain; charset=utf-8",
            format!("User-agent: *\nDisallow: / # {reflection}"),
        )
    } else if lower.ends_with(".json") {
        ("application/json", format!("{{\"data\":\"{reflection}\"}}"))
    } else if lower.ends_with(".xml") {
        ("application/xml", format!("<data>{reflection}</data>"))
    } else {
        (
            "text/html; charset=utf-8",
            format!("<html><head></head><body>{reflection}</body></html>"),
        )
    }
}

/// The request as Go's `httputil.DumpRequest` writes it: request line,
/// `Host`, the other headers with canonical names, a blank line, the body.
fn dump_request(parts: &Parts, host: &str, body: &Bytes) -> String {
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut dump = format!(
        "{} {target} {:?}\r\nHost: {host}\r\n",
        parts.method, parts.version
    );
    for (name, value) in &parts.headers {
        if name == hyper::header::HOST {
            continue;
        }
        let _ = write!(
            dump,
            "{}: {}\r\n",
            canonical(name.as_str()),
            String::from_utf8_lossy(value.as_bytes())
        );
    }
    dump.push_str("\r\n");
    dump.push_str(&String::from_utf8_lossy(body));
    dump
}

fn dump_response(content_type: &str, domain: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: {content_type}\r\nServer: {domain}\r\n\r\n{body}",
        body.len()
    )
}

/// `user-agent` -> `User-Agent`, as Go's textproto canonicalises names.
fn canonical(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = true;
    for c in name.chars() {
        out.push(if upper { c.to_ascii_uppercase() } else { c });
        upper = c == '-';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_cut_from_a_host_but_not_from_a_bare_ipv6_address() {
        assert_eq!(host_without_port("a.example.com:8080"), "a.example.com");
        assert_eq!(host_without_port("a.example.com"), "a.example.com");
        assert_eq!(host_without_port("[::1]:80"), "[::1]");
    }

    #[test]
    fn header_names_are_canonicalised_like_go() {
        assert_eq!(canonical("x-forwarded-for"), "X-Forwarded-For");
        assert_eq!(canonical("accept"), "Accept");
    }

    #[test]
    fn pages_follow_the_path_and_reflect_the_label() {
        assert!(page("/", "", "oob.test").1.contains("*.oob.test"));
        assert_eq!(
            page("/x", "cba", "oob.test").1,
            "<html><head></head><body>cba</body></html>"
        );
        assert_eq!(page("/a.JSON", "cba", "oob.test").1, "{\"data\":\"cba\"}");
        assert!(page("/robots.txt", "cba", "oob.test").1.ends_with("# cba"));
    }
}
