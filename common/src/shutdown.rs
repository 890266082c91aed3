//! The one way every scanfleet process learns it should stop.

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, whichever comes first.
///
/// Where SIGTERM cannot be watched (not a Unix system, or the handler cannot
/// be installed) it says so once and waits for Ctrl-C alone, rather than
/// failing the process at start-up.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot watch Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = terminate() => {}
    }
    tracing::info!("shutdown signal received");
}

#[cfg(unix)]
async fn terminate() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the process");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
async fn terminate() {
    std::future::pending::<()>().await;
}
