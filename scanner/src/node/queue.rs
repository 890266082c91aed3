//! The node's side of the apalis Redis queue, and the two changes it needs.
//!
//! - **Fast pick-up.** An apalis-redis 1.0 worker whose fetch comes back
//!   empty parks until its next heartbeat, so an idle node would take a new
//!   job up to a heartbeat late. [`Nudged`] wraps the storage and wakes the
//!   worker every `poll_interval` while it waits, so it asks again (one
//!   small script call per interval per idle node).
//! - **One job at a time per free slot.** The storage fetches `batch_size`
//!   jobs at once and holds them even while the node is busy; with a batch
//!   of 1 a node only takes a job when it has room, so jobs spread over
//!   nodes instead of queueing behind one.
//!
//! The heartbeat interval and the number of missed heartbeats after which
//! another node re-enqueues a silent node's jobs come from the settings
//! (`SCANFLEET_SCANNER__HEARTBEAT_SECS`, `..._ORPHAN_AFTER_SECS`), bringing
//! dead-node recovery from apalis' 5 minutes down to seconds.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::{Backend, BackendConfig, WireFormatBackend};
use apalis_core::worker::context::WorkerContext;
use apalis_redis::{Config, ConnectionManager, RedisStorage};
use scanfleet_common::jobs::ScanJob;
use scanfleet_common::keys::Keys;
use scanfleet_common::settings::ScannerSettings;

/// The storage configured for scanner nodes.
pub fn storage(
    conn: ConnectionManager,
    keys: &Keys,
    settings: &ScannerSettings,
) -> RedisStorage<ScanJob> {
    let heartbeat = Duration::from_secs(settings.heartbeat_secs);
    let missed = (settings.orphan_after_secs / settings.heartbeat_secs).max(2) as usize;
    let config = Config::default()
        .queue(keys.scan_queue())
        .batch_size(1)
        .heartbeat_interval(heartbeat)
        .missed_heartbeats(missed);
    RedisStorage::new(conn).with_config(config)
}

/// A backend that re-polls its inner backend every `every` while it has
/// nothing to hand out.
pub struct Nudged<B> {
    inner: B,
    every: Duration,
    /// Armed while the inner backend is idle; firing wakes the worker.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> Nudged<B> {
    pub fn new(inner: B, every: Duration) -> Nudged<B> {
        Nudged {
            inner,
            every,
            timer: None,
        }
    }
}

impl<B: Backend> Backend for Nudged<B> {
    type Task = B::Task;
    type Error = B::Error;

    fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx, worker)
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        match self.inner.poll_next(cx, worker) {
            Poll::Pending => {
                let every = self.every;
                let timer = self
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
                if timer.as_mut().poll(cx).is_ready() {
                    self.timer = None;
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            }
            ready => {
                self.timer = None;
                ready
            }
        }
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_close(cx, worker)
    }
}

impl<B: BackendConfig> BackendConfig for Nudged<B> {
    type Args = B::Args;
    type Id = B::Id;
    type Kind = B::Kind;
    type Config = B::Config;
    type Layer = B::Layer;

    fn config(&self) -> &Self::Config {
        self.inner.config()
    }

    fn middleware(&mut self, worker: &mut WorkerContext) -> Self::Layer {
        self.inner.middleware(worker)
    }
}

impl<B: WireFormatBackend> WireFormatBackend for Nudged<B> {
    type Codec = B::Codec;
    type Compact = B::Compact;

    fn codec(&self) -> &Self::Codec {
        self.inner.codec()
    }
}
