//! The JSON report: one document, the `JsonReport` schema of the OpenAPI
//! contract. Each row becomes a [`ReportFinding`] as it arrives and is then
//! dropped, so the findings are held once, in their output shape.

use chrono::{DateTime, Utc};
use poem_openapi::types::ToJSON;
use poem_openapi::Object;
use uuid::Uuid;

use super::{Header, Renderer, ReportError};
use crate::coverage::HostCoverage;
use scanfleet_core::store::findings::FindingRow;

/// Counts by severity, from the scan's counters.
#[derive(Debug, Clone, Object)]
pub struct ReportSummary {
    pub total_findings: i64,
    pub critical: i64,
    pub high: i64,
    pub medium: i64,
    pub low: i64,
    pub info: i64,
}

/// One finding of a report.
#[derive(Debug, Clone, Object)]
pub struct ReportFinding {
    pub id: Uuid,
    /// `critical`, `high`, `medium`, `low` or `info`.
    pub severity: String,
    /// The scanner template's name.
    pub name: String,
    pub template_id: String,
    /// `open`, `confirmed`, `false_positive`, `accepted_risk` or `fixed`.
    pub status: String,
    /// The affected host or service.
    pub host: String,
    /// URL or endpoint where it was detected.
    pub matched_at: String,
    pub description: String,
    pub remediation: String,
    /// The matcher that fired, when the template names it.
    #[oai(skip_serializing_if_is_none)]
    pub matcher_name: Option<String>,
    /// Values the template extracted from the response.
    pub extracted_results: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// Against the target's earlier scans: `new`, `recurring` or
    /// `regressed`.
    pub change: Option<String>,
}

impl From<&FindingRow> for ReportFinding {
    fn from(f: &FindingRow) -> Self {
        ReportFinding {
            id: f.id,
            severity: f.severity.as_str().to_string(),
            name: f.name.clone(),
            template_id: f.template_id.clone(),
            status: f.status.as_str().to_string(),
            host: f.host.clone(),
            matched_at: f.matched_at.clone(),
            description: f.description.clone(),
            remediation: f.remediation.clone(),
            matcher_name: f.matcher_name.clone(),
            extracted_results: f.extracted_results.clone(),
            created_at: f.created_at,
            change: f.change.map(|c| c.as_str().to_string()),
        }
    }
}

/// The `json` report of a scan.
#[derive(Debug, Object)]
pub struct JsonReport {
    pub generated_at: DateTime<Utc>,
    pub scan_id: Uuid,
    pub target_id: Uuid,
    pub domain: String,
    /// `full`, `quick` or `recon`.
    pub engine: String,
    /// The scan's status when the report was made.
    pub status: String,
    /// True unless the scan completed: the findings are those known so far.
    pub partial: bool,
    /// Why the report is partial, when it is.
    #[oai(skip_serializing_if_is_none)]
    pub partial_note: Option<String>,
    pub created_at: DateTime<Utc>,
    #[oai(skip_serializing_if_is_none)]
    pub started_at: Option<DateTime<Utc>>,
    #[oai(skip_serializing_if_is_none)]
    pub completed_at: Option<DateTime<Utc>>,
    /// Seconds from start to completion (to now while running).
    #[oai(skip_serializing_if_is_none)]
    pub duration_seconds: Option<i64>,
    pub summary: ReportSummary,
    /// Sorted by severity, critical first; by host, then in the order
    /// found, within a severity.
    pub vulnerabilities: Vec<ReportFinding>,
    /// What the scan covered on each live host, as `GET
    /// /scans/{scan_id}/coverage` gives it; empty for a scan without
    /// coverage.
    pub coverage: Vec<HostCoverage>,
}

pub struct JsonRenderer {
    header: Header,
    findings: Vec<ReportFinding>,
}

impl JsonRenderer {
    pub fn new(header: Header) -> JsonRenderer {
        let capacity = usize::try_from(header.total()).unwrap_or(0);
        JsonRenderer {
            header,
            findings: Vec::with_capacity(capacity),
        }
    }
}

impl Renderer for JsonRenderer {
    fn push(&mut self, f: &FindingRow) -> Result<(), ReportError> {
        self.findings.push(f.into());
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Vec<u8>, ReportError> {
        let h = self.header;
        let c = h.counts();
        let doc = JsonReport {
            generated_at: h.generated_at,
            scan_id: h.scan.id,
            target_id: h.scan.target_id,
            domain: h.scan.domain.clone(),
            engine: h.scan.engine.as_str().to_string(),
            status: h.scan.status.as_str().to_string(),
            partial: h.is_partial(),
            partial_note: h.partial_note(),
            created_at: h.scan.created_at,
            started_at: h.scan.started_at,
            completed_at: h.scan.completed_at,
            duration_seconds: h.duration().map(|d| d.num_seconds()),
            summary: ReportSummary {
                total_findings: h.total(),
                critical: c[0],
                high: c[1],
                medium: c[2],
                low: c[3],
                info: c[4],
            },
            vulnerabilities: self.findings,
            coverage: h.coverage.clone(),
        };
        let mut out = doc.to_json_string().into_bytes();
        out.push(b'\n');
        Ok(out)
    }
}
