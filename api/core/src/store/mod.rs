//! The storage layer: every SQL statement of scanfleet lives under this
//! module, with the rows it reads as types. SQL and rows only: the use
//! cases around it are `crate::scans` and `crate::ownership`.
//!
//! # Layout
//! - [`migrate`]: forward-only SQL migrations applied at start-up.
//! - [`users`], [`sessions`]: accounts and refresh-token sessions.
//! - [`changes`]: which users' credentials changed, for the caches above.
//! - [`tiers`]: subscription tiers and their limits.
//! - [`targets`]: domains with per-tier target limits and import.
//! - [`scans`]: the counted insert of a scan, stop, listing, the
//!   forward-only status transition.
//! - [`findings`]: idempotent insertion for the ingester, triage status.
//! - [`coverage`]: per-host coverage of a scan (technologies, templates
//!   run and skipped, requests).
//! - [`fingerprints`]: findings across scans: identity, change, the fixed
//!   rule, sticky triage.
//! - [`fingerprint_search`]: the trigram index a text search of a target's
//!   fingerprints reads, kept off the ingester's write path.
//! - [`subscriptions`], [`payments`]: paid subscriptions as the payment
//!   provider reports them, checkout sessions, applied webhook events.
//! - [`listen`]: `LISTEN` on a channel, reconnecting: the one loop behind
//!   every notification a process follows.
//! - [`webhooks`]: outbound webhooks, their secrets, the outbox, deliveries
//!   and the attempt log.

pub mod api_keys;
pub mod changes;
pub mod coverage;
pub mod dashboard;
pub mod findings;
pub mod fingerprint_search;
pub mod fingerprints;
pub mod listen;
pub mod migrate;
pub mod notifications;
pub mod payments;
pub mod scans;
pub mod schedules;
pub mod sessions;
pub mod subscriptions;
pub mod targets;
pub mod tiers;
pub mod users;
pub mod webhooks;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::error::Error;

pub type Db = Pool;

/// Builds a connection pool; connections are opened lazily.
pub fn connect(database_url: &str) -> Result<Pool, Error> {
    let config: tokio_postgres::Config = database_url
        .parse()
        .map_err(|e| anyhow::anyhow!("DATABASE_URL is not a valid Postgres URL: {e}"))?;
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(16)
        .build()
        .map_err(|e| Error::Unexpected(anyhow::anyhow!("cannot build the Postgres pool: {e}")))
}

/// SQLSTATE of a unique-constraint violation.
pub(crate) fn is_unique_violation(err: &tokio_postgres::Error) -> bool {
    err.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// Clamped `limit`/`offset` of list endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}
