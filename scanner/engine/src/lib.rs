//! `scanfleet-engine`: the template engine. It runs Nuclei-format HTTP
//! templates against targets and reports what they find; the
//! `scanfleet-scanner` binary drives it from the command line and from the
//! scanner node.
//!
//! Data flow: api -> Redis queue -> scanner node -> **engine** -> events.
//! Inside: templates are loaded and compiled once ([`template`],
//! [`engine::load`]); the [`engine`] builds requests per target, sends them
//! through the byte-exact `scanfleet-http` client on tokio, and hands
//! responses to the [`operators`] (matchers and extractors, using the
//! [`dsl`]), which decide results on the task that received a small response
//! and on a rayon pool for a large one.
//!
//! # Layout
//! - [`dsl`]: expression language and `{{...}}` interpolation.
//! - `goregex`: Go RE2 patterns compiled with the `regex` crate, for
//!   operators and DSL helpers alike.
//! - [`operators`]: matchers and extractors.
//! - [`template`]: YAML model, loader, runnability check and `templates
//!   check` totals.
//! - [`flowjs`]: the sandboxed JavaScript engine of `flow:` scripts.
//! - [`pack`]: the default template pack shipped in the binary.
//! - [`engine`]: template loading for a run, request building, payloads,
//!   multi-step execution, results.
//!
//! # Imports
//! The engine is a library with no process around it: it imports
//! `scanfleet-http` (the client), `scanfleet-common` (severities and
//! settings) and `scanfleet-interactsh` (the out-of-band client its caller
//! registers a session with), and nothing that knows of Redis, a queue, a
//! database or a command line (no `scanfleet-bus`, fred, clap). The engine
//! must not import the scanner node either (`scanfleet-scanner`): the node
//! drives the engine, never the other way round. It writes nothing to a
//! terminal: what it cannot run it returns as typed values for the caller
//! to report.

pub mod dsl;
pub mod engine;
pub mod flowjs;
pub(crate) mod goregex;
pub mod operators;
pub mod pack;
pub mod template;
