//! Redis key names. Every key and queue lives under the deployment prefix
//! (`SCANFLEET_REDIS_PREFIX`) so several deployments, or parallel tests,
//! share one Redis without seeing each other.

use uuid::Uuid;

/// Consumer group of the ingesters on [`Keys::scan_events_index`].
pub const INGEST_GROUP: &str = "ingesters";

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

    /// Common start of the scan queue's keys: `{prefix}:queue:scans`. The
    /// queue itself (what each key holds) is `scanfleet-bus`'s `queue`.
    pub fn scan_queue(&self) -> String {
        format!("{}:queue:scans", self.prefix)
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
        format!("{}:epoch", self.prefix)
    }

    /// Stream of one scan's events (status, stage, progress, findings).
    pub fn scan_events_stream(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:events", self.prefix)
    }

    /// Stream of what the ingester recorded of one scan's findings (their
    /// identity on the target), written after each commit: WebSocket
    /// listeners read it through their process's hub instead of Postgres.
    pub fn scan_recorded_stream(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:recorded", self.prefix)
    }

    /// Stream that announces which scan streams have new events, read by the
    /// ingester's consumer group ([`INGEST_GROUP`]).
    pub fn scan_events_index(&self) -> String {
        format!("{}:scan-events", self.prefix)
    }

    /// How many times a node took up the scan's job (a job put back after
    /// its node went silent is taken up again, and counted again).
    pub fn scan_attempts(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:attempts", self.prefix)
    }

    /// Pub/sub channel on which scan stops are published to scanner nodes.
    pub fn scan_stop_channel(&self) -> String {
        format!("{}:scan-stop", self.prefix)
    }

    /// Marker set when a scan must not run any more (stopped by its owner, or
    /// failed by the reaper), checked by a node taking the job late and while
    /// it runs.
    pub fn scan_closed(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:stopped", self.prefix)
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
        ] {
            assert!(key.starts_with("t1:"), "{key}");
        }
    }
}
