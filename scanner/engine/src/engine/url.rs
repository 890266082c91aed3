//! The input URL as request building sees it, and Nuclei's rules for joining
//! template paths onto it.
//!
//! Nothing here normalises: paths and queries stay byte for byte as written,
//! because templates depend on sending `/..;/` or `%2e` unchanged.

use std::borrow::Cow;
use std::collections::HashMap;

use super::error::{EngineError, TargetProblem};
use scanfleet_http::{split_host_port, UrlParts};

/// An absolute http(s) input URL split into the parts the request variables
/// are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputUrl {
    /// `http` or `https`, lower case.
    pub scheme: String,
    /// `host[:port]` exactly as written in the input (`{{Hostname}}`).
    pub authority: String,
    /// Host without port or IPv6 brackets (`{{Host}}`).
    pub host: String,
    /// Explicit port, or the scheme's default (`{{Port}}`).
    pub port: String,
    /// Path as written, possibly empty.
    pub path: String,
    /// Query without the `?`, when the input has one.
    pub query: Option<String>,
    /// The input as given.
    pub original: String,
}

impl InputUrl {
    pub fn parse(input: &str) -> Result<InputUrl, EngineError> {
        let invalid = |reason: TargetProblem| EngineError::InvalidTarget {
            input: input.to_string(),
            reason,
        };
        let trimmed = input.trim();
        let parts = UrlParts::split(trimmed);
        let scheme = parts
            .scheme
            .ok_or_else(|| invalid(TargetProblem::NoScheme))?
            .to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(invalid(TargetProblem::Scheme));
        }
        if parts.authority.is_empty() {
            return Err(invalid(TargetProblem::MissingHost));
        }
        let (host, port) = split_host_port(parts.authority).map_err(|e| invalid(e.into()))?;
        let port = match port {
            Some(written) => written.text.to_string(),
            None if scheme == "https" => "443".to_string(),
            None => "80".to_string(),
        };
        Ok(InputUrl {
            scheme,
            authority: parts.authority.to_string(),
            host: host.to_string(),
            port,
            path: parts.path.to_string(),
            query: parts.query.filter(|q| !q.is_empty()).map(str::to_string),
            original: trimmed.to_string(),
        })
    }

    /// The input from a parsed target (the port is written only when it is
    /// not the scheme's default, as the client writes the Host header).
    pub fn from_target(target: &scanfleet_http::TargetUrl) -> InputUrl {
        let port = target.port.to_string();
        let authority = target.authority();
        let query = target.query.clone().filter(|q| !q.is_empty());
        InputUrl {
            scheme: target.scheme.as_str().to_string(),
            authority,
            host: target.host.clone(),
            port,
            path: target.path.clone(),
            query,
            original: target.base_url(),
        }
    }

    /// `scheme://authority`, where requests are sent (`{{RootURL}}`).
    pub fn root_url(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// A copy with another port, for paths written `{{BaseURL}}:8080/...`.
    /// The input with its origin replaced as a raw request's `@Host:`
    /// annotation says (Nuclei's rules): an `http://` or `https://` prefix
    /// sets the scheme, a `host:port` value replaces the authority, a bare
    /// host keeps the input's port when the input named one. Path and
    /// query stay the input's. `None` when the value is not a host.
    pub fn with_host_annotation(&self, value: &str) -> Option<InputUrl> {
        let value = value.trim();
        let lower = value.to_ascii_lowercase();
        let (scheme, rest) = if lower.starts_with("https://") {
            ("https", &value["https://".len()..])
        } else if lower.starts_with("http://") {
            ("http", &value["http://".len()..])
        } else {
            (self.scheme.as_str(), value)
        };
        let rest = rest.trim_end_matches('/');
        let explicit_port = matches!(split_host_port(rest), Ok((_, Some(_))));
        let input_named_port = matches!(split_host_port(&self.authority), Ok((_, Some(_))));
        let authority = if explicit_port || !input_named_port {
            rest.to_string()
        } else {
            format!("{rest}:{}", self.port)
        };
        let query = self
            .query
            .as_ref()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        InputUrl::parse(&format!("{scheme}://{authority}{}{query}", self.path)).ok()
    }

    pub fn with_port(&self, port: &str) -> InputUrl {
        let mut copy = self.clone();
        let host_part = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        copy.authority = format!("{host_part}:{port}");
        copy.port = port.to_string();
        copy
    }

    /// The variables Nuclei derives from the input (`BaseURL`, `RootURL`,
    /// `Hostname`, `Host`, `Port`, `Path`, `File`, `Scheme`, `Query`, `Input`).
    ///
    /// `trim_trailing_slash` is set when the template writes `{{BaseURL}}/...`,
    /// so `http://h/app/` + `/.git/config` gives `/app/.git/config`.
    ///
    /// `BaseURL` carries no query: the input's query is merged into every
    /// built request instead (see [`merge_query`]), which sends it exactly once
    /// whatever the template appends after `{{BaseURL}}`.
    pub fn variables(&self, trim_trailing_slash: bool) -> HashMap<String, String> {
        let path = if trim_trailing_slash {
            self.path.strip_suffix('/').unwrap_or(&self.path)
        } else {
            &self.path
        };
        let mut dir = go_path_dir(path);
        if dir == "." {
            dir = String::new();
        }
        let mut file = go_path_base(path);
        if file == "." {
            file = String::new();
        }
        let root = self.root_url();
        let mut vars = HashMap::with_capacity(12);
        vars.insert("BaseURL".to_string(), format!("{root}{path}"));
        vars.insert("RootURL".to_string(), root);
        vars.insert("Hostname".to_string(), self.authority.clone());
        vars.insert("Host".to_string(), self.host.clone());
        vars.insert("Port".to_string(), self.port.clone());
        vars.insert("Path".to_string(), dir);
        vars.insert("File".to_string(), file);
        vars.insert("Scheme".to_string(), self.scheme.clone());
        vars.insert(
            "Query".to_string(),
            self.query
                .as_ref()
                .map(|q| format!("?{q}"))
                .unwrap_or_default(),
        );
        vars.insert("Input".to_string(), self.original.clone());
        vars.insert("FQDN".to_string(), self.host.clone());
        if let Some(dns) = DnsNames::of(&self.host) {
            vars.insert("RDN".to_string(), dns.registered);
            vars.insert("DN".to_string(), dns.name);
            vars.insert("TLD".to_string(), dns.suffix);
            vars.insert("SD".to_string(), dns.subdomain);
        }
        vars
    }
}

