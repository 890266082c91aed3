//! `scanfleet-http`: the byte-exact HTTP/1.1 client for scanning.
//!
//! Data flow: api -> Redis queue -> scanner node -> engine -> **client** ->
//! the scanned hosts. The template engine sends every request of a scan
//! through it; the api uses it alone (with its DNS questions) to check that
//! a user owns a domain, so the api links this crate and not the engine.
//!
//! Templates depend on request-targets reaching the server exactly as
//! written (`/..;/admin`, `/%2e%2e/`, `/a/../b`), which URL-normalising
//! clients cannot do; so requests are written by hand over tokio
//! `TcpStream` and tokio-rustls. Before any connection the target name is
//! resolved here (connect-to overrides, hosts map, DNS) and every address
//! is checked against the non-public ranges, and the connected peer is
//! checked again, unless `allow_private` is set.
//!
//! Each exchange (resolve, connect, TLS, write, read) is bounded by
//! `ClientConfig::timeout`; waiting for a concurrency slot or the per-host
//! rate ceiling is not. A refused or reset connection is retried
//! `retries` times at once; a timeout never is (a slow host stays slow, and
//! retrying would double the scan time and skew time-based checks). A pooled
//! connection the server had closed is replaced without using the retry.
//!
//! # Layout
//! - `client`: [`HttpClient`], [`SendOptions`]: pooling, retries, redirects.
//! - `request`: [`Request`], raw-block parsing and the wire form.
//! - `response`: [`Response`] and the `header`/`raw` views matchers read.
//! - `wire`: response parsing (chunked, length, close-delimited, gzip/deflate).
//! - `url`: [`TargetUrl`], [`Scheme`]: URLs kept as written.
//! - `config`: [`ClientConfig`], connect-to and hosts-map parsing.
//! - `resolve`, `address`, `dns`: name resolution (and TXT records for
//!   ownership proof) and the address policy.
//! - `conn`, `tls`, `rate`, `cookies`: connections and pool, TLS that
//!   accepts any certificate, per-host rate ceiling, cookie jar.
//! - `error`: [`HttpError`] and the typed causes it keeps.
//!
//! # Imports
//! The bottom of the scanner's layers: it imports `scanfleet-common` (for
//! [`ClientConfig::from_settings`]) and crates from the registry, and
//! nothing else of ours: no engine, queue, Redis or command line.

mod address;
mod client;
mod config;
mod conn;
mod cookies;
mod dns;
mod error;
mod rate;
mod request;
mod resolve;
mod response;
mod tls;
mod url;
mod wire;

pub use address::{classify, AddressClass};
pub use client::{HttpClient, SendOptions};
pub use config::{ClientConfig, ConnectOverride, HostsMap};
pub use cookies::CookieJar;
pub use error::{AuthorityError, DnsFailure, HttpError, TlsFailure, UrlError};
pub use request::Request;
#[cfg(any(test, feature = "test-util"))]
pub use response::test_response;
pub use response::{canonical_header_name, Response};
pub use url::{split_host_port, Scheme, TargetUrl, UrlParts, WrittenPort};

/// [`String::from_utf8_lossy`], with the fast check of [`std::str::from_utf8`]
/// first: request and response text is nearly always valid UTF-8, and the
/// lossy decoder's own check, byte by byte, cost several times more.
pub fn utf8_lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    #[test]
    fn utf8_lossy_borrows_valid_text_and_replaces_invalid_bytes_as_std_does() {
        assert!(matches!(
            super::utf8_lossy("GET /é".as_bytes()),
            Cow::Borrowed("GET /é")
        ));
        for bytes in [&b"a\xffb"[..], b"\xe2\x82", b"ok\xc3(", b""] {
            assert_eq!(super::utf8_lossy(bytes), String::from_utf8_lossy(bytes));
        }
        assert_eq!(super::utf8_lossy(b"a\xffb"), "a\u{fffd}b");
    }
}
