//! Target URLs, kept as written.
//!
//! Unlike a WHATWG URL parser this one never normalises the path or query:
//! `/..;/`, `%2e` and `/a/../b` stay exactly as the template wrote them,
//! because sending them unchanged is the point of many checks.

use std::fmt;
use std::net::IpAddr;

use super::error::{AuthorityError, HttpError, UrlError};

/// The two schemes the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request goes: scheme, host and port to connect to, plus the path
/// and query of the input URL (the base that template paths are joined to).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetUrl {
    pub scheme: Scheme,
    /// Lower-cased host name or IP literal, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// Path as written, possibly empty (`http://host` has the empty path).
    pub path: String,
    /// Query as written, without the `?`.
    pub query: Option<String>,
}

impl TargetUrl {
    /// Parses `scheme://host[:port][/path][?query][#fragment]`. A missing
    /// scheme means `http`, as scanner inputs are often bare host names. The
    /// fragment is dropped: it never goes on the wire.
    pub fn parse(input: &str) -> Result<TargetUrl, HttpError> {
        let invalid = |reason: UrlError| HttpError::InvalidUrl {
            input: input.to_string(),
            reason,
        };
        let parts = UrlParts::split(input.trim());
        let scheme = match parts.scheme.map(str::to_ascii_lowercase).as_deref() {
            None | Some("http") => Scheme::Http,
            Some("https") => Scheme::Https,
            Some(_) => return Err(invalid(UrlError::Scheme)),
        };
        let (host, port) = split_host_port(parts.authority).map_err(|e| invalid(e.into()))?;
        if host.is_empty() {
            return Err(invalid(UrlError::MissingHost));
        }
        Ok(TargetUrl {
            scheme,
            host: host.to_ascii_lowercase(),
            port: port.map_or(scheme.default_port(), |p| p.number),
            path: parts.path.to_string(),
            query: parts.query.map(str::to_string),
        })
    }

    /// `scheme://host[:port]`, the port only when it is not the default.
    pub fn root_url(&self) -> String {
        let mut s = String::with_capacity(self.host.len() + 16);
        self.push_root(&mut s);
        s
    }

    /// Appends [`TargetUrl::root_url`] to `s`. Built by hand, not with
    /// `format!`: a scan asks for these strings on every request.
    fn push_root(&self, s: &mut String) {
        s.push_str(self.scheme.as_str());
        s.push_str("://");
        self.push_authority(s);
    }

    /// Appends [`TargetUrl::authority`] to `s`.
    fn push_authority(&self, s: &mut String) {
        self.push_host_port(s, !self.is_default_port());
    }

    /// Appends the host (IPv6 in brackets) and, if `with_port`, `:port`.
    fn push_host_port(&self, s: &mut String, with_port: bool) {
        if self.host.contains(':') {
            s.push('[');
            s.push_str(&self.host);
            s.push(']');
        } else {
            s.push_str(&self.host);
        }
        if with_port {
            s.push(':');
            s.push_str(itoa::Buffer::new().format(self.port));
        }
    }

    /// The whole input URL: root plus path and query, as written.
    pub fn base_url(&self) -> String {
        let mut s = self.root_url();
        s.push_str(&self.path);
        if let Some(q) = &self.query {
            s.push('?');
            s.push_str(q);
        }
        s
    }

    /// `host:port`, always with the port (IPv6 hosts in brackets).
    pub fn host_port(&self) -> String {
        let mut s = String::with_capacity(self.host.len() + 8);
        self.push_host_port(&mut s, true);
        s
    }

    /// The value of the Host header: host, plus `:port` when not the default.
    pub fn authority(&self) -> String {
        let mut s = String::with_capacity(self.host.len() + 8);
        self.push_authority(&mut s);
        s
    }

    pub fn is_default_port(&self) -> bool {
        self.port == self.scheme.default_port()
    }

    /// The request-target of the base URL itself: path (or `/`) and query.
    pub fn request_target(&self) -> String {
        let mut s = if self.path.is_empty() {
            "/".to_string()
        } else {
            self.path.clone()
        };
        if let Some(q) = &self.query {
            s.push('?');
            s.push_str(q);
        }
        s
    }

    /// The URL of a request sent to this origin with `target` as its
    /// request-target (used for `final_url` and redirect chains).
    pub fn with_target(&self, target: &[u8]) -> String {
        let target = super::utf8_lossy(target);
        // A path or query (nearly every target) is checked first: the
        // substring search is only for the rest.
        let relative = target.starts_with(['/', '?']);
        if !relative && target.contains("://") {
            return target.into_owned();
        }
        let mut s = String::with_capacity(self.host.len() + 16 + target.len());
        self.push_root(&mut s);
        if !relative {
            s.push('/');
        }
        s.push_str(&target);
        s
    }

