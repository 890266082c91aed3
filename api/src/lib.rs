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
//! poem-openapi) and the Postgres and Redis clients, and the scanner's HTTP
//! crate (`scanfleet-http`) for its address policy and hosts map alone:
//! the webhook guard refuses the addresses a scan would. It must not import the
//! template engine, the scanner node or a command-line parser (no
//! `scanfleet-engine`, `scanfleet-scanner`, boa, jaq or clap), nor the
//! scheduler. Only the tests import it.
//!
//! # Exports
//! Only what the binary and the end-to-end tests use: [`Application`] and
//! [`app::create_admin`], [`state::AppState`] (the tests reach the core
//! through it), [`openapi_json`], and for tests that forge credentials or
//! signatures [`auth::tokens`] and [`webhooks::sign`]. Every other module
//! is private.
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

mod access_log;
mod allow;
pub mod app;
pub mod auth;
mod body_limit;
mod console;
mod contract;
mod detail_cache;
mod dto;
mod error;
mod guard;
mod hub;
mod json_body;
mod metrics;
mod parse_errors;
mod payload;
mod payments;
mod problem;
mod ratelimit;

mod routes;
pub mod state;
mod throttle;
mod validate;
pub mod webhooks;
mod ws;

// What the binary and the tests use; the rest is the crate's own.
pub use app::Application;
pub use routes::openapi_json;
