//! Reading HTTP/1.x responses off a connection.
//!
//! Lenient where servers commonly misbehave (bare `\n` line ends, a body cut
//! short by the close, unknown header syntax), strict only where going on
//! would be guesswork (no status line).

use std::io::{self, Write};

use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};

use super::conn::Conn;

/// Largest status line plus headers accepted.
const MAX_HEAD: usize = 256 * 1024;
/// Largest chunk-size or trailer line accepted.
const MAX_LINE: usize = 64 * 1024;

/// A response as read from the wire, before the client adds URL and timing.
#[derive(Debug)]
pub(crate) struct WireResponse {
    pub(crate) proto: String,
    pub(crate) status: u16,
    pub(crate) reason: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) body_truncated: bool,
    /// The body was gzip/deflate on the wire and is decoded here.
    pub(crate) content_decoded: bool,
    /// The connection is positioned at the start of the next response and
    /// the server agreed to keep it open.
    pub(crate) reusable: bool,
}

/// Why reading a response failed.
#[derive(Debug)]
pub(crate) enum WireError {
    /// The transport failed; `received_any` tells whether any response byte
    /// had arrived (a pooled connection closed by the server fails with none).
    Io {
        source: io::Error,
        received_any: bool,
    },
    Protocol(String),
}

fn eof(received_any: bool) -> WireError {
    WireError::Io {
        source: io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before a complete response head",
        ),
        received_any,
    }
}

/// Reads one response. `head_request` says the request was HEAD (no body
/// follows whatever the headers say); `cap` bounds the decoded body.
pub(crate) async fn read_response(
    conn: &mut Conn,
    head_request: bool,
    cap: usize,
) -> Result<WireResponse, WireError> {
    let mut received_any = !conn.buf.is_empty();
    loop {
        let head_len = loop {
            // Some servers send stray line ends after a previous body.
            let stray = conn
                .buf
                .iter()
                .take_while(|b| matches!(b, b'\r' | b'\n'))
                .count();
            conn.buf.drain(..stray);
            if conn.buf.len() >= 5 && !conn.buf.starts_with(b"HTTP/") {
                return Err(WireError::Protocol(format!(
                    "response does not start with an HTTP status line: {:?}",
                    String::from_utf8_lossy(&conn.buf[..conn.buf.len().min(40)])
                )));
            }
            if let Some(end) = find_head_end(&conn.buf) {
                break end;
            }
            if conn.buf.len() > MAX_HEAD {
                return Err(WireError::Protocol(format!(
                    "response head longer than {MAX_HEAD} bytes"
                )));
            }
            match conn.fill().await {
                Ok(0) => return Err(eof(received_any)),
                Ok(_) => received_any = true,
                Err(source) => {
                    return Err(WireError::Io {
                        source,
                        received_any,
                    })
                }
            }
        };
        let head: Vec<u8> = conn.buf.drain(..head_len).collect();
        let (proto, status, reason, headers) = parse_head(&head)?;
        // Interim responses (100 Continue, 103 Early Hints) precede the real
        // one; 101 ends HTTP on this connection and is returned as is.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let mut resp = WireResponse {
            proto,
            status,
            reason,
            headers,
            body: Vec::new(),
            body_truncated: false,
            content_decoded: false,
            reusable: false,
        };
        let framed = read_body(conn, &mut resp, head_request, cap).await?;
        resp.reusable = framed && !resp.body_truncated && conn.buf.is_empty() && keeps_alive(&resp);
        decode_content(&mut resp, cap);
        return Ok(resp);
    }
}

/// Index just past the blank line ending the head: the first `\r\n\r\n`
/// or `\n\n`, whichever ends first. Found from the line feeds (`memchr`):
/// the buffer may already hold the body, and this runs on every read.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', buf).find_map(|i| match buf.get(i + 1) {
        Some(b'\n') => Some(i + 2),
        Some(b'\r') if i > 0 && buf[i - 1] == b'\r' && buf.get(i + 2) == Some(&b'\n') => {
            Some(i + 3)
        }
        _ => None,
    })
}

type Head = (String, u16, String, Vec<(String, String)>);

