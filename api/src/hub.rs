//! Every api process has one [`Hub`]: a single blocking `XREAD` over the
//! streams of all scans someone in this process is watching (on a Redis
//! Cluster, a pipeline of non-blocking reads, one per slot, every
//! [`CLUSTER_POLL`] while nothing comes), fanned out to the listeners
//! through a broadcast channel per scan. Many listeners of one
//! scan share one read; a listener that disconnects drops its receiver at
//! once, and the hub forgets a scan nobody watches on its next round. The
//! WebSocket handler (`ws`) subscribes through it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::{ClientLike, KeysInterface, StreamsInterface};
use scanfleet_bus::events::{self, Entry};
use scanfleet_common::events::{RecordedFinding, ScanEvent};
use scanfleet_common::keys::Keys;
use tokio::sync::{broadcast, Mutex};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::Error;

/// How long the hub's read blocks when nothing happens.
const BLOCK: Duration = Duration::from_millis(250);
/// On a cluster, the pause between two rounds of reads that found nothing.
const CLUSTER_POLL: Duration = Duration::from_millis(100);
/// Stream entries read per round.
const READ_COUNT: u64 = 1000;
/// Events buffered per scan for a slow listener before it lags.
const CHANNEL: usize = 1024;

/// One api process's shared reader of scan streams.
pub struct Hub {
    /// Blocking reads only: a connection of its own.
    reader: Client,
    /// Short commands (history reads, the wake-up entry).
    redis: Client,
    keys: Keys,
    /// A stream only this hub reads; an entry wakes its blocking read when
    /// a scan is added, so a new listener does not wait for the timeout.
    wake_key: String,
    /// Watched scans. The hub task and subscribers hold the lock only
    /// between Redis calls.
    watches: Mutex<HashMap<Uuid, Watch>>,
    /// On a cluster: notified by a subscriber that added a scan, so the
    /// hub's next round reads it at once instead of after its pause (what
    /// the wake stream does for a blocking read).
    added: tokio::sync::Notify,
}

struct Watch {
    stream: String,
    /// Last entry id sent to the channel.
    last_id: String,
    /// Sender kept by the hub; receivers by each listener.
    tx: broadcast::Sender<Arc<ScanEvent>>,
    /// The scan's recorded stream, and the last entry id read from it.
    recorded_stream: String,
    recorded_last_id: String,
    identities: Arc<Identities>,
}

/// What the ingester recorded of one scan's findings, by dedup key, as the
/// hub read it; shared by the scan's listeners in this process.
#[derive(Default)]
pub struct Identities {
    known: std::sync::Mutex<HashMap<String, RecordedFinding>>,
    /// Bumped by the hub after each addition; listeners waiting for a
    /// finding's identity watch it. Never closed while the hub holds it.
    added: tokio::sync::watch::Sender<u64>,
    /// Identities read from Postgres when the ingester's note did not come
    /// in time: one read per finding for the whole process (the first
    /// listener reads, the others wait for its answer).
    fallback: std::sync::Mutex<HashMap<String, Arc<tokio::sync::OnceCell<RecordedFinding>>>>,
}

impl Identities {
    fn add(&self, findings: Vec<RecordedFinding>) {
        if findings.is_empty() {
            return;
        }
        {
            let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
            for f in findings {
                known.insert(f.dedup_key.clone(), f);
            }
        }
        self.added.send_modify(|n| *n += 1);
    }

    fn get(&self, dedup_key: &str) -> Option<RecordedFinding> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.get(dedup_key).cloned()
    }

    /// The identity of the finding `dedup_key` once the ingester published
    /// it; None when it did not within `within`.
    pub async fn wait(&self, dedup_key: &str, within: Duration) -> Option<RecordedFinding> {
        let mut added = self.added.subscribe();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            added.borrow_and_update();
            if let Some(found) = self.get(dedup_key) {
                return Some(found);
            }
            match tokio::time::timeout_at(deadline, added.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return self.get(dedup_key),
            }
        }
    }

    /// The cell every listener of this process shares for a finding whose
    /// identity must be read from Postgres.
    pub fn fallback(&self, dedup_key: &str) -> Arc<tokio::sync::OnceCell<RecordedFinding>> {
        let mut cells = self.fallback.lock().unwrap_or_else(|p| p.into_inner());
        cells.entry(dedup_key.to_string()).or_default().clone()
    }
}

