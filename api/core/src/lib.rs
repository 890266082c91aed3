//! scanfleet's core: domain values, the store (every SQL statement of the
//! domain, typed rows, migrations; the api keeps a few reads of its own for
//! rate limits, payments, metrics and health), the use cases (start and
//! stop a scan, the ownership gate, tier limits) and the ingester. The api
//! and the scheduler are both built on it, so scan creation and limit
//! checks exist once.
//!
//! Data flow: api / scheduler -> **use cases** -> store (Postgres) and the
//! scan queue (`scanfleet-bus`) -> scanner nodes -> event streams ->
//! **ingester** -> store.
//!
//! # Imports
//! It may import `scanfleet-common`, `scanfleet-bus`, the scanner's HTTP
//! client (`scanfleet-http`: ownership checks go where a scan would go) and
//! Postgres/Redis clients. The core knows no HTTP framework: it must not
//! import poem or anything of the HTTP edge; it picks no HTTP status, knows
//! no route (URLs it hands out, like the tier list or a target's verify
//! link, are given to it), and holds no password hashing or tokens. It must
//! not import the report renderers, the template engine or the scanner
//! node either. The api, the report crate and the scheduler import it.
//!
//! # Layout
//! - [`error`]: the general error kinds ([`Error`]) and their data.
//! - [`domain`]: the target hostname ([`domain::Domain`]).
//! - [`fingerprint`]: a finding's identity across scans, and its change.
//! - [`cron`]: five-field cron expressions ([`cron::CronSpec`]).
//! - [`store`]: SQL and rows; [`store::migrate`] applies the migrations.
//! - [`scans`]: starting and stopping scans.
//! - [`targets`]: adding, importing, verifying and deleting targets.
//! - [`triage`]: setting the status of one finding or several at once.
//! - [`subscriptions`]: applying what the payment provider says a
//!   subscription is.
//! - [`ownership`]: proof that a user controls a domain, and the scan gate.
//! - [`retest`]: retesting one finding (engine `retest`).
//! - [`ingest`]: scan events from Redis into Postgres.
//! - [`outbox`]: webhook events, written in the transaction that records
//!   what they report.
//! - [`startup`]: connecting at start-up, with one line naming the setting
//!   at fault when it fails.

pub mod cron;
pub mod domain;
pub mod error;
pub mod fingerprint;
pub mod ingest;
pub mod outbox;
pub mod ownership;
pub mod retest;
pub mod scans;
pub mod startup;
pub mod store;
pub mod subscriptions;
pub mod targets;
pub mod triage;

use anyhow::Context;
use fred::clients::Client;
use scanfleet_bus::{RedisTarget, ScanQueue};
use scanfleet_common::keys::Keys;
use scanfleet_common::Settings;

pub use error::{Error, Result};
use ownership::Ownership;
use store::Db;

/// What the use cases share: the database, Redis and the queue on it, and
/// the ownership gate. Cheap to clone: everything inside is shared.
#[derive(Clone)]
pub struct Core {
    pub db: Db,
    /// Shared client for short commands; blocking reads use their own.
    pub redis: Client,
    /// Where Redis is, for clients of their own.
    pub redis_target: RedisTarget,
    pub keys: Keys,
    /// The producer end of the scan queue, on `redis`.
    pub scan_queue: ScanQueue,
    /// Ownership checks with the fleet's network settings, and whether
    /// scans require a proof.
    pub ownership: Ownership,
    /// Where upgrade prompts point.
    pub upgrade_links: scans::UpgradeLinks,
}

/// URLs the core hands out, which only the edge knows how to spell.
pub struct Links {
    /// The versioned API's base URL as clients reach it (`.../api/v1`).
    pub api_url: String,
}

impl Core {
    /// Checks Postgres and Redis (one line naming the setting at fault when
    /// either cannot be used), applies the migrations and connects.
    /// `role` labels the Redis client's metrics (`api`, `scheduler`).
    pub async fn connect(
        settings: &Settings,
        links: Links,
        role: &'static str,
    ) -> anyhow::Result<Core> {
        // Both services are checked before the migrations change anything.
        startup::check_database(settings).await?;
        let redis_target = RedisTarget::from_settings(&settings.redis)?;
        let url = settings.redis.url.expose();
        let redis = startup::connect_redis(&redis_target, url, role).await?;
        let db = store::connect(settings.database_url.expose())?;
        store::migrate::run(&db)
            .await
            .context("applying database migrations")?;
        let keys = Keys::new(settings.redis.prefix.clone());
        let upgrade_links = scans::UpgradeLinks::under(&links.api_url);
        let ownership = Ownership::from_settings(settings, links.api_url)
            .context("the scanner network settings (used by ownership checks)")?;
        Ok(Core {
            scan_queue: ScanQueue::new(redis.clone(), &keys),
            db,
            redis,
            redis_target,
            keys,
            ownership,
            upgrade_links,
        })
    }

    /// Another Redis client on a connection of its own, for `role` (a
    /// metrics label), for blocking reads.
    pub async fn redis_client(
        &self,
        settings: &Settings,
        role: &'static str,
    ) -> Result<Client, startup::StartupError> {
        startup::connect_redis(&self.redis_target, settings.redis.url.expose(), role).await
    }
}
