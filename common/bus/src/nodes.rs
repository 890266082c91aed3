//! The fleet's registry: each scanner node announces itself every
//! heartbeat in one Redis hash, `{prefix}:nodes` (node id -> a JSON
//! [`NodeRecord`]), and takes its entry away when it leaves in good order.
//! A node that died stops announcing: readers call it lost once its last
//! heartbeat is older than its lease (when the other nodes take its jobs),
//! and forget it an hour after that ([`FORGET_AFTER_MS`]).
//!
//! Times are the node's clock, in milliseconds since the Unix epoch.
//!
//! # What an idle node costs
//! A heartbeat is one `HSET` ([`announce`]). An administrator's request to
//! drain ([`request_drain`]) is written to the hash `{prefix}:nodes:drain`
//! and published on `{prefix}:node-drain`, which the node follows on the
//! subscriber it has anyway; it reads the hash only when that subscriber
//! (re)connects ([`drain_requested`]). The lease-expiry sweep runs on one
//! node at a time: the holder of the sweep lock ([`take_sweep_lock`], `SET
//! NX PX`) sweeps and extends it at each of its heartbeats ([`sweep`]);
//! the others try to take it once per lease, so one takes over within a
//! lease or two when the sweeper dies. An idle node's wait for work is a
//! `BLPOP` with a long timeout (`queue::ScanQueue::wait_for_work`).

use std::sync::LazyLock;

use fred::clients::Client;
use fred::interfaces::HashesInterface;
use fred::types::scripts::Script;
use fred::types::Value;
use scanfleet_common::keys::Keys;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::queue::{ScanQueue, NOW, REQUEUE_BATCH, REQUEUE_EXPIRED_LUA, WAKE_LUA};
use crate::BusError;
use fred::interfaces::PubsubInterface;

/// A node silent this long is forgotten.
pub const FORGET_AFTER_MS: u64 = 3_600_000;

/// What a node says of itself at each heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The node's name, unique per process (`scanner-<host>-<uuid>`).
    pub id: String,
    pub host: String,
    pub version: String,
    /// Scans at once (`SCANFLEET_SCANNER__CONCURRENCY`).
    pub slots_total: u32,
    /// The scans it runs now.
    pub running: Vec<Uuid>,
    pub started_at_ms: u64,
    pub heartbeat_at_ms: u64,
    /// How long its jobs' leases last: silent longer, it is lost.
    pub lease_ms: u64,
    /// Shutting down or asked to drain: finishing its scans, taking no
    /// more. [`list`] also sets it for a node an administrator asked to
    /// drain that has not said so yet.
    pub draining: bool,
}

/// A node's state as a reader at `now_ms` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    Live,
    Draining,
    /// Silent past its lease.
    Lost,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Live => "live",
            NodeState::Draining => "draining",
            NodeState::Lost => "lost",
        }
    }
}

impl NodeRecord {
    pub fn state_at(&self, now_ms: u64) -> NodeState {
        if now_ms.saturating_sub(self.heartbeat_at_ms) > self.lease_ms {
            NodeState::Lost
        } else if self.draining {
            NodeState::Draining
        } else {
            NodeState::Live
        }
    }
}

/// Writes the node's record (its heartbeat): one `HSET`.
pub async fn announce(redis: &Client, keys: &Keys, record: &NodeRecord) -> Result<(), BusError> {
    let json = serde_json::to_string(record).map_err(BusError::Encode)?;
    let _: i64 = redis
        .hset(keys.nodes(), vec![(record.id.as_str(), json.as_str())])
        .await?;
    Ok(())
}

/// The sweeper's round: while the lock is still `ARGV[1]`'s, extends it and
/// puts back the jobs whose lease ran out. KEYS: sweep lock, then the
/// queue's leases, holders, jobs, waiting, wake. ARGV: node id, lock ms,
/// most jobs to put back. Returns the ids put back, or nil when the lock
/// is not this node's.
static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(format!(
        r#"{WAKE_LUA}
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
{NOW}{REQUEUE_EXPIRED_LUA}
return requeue_expired(KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], tonumber(ARGV[3]))
"#
    ))
});

/// Takes the sweep lock for `node` for `ttl` if no node holds it (one
/// `SET NX PX`); true when taken.
pub async fn take_sweep_lock(
    queue: &ScanQueue,
    keys: &Keys,
    node: &str,
    ttl: std::time::Duration,
) -> Result<bool, BusError> {
    use fred::interfaces::KeysInterface;
    use fred::types::{Expiration, SetOptions};
    let taken: Option<String> = queue
        .client()
        .set(
            keys.scan_queue_sweep_lock(),
            node,
            Some(Expiration::PX(ttl.as_millis().max(1) as i64)),
            Some(SetOptions::NX),
            false,
        )
        .await?;
    Ok(taken.is_some())
}

