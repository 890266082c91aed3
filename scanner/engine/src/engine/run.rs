//! The engine: runs compiled templates against targets and streams events.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::compile::CompiledTemplate;
use super::error::EngineError;
use super::exec::{run_cluster, run_template, RunShared, TargetRun};
use super::failure::TargetError;
use super::oob::{Interactsh, OobRun};
use super::result::ScanResult;
use super::vars::{layer_from_strings, VarMap};
use scanfleet_http::{ClientConfig, HttpClient, TargetUrl};

/// Settings of an [`Engine`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The HTTP client: timeout, body cap, address safety, global
    /// concurrency bound and per-host request-rate ceiling.
    pub client: ClientConfig,
    /// `--var name=value` values, visible to every template.
    pub variables: Vec<(String, String)>,
    /// Template executions in flight at once (each sends its requests in
    /// order; the client bounds the requests themselves).
    pub template_concurrency: usize,
    /// Send identical single requests of several templates once per target.
    pub clustering: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            client: ClientConfig::default(),
            variables: Vec::new(),
            template_concurrency: 25,
            clustering: true,
        }
    }
}

/// What a run produces, in the order it happens.
#[derive(Debug, Clone)]
pub enum Event {
    Result(ScanResult),
    Error(TargetError),
    /// One more (template or cluster, target) job finished: `done` of
    /// `total` (a scanner node turns this into scan progress).
    Progress {
        done: usize,
        total: usize,
    },
}

/// Everything a finished run produced.
#[derive(Debug, Default)]
pub struct RunReport {
    pub results: Vec<ScanResult>,
    pub errors: Vec<TargetError>,
    /// The run was stopped through its cancellation token.
    pub cancelled: bool,
}

/// Runs templates against targets. Cloning is cheap and shares the client
/// (and so its connection pool, concurrency bound and rate limits).
#[derive(Clone)]
pub struct Engine {
    client: Arc<HttpClient>,
    config: Arc<EngineConfig>,
    option_vars: Arc<VarMap>,
    /// The interactsh session runs use for out-of-band detection.
    interactsh: Option<Interactsh>,
}

/// Events buffered between the jobs and a slow consumer.
const EVENT_BUFFER: usize = 1024;

impl Engine {
    pub fn new(config: EngineConfig) -> Result<Engine, EngineError> {
        let client = HttpClient::new(config.client.clone()).map_err(EngineError::Client)?;
        let option_vars = Arc::new(layer_from_strings(config.variables.iter().cloned()));
        Ok(Engine {
            client: Arc::new(client),
            config: Arc::new(config),
            option_vars,
            interactsh: None,
        })
    }

    /// This engine (sharing its client) with runs that make payload hosts
    /// on `interactsh`'s session and wait for their interactions. The
    /// templates must have been loaded with interactsh allowed.
    pub fn with_interactsh(&self, interactsh: Interactsh) -> Engine {
        Engine {
            interactsh: Some(interactsh),
            ..self.clone()
        }
    }

    /// The interactsh session and timing of this engine's runs, if any.
    pub fn interactsh(&self) -> Option<&Interactsh> {
        self.interactsh.as_ref()
    }

