//! The API's shapes of a scan, a finding and a schedule, shared by the
//! routes that return them and the webhook renderer that sends them: below
//! both, so the background dispatcher does not reach into route files.

use chrono::{DateTime, Utc};
use poem_openapi::Object;
use scanfleet_core::store::findings::FindingRow;
use scanfleet_core::store::scans::ScanRow;
use scanfleet_core::store::schedules::Schedule;
use serde::Serialize;
use uuid::Uuid;

use crate::payload;

/// A scan as lists, creation and stop return it.
#[derive(Debug, Object, Serialize)]
pub struct Scan {
    pub id: Uuid,
    pub target_id: Uuid,
    /// The target's domain.
    pub domain: String,
    /// `full`, `quick`, `recon`, or `retest` (a finding's retest).
    pub engine: String,
    /// `queued`, `pending`, `running`, `completed`, `failed` or `stopped`.
    pub status: String,
    /// 0 to 100; 100 when completed.
    pub progress: i32,
    /// `RESOLVE`, `DISCOVER`, `PROBE`, `VALIDATE` or `REPORT`, once running.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The schedule that started it, if any.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<Uuid>,
    #[serde(serialize_with = "payload::rfc3339")]
    pub created_at: DateTime<Utc>,
    /// `null` until a node takes the scan up.
    #[serde(serialize_with = "payload::rfc3339_opt")]
    pub started_at: Option<DateTime<Utc>>,
    /// `null` until the scan ends.
    #[serde(serialize_with = "payload::rfc3339_opt")]
    pub completed_at: Option<DateTime<Utc>>,
    /// Why it failed.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub findings_count: i32,
    pub critical_count: i32,
    pub high_count: i32,
    pub medium_count: i32,
    pub low_count: i32,
    pub info_count: i32,
}

impl From<ScanRow> for Scan {
    fn from(s: ScanRow) -> Self {
        Scan {
            id: s.id,
            target_id: s.target_id,
            domain: s.domain,
            engine: s.engine.as_str().to_string(),
            status: s.status.as_str().to_string(),
            progress: i32::from(s.progress),
            stage: s.stage,
            schedule_id: s.schedule_id,
            created_at: s.created_at,
            started_at: s.started_at,
            completed_at: s.completed_at,
            error: s.error,
            findings_count: s.findings_count,
            critical_count: s.critical_count,
            high_count: s.high_count,
            medium_count: s.medium_count,
            low_count: s.low_count,
            info_count: s.info_count,
        }
    }
}

/// A finding in the vulnerability shape.
#[derive(Debug, Clone, Object, Serialize)]
pub struct Vulnerability {
    pub id: Uuid,
    pub scan_id: Uuid,
    /// The scanner template's name.
    pub name: String,
    /// `critical`, `high`, `medium`, `low` or `info`.
    pub severity: String,
    /// `open`, `confirmed`, `false_positive`, `accepted_risk` or `fixed`.
    pub status: String,
    pub template_id: String,
    /// The affected host or service.
    pub host: String,
    /// URL or endpoint where it was detected.
    pub matched_at: String,
    pub description: String,
    pub remediation: String,
    /// Its identity on the target across scans: `template_id:` and the
    /// normalised `matched_at` (scheme and host lower-cased, default port
    /// dropped).
    pub fingerprint: Option<String>,
    /// When the target first had it.
    #[serde(serialize_with = "payload::rfc3339_opt")]
    pub first_seen_at: Option<DateTime<Utc>>,
    /// `new` (never seen on this target before), `recurring`, or
    /// `regressed` (seen before, then fixed).
    pub change: Option<String>,
}

impl From<&FindingRow> for Vulnerability {
    fn from(f: &FindingRow) -> Self {
        Vulnerability {
            id: f.id,
            scan_id: f.scan_id,
            name: f.name.clone(),
            severity: f.severity.as_str().to_string(),
            status: f.status.as_str().to_string(),
            template_id: f.template_id.clone(),
            host: f.host.clone(),
            matched_at: f.matched_at.clone(),
            description: f.description.clone(),
            remediation: f.remediation.clone(),
            fingerprint: f.fingerprint.clone(),
            first_seen_at: f.first_seen_at,
            change: f.change.map(|c| c.as_str().to_string()),
        }
    }
}

// A schedule as the API returns it (no doc comment: it would be the
// contract's description of the schema, which has none).
#[derive(Debug, Object)]
pub struct ScheduleOut {
    pub id: Uuid,
    pub target_id: Uuid,
    /// `full`, `quick` or `recon`.
    pub engine: String,
    pub cron_expression: String,
    pub enabled: bool,
    /// The next firing of the expression, UTC.
    pub next_run: DateTime<Utc>,
    /// When a run was last started (by the scheduler or run-now).
    #[oai(nullable)]
    pub last_run_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<Schedule> for ScheduleOut {
    fn from(s: Schedule) -> Self {
        ScheduleOut {
            id: s.id,
            target_id: s.target_id,
            engine: s.engine.as_str().to_string(),
            cron_expression: s.cron_expression,
            enabled: s.enabled,
            next_run: s.next_run,
            last_run_at: s.last_run_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}