    /// The host as an IP address, when it is a literal.
    pub fn ip_literal(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// Resolves a `Location` value against this URL whose request-target is
    /// `current_target`. Returns the new origin and the new request-target,
    /// both as written (no dot-segment removal).
    pub fn resolve_location(
        &self,
        current_target: &[u8],
        location: &str,
    ) -> Result<(TargetUrl, Vec<u8>), HttpError> {
        let location = location.trim();
        let lower = location.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            let next = TargetUrl::parse(location)?;
            let target = next.request_target().into_bytes();
            return Ok((next, target));
        }
        if let Some(rest) = location.strip_prefix("//") {
            let next = TargetUrl::parse(&format!("{}://{}", self.scheme, rest))?;
            let target = next.request_target().into_bytes();
            return Ok((next, target));
        }
        let origin = TargetUrl {
            path: String::new(),
            query: None,
            ..self.clone()
        };
        let current = super::utf8_lossy(current_target);
        let current_path = current.split('?').next().unwrap_or("");
        let target = if location.starts_with('/') {
            location.to_string()
        } else if location.is_empty() {
            current.into_owned()
        } else if location.starts_with('?') {
            format!("{current_path}{location}")
        } else {
            let dir = match current_path.rfind('/') {
                Some(i) => &current_path[..=i],
                None => "/",
            };
            format!("{dir}{location}")
        };
        let target = match target.find('#') {
            Some(i) => target[..i].to_string(),
            None => target,
        };
        Ok((origin, target.into_bytes()))
    }
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base_url())
    }
}

/// A URL cut at its delimiters, each part as written (nothing decoded or
/// normalised): the one place both the client's [`TargetUrl`] and the
/// engine's input URL are parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlParts<'a> {
    /// What precedes `://`, when the text has it.
    pub scheme: Option<&'a str>,
    /// Host and port; credentials (`user@`) are dropped rather than taken
    /// for a host name.
    pub authority: &'a str,
    /// From the first `/` after the authority to the query, possibly empty.
    pub path: &'a str,
    /// After the first `?`, without it.
    pub query: Option<&'a str>,
}

impl<'a> UrlParts<'a> {
    /// Splits `[scheme://]authority[path][?query][#fragment]`. The fragment
    /// is dropped: it never goes on the wire.
    pub fn split(text: &'a str) -> UrlParts<'a> {
        let (scheme, rest) = match text.find("://") {
            Some(i) => (Some(&text[..i]), &text[i + 3..]),
            None => (None, text),
        };
        let rest = rest.find('#').map_or(rest, |i| &rest[..i]);
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let authority = authority
            .rfind('@')
            .map_or(authority, |i| &authority[i + 1..]);
        let after = &rest[authority_end..];
        let (path, query) = match after.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (after, None),
        };
        UrlParts {
            scheme,
            authority,
            path,
            query,
        }
    }
}

/// A port as the authority wrote it (`0080`), with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenPort<'a> {
    pub text: &'a str,
    pub number: u16,
}

