//! The scanner node: takes [`ScanJob`]s from the Redis scan queue, runs
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
//! layout and why it was chosen are described in [`scanfleet_bus::events`].
//!
//! # Jobs
//! Scan jobs are apalis tasks: the node runs an apalis `Worker` over the
//! scan queue's backend ([`scanfleet_bus::tasks::ScanTasks`]), with a
//! concurrency limit of `SCANFLEET_SCANNER__CONCURRENCY`; the worker asks
//! for a job only while a slot is free. With nothing to
//! take it blocks on the queue's wake-up list (`BLPOP`, on a Redis
//! connection of its own) for up to `SCANFLEET_SCANNER__IDLE_WAIT_SECS`
//! (20 s): a push wakes one waiting node at once, and an idle node costs
//! Redis about one command per heartbeat and three per wait. Each job is
//! held under a lease of `SCANFLEET_SCANNER__ORPHAN_AFTER_SECS` (10 s),
//! renewed every `SCANFLEET_SCANNER__HEARTBEAT_SECS` (2 s): a node that
//! dies stops renewing, and the sweep puts its jobs back in the queue once
//! their lease ran out. The sweep runs at the heartbeat of the one node
//! holding its lock (`SET NX PX`, extended at each of its beats; the other
//! nodes try to take it once per lease). When no node is left, the scheduler's reaper fails the scan once
//! it has been silent for its limit.
//! - The node counts pick-ups per scan in Redis
//!   (`{prefix}:scan:{id}:attempts`) and fails the scan on the fourth, that
//!   is after three crashed attempts.
//! - The node enforces each engine's deadline itself
//!   (`SCANFLEET_SCANNER__DEADLINE_{FULL,QUICK,RECON}_SECS`) and fails the
//!   scan with a clear error.
//! - A job for a scan that is over (stopped, reaped, finished by an earlier
//!   attempt) finds the scan's closed marker and is dropped.
//! - Redis going away pauses the node: the clients reconnect by themselves,
//!   event writes wait and retry, and a renewal after Redis lost its data
//!   writes the job back and the scan's record again
//!   ([`sink::EventSink::replay`]). After a reconnect the node waits one
//!   lease before it puts anyone's jobs back, so the nodes running them can
//!   renew first.
//!
//! # The registry and draining
//! Every heartbeat the node writes its record to the fleet's registry
//! (`scanfleet_bus::nodes`: id, host, version, slots, running scans,
//! start, heartbeat, draining), which administrators read in the console
//! and through `GET /api/v1/admin/nodes`; it takes the record away when it
//! stops in good order.
//!
//! A node drains on SIGTERM (running scans get `SCANFLEET_SCANNER__DRAIN_SECS`,
//! then go back to the queue for the other nodes) or when an administrator
//! asks (`POST /api/v1/admin/nodes/{id}/drain`, a message on the drain
//! channel the node follows, and a marker it reads after reconnecting):
//! then it takes no more jobs, lets its running scans finish
//! however long they take (each has its engine's deadline), leaves the
//! registry and exits with status 0. A SIGTERM during that drain applies
//! the grace period as usual.
//!
//! # Layout
//! - [`engines`]: each engine as data (stages, templates, deadlines).
//! - [`sink`]: event writes.
//! - [`control`]: running scans, stops, heartbeats and deadlines.
//! - [`pipeline`]: the stages of one scan; [`discover`] and [`probe`].

pub mod control;
pub mod discover;
pub mod engines;
pub mod pipeline;
pub mod probe;
pub mod sink;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{Data, WorkerBuilder, WorkerBuilderExt, WorkerError};
use fred::clients::Client;
use metrics_exporter_prometheus::BuildError;
use scanfleet_bus::connect::until_redis_answers;
use scanfleet_bus::{markers, BusError, Link, RedisTarget, ScanQueue, ScanTasks, Taking};
use scanfleet_common::chain::Chain;
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::ScanJob;
use scanfleet_common::keys::Keys;
use scanfleet_common::NodeSettings;
use tokio_util::sync::CancellationToken;
use tokio_util::task::{AbortOnDropHandle, TaskTracker};

use control::{EndReason, Running};
use engines::EngineSpec;
use pipeline::Outcome;
use scanfleet_engine::engine::load::{load_templates_for, LoadFailed};
use scanfleet_engine::engine::{CompiledTemplate, Engine, EngineConfig, EngineError};
use scanfleet_engine::template::CheckOptions;
use scanfleet_http::{ClientConfig, HttpError};
use sink::EventSink;

