//! The scans a node is running, and the ways one ends early: its owner
//! stops it (a message on the stop channel, or the closed marker seen by
//! the watchdog), its deadline passes, another node took it over, or the
//! node shuts down. The watchdog also keeps the scan's lease on its job.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::clients::{Client, SubscriberClient};
use fred::interfaces::{ClientLike, EventInterface, PubsubInterface};
use scanfleet_bus::{markers, Renewal, ScanQueue};
use scanfleet_common::chain::Chain;
use scanfleet_common::jobs::ScanJob;
use scanfleet_common::keys::Keys;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::sink::EventSink;

/// Why a scan ended before its work was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// Its owner stopped it, or the reaper gave up on it.
    Closed,
    /// The engine's deadline passed.
    Deadline,
    /// Another node holds the scan's job now (this node's lease ran out
    /// while it was cut off): the scan ends here without a word, the other
    /// node reports it.
    TakenOver,
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

    /// The ids of the scans running now.
    pub fn ids(&self) -> Vec<Uuid> {
        self.lock().keys().copied().collect()
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

/// What the stop listener needs.
pub struct Listening {
    pub keys: Keys,
    pub running: Arc<Running>,
    /// Short commands: the drain marker's read.
    pub redis: Client,
    pub node_name: String,
    /// Cancelled here when an administrator asks this node to drain; the
    /// job loop then takes no more jobs.
    pub drain: CancellationToken,
}

/// Follows the stop channel and ends the named scan when it runs here, and
/// the drain channel for this node's name. The subscriber reconnects and
/// subscribes again by itself; a drain request published while it was
/// away is found in the drain marker, read after every (re)connect.
/// Returns when `shutdown` fires.
pub async fn listen_for_stops(
    subscriber: SubscriberClient,
    listening: Listening,
    shutdown: CancellationToken,
) -> Result<(), fred::error::Error> {
    let Listening {
        keys,
        running,
        redis,
        node_name,
        drain,
    } = listening;
    let mut messages = subscriber.message_rx();
    let mut reconnects = subscriber.reconnect_rx();
    let stop_channel = keys.scan_stop_channel();
    subscriber
        .subscribe(vec![stop_channel.clone(), keys.node_drain_channel()])
        .await?;
    let drain_asked = |why: &str| {
        if !drain.is_cancelled() {
            tracing::info!(source = why, "an administrator asked this node to drain");
            drain.cancel();
        }
    };
    let check_marker = || async {
        match scanfleet_bus::nodes::drain_requested(&redis, &keys, &node_name).await {
            Ok(asked) => asked,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the drain marker");
                false
            }
        }
    };
    if check_marker().await {
        drain_asked("marker");
    }
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            reconnected = reconnects.recv() => match reconnected {
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if check_marker().await {
                        drain_asked("marker");
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
            message = messages.recv() => match message {
                Ok(m) => {
                    let Some(text) = m.value.as_str() else { continue };
                    if *m.channel == *stop_channel {
                        if let Ok(id) = Uuid::parse_str(&text) {
                            running.close(id);
                        }
                    } else if *text == *node_name {
                        drain_asked("message");
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

/// How often the watchdog looks at the closed marker.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// What the watchdog of one scan needs.
pub struct Watch {
    pub queue: ScanQueue,
    pub redis: Client,
    pub keys: Keys,
    pub job: ScanJob,
    pub node_name: String,
    /// How long a lease lasts, and how often it is renewed.
    pub lease: Duration,
    pub renew_every: Duration,
    pub deadline: Duration,
}

/// Keeps the scan's lease, ends the scan when its closed marker appears (a
/// stop whose message this node missed), when its deadline passes or when
/// another node took its job over, and writes the scan's record again when
/// Redis lost it. Runs until the scan's token is cancelled or `done` is.
pub async fn watchdog(
    watch: Watch,
    sink: Arc<EventSink>,
    control: Arc<ScanControl>,
    done: CancellationToken,
) {
    let scan_id = watch.job.scan_id;
    let expires = tokio::time::Instant::now() + watch.deadline;
    let mut next_renewal = tokio::time::Instant::now();
    loop {
        if tokio::time::Instant::now() >= next_renewal {
            next_renewal = tokio::time::Instant::now() + watch.renew_every;
            match watch
                .queue
                .renew(&watch.job, &watch.node_name, watch.lease)
                .await
            {
                Ok(Renewal::Held) => {}
                Ok(Renewal::Retaken) => {
                    tracing::warn!(%scan_id, "the scan's lease had lapsed; taken again")
                }
                Ok(Renewal::Restored) => {
                    if let Err(e) = sink.replay().await {
                        tracing::warn!(%scan_id, error = %Chain(&e), "could not write the scan's events again");
                    }
                }
                Ok(Renewal::TakenOver) => {
                    tracing::warn!(%scan_id, "another node took the scan over; letting go");
                    control.end(EndReason::TakenOver);
                    break;
                }
                Err(e) => {
                    tracing::warn!(%scan_id, error = %Chain(&e), "could not renew the scan's lease")
                }
            }
        }
        if let Ok(true) = markers::is_closed(&watch.redis, &watch.keys, scan_id).await {
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
}