/// `str::trim`, quick for the usual header name or value: leading spaces
/// and tabs dropped, then nothing more to do when both ends are printable
/// ASCII (the general trim decodes and classifies characters one by one).
fn trim(s: &str) -> &str {
    let start = s.bytes().take_while(|b| matches!(b, b' ' | b'\t')).count();
    let s = &s[start..];
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(first), Some(last)) if first.is_ascii_graphic() && last.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

fn parse_head(head: &[u8]) -> Result<Head, WireError> {
    let text = super::utf8_lossy(head);
    let mut lines = HeadLines(Some(&text));
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let proto = parts.next().unwrap_or_default().to_string();
    let status = parts
        .next()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or_else(|| WireError::Protocol(format!("invalid status line {status_line:?}")))?;
    let reason = parts.next().unwrap_or_default().trim().to_string();
    let mut headers: Vec<(String, String)> = Vec::with_capacity(16);
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            // Obsolete line folding: the line continues the previous value.
            if let Some((_, value)) = headers.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
            continue;
        }
        if let Some(colon) = memchr::memchr(b':', line.as_bytes()) {
            let (name, value) = (&line[..colon], &line[colon + 1..]);
            headers.push((trim(name).to_string(), trim(value).to_string()));
        }
    }
    Ok((proto, status, reason, headers))
}

/// The lines of a response head, split at LF with a CR before it dropped,
/// as `split('\n')` would give them (also the empty one after a final LF),
/// found with `memchr`: the generic `str` searcher cost more than the
/// rest of parsing a head.
struct HeadLines<'a>(Option<&'a str>);

impl<'a> Iterator for HeadLines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.0?;
        let line = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(end) => {
                self.0 = Some(&rest[end + 1..]);
                &rest[..end]
            }
            None => {
                self.0 = None;
                rest
            }
        };
        Some(line.strip_suffix('\r').unwrap_or(line))
    }
}

pub(crate) fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn header_has_token(headers: &[(String, String)], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

fn keeps_alive(resp: &WireResponse) -> bool {
    if header_has_token(&resp.headers, "connection", "close") {
        return false;
    }
    if resp.proto.eq_ignore_ascii_case("HTTP/1.0") {
        return header_has_token(&resp.headers, "connection", "keep-alive");
    }
    resp.status != 101
}

enum Framing {
    Empty,
    Chunked,
    Length(u64),
    UntilClose,
}

fn framing(resp: &WireResponse, head_request: bool) -> Framing {
    if head_request || resp.status == 204 || resp.status == 304 || resp.status < 200 {
        return Framing::Empty;
    }
    let te_chunked = resp
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
        .flat_map(|(_, v)| v.split(','))
        .next_back()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"));
    if te_chunked {
        return Framing::Chunked;
    }
    match header_value(&resp.headers, "content-length").map(|v| v.trim().parse::<u64>()) {
        Some(Ok(n)) => Framing::Length(n),
        _ => Framing::UntilClose,
    }
}

/// Reads the body per its framing; returns whether the framing was complete
/// (so the connection is positioned at the next response).
async fn read_body(
    conn: &mut Conn,
    resp: &mut WireResponse,
    head_request: bool,
    cap: usize,
) -> Result<bool, WireError> {
    match framing(resp, head_request) {
        Framing::Empty => Ok(true),
        Framing::Length(n) => read_exact_len(conn, resp, n, cap).await,
        Framing::Chunked => read_chunked(conn, resp, cap).await,
        Framing::UntilClose => {
            loop {
                take_into(conn, resp, usize::MAX, cap);
                if resp.body_truncated {
                    return Ok(false);
                }
                match conn.fill().await {
                    Ok(0) => return Ok(false),
                    Ok(_) => {}
                    // A reset after some body is how many servers end a
                    // close-delimited body; keep what arrived.
                    Err(e) if !resp.body.is_empty() && is_close_error(&e) => return Ok(false),
                    Err(source) => {
                        return Err(WireError::Io {
                            source,
                            received_any: true,
                        })
                    }
                }
            }
        }
    }
}

fn is_close_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
    )
}

/// Moves up to `max` buffered bytes into the body, keeping at most `cap`.
/// Returns how many bytes were consumed from the buffer.
fn take_into(conn: &mut Conn, resp: &mut WireResponse, max: usize, cap: usize) -> usize {
    let n = conn.buf.len().min(max);
    let room = cap.saturating_sub(resp.body.len());
    let keep = n.min(room);
    resp.body.extend_from_slice(&conn.buf[..keep]);
    if n > room {
        resp.body_truncated = true;
    }
    conn.buf.drain(..n);
    n
}

