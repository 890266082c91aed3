//! The variables one HTTP response offers to matchers, extractors and later
//! requests, named as Nuclei names them.

use std::sync::{Arc, OnceLock};

use super::vars::{float_value, int_value, string_value, VarMap};
use crate::dsl::{Bytes, Value, Vars};
use scanfleet_http::Response;

/// The variables of one response, as Nuclei names them: `status_code`,
/// `body`, `header` and `all_headers` (status line plus headers),
/// `response` (header plus body), `content_length`, `duration` (seconds),
/// `host`, `matched`, `request`, `template-id`, `type`, every header as a
/// lower_snake name (repeated headers joined by a space) and every cookie
/// set by the response under its lower-cased name. A fixed name wins over a
/// header of the same name, and a header over a cookie, as in Nuclei.
///
/// Made for every response, so nothing is built up front: a value is made
/// when a matcher, an extractor or a later request reads it, and the header
/// dump and the raw response once, on the first read. The body is shared,
/// not copied.
pub struct ResponseVars {
    resp: Arc<Response>,
    request: Bytes,
    names: RunNames,
    head: OnceLock<Bytes>,
    full: OnceLock<Bytes>,
}

/// The names every response defines, whatever its headers.
const FIXED: [&str; 12] = [
    "host",
    "matched",
    "request",
    "response",
    "status_code",
    "body",
    "all_headers",
    "header",
    "duration",
    "content_length",
    "template-id",
    "type",
];

impl ResponseVars {
    pub fn new(resp: Arc<Response>, request_dump: &Bytes, names: &RunNames) -> ResponseVars {
        ResponseVars {
            resp,
            request: request_dump.clone(),
            names: names.clone(),
            head: OnceLock::new(),
            full: OnceLock::new(),
        }
    }

    /// Status line and headers, as Nuclei dumps them.
    fn head(&self) -> &Bytes {
        self.head
            .get_or_init(|| Bytes::from(self.resp.raw_header().into_bytes()))
    }

    /// Header dump followed by the body.
    fn full(&self) -> &Bytes {
        self.full.get_or_init(|| {
            let head = self.head();
            let mut full = Vec::with_capacity(head.len() + self.resp.body.len());
            full.extend_from_slice(head);
            full.extend_from_slice(&self.resp.body);
            Bytes::from(full)
        })
    }

    fn fixed(&self, name: &str) -> Option<Value> {
        Some(match name {
            "host" => self.names.host.clone(),
            "matched" => Value::from(self.resp.final_url.as_str()),
            "request" => Value::Str(self.request.clone()),
            "response" => Value::Str(self.full().clone()),
            "status_code" => int_value(i64::from(self.resp.status)),
            "body" => Value::Str(self.resp.body.clone()),
            "all_headers" | "header" => Value::Str(self.head().clone()),
            "duration" => float_value(self.resp.duration.as_secs_f64()),
            "content_length" => int_value(
                self.resp
                    .header("content-length")
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .unwrap_or(self.resp.body.len() as i64),
            ),
            "template-id" => self.names.template_id.clone(),
            "type" => Value::Str(Bytes::from_static(b"http")),
            _ => return None,
        })
    }

    /// The headers whose lower_snake name is `name`, values joined by a space.
    fn header_named(&self, name: &str) -> Option<Value> {
        let mut joined: Option<String> = None;
        for (_, v) in self.resp.headers.iter().filter(|(n, _)| snake_is(n, name)) {
            match &mut joined {
                Some(j) => {
                    j.push(' ');
                    j.push_str(v);
                }
                None => joined = Some(v.clone()),
            }
        }
        joined.map(string_value)
    }

    /// The value of the last cookie the response sets under `name` (lower case).
    fn cookie_named(&self, name: &str) -> Option<Value> {
        self.cookies()
            .filter(|(c, _)| lower_is(c, name))
            .last()
            .map(|(_, v)| Value::from(v))
    }

    fn cookies(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.resp
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
            .filter_map(|(_, v)| cookie_pair(v))
    }

