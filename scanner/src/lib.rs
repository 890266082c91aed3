//! `scanfleet-scanner`: the scanner node, the process that takes scan jobs
//! from the Redis queue and runs them with the template engine.
//!
//! Data flow: api -> Redis queue -> **scanner node** (stages, with
//! `scanfleet-engine` on rayon) -> per-scan event streams -> ingester (api)
//! -> Postgres.
//!
//! # Layout
//! - [`node`]: the queue worker, the stages of a scan, the event writes.
//! - [`auto`]: technology detection, the technology -> templates map and
//!   the `auto` engine's per-host plans with their coverage.
//!
//! The `scanfleet-scanner` binary (`main.rs` and its `cli` module) parses
//! the command line: `run` and `templates check` call the engine directly,
//! `worker` starts a [`node::Node`].
//!
//! # Imports
//! This crate sits on top: it imports `scanfleet-engine`,
//! `scanfleet-http`, `scanfleet-bus` (the queue and event-stream protocol)
//! and `scanfleet-common`. Nothing imports it but the binary and tests.
//! It must not import the service side (`scanfleet-core`, the api, the
//! scheduler) or a Postgres client: a node reaches the service only
//! through Redis, which is why it needs no database credentials.

pub mod auto;
pub mod node;
