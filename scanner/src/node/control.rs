//! The scans a node is running, and the ways one ends early: its owner
//! stops it (a message on the stop channel, or the closed marker seen by
//! the watchdog), its deadline passes, or the node shuts down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{ClientLike, EventInterface, KeysInterface, PubsubInterface};
use fred::prelude::{Builder, Config, Expiration};
use scanfleet_common::keys::Keys;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Why a scan ended before its work was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// Its owner stopped it, or the reaper gave up on it.
    Closed,
    /// The engine's deadline passed.
    Deadline,
}

/// One running scan: cancelling `token` stops every stage at its next step.
pub struct ScanControl {
    /// Cancelled by the stop listener, the watchdog or the deadline; the
    /// pipeline checks it between steps and the engine at every request.
    pub token: CancellationToken,
    /// Set once, by whoever cancels first.
    reason: Mutex<Option<EndReason>>,
}

impl ScanControl {
    pub fn end(&self, reason: EndReason) {
        let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        r.get_or_insert(reason);
        self.token.cancel();
    }

    pub fn reason(&self) -> Option<EndReason> {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The scans running on this node, by id.
#[derive(Default)]
pub struct Running {
    scans: Mutex<HashMap<Uuid, Arc<ScanControl>>>,
}

impl Running {
    pub fn start(&self, scan_id: Uuid) -> Arc<ScanControl> {
        let control = Arc::new(ScanControl {
            token: CancellationToken::new(),
            reason: Mutex::new(None),
        });
        self.lock().insert(scan_id, control.clone());
        control
    }

    pub fn finish(&self, scan_id: Uuid) {
        self.lock().remove(&scan_id);
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    fn close(&self, scan_id: Uuid) {
        if let Some(c) = self.lock().get(&scan_id) {
            c.end(EndReason::Closed);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<ScanControl>>> {
        self.scans.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Follows the stop channel on a connection of its own and ends the named
/// scan when it runs here. Returns when `shutdown` fires.
pub async fn listen_for_stops(
    redis_url: &str,
    keys: Keys,
    running: Arc<Running>,
    shutdown: CancellationToken,
) -> Result<(), fred::error::Error> {
    let subscriber =
        Builder::from_config(Config::from_url(redis_url)?).build_subscriber_client()?;
    subscriber.init().await?;
    // Re-subscribes by itself after a reconnect.
    let _resubscribe = subscriber.manage_subscriptions();
    let mut messages = subscriber.message_rx();
    subscriber.subscribe(keys.scan_stop_channel()).await?;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            message = messages.recv() => match message {
                Ok(m) => {
                    if let Some(id) = m.value.as_str().and_then(|s| Uuid::parse_str(&s).ok()) {
                        running.close(id);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
        }
    }
    let _ = subscriber.quit().await;
    Ok(())
}

/// How long a scan's heartbeat key lives without renewal; the watchdog
/// renews it every [`WATCH_EVERY`].
pub const HEARTBEAT_TTL_SECS: i64 = 5;
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Keeps the scan's heartbeat key alive, ends the scan when its closed
/// marker appears (a stop whose message this node missed) and when its
/// deadline passes. Runs until the scan's token is cancelled or `done` is.
pub async fn watchdog(
    redis: Client,
    keys: Keys,
    scan_id: Uuid,
    node_name: String,
    control: Arc<ScanControl>,
    deadline: Duration,
    done: CancellationToken,
) {
    let heartbeat = keys.scan_heartbeat(scan_id);
    let closed = keys.scan_closed(scan_id);
    let expires = tokio::time::Instant::now() + deadline;
    loop {
        let beat: Result<(), _> = redis
            .set(
                &heartbeat,
                node_name.as_str(),
                Some(Expiration::EX(HEARTBEAT_TTL_SECS)),
                None,
                false,
            )
            .await;
        if let Err(e) = beat {
            tracing::warn!(%scan_id, error = %e, "could not renew the scan heartbeat");
        }
        if let Ok(true) = redis.exists::<bool, _>(&closed).await {
            control.end(EndReason::Closed);
        }
        tokio::select! {
            _ = done.cancelled() => break,
            _ = tokio::time::sleep_until(expires) => {
                control.end(EndReason::Deadline);
                break;
            }
            _ = tokio::time::sleep(WATCH_EVERY) => {}
        }
    }
    let _: Result<(), _> = redis.del(&heartbeat).await;
}