/// A scan is failed when a node takes it up for the fourth time: three
/// attempts ended with their node gone.
pub const MAX_ATTEMPTS: i64 = 3;

/// What can stop a node or a scan's reporting.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("a Redis command failed")]
    Redis(#[from] fred::error::Error),
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error(transparent)]
    RedisUrl(#[from] scanfleet_bus::connect::BadRedisUrl),
    /// The `SCANFLEET_SCANNER__*` client settings do not make a client.
    #[error("scanner settings: no HTTP client can be built from them")]
    Client(#[source] HttpError),
    /// The engine could not be built from them.
    #[error("scanner settings: no engine can be built from them")]
    Engine(#[source] EngineError),
    /// `SCANFLEET_SCANNER__METRICS_BIND` could not be served.
    #[error("scanner settings: SCANFLEET_SCANNER__METRICS_BIND {addr} cannot be served")]
    Metrics {
        addr: SocketAddr,
        #[source]
        source: BuildError,
    },
    /// A named template file could not be loaded.
    #[error("templates: a named template could not be loaded")]
    Templates(#[from] LoadFailed),
    /// The loading task panicked or was cancelled.
    #[error("templates: the loading task ended abnormally")]
    LoadingTask(#[from] tokio::task::JoinError),
    /// None of the templates can run.
    #[error("templates: no runnable templates")]
    NoTemplates,
}

/// Everything a node's scans share.
pub struct Node {
    pub name: String,
    /// The machine it runs on (`HOSTNAME`), as the registry shows it.
    pub host: String,
    pub settings: Arc<NodeSettings>,
    pub keys: Keys,
    redis_target: RedisTarget,
    /// Short commands and event writes.
    pub redis: Client,
    /// The wait for work only (`BLPOP` holds its connection).
    wake: Client,
    /// The scan queue, on `redis`.
    pub queue: ScanQueue,
    /// One engine, so every scan of the node shares its connection pool.
    pub engine: Engine,
    pub templates: Vec<Arc<CompiledTemplate>>,
    /// The templates' technology map, built once at load (the `auto`
    /// engine's detection and per-host choice).
    pub techmap: Arc<crate::auto::techmap::TechMap>,
    /// Templates left out at load, by coverage reason (`needs_oob`, ...).
    pub left_out: std::collections::BTreeMap<String, u64>,
    pub running: Arc<Running>,
}

impl Node {
    /// Connects to Redis and loads the templates (the built-in pack, or
    /// `SCANFLEET_SCANNER__TEMPLATES_DIR`).
    pub async fn build(settings: NodeSettings) -> Result<Node, NodeError> {
        let redis_target = RedisTarget::from_settings(&settings.redis)?;
        let redis = scanfleet_bus::connect(&redis_target, "scanner").await?;
        let wake = scanfleet_bus::connect(&redis_target, "scanner-wake").await?;
        let scanner = &settings.scanner;
        let client = ClientConfig::from_settings(&settings.scanner).map_err(NodeError::Client)?;
        let engine = Engine::new(EngineConfig {
            client,
            ..EngineConfig::default()
        })
        .map_err(NodeError::Engine)?;
        let paths: Vec<std::path::PathBuf> = scanner.templates_dir.iter().map(Into::into).collect();
        // Parsing and compiling is CPU work for rayon, not for a tokio worker.
        // Out-of-band templates run when the node has an interactsh server.
        let options = CheckOptions {
            interactsh: scanner.interactsh_server.is_some(),
        };
        let loaded =
            tokio::task::spawn_blocking(move || load_templates_for(&paths, options)).await??;
        // A template that does not parse or compile is the operator's to
        // fix: each is a warning. One the engine cannot run (it needs a
        // wordlist, a protocol or a feature the engine lacks) is expected
        // of a public corpus: counted in the summary, each at debug.
        for left_out in &loaded.left_out {
            if crate::auto::plan::left_out_reason(left_out) == crate::auto::plan::UNREADABLE {
                tracing::warn!(reason = %Chain(left_out), "template left out");
            } else {
                tracing::debug!(reason = %Chain(left_out), "template left out");
            }
        }
        let left_out = crate::auto::plan::left_out_counts(&loaded.left_out);
        tracing::info!(
            found = loaded.found(),
            runnable = loaded.templates.len(),
            left_out = ?left_out,
            seconds = loaded.elapsed.as_secs_f64(),
            "templates loaded (RUST_LOG=scanfleet_scanner=debug names each left out)"
        );
        let templates = loaded.templates;
        if templates.is_empty() {
            return Err(NodeError::NoTemplates);
        }
        let techmap = {
            let templates = templates.clone();
            tokio::task::spawn_blocking(move || crate::auto::techmap::TechMap::build(&templates))
                .await?
        };
        tracing::info!(
            detectors = techmap.detect_stage().len(),
            baseline = techmap.baseline().len(),
            technologies = techmap.reportable().len(),
            "technology map built"
        );
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "node".into());
        let keys = Keys::new(settings.redis.prefix.clone());
        Ok(Node {
            name: format!("scanner-{host}-{}", uuid::Uuid::new_v4().simple()),
            host,
            queue: ScanQueue::new(redis.clone(), &keys),
            keys,
            redis_target,
            settings: Arc::new(settings),
            redis,
            wake,
            engine,
            templates,
            techmap: Arc::new(techmap),
            left_out,
            running: Arc::new(Running::default()),
        })
    }

    fn lease(&self) -> Duration {
        Duration::from_secs(self.settings.scanner.orphan_after_secs)
    }

    fn heartbeat(&self) -> Duration {
        Duration::from_secs(self.settings.scanner.heartbeat_secs)
    }

    /// Takes and runs jobs until `shutdown` fires, then waits up to `grace`
    /// for running scans. Scans still running after that are put back in
    /// the queue for the other nodes. Asked to drain, it takes no more jobs
    /// and returns once its running scans are over (or, should `shutdown`
    /// fire meanwhile, after the grace period as above).
    pub async fn run(self, shutdown: CancellationToken, grace: Duration) -> Result<(), NodeError> {
        let node = Arc::new(self);
        let subscriber = scanfleet_bus::subscriber(&node.redis_target, "scanner-stops").await?;
        // Cancelled by `shutdown`, or by the stop listener when an
        // administrator asks the node to drain; the job loop stops taking
        // jobs then.
        let taking = shutdown.child_token();
        let stops = tokio::spawn(control::listen_for_stops(
            subscriber,
            control::Listening {
                keys: node.keys.clone(),
                running: node.running.clone(),
                redis: node.redis.clone(),
                node_name: node.name.clone(),
                drain: taking.clone(),
            },
            shutdown.clone(),
        ));
        if let Some(addr) = node.settings.scanner.metrics_bind {
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .with_http_listener(addr)
                .install()
                .map_err(|source| NodeError::Metrics { addr, source })?;
            tracing::info!(%addr, "serving Prometheus metrics");
        }
        tracing::info!(
            node = %node.name,
            concurrency = node.settings.scanner.concurrency,
            templates = node.templates.len(),
            "scanner node taking jobs"
        );
        // Stopped once the node has finished: it then leaves the registry.
        let registered = CancellationToken::new();
        let heartbeat = tokio::spawn(announce(node.clone(), taking.clone(), registered.clone()));
        // Every scan runs on a task of its own, tracked so that the node
        // can wait for the ones it stopped before it hands their jobs back.
        let scans = TaskTracker::new();
        // Boxed: dropping it must drop the worker and its running tasks.
        let mut worker = Box::pin(work(node.clone(), taking.clone(), scans.clone()));
        let draining = async {
            taking.cancelled().await;
            if !shutdown.is_cancelled() {
                tracing::info!(
                    running = node.running.count(),
                    "draining as asked: no new jobs; waiting for running scans"
                );
            }
            std::future::pending::<()>().await
        };
        // Until the worker ends (asked to drain: no more jobs, and every
        // running scan over) or the shutdown comes.
        let ended = tokio::select! {
            ended = &mut worker => Some(ended),
            _ = draining => None,
            _ = shutdown.cancelled() => None,
        };
        // Running scans get the grace period; past it the node hands them
        // back to the queue for the other nodes and leaves.
        let ended = match ended {
            Some(ended) => Some(ended),
            None => tokio::time::timeout(grace, &mut worker).await.ok(),
        };
        match ended {
            Some(Ok(())) => {}
            Some(Err(e)) => tracing::error!(error = %Chain(&e), "the worker stopped on an error"),
            None => {
                let left = node.running.ids();
                tracing::warn!(
                    running = left.len(),
                    "leaving unfinished scans to the other nodes"
                );
                // Dropping the worker drops its running tasks, which abort
                // their scans; the tracker says when they are all gone.
                drop(worker);
                scans.close();
                scans.wait().await;
                for scan_id in left {
                    if let Err(e) = node.queue.release(scan_id, &node.name).await {
                        tracing::warn!(%scan_id, error = %Chain(&e), "could not hand the scan back");
                    }
                }
            }
        }
        stops.abort();
        registered.cancel();
        let _ = heartbeat.await;
        if let Err(e) = scanfleet_bus::nodes::leave(&node.redis, &node.keys, &node.name).await {
            tracing::warn!(error = %Chain(&e), "could not leave the fleet's registry");
        }
        Ok(())
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Announces the node in the fleet's registry every heartbeat until
/// `registered` is cancelled, and sweeps the queue's expired leases while
/// it holds the sweep lock. Once `taking` is cancelled (a shutdown or a
/// drain) it says it is draining.
async fn announce(node: Arc<Node>, taking: CancellationToken, registered: CancellationToken) {
    let scanner = &node.settings.scanner;
    let mut record = scanfleet_bus::nodes::NodeRecord {
        id: node.name.clone(),
        host: node.host.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        slots_total: scanner.concurrency as u32,
        running: Vec::new(),
        started_at_ms: now_ms(),
        heartbeat_at_ms: 0,
        lease_ms: scanner.orphan_after_secs * 1000,
        draining: false,
    };
    let link = Link::of(&node.redis);
    // The sweeper extends the lock at each beat; it lapses after three
    // missed ones, and the others try to take it once per lease.
    let sweep_lock = node.heartbeat() * 3;
    let mut sweeper = false;
    let mut next_try = tokio::time::Instant::now();
    let mut every = tokio::time::interval(node.heartbeat());
    loop {
        tokio::select! {
            _ = every.tick() => {}
            _ = registered.cancelled() => return,
        }
        record.running = node.running.ids();
        record.heartbeat_at_ms = now_ms();
        record.draining = taking.is_cancelled();
        if let Err(e) = scanfleet_bus::nodes::announce(&node.redis, &node.keys, &record).await {
            tracing::warn!(error = %Chain(&e), "could not announce the node");
        }
        // After a reconnect the node waits one lease before it puts anyone's
        // jobs back, so the nodes running them can renew first.
        if link.reconnected_within(node.lease()) {
            continue;
        }
        if !sweeper && tokio::time::Instant::now() >= next_try {
            next_try = tokio::time::Instant::now() + node.lease();
            sweeper = scanfleet_bus::nodes::take_sweep_lock(
                &node.queue,
                &node.keys,
                &node.name,
                sweep_lock,
            )
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %Chain(&e), "could not try the sweep lock");
                false
            });
        }
        if sweeper {
            match scanfleet_bus::nodes::sweep(&node.queue, &node.keys, &node.name, sweep_lock).await
            {
                Ok(Some(ids)) if !ids.is_empty() => {
                    tracing::warn!(scans = ?ids, "put back the jobs of a silent node")
                }
                Ok(Some(_)) => {}
                Ok(None) => sweeper = false,
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "could not look for silent nodes' jobs")
                }
            }
        }
    }
}

