//! Responses and the text views the matchers read.

use std::time::Duration;

use bytes::Bytes;

/// The final response of a request, after any redirects, with the
/// redirect responses that led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// As the server wrote it, e.g. `HTTP/1.1`.
    pub proto: String,
    pub reason: String,
    /// In order, names as received.
    pub headers: Vec<(String, String)>,
    /// Decoded (gzip/deflate) body, at most `ClientConfig::body_cap` bytes;
    /// shared, not copied, by clones and by the variables matched against.
    pub body: Bytes,
    pub body_truncated: bool,
    /// Whether the body arrived compressed and was decoded.
    pub content_decoded: bool,
    /// URL of the request that produced this response.
    pub final_url: String,
    /// Time spent on the wire for this request and its redirects; waiting
    /// for a concurrency permit or the rate limiter is not counted, so
    /// time-based checks are not fooled by a busy scanner.
    pub duration: Duration,
    /// URLs requested before the final one, each of which answered with a
    /// redirect that was followed; empty when none was.
    pub redirect_chain: Vec<String>,
    /// The redirect responses behind `redirect_chain`, in the same order,
    /// each with its own URL in `final_url` and its own wire time. Kept
    /// because Nuclei judges every response of a followed chain, so the
    /// status and headers of an intermediate hop can match on their own.
    pub redirect_responses: Vec<Response>,
}

impl Response {
    /// The first value of header `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of header `name`, in order.
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `header` part as Nuclei builds it (Go's response dump without
    /// the body): the status line, then `Content-Length` or
    /// `Transfer-Encoding: chunked`, then the other headers with canonical
    /// names (`content-type` -> `Content-Type`) sorted by name, each line
    /// ending in CRLF, and a final empty line. As in Go, a body that was
    /// decoded drops `Content-Encoding` and `Content-Length`.
    pub fn raw_header(&self) -> String {
        let reason = if self.reason.is_empty() {
            standard_reason(self.status)
        } else {
            &self.reason
        };
        let proto = if self.proto.is_empty() {
            "HTTP/1.1"
        } else {
            &self.proto
        };
        let mut out = String::with_capacity(256);
        out.push_str(proto);
        out.push(' ');
        out.push_str(itoa::Buffer::new().format(self.status));
        out.push(' ');
        out.push_str(reason);
        out.push_str("\r\n");
        let chunked = self.headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        });
        if chunked {
            out.push_str("Transfer-Encoding: chunked\r\n");
        } else if !self.content_decoded {
            if let Some(len) = self.header("content-length") {
                out.push_str("Content-Length: ");
                out.push_str(len.trim());
                out.push_str("\r\n");
            }
        }
        let mut rest: Vec<(&str, bool, &str)> = self
            .headers
            .iter()
            .filter(|(n, _)| {
                let excluded = ["content-length", "transfer-encoding", "trailer"];
                let decoded_only =
                    self.content_decoded && n.eq_ignore_ascii_case("content-encoding");
                !decoded_only && !excluded.iter().any(|e| n.eq_ignore_ascii_case(e))
            })
            .map(|(n, v)| (n.as_str(), is_token(n), v.as_str()))
            .collect();
        // By canonical name, compared without building it. Stable: several
        // values of one header keep their order.
        rest.sort_by(|a, b| canonical_bytes(a.0, a.1).cmp(canonical_bytes(b.0, b.1)));
        for (name, _, value) in rest {
            push_canonical(&mut out, name);
            out.push_str(": ");
            out.push_str(value);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        out
    }

    /// The `raw`/`response` part: [`Response::raw_header`] followed by the body.
    pub fn raw(&self) -> Vec<u8> {
        let mut out = self.raw_header().into_bytes();
        out.extend_from_slice(&self.body);
        out
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Go's canonical MIME header form: first letter and every letter after a
/// hyphen upper case, the rest lower case. Names with characters outside
/// the token set are left unchanged, as Go does.
pub fn canonical_header_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    push_canonical(&mut out, name);
    out
}

/// Whether Go would canonicalize `name`: a non-empty HTTP token.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The bytes of [`canonical_header_name`], without building the string;
/// `token` is [`is_token`] of the name.
fn canonical_bytes(name: &str, token: bool) -> impl Iterator<Item = u8> + '_ {
    let mut upper = true;
    name.bytes().map(move |b| {
        if !token {
            return b;
        }
        let out = if upper {
            b.to_ascii_uppercase()
        } else {
            b.to_ascii_lowercase()
        };
        upper = b == b'-';
        out
    })
}

/// Appends [`canonical_header_name`] of `name` to `out`.
fn push_canonical(out: &mut String, name: &str) {
    if is_token(name) {
        // A token is ASCII, so each byte is a char.
        out.extend(canonical_bytes(name, true).map(char::from));
    } else {
        out.push_str(name);
    }
}

fn standard_reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// A response for tests: `HTTP/1.1 200 OK` from `http://h.test/` with
/// `headers` and the body `hello`, received at once.
#[cfg(any(test, feature = "test-util"))]
pub fn test_response(headers: &[(&str, &str)]) -> Response {
    Response {
        status: 200,
        proto: "HTTP/1.1".into(),
        reason: "OK".into(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        body: Bytes::from_static(b"hello"),
        body_truncated: false,
        content_decoded: false,
        final_url: "http://h.test/".into(),
        duration: Duration::ZERO,
        redirect_chain: Vec::new(),
        redirect_responses: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(headers: &[(&str, &str)]) -> Response {
        test_response(headers)
    }

    #[test]
    fn header_part_is_built_like_nuclei_with_canonical_sorted_names() {
        let r = response(&[
            ("x-powered-by", "PHP/8"),
            ("Content-Length", "5"),
            ("set-cookie", "b=2"),
            ("Content-Type", "text/html"),
            ("Set-Cookie", "a=1"),
        ]);
        assert_eq!(
            r.raw_header(),
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/html\r\n\
             Set-Cookie: b=2\r\nSet-Cookie: a=1\r\nX-Powered-By: PHP/8\r\n\r\n"
        );
        assert_eq!(r.raw(), [r.raw_header().as_bytes(), b"hello"].concat());
        assert_eq!(r.header("CONTENT-TYPE"), Some("text/html"));
    }

    #[test]
    fn header_part_of_a_decoded_body_drops_encoding_and_length() {
        let mut r = response(&[("Content-Encoding", "gzip"), ("Content-Length", "40")]);
        r.content_decoded = true;
        r.reason.clear();
        assert_eq!(r.raw_header(), "HTTP/1.1 200 OK\r\n\r\n");
    }

    #[test]
    fn canonical_names_match_go() {
        assert_eq!(canonical_header_name("content-type"), "Content-Type");
        assert_eq!(canonical_header_name("X-FORWARDED-FOR"), "X-Forwarded-For");
        assert_eq!(canonical_header_name("bad header"), "bad header");
    }

    #[test]
    fn header_part_orders_names_as_sorting_their_canonical_forms_would() {
        let headers = [
            ("x-b", "1"),
            ("X-a", "2"),
            ("bad header", "3"),
            ("x-B", "4"),
            ("a_b", "5"),
            ("Zeta-", "6"),
            ("é", "7"),
        ];
        let mut expected: Vec<(String, &str)> = headers
            .iter()
            .map(|(n, v)| (canonical_header_name(n), *v))
            .collect();
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        let mut want = "HTTP/1.1 200 OK\r\n".to_string();
        for (n, v) in expected {
            want.push_str(&format!("{n}: {v}\r\n"));
        }
        want.push_str("\r\n");
        assert_eq!(response(&headers).raw_header(), want);
    }
}