/// Two-label public suffixes under which names are registered one level
/// lower (`example.co.uk`). Not the whole public suffix list: the common
/// country-code second levels, which is what decides `RDN` for most targets;
/// any other name is taken to be registered under its last label.
const TWO_LABEL_SUFFIXES: &[&str] = &[
    "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "net.uk", "ltd.uk", "plc.uk", "com.au",
    "net.au", "org.au", "edu.au", "gov.au", "co.nz", "org.nz", "co.jp", "ne.jp", "or.jp", "ac.jp",
    "go.jp", "com.br", "net.br", "org.br", "gov.br", "com.cn", "net.cn", "org.cn", "gov.cn",
    "edu.cn", "co.in", "net.in", "org.in", "gov.in", "ac.in", "co.za", "org.za", "com.mx",
    "org.mx", "gob.mx", "com.tr", "org.tr", "gov.tr", "com.ar", "com.sg", "edu.sg", "gov.sg",
    "com.my", "com.hk", "com.tw", "co.kr", "or.kr", "go.kr", "co.id", "go.id", "co.il", "org.il",
    "ac.il", "com.pl", "com.ua", "co.th", "ac.th", "go.th", "com.vn", "com.ph", "com.pk", "com.eg",
    "com.sa", "com.co", "com.pe", "com.ve", "com.ec",
];

/// Nuclei's DNS-derived names of a host: `www.example.co.uk` gives RDN
/// `example.co.uk`, DN `example`, TLD `co.uk`, SD `www`.
struct DnsNames {
    registered: String,
    name: String,
    suffix: String,
    subdomain: String,
}

impl DnsNames {
    /// `None` for IP literals and names of fewer than two labels.
    fn of(host: &str) -> Option<DnsNames> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host.parse::<std::net::IpAddr>().is_ok() {
            return None;
        }
        let labels: Vec<&str> = host.split('.').collect();
        if labels.len() < 2 || labels.iter().any(|l| l.is_empty()) {
            return None;
        }
        let last_two = labels[labels.len() - 2..].join(".");
        let suffix_labels = if labels.len() > 2 && TWO_LABEL_SUFFIXES.contains(&last_two.as_str()) {
            2
        } else {
            1
        };
        if labels.len() <= suffix_labels {
            return None;
        }
        let name_at = labels.len() - suffix_labels - 1;
        Some(DnsNames {
            registered: labels[name_at..].join("."),
            name: labels[name_at].to_string(),
            suffix: labels[name_at + 1..].join("."),
            subdomain: labels[..name_at].join("."),
        })
    }
}

/// Go's `path.Dir`: everything before the last slash, cleaned.
fn go_path_dir(path: &str) -> String {
    match path.rfind('/') {
        Some(i) => go_path_clean(&path[..=i]),
        None => go_path_clean(""),
    }
}

