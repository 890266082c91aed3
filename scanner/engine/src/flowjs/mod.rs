//! `flow:` scripts that are JavaScript proper, run in an embedded engine.
//!
//! Data flow: the engine hands a template's script to [`run`] on a blocking
//! thread; the script calls back into the engine through [`HostCall`]s
//! (`http(...)` runs blocks, `set(...)` adds a variable, `log(...)`), and
//! reads the template context (variables, extracted values, what it set)
//! from the global `template` object, refreshed after every `http(...)` as
//! Nuclei does.
//!
//! Boolean flows (`http(1) && http(2)`) never come here: the engine runs
//! them natively ([`crate::template::FlowExpr`]).
//!
//! The engine is [`boa_engine`], pure Rust. Nuclei runs flows in goja; the
//! scripts in the public corpus use plain ECMAScript (functions, loops,
//! `let`, arrow functions, `String`/`Array` methods), which boa covers.
//!
//! # Sandbox
//! - Nothing reaches outside the interpreter but the host calls below: boa
//!   has no file, network, process or timer access of its own, and none is
//!   added (no `boa_runtime`).
//! - A step budget: loop iterations per function frame and call depth
//!   ([`Budget`]), enforced by boa as errors a script cannot catch.
//! - A wall-time budget per template execution: the script runs in slices
//!   of VM instructions and is abandoned between two slices once the
//!   deadline passed; a host call after the deadline fails the same way, and
//!   the engine stops running blocks for it.
//!
//! # Layout
//! - `runtime`: the boa context, the host functions, the run loop.

mod runtime;

#[cfg(test)]
mod tests;

use std::time::Duration;

pub use runtime::{check_syntax, run};

/// Limits on one execution of a flow script.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Wall time for the whole flow, requests included.
    pub wall: Duration,
    /// Loop iterations per function frame (boa counts per frame).
    pub loop_iterations: u64,
    /// Nested JavaScript calls.
    pub recursion: usize,
}

impl Default for Budget {
    /// Generous for the corpus (the largest flow walks the links of one
    /// page, a request per directory) yet short enough that a runaway
    /// script cannot hold a scan slot for long.
    fn default() -> Budget {
        Budget {
            wall: Duration::from_secs(120),
            loop_iterations: 100_000,
            recursion: 128,
        }
    }
}

/// What a script asks of the engine. Sent from the script's thread; the
/// engine answers `Http` through its `reply` channel.
#[derive(Debug)]
pub enum HostCall {
    /// `http(...)`: run the blocks named by `selectors` (1-based numbers or
    /// block ids, as text) in order, or every block when empty.
    Http {
        selectors: Vec<String>,
        /// Dropped unanswered when the engine stops the flow.
        reply: std::sync::mpsc::SyncSender<HttpReply>,
    },
    /// `set(name, value)`: a variable for the requests that follow.
    Set {
        name: String,
        value: serde_json::Value,
    },
    /// `log(value)`: debugging output.
    Log(String),
}

/// The engine's answer to `http(...)`.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// Whether a block matched (Nuclei's flow callback rule).
    pub matched: bool,
    /// The template context after the step: the new `template` object.
    pub template: serde_json::Map<String, serde_json::Value>,
}

/// Why a flow script did not run to its end.
///
/// The script's own errors are kept as their text: boa's errors hold values
/// of the script's single-threaded heap, so they cannot leave the thread
/// that ran it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The script is not valid JavaScript.
    #[error("flow script does not parse: {0}")]
    Syntax(String),
    /// The script threw (a `TypeError`, a `throw`, ...).
    #[error("flow script failed: {0}")]
    Script(String),
    /// A loop or the call depth went past the step budget.
    #[error("flow script went past its step budget: {0}")]
    StepBudget(String),
    /// The wall-time budget ran out.
    #[error("flow script went past its time budget of {0:?}")]
    TimedOut(Duration),
    /// The engine stopped answering (the target was cancelled).
    #[error("flow script stopped: the scan of this target ended")]
    Stopped,
}
