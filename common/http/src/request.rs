//! Requests as the engine builds them, and their exact wire form.

use super::error::HttpError;
use super::url::TargetUrl;

/// One HTTP request. `target` is sent byte for byte as the request-target;
/// `url` only says where to connect (scheme, host, port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub url: TargetUrl,
    pub method: String,
    /// Request-target bytes as written (`/..;/admin`, `/%2e%2e/`, ...).
    pub target: Vec<u8>,
    /// In order, original case; missing defaults are added on the wire.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Values added to a request when it lacks them.
pub(crate) struct WireDefaults<'a> {
    pub(crate) user_agent: &'a str,
}

impl Request {
    /// A bodiless request for `target` on `url`'s origin.
    pub fn new(url: &TargetUrl, method: &str, target: impl Into<Vec<u8>>) -> Request {
        Request {
            url: url.clone(),
            method: method.to_string(),
            target: target.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A GET of the input URL itself (its path and query).
    pub fn get(url: &TargetUrl) -> Request {
        Request::new(url, "GET", url.request_target())
    }

    /// The first value of header `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The URL this request addresses, for reports and redirect chains.
    pub fn full_url(&self) -> String {
        self.url.with_target(&self.target)
    }

    /// Parses a Nuclei `raw` block (after `{{...}}` interpolation) into a
    /// request on `base`, the way Nuclei does for non-`unsafe` raw requests:
    ///
    /// - lines before the request line that start with `@` (annotations) are
    ///   skipped; head lines may end in `\n` or `\r\n` (sent as CRLF);
    /// - the request-target is joined to the input path (`/` or an empty
    ///   target means the input path itself; a full `http...` URL
    ///   contributes its path); the input query comes first, then the
    ///   template's;
    /// - `Host` is added (first) when missing;
    /// - the body is everything after the blank line, minus one trailing
    ///   line end (kept for multipart bodies), and `Content-Length` is set
    ///   to its length.
    pub fn parse_raw(raw: &[u8], base: &TargetUrl) -> Result<Request, HttpError> {
        let invalid = |reason: String| HttpError::InvalidRequest { reason };
        let mut rest = raw;
        // Leading blank lines and annotation lines carry no request data.
        let request_line = loop {
            let (line, after) = split_line(rest);
            let trimmed = line.trim_ascii();
            if after.is_none() && trimmed.is_empty() {
                return Err(invalid("raw request is empty".to_string()));
            }
            rest = after.unwrap_or_default();
            if trimmed.is_empty() || trimmed.starts_with(b"@") {
                continue;
            }
            break trimmed;
        };
        let line_text = super::utf8_lossy(request_line);
        let mut parts: Vec<&str> = line_text.split_ascii_whitespace().collect();
        if parts.len() == 2 && parts[1].contains("HTTP") {
            parts.insert(1, "");
        }
        if parts.len() < 3 {
            return Err(invalid(format!(
                "malformed request line {line_text:?}: expected METHOD TARGET VERSION"
            )));
        }
        let method = parts[0].to_string();
        // The target may contain spaces only in unsafe mode; here the
        // middle fields are the target, as Nuclei's field split would give
        // the first one only and then fail on the version.
        let written_target = parts[1..parts.len() - 1].join(" ");

        let mut headers: Vec<(String, String)> = Vec::new();
        loop {
            let (line, after) = split_line(rest);
            rest = after.unwrap_or_default();
            let trimmed = line.trim_ascii();
            if trimmed.is_empty() {
                break;
            }
            let text = super::utf8_lossy(trimmed);
            if let Some((name, value)) = text.split_once(':') {
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
            if after.is_none() {
                break;
            }
        }
        let multipart = headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("content-type") && v.to_ascii_lowercase().contains("multipart/")
        });
        let mut body = rest.to_vec();
        if !multipart {
            if body.ends_with(b"\r\n") {
                body.truncate(body.len() - 2);
            } else if body.ends_with(b"\n") {
                body.truncate(body.len() - 1);
            }
        }

        let target = merge_target(base, &written_target)?;
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            headers.insert(0, ("Host".to_string(), base.authority()));
        }
        let mut req = Request {
            url: base.clone(),
            method,
            target: target.into_bytes(),
            headers,
            body,
        };
        req.set_content_length();
        Ok(req)
    }

