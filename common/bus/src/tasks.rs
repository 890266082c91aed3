//! Scan jobs as apalis tasks: [`ScanTasks`] is an apalis-core backend over
//! the leased queue of [`crate::queue`].
//!
//! The api and the scheduler submit a [`ScanJob`] through apalis'
//! `TaskSink` (`push`, `push_task`); a scanner node runs an apalis
//! `Worker` on [`ScanTasks::taking`], with the middleware it wants
//! (concurrency = the node's slots, tracing, panics caught). The task's id
//! is the scan id.
//!
//! Underneath, everything stays the leased queue: a push is
//! [`ScanQueue::push`] (once per scan), the worker's next task is
//! [`ScanQueue::claim_woken`], and with nothing to claim the backend blocks
//! on the queue's wake-up list ([`ScanQueue::wait_for_work`], `BLPOP` on a
//! connection of its own) rather than polling. The worker asks for a task
//! only when a slot is free, so a node never claims more than it can run.
//! Leases, renewals, the sweep, the attempt count and the hand-back on
//! leaving are the node's, as before: apalis' own retry would run a scan
//! twice, and its storage has no lease that outlives a Redis restart, which
//! is why the queue is ours and the worker is apalis'.
//!
//! # Stopping
//! When the `stop` token given to [`ScanTasks::taking`] fires (a SIGTERM, or
//! an administrator's drain), the backend stops its worker (apalis'
//! graceful shutdown: no more tasks asked for, the running ones finished)
//! and claims nothing more: a wait in progress is
//! unblocked at once (`CLIENT UNBLOCK`, so the server does not keep an
//! abandoned `BLPOP` that would take a wake-up meant for another node), the
//! worker stops asking for tasks and finishes the running ones. A job
//! claimed in the instant the token fired is handed back to the queue.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::finalize::Ephemeral;
use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::builder::TaskBuilder;
use apalis_core::task::task_id::TaskId;
use apalis_core::task::Task;
use apalis_core::worker::context::WorkerContext;
use fred::clients::Client;
use futures::Sink;
use scanfleet_common::chain::Chain;
use scanfleet_common::jobs::ScanJob;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{BusError, ScanQueue};

/// How long a node waits before it tries again after a Redis error.
const RETRY_AFTER: Duration = Duration::from_millis(500);

type Pushing = Pin<Box<dyn Future<Output = Result<(), BusError>> + Send>>;

/// The scan queue as an apalis backend. Cheap to clone for pushing; a
/// worker's backend ([`ScanTasks::taking`]) is one per worker.
pub struct ScanTasks {
    queue: ScanQueue,
    /// Jobs given to the sink and not yet written.
    buffered: Vec<ScanJob>,
    /// The write of the buffered jobs in progress.
    pushing: Option<Pushing>,
    /// What a worker's backend needs to take jobs; `None` on a backend
    /// that only submits.
    taker: Option<Taker>,
}

/// The taking side of a worker's backend.
struct Taker {
    claims: Claims,
    /// The claim in progress: claim, or wait and claim, until a job comes
    /// or the stop token fires. Its own task, so that the wait ends as soon
    /// as the token fires even when the worker is not polling.
    next: Option<JoinHandle<Option<ScanJob>>>,
}

/// How a worker claims.
#[derive(Clone)]
struct Claims {
    queue: ScanQueue,
    /// The client the wait blocks on (`BLPOP` holds its connection).
    wake: Client,
    node: String,
    lease: Duration,
    idle_wait: Duration,
    stop: CancellationToken,
}

/// How a worker's backend takes jobs.
pub struct Taking {
    /// A client of its own for the blocking wait.
    pub wake: Client,
    /// The node's name: the holder of the jobs it claims.
    pub node: String,
    /// The lease a claim takes.
    pub lease: Duration,
    /// The longest single wait for a wake-up before claiming anyway.
    pub idle_wait: Duration,
    /// Ends the backend: no job is claimed after it fires.
    pub stop: CancellationToken,
}

impl Clone for ScanTasks {
    /// A clone submits to the same queue; it does not take.
    fn clone(&self) -> Self {
        ScanTasks::new(self.queue.clone())
    }
}

impl ScanTasks {
    /// A backend that submits jobs to `queue`.
    pub fn new(queue: ScanQueue) -> ScanTasks {
        ScanTasks {
            queue,
            buffered: Vec::new(),
            pushing: None,
            taker: None,
        }
    }

    /// A worker's backend: it gives the worker the jobs it claims from
    /// `queue` until `taking.stop` fires.
    pub fn taking(queue: ScanQueue, taking: Taking) -> ScanTasks {
        let claims = Claims {
            queue: queue.clone(),
            wake: taking.wake,
            node: taking.node,
            lease: taking.lease,
            idle_wait: taking.idle_wait,
            stop: taking.stop,
        };
        ScanTasks {
            taker: Some(Taker { claims, next: None }),
            ..ScanTasks::new(queue)
        }
    }

    /// The queue underneath.
    pub fn queue(&self) -> &ScanQueue {
        &self.queue
    }

    /// The task of a job: its id is the scan's.
    pub fn task(job: ScanJob) -> Task<ScanJob> {
        let id = TaskId::from_uuid(job.scan_id);
        TaskBuilder::new(job).task_id(id).build()
    }
}

