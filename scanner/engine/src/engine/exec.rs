//! Running one template (or one cluster of templates) against one target.
//!
//! Requests go out on tokio. A response with a body over 32 KiB is handed
//! to the rayon pool, where its variable map is built and the operators
//! evaluated, and the outcome comes back through a oneshot channel:
//! matching it is CPU work (regexes over bodies of up to 10 MiB, DSL) and
//! would stall the reactor if it ran on a tokio worker; `spawn_blocking`
//! would do, but its pool is sized for blocking I/O, while rayon's is sized
//! to the cores and also runs the per-cluster fan-out in parallel. Smaller
//! responses, most of a scan, are matched on the task that received them
//! ([`match_job`]): over the public corpus that took 3 µs at the median
//! and 0.4 ms at the 99.9th percentile, less than the two thread wake-ups
//! of a trip to rayon and back.
//!
//! # Layout
//! - [`send`]: one request out, through the target's response cache, with
//!   the target's failure count and refusal.
//! - [`template`]: one template's execution, the per-block state machine
//!   (payload combinations, `iterate-all` rounds, flows, `req-condition`).
//! - [`cluster`]: one request shared by a cluster of templates, matched
//!   against every member.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::cache::ResponseCache;
use super::compile::CompiledBlock;
use super::failure::{TargetError, TargetErrorKind, TargetFailure};
use super::oob::OobRun;
use super::result::MatchOutcome;
use super::url::InputUrl;
use super::vars::{TargetInput, VarMap};
use super::Event;
use crate::operators::{OperatorResult, Operators};
use scanfleet_http::{CookieJar, HttpClient, Response, SendOptions, TargetUrl};

mod cluster;
mod send;
mod template;

pub(crate) use cluster::run_cluster;
pub(crate) use template::run_template;

/// What every job of a run shares.
pub(crate) struct RunShared {
    pub client: Arc<HttpClient>,
    /// `--var name=value` options.
    pub option_vars: Arc<VarMap>,
    /// Results and errors go out here; the run's receiver drains it. Closed
    /// when the last job (and so the driving task) ends.
    pub sink: mpsc::Sender<Event>,
    /// Out-of-band detection, when the run has an interactsh session.
    pub oob: Option<Arc<OobRun>>,
}

/// One target of a run.
pub(crate) struct TargetRun {
    pub target: TargetUrl,
    /// The input URL and its variables (`BaseURL`, `Hostname`, ...), made
    /// once.
    pub input: TargetInput,
    /// What results report as `host`.
    pub host: String,
    /// Child of the run's token; cancelled when the run stops or the target
    /// is refused or unreachable, so its remaining jobs end at once.
    pub cancel: CancellationToken,
    refused: AtomicBool,
    failures: AtomicUsize,
    /// Answers of identical safe requests, shared across templates.
    pub cache: ResponseCache,
}

impl TargetRun {
    pub fn new(target: TargetUrl, cancel: CancellationToken) -> TargetRun {
        let input = InputUrl::from_target(&target);
        TargetRun {
            host: input.root_url(),
            input: TargetInput::of(input),
            target,
            cancel,
            refused: AtomicBool::new(false),
            failures: AtomicUsize::new(0),
            cache: ResponseCache::default(),
        }
    }
}

/// Runs `f` on the rayon pool and waits for it without blocking tokio.
/// `None` if `f` panicked (the sender is dropped unsent).
async fn on_rayon<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let _ = tx.send(f());
    });
    rx.await.ok()
}

/// Responses up to this size are matched on the task that received them.
/// Matching a small body takes microseconds, less than handing it to
/// rayon and back (two thread wake-ups, which were about a sixth of a
/// corpus run's CPU); larger bodies go to rayon as before.
const INLINE_MATCH_BYTES: usize = 32 * 1024;

/// Runs the matching job `f` for responses holding `bytes` of body: in
/// place when that is small, on rayon otherwise. `None` if `f` panicked.
async fn match_job<T: Send + 'static>(
    bytes: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    run_job(bytes <= INLINE_MATCH_BYTES, f).await
}

/// Runs `f` on this task when `in_place`, on rayon otherwise. `None` if
/// `f` panicked.
async fn run_job<T: Send + 'static>(
    in_place: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    if in_place {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
    } else {
        on_rayon(f).await
    }
}

async fn emit(shared: &RunShared, event: Event) {
    // A closed receiver means nobody wants the rest: not an error.
    let _ = shared.sink.send(event).await;
}

async fn report(
    shared: &RunShared,
    target: &TargetRun,
    template_id: Option<&str>,
    kind: TargetErrorKind,
    failure: TargetFailure,
) {
    emit(
        shared,
        Event::Error(TargetError {
            target: target.target.to_string(),
            template_id: template_id.map(str::to_string),
            kind,
            failure: Arc::new(failure),
        }),
    )
    .await;
}

fn send_options(block: &CompiledBlock, jar: Option<&CookieJar>) -> SendOptions {
    SendOptions {
        follow_redirects: block.redirects,
        max_redirects: block.max_redirects,
        host_redirects_only: block.host_redirects,
        cookie_jar: if block.cookie_jar { jar.cloned() } else { None },
    }
}

fn outcome_of(r: &OperatorResult, operators: &Operators) -> MatchOutcome {
    MatchOutcome {
        has_matchers: r.has_matchers,
        only_internal_matchers: operators.only_internal_matchers(),
        matched: r.matched,
        matched_names: r.matched_names.clone(),
        extracts: r.extracts.clone(),
    }
}

/// The responses of one request in the order they are judged: the final
/// response first, then each redirect response back to the first one, the
/// order in which Nuclei walks a followed chain. Each is judged on its own,
/// so an intermediate hop's status or headers can match, reported at that
/// hop's URL.
fn judged_responses(resp: Arc<Response>) -> Vec<Arc<Response>> {
    let earlier: Vec<Arc<Response>> = resp
        .redirect_responses
        .iter()
        .rev()
        .map(|hop| Arc::new(hop.clone()))
        .collect();
    std::iter::once(resp).chain(earlier).collect()
}

/// A new id for one template execution (or cluster send).
fn next_run_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
