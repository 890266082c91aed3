//! The queue and event-stream protocol between scanfleet's processes, on
//! Redis, in one place: the api and the scheduler push scan jobs and stops,
//! scanner nodes take jobs and append events, the ingester and the
//! WebSocket hub read them.
//!
//! Data flow: api / scheduler -> [`queue`] -> scanner node -> [`events`]
//! (a stream per scan + the ingest index) -> ingester -> Postgres; the
//! WebSocket hub reads the same streams.
//!
//! # Imports
//! It may import `scanfleet-common` (payloads, key names, settings),
//! `fred` and `apalis-core`; nothing of the api, the core, the scanner or the scheduler, and
//! no HTTP or SQL. The api, the core, the scheduler and the scanner node
//! import it; the engine must not.
//!
//! # Layout
//! - [`connect`]: every Redis client, reconnecting, Sentinel-aware, counted.
//! - [`queue`]: the scan queue with leases ([`queue::ScanQueue`]).
//! - [`tasks`]: the queue as an apalis backend: scan jobs are apalis tasks
//!   ([`tasks::ScanTasks`]).
//! - [`events`]: appending and reading scan event streams, the ingest index.
//! - [`markers`]: closed scans, attempt counts, stops, the data-set mark.
//! - [`nodes`]: the fleet's registry (each node's heartbeat record).

pub mod connect;
pub mod events;
pub mod markers;
pub mod nodes;
pub mod queue;
pub mod tasks;

pub use connect::{connect, subscriber, Link, RedisTarget};
pub use queue::{JobState, Renewal, ScanQueue};
pub use tasks::{ScanTasks, Taking};

/// What a bus operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("a Redis command failed")]
    Redis(#[from] fred::error::Error),
    #[error("a record could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// The task claiming a worker's next job panicked or was cancelled.
    #[error("the task claiming jobs ended abnormally (panicked: {panicked})")]
    Claiming { panicked: bool },
    #[error("the job of scan {scan_id} cannot be read or written")]
    BadJob {
        scan_id: uuid::Uuid,
        #[source]
        source: serde_json::Error,
    },
}
