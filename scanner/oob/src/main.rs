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
    let stop = shutdown.clone();
    tokio::spawn(async move {
        scanfleet_common::shutdown::shutdown_signal().await;
        tracing::info!("shutting down");
        stop.cancel();
    });
    app.run_until_stopped(shutdown).await?;
    Ok(())
}
