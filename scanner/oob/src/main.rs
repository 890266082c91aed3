//! The `scanfleet-oob` binary: reads flags and environment, sets up
//! logging, runs the server until SIGINT or SIGTERM.

use clap::Parser;
use scanfleet_common::settings::LogFormat;
use scanfleet_oob::{Application, Settings};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::parse();
    let format = match std::env::var("SCANFLEET_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        _ => LogFormat::Text,
    };
    scanfleet_common::telemetry::init(format);
    let app = Application::build(settings).await?;
    tracing::info!(
        http = %app.http_addr(),
        dns = %app.dns_addr(),
        https = ?app.https_addr(),
        smtp = ?app.smtp_addr(),
        ldap = ?app.ldap_addr(),
        metrics = ?app.metrics_addr(),
        "scanfleet-oob started"
    );
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    app.run_until_stopped(shutdown).await?;
    Ok(())
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn stop_on_signal(shutdown: CancellationToken) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGTERM; only Ctrl-C stops the server");
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}
