//! Contracts shared by every scanfleet process: settings, job and event
//! payloads that cross Redis, Redis key names, severities and ids.
//!
//! Data flow: client -> api -> Redis queue (`jobs::ScanJob`) -> scanner node
//! -> Redis stream (`events::ScanEvent`) -> ingester -> Postgres -> WebSocket.
//! Everything that two processes must agree on lives here, and nothing else:
//! no HTTP or SQL types. One exception, behind the `postgres` feature that
//! only the store enables: the enum columns' `FromSql`/`ToSql` ([`sql`]),
//! which can only be written beside the enums they read.
//!
//! # Imports
//! The bottom of every process: it imports registry crates only (serde,
//! chrono, uuid, tracing, tokio for the stop signal and the like) and no
//! crate of ours. It must not
//! import a Redis or Postgres client, an HTTP framework or client, or a
//! command-line parser: every other crate imports it, so what it links every
//! process links.
//!
//! # Layout
//! - [`settings`]: typed configuration loaded once from defaults, an optional
//!   file and environment variables.
//! - [`secret`]: a wrapper that keeps secrets out of `Debug` output.
//! - [`severity`]: the five finding severities and their normalisation.
//! - [`keys`]: Redis key names, all under the deployment's prefix.
//! - [`jobs`], [`events`]: payloads on the queue and on scan event streams.
//! - [`telemetry`]: tracing set-up shared by the binaries.
//! - [`chain`]: an error printed with its causes, each once.
//! - [`shutdown`]: SIGINT / SIGTERM, the one stop signal of every binary.
//! - `sql` (feature `postgres`): enum columns read and written as the enum.

pub mod chain;
pub mod events;
pub mod jobs;
pub mod keys;
pub mod secret;
pub mod settings;
pub mod severity;
pub mod shutdown;
#[cfg(feature = "postgres")]
pub mod sql;
pub mod telemetry;

pub use secret::Secret;
pub use settings::{NodeSettings, Settings};
pub use severity::Severity;
