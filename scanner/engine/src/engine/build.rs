//! Turning one request of a block into bytes for the wire, per Nuclei's rules.
//!
//! Path requests: `{{BaseURL}}:8080` overrides the port, `{{BaseURL}}/x`
//! drops the input path's trailing slash, the rendered URL's query is merged
//! after the input's query. Raw requests: the template's request-target is
//! merged onto the input path (`GET / HTTP/1.1` keeps the input path as is),
//! the input's query is merged in, Host defaults to the input's.
//! Anything still holding `{{...}}` after rendering is not sent.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use super::compile::{CompiledBlock, DigestCredentials, PathSpec, RequestSpec};
use super::url::{join_target, merge_paths, merge_query, split_absolute, split_target, InputUrl};
use super::vars::{RequestLayers, TargetInput};
use crate::dsl::{DslError, RequestedWait, TemplateString, Vars};
use scanfleet_http::{HttpError, Request, TargetUrl};

/// How a built request goes out.
#[derive(Debug, Clone)]
pub enum Outgoing {
    /// Parsed and sent by the client (Content-Length recomputed, Host set).
    Normal(Request),
    /// `unsafe: true` raw request: these exact bytes on a connection to `url`.
    Unsafe { url: TargetUrl, bytes: Vec<u8> },
}

/// A request ready to send.
#[derive(Debug, Clone)]
pub struct Built {
    pub outgoing: Outgoing,
    /// Absolute URL of the request, for reports and errors.
    pub url: String,
    /// The request as sent, for the `request` variable.
    pub dump: Vec<u8>,
    /// What `wait_for(...)` in the request asked to wait before sending
    /// (uncapped; the sender bounds it).
    pub wait: Duration,
    /// The block's Digest credentials, answered by the sender.
    pub digest: Option<Arc<DigestCredentials>>,
}