    /// Every variable as a map, for the `{id}_` copy a block with an id
    /// leaves as history.
    pub fn to_map(&self) -> VarMap {
        let names = self
            .cookies()
            .map(|(c, _)| c.to_ascii_lowercase())
            .chain(
                self.resp
                    .headers
                    .iter()
                    .map(|(n, _)| n.trim().replace('-', "_").to_ascii_lowercase()),
            )
            .chain(FIXED.iter().map(|n| n.to_string()));
        let mut map = VarMap::default();
        for name in names {
            if let std::collections::hash_map::Entry::Vacant(slot) = map.entry(name) {
                if let Some(v) = self.get(slot.key()) {
                    slot.insert(v);
                }
            }
        }
        map
    }
}

impl Vars for ResponseVars {
    fn get(&self, name: &str) -> Option<Value> {
        self.fixed(name)
            .or_else(|| self.header_named(name))
            .or_else(|| self.cookie_named(name))
    }

    fn contains(&self, name: &str) -> bool {
        FIXED.contains(&name)
            || self.resp.headers.iter().any(|(n, _)| snake_is(n, name))
            || self.cookies().any(|(c, _)| lower_is(c, name))
    }
}

/// Whether header `header`'s lower_snake form (trimmed, `-` as `_`, ASCII
/// lower case) is `name`, without building it.
fn snake_is(header: &str, name: &str) -> bool {
    let header = header.trim();
    header.len() == name.len()
        && header.bytes().zip(name.bytes()).all(|(h, n)| {
            n == if h == b'-' {
                b'_'
            } else {
                h.to_ascii_lowercase()
            }
        })
}

/// Whether `s` in ASCII lower case is `name`.
fn lower_is(s: &str, name: &str) -> bool {
    s.len() == name.len()
        && s.bytes()
            .zip(name.bytes())
            .all(|(a, b)| a.to_ascii_lowercase() == b)
}

/// The `host` and `template-id` values of every response of one template
/// execution, made once.
#[derive(Clone)]
pub struct RunNames {
    pub host: Value,
    pub template_id: Value,
}

impl RunNames {
    pub fn new(host: &str, template_id: &str) -> RunNames {
        RunNames {
            host: Value::from(host),
            template_id: Value::from(template_id),
        }
    }
}

/// `name=value` of a Set-Cookie header.
fn cookie_pair(header: &str) -> Option<(&str, &str)> {
    let first = header.split(';').next()?;
    let (name, value) = first.split_once('=')?;
    let name = name.trim();
    (!name.is_empty()).then_some((name, value.trim()))
}

/// A response's variables as the `_N` history names them (`body_1`,
/// `status_code_2`): a view, nothing is copied.
pub struct Numbered {
    vars: Arc<ResponseVars>,
    suffix: String,
}

impl Numbered {
    pub fn new(vars: Arc<ResponseVars>, n: usize) -> Numbered {
        Numbered {
            vars,
            suffix: format!("_{n}"),
        }
    }
}

impl Vars for Numbered {
    fn get(&self, name: &str) -> Option<Value> {
        self.vars.get(name.strip_suffix(self.suffix.as_str())?)
    }

    fn contains(&self, name: &str) -> bool {
        name.strip_suffix(self.suffix.as_str())
            .is_some_and(|base| self.vars.contains(base))
    }
}

/// The block-id copy of a response's variables (`login_body`).
pub fn prefixed(vars: &VarMap, id: &str) -> VarMap {
    vars.iter()
        .map(|(k, v)| (format!("{id}_{k}"), v.clone()))
        .collect()
}

