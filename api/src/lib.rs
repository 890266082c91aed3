//! The scanfleet api: the REST surface, authentication, rate limits,
//! payments and the progress WebSocket, the HTTP edge over the core
//! (`scanfleet-core`), whose store and use cases the scheduler shares.
//!
//! Data flow: client -> **api** -> Redis queue -> scanner nodes -> Redis event
//! streams -> **ingester** -> Postgres, and the **WebSocket** relaying the
//! same streams live. Every api process runs an ingester and a WebSocket
//! hub beside its HTTP server. The OpenAPI document is generated from the
//! route definitions, so the contract cannot drift from the code.
//!
//! # Imports
//! The api sits on top of the service side: it may import
//! `scanfleet-core` (store, use cases, ingester), `scanfleet-report`,
//! `scanfleet-bus`, `scanfleet-common` and the HTTP framework (poem,
//! poem-openapi) and the Postgres and Redis clients; the scanner's HTTP
//! client is reached only through the core. It must not import the
//! template engine, the scanner node or a command-line parser (no
//! `scanfleet-engine`, `scanfleet-scanner`, boa, jaq or clap), nor the
//! scheduler. Only the tests import it.
//!
//! # Layout
//! - [`access_log`]: the request span and access log, credentials
//!   redacted from URIs and headers.
//! - [`app`]: builds and runs one api process ([`app::Application`]).
//! - [`routes`]: one module per endpoint group, plus the OpenAPI service.
//! - [`console`]: the web console at `/` (server-rendered pages, htmx).
//! - [`auth`]: passwords, tokens, security schemes, identities.
//! - [`error`], [`problem`]: error kinds and their RFC 9457 responses.
//! - [`dto`]: the API's scan, finding and schedule shapes, shared by the
//!   routes and the webhook bodies.
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
//! - [`ratelimit`]: per-user and per-IP request limits counted in Redis.
//! - [`throttle`]: per-account limits on wrong passwords (login, password
//!   change), counted in Redis.
//! - [`payments`]: the payment provider (Stripe's HTTP API, or the dev
//!   stand-in) and its signed webhook events.
//! - [`state`]: what every handler shares.
//! - [`metrics`]: `GET /metrics` in Prometheus text.
//! - [`ws`]: the progress WebSocket and the per-process stream hub.
//! - [`webhooks`]: outbound webhooks: signing, the SSRF guard, bodies and
//!   the dispatcher.

pub mod access_log;
pub mod allow;
pub mod app;
pub mod auth;
pub mod body_limit;
pub mod console;
pub mod contract;
pub mod detail_cache;
mod dto;
pub mod error;
pub mod guard;
pub mod hub;
pub mod json_body;
pub mod metrics;
pub mod parse_errors;
pub mod payload;
pub mod payments;
pub mod problem;
pub mod ratelimit;

pub mod routes;
pub mod state;
pub mod throttle;
pub mod validate;
pub mod webhooks;
pub mod ws;

pub use app::Application;
pub use error::Error;
pub use routes::openapi_json;