/// Splits `host[:port]` or `[v6][:port]`: the host without brackets, and
/// the port. An empty port (`host:`) is no port.
pub fn split_host_port(authority: &str) -> Result<(&str, Option<WrittenPort<'_>>), AuthorityError> {
    fn parse_port(text: &str) -> Result<Option<WrittenPort<'_>>, AuthorityError> {
        if text.is_empty() {
            return Ok(None);
        }
        match text.parse::<u16>() {
            Ok(number) => Ok(Some(WrittenPort { text, number })),
            Err(_) => Err(AuthorityError::InvalidPort(text.to_string())),
        }
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']').ok_or(AuthorityError::UnclosedBracket)?;
        let host = &rest[..end];
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(AuthorityError::InvalidIpv6(host.to_string()));
        }
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => parse_port(p)?,
            None if after.is_empty() => None,
            None => return Err(AuthorityError::TextAfterIpv6),
        };
        return Ok((host, port));
    }
    match authority.rfind(':') {
        Some(i) if !authority[..i].contains(':') => {
            Ok((&authority[..i], parse_port(&authority[i + 1..])?))
        }
        Some(_) => Err(AuthorityError::UnbracketedIpv6),
        None => Ok((authority, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_url_keeps_what_is_wrong_as_its_source_and_its_text() {
        let err = TargetUrl::parse("http://[::1/x").unwrap_err();
        // What is wrong is said once, by the source, when printed as a chain.
        assert_eq!(err.to_string(), "invalid URL \"http://[::1/x\"");
        assert_eq!(
            scanfleet_common::chain::Chain(&err).to_string(),
            "invalid URL \"http://[::1/x\": unclosed '[' in host"
        );
        let source = std::error::Error::source(&err).unwrap();
        assert!(matches!(
            source.downcast_ref::<UrlError>(),
            Some(UrlError::Authority(AuthorityError::UnclosedBracket))
        ));
    }

    #[test]
    fn parsing_keeps_path_and_query_exactly_as_written() {
        let u = TargetUrl::parse("HTTPS://Example.COM:8443/a/../%2e%2e/..;/x?q=1&b=%20#frag")
            .expect("parses");
        assert_eq!(u.scheme, Scheme::Https);
        assert_eq!(u.host, "example.com");
        assert_eq!(u.port, 8443);
        assert_eq!(u.path, "/a/../%2e%2e/..;/x");
        assert_eq!(u.query.as_deref(), Some("q=1&b=%20"));
        assert_eq!(u.root_url(), "https://example.com:8443");
        assert_eq!(
            u.base_url(),
            "https://example.com:8443/a/../%2e%2e/..;/x?q=1&b=%20"
        );
        assert_eq!(u.host_port(), "example.com:8443");
        assert!(!u.is_default_port());
    }

    #[test]
    fn default_ports_and_ipv6_hosts_are_rendered_like_browsers_do() {
        let u = TargetUrl::parse("http://[::1]").expect("parses");
        assert_eq!(u.host, "::1");
        assert_eq!(u.port, 80);
        assert!(u.is_default_port());
        assert_eq!(u.root_url(), "http://[::1]");
        assert_eq!(u.host_port(), "[::1]:80");
        assert_eq!(u.path, "");
        let bare = TargetUrl::parse("example.org:8080").expect("parses");
        assert_eq!((bare.scheme, bare.port), (Scheme::Http, 8080));
        for (input, root, host_port, with_target) in [
            (
                "https://[2001:db8::1]:1/x",
                "https://[2001:db8::1]:1",
                "[2001:db8::1]:1",
                "https://[2001:db8::1]:1/a?b",
            ),
            (
                "http://h:65535",
                "http://h:65535",
                "h:65535",
                "http://h:65535/a?b",
            ),
            ("https://h:10", "https://h:10", "h:10", "https://h:10/a?b"),
            ("https://h:443", "https://h", "h:443", "https://h/a?b"),
        ] {
            let u = TargetUrl::parse(input).expect("parses");
            assert_eq!(u.root_url(), root, "{input}");
            assert_eq!(
                u.authority(),
                root.split_once("://").map_or("", |(_, a)| a),
                "{input}"
            );
            assert_eq!(u.host_port(), host_port, "{input}");
            assert_eq!(u.with_target(b"/a?b"), with_target, "{input}");
            assert_eq!(u.with_target(b"a?b"), with_target, "{input}");
            assert_eq!(u.with_target(b"?q"), format!("{root}?q"), "{input}");
            assert_eq!(
                u.with_target(b"http://other/p"),
                "http://other/p",
                "{input}"
            );
        }
    }

    #[test]
    fn url_parts_are_cut_at_the_delimiters_and_kept_as_written() {
        let parts = |scheme, authority, path, query| UrlParts {
            scheme,
            authority,
            path,
            query,
        };
        for (text, expected) in [
            (
                "HTTP://Ex.com:81/a/../b?x=1#f",
                parts(Some("HTTP"), "Ex.com:81", "/a/../b", Some("x=1")),
            ),
            ("host/p", parts(None, "host", "/p", None)),
            ("http://u:pw@h/p", parts(Some("http"), "h", "/p", None)),
            (
                "http://h?q=/a?b",
                parts(Some("http"), "h", "", Some("q=/a?b")),
            ),
            ("http://h/#x?y", parts(Some("http"), "h", "/", None)),
            ("http://[::1]:8/", parts(Some("http"), "[::1]:8", "/", None)),
            ("https://h?", parts(Some("https"), "h", "", Some(""))),
            ("", parts(None, "", "", None)),
        ] {
            assert_eq!(UrlParts::split(text), expected, "{text}");
        }
        let written = WrittenPort {
            text: "0080",
            number: 80,
        };
        assert_eq!(split_host_port("h:0080"), Ok(("h", Some(written))));
        assert_eq!(split_host_port("[::1]"), Ok(("::1", None)));
        assert_eq!(split_host_port("h:"), Ok(("h", None)));
        for bad in ["h:x", "h:70000", "::1", "[::1", "[::1]x", "[zz]:1"] {
            assert!(split_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_urls_are_rejected_with_a_reason() {
        for bad in [
            "ftp://x",
            "http://",
            "http://h:99999/",
            "http://[::1/",
            "http://::1/",
        ] {
            assert!(
                matches!(TargetUrl::parse(bad), Err(HttpError::InvalidUrl { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn relative_locations_resolve_against_the_current_target() {
        let u = TargetUrl::parse("http://h:8080/").expect("parses");
        let cases: [(&str, &str, &str); 5] = [
            ("/a/b?x=1", "/c", "/c"),
            ("/a/b?x=1", "c/d", "/a/c/d"),
            ("/a/b", "?y=2", "/a/b?y=2"),
            ("/a/", "../up#f", "/a/../up"),
            ("/", "//other.test/p", "/p"),
        ];
        for (current, location, want) in cases {
            let (origin, target) = u
                .resolve_location(current.as_bytes(), location)
                .expect("resolves");
            assert_eq!(String::from_utf8_lossy(&target), want, "{location}");
            if location.starts_with("//") {
                assert_eq!(origin.host, "other.test");
                assert_eq!(origin.port, 80);
            } else {
                assert_eq!(origin.host_port(), "h:8080");
            }
        }
        let (abs, target) = u
            .resolve_location(b"/", "https://x.test/p?q")
            .expect("resolves");
        assert_eq!(
            (abs.scheme, abs.port, target),
            (Scheme::Https, 443, b"/p?q".to_vec())
        );
    }
}
