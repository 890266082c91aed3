//! Redis key names. Every key and queue lives under the deployment prefix
//! (`SCANFLEET_REDIS_PREFIX`) so several deployments, or parallel tests,
//! share one Redis without seeing each other.
//!
//! # Hash tags (Redis Cluster)
//! A cluster puts each key in one of 16,384 slots by the hash of its first
//! `{...}` (its hash tag) and refuses a script, transaction or multi-key
//! command whose keys are in different slots (`CROSSSLOT`). So:
//! - **the queue's keys share one tag**, `{<prefix>:queue:scans}`
//!   (`<prefix>:{<prefix>:queue:scans}:jobs`, `...:waiting`, ...): every
//!   queue script, the sweep's included, touches several of them. The
//!   prefix is inside the tag so that deployments sharing one cluster
//!   (staging and production, the test suite's parallel prefixes) put
//!   their queues on different slots, hence masters, instead of all on
//!   the slot of `{queue:scans}`;
//! - **a scan's keys are tagged by the scan id** (`<prefix>:scan:{<id>}:events`,
//!   `:recorded`, `:attempts`, `:stopped`), so one scan's keys share a slot
//!   and scans spread over all of them;
//! - **an interaction server's keys are tagged by correlation id**
//!   (`<prefix>:oob:{<id>}:reg`, `:int`), as its scripts touch both;
//! - every other key (the ingest index, the node registry, the epoch, rate
//!   windows) is used alone and carries no tag.
//!
//! The prefix itself may not hold a brace (`settings::redis_prefix`). The
//! epoch's name carries [`LAYOUT`]: a process of this layout started on
//! the data of the previous one finds no epoch, takes the data set for
//! lost and pushes the queued scans' jobs again from Postgres.

use uuid::Uuid;

/// Consumer group of the ingesters on [`Keys::scan_events_index`].
pub const INGEST_GROUP: &str = "ingesters";

/// The version of the key layout, in the epoch's name ([`Keys::bus_epoch`]).
/// 2: the hash-tagged layout of Redis Cluster.
pub const LAYOUT: u32 = 2;

#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: impl Into<String>) -> Self {
        Keys {
            prefix: prefix.into(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Common start of the scan queue's keys:
    /// `<prefix>:{<prefix>:queue:scans}`, one hash tag for all of them. The
    /// queue itself (what each key holds) is `scanfleet-bus`'s `queue`.
    pub fn scan_queue(&self) -> String {
        format!("{p}:{{{p}:queue:scans}}", p = self.prefix)
    }

    /// Hash of scan id -> `ScanJob` JSON: every job not yet finished, waiting
    /// or held by a node.
    pub fn scan_queue_jobs(&self) -> String {
        format!("{}:jobs", self.scan_queue())
    }

    /// List of the ids of jobs waiting for a node, oldest first.
    pub fn scan_queue_waiting(&self) -> String {
        format!("{}:waiting", self.scan_queue())
    }

    /// Sorted set of held jobs' ids, scored by when their lease ends
    /// (milliseconds of the Redis server's clock).
    pub fn scan_queue_leases(&self) -> String {
        format!("{}:leases", self.scan_queue())
    }

    /// Hash of held job id -> the node holding it.
    pub fn scan_queue_holders(&self) -> String {
        format!("{}:holders", self.scan_queue())
    }

    /// List of wake-up tokens: every push of a job adds one (while there
    /// are fewer tokens than waiting jobs), and an idle node blocks on it
    /// (`BLPOP`) instead of polling the queue.
    pub fn scan_queue_wake(&self) -> String {
        format!("{}:wake", self.scan_queue())
    }

    /// Lock (`SET NX PX`) of the lease-expiry sweep: the node whose
    /// heartbeat takes it puts back the jobs of silent nodes; the others
    /// do not look.
    pub fn scan_queue_sweep_lock(&self) -> String {
        format!("{}:sweep", self.scan_queue())
    }

    /// Hash of node id -> the node's heartbeat record (JSON): the fleet's
    /// registry (`scanfleet-bus`'s `nodes`).
    pub fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
    }

    /// Hash of node id -> when an administrator asked it to drain
    /// (milliseconds since the epoch); the node reads it at its heartbeat.
    pub fn node_drains(&self) -> String {
        format!("{}:nodes:drain", self.prefix)
    }

    /// Pub/sub channel on which drain requests (a node id) are published to
    /// scanner nodes.
    pub fn node_drain_channel(&self) -> String {
        format!("{}:node-drain", self.prefix)
    }

    /// A value written once per Redis data set: when it is missing, Redis
    /// lost its data (a restart without persistence) and the queue is
    /// rebuilt from Postgres.
    pub fn bus_epoch(&self) -> String {
        format!("{}:epoch:v{LAYOUT}", self.prefix)
    }

    /// Start of the keys of one scan, tagged by its id: `<prefix>:scan:{<id>}`.
    fn scan(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{{{scan_id}}}", self.prefix)
    }

    /// Stream of one scan's events (status, stage, progress, findings).
    pub fn scan_events_stream(&self, scan_id: Uuid) -> String {
        format!("{}:events", self.scan(scan_id))
    }

    /// Stream of what the ingester recorded of one scan's findings (their
    /// identity on the target), written after each commit: WebSocket
    /// listeners read it through their process's hub instead of Postgres.
    pub fn scan_recorded_stream(&self, scan_id: Uuid) -> String {
        format!("{}:recorded", self.scan(scan_id))
    }

    /// Stream that announces which scan streams have new events, read by the
    /// ingester's consumer group ([`INGEST_GROUP`]).
    pub fn scan_events_index(&self) -> String {
        format!("{}:scan-events", self.prefix)
    }

    /// How many times a node took up the scan's job (a job put back after
    /// its node went silent is taken up again, and counted again).
    pub fn scan_attempts(&self, scan_id: Uuid) -> String {
        format!("{}:attempts", self.scan(scan_id))
    }

    /// Pub/sub channel on which scan stops are published to scanner nodes.
    pub fn scan_stop_channel(&self) -> String {
        format!("{}:scan-stop", self.prefix)
    }

    /// Marker set when a scan must not run any more (stopped by its owner, or
    /// failed by the reaper), checked by a node taking the job late and while
    /// it runs.
    pub fn scan_closed(&self, scan_id: Uuid) -> String {
        format!("{}:stopped", self.scan(scan_id))
    }

    /// Failed logins or password changes of one account (`account` is a
    /// hash, never the email itself) within the throttle window.
    pub fn auth_failures(&self, account: &str) -> String {
        format!("{}:auth-failures:{account}", self.prefix)
    }

    /// Fixed-window request counter of one rate-limit subject.
    pub fn rate_window(&self, subject: &str, window: i64) -> String {
        format!("{}:rate:{subject}:{window}", self.prefix)
    }

    /// An out-of-band server's registration of `correlation_id` (hash of
    /// secret and keys), tagged by the id as its interactions are.
    pub fn oob_registration(&self, correlation_id: &str) -> String {
        format!("{}:oob:{{{correlation_id}}}:reg", self.prefix)
    }

    /// The interactions recorded for `correlation_id` and not polled yet.
    pub fn oob_interactions(&self, correlation_id: &str) -> String {
        format!("{}:oob:{{{correlation_id}}}:int", self.prefix)
    }

    /// A stream that only one WebSocket hub reads, to wake its blocking
    /// read when a scan is added.
    pub fn hub_wake(&self, hub: Uuid) -> String {
        format!("{}:ws-wake:{}", self.prefix, hub.simple())
    }
}

