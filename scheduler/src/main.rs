//! `scanfleet-scheduler`: runs the scheduler until SIGINT or SIGTERM.

use scanfleet_common::shutdown::shutdown_signal;
use scanfleet_common::{telemetry, Settings};
use scanfleet_scheduler::Scheduler;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let settings = Settings::load()?;
    telemetry::init(settings.log_format);
    let scheduler = Scheduler::build(settings).await?;
    tracing::info!("scheduler started");
    scheduler.run_until_stopped(shutdown_signal()).await?;
    tracing::info!("scheduler stopped");
    Ok(())
}
