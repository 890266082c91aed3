//! `scanfleet-scanner worker`: a scanner node. This version connects to Redis
//! (the only service a node talks to) and waits for SIGINT or SIGTERM; taking
//! scan jobs from the queue is not provided yet, and the node says so in its
//! log rather than pretending to work.

use std::process::ExitCode;

use fred::interfaces::ClientLike;
use fred::prelude::{Builder, Config};
use scanfleet_common::{telemetry, Settings};

pub fn worker() -> ExitCode {
    let settings = match Settings::load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    telemetry::init(settings.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "scanner node failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> anyhow::Result<()> {
    let config = Config::from_url(settings.redis_url.expose())
        .map_err(|e| anyhow::anyhow!("REDIS_URL is not a valid Redis URL: {e}"))?;
    let redis = Builder::from_config(config).build()?;
    redis.init().await?;
    redis.ping::<String>(None).await?;
    tracing::info!(
        prefix = %settings.redis_prefix,
        concurrency = settings.scanner.concurrency,
        "scanner node connected to Redis"
    );
    tracing::warn!(
        "taking scan jobs from the queue is not available in this version: the node only waits"
    );
    shutdown_signal().await;
    redis.quit().await?;
    tracing::info!("scanner node stopped");
    Ok(())
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term => {},
    }
}