impl Claims {
    /// Claims a job, waiting on the wake-up list while there is none;
    /// `None` once `stop` fired.
    async fn next(self) -> Option<ScanJob> {
        // Whether the last wait ended with a wake-up token.
        let mut woken = false;
        loop {
            if self.stop.is_cancelled() {
                return None;
            }
            match self.queue.claim_woken(&self.node, self.lease, woken).await {
                Ok(Some(job)) if self.stop.is_cancelled() => {
                    self.hand_back(job.scan_id).await;
                    return None;
                }
                Ok(Some(job)) => return Some(job),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "could not take a job; retrying");
                    woken = false;
                    tokio::select! {
                        _ = tokio::time::sleep(RETRY_AFTER) => continue,
                        _ = self.stop.cancelled() => return None,
                    }
                }
            }
            tokio::select! {
                waited = self.queue.wait_for_work(&self.wake, self.idle_wait) => match waited {
                    Ok(token) => woken = token,
                    Err(e) => {
                        // Redis away: the client reconnects by itself.
                        tracing::warn!(error = %Chain(&e), "could not wait for work; retrying");
                        woken = false;
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                },
                _ = self.stop.cancelled() => {
                    // The server still holds the abandoned `BLPOP`, which
                    // would take a wake-up meant for another node: end it.
                    use fred::interfaces::ClientInterface;
                    let _ = self.wake.unblock_self(None).await;
                    return None;
                }
            }
        }
    }

    async fn hand_back(&self, scan_id: uuid::Uuid) {
        if let Err(e) = self.queue.release(scan_id, &self.node).await {
            tracing::warn!(%scan_id, error = %Chain(&e), "could not hand the job back");
        }
    }
}

impl Backend for ScanTasks {
    type Task = Task<ScanJob>;
    type Error = BusError;

    fn poll_ready(&mut self, _: &mut Context<'_>, _: &WorkerContext) -> Poll<Result<(), BusError>> {
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Task<ScanJob>, BusError>>> {
        // A submitting backend has nothing to give.
        let Some(taker) = self.taker.as_mut() else {
            return Poll::Ready(None);
        };
        let next = taker
            .next
            .get_or_insert_with(|| tokio::spawn(taker.claims.clone().next()));
        let claimed = std::task::ready!(Pin::new(next).poll(cx));
        taker.next = None;
        match claimed {
            Ok(Some(job)) => Poll::Ready(Some(Ok(ScanTasks::task(job)))),
            Ok(None) => {
                // Stopped before the worker had started, so the watch of
                // `middleware` could not stop it then.
                let _ = worker.stop();
                Poll::Ready(None)
            }
            Err(e) => Poll::Ready(Some(Err(BusError::Claiming {
                panicked: e.is_panic(),
            }))),
        }
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        _: &WorkerContext,
    ) -> Poll<Result<(), BusError>> {
        // A claim still running when the worker closes ends with the stop
        // token; a job it got after all goes back.
        let Some(taker) = self.taker.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        if let Some(next) = taker.next.as_mut() {
            let claimed = std::task::ready!(Pin::new(next).poll(cx));
            taker.next = None;
            if let Ok(Some(job)) = claimed {
                let claims = taker.claims.clone();
                tokio::spawn(async move { claims.hand_back(job.scan_id).await });
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl BackendConfig for ScanTasks {
    type Args = ScanJob;
    type Id = uuid::Uuid;
    type Kind = Ephemeral;
    type Config = ();
    type Layer = apalis_core::layers::Identity;

    fn config(&self) -> &() {
        &()
    }

    /// Ties the worker's life to the stop token: once it fires, the
    /// worker stops asking for jobs and ends when its running tasks are
    /// over (apalis' graceful shutdown), even while every slot is busy and
    /// the backend is not being asked.
    fn middleware(&mut self, worker: &mut WorkerContext) -> Self::Layer {
        if let Some(taker) = &self.taker {
            let stop = taker.claims.stop.clone();
            let worker = worker.clone();
            tokio::spawn(async move {
                stop.cancelled().await;
                let _ = worker.stop();
            });
        }
        apalis_core::layers::Identity::new()
    }
}

/// Submitting: `TaskSink::push` and the other apalis ways of sending come
/// through here. A job is written once per scan: a second push of the same
/// scan adds nothing.
impl Sink<Task<ScanJob>> for ScanTasks {
    type Error = BusError;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), BusError>> {
        // One write at a time: the next job waits for the last to land.
        Sink::poll_flush(self, cx)
    }

    fn start_send(self: Pin<&mut Self>, task: Task<ScanJob>) -> Result<(), BusError> {
        self.get_mut().buffered.push(task.args);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), BusError>> {
        let this = self.get_mut();
        loop {
            if let Some(pushing) = this.pushing.as_mut() {
                let pushed = std::task::ready!(pushing.as_mut().poll(cx));
                this.pushing = None;
                pushed?;
            }
            if this.buffered.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let jobs = std::mem::take(&mut this.buffered);
            let queue = this.queue.clone();
            this.pushing = Some(Box::pin(async move {
                for job in &jobs {
                    queue.push(job).await?;
                }
                Ok(())
            }));
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), BusError>> {
        Sink::poll_flush(self, cx)
    }
}
