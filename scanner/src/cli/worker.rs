//! `scanfleet-scanner worker`: a scanner node. It reads its settings (Redis
//! and `SCANFLEET_SCANNER__*`), then takes scan jobs until SIGINT or SIGTERM;
//! see the library's `node` module for what a node does.

use std::process::ExitCode;
use std::time::Duration;

use scanfleet_common::chain::Chain;
use scanfleet_common::shutdown::shutdown_signal;
use scanfleet_common::{telemetry, NodeSettings};
use scanfleet_scanner::node::Node;
use tokio_util::sync::CancellationToken;

pub fn worker() -> ExitCode {
    let settings = match NodeSettings::load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}", Chain(&e));
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
    // The node runs as a task on the workers, not polled by this thread:
    // whatever the node's loop awaits then wakes a task on a busy worker
    // instead of this parked thread (a futex wake-up and a context switch
    // each time).
    let code = runtime.block_on(async {
        tokio::spawn(run_node(settings)).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "scanner node ended abnormally");
            ExitCode::FAILURE
        })
    });
    // Scans left running past the grace period are abandoned here; their
    // jobs go back to the queue once this node's heartbeat stops.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// Builds the node and takes jobs until a stop signal and the grace period
/// after it.
async fn run_node(settings: NodeSettings) -> ExitCode {
    let node = match Node::build(settings).await {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(error = %Chain(&e), "scanner node could not start");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("stopping: no new jobs; waiting for running scans");
        signal.cancel();
    });
    let drain = Duration::from_secs(node.settings.scanner.drain_secs);
    match node.run(shutdown, drain).await {
        Ok(()) => {
            tracing::info!("scanner node stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %Chain(&e), "scanner node failed");
            ExitCode::FAILURE
        }
    }
}
