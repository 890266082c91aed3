//! The fleet's registry: each scanner node announces itself every
//! heartbeat in one Redis hash, `{prefix}:nodes` (node id -> a JSON
//! [`NodeRecord`]), and takes its entry away when it leaves in good order.
//! A node that died stops announcing: readers call it lost once its last
//! heartbeat is older than its lease (when the other nodes take its jobs),
//! and forget it an hour after that ([`FORGET_AFTER_MS`]).
//!
//! Times are the node's clock, in milliseconds since the Unix epoch.

use fred::clients::Client;
use fred::interfaces::HashesInterface;
use scanfleet_common::keys::Keys;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::BusError;

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
    /// Shutting down: finishing its scans, taking no more.
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

/// Writes the node's record (its heartbeat).
pub async fn announce(redis: &Client, keys: &Keys, record: &NodeRecord) -> Result<(), BusError> {
    let json = serde_json::to_string(record).map_err(BusError::Encode)?;
    let _: i64 = redis
        .hset(keys.nodes(), vec![(record.id.as_str(), json.as_str())])
        .await?;
    Ok(())
}

/// Takes the node's record away (a shutdown in good order).
pub async fn leave(redis: &Client, keys: &Keys, id: &str) -> Result<(), BusError> {
    let _: i64 = redis.hdel(keys.nodes(), id).await?;
    Ok(())
}

/// Every node's record, by id; records silent past [`FORGET_AFTER_MS`] at
/// `now_ms` are removed, and unreadable ones skipped.
pub async fn list(redis: &Client, keys: &Keys, now_ms: u64) -> Result<Vec<NodeRecord>, BusError> {
    let all: std::collections::HashMap<String, String> = redis.hgetall(keys.nodes()).await?;
    let mut nodes = Vec::new();
    let mut forgotten = Vec::new();
    for (id, json) in all {
        match serde_json::from_str::<NodeRecord>(&json) {
            Ok(n) if now_ms.saturating_sub(n.heartbeat_at_ms) > FORGET_AFTER_MS => {
                forgotten.push(id)
            }
            Ok(n) => nodes.push(n),
            Err(e) => tracing::warn!(node = %id, error = %e, "unreadable node record"),
        }
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