    /// Makes `Content-Length` agree with the body: replaced in place when
    /// present, added when absent, removed for an empty body except on
    /// POST/PUT/PATCH (which say `0`, as browsers do). A request that sets
    /// `Transfer-Encoding` frames its own body and is left alone.
    pub fn set_content_length(&mut self) {
        let Some((value, first)) = self.content_length_plan() else {
            return;
        };
        self.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("content-length"));
        if let Some(value) = value {
            let at = first.unwrap_or(self.headers.len()).min(self.headers.len());
            self.headers
                .insert(at, ("Content-Length".to_string(), value));
        }
    }

    /// What [`Request::set_content_length`] does: `None` when it leaves the
    /// headers alone (`Transfer-Encoding` is set); otherwise every
    /// `Content-Length` goes, and the value to write, if any, takes the
    /// place of the first one (index given), or the end.
    fn content_length_plan(&self) -> Option<(Option<String>, Option<usize>)> {
        if self.header("transfer-encoding").is_some() {
            return None;
        }
        let wants_zero = ["POST", "PUT", "PATCH"]
            .iter()
            .any(|m| self.method.eq_ignore_ascii_case(m));
        let value = if !self.body.is_empty() || wants_zero {
            Some(self.body.len().to_string())
        } else {
            None
        };
        let first = self
            .headers
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case("content-length"));
        Some((value, first))
    }

    /// The bytes sent: request line with the target as written, `Host`
    /// first when missing, the headers in order, then the missing defaults,
    /// then the body. `cookie` (from the jar) is appended to an existing
    /// `Cookie` header or added.
    pub(crate) fn to_wire(&self, defaults: &WireDefaults<'_>, cookie: Option<&str>) -> Vec<u8> {
        // As if `set_content_length` had run, without copying the request.
        let (mut length, first_length, managed) = match self.content_length_plan() {
            Some((value, first)) => (value, first, true),
            None => (None, None, false),
        };
        let mut out = Vec::with_capacity(256 + self.body.len());
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        if self.target.is_empty() {
            out.push(b'/');
        } else {
            out.extend_from_slice(&self.target);
        }
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let mut push = |name: &str, value: &str| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        if self.header("host").is_none() {
            push("Host", &self.url.authority());
        }
        let mut cookie_sent = false;
        for (i, (name, value)) in self.headers.iter().enumerate() {
            if managed && name.eq_ignore_ascii_case("content-length") {
                if first_length == Some(i) {
                    if let Some(length) = length.take() {
                        push("Content-Length", &length);
                    }
                }
                continue;
            }
            match cookie {
                Some(extra) if !cookie_sent && name.eq_ignore_ascii_case("cookie") => {
                    let joined = format!("{}; {}", value.trim_end_matches([';', ' ']), extra);
                    push(name, &joined);
                    cookie_sent = true;
                }
                _ => push(name, value),
            }
        }
        if let Some(length) = length.take() {
            push("Content-Length", &length);
        }
        if let (Some(extra), false) = (cookie, cookie_sent) {
            push("Cookie", extra);
        }
        let defaults: [(&str, &str); 4] = [
            ("User-Agent", defaults.user_agent),
            ("Accept", "*/*"),
            ("Accept-Encoding", "gzip"),
            ("Connection", "keep-alive"),
        ];
        for (name, value) in defaults {
            if self.header(name).is_none() {
                push(name, value);
            }
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    /// Whether the server may be asked to keep the connection: the request
    /// does not say `Connection: close`.
    pub(crate) fn allows_keep_alive(&self) -> bool {
        !self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
            .any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Splits off the first line (without its `\n` or `\r\n`); `None` for the
/// rest when there was no line end.
fn split_line(input: &[u8]) -> (&[u8], Option<&[u8]>) {
    match input.iter().position(|&b| b == b'\n') {
        Some(i) => {
            let line = &input[..i];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            (line, Some(&input[i + 1..]))
        }
        None => (input, None),
    }
}

/// The request-target for a raw request's written target on `base`.
fn merge_target(base: &TargetUrl, written: &str) -> Result<String, HttpError> {
    let relative = if written.starts_with("http") {
        let full = TargetUrl::parse(written)?;
        match &full.query {
            Some(q) => format!("{}?{}", full.path, q),
            None => full.path,
        }
    } else if written == "/" {
        String::new()
    } else {
        written.to_string()
    };
    let (rel_path, rel_query) = match relative.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (relative.clone(), None),
    };
    let mut path = merge_paths(&base.path, &rel_path);
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    let query = match (&base.query, rel_query) {
        (Some(b), Some(r)) if !b.is_empty() && !r.is_empty() => Some(format!("{b}&{r}")),
        (Some(b), Some(r)) => Some(if b.is_empty() { r } else { b.clone() }),
        (Some(b), None) => Some(b.clone()),
        (None, r) => r,
    };
    Ok(match query {
        Some(q) => format!("{path}?{q}"),
        None => path,
    })
}

/// Joins a template path onto the input path without normalising it, with
/// Nuclei's de-duplication: a template path that already starts with the
/// input path (or is its suffix) is not repeated.
pub(crate) fn merge_paths(base: &str, add: &str) -> String {
    let mut add = add.to_string();
    if base.ends_with('/') && add.starts_with('/') {
        add = add.trim_start_matches('/').to_string();
    }
    if base.is_empty() {
        return add;
    }
    if add.is_empty() {
        return base.to_string();
    }
    if !base.ends_with('/') && !add.starts_with('/') {
        add.insert(0, '/');
    }
    if base == add || (base.len() > add.len() && base.ends_with(&add)) {
        base.to_string()
    } else if base.len() < add.len() && add.starts_with(base) {
        add
    } else {
        format!("{base}{add}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(url: &str) -> TargetUrl {
        TargetUrl::parse(url).expect("test URL parses")
    }

    #[test]
    fn path_merging_follows_nuclei_examples() {
        let cases = [
            ("/blog", "/admin", "/blog/admin"),
            ("/", "/", "/"),
            ("", "/admin", "/admin"),
            ("/blog/test", "/wp-content", "/blog/test/wp-content"),
            (
                "/blog/test/",
                "/blog/test/profile",
                "/blog/test/blog/test/profile",
            ),
            ("/blog/admin", "/blog/admin/profile", "/blog/admin/profile"),
            ("/admin", "/%20test%0a", "/admin/%20test%0a"),
            ("", "../../../etc/passwd", "../../../etc/passwd"),
            ("/app", "/..;/admin", "/app/..;/admin"),
        ];
        for (a, b, want) in cases {
            assert_eq!(merge_paths(a, b), want, "{a} + {b}");
        }
    }

    #[test]
    fn raw_targets_are_appended_to_the_input_path_and_queries_merged() {
        let b = base("http://h.test:8080/app?token=1");
        let cases = [
            ("GET / HTTP/1.1", "/app?token=1"),
            ("GET HTTP/1.1", "/app?token=1"),
            ("GET /login?x=2 HTTP/1.1", "/app/login?token=1&x=2"),
            (
                "GET /%2e%2e/etc/passwd HTTP/1.1",
                "/app/%2e%2e/etc/passwd?token=1",
            ),
            (
                "GET http://other.test/abs?y=3 HTTP/1.1",
                "/app/abs?token=1&y=3",
            ),
        ];
        for (line, want) in cases {
            let raw = format!("{line}\nHost: h.test\n\n");
            let req = Request::parse_raw(raw.as_bytes(), &b).expect("parses");
            assert_eq!(String::from_utf8_lossy(&req.target), want, "{line}");
        }
        let root = base("http://h.test");
        let req = Request::parse_raw(b"GET / HTTP/1.1\n\n", &root).expect("parses");
        assert_eq!(req.target, b"/");
    }

    #[test]
    fn raw_parsing_defaults_host_and_recomputes_content_length() {
        let raw = b"@timeout: 5s\nPOST /api HTTP/1.1\nContent-Type: application/json\nContent-Length: 999\n\n{\"a\":1}\n";
        let req = Request::parse_raw(raw, &base("http://h.test:81")).expect("parses");
        assert_eq!(req.method, "POST");
        assert_eq!(req.body, b"{\"a\":1}");
        assert_eq!(
            req.headers,
            vec![
                ("Host".to_string(), "h.test:81".to_string()),
                ("Content-Type".to_string(), "application/json".to_string()),
                ("Content-Length".to_string(), "7".to_string()),
            ]
        );
    }

    #[test]
    fn a_request_line_without_a_version_is_rejected() {
        let err = Request::parse_raw(b"GET\nHost: x\n\n", &base("http://h.test"));
        assert!(matches!(err, Err(HttpError::InvalidRequest { .. })));
        let err = Request::parse_raw(b"\n\n", &base("http://h.test"));
        assert!(matches!(err, Err(HttpError::InvalidRequest { .. })));
    }

    #[test]
    fn wire_form_keeps_header_order_and_adds_missing_defaults() {
        let mut req = Request::new(&base("https://h.test:8443"), "GET", "/a/../b");
        req.headers.push(("X-Test".into(), "1".into()));
        req.headers.push(("Cookie".into(), "a=1;".into()));
        let wire = req.to_wire(&WireDefaults { user_agent: "ua/1" }, Some("b=2"));
        assert_eq!(
            String::from_utf8_lossy(&wire),
            "GET /a/../b HTTP/1.1\r\nHost: h.test:8443\r\nX-Test: 1\r\nCookie: a=1; b=2\r\n\
             User-Agent: ua/1\r\nAccept: */*\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn wire_form_sets_content_length_as_set_content_length_would() {
        let defaults = WireDefaults { user_agent: "ua/1" };
        let raws: [&[u8]; 7] = [
            b"POST /a HTTP/1.1\nX-A: 1\nContent-Length: 99\nX-B: 2\ncontent-length: 7\n\nbody",
            b"POST /a HTTP/1.1\nX-A: 1\n\n",
            b"GET /a HTTP/1.1\nContent-Length: 5\nX-A: 1\n\n",
            b"GET /a HTTP/1.1\nX-A: 1\n\nwith body",
            b"POST /a HTTP/1.1\nTransfer-Encoding: chunked\nContent-Length: 3\n\n0\r\n\r\n",
            b"PUT /a HTTP/1.1\nCookie: a=1\n\nx",
            b"DELETE /a HTTP/1.1\n\n",
        ];
        for raw in raws {
            let req = Request::parse_raw(raw, &base("http://h.test")).expect("parses");
            let mut normalised = req.clone();
            normalised.set_content_length();
            for cookie in [None, Some("c=3")] {
                assert_eq!(
                    String::from_utf8_lossy(&req.to_wire(&defaults, cookie)),
                    String::from_utf8_lossy(&normalised.to_wire(&defaults, cookie)),
                    "{}",
                    String::from_utf8_lossy(raw)
                );
            }
        }
        let req = Request::parse_raw(raws[0], &base("http://h.test")).expect("parses");
        let wire = String::from_utf8_lossy(&req.to_wire(&defaults, None)).into_owned();
        assert!(
            wire.contains("X-A: 1\r\nContent-Length: 4\r\nX-B: 2\r\nUser-Agent"),
            "{wire}"
        );
    }
}
