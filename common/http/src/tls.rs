//! TLS for scanning: any certificate is accepted.
//!
//! A scanner has to talk to hosts with expired, self-signed or mismatched
//! certificates, since those hosts are exactly the ones worth reporting on.
//! Signatures in the handshake are still checked, so the session is bound to
//! the key of whatever certificate the server presented.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::error::{HttpError, TlsFailure};

/// Accepts every server certificate; verifies handshake signatures.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The connector every HTTPS connection of a client uses: TLS 1.2 and 1.3,
/// ALPN `http/1.1` only (the client speaks nothing else), SNI on.
pub(crate) fn connector() -> Result<tokio_rustls::TlsConnector, HttpError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(HttpError::TlsSetup)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.enable_sni = true;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// The name presented to the server. rustls sends no SNI for an IP-address
/// name, which is what RFC 6066 asks for.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, HttpError> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.to_string()).map_err(|source| HttpError::Tls {
        host: host.to_string(),
        cause: TlsFailure::ServerName {
            name: host.to_string(),
            source,
        },
    })
}
