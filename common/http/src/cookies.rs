//! A small cookie jar, one per (template, target).
//!
//! Multi-step templates log in with one request and use the session in the
//! next, so `Set-Cookie` answers must come back as `Cookie` on later
//! requests to the same host. Follows RFC 6265 where it matters for that:
//! host-only vs domain cookies, path matching, `Secure`, expiry by
//! `Max-Age`/`Expires`.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::url::{Scheme, TargetUrl};

#[derive(Debug, Clone)]
struct Cookie {
    name: String,
    value: String,
    /// Lower-case host or domain (without leading dot).
    domain: String,
    host_only: bool,
    path: String,
    secure: bool,
    expires: Option<SystemTime>,
}

/// Cookies shared by the requests of one template run against one target.
/// Cloning shares the same jar.
#[derive(Debug, Clone, Default)]
pub struct CookieJar {
    /// Written after every response, read before every request of the run.
    cookies: Arc<Mutex<Vec<Cookie>>>,
}

impl CookieJar {
    pub fn new() -> CookieJar {
        CookieJar::default()
    }

    /// Stores the `Set-Cookie` headers among `headers`, the answer to a
    /// request for `target` on `url`'s origin.
    pub fn store_from_headers(&self, url: &TargetUrl, target: &[u8], headers: &[(String, String)]) {
        let values = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.as_str());
        self.store(url, target, values);
    }

    /// Stores the `Set-Cookie` values of a response to a request for
    /// `target` on `url`'s origin.
    pub fn store<'a>(
        &self,
        url: &TargetUrl,
        target: &[u8],
        set_cookie_values: impl IntoIterator<Item = &'a str>,
    ) {
        let now = SystemTime::now();
        let mut jar = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        for value in set_cookie_values {
            let Some(cookie) = parse_set_cookie(value, url, target, now) else {
                continue;
            };
            jar.retain(|c| {
                !(c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path)
            });
            if cookie.expires.is_none_or(|t| t > now) {
                jar.push(cookie);
            }
        }
    }

    /// The `Cookie` header value for a request, or `None` when no cookie applies.
    pub fn header_for(&self, url: &TargetUrl, target: &[u8]) -> Option<String> {
        let mut jar = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        // Most jars of a scan stay empty: nothing to look up, no clock read.
        if jar.is_empty() {
            return None;
        }
        let now = SystemTime::now();
        jar.retain(|c| c.expires.is_none_or(|t| t > now));
        let path = request_path(target);
        let mut matching: Vec<&Cookie> = jar
            .iter()
            .filter(|c| domain_matches(c, &url.host))
            .filter(|c| path_matches(&c.path, &path))
            .filter(|c| !c.secure || url.scheme == Scheme::Https)
            .collect();
        if matching.is_empty() {
            return None;
        }
        // Longer paths first, as RFC 6265 recommends.
        matching.sort_by_key(|c| std::cmp::Reverse(c.path.len()));
        Some(
            matching
                .iter()
                .map(|c| format!("{}={}", c.name, c.value))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }

    /// Number of live cookies held.
    pub fn len(&self) -> usize {
        let jar = self.cookies.lock().unwrap_or_else(|p| p.into_inner());
        jar.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The path of a request target: up to the first `?`, or `/` when the
/// target is not a path (`*`, an absolute URL).
fn request_path(target: &[u8]) -> Cow<'_, str> {
    let path = memchr::memchr(b'?', target).map_or(target, |i| &target[..i]);
    if path.starts_with(b"/") {
        super::utf8_lossy(path)
    } else {
        Cow::Borrowed("/")
    }
}

/// RFC 6265 default-path: the directory of the request path.
fn default_path(request_path: &str) -> String {
    match request_path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => request_path[..i].to_string(),
    }
}