/// The hash tag of `key` as Redis Cluster reads it: what is between the
/// first `{` and the next `}`, when that is not empty; else the whole key.
pub fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(len) = key[open + 1..].find('}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_prefix() {
        let k = Keys::new("t1");
        let id = Uuid::nil();
        for key in [
            k.scan_queue_jobs(),
            k.scan_queue_waiting(),
            k.scan_queue_leases(),
            k.scan_queue_holders(),
            k.scan_queue_wake(),
            k.scan_queue_sweep_lock(),
            k.nodes(),
            k.node_drains(),
            k.node_drain_channel(),
            k.scan_recorded_stream(id),
            k.bus_epoch(),
            k.scan_events_stream(id),
            k.scan_events_index(),
            k.scan_stop_channel(),
            k.scan_closed(id),
            k.scan_attempts(id),
            k.rate_window("user:1", 7),
            k.oob_registration("c0ffee"),
            k.oob_interactions("c0ffee"),
            k.hub_wake(id),
        ] {
            assert!(key.starts_with("t1:"), "{key}");
        }
    }

    #[test]
    fn keys_used_together_share_a_hash_tag_and_scans_spread() {
        let k = Keys::new("t1");
        let queue = [
            k.scan_queue_jobs(),
            k.scan_queue_waiting(),
            k.scan_queue_leases(),
            k.scan_queue_holders(),
            k.scan_queue_wake(),
            k.scan_queue_sweep_lock(),
        ];
        assert_eq!(k.scan_queue_jobs(), "t1:{t1:queue:scans}:jobs");
        for key in &queue {
            assert_eq!(hash_tag(key), "t1:queue:scans", "{key}");
        }
        // Another deployment's queue has a tag of its own.
        assert_eq!(
            hash_tag(&Keys::new("t2").scan_queue_jobs()),
            "t2:queue:scans"
        );
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for id in [a, b] {
            for key in [
                k.scan_events_stream(id),
                k.scan_recorded_stream(id),
                k.scan_attempts(id),
                k.scan_closed(id),
            ] {
                assert_eq!(hash_tag(&key), id.to_string(), "{key}");
            }
        }
        assert_eq!(k.scan_events_stream(a), format!("t1:scan:{{{a}}}:events"));
        assert_eq!(hash_tag(&k.oob_registration("c0")), "c0");
        assert_eq!(hash_tag(&k.oob_interactions("c0")), "c0");
        assert_eq!(hash_tag("a:{}:b"), "a:{}:b");
        assert_eq!(hash_tag("plain"), "plain");
    }
}
