//! Events a scanner node appends to a scan's Redis stream. The ingester writes
//! them to Postgres idempotently; the WebSocket forwards them.
//!
//! On the wire each stream entry has one field, [`EVENT_FIELD`], holding the
//! JSON of a [`ScanEvent`]. The layout of the streams themselves (one stream
//! per scan plus an ingest index) is described in the api's `ingest` module.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Severity;

/// Scan statuses. They only move forward: see [`ScanStatus::can_move_to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScanStatus {
    Queued,
    Pending,
    Running,
    Completed,
    Failed,
    Stopped,
}

impl ScanStatus {
    pub const ALL: [ScanStatus; 6] = [
        ScanStatus::Queued,
        ScanStatus::Pending,
        ScanStatus::Running,
        ScanStatus::Completed,
        ScanStatus::Failed,
        ScanStatus::Stopped,
    ];

    pub fn parse(value: &str) -> Option<ScanStatus> {
        ScanStatus::ALL.into_iter().find(|s| s.as_str() == value)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ScanStatus::Queued => "queued",
            ScanStatus::Pending => "pending",
            ScanStatus::Running => "running",
            ScanStatus::Completed => "completed",
            ScanStatus::Failed => "failed",
            ScanStatus::Stopped => "stopped",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ScanStatus::Completed | ScanStatus::Failed | ScanStatus::Stopped
        )
    }

    fn order(self) -> u8 {
        match self {
            ScanStatus::Queued => 0,
            ScanStatus::Pending => 1,
            ScanStatus::Running => 2,
            ScanStatus::Completed | ScanStatus::Failed | ScanStatus::Stopped => 3,
        }
    }

    /// Statuses only move forward, and a terminal status never changes, so
    /// replayed or reordered events cannot undo progress.
    pub fn can_move_to(self, next: ScanStatus) -> bool {
        !self.is_terminal() && next.order() > self.order()
    }
}

/// Scan stages, in order. `DETECT` (technology detection) runs in the
/// `auto` engine only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Stage {
    Resolve,
    Discover,
    Probe,
    Detect,
    Validate,
    Report,
}

impl Stage {
    pub const ALL: [Stage; 6] = [
        Stage::Resolve,
        Stage::Discover,
        Stage::Probe,
        Stage::Detect,
        Stage::Validate,
        Stage::Report,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Resolve => "RESOLVE",
            Stage::Discover => "DISCOVER",
            Stage::Probe => "PROBE",
            Stage::Detect => "DETECT",
            Stage::Validate => "VALIDATE",
            Stage::Report => "REPORT",
        }
    }

    pub fn parse(value: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// Name of the one field of a stream entry; its value is a [`ScanEvent`] as JSON.
pub const EVENT_FIELD: &str = "event";

/// One finding as a scanner node reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingEvent {
    pub template_id: String,
    pub name: String,
    pub severity: Severity,
    pub host: String,
    pub matched_at: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub remediation: String,
    #[serde(default)]
    pub extracted_results: Vec<String>,
    #[serde(default)]
    pub matcher_name: Option<String>,
}

impl FindingEvent {
    /// The dedup rule of the contract: `template_id:matched_at`.
    pub fn dedup_key(&self) -> String {
        format!("{}:{}", self.template_id, self.matched_at)
    }
}

/// One technology found on a host, and what named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TechnologyEvent {
    /// Canonical name, lower-case (`wordpress`, `nginx`, `apache-tomcat`).
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    /// What named it: `template:<id>` (with `:<matcher>` when a matcher
    /// of a multi-technology template), or `header:<name>: <value>`,
    /// `cookie:<name>`, `title:<text>`.
    pub evidence: Vec<String>,
}

/// What a scan did on one host: the technologies found, the templates the
/// engine had for it, how many ran and why the others did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageEvent {
    pub host: String,
    #[serde(default)]
    pub technologies: Vec<TechnologyEvent>,
    /// Templates the node holds, runnable or not (`run` plus every skip).
    pub total: u64,
    pub run: u64,
    /// Templates not run, by reason (`technology_absent`, `needs_oob`,
    /// `needs_wordlist`, `unsupported_protocol`, `unsupported_feature`,
    /// `not_selected`).
    #[serde(default)]
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// Requests the node sent to the host during the scan (probe,
    /// detection and templates; retries and redirect hops count).
    pub requests: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScanEventKind {
    Status {
        status: ScanStatus,
        #[serde(default)]
        error: Option<String>,
    },
    Progress {
        stage: Stage,
        progress: u8,
        #[serde(default)]
        current_tool: Option<String>,
    },
    Finding(FindingEvent),
    /// Something went wrong without ending the scan (a host that did not
    /// answer, a stage that ran out of time). Kept in the stream for the
    /// record; the terminal status carries the reason when a scan fails.
    Error {
        #[serde(default)]
        stage: Option<Stage>,
        message: String,
    },
    /// One host's coverage, sent once per host when its templates finished.
    Coverage(CoverageEvent),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanEvent {
    pub scan_id: Uuid,
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub kind: ScanEventKind,
}

impl ScanEvent {
    pub fn new(scan_id: Uuid, kind: ScanEventKind) -> ScanEvent {
        ScanEvent {
            scan_id,
            at: Utc::now(),
            kind,
        }
    }

    pub fn status(scan_id: Uuid, status: ScanStatus, error: Option<String>) -> ScanEvent {
        ScanEvent::new(scan_id, ScanEventKind::Status { status, error })
    }

    /// The terminal status this event announces, if any.
    pub fn terminal_status(&self) -> Option<ScanStatus> {
        match &self.kind {
            ScanEventKind::Status { status, .. } if status.is_terminal() => Some(*status),
            _ => None,
        }
    }

    pub fn to_json(&self) -> String {
        // A ScanEvent has only string keys and plain values: it always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_only_move_forward() {
        use ScanStatus::*;
        assert!(Queued.can_move_to(Pending));
        assert!(Queued.can_move_to(Stopped));
        assert!(Running.can_move_to(Completed));
        assert!(!Running.can_move_to(Pending));
        assert!(!Completed.can_move_to(Failed));
        assert!(!Stopped.can_move_to(Running));
        assert!(!Pending.can_move_to(Pending));
    }

    #[test]
    fn finding_dedup_key_joins_template_and_location() {
        let f = FindingEvent {
            template_id: "git-config".into(),
            name: "n".into(),
            severity: Severity::High,
            host: "a.example".into(),
            matched_at: "https://a.example/.git/config".into(),
            description: String::new(),
            remediation: String::new(),
            extracted_results: vec![],
            matcher_name: None,
        };
        assert_eq!(f.dedup_key(), "git-config:https://a.example/.git/config");
    }

    #[test]
    fn events_round_trip_as_json() {
        let e = ScanEvent {
            scan_id: Uuid::nil(),
            at: Utc::now(),
            kind: ScanEventKind::Progress {
                stage: Stage::Validate,
                progress: 40,
                current_tool: Some("templates".into()),
            },
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"kind\":\"progress\""));
        assert!(text.contains("\"stage\":\"VALIDATE\""));
        assert_eq!(serde_json::from_str::<ScanEvent>(&text).unwrap(), e);
    }
}