/// Why a request was not sent; its text is what the scan reports.
#[derive(Debug, thiserror::Error)]
pub enum Skip {
    /// `{{...}}` markers left after rendering.
    #[error("unresolved variables {markers} in {part}")]
    Unresolved { markers: String, part: &'static str },
    /// A marker's expression failed (a helper rejected its input...).
    #[error("could not evaluate {{{{{expr}}}}} in {part}")]
    Evaluation {
        expr: String,
        part: &'static str,
        #[source]
        source: DslError,
    },
    /// An `@Host` or `@tls-sni` annotation naming another host.
    #[error("@{annotation} annotation {value:?} names another host than the target")]
    OtherHost {
        annotation: &'static str,
        value: String,
    },
    /// An `@Host` annotation that is not a host.
    #[error("bad @Host annotation {value:?}")]
    BadHostAnnotation { value: String },
    /// A rendered path that is not a usable URL.
    #[error("bad URL {rendered:?}")]
    BadUrl {
        rendered: String,
        #[source]
        source: HttpError,
    },
    /// The target (or its annotated replacement) is not a usable URL.
    #[error("bad target")]
    BadTarget(#[source] HttpError),
    /// A raw request the client's parser refused.
    #[error("invalid raw request")]
    InvalidRaw(#[source] HttpError),
}

/// Renders `tpl`, refusing results that still contain variables.
fn render(
    tpl: &TemplateString,
    scope: &dyn Vars,
    part: &'static str,
    block: &CompiledBlock,
) -> Result<Vec<u8>, Skip> {
    let rendered = tpl.render(scope);
    // `skip-variables-check: true` sends unresolved markers as written.
    if !rendered.unresolved.is_empty() && !block.skip_variables_check {
        let markers = rendered
            .unresolved
            .iter()
            .map(|v| format!("{{{{{v}}}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Skip::Unresolved { markers, part });
    }
    if let Some((expr, err)) = rendered.errors.into_iter().next() {
        return Err(Skip::Evaluation {
            expr,
            part,
            source: err,
        });
    }
    Ok(rendered.bytes)
}

/// Builds one request of `block`. `scope` holds every variable except the
/// input-derived ones, which depend on the path being built (`input`
/// holds them).
pub fn build(
    block: &CompiledBlock,
    spec: &RequestSpec,
    input: &TargetInput,
    scope: &RequestLayers,
) -> Result<Built, Skip> {
    // Rendering is synchronous on this thread: every `wait_for` of this
    // request is noted between `begin` and `end`.
    let waits = RequestedWait::begin();
    let mut built = match spec {
        RequestSpec::Path(path) => build_path(block, path, input, scope),
        RequestSpec::Raw(raw) => build_raw(block, raw, input, scope),
    }?;
    built.wait = waits.end();
    built.digest = block.digest.clone();
    Ok(built)
}

fn build_path(
    block: &CompiledBlock,
    path: &PathSpec,
    input: &TargetInput,
    scope: &RequestLayers,
) -> Result<Built, Skip> {
    // `{{BaseURL}}:8080` changes the input's port, and so its variables.
    let ported;
    let input = match &path.port_override {
        Some(p) => {
            ported = TargetInput::of(input.url.with_port(p));
            &ported
        }
        None => input,
    };
    // Input variables sit below payloads, template and option variables and
    // above extracted values, as in Nuclei's merge order.
    let scope = scope.with_input(input.layer(path.trailing_slash));
    let target_input = input;
    let input = &input.url;
    let rendered = render(&path.template, &scope, "path", block)?;
    let rendered = scanfleet_http::utf8_lossy(&rendered);
    let (scheme, authority, target) = split_absolute(&rendered).unwrap_or(
        // A bare path is relative to the input's root.
        (Cow::Borrowed(&input.scheme), &input.authority, &rendered),
    );
    let (req_path, req_query) = split_target(target);
    let query = merge_query(input.query.as_deref(), req_query);
    let target = escape_controls(&join_target(req_path, query.as_deref()));
    let url = target_input
        .origin_url(&scheme, authority)
        .map_err(|source| Skip::BadUrl {
            rendered: rendered.to_string(),
            source,
        })?;
    let method = scanfleet_http::utf8_lossy(&render(&block.method, &scope, "method", block)?)
        .trim()
        .to_string();
    let method = if method.is_empty() {
        "GET".to_string()
    } else {
        method
    };
    let mut headers = Vec::with_capacity(block.headers.len());
    for (name, value) in &block.headers {
        let v = render(value, &scope, "headers", block)?;
        headers.push((name.clone(), scanfleet_http::utf8_lossy(&v).into_owned()));
    }
    let body = match &block.body {
        Some(b) => render(b, &scope, "body", block)?,
        None => Vec::new(),
    };
    let full_url = [&scheme, "://", authority, &target].concat();
    let request = Request {
        url,
        method,
        target: target.into_bytes(),
        headers,
        body,
    };
    let dump = dump(&request);
    Ok(Built {
        outgoing: Outgoing::Normal(request),
        url: full_url,
        dump,
        wait: Duration::ZERO,
        digest: None,
    })
}

fn build_raw(
    block: &CompiledBlock,
    raw: &TemplateString,
    input: &TargetInput,
    scope: &RequestLayers,
) -> Result<Built, Skip> {
    let scope = scope.with_input(input.full.clone());
    let text = render(raw, &scope, "raw request", block)?;
    let annotated = raw_destination(&text, &input.url)?;
    // Parsed for unsafe requests too: a target that does not parse skips
    // them as well.
    let base = match &annotated {
        Some(annotated) => TargetUrl::parse(&annotated.original),
        None => input.parsed_url(),
    }
    .map_err(Skip::BadTarget)?;
    if block.unsafe_raw {
        let destination = annotated.as_ref().unwrap_or(&input.url);
        return build_unsafe_raw(&text, destination, input);
    }
    // The client's raw parser applies Nuclei's rules: target merged onto
    // the input path and query, Host defaulted, CRLF line ends,
    // Content-Length recomputed.
    let request = Request::parse_raw(&text, &base).map_err(Skip::InvalidRaw)?;
    let dump = dump(&request);
    Ok(Built {
        url: request.full_url(),
        outgoing: Outgoing::Normal(request),
        dump,
        wait: Duration::ZERO,
        digest: None,
    })
}

/// Where a raw request goes: `None` for the target itself, or the input
/// its `@Host:` annotation names. The runnability check admits only
/// annotations built from the target's own name, so one naming another
/// host, in `@Host:` or in `@tls-sni:`, skips the request.
fn raw_destination(text: &[u8], input: &InputUrl) -> Result<Option<InputUrl>, Skip> {
    let annotated = match annotation(text, "Host") {
        Some(value) if !names_host(&value, &input.host) => {
            return Err(Skip::OtherHost {
                annotation: "Host",
                value,
            });
        }
        Some(value) => Some(
            input
                .with_host_annotation(&value)
                .ok_or(Skip::BadHostAnnotation { value })?,
        ),
        None => None,
    };
    let host = &annotated.as_ref().unwrap_or(input).host;
    // `@tls-sni:` names the TLS server name. The client already sends the
    // target's own name (none for an address, as Go does), and nothing else
    // is admitted: a handshake must never name a third party.
    if let Some(value) = annotation(text, "tls-sni") {
        if !names_host(&value, host) {
            return Err(Skip::OtherHost {
                annotation: "tls-sni",
                value,
            });
        }
    }
    Ok(annotated)
}

/// An `unsafe: true` raw request: only the request-target is rewritten
/// (merged onto the input path, as Nuclei does); every other byte goes out
/// as written.
fn build_unsafe_raw(
    text: &[u8],
    input: &InputUrl,
    target_input: &TargetInput,
) -> Result<Built, Skip> {
    let text = &text[request_line_start(text)..];
    let line_end = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
    let line = scanfleet_http::utf8_lossy(&text[..line_end])
        .trim_end_matches('\r')
        .to_string();
    let mut parts: Vec<&str> = line.split(' ').filter(|p| !p.is_empty()).collect();
    if parts.len() == 2 && parts[1].starts_with("HTTP/") {
        parts.insert(1, "");
    }
    let template_target = parts.get(1).copied().unwrap_or("");
    let new_target = merged_raw_target(template_target, input, true);
    let mut bytes = text.to_vec();
    if !template_target.is_empty() {
        if let Some(at) = super::url::find_bytes(&text[..line_end], template_target.as_bytes()) {
            bytes.splice(at..at + template_target.len(), new_target.bytes());
        }
    }
    let url = target_input
        .origin_url(&input.scheme, &input.authority)
        .map_err(Skip::BadTarget)?;
    let full_url = format!(
        "{}{}",
        input.root_url(),
        if new_target.starts_with('/') {
            new_target.clone()
        } else {
            format!("/{new_target}")
        }
    );
    Ok(Built {
        outgoing: Outgoing::Unsafe {
            url,
            bytes: bytes.clone(),
        },
        url: full_url,
        dump: bytes,
        wait: Duration::ZERO,
        digest: None,
    })
}

/// Where the request line of a raw request starts: after the blank lines
/// and `@annotation` lines before it.
fn request_line_start(text: &[u8]) -> usize {
    let mut start = 0;
    loop {
        let rest = &text[start..];
        let line_end = rest.iter().position(|&b| b == b'\n');
        let line = &rest[..line_end.unwrap_or(rest.len())];
        let blank = line.iter().all(|b| b.is_ascii_whitespace());
        if (blank || line.first() == Some(&b'@')) && line_end.is_some() {
            start += line_end.map_or(rest.len(), |e| e + 1);
            continue;
        }
        return start;
    }
}

/// Whether an annotation value (`host`, `host:port`, `https://host:port/x`,
/// `[::1]:8443`) names `host`.
fn names_host(value: &str, host: &str) -> bool {
    let value = value.trim();
    let lower = value.to_ascii_lowercase();
    let rest = if lower.starts_with("https://") || lower.starts_with("http://") {
        &value[value.find("://").map_or(0, |i| i + 3)..]
    } else {
        value
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let name = match authority.strip_prefix('[') {
        Some(inner) => inner.split(']').next().unwrap_or_default(),
        None => {
            // `{{Hostname}}:9780` renders as `host:port:9780`.
            let mut name = authority;
            while let Some((rest, port)) = name.rsplit_once(':') {
                if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
                    break;
                }
                name = rest;
            }
            name
        }
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    !name.is_empty()
        && name
            .trim_end_matches('.')
            .eq_ignore_ascii_case(host.trim_end_matches('.'))
}

/// The value of the `@name:` annotation line before a raw request's
/// request line, if any.
pub(crate) fn annotation(text: &[u8], name: &str) -> Option<String> {
    // Most requests have no annotation: their first visible byte is an
    // ASCII letter, not `@`, and the text need not be decoded.
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_none_or(|&b| b.is_ascii() && b != b'@') {
        return None;
    }
    let text = scanfleet_http::utf8_lossy(text);
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take_while(|l| l.starts_with('@'))
        .find_map(|l| {
            let rest = l[1..].strip_prefix(name)?;
            let value = rest.trim_start().strip_prefix(':')?;
            Some(value.trim().to_string())
        })
}

/// Percent-encodes spaces, control bytes and non-ASCII characters (as
/// UTF-8) in a path request's target:
/// on the wire they would end the request line (Go's URL writer, which
/// Nuclei uses for `path` requests, encodes them too). Everything else,
/// `%2e` and `..;` included, is left as written.
fn escape_controls(target: &str) -> String {
    let mut out = String::with_capacity(target.len());
    for c in target.chars() {
        if c.is_ascii_control() || c == ' ' || !c.is_ascii() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The request in HTTP/1.1 form, for the `request` variable (the client
/// adds its defaults on the wire; they do not matter to templates).
pub(crate) fn dump(req: &Request) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + req.body.len());
    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(if req.target.is_empty() {
        b"/"
    } else {
        &req.target
    });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if req.header("host").is_none() {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(req.url.authority().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for (n, v) in &req.headers {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&req.body);
    out
}

/// The request-target a raw request is sent with: the template's target
/// merged onto the input path, the input's query first.
pub(crate) fn merged_raw_target(
    template_target: &str,
    input: &InputUrl,
    unsafe_raw: bool,
) -> String {
    if template_target.is_empty() {
        return join_target(&input.path, input.query.as_deref());
    }
    let lower = template_target.to_ascii_lowercase();
    let relative = if lower.starts_with("http://") || lower.starts_with("https://") {
        // A full URL in the request line: only its path and query are used.
        match split_absolute(template_target) {
            Some((_, _, t)) => t.to_string(),
            None => template_target.to_string(),
        }
    } else {
        template_target.to_string()
    };
    let (rel_path, rel_query) = split_target(&relative);
    let rel_path = if rel_path == "/" { "" } else { rel_path };
    if unsafe_raw
        && !rel_path.starts_with('/')
        && !rel_path.is_empty()
        && (input.path.is_empty() || input.path == "/")
    {
        // `GET 1337 HTTP/1.1` in an unsafe request stays relative.
        let query = merge_query(input.query.as_deref(), rel_query);
        return match query {
            Some(q) => format!("{rel_path}?{q}"),
            None => rel_path.to_string(),
        };
    }
    let path = merge_paths(&input.path, rel_path);
    let query = merge_query(input.query.as_deref(), rel_query);
    join_target(&path, query.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(s: &str) -> InputUrl {
        InputUrl::parse(s).unwrap()
    }

    #[test]
    fn a_skip_keeps_the_error_behind_it_as_its_source() {
        let base = TargetUrl::parse("http://h.test").unwrap();
        let cause = Request::parse_raw(b"\n", &base).unwrap_err();
        let skip = Skip::InvalidRaw(cause);
        // Its own text says what failed; the chain says why, once.
        assert_eq!(skip.to_string(), "invalid raw request");
        assert_eq!(
            scanfleet_common::chain::Chain(&skip).to_string(),
            "invalid raw request: invalid request: raw request is empty"
        );
        let source = std::error::Error::source(&skip).expect("the cause is kept");
        assert!(matches!(
            source.downcast_ref::<HttpError>(),
            Some(HttpError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn path_targets_encode_only_spaces_and_control_bytes() {
        assert_eq!(
            escape_controls("/a b/%2e/..;/\r\n"),
            "/a%20b/%2e/..;/%0D%0A"
        );
        assert_eq!(escape_controls("/é"), "/%C3%A9");
    }

    #[test]
    fn host_annotations_are_read_before_the_request_line_only() {
        let raw = b"@Host: https://{{x}}:8443\n@once\nGET / HTTP/1.1\n@Host: no\n";
        assert_eq!(
            annotation(raw, "Host").as_deref(),
            Some("https://{{x}}:8443")
        );
        assert_eq!(annotation(b"GET / HTTP/1.1\n", "Host"), None);
        assert_eq!(annotation(b"@Hostname: x\nGET /\n", "Host"), None);
        // Blank lines, and a non-ASCII space, before the annotation.
        assert_eq!(
            annotation(b"\r\n \t\n@Host: h\nGET /\n", "Host").as_deref(),
            Some("h")
        );
        assert_eq!(
            annotation("\u{a0}@Host: h\nGET /\n".as_bytes(), "Host").as_deref(),
            Some("h")
        );
        assert_eq!(annotation(b"", "Host"), None);
    }

    #[test]
    fn a_host_annotation_replaces_the_origin_and_keeps_path_and_query() {
        let i = input("http://h:8080/app?q=1");
        let a = i.with_host_annotation("h:9780").unwrap();
        assert_eq!(a.root_url(), "http://h:9780");
        assert_eq!((a.path.as_str(), a.query.as_deref()), ("/app", Some("q=1")));
        let a = i.with_host_annotation("https://other").unwrap();
        assert_eq!(a.root_url(), "https://other:8080");
        let a = input("http://h/").with_host_annotation("other").unwrap();
        assert_eq!(a.root_url(), "http://other");
    }

    #[test]
    fn raw_targets_append_to_the_input_path() {
        assert_eq!(
            merged_raw_target("/admin", &input("http://h/app"), false),
            "/app/admin"
        );
        assert_eq!(
            merged_raw_target("/", &input("http://h/app"), false),
            "/app"
        );
        assert_eq!(
            merged_raw_target("/x?b=2", &input("http://h/?a=1"), false),
            "/x?a=1&b=2"
        );
        assert_eq!(merged_raw_target("/", &input("http://h"), false), "/");
        assert_eq!(merged_raw_target("", &input("http://h/p?q"), false), "/p?q");
        assert_eq!(
            merged_raw_target("http://other/z", &input("http://h/a"), false),
            "/a/z"
        );
    }
}