/// The node's apalis worker: scan jobs are apalis tasks from
/// [`ScanTasks`], run with as many at once as the node has slots. The
/// worker asks for a job only while a slot is free; with nothing to claim
/// the backend waits on the queue's wake-up list. It ends once `taking` is
/// cancelled and its running scans are over.
async fn work(
    node: Arc<Node>,
    taking: CancellationToken,
    scans: TaskTracker,
) -> Result<(), WorkerError> {
    let backend = ScanTasks::taking(
        node.queue.clone(),
        Taking {
            wake: node.wake.clone(),
            node: node.name.clone(),
            lease: node.lease(),
            idle_wait: Duration::from_secs(node.settings.scanner.idle_wait_secs),
            stop: taking,
        },
    );
    WorkerBuilder::new(node.name.clone())
        .backend(backend)
        .enable_tracing()
        .concurrency(node.settings.scanner.concurrency)
        .data(node.clone())
        .data(scans)
        .build(scan_task)
        .run()
        .await
}

/// One task: the scan runs on a task of its own (scans of a node run in
/// parallel, not interleaved on the worker's), aborted should the worker
/// drop it (the node leaving past its grace period). The outcome of a scan
/// is reported as its events, so an error here is only logged.
async fn scan_task(
    job: ScanJob,
    node: Data<Arc<Node>>,
    scans: Data<TaskTracker>,
) -> Result<(), tokio::task::JoinError> {
    let node = Arc::clone(&node);
    let scan = AbortOnDropHandle::new(scans.spawn(async move {
        let scan_id = job.scan_id;
        if let Err(e) = run_job(&node, job).await {
            tracing::error!(%scan_id, error = %Chain(&e), "scan could not report its outcome");
        }
    }));
    scan.await
}

