//! The SARIF 2.1.0 log that [`super::sarif`] writes, as the contract
//! describes it (`GET /scans/{scan_id}/report/sarif`): the subset of the
//! OASIS schema the renderer fills in, so that generated clients parse it
//! into their own types. The renderer streams its JSON by hand and never
//! builds these; the reports tests check its output against this schema
//! and against the official one.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use poem_openapi::Object;
use uuid::Uuid;

/// A SARIF 2.1.0 log with one run.
#[derive(Debug, Object)]
pub struct SarifLog {
    /// The OASIS JSON schema the log follows.
    #[oai(rename = "$schema")]
    pub schema: String,
    /// `2.1.0`.
    pub version: String,
    pub runs: Vec<SarifRun>,
}

/// The scan as one run of the tool.
#[derive(Debug, Object)]
pub struct SarifRun {
    pub tool: SarifTool,
    pub invocations: Vec<SarifInvocation>,
    pub properties: SarifRunProperties,
    /// One result per finding, the most severe first; then one per
    /// fingerprint the scan fixed (`baselineState: absent`), the most
    /// severe first.
    pub results: Vec<SarifResult>,
}

#[derive(Debug, Object)]
pub struct SarifTool {
    pub driver: SarifDriver,
}

/// The scanner, with one rule per template that found something.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifDriver {
    pub name: String,
    pub version: String,
    pub information_uri: String,
    pub rules: Vec<SarifRule>,
}

/// A template (SARIF `reportingDescriptor`).
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifRule {
    /// The template id.
    pub id: String,
    pub name: String,
    pub short_description: SarifMessage,
    pub full_description: SarifMessage,
    /// The remediation.
    pub help: SarifMessage,
    pub default_configuration: SarifRuleConfiguration,
    pub properties: SarifRuleProperties,
}

#[derive(Debug, Object)]
pub struct SarifRuleConfiguration {
    /// `error` (critical, high), `warning` (medium) or `note` (low, info).
    pub level: String,
}

#[derive(Debug, Object)]
pub struct SarifRuleProperties {
    /// The CVSS-like score GitHub code scanning reads.
    #[oai(rename = "security-severity")]
    pub security_severity: String,
    /// `critical`, `high`, `medium`, `low` or `info`.
    pub severity: String,
    pub tags: Vec<String>,
}

/// A text (SARIF `message` and `multiformatMessageString`).
#[derive(Debug, Object)]
pub struct SarifMessage {
    pub text: String,
}

/// The scan's run: whether it completed, and when it ran.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifInvocation {
    /// False while the scan has not completed (a partial report).
    pub execution_successful: bool,
    #[oai(skip_serializing_if_is_none)]
    pub start_time_utc: Option<DateTime<Utc>>,
    #[oai(skip_serializing_if_is_none)]
    pub end_time_utc: Option<DateTime<Utc>>,
    /// The partial-report note, when there is one.
    #[oai(skip_serializing_if_is_none)]
    pub tool_execution_notifications: Option<Vec<SarifNotification>>,
}

#[derive(Debug, Object)]
pub struct SarifNotification {
    pub level: String,
    pub message: SarifMessage,
}

/// The scan the run reports on.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifRunProperties {
    pub scan_id: Uuid,
    pub domain: String,
    pub engine: String,
    pub status: String,
    /// True unless the scan completed.
    pub partial: bool,
    pub generated_at: DateTime<Utc>,
    /// What the scan covered on each live host (as `GET
    /// /scans/{scan_id}/coverage`); empty for a scan without coverage.
    pub coverage: Vec<crate::coverage::HostCoverage>,
}

/// One finding, or one the scan fixed.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifResult {
    /// The template id, as the rule's `id`.
    pub rule_id: String,
    /// The rule's position in `tool.driver.rules`.
    pub rule_index: i64,
    pub level: String,
    /// `fail`.
    pub kind: String,
    /// Against the target's earlier scans: `new`, `unchanged` (recurring),
    /// `updated` (regressed: found again after a fix), or `absent` (fixed
    /// by this scan). Missing for a finding without a fingerprint.
    #[oai(skip_serializing_if_is_none)]
    pub baseline_state: Option<String>,
    pub message: SarifMessage,
    pub locations: Vec<SarifLocation>,
    /// `dedupKey/v1`: the template id and the matched URL;
    /// `fingerprint/v1`: the finding's identity on its target.
    pub partial_fingerprints: HashMap<String, String>,
    /// One entry for a finding triaged `false_positive` or `accepted_risk`
    /// (code scanning tools hide it); empty otherwise (not suppressed).
    pub suppressions: Vec<SarifSuppression>,
    pub properties: SarifResultProperties,
}

/// The user's triage as SARIF sees it (SARIF 2.1.0, 3.35).
#[derive(Debug, Object)]
pub struct SarifSuppression {
    /// `external`: decided in the service, not in the scanned site.
    pub kind: String,
    /// `accepted`: the triage is in force.
    pub status: String,
    /// `Triaged as a false positive.`, or `Risk accepted until
    /// YYYY-MM-DD.` (`Risk accepted.` with no end).
    pub justification: String,
    pub properties: SarifSuppressionProperties,
}

#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifSuppressionProperties {
    /// The triage status: `false_positive` or `accepted_risk`.
    pub triage_status: String,
    /// The last day an accepted risk holds; absent with no end.
    #[oai(skip_serializing_if_is_none)]
    pub accepted_until: Option<chrono::NaiveDate>,
}

/// Where a finding was matched: the URL, and the host as a logical place.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifLocation {
    pub physical_location: SarifPhysicalLocation,
    pub logical_locations: Vec<SarifLogicalLocation>,
}

#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifPhysicalLocation {
    pub artifact_location: SarifArtifactLocation,
}

#[derive(Debug, Object)]
pub struct SarifArtifactLocation {
    /// The matched URL or endpoint.
    pub uri: String,
}

#[derive(Debug, Object)]
pub struct SarifLogicalLocation {
    /// The host.
    pub name: String,
    /// `host`.
    pub kind: String,
}

/// The finding as the service keeps it.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct SarifResultProperties {
    /// The finding; for an `absent` result, the finding that found it last.
    pub finding_id: Uuid,
    pub severity: String,
    /// The triage status: `open`, `confirmed`, `false_positive`,
    /// `accepted_risk` or `fixed`.
    pub status: String,
    pub host: String,
    pub extracted_results: Vec<String>,
    /// When this scan fixed it (`absent` results only).
    #[oai(skip_serializing_if_is_none)]
    pub fixed_at: Option<DateTime<Utc>>,
}
