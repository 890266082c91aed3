//! The scanfleet api: the REST surface, authentication, rate limits and the
//! storage layer that the scheduler shares.
//!
//! Data flow: client -> **api** -> Redis queue -> scanner nodes -> Redis event
//! streams -> **ingester** -> Postgres, and the **WebSocket** relaying the
//! same streams live. Every api process runs an ingester and a WebSocket
//! hub beside its HTTP server. The OpenAPI document is generated from the
//! route definitions, so the contract cannot drift from the code.
//!
//! # Layout
//! - [`app`]: builds and runs one api process ([`app::Application`]).
//! - [`routes`]: one module per endpoint group, plus the OpenAPI service.
//! - [`auth`]: passwords, tokens, security schemes, identities.
//! - [`store`]: every SQL statement, and the migrations.
//! - [`error`], [`problem`]: error kinds and their RFC 9457 responses.
//! - [`payload`]: JSON bodies serialised directly (the read hot path).
//! - [`json_body`]: JSON request bodies whose parse errors name the field.
//! - [`parse_errors`]: parse errors of parameters and bodies in the
//!   contract's terms (the field and what it must be).
//! - [`detail_cache`]: serialised scan details kept while the scan's
//!   revision is unchanged.
//! - [`body_limit`]: the request body cap (413 beyond it).
//! - [`validate`]: parsing of request values at the edge.
//! - [`contract`]: request value types that make the contract say what the
//!   handlers check (enums, lengths, ranges).
//! - [`allow`]: the `Allow` header of a 405, from the contract's paths.
//! - [`cron`]: five-field cron expressions ([`cron::CronSpec`]).
//! - [`ratelimit`]: per-user and per-IP request limits counted in Redis.
//! - [`throttle`]: per-account limits on wrong passwords (login, password
//!   change), counted in Redis.
//! - [`domain`]: the target hostname newtype ([`domain::Domain::parse`]).
//! - [`ownership`]: proof that a user controls a target's domain (DNS TXT
//!   or a well-known file) and the gate that refuses scans without it.
//! - [`payments`]: the payment provider (Stripe's HTTP API, or the dev
//!   stand-in) and its signed webhook events.
//! - [`queue`]: pushing scan jobs to the apalis Redis queue, publishing stops.
//! - [`report`]: scan reports in HTML, PDF, JSON, SARIF and CSV, streamed
//!   from Postgres into one renderer per format.
//! - [`state`]: what every handler shares.
//! - [`startup`]: start-up checks that name the setting at fault.
//! - [`metrics`]: `GET /metrics` in Prometheus text.
//! - [`ingest`]: the ingester (scan events -> Postgres), and the stream
//!   layout decision.
//! - [`ws`]: the progress WebSocket and the per-process stream hub.

pub mod allow;
pub mod app;
pub mod auth;
pub mod body_limit;
pub mod contract;
pub mod cron;
pub mod detail_cache;
pub mod domain;
pub mod error;
pub mod ingest;
pub mod json_body;
pub mod metrics;
pub mod ownership;
pub mod parse_errors;
pub mod payload;
pub mod payments;
pub mod problem;
pub mod queue;
pub mod ratelimit;
pub mod report;
pub mod routes;
pub mod startup;
pub mod state;
pub mod store;
pub mod throttle;
pub mod validate;
pub mod ws;

pub use app::Application;
pub use error::Error;
pub use routes::openapi_json;
