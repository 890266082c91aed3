//! The scanfleet template engine: runs Nuclei-format HTTP templates against
//! targets, as a library, as the `scanfleet-scanner` CLI and as a scanner node.
//!
//! Data flow: templates are loaded and compiled once ([`template`]); the
//! [`engine`] builds requests per target, sends them through the byte-exact
//! [`http`] client on tokio, and hands responses to the [`operators`]
//! (matchers and extractors, using the [`dsl`]), which decide results on the
//! task that received a small response and on a rayon pool for a large one.
//!
//! # Layout
//! - [`dsl`]: expression language and `{{...}}` interpolation.
//! - [`http`]: raw HTTP/1.1 client with address safety checks.
//! - [`template`]: YAML model, loader, and runnability classification.
//! - [`operators`]: matchers and extractors.
//! - `goregex`: Go RE2 patterns compiled with the `regex` crate, for
//!   operators and DSL helpers alike.
//! - [`engine`]: request building, payloads, multi-step execution, results.
//! - [`flowjs`]: the sandboxed JavaScript engine of `flow:` scripts.
//! - [`pack`]: the default template pack shipped in the binary.
//! - [`node`]: the scanner node (queue worker, scan stages, event streams).

pub mod dsl;
pub mod engine;
pub mod flowjs;
pub(crate) mod goregex;
pub mod http;
pub mod node;
pub mod operators;
pub mod pack;
pub mod template;
