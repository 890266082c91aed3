//! The scanner node: takes [`ScanJob`]s from the apalis Redis queue, runs
//! each scan's stages with the template engine, and appends what happens to
//! the scan's Redis event stream. A node holds only Redis settings and its
//! own scanner settings; it never talks to Postgres.
//!
//! Data flow: api -> Redis queue -> **node** (stages, engine on rayon) ->
//! per-scan event stream + ingest index -> ingester (api) -> Postgres, and
//! the WebSocket reading the same stream.
//!
//! # Events
//! Every event of a scan goes to `{prefix}:scan:{id}:events`, one stream per
//! scan, in the order it happened; each write also appends the scan id to
//! the ingest index `{prefix}:scan-events`, which the ingesters share
//! through one consumer group. The node never trims or expires a stream:
//! the ingester sets the expiry after it committed the terminal event. The
//! layout and why it was chosen are described in the api's `ingest` module.
//!
//! # apalis-redis 1.0, and how the node works around it
//! - *Idle workers poll only on their heartbeat*: [`queue::Nudged`] re-polls
//!   every `SCANFLEET_SCANNER__POLL_INTERVAL_MS` (50 ms) while idle.
//! - *Dead-worker recovery after 5 minutes, run only by live workers*: the
//!   heartbeat is 2 s and a node silent for 10 s has its jobs re-enqueued by
//!   any other node; when no other node is alive, the scheduler's reaper
//!   fails the scan once it has been silent for its limit.
//! - *`max_attempts` is not honoured, and a re-enqueued job does not count
//!   an attempt*: the node counts pick-ups per scan in Redis
//!   (`{prefix}:scan:{id}:attempts`) and fails the scan on the fourth, that
//!   is after three crashed attempts.
//! - *`.timeout()` leaves a job dead with no retry*: no apalis timeout is
//!   used; the node enforces each engine's deadline itself
//!   (`SCANFLEET_SCANNER__DEADLINE_{FULL,QUICK,RECON}_SECS`) and fails the
//!   scan with a clear error.
//! - *A backend error ends the worker's run*: the node starts a new worker
//!   under the same name, so the jobs it holds stay its own.
//! - A job for a scan that is over (stopped, reaped, finished by an earlier
//!   attempt) finds the scan's closed marker and is dropped.
//!
//! # Layout
//! - [`engines`]: each engine as data (stages, templates, deadlines).
//! - [`queue`]: the apalis storage and the polling wrapper.
//! - [`sink`]: event writes.
//! - [`control`]: running scans, stops, heartbeats and deadlines.
//! - [`pipeline`]: the stages of one scan; [`discover`] and [`probe`].

pub mod control;
pub mod discover;
pub mod engines;
pub mod pipeline;
pub mod probe;
pub mod queue;
pub mod sink;

use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{Data, WorkerBuilder, WorkerBuilderExt};
use fred::clients::Client;
use fred::interfaces::{ClientLike, KeysInterface};
use fred::prelude::{Builder, Config as RedisConfig, Expiration};
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::ScanJob;
use scanfleet_common::keys::Keys;
use scanfleet_common::Settings;
use tokio_util::sync::CancellationToken;

use crate::engine::{CompiledTemplate, Engine, EngineConfig};
use crate::http::ClientConfig;
use control::{EndReason, Running};
use engines::EngineSpec;
use pipeline::Outcome;
use sink::EventSink;

/// A scan is failed when a node takes it up for the fourth time: three
/// attempts ended with their node gone.
pub const MAX_ATTEMPTS: i64 = 3;

/// How long per-scan markers and counters live.
const MARKER_TTL_SECS: i64 = 7 * 24 * 60 * 60;

