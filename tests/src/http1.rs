//! Requests read off a keep-alive HTTP/1.1 connection, for the test labs
//! (the shop of [`crate::lab`] and the stacks of [`crate::stacks`]).

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A request head, its body read and dropped.
pub struct Request {
    pub method: String,
    pub path: String,
    /// The request line and headers.
    pub head: String,
}

impl Request {
    /// A header's value, trimmed; the first of its name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The `Host` header as sent (with its port, if any).
    pub fn host(&self) -> &str {
        self.header("host").unwrap_or("")
    }
}

/// The next request on `stream`, bytes of later requests staying in `buf`;
/// `None` when the peer closed, when a head grew past 64 KiB, or when
/// `idle` passed without a byte (the connection is then dropped).
pub async fn next_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    idle: Option<Duration>,
) -> std::io::Result<Option<Request>> {
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Ok(None);
        }
        let n = read(stream, &mut chunk, idle).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut request = Request {
        method: String::new(),
        path: String::new(),
        head,
    };
    let length: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = read(stream, &mut chunk, idle).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..head_end + length);
    let mut parts = request.head.split_whitespace();
    let method = parts.next().unwrap_or("GET").to_string();
    let path = parts.next().unwrap_or("/").to_string();
    request.method = method;
    request.path = path;
    Ok(Some(request))
}

async fn read(
    stream: &mut TcpStream,
    chunk: &mut [u8],
    idle: Option<Duration>,
) -> std::io::Result<usize> {
    match idle {
        Some(idle) => tokio::time::timeout(idle, stream.read(chunk))
            .await
            .unwrap_or(Ok(0)),
        None => stream.read(chunk).await,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
