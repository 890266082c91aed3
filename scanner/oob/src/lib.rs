//! `scanfleet-oob`: our interactsh-compatible out-of-band server.
//!
//! A scan puts payload hosts (`<id><nonce>.<domain>`) into its requests; a
//! vulnerable target then looks one up or connects to it. This server is
//! authoritative for the domain, so those lookups and connections reach
//! it: it records them (DNS, HTTP, HTTPS, SMTP, LDAP) for the registered
//! id and hands them, encrypted, to the client that registered it when it
//! polls (the scanner engine, or nuclei with `-iserver`). The protocol
//! itself lives in `scanfleet-interactsh`, shared with the engine's client.
//!
//! The key design decision: the server is stateless. Registrations and
//! pending interactions live in Redis with a sliding expiry, each operation
//! one atomic script, so several instances behind one DNS name serve the
//! same sessions and a restart loses nothing.
//!
//! # Imports
//! It may import `scanfleet-interactsh` (the protocol), `scanfleet-common`
//! (log set-up, `Secret`), `fred` for Redis, hyper and hickory for its listeners and
//! clap for its flags. It is a process of its own beside the service: it
//! must not import the core, the api, the bus, the engine or the scanner
//! node, and nothing imports it but its binary and its tests.
//!
//! # Layout
//! - [`settings`]: flags and `SCANFLEET_OOB__*` variables.
//! - [`app`]: [`Application::build`] binds everything, then
//!   [`Application::run_until_stopped`].
//! - [`store`]: the Redis keys and scripts.
//! - [`recorder`]: finds ids and stores interactions, for every listener.
//! - [`http`]: the API and HTTP(S) callbacks; [`dns`], [`smtp`], [`ldap`]:
//!   the other listeners; [`tcp`]: their shared accept loop.
//! - [`metrics`]: Prometheus counters.
//! - [`error`]: the error type, [`OobError`].

pub mod app;
pub mod dns;
pub mod error;
pub mod http;
pub mod ldap;
pub mod metrics;
pub mod recorder;
pub mod settings;
pub mod smtp;
pub mod store;
pub mod tcp;

pub use app::Application;
pub use error::OobError;
pub use settings::Settings;