fn parse_set_cookie(
    value: &str,
    url: &TargetUrl,
    target: &[u8],
    now: SystemTime,
) -> Option<Cookie> {
    let mut parts = value.split(';');
    let (name, val) = parts.next()?.split_once('=')?;
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    let mut cookie = Cookie {
        name: name.to_string(),
        value: val.trim().to_string(),
        domain: url.host.clone(),
        host_only: true,
        path: default_path(&request_path(target)),
        secure: false,
        expires: None,
    };
    let mut max_age_seen = false;
    for attr in parts {
        let (key, v) = match attr.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim()),
            None => (attr.trim().to_ascii_lowercase(), ""),
        };
        match key.as_str() {
            "domain" if !v.is_empty() => {
                let domain = v.trim_start_matches('.').to_ascii_lowercase();
                // A server may only set cookies for its own domain.
                let own = url.host == domain || url.host.ends_with(&format!(".{domain}"));
                if !own {
                    return None;
                }
                cookie.domain = domain;
                cookie.host_only = false;
            }
            "path" if v.starts_with('/') => cookie.path = v.to_string(),
            "secure" => cookie.secure = true,
            "max-age" => {
                if let Ok(secs) = v.parse::<i64>() {
                    max_age_seen = true;
                    cookie.expires = Some(if secs <= 0 {
                        SystemTime::UNIX_EPOCH
                    } else {
                        now + Duration::from_secs(secs.unsigned_abs())
                    });
                }
            }
            "expires" if !max_age_seen => {
                if let Ok(t) = chrono::DateTime::parse_from_rfc2822(&v.replace('-', " ")) {
                    let secs = t.timestamp();
                    cookie.expires = Some(if secs <= 0 {
                        SystemTime::UNIX_EPOCH
                    } else {
                        SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
                    });
                }
            }
            _ => {}
        }
    }
    Some(cookie)
}

fn domain_matches(cookie: &Cookie, host: &str) -> bool {
    if cookie.host_only {
        cookie.domain == host
    } else {
        host == cookie.domain || host.ends_with(&format!(".{}", cookie.domain))
    }
}

fn path_matches(cookie_path: &str, request_path: &str) -> bool {
    request_path == cookie_path
        || (request_path.starts_with(cookie_path)
            && (cookie_path.ends_with('/')
                || request_path.as_bytes().get(cookie_path.len()) == Some(&b'/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> TargetUrl {
        TargetUrl::parse(s).expect("test URL parses")
    }

    #[test]
    fn cookies_return_only_to_matching_hosts_paths_and_schemes() {
        let jar = CookieJar::new();
        let origin = url("http://app.example.test");
        jar.store(
            &origin,
            b"/account/login",
            [
                "session=abc; Path=/; HttpOnly",
                "pref=dark",
                "wide=1; Domain=example.test; Path=/",
                "tls=1; Secure; Path=/",
                "evil=1; Domain=other.test",
            ],
        );
        assert_eq!(jar.len(), 4);
        let header = jar
            .header_for(&origin, b"/account/home")
            .expect("cookies apply");
        assert_eq!(header, "pref=dark; session=abc; wide=1");
        assert_eq!(
            jar.header_for(&origin, b"/other").as_deref(),
            Some("session=abc; wide=1")
        );
        assert_eq!(
            jar.header_for(&url("http://api.example.test"), b"/")
                .as_deref(),
            Some("wide=1")
        );
        assert_eq!(
            jar.header_for(&url("https://app.example.test"), b"/")
                .as_deref(),
            Some("session=abc; wide=1; tls=1")
        );
        assert_eq!(jar.header_for(&url("http://other.test"), b"/"), None);
    }

    #[test]
    fn the_request_path_is_the_target_up_to_its_query() {
        for (target, path) in [
            (&b"/a/b?x=/c"[..], "/a/b"),
            (b"/", "/"),
            (b"/a\xff/b?q", "/a\u{fffd}/b"),
            (b"/\xe2?x", "/\u{fffd}"),
            (b"*", "/"),
            (b"http://h/x", "/"),
            (b"?q=1", "/"),
            (b"", "/"),
        ] {
            assert_eq!(request_path(target), path, "{target:?}");
        }
        // An empty jar answers without a cookie for any target.
        let jar = CookieJar::new();
        assert_eq!(jar.header_for(&url("http://h.test"), b"/a?b"), None);
        jar.store(&url("http://h.test"), b"/a/login", ["sid=1"]);
        assert_eq!(
            jar.header_for(&url("http://h.test"), b"/a/x?y=/")
                .as_deref(),
            Some("sid=1")
        );
        assert_eq!(jar.header_for(&url("http://h.test"), b"/b?/a/"), None);
    }

    #[test]
    fn an_expired_cookie_deletes_the_stored_one() {
        let jar = CookieJar::new();
        let origin = url("http://h.test");
        jar.store(&origin, b"/", ["sid=1"]);
        jar.store(&origin, b"/", ["sid=; Max-Age=0"]);
        assert!(jar.is_empty());
        jar.store(
            &origin,
            b"/",
            ["old=1; Expires=Thu, 01 Jan 1970 00:00:01 GMT"],
        );
        assert!(jar.is_empty());
    }
}