async fn read_exact_len(
    conn: &mut Conn,
    resp: &mut WireResponse,
    len: u64,
    cap: usize,
) -> Result<bool, WireError> {
    let mut remaining = len;
    loop {
        let max = usize::try_from(remaining).unwrap_or(usize::MAX);
        remaining -= take_into(conn, resp, max, cap) as u64;
        if remaining == 0 {
            return Ok(true);
        }
        if resp.body_truncated {
            return Ok(false);
        }
        match conn.fill().await {
            // A body shorter than announced: keep what arrived, the
            // connection is not reusable.
            Ok(0) => return Ok(false),
            Ok(_) => {}
            Err(e) if is_close_error(&e) => return Ok(false),
            Err(source) => {
                return Err(WireError::Io {
                    source,
                    received_any: true,
                })
            }
        }
    }
}

/// Reads one line (without its line end) from the connection.
async fn read_line(conn: &mut Conn) -> Result<Option<String>, WireError> {
    loop {
        if let Some(i) = conn.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = conn.buf.drain(..=i).collect();
            let text = String::from_utf8_lossy(&line);
            return Ok(Some(text.trim_end_matches(['\r', '\n']).to_string()));
        }
        if conn.buf.len() > MAX_LINE {
            return Err(WireError::Protocol("chunk-size line too long".to_string()));
        }
        match conn.fill().await {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if is_close_error(&e) => return Ok(None),
            Err(source) => {
                return Err(WireError::Io {
                    source,
                    received_any: true,
                })
            }
        }
    }
}

async fn read_chunked(
    conn: &mut Conn,
    resp: &mut WireResponse,
    cap: usize,
) -> Result<bool, WireError> {
    loop {
        let Some(line) = read_line(conn).await? else {
            return Ok(false);
        };
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| WireError::Protocol(format!("invalid chunk size {size_text:?}")))?;
        if size == 0 {
            // Trailer fields, ended by an empty line; their values are not kept.
            loop {
                match read_line(conn).await? {
                    None => return Ok(false),
                    Some(l) if l.is_empty() => return Ok(true),
                    Some(_) => {}
                }
            }
        }
        if !read_exact_len(conn, resp, size, cap).await? {
            return Ok(false);
        }
        match read_line(conn).await? {
            Some(l) if l.is_empty() => {}
            Some(_) => {
                return Err(WireError::Protocol(
                    "chunk not followed by CRLF".to_string(),
                ))
            }
            None => return Ok(false),
        }
    }
}

/// A writer that keeps at most `cap` bytes and fails past that, which stops
/// a decompression bomb early.
struct CappedSink {
    out: Vec<u8>,
    cap: usize,
    overflowed: bool,
}

impl Write for CappedSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = self.cap - self.out.len();
        if data.len() > room {
            self.out.extend_from_slice(&data[..room]);
            self.overflowed = true;
            return Err(io::Error::other("decoded body exceeds the cap"));
        }
        self.out.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Decodes gzip/deflate content codings in place. A body that fails to
/// decode (servers mislabel bodies) is left as received.
fn decode_content(resp: &mut WireResponse, cap: usize) {
    let codings: Vec<String> = resp
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-encoding"))
        .flat_map(|(_, v)| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty() && t != "identity")
        .collect();
    if codings.is_empty() || resp.body.is_empty() {
        return;
    }
    let mut body = resp.body.clone();
    let mut truncated = false;
    for coding in codings.iter().rev() {
        let sink = CappedSink {
            out: Vec::new(),
            cap,
            overflowed: false,
        };
        let decoded = match coding.as_str() {
            "gzip" | "x-gzip" => decode_with(GzDecoder::new(sink), &body, resp.body_truncated),
            "deflate" => {
                decode_with(ZlibDecoder::new(sink), &body, resp.body_truncated).or_else(|| {
                    let sink = CappedSink {
                        out: Vec::new(),
                        cap,
                        overflowed: false,
                    };
                    decode_with(DeflateDecoder::new(sink), &body, resp.body_truncated)
                })
            }
            _ => None,
        };
        match decoded {
            Some((out, overflowed)) => {
                truncated |= overflowed;
                body = out;
            }
            None => return,
        }
    }
    resp.body = body;
    resp.body_truncated |= truncated;
    resp.content_decoded = true;
}

