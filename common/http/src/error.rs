//! The one error type of the HTTP client.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::ResolveError;
use rustls::pki_types::InvalidDnsNameError;

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
    #[error("could not resolve {host}")]
    Dns {
        host: String,
        #[source]
        cause: DnsFailure,
    },
    /// No TCP connection could be made to the chosen address.
    #[error("could not connect to {addr} for host {host}")]
    Connect {
        host: String,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The connection broke while the request was written or the response read.
    #[error("connection to {host} failed while {stage}")]
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
    #[error("TLS handshake with {host} failed")]
    Tls {
        host: String,
        #[source]
        cause: TlsFailure,
    },
    /// The server answered with something that is not HTTP/1.x.
    #[error("malformed response from {host}: {reason}")]
    Protocol { host: String, reason: String },
    /// A URL given to the client could not be understood.
    #[error("invalid URL {input:?}")]
    InvalidUrl {
        input: String,
        #[source]
        reason: UrlError,
    },
    /// A raw request block or request value could not be understood.
    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },
    /// A client setting (connect-to, hosts map, ...) could not be parsed.
    #[error("invalid client configuration: {reason}")]
    InvalidConfig { reason: String },
    /// A setting of the fleet's settings, by its variable name.
    #[error("invalid client configuration: {name}")]
    Setting {
        name: &'static str,
        #[source]
        source: Box<HttpError>,
    },
    /// The system's DNS configuration could not be read.
    #[error("invalid client configuration: cannot read the system DNS configuration")]
    SystemDns(#[source] ResolveError),
    /// The TLS library refused the client's configuration.
    #[error("invalid client configuration: TLS setup failed")]
    TlsSetup(#[source] rustls::Error),
}

/// Why a name has no address to connect to.
#[derive(Debug, thiserror::Error)]
pub enum DnsFailure {
    #[error("not in the hosts map, and DNS is off (hosts-only mode)")]
    NotInHostsMap,
    #[error("DNS is off (hosts-only mode)")]
    Off,
    #[error("no such name, or no records of that type")]
    NoRecords,
    #[error("no addresses found")]
    NoAddresses,
    #[error("no addresses to connect to")]
    NothingToConnectTo,
    /// The system resolver failed.
    #[error(transparent)]
    System(io::Error),
    /// The DNS client (the configured server, or TXT lookups) failed.
    #[error(transparent)]
    Resolver(ResolveError),
    /// The TXT resolver could not be built; the error is kept for every
    /// later question, hence shared.
    #[error(transparent)]
    Unavailable(Arc<HttpError>),
}

/// Why a TLS connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsFailure {
    #[error("{name:?} is not a valid TLS server name")]
    ServerName {
        name: String,
        #[source]
        source: InvalidDnsNameError,
    },
    #[error(transparent)]
    Handshake(io::Error),
}

/// What is wrong with a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("only http and https are supported")]
    Scheme,
    #[error("missing host")]
    MissingHost,
    #[error(transparent)]
    Authority(#[from] AuthorityError),
}

/// What is wrong with a URL's `host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityError {
    #[error("invalid port {0:?}")]
    InvalidPort(String),
    #[error("unclosed '[' in host")]
    UnclosedBracket,
    #[error("invalid IPv6 address {0:?}")]
    InvalidIpv6(String),
    #[error("unexpected text after IPv6 address")]
    TextAfterIpv6,
    #[error("IPv6 addresses must be written in brackets")]
    UnbracketedIpv6,
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