/// Shares a map as a scope layer.
pub fn shared(vars: VarMap) -> Arc<VarMap> {
    Arc::new(vars)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn vars() -> ResponseVars {
        let headers = [
            ("Set-Cookie", "SID=abc; Path=/"),
            ("Set-Cookie", "Theme=dark"),
            ("Set-Cookie", "x_powered_by=from-cookie"),
            ("Set-Cookie", "sid=second"),
            ("X-Powered-By", "PHP/8"),
            ("Vary", "Accept"),
            ("Content-Length", "5"),
            ("vary", "Cookie"),
            ("Host", "from-header"),
        ];
        let resp = Response {
            status: 404,
            reason: "Not Found".into(),
            final_url: "http://h.test/x".into(),
            duration: Duration::from_millis(1500),
            ..scanfleet_http::test_response(&headers)
        };
        ResponseVars::new(
            Arc::new(resp),
            &Bytes::from_static(b"GET /x HTTP/1.1\r\n\r\n"),
            &RunNames::new("h.test", "tpl"),
        )
    }

    fn text(v: &ResponseVars, name: &str) -> Option<String> {
        v.get(name).map(|v| v.to_string_lossy())
    }

    #[test]
    fn names_resolve_fixed_first_then_headers_then_cookies() {
        let v = vars();
        assert_eq!(text(&v, "status_code").as_deref(), Some("404"));
        assert_eq!(text(&v, "body").as_deref(), Some("hello"));
        let head = text(&v, "header").unwrap();
        assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
        assert_eq!(text(&v, "all_headers"), Some(head.clone()));
        assert_eq!(text(&v, "response"), Some(format!("{head}hello")));
        assert_eq!(text(&v, "content_length").as_deref(), Some("5"));
        assert_eq!(text(&v, "duration").as_deref(), Some("1.5"));
        assert_eq!(text(&v, "matched").as_deref(), Some("http://h.test/x"));
        assert_eq!(
            text(&v, "request").as_deref(),
            Some("GET /x HTTP/1.1\r\n\r\n")
        );
        assert_eq!(text(&v, "template-id").as_deref(), Some("tpl"));
        assert_eq!(text(&v, "type").as_deref(), Some("http"));
        // A fixed name wins over a header of that name.
        assert_eq!(text(&v, "host").as_deref(), Some("h.test"));
        // Headers: lower_snake names, repeated ones joined by a space, and
        // over a cookie of the same name.
        assert_eq!(text(&v, "x_powered_by").as_deref(), Some("PHP/8"));
        assert_eq!(text(&v, "vary").as_deref(), Some("Accept Cookie"));
        assert_eq!(v.get("X-Powered-By").map(|v| v.to_string_lossy()), None);
        assert_eq!(v.get("x-powered-by").map(|v| v.to_string_lossy()), None);
        // Cookies under their lower-cased name; the last one set wins.
        assert_eq!(text(&v, "sid").as_deref(), Some("second"));
        assert_eq!(text(&v, "theme").as_deref(), Some("dark"));
        assert_eq!(text(&v, "Theme"), None);
        assert_eq!(text(&v, "missing"), None);
        for name in ["sid", "vary", "host", "body", "x_powered_by"] {
            assert!(v.contains(name), "{name}");
        }
        assert!(!v.contains("missing"));
        assert!(!v.contains("Theme"));
    }

    #[test]
    fn the_numbered_view_names_each_variable_with_its_request_number() {
        let v = Numbered::new(Arc::new(vars()), 2);
        assert_eq!(
            v.get("status_code_2")
                .map(|v| v.to_string_lossy())
                .as_deref(),
            Some("404")
        );
        assert_eq!(
            v.get("vary_2").map(|v| v.to_string_lossy()).as_deref(),
            Some("Accept Cookie")
        );
        assert_eq!(
            v.get("sid_2").map(|v| v.to_string_lossy()).as_deref(),
            Some("second")
        );
        assert!(v.get("status_code").is_none());
        assert!(v.get("status_code_1").is_none());
        assert!(v.get("missing_2").is_none());
        assert!(v.contains("body_2"));
        assert!(!v.contains("body"));
        assert!(!v.contains("_2"));
    }

    #[test]
    fn the_map_holds_every_name_with_the_value_a_lookup_gives() {
        let v = vars();
        let map = v.to_map();
        let mut names: Vec<&str> = map.keys().map(String::as_str).collect();
        names.sort_unstable();
        // Every fixed name, then the cookies and headers of the response
        // (`set-cookie` itself is a header too).
        let mut expected = FIXED.to_vec();
        expected.extend(["theme", "sid", "x_powered_by", "vary", "set_cookie"]);
        expected.sort_unstable();
        assert_eq!(names, expected);
        assert_eq!(map["x_powered_by"].to_string_lossy(), "PHP/8");
        assert_eq!(map["host"].to_string_lossy(), "h.test");
        assert_eq!(map["sid"].to_string_lossy(), "second");
        assert_eq!(
            map["set_cookie"].to_string_lossy(),
            "SID=abc; Path=/ Theme=dark x_powered_by=from-cookie sid=second"
        );
    }
}
