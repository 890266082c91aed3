//! The server's error type: what start-up, a listener or a Redis call can
//! fail with. Listeners log per-connection failures and go on; only
//! start-up errors end the process.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Every failure the OOB server reports.
#[derive(Debug, thiserror::Error)]
pub enum OobError {
    #[error("binding {what} on {addr}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} holds no usable PEM {what}")]
    Pem {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: Option<rustls::pki_types::pem::Error>,
    },
    #[error("the TLS certificate and key do not make a server configuration")]
    Tls(#[source] rustls::Error),
    #[error(transparent)]
    RedisUrl(#[from] scanfleet_bus::connect::BadRedisUrl),
    #[error("Redis call failed")]
    Redis(#[from] fred::error::Error),
    #[error("Redis answered a script with an unexpected shape: {0}")]
    RedisShape(&'static str),
    #[error("the DNS server stopped with an error")]
    Dns(#[source] hickory_proto::ProtoError),
    #[error(transparent)]
    Crypto(#[from] scanfleet_interactsh::CryptoError),
    #[error("encoding an interaction as JSON")]
    Json(#[from] serde_json::Error),
    #[error("a listener task failed")]
    Task(#[from] tokio::task::JoinError),
}