/// What can stop a node or a scan's reporting.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("Redis: {0}")]
    Redis(#[from] fred::error::Error),
    #[error("Redis queue: {0}")]
    Queue(#[from] apalis_redis::RedisError),
    #[error("scanner settings: {0}")]
    Settings(String),
    #[error("templates: {0}")]
    Templates(String),
}

/// Everything a node's scans share.
pub struct Node {
    pub name: String,
    pub settings: Arc<Settings>,
    pub keys: Keys,
    /// Short commands and event writes.
    pub redis: Client,
    /// One engine, so every scan of the node shares its connection pool.
    pub engine: Engine,
    pub templates: Vec<Arc<CompiledTemplate>>,
    pub running: Arc<Running>,
}

impl Node {
    /// Connects to Redis and loads the templates (the built-in pack, or
    /// `SCANFLEET_SCANNER__TEMPLATES_DIR`).
    pub async fn build(settings: Settings) -> Result<Node, NodeError> {
        let redis =
            Builder::from_config(RedisConfig::from_url(settings.redis_url.expose())?).build()?;
        redis.init().await?;
        let scanner = &settings.scanner;
        let client = ClientConfig::from_settings(&settings.scanner)
            .map_err(|e| NodeError::Settings(e.to_string()))?;
        let engine = Engine::new(EngineConfig {
            client,
            ..EngineConfig::default()
        })
        .map_err(|e| NodeError::Settings(e.to_string()))?;
        let paths: Vec<std::path::PathBuf> = scanner.templates_dir.iter().map(Into::into).collect();
        let templates =
            tokio::task::spawn_blocking(move || crate::engine::cli::load_templates(&paths))
                .await
                .map_err(|e| NodeError::Templates(e.to_string()))?
                .map_err(NodeError::Templates)?;
        if templates.is_empty() {
            return Err(NodeError::Templates("no runnable templates".into()));
        }
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "node".into());
        Ok(Node {
            name: format!("scanner-{host}-{}", uuid::Uuid::new_v4().simple()),
            keys: Keys::new(settings.redis_prefix.clone()),
            settings: Arc::new(settings),
            redis,
            engine,
            templates,
            running: Arc::new(Running::default()),
        })
    }

    /// Takes and runs jobs until `shutdown` fires, then waits up to `grace`
    /// for running scans. Scans still running after that are left to the
    /// other nodes (their jobs are re-enqueued once this node is silent).
    pub async fn run(self, shutdown: CancellationToken, grace: Duration) -> Result<(), NodeError> {
        let node = Arc::new(self);
        let stops = tokio::spawn({
            let url = node.settings.redis_url.expose().to_string();
            let keys = node.keys.clone();
            let running = node.running.clone();
            let shutdown = shutdown.clone();
            async move {
                loop {
                    match control::listen_for_stops(
                        &url,
                        keys.clone(),
                        running.clone(),
                        shutdown.clone(),
                    )
                    .await
                    {
                        Ok(()) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "stop listener lost Redis; reconnecting");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        });
        if let Some(addr) = node.settings.scanner.metrics_bind {
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .with_http_listener(addr)
                .install()
                .map_err(|e| {
                    NodeError::Settings(format!("SCANFLEET_SCANNER__METRICS_BIND {addr}: {e}"))
                })?;
            tracing::info!(%addr, "serving Prometheus metrics");
        }
        let client = apalis_redis::Client::open(node.settings.redis_url.expose())?;
        let conn = client.get_connection_manager().await?;
        let poll = Duration::from_millis(node.settings.scanner.poll_interval_ms);
        tracing::info!(
            node = %node.name,
            concurrency = node.settings.scanner.concurrency,
            templates = node.templates.len(),
            "scanner node taking jobs"
        );
        loop {
            let storage = queue::storage(conn.clone(), &node.keys, &node.settings.scanner);
            let worker = WorkerBuilder::new(node.name.as_str())
                .backend(queue::Nudged::new(storage, poll))
                .data(node.clone())
                .concurrency(node.settings.scanner.concurrency)
                .build(handle_job);
            let stop = shutdown.clone();
            let run = worker.run_until(async move {
                stop.cancelled().await;
                Ok::<(), std::io::Error>(())
            });
            // A stopping worker waits for every running scan; past the grace
            // period the node leaves them to the other nodes instead.
            let overdue = async {
                shutdown.cancelled().await;
                tokio::time::sleep(grace).await;
            };
            let result = tokio::select! {
                r = run => r,
                _ = overdue => {
                    tracing::warn!(
                        running = node.running.count(),
                        "leaving unfinished scans to the other nodes"
                    );
                    break;
                }
            };
            if shutdown.is_cancelled() {
                break;
            }
            if let Err(e) = result {
                tracing::warn!(error = %e, "the queue worker stopped; starting it again");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        stops.abort();
        Ok(())
    }
}

/// The apalis handler: always `Ok`, since the outcome of a scan is reported
/// as its events, and an error would only make apalis keep the job.
async fn handle_job(
    job: ScanJob,
    node: Data<Arc<Node>>,
) -> Result<(), apalis::prelude::BoxDynError> {
    let node: Arc<Node> = (*node).clone();
    let scan_id = job.scan_id;
    // The scan runs on a task of its own, so a worker restart does not
    // cancel it half-way.
    let task = tokio::spawn(async move {
        if let Err(e) = run_job(&node, job).await {
            tracing::error!(%scan_id, error = %e, "scan could not report its outcome");
        }
    });
    let _ = task.await;
    Ok(())
}

#[tracing::instrument(skip_all, fields(scan_id = %job.scan_id, engine = job.engine.as_str()))]
async fn run_job(node: &Node, job: ScanJob) -> Result<(), NodeError> {
    let keys = &node.keys;
    let closed = keys.scan_closed(job.scan_id);
    if node.redis.exists::<bool, _>(&closed).await? {
        tracing::info!("job dropped: the scan is over");
        return Ok(());
    }
    let attempts_key = keys.scan_attempts(job.scan_id);
    let attempt: i64 = node.redis.incr(&attempts_key).await?;
    let _: () = node
        .redis
        .expire(&attempts_key, MARKER_TTL_SECS, None)
        .await?;
    let floor = sink::progress_floor(&node.redis, keys, job.scan_id).await?;
    let sink = EventSink::new(node.redis.clone(), keys, job.scan_id, floor);
    if attempt > MAX_ATTEMPTS {
        tracing::warn!(
            attempt,
            "scan failed: its nodes stopped {MAX_ATTEMPTS} times"
        );
        let error = format!(
            "the scan was interrupted {MAX_ATTEMPTS} times (its scanner node stopped) and was given up"
        );
        sink.status(ScanStatus::Failed, Some(error)).await?;
        return close(node, &closed).await;
    }
    tracing::info!(attempt, "scan taken");
    let spec = EngineSpec::of(job.engine);
    let control = node.running.start(job.scan_id);
    metrics::gauge!("scanfleet_scanner_scans_running").increment(1.0);
    let watch_done = CancellationToken::new();
    let watchdog = tokio::spawn(control::watchdog(
        node.redis.clone(),
        keys.clone(),
        job.scan_id,
        node.name.clone(),
        control.clone(),
        spec.deadline(&node.settings.scanner),
        watch_done.clone(),
    ));
    let result = async {
        sink.status(ScanStatus::Pending, None).await?;
        sink.status(ScanStatus::Running, None).await?;
        pipeline::run(node, &job, spec, &sink, &control).await
    }
    .await;
    watch_done.cancel();
    let _ = watchdog.await;
    node.running.finish(job.scan_id);
    metrics::gauge!("scanfleet_scanner_scans_running").decrement(1.0);
    let outcome = result?;
    let (status, error) = match (outcome, control.reason()) {
        (Outcome::Failed(reason), _) => (ScanStatus::Failed, Some(reason)),
        (_, Some(EndReason::Deadline)) => (
            ScanStatus::Failed,
            Some(format!(
                "the scan did not finish within the {} engine's deadline of {} s",
                job.engine.as_str(),
                spec.deadline(&node.settings.scanner).as_secs()
            )),
        ),
        (_, Some(EndReason::Closed)) => (ScanStatus::Stopped, None),
        (Outcome::Completed, None) => (ScanStatus::Completed, None),
        (Outcome::Cancelled, None) => (ScanStatus::Stopped, None),
    };
    tracing::info!(
        status = status.as_str(),
        error = error.as_deref().unwrap_or(""),
        "scan finished"
    );
    metrics::counter!("scanfleet_scanner_scans_finished_total", "status" => status.as_str())
        .increment(1);
    sink.status(status, error).await?;
    close(node, &closed).await
}

/// Marks the scan over, so a late duplicate of its job is dropped.
async fn close(node: &Node, closed: &str) -> Result<(), NodeError> {
    let _: () = node
        .redis
        .set(
            closed,
            "1",
            Some(Expiration::EX(MARKER_TTL_SECS)),
            None,
            false,
        )
        .await?;
    Ok(())
}
