//! The one error type of the HTTP client.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::address::AddressClass;

/// Everything that can go wrong while building, sending or reading a request.
///
/// Callers classify by variant, never by message: [`HttpError::is_transient`]
/// says whether trying again later could succeed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The target resolved (or was overridden) to an address outside the
    /// public internet and `allow_private` is off.
    #[error(
        "refusing to connect to {addr} ({class}) for host {host}: private addresses are not allowed (set --allow-private)"
    )]
    ForbiddenAddress {
        host: String,
        addr: IpAddr,
        class: AddressClass,
    },
    /// The name could not be turned into an address.
    #[error("could not resolve {host}: {reason}")]
    Dns { host: String, reason: String },
    /// No TCP connection could be made to the chosen address.
    #[error("could not connect to {addr} for host {host}: {source}")]
    Connect {
        host: String,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The connection broke while the request was written or the response read.
    #[error("connection to {host} failed while {stage}: {source}")]
    Io {
        host: String,
        stage: &'static str,
        #[source]
        source: io::Error,
    },
    /// The exchange did not finish within the configured timeout.
    #[error("request to {host} timed out after {after:?}")]
    Timeout { host: String, after: Duration },
    /// The TLS handshake failed (certificates are never the reason: any is accepted).
    #[error("TLS handshake with {host} failed: {reason}")]
    Tls { host: String, reason: String },
    /// The server answered with something that is not HTTP/1.x.
    #[error("malformed response from {host}: {reason}")]
    Protocol { host: String, reason: String },
    /// A URL given to the client could not be understood.
    #[error("invalid URL {input:?}: {reason}")]
    InvalidUrl { input: String, reason: String },
    /// A raw request block or request value could not be understood.
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },
    /// A client setting (connect-to, hosts map, ...) could not be parsed.
    #[error("invalid client configuration: {reason}")]
    InvalidConfig { reason: String },
}

impl HttpError {
    /// True when the same request may succeed later: network trouble and
    /// timeouts. Refusals, bad input and malformed responses are permanent.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            HttpError::Dns { .. }
                | HttpError::Connect { .. }
                | HttpError::Io { .. }
                | HttpError::Timeout { .. }
                | HttpError::Tls { .. }
        )
    }

    /// True for the failures the client retries at once (`ClientConfig::retries`):
    /// a refused, reset or aborted connection. Timeouts are not among them: a
    /// host that is slow once is usually slow again, and retrying would double
    /// the time a scan spends on it (and skew time-based checks).
    pub(crate) fn is_retryable_now(&self) -> bool {
        match self {
            HttpError::Connect { source, .. } | HttpError::Io { source, .. } => {
                is_transient_io(source)
            }
            _ => false,
        }
    }
}

/// Transport error kinds that indicate a dropped or refused connection rather
/// than a slow or misbehaving peer.
pub(crate) fn is_transient_io(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::NotConnected
    )
}
