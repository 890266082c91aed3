//! Start-up and shutdown: binds every listener (so tests can ask for port
//! 0 and read the real ports back), connects to Redis, and runs all
//! listeners until the shutdown token fires.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hickory_server::ServerFuture;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, UdpSocket};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::dns::DnsHandler;
use crate::error::OobError;
use crate::http::HttpContext;
use crate::ldap::LdapContext;
use crate::recorder::Recorder;
use crate::settings::Settings;
use crate::smtp::SmtpContext;
use crate::store::Store;

/// How long a DNS-over-TCP connection may stay idle.
const DNS_TCP_TIMEOUT: Duration = Duration::from_secs(10);

/// A bound, connected server, ready to run.
pub struct Application {
    settings: Settings,
    store: Store,
    http: TcpListener,
    https: Option<(TcpListener, TlsAcceptor)>,
    dns_udp: UdpSocket,
    dns_tcp: TcpListener,
    smtp: Option<TcpListener>,
    ldap: Option<TcpListener>,
    metrics: Option<TcpListener>,
}

impl Application {
    /// Connects to Redis and binds every configured listener.
    pub async fn build(settings: Settings) -> Result<Application, OobError> {
        let store = Store::connect_to(&settings.redis(), settings.eviction_secs).await?;
        let https = match (settings.https, &settings.cert, &settings.key) {
            (Some(addr), Some(cert), Some(key)) => {
                Some((bind("HTTPS", addr).await?, tls_acceptor(cert, key)?))
            }
            _ => None,
        };
        let (dns_udp, dns_tcp) = bind_dns(settings.dns).await?;
        Ok(Application {
            store,
            http: bind("HTTP", settings.http).await?,
            https,
            dns_udp,
            dns_tcp,
            smtp: bind_optional("SMTP", settings.smtp).await?,
            ldap: bind_optional("LDAP", settings.ldap).await?,
            metrics: bind_optional("metrics", settings.metrics).await?,
            settings,
        })
    }

    pub fn http_addr(&self) -> SocketAddr {
        local_addr(&self.http)
    }

    /// The DNS port, the same for UDP and TCP.
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns_udp.local_addr().unwrap_or(self.settings.dns)
    }

    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https.as_ref().map(|(l, _)| local_addr(l))
    }

    pub fn smtp_addr(&self) -> Option<SocketAddr> {
        self.smtp.as_ref().map(local_addr)
    }

    pub fn ldap_addr(&self) -> Option<SocketAddr> {
        self.ldap.as_ref().map(local_addr)
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(local_addr)
    }

    /// Serves until `shutdown` fires, then lets connections in flight
    /// finish (a few seconds at most) and closes Redis.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> Result<(), OobError> {
        let recorder = Recorder::new(self.store.clone());
        let domain = self.settings.domain.clone();
        let mut tasks = tokio::task::JoinSet::new();
        let http = Arc::new(HttpContext {
            store: self.store.clone(),
            recorder: recorder.clone(),
            domain: domain.clone(),
            token: self.settings.token.clone(),
        });
        tasks.spawn(crate::http::serve(
            self.http,
            None,
            http.clone(),
            shutdown.clone(),
        ));
        if let Some((listener, tls)) = self.https {
            tasks.spawn(crate::http::serve(
                listener,
                Some(tls),
                http,
                shutdown.clone(),
            ));
        }
        if let Some(listener) = self.smtp {
            let ctx = Arc::new(SmtpContext {
                recorder: recorder.clone(),
                domain: domain.clone(),
            });
            tasks.spawn(crate::smtp::serve(listener, ctx, shutdown.clone()));
        }
        if let Some(listener) = self.ldap {
            let ctx = Arc::new(LdapContext {
                recorder: recorder.clone(),
            });
            tasks.spawn(crate::ldap::serve(listener, ctx, shutdown.clone()));
        }
        if let Some(listener) = self.metrics {
            crate::metrics::handle();
            tasks.spawn(crate::http::serve_metrics(listener, shutdown.clone()));
        }
        let handler =
            DnsHandler::new(&domain, self.settings.ip.clone(), recorder).map_err(OobError::Dns)?;
        let mut dns = ServerFuture::new(handler);
        dns.register_socket(self.dns_udp);
        dns.register_listener(self.dns_tcp, DNS_TCP_TIMEOUT);
        tracing::info!(%domain, "OOB server listening");
        let dns_result = tokio::select! {
            result = dns.block_until_done() => result,
            () = shutdown.cancelled() => dns.shutdown_gracefully().await,
        };
        // Whatever ended DNS ends the rest too.
        shutdown.cancel();
        while let Some(joined) = tasks.join_next().await {
            joined?;
        }
        self.store.quit().await;
        dns_result.map_err(OobError::Dns)
    }
}

fn local_addr(listener: &TcpListener) -> SocketAddr {
    listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, OobError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| OobError::Bind { what, addr, source })
}

async fn bind_optional(
    what: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<TcpListener>, OobError> {
    match addr {
        Some(addr) => bind(what, addr).await.map(Some),
        None => Ok(None),
    }
}

/// UDP and TCP on one port. With port 0 the UDP socket picks the port and
/// TCP follows it; should that port be taken for TCP, another is tried.
async fn bind_dns(addr: SocketAddr) -> Result<(UdpSocket, TcpListener), OobError> {
    let udp_error = |source| OobError::Bind {
        what: "DNS (UDP)",
        addr,
        source,
    };
    let mut attempts = if addr.port() == 0 { 10 } else { 1 };
    loop {
        attempts -= 1;
        let udp = UdpSocket::bind(addr).await.map_err(udp_error)?;
        let bound = udp.local_addr().map_err(udp_error)?;
        match TcpListener::bind(bound).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(source) if attempts == 0 => {
                return Err(OobError::Bind {
                    what: "DNS (TCP)",
                    addr: bound,
                    source,
                })
            }
            Err(_) => continue,
        }
    }
}

/// The HTTPS listener's TLS set-up from PEM files.
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, OobError> {
    let pem_error = |path: &Path, what, source| OobError::Pem {
        path: path.to_path_buf(),
        what,
        source,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem_error(cert, "certificate", Some(e)))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(cert, "certificate", Some(e)))?;
    if chain.is_empty() {
        return Err(pem_error(cert, "certificate", None));
    }
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error(key, "private key", Some(e)))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(OobError::Tls)?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(OobError::Tls)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
