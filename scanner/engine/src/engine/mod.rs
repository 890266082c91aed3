//! The execution engine: builds requests from compiled templates for each
//! target, sends them on tokio through the byte-exact HTTP client, and
//! evaluates every response on the rayon pool.
//!
//! # Layout
//! - [`compile`]: a loaded template prepared for execution (strings parsed,
//!   operators compiled, clustering key).
//! - [`url`]: the input URL, its variables, Nuclei's path and query rules.
//! - [`build`]: one request of a block, rendered and ready for the wire.
//! - `cache`: identical safe requests of a target sent once, across templates.
//! - [`payloads`]: batteringram, pitchfork and clusterbomb combinations.
//! - [`vars`]: layered variable scopes.
//! - [`response`]: the variables a response offers to operators.
//! - `exec`: one template (or cluster) against one target: multi-step
//!   history, extracted values, cookies, stop-at-first-match, req-condition.
//! - [`run`]: the [`Engine`]: scheduling, clustering, streaming, cancellation.
//! - [`oob`]: out-of-band payload hosts and `interactsh_*` matching.
//! - [`result`]: [`ScanResult`] and the result multiplicity rules.
//! - [`load`]: the templates of a run: the built-in pack or files, parsed,
//!   checked and compiled.
//! - [`error`]: [`EngineError`], why the engine or a template cannot start.
//! - [`failure`]: [`TargetError`], what a run reports of a target.

pub mod build;
mod cache;
pub mod compile;
pub mod error;
mod exec;
pub mod failure;
pub mod load;
pub mod oob;
pub mod payloads;
pub mod response;
pub mod result;
pub mod run;
pub mod url;
pub mod vars;

pub use compile::CompiledTemplate;
pub use error::{CompileError, EngineError, TargetProblem, UnknownAttack};
pub use failure::{TargetError, TargetErrorKind, TargetFailure};
pub use oob::{Interactsh, OobTiming};
pub use result::ScanResult;
pub use run::{Engine, EngineConfig, Event, RunReport};