/// Go's `path.Base`: the last element, trailing slashes ignored.
fn go_path_base(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_string();
    }
    match trimmed.rfind('/') {
        Some(i) => trimmed[i + 1..].to_string(),
        None => trimmed.to_string(),
    }
}

/// Go's `path.Clean` (lexical: `.`/`..` resolved, duplicate slashes removed).
fn go_path_clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Nuclei's path merge (`urlutil.mergePaths`): joins the input path and a
/// template path without normalising, and does not repeat a path the input
/// already ends with or the template already starts with.
pub fn merge_paths(base: &str, rel: &str) -> String {
    let mut rel = rel;
    if base.ends_with('/') && rel.starts_with('/') {
        rel = rel.trim_start_matches('/');
    }
    if base.is_empty() {
        return rel.to_string();
    }
    if rel.is_empty() {
        return base.to_string();
    }
    let rel: String = if !base.ends_with('/') && !rel.starts_with('/') {
        format!("/{rel}")
    } else {
        rel.to_string()
    };
    // Same path, or the input already ends with it: nothing to add.
    if base == rel || (base.len() > rel.len() && base.ends_with(rel.as_str())) {
        base.to_string()
    } else if base.len() < rel.len() && rel.starts_with(base) {
        rel
    } else {
        format!("{base}{rel}")
    }
}

/// Merges the input's query with a request's query. The input's parameters
/// come first (Nuclei gives the target's parameters precedence); a request
/// parameter identical to one already present is not repeated. Bytes are
/// kept as written: nothing is decoded or re-encoded.
pub fn merge_query(input: Option<&str>, request: Option<&str>) -> Option<String> {
    let mut pairs: Vec<&str> = Vec::new();
    for q in [input, request].into_iter().flatten() {
        for pair in q.split('&') {
            if !pair.is_empty() && !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    if pairs.is_empty() {
        // Keep a bare `?` the template wrote on purpose.
        return request.map(|_| String::new());
    }
    Some(pairs.join("&"))
}

/// Splits a request target into path and optional query (fragment dropped).
pub fn split_target(target: &str) -> (&str, Option<&str>) {
    let target = target.split('#').next().unwrap_or_default();
    match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    }
}

/// Joins a path and an optional query into a request target.
pub fn join_target(path: &str, query: Option<&str>) -> String {
    let path = if path.is_empty() { "/" } else { path };
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    }
}

/// Splits an absolute URL produced by rendering a template path into
/// `scheme` (lower case), `authority` and request target, borrowed from
/// `url`. `None` for a relative path. (A scheme holds no `:`, so the first
/// `:` is the one of `://` when there is a scheme at all.)
pub fn split_absolute(url: &str) -> Option<(Cow<'_, str>, &str, &str)> {
    let colon = memchr::memchr(b':', url.as_bytes())?;
    let scheme = &url[..colon];
    let rest = url[colon + 1..].strip_prefix("//")?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        return None;
    }
    let scheme = if scheme.bytes().any(|c| c.is_ascii_uppercase()) {
        Cow::Owned(scheme.to_ascii_lowercase())
    } else {
        Cow::Borrowed(scheme)
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some((scheme, &rest[..end], &rest[end..]))
}

