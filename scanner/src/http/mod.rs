//! Byte-exact HTTP/1.1 client for scanning.
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
pub use error::HttpError;
pub use request::Request;
pub use response::{canonical_header_name, Response};
pub use url::{Scheme, TargetUrl};
