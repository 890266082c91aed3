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

    /// Name of the apalis queue that carries `ScanJob`s to scanner nodes.
    pub fn scan_queue(&self) -> String {
        format!("{}:queue:scans", self.prefix)
    }

    /// Stream of one scan's events (status, stage, progress, findings).
    pub fn scan_events_stream(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:events", self.prefix)
    }

    /// Stream that announces which scan streams have new events, read by the
    /// ingester's consumer group ([`INGEST_GROUP`]).
    pub fn scan_events_index(&self) -> String {
        format!("{}:scan-events", self.prefix)
    }

    /// How many times a node took up the scan's job (our own attempt count:
    /// apalis re-enqueues a crashed node's job without counting it).
    pub fn scan_attempts(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:attempts", self.prefix)
    }

    /// Set, with a short expiry, by the node running the scan, renewed while
    /// it runs: the reaper treats a scan without it as silent.
    pub fn scan_heartbeat(&self, scan_id: Uuid) -> String {
        format!("{}:scan:{scan_id}:heartbeat", self.prefix)
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
            k.scan_queue(),
            k.scan_events_stream(id),
            k.scan_events_index(),
            k.scan_stop_channel(),
            k.scan_closed(id),
            k.scan_attempts(id),
            k.scan_heartbeat(id),
            k.rate_window("user:1", 7),
        ] {
            assert!(key.starts_with("t1:"), "{key}");
        }
    }
}
