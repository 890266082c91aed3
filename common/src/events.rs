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

    /// The one order statuses move in: queued, pending, running, then the
    /// terminal statuses, which share the last place.
    pub fn order(self) -> u8 {
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
    /// What the template says of the weakness (references, CVE, CWE,
    /// CVSS); the same for every finding of one template.
    /// Boxed, as `evidence` is, so that a [`ScanEventKind`] stays small.
    #[serde(default, skip_serializing_if = "Classification::is_empty")]
    pub classification: Box<Classification>,
    /// The request sent and the response that matched, as text, each cut
    /// at [`Evidence::REQUEST_KEPT`] / [`Evidence::RESPONSE_KEPT`] bytes.
    /// Written by the scanned site: only ever shown escaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<Evidence>>,
}

/// A template's `reference` list and `classification` block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Classification {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cve_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cwe_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvss_score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvss_metrics: Option<String>,
}

impl Classification {
    pub fn is_empty(&self) -> bool {
        self.references.is_empty()
            && self.cve_ids.is_empty()
            && self.cwe_ids.is_empty()
            && self.cvss_score.is_none()
            && self.cvss_metrics.is_none()
    }
}

/// The exchange a finding was matched on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Evidence {
    pub request: String,
    pub response: String,
}

impl Evidence {
    /// Bytes of the request kept.
    pub const REQUEST_KEPT: usize = 4 * 1024;
    /// Bytes of the response kept (status line, headers, then the body).
    pub const RESPONSE_KEPT: usize = 8 * 1024;

    /// The exchange as text: invalid UTF-8 replaced, each side cut to what
    /// is kept, with a line saying how much was left out.
    pub fn of(request: &[u8], response: &[u8]) -> Evidence {
        Evidence {
            request: kept_text(request, Self::REQUEST_KEPT),
            response: kept_text(response, Self::RESPONSE_KEPT),
        }
    }
}

/// Postgres text holds no NUL: one is kept as the replacement character.
fn kept_text(bytes: &[u8], limit: usize) -> String {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).replace('\0', "\u{FFFD}");
    if bytes.len() <= limit {
        return lossy(bytes);
    }
    // A cut inside a multi-byte character leaves a replacement character.
    let mut text = lossy(&bytes[..limit]);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[{} more bytes not kept]", bytes.len() - limit));
    text
}

impl FindingEvent {
    /// The dedup rule of the contract: `template_id:matched_at`.
    pub fn dedup_key(&self) -> String {
        format!("{}:{}", self.template_id, self.matched_at)
    }
}

/// A finding as the ingester recorded it, published after the commit for
/// WebSocket listeners (the scan's recorded stream,
/// `Keys::scan_recorded_stream`): its identity on the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFinding {
    /// [`FindingEvent::dedup_key`] of the finding.
    pub dedup_key: String,
    pub fingerprint: String,
    /// When the target first had it.
    pub first_seen_at: DateTime<Utc>,
    /// `new`, `recurring` or `regressed` in this scan.
    pub change: String,
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
            classification: Box::default(),
            evidence: None,
        };
        assert_eq!(f.dedup_key(), "git-config:https://a.example/.git/config");
    }

    #[test]
    fn evidence_is_cut_to_what_is_kept_and_holds_no_nul() {
        let e = Evidence::of(b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\na\0b");
        assert_eq!(e.request, "GET / HTTP/1.1\r\n\r\n");
        assert_eq!(e.response, "HTTP/1.1 200 OK\r\n\r\na\u{FFFD}b");
        let body = vec![b'x'; Evidence::RESPONSE_KEPT + 10];
        let e = Evidence::of(b"", &body);
        assert!(e.response.starts_with(&"x".repeat(Evidence::RESPONSE_KEPT)));
        assert!(
            e.response.ends_with("\n[10 more bytes not kept]"),
            "{}",
            &e.response[e.response.len() - 40..]
        );
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