/// The sweep, by the node holding the lock: extends the lock by `ttl` and
/// puts back the jobs of silent nodes. The ids put back, or None when the
/// lock is no longer `node`'s (it lapsed and another node took it).
pub async fn sweep(
    queue: &ScanQueue,
    keys: &Keys,
    node: &str,
    ttl: std::time::Duration,
) -> Result<Option<Vec<Uuid>>, BusError> {
    let lock = keys.scan_queue_sweep_lock();
    let q = queue.all_keys();
    // leases, holders, jobs, waiting, wake
    let script_keys = vec![lock.as_str(), q[1], q[2], q[0], q[3], q[4]];
    let reply: Value = crate::queue::eval(
        &SWEEP,
        queue.client(),
        script_keys,
        vec![
            node.to_string(),
            ttl.as_millis().max(1).to_string(),
            REQUEUE_BATCH.to_string(),
        ],
    )
    .await?;
    Ok(match reply {
        Value::Array(ids) => Some(
            ids.iter()
                .filter_map(Value::as_string)
                .filter_map(|s| Uuid::parse_str(&s).ok())
                .collect(),
        ),
        _ => None,
    })
}

/// Whether an administrator asked node `id` to drain.
pub async fn drain_requested(redis: &Client, keys: &Keys, id: &str) -> Result<bool, BusError> {
    Ok(redis.hexists(keys.node_drains(), id).await?)
}

/// Asks node `id` to drain: it takes no more jobs, finishes its scans and
/// exits. The node's record, or None when no such node is registered.
pub async fn request_drain(
    redis: &Client,
    keys: &Keys,
    id: &str,
    now_ms: u64,
) -> Result<Option<NodeRecord>, BusError> {
    let json: Option<String> = redis.hget(keys.nodes(), id).await?;
    let Some(json) = json else {
        return Ok(None);
    };
    let mut record: NodeRecord = serde_json::from_str(&json).map_err(BusError::Encode)?;
    let _: i64 = redis
        .hset(keys.node_drains(), vec![(id, now_ms.to_string())])
        .await?;
    // The node follows this channel; the hash is what it reads after a
    // reconnect, when a message may have been missed.
    let _: i64 = redis.publish(keys.node_drain_channel(), id).await?;
    record.draining = true;
    Ok(Some(record))
}

/// Takes the node's record away (a shutdown in good order), and the
/// request to drain it if there was one.
pub async fn leave(redis: &Client, keys: &Keys, id: &str) -> Result<(), BusError> {
    let _: i64 = redis.hdel(keys.nodes(), id).await?;
    let _: i64 = redis.hdel(keys.node_drains(), id).await?;
    Ok(())
}

/// Every node's record, by id, `draining` also when an administrator
/// asked it to; records silent past [`FORGET_AFTER_MS`] at `now_ms` are
/// removed (with their drain requests), and unreadable ones skipped.
pub async fn list(redis: &Client, keys: &Keys, now_ms: u64) -> Result<Vec<NodeRecord>, BusError> {
    let all: std::collections::HashMap<String, String> = redis.hgetall(keys.nodes()).await?;
    let drains: std::collections::HashMap<String, String> =
        redis.hgetall(keys.node_drains()).await?;
    let mut nodes = Vec::new();
    let mut forgotten = Vec::new();
    for (id, json) in all {
        match serde_json::from_str::<NodeRecord>(&json) {
            Ok(n) if now_ms.saturating_sub(n.heartbeat_at_ms) > FORGET_AFTER_MS => {
                forgotten.push(id)
            }
            Ok(mut n) => {
                n.draining |= drains.contains_key(&n.id);
                nodes.push(n)
            }
            Err(e) => tracing::warn!(node = %id, error = %e, "unreadable node record"),
        }
    }
    // Requests for nodes no longer registered (gone, or forgotten now).
    let stale: Vec<&String> = drains
        .keys()
        .filter(|id| !nodes.iter().any(|n| &n.id == *id))
        .collect();
    if !stale.is_empty() {
        let _: i64 = redis.hdel(keys.node_drains(), stale).await?;
    }
    if !forgotten.is_empty() {
        let _: i64 = redis.hdel(keys.nodes(), forgotten).await?;
    }
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(heartbeat_at_ms: u64, draining: bool) -> NodeRecord {
        NodeRecord {
            id: "scanner-a".into(),
            host: "a".into(),
            version: "0.1.0".into(),
            slots_total: 2,
            running: vec![],
            started_at_ms: 0,
            heartbeat_at_ms,
            lease_ms: 10_000,
            draining,
        }
    }

    #[test]
    fn a_node_silent_past_its_lease_is_lost_and_a_draining_one_says_so() {
        assert_eq!(record(100_000, false).state_at(105_000), NodeState::Live);
        assert_eq!(record(100_000, true).state_at(105_000), NodeState::Draining);
        assert_eq!(record(100_000, false).state_at(110_001), NodeState::Lost);
        assert_eq!(record(100_000, true).state_at(110_001), NodeState::Lost);
    }
}