    /// Starts a run and returns its events as they happen. The channel
    /// closes when the run is over: every job finished, or `cancel` fired
    /// (jobs stop at their next request).
    pub fn start(
        &self,
        templates: Vec<Arc<CompiledTemplate>>,
        targets: Vec<TargetUrl>,
        cancel: CancellationToken,
    ) -> mpsc::Receiver<Event> {
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let oob = self
            .interactsh
            .as_ref()
            .map(|i| Arc::new(OobRun::new(i, tx.clone())));
        let shared = Arc::new(RunShared {
            client: self.client.clone(),
            option_vars: self.option_vars.clone(),
            sink: tx,
            oob: oob.clone(),
        });
        let units = plan(&templates, self.config.clustering);
        let limit = self.config.template_concurrency.max(1);
        let total = units.len() * targets.len();
        let done = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            // Aborted when dropped, at the end of this task.
            let _poller = oob
                .clone()
                .map(|o| AbortOnDropHandle::new(tokio::spawn(o.poll_forever())));
            let targets: Arc<Vec<Arc<TargetRun>>> = Arc::new(
                targets
                    .into_iter()
                    .map(|t| Arc::new(TargetRun::new(t, cancel.child_token())))
                    .collect(),
            );
            // Units outside, targets inside: consecutive jobs hit different
            // hosts, which spreads load and keeps per-host rate limits from
            // serialising the whole run. Jobs are produced lazily: templates
            // times targets can be large.
            let jobs = units.into_iter().flat_map(move |unit| {
                let targets = targets.clone();
                (0..targets.len()).map(move |i| (unit.clone(), targets[i].clone()))
            });
            // Each job is a task of its own, so jobs run on every tokio
            // worker (polled inside one driving task, they shared a single
            // thread). Dropping the stream on cancellation aborts them.
            let work = futures::stream::iter(jobs)
                .map(move |(unit, target)| {
                    let shared = shared.clone();
                    let done = done.clone();
                    AbortOnDropHandle::new(tokio::spawn(async move {
                        if target.cancel.is_cancelled() {
                            return;
                        }
                        // Boxed: the job's state machine is large, and a task
                        // holding it inline was copied whole on every move
                        // into the runtime; the box is written once.
                        match unit {
                            Unit::Single(t) => Box::pin(run_template(&shared, &target, t)).await,
                            Unit::Cluster(members) => {
                                Box::pin(run_cluster(&shared, &target, members)).await
                            }
                        }
                        let done = done.fetch_add(1, Ordering::Relaxed) + 1;
                        // A closed receiver only means nobody follows progress.
                        let _ = shared.sink.send(Event::Progress { done, total }).await;
                    }))
                })
                .buffer_unordered(limit);
            let stop = cancel.clone();
            let finish = cancel.clone();
            work.take_until(stop.cancelled_owned())
                .for_each(|joined| async move {
                    // Aborted jobs only end this way after cancellation,
                    // when the stream is already gone; a panic is a bug.
                    if let Err(e) = joined {
                        tracing::error!(error = %e, "a template job ended abnormally");
                    }
                })
                .await;
            if let Some(oob) = oob {
                oob.finish(&finish).await;
            }
        });
        rx
    }

    /// The HTTP client every run of this engine shares.
    pub fn client(&self) -> &HttpClient {
        &self.client
    }

    /// Runs to the end, handing each event to `on_event` as it happens
    /// (a scanner node forwards findings this way). Returns whether the
    /// run was cancelled.
    pub async fn run_with<F: FnMut(Event)>(
        &self,
        templates: Vec<Arc<CompiledTemplate>>,
        targets: Vec<TargetUrl>,
        cancel: CancellationToken,
        mut on_event: F,
    ) -> bool {
        let mut rx = self.start(templates, targets, cancel.clone());
        while let Some(ev) = rx.recv().await {
            on_event(ev);
        }
        cancel.is_cancelled()
    }

    /// Runs to the end and collects everything.
    pub async fn run(
        &self,
        templates: &[Arc<CompiledTemplate>],
        targets: &[TargetUrl],
    ) -> RunReport {
        let mut report = RunReport::default();
        report.cancelled = self
            .run_with(
                templates.to_vec(),
                targets.to_vec(),
                CancellationToken::new(),
                |ev| match ev {
                    Event::Result(r) => report.results.push(r),
                    Event::Error(e) => report.errors.push(e),
                    Event::Progress { .. } => {}
                },
            )
            .await;
        report
    }
}

/// One schedulable piece of work per target.
#[derive(Clone)]
enum Unit {
    Single(Arc<CompiledTemplate>),
    /// Templates sharing one identical request, sent once.
    Cluster(Arc<Vec<Arc<CompiledTemplate>>>),
}

/// Groups clusterable templates by their request; the rest run alone.
fn plan(templates: &[Arc<CompiledTemplate>], clustering: bool) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut groups: HashMap<&str, Vec<Arc<CompiledTemplate>>> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for t in templates {
        match (&t.cluster_key, clustering) {
            (Some(key), true) => {
                let entry = groups.entry(key.as_str()).or_default();
                if entry.is_empty() {
                    order.push(key.as_str());
                }
                entry.push(t.clone());
            }
            _ => units.push(Unit::Single(t.clone())),
        }
    }
    for key in order {
        if let Some(mut members) = groups.remove(key) {
            if members.len() == 1 {
                units.push(Unit::Single(members.remove(0)));
            } else {
                units.push(Unit::Cluster(Arc::new(members)));
            }
        }
    }
    units
}

/// Parses `name=value` options.
pub fn parse_variables(items: &[String]) -> Result<Vec<(String, String)>, EngineError> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(EngineError::InvalidVariable(item.clone())),
        })
        .collect()
}