/// A listener's start: the scan's events so far, a receiver of the rest,
/// and the identities of its findings as the ingester recorded them.
pub struct Subscription {
    pub history: Vec<ScanEvent>,
    pub rx: broadcast::Receiver<Arc<ScanEvent>>,
    pub identities: Arc<Identities>,
}

impl Hub {
    pub fn new(reader: Client, redis: Client, keys: Keys) -> Hub {
        let wake_key = keys.hub_wake(Uuid::new_v4());
        Hub {
            reader,
            redis,
            keys,
            wake_key,
            watches: Mutex::new(HashMap::new()),
            added: tokio::sync::Notify::new(),
        }
    }

    /// Reads and fans out until `shutdown` fires.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        if self.reader.is_clustered() {
            self.run_on_cluster(shutdown).await;
        } else {
            self.run_blocking(shutdown).await;
        }
    }

    /// The watched streams and the ids to read them after, grouped by
    /// cluster slot (one group holding them all on a single server); scans
    /// nobody watches any more are forgotten first.
    async fn reads(&self, by_slot: bool) -> Vec<(Vec<String>, Vec<String>)> {
        let mut watches = self.watches.lock().await;
        watches.retain(|_, w| w.tx.receiver_count() > 0);
        let mut groups: HashMap<u16, (Vec<String>, Vec<String>)> = HashMap::new();
        for w in watches.values() {
            // A scan's two streams share its hash tag, hence its slot.
            let slot = if by_slot {
                fred::util::redis_keyslot(w.stream.as_bytes())
            } else {
                0
            };
            let (keys, ids) = groups.entry(slot).or_default();
            keys.extend([w.stream.clone(), w.recorded_stream.clone()]);
            ids.extend([w.last_id.clone(), w.recorded_last_id.clone()]);
        }
        groups.into_values().collect()
    }

    /// A single server (or Sentinel's master): one blocking `XREAD` over
    /// every watched stream and the hub's wake stream.
    async fn run_blocking(&self, shutdown: CancellationToken) {
        let mut wake_last = "$".to_string();
        // "$" only on the first read: later rounds continue from the last id.
        if let Ok(entries) = events::latest(&self.redis, &self.wake_key, 1).await {
            if let Some((id, _)) = entries.first() {
                wake_last = id.clone();
            }
        }
        while !shutdown.is_cancelled() {
            let (mut keys, mut ids) = self.reads(false).await.pop().unwrap_or_default();
            keys.push(self.wake_key.clone());
            ids.push(wake_last.clone());
            let read = events::read_streams(&self.reader, keys, ids, READ_COUNT, BLOCK);
            let mut reply: HashMap<String, Vec<Entry>> = tokio::select! {
                r = read => match r {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(error = %scanfleet_common::chain::Chain(&e), "websocket hub: read failed; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                },
                _ = shutdown.cancelled() => break,
            };
            if let Some((id, _)) = reply.remove(&self.wake_key).and_then(|e| e.last().cloned()) {
                wake_last = id;
            }
            self.deliver(reply).await;
        }
        let _: Result<i64, _> = self.redis.del(&self.wake_key).await;
    }

    /// A Redis Cluster refuses one read of streams in different slots
    /// (`CROSSSLOT`), and a blocking read per slot would hold a connection
    /// each. So each round reads every slot's streams without blocking,
    /// all in one pipeline (one round trip per cluster node), and when
    /// nothing came waits [`CLUSTER_POLL`] or until a scan is added.
    async fn run_on_cluster(&self, shutdown: CancellationToken) {
        while !shutdown.is_cancelled() {
            let groups = self.reads(true).await;
            let mut reply: HashMap<String, Vec<Entry>> = HashMap::new();
            if !groups.is_empty() {
                let pipeline = self.reader.pipeline();
                let mut queued = Ok(());
                for (keys, ids) in groups {
                    let r: Result<(), _> = pipeline.xread(Some(READ_COUNT), None, keys, ids).await;
                    queued = queued.and(r);
                }
                let answers: Vec<Result<fred::types::Value, fred::error::Error>> = match queued {
                    Ok(()) => pipeline.try_all().await,
                    Err(e) => vec![Err(e)],
                };
                for answer in answers {
                    match answer.and_then(|v| {
                        if v.is_null() {
                            Ok(HashMap::new())
                        } else {
                            v.into_xread_response::<String, String, String, String>()
                        }
                    }) {
                        Ok(streams) => reply.extend(streams),
                        Err(e) => {
                            tracing::warn!(error = %scanfleet_common::chain::Chain(&e), "websocket hub: read failed; retrying")
                        }
                    }
                }
            }
            let idle = reply.values().all(Vec::is_empty);
            self.deliver(reply).await;
            if idle {
                tokio::select! {
                    _ = tokio::time::sleep(CLUSTER_POLL) => {}
                    _ = self.added.notified() => {}
                    _ = shutdown.cancelled() => break,
                }
            }
        }
    }

    /// Sends what a read found to each watch's listeners.
    async fn deliver(&self, reply: HashMap<String, Vec<Entry>>) {
        let mut watches = self.watches.lock().await;
        for (stream, entries) in reply {
            if let Some(watch) = watches.values_mut().find(|w| w.recorded_stream == stream) {
                for (id, fields) in entries {
                    if events::id_after(&id, &watch.recorded_last_id) {
                        watch.identities.add(events::decode_recorded(&fields));
                        watch.recorded_last_id = id;
                    }
                }
                continue;
            }
            let Some(watch) = watches.values_mut().find(|w| w.stream == stream) else {
                continue;
            };
            for (id, fields) in entries {
                if !events::id_after(&id, &watch.last_id) {
                    continue;
                }
                if let Some(event) = events::decode(&fields) {
                    // No receiver left: the watch goes next round.
                    let _ = watch.tx.send(Arc::new(event));
                }
                watch.last_id = id;
            }
        }
    }

    /// Reads what the ingester recorded so far into `identities`; the last
    /// entry id ("0-0" for none), where the hub's read continues.
    async fn read_recorded(&self, stream: &str, identities: &Identities) -> Result<String, Error> {
        let mut last_id = "0-0".to_string();
        loop {
            let after = if last_id == "0-0" {
                "-"
            } else {
                last_id.as_str()
            };
            let page: Vec<Entry> =
                events::range(&self.redis, stream, after, "+", READ_COUNT).await?;
            let full = page.len() as u64 == READ_COUNT;
            for (id, fields) in page {
                identities.add(events::decode_recorded(&fields));
                last_id = id;
            }
            if !full {
                return Ok(last_id);
            }
        }
    }

    /// Starts following `scan_id`: the history up to where live events begin.
    pub async fn subscribe(&self, scan_id: Uuid) -> Result<Subscription, Error> {
        let stream = self.keys.scan_events_stream(scan_id);
        let (rx, upto, added, identities) = {
            let mut watches = self.watches.lock().await;
            match watches.get(&scan_id) {
                Some(w) => (
                    w.tx.subscribe(),
                    w.last_id.clone(),
                    false,
                    w.identities.clone(),
                ),
                None => {
                    let last: Vec<Entry> = events::latest(&self.redis, &stream, 1).await?;
                    let last_id = last
                        .first()
                        .map(|(id, _)| id.clone())
                        .unwrap_or_else(|| "0-0".to_string());
                    // What was recorded so far; the hub's read continues
                    // after it.
                    let recorded_stream = self.keys.scan_recorded_stream(scan_id);
                    let identities = Arc::new(Identities::default());
                    let recorded_last_id =
                        self.read_recorded(&recorded_stream, &identities).await?;
                    let (tx, rx) = broadcast::channel(CHANNEL);
                    watches.insert(
                        scan_id,
                        Watch {
                            stream: stream.clone(),
                            last_id: last_id.clone(),
                            tx,
                            recorded_stream,
                            recorded_last_id,
                            identities: identities.clone(),
                        },
                    );
                    (rx, last_id, true, identities)
                }
            }
        };
        if added && self.reader.is_clustered() {
            self.added.notify_one();
        } else if added {
            let _: String = self
                .redis
                .xadd(&self.wake_key, false, ("MAXLEN", "~", 100), "*", ("w", "1"))
                .await?;
            let _: bool = self.redis.expire(&self.wake_key, 86_400, None).await?;
        }
        let mut history = Vec::new();
        if upto != "0-0" {
            let mut from = "-".to_string();
            loop {
                let page: Vec<Entry> =
                    events::range(&self.redis, &stream, &from, &upto, READ_COUNT).await?;
                let Some((last, _)) = page.last() else { break };
                from = last.clone();
                let full = page.len() as u64 == READ_COUNT;
                history.extend(page.iter().filter_map(|(_, f)| events::decode(f)));
                if !full {
                    break;
                }
            }
        }
        Ok(Subscription {
            history,
            rx,
            identities,
        })
    }
}
