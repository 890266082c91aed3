//! The scanfleet scheduler: turns due cron schedules into scans (through the
//! api crate's storage layer, so limits and queueing exist once) and fails
//! scans whose scanner node died.
//!
//! Data flow: Postgres `schedules` -> **scheduler** -> scan row + Redis job
//! queue -> scanner nodes.
//!
//! This version connects and waits for shutdown; schedule processing is not
//! provided yet (see the README's status section).
//!
//! # Layout
//! - [`Scheduler`]: the process, built from settings and run until stopped.

use std::future::Future;

use scanfleet_common::Settings;

pub struct Scheduler {
    db: scanfleet_api::store::Db,
}

impl Scheduler {
    /// Connects to Postgres and applies migrations (serialised with the api's
    /// by an advisory lock, so start order does not matter).
    pub async fn build(settings: &Settings) -> anyhow::Result<Scheduler> {
        let db = scanfleet_api::store::connect(settings.database_url.expose())?;
        scanfleet_api::store::migrate::run(&db).await?;
        Ok(Scheduler { db })
    }

    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        tracing::warn!(
            "schedule processing is not available in this version: the scheduler only waits"
        );
        shutdown.await;
        drop(self.db);
        Ok(())
    }
}