/// Position of `needle` in `haystack`.
pub fn find_bytes(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_variables_split_the_registered_name_from_its_suffix_and_subdomain() {
        let vars = InputUrl::parse("https://a.b.example.co.uk:8443/x")
            .unwrap()
            .variables(false);
        let get = |k: &str| vars.get(k).map(String::as_str);
        assert_eq!(get("RDN"), Some("example.co.uk"));
        assert_eq!(get("DN"), Some("example"));
        assert_eq!(get("TLD"), Some("co.uk"));
        assert_eq!(get("SD"), Some("a.b"));
        let vars = InputUrl::parse("http://example.com")
            .unwrap()
            .variables(false);
        assert_eq!(vars.get("RDN").map(String::as_str), Some("example.com"));
        assert_eq!(vars.get("SD").map(String::as_str), Some(""));
        let vars = InputUrl::parse("http://127.0.0.1:80")
            .unwrap()
            .variables(false);
        assert!(!vars.contains_key("RDN"));
    }

    #[test]
    fn variables_follow_nuclei_for_a_url_with_port_and_file() {
        let u = InputUrl::parse("http://localhost:9001/test/123").unwrap();
        let v = u.variables(false);
        assert_eq!(v["BaseURL"], "http://localhost:9001/test/123");
        assert_eq!(v["RootURL"], "http://localhost:9001");
        assert_eq!(v["Hostname"], "localhost:9001");
        assert_eq!(v["Host"], "localhost");
        assert_eq!(v["Port"], "9001");
        assert_eq!(v["Path"], "/test");
        assert_eq!(v["File"], "123");
        assert_eq!(v["Scheme"], "http");
    }

    #[test]
    fn variables_of_a_bare_https_host_use_the_default_port() {
        let v = InputUrl::parse("https://example.com")
            .unwrap()
            .variables(false);
        assert_eq!(v["Port"], "443");
        assert_eq!(v["Path"], "");
        assert_eq!(v["File"], "");
        assert_eq!(v["Hostname"], "example.com");
    }

    #[test]
    fn trailing_slash_is_trimmed_only_when_asked() {
        let u = InputUrl::parse("http://h/app/").unwrap();
        assert_eq!(u.variables(true)["BaseURL"], "http://h/app");
        assert_eq!(u.variables(false)["BaseURL"], "http://h/app/");
    }

    #[test]
    fn an_absolute_path_splits_into_scheme_authority_and_target() {
        let split = |url| split_absolute(url).map(|(s, a, t)| (s.into_owned(), a, t));
        for (url, expected) in [
            ("http://h:81/a?b#c", Some(("http", "h:81", "/a?b#c"))),
            ("HTTPS://H/x", Some(("https", "H", "/x"))),
            ("svn+ssh://h", Some(("svn+ssh", "h", ""))),
            ("http://h?q=1", Some(("http", "h", "?q=1"))),
            ("/path?next=http://h/", None),
            ("h:80/x", None),
            ("a:b://h/", None),
            ("://h/", None),
            ("http:/h", None),
            ("", None),
        ] {
            let expected = expected.map(|(s, a, t)| (s.to_string(), a, t));
            assert_eq!(split(url), expected, "{url}");
        }
    }

    #[test]
    fn the_input_and_the_client_read_a_url_alike() {
        for text in [
            "http://h:8080/a/b?q=1#f",
            "https://user@h/x?",
            "http://[::1]:9/",
            "https://h",
            "HTTP://H.test:0080/..;/%2e?a=b?c",
        ] {
            let input = InputUrl::parse(text).unwrap();
            let target = scanfleet_http::TargetUrl::parse(text).unwrap();
            assert_eq!(input.scheme, target.scheme.as_str(), "{text}");
            assert_eq!(input.host.to_ascii_lowercase(), target.host, "{text}");
            assert_eq!(input.port.parse::<u16>().ok(), Some(target.port), "{text}");
            assert_eq!(input.path, target.path, "{text}");
            assert_eq!(
                input.query,
                target.query.filter(|q| !q.is_empty()),
                "{text}"
            );
        }
        // As written: `{{Port}}` keeps its digits, `{{Hostname}}` its case.
        let u = InputUrl::parse("http://H.test:0080/").unwrap();
        assert_eq!(
            (u.authority.as_str(), u.port.as_str()),
            ("H.test:0080", "0080")
        );
        for bad in [
            "h/x",
            "ftp://h",
            "http://",
            "http://h:x/",
            "http://::1/",
            "http://[::1",
        ] {
            assert!(InputUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ipv6_hosts_lose_their_brackets_only_in_host() {
        let u = InputUrl::parse("http://[::1]:8080/x").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.authority, "[::1]:8080");
        assert_eq!(u.port, "8080");
    }

    #[test]
    fn merge_paths_matches_the_documented_examples() {
        assert_eq!(merge_paths("/blog", "/admin"), "/blog/admin");
        assert_eq!(
            merge_paths("/blog/wp", "/wp-content"),
            "/blog/wp/wp-content"
        );
        assert_eq!(
            merge_paths("/blog/admin", "/blog/admin/profile"),
            "/blog/admin/profile"
        );
        assert_eq!(merge_paths("/blog/admin", "/blog"), "/blog/admin/blog");
        assert_eq!(merge_paths("/app/", "/.git/config"), "/app/.git/config");
        assert_eq!(merge_paths("", "/x"), "/x");
        assert_eq!(merge_paths("/x", ""), "/x");
    }

    #[test]
    fn queries_merge_input_first_without_repeating_pairs() {
        assert_eq!(
            merge_query(Some("a=1"), Some("b=2")).as_deref(),
            Some("a=1&b=2")
        );
        assert_eq!(
            merge_query(Some("a=1"), Some("a=1")).as_deref(),
            Some("a=1")
        );
        assert_eq!(merge_query(None, None), None);
        assert_eq!(merge_query(None, Some("%2e=x")).as_deref(), Some("%2e=x"));
    }

    #[test]
    fn go_path_helpers_behave_like_go() {
        assert_eq!(go_path_dir("/app/"), "/app");
        assert_eq!(go_path_dir("/a"), "/");
        assert_eq!(go_path_base("/app/"), "app");
        assert_eq!(go_path_base("/"), "/");
        assert_eq!(go_path_dir(""), ".");
    }
}