#[tracing::instrument(skip_all, fields(scan_id = %job.scan_id, engine = job.engine.as_str()))]
async fn run_job(node: &Node, job: ScanJob) -> Result<(), NodeError> {
    let keys = &node.keys;
    let (attempt, floor) = take_up(node, keys, job.scan_id).await?;
    let Some(attempt) = attempt else {
        tracing::info!("job dropped: the scan is over");
        return finish(node, job.scan_id).await;
    };
    let sink = Arc::new(EventSink::new(node.redis.clone(), keys, job.scan_id, floor));
    if attempt > MAX_ATTEMPTS {
        tracing::warn!(
            attempt,
            "scan failed: its nodes stopped {MAX_ATTEMPTS} times"
        );
        let error = format!(
            "the scan was interrupted {MAX_ATTEMPTS} times (its scanner node stopped) and was given up"
        );
        sink.status(ScanStatus::Failed, Some(error)).await?;
        return finish(node, job.scan_id).await;
    }
    tracing::info!(attempt, "scan taken");
    let spec = EngineSpec::of(job.engine);
    let control = node.running.start(job.scan_id);
    metrics::gauge!("scanfleet_scanner_scans_running").increment(1.0);
    let watch_done = CancellationToken::new();
    let watchdog = tokio::spawn(control::watchdog(
        control::Watch {
            queue: node.queue.clone(),
            redis: node.redis.clone(),
            keys: keys.clone(),
            job: job.clone(),
            node_name: node.name.clone(),
            lease: node.lease(),
            renew_every: node.heartbeat(),
            deadline: spec.deadline(&node.settings.scanner),
        },
        sink.clone(),
        control.clone(),
        watch_done.clone(),
    ));
    let result = async {
        sink.started().await?;
        pipeline::run(node, &job, spec, &sink, &control).await
    }
    .await;
    watch_done.cancel();
    let _ = watchdog.await;
    node.running.finish(job.scan_id);
    metrics::gauge!("scanfleet_scanner_scans_running").decrement(1.0);
    let outcome = result?;
    let (status, error) = match (outcome, control.reason()) {
        (_, Some(EndReason::TakenOver)) => {
            tracing::info!("scan left to the node that took it over");
            return Ok(());
        }
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
    finish(node, job.scan_id).await
}

/// The scan taken up (`None`: it is over, and nothing was counted; else
/// its take-ups so far, this one counted) and the highest progress an
/// earlier take-up reported: independent, sent together, one round trip.
async fn take_up(
    node: &Node,
    keys: &scanfleet_common::keys::Keys,
    scan_id: uuid::Uuid,
) -> Result<(Option<i64>, u8), NodeError> {
    tokio::try_join!(
        async {
            markers::take_up(&node.redis, keys, scan_id)
                .await
                .map_err(NodeError::from)
        },
        sink::progress_floor(&node.redis, keys, scan_id),
    )
}

/// Marks the scan over, so a late duplicate of its job is dropped, and
/// removes its job from the queue: independent writes, sent together
/// (after the scan's last event, which the caller has written), and sent
/// again until Redis answers, for up to a lease (the job's lease is no
/// longer renewed: past it, another node may take the job, and drops it
/// once the marker is set). Both may be repeated: the marker is set again,
/// and the job is removed only while this node holds it.
async fn finish(node: &Node, scan_id: uuid::Uuid) -> Result<(), NodeError> {
    let within = Some(node.lease());
    until_redis_answers(scan_id, "finishing the scan's job", within, || async {
        tokio::try_join!(
            markers::close(&node.redis, &node.keys, scan_id),
            node.queue.finish(scan_id, &node.name),
        )
        .map(|_| ())
    })
    .await?;
    Ok(())
}
