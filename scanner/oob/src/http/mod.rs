//! The HTTP and HTTPS listeners: the interactsh API (`/register`, `/poll`,
//! `/deregister`) and, on every other path and host, a small 200 that
//! records the request when its host carries a registered id.
//!
//! hyper directly rather than a web framework: callbacks need the request
//! as it came (any method, host and path, the raw headers) and the same
//! code serves plain and TLS connections.

pub mod api;
pub mod callback;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use scanfleet_common::secret::Secret;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::recorder::Recorder;
use crate::store::Store;
use crate::tcp;

/// Bytes of a request body kept (for the API and in `raw-request`); the
/// rest is not read.
pub const MAX_BODY: usize = 64 * 1024;

/// What every HTTP connection shares.
pub struct HttpContext {
    pub store: Store,
    pub recorder: Recorder,
    /// The zone, lower case, no trailing dot (the `Server` header).
    pub domain: String,
    pub token: Option<Secret>,
}

/// Serves plain HTTP (`tls` = `None`) or HTTPS on `listener` until
/// `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    ctx: Arc<HttpContext>,
    shutdown: CancellationToken,
) {
    let protocol = if tls.is_some() { "https" } else { "http" };
    tcp::accept_loop(listener, shutdown.clone(), move |stream, peer| {
        let ctx = ctx.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        async move {
            match tls {
                None => serve_connection(stream, peer, protocol, ctx, shutdown).await,
                Some(tls) => match tls.accept(stream).await {
                    Ok(stream) => serve_connection(stream, peer, protocol, ctx, shutdown).await,
                    Err(e) => tracing::debug!(error = %e, %peer, "TLS handshake failed"),
                },
            }
        }
    })
    .await;
}

/// One connection, HTTP/1.1 with keep-alive; on shutdown the request in
/// flight finishes and the connection closes.
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    peer: SocketAddr,
    protocol: &'static str,
    ctx: Arc<HttpContext>,
    shutdown: CancellationToken,
) {
    let service = service_fn(move |req| handle(ctx.clone(), req, peer, protocol));
    let conn = http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(tcp::IDLE_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, %peer, "HTTP connection ended with an error");
    }
}

async fn handle(
    ctx: Arc<HttpContext>,
    req: Request<Incoming>,
    peer: SocketAddr,
    protocol: &'static str,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = read_body(body).await;
    let response = match parts.uri.path() {
        "/register" | "/deregister" | "/poll" => api::handle(&ctx, &parts, &body).await,
        _ => callback::handle(&ctx, &parts, &body, peer.ip(), protocol).await,
    };
    Ok(response)
}

/// The body's first [`MAX_BODY`] bytes. A body cut short by the peer is
/// kept as far as it came: a callback is worth recording either way.
async fn read_body(mut body: Incoming) -> Bytes {
    let mut kept = Vec::new();
    while kept.len() < MAX_BODY {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = MAX_BODY - kept.len();
                    kept.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            Some(Err(_)) | None => break,
        }
    }
    Bytes::from(kept)
}

/// Serves Prometheus text at `/metrics` (and 404 elsewhere) on its own
/// listener, kept off the public HTTP listener.
pub async fn serve_metrics(listener: TcpListener, shutdown: CancellationToken) {
    tcp::accept_loop(listener, shutdown, |stream: TcpStream, _peer| async move {
        let service = service_fn(|req: Request<Incoming>| async move {
            let response = if req.uri().path() == "/metrics" {
                Response::builder()
                    .header("content-type", "text/plain; version=0.0.4")
                    .body(Full::new(Bytes::from(crate::metrics::handle().render())))
            } else {
                Response::builder()
                    .status(404)
                    .body(Full::new(Bytes::new()))
            };
            Ok::<_, hyper::http::Error>(response.unwrap_or_default())
        });
        let _ = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await;
    })
    .await;
}