trait Decoder: Write {
    fn finish_sink(self) -> io::Result<CappedSink>;
    fn sink(&self) -> &CappedSink;
}

macro_rules! impl_decoder {
    ($t:ident) => {
        impl Decoder for $t<CappedSink> {
            fn finish_sink(self) -> io::Result<CappedSink> {
                self.finish()
            }
            fn sink(&self) -> &CappedSink {
                self.get_ref()
            }
        }
    };
}
impl_decoder!(GzDecoder);
impl_decoder!(ZlibDecoder);
impl_decoder!(DeflateDecoder);

/// Runs one decoder over `input`. Returns the output and whether it hit the
/// cap; `None` when the input is not in this coding. When the compressed
/// body was itself cut at the cap, a stream that ends early is expected and
/// the output so far is kept.
fn decode_with<D: Decoder>(
    mut decoder: D,
    input: &[u8],
    input_cut: bool,
) -> Option<(Vec<u8>, bool)> {
    let written = decoder.write_all(input);
    if decoder.sink().overflowed {
        return Some((decoder.sink().out.clone(), true));
    }
    if input_cut {
        let _ = decoder.flush();
        let out = decoder.sink().out.clone();
        return (!out.is_empty()).then_some((out, true));
    }
    written.ok()?;
    let sink = decoder.finish_sink().ok()?;
    Some((sink.out, sink.overflowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_trimming_is_str_trim() {
        for s in [
            "",
            " ",
            "\t \t",
            "a",
            " nginx",
            "\tnginx \r",
            "10:20 ",
            " \u{a0}value\u{2003}",
            "\u{3000}x",
            "é",
            " é ",
            "x\u{b}",
            "\u{85}",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
    }

    #[test]
    fn the_head_ends_after_the_first_crlf_crlf_or_lf_lf() {
        // The earliest end of either blank line, searched naively.
        fn naive(buf: &[u8]) -> Option<usize> {
            let at = |needle: &[u8]| buf.windows(needle.len()).position(|w| w == needle);
            let crlf = at(b"\r\n\r\n").map(|i| i + 4);
            let lf = at(b"\n\n").map(|i| i + 2);
            match (crlf, lf) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        let cases: [&[u8]; 14] = [
            b"",
            b"\n",
            b"\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody\r\n\r\nmore",
            b"HTTP/1.1 200 OK\nA: b\n\nbody",
            b"a\r\n\nb",
            b"a\n\r\nb",
            b"a\r\n\r",
            b"a\r\n\r\r\n",
            b"\n\r\n\r\n",
            b"a\r\r\n\r\n",
            b"a\n\r\n\n",
            b"x\r\ny\n\nz\r\n\r\n",
            b"\r\n\n",
        ];
        for buf in cases {
            assert_eq!(
                find_head_end(buf),
                naive(buf),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n\r\nx"), Some(19));
    }

    #[test]
    fn head_lines_are_the_lines_split_at_lf_without_their_cr() {
        for text in [
            "",
            "a",
            "a\n",
            "a\r\nb\r\n\r\n",
            "\n\n",
            "x\ry\n\rz",
            "é\r\nñ",
        ] {
            let want: Vec<&str> = text
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l))
                .collect();
            assert_eq!(HeadLines(Some(text)).collect::<Vec<_>>(), want, "{text:?}");
        }
    }

    #[test]
    fn a_head_parses_into_status_reason_and_trimmed_headers_in_order() {
        let (proto, status, reason, headers) = parse_head(
            b"HTTP/1.1 404 Not Found\r\nServer: nginx\r\nX-Empty:\r\nX-Folded: a\r\n  b\r\nno colon\r\nX-Time: 10:20 \r\n\r\n",
        )
        .expect("parses");
        assert_eq!(
            (proto.as_str(), status, reason.as_str()),
            ("HTTP/1.1", 404, "Not Found")
        );
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("Server", "nginx"),
                ("X-Empty", ""),
                ("X-Folded", "a b"),
                ("X-Time", "10:20")
            ]
        );
        assert!(parse_head(b"HTTP/1.1 abc\r\n\r\n").is_err());
    }
}
