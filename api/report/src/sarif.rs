//! The SARIF 2.1.0 report: one run, one rule per template (its severity,
//! description and remediation), one result per finding with its location,
//! levels mapped from severity, and GitHub code scanning's
//! `security-severity` on each rule. Each finding's `baselineState` says
//! how it relates to the target's earlier scans (`new`, `unchanged`,
//! `updated` for a regressed one), and the fingerprints the scan fixed
//! follow the findings as results of `baselineState: absent`. A finding
//! triaged as a false positive or an accepted risk carries an external
//! `suppressions` entry (SARIF 2.1.0, 3.27.23 and 3.35), so that code
//! scanning tools hide it; every other result an empty list (not
//! suppressed, as opposed to not known).
//!
//! Results are serialised as they arrive; the rules, a handful per scan,
//! are collected on the way and written after them (JSON objects have no
//! key order), so the findings are never held.

use std::collections::HashMap;

use poem_openapi::types::ToJSON;
use scanfleet_common::Severity;
use serde_json::{json, Value};

use super::{Header, Renderer, ReportError, TOOL_NAME};
use scanfleet_core::fingerprint::{Change, FindingStatus};
use scanfleet_core::store::findings::FindingRow;
use scanfleet_core::store::fingerprints::FixedFingerprint;

/// The OASIS schema the document follows (errata 01, the current text).
pub const SCHEMA_URI: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low | Severity::Info => "note",
    }
}

/// The CVSS-like score GitHub code scanning reads from `security-severity`.
fn security_severity(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "9.5",
        Severity::High => "8.0",
        Severity::Medium => "5.5",
        Severity::Low => "3.0",
        Severity::Info => "0.0",
    }
}

pub struct SarifRenderer {
    header: Header,
    results: Vec<u8>,
    rules: Vec<Value>,
    rule_index: HashMap<String, usize>,
}

impl SarifRenderer {
    pub fn new(header: Header) -> SarifRenderer {
        SarifRenderer {
            header,
            results: Vec::with_capacity(64 * 1024),
            rules: Vec::new(),
            rule_index: HashMap::new(),
        }
    }

    /// The index of the rule of `template_id`, made from the first finding
    /// (or fixed fingerprint) of the template.
    fn rule_for(&mut self, template_id: &str, text: RuleText<'_>) -> usize {
        if let Some(i) = self.rule_index.get(template_id) {
            return *i;
        }
        let i = self.rules.len();
        let description = if text.description.trim().is_empty() {
            text.name
        } else {
            text.description
        };
        let help = if text.remediation.trim().is_empty() {
            "No remediation provided."
        } else {
            text.remediation
        };
        self.rules.push(json!({
            "id": template_id,
            "name": text.name,
            "shortDescription": {"text": text.name},
            "fullDescription": {"text": description},
            "help": {"text": help},
            "defaultConfiguration": {"level": level(text.severity)},
            "properties": {
                "security-severity": security_severity(text.severity),
                "severity": text.severity.as_str(),
                "tags": ["security"],
            },
        }));
        self.rule_index.insert(template_id.to_string(), i);
        i
    }

    fn write_result(&mut self, result: &Value) -> Result<(), ReportError> {
        if !self.results.is_empty() {
            self.results.push(b',');
        }
        serde_json::to_writer(&mut self.results, result)?;
        Ok(())
    }
}

/// What a rule says about its template.
struct RuleText<'a> {
    name: &'a str,
    description: &'a str,
    remediation: &'a str,
    severity: Severity,
}

/// What a result says, for a finding and for a fingerprint fixed alike.
struct ResultOf<'a> {
    template_id: &'a str,
    rule: RuleText<'a>,
    message: String,
    matched_at: &'a str,
    host: &'a str,
    finding_id: uuid::Uuid,
    status: FindingStatus,
    accepted_until: Option<chrono::NaiveDate>,
    extracted_results: &'a [String],
}

/// The SARIF `suppressions` of a result of triage `status` (SARIF 2.1.0,
/// 3.35): the user's triage happened outside the scanned site, so `kind`
/// is `external`, and it is in force, so `status` is `accepted`; an
/// accepted risk says until when, in its justification and as
/// `properties.acceptedUntil`. Empty for every other status.
pub fn suppressions(status: FindingStatus, accepted_until: Option<chrono::NaiveDate>) -> Value {
    let justification = match (status, accepted_until) {
        (FindingStatus::FalsePositive, _) => "Triaged as a false positive.".to_string(),
        (FindingStatus::AcceptedRisk, Some(until)) => format!("Risk accepted until {until}."),
        (FindingStatus::AcceptedRisk, None) => "Risk accepted.".to_string(),
        _ => return json!([]),
    };
    let mut suppression = json!({
        "kind": "external",
        "status": "accepted",
        "justification": justification,
        "properties": {"triageStatus": status.as_str()},
    });
    if let Some(until) = accepted_until.filter(|_| status == FindingStatus::AcceptedRisk) {
        suppression["properties"]["acceptedUntil"] = json!(until);
    }
    json!([suppression])
}

impl SarifRenderer {
    /// A result with its rule (added on first use), level, location and
    /// properties.
    fn result(&mut self, r: ResultOf) -> Value {
        let severity = r.rule.severity;
        let index = self.rule_for(r.template_id, r.rule);
        json!({
            "ruleId": r.template_id,
            "ruleIndex": index,
            "level": level(severity),
            "kind": "fail",
            "message": {"text": r.message},
            "locations": [{
                "physicalLocation": {"artifactLocation": {"uri": r.matched_at}},
                "logicalLocations": [{"name": r.host, "kind": "host"}],
            }],
            "partialFingerprints": {"dedupKey/v1": format!("{}:{}", r.template_id, r.matched_at)},
            "suppressions": suppressions(r.status, r.accepted_until),
            "properties": {
                "findingId": r.finding_id,
                "severity": severity.as_str(),
                "status": r.status.as_str(),
                "host": r.host,
                "extractedResults": r.extracted_results,
            },
        })
    }
}

impl Renderer for SarifRenderer {
    fn push(&mut self, f: &FindingRow) -> Result<(), ReportError> {
        let mut result = self.result(ResultOf {
            template_id: &f.template_id,
            rule: RuleText {
                name: &f.name,
                description: &f.description,
                remediation: &f.remediation,
                severity: f.severity,
            },
            message: format!("{} at {}", f.name, f.matched_at),
            matched_at: &f.matched_at,
            host: &f.host,
            finding_id: f.id,
            status: f.status,
            accepted_until: f.accepted_until,
            extracted_results: &f.extracted_results,
        });
        // SARIF 2.1.0, 3.27.24: the finding against the target's earlier
        // scans (a regressed one is `updated`); the ones this scan fixed
        // follow as `absent` (`push_fixed`).
        if let Some(change) = f.change {
            result["baselineState"] = json!(match change {
                Change::New => "new",
                Change::Recurring => "unchanged",
                Change::Regressed => "updated",
            });
        }
        if let Some(fingerprint) = &f.fingerprint {
            result["partialFingerprints"]["fingerprint/v1"] = json!(fingerprint);
        }
        self.write_result(&result)
    }

    /// A fingerprint this scan fixed: a result of `baselineState: absent`
    /// (SARIF 2.1.0, 3.27.24), with its rule, level and location as when
    /// it was last found; `findingId` is the finding that found it last.
    fn push_fixed(&mut self, f: &FixedFingerprint) -> Result<(), ReportError> {
        let mut result = self.result(ResultOf {
            template_id: &f.template_id,
            rule: RuleText {
                name: &f.name,
                description: &f.description,
                remediation: &f.remediation,
                severity: f.severity,
            },
            message: format!(
                "{} at {}: fixed, not found by this scan",
                f.name, f.matched_at
            ),
            matched_at: &f.matched_at,
            host: &f.host,
            finding_id: f.last_finding_id,
            status: f.status,
            accepted_until: f.accepted_until,
            extracted_results: &f.extracted_results,
        });
        result["baselineState"] = json!("absent");
        result["partialFingerprints"]["fingerprint/v1"] = json!(f.fingerprint);
        result["properties"]["fixedAt"] = json!(f.fixed_at);
        self.write_result(&result)
    }

    fn finish(self: Box<Self>) -> Result<Vec<u8>, ReportError> {
        let h = &self.header;
        let s = &h.scan;
        let mut invocation = json!({
            "executionSuccessful": !h.is_partial(),
            "startTimeUtc": s.started_at,
            "endTimeUtc": s.completed_at,
        });
        if s.started_at.is_none() {
            invocation.as_object_mut().map(|o| o.remove("startTimeUtc"));
        }
        if s.completed_at.is_none() {
            invocation.as_object_mut().map(|o| o.remove("endTimeUtc"));
        }
        if let Some(note) = h.partial_note() {
            invocation["toolExecutionNotifications"] = json!([{
                "level": "warning",
                "message": {"text": note},
            }]);
        }
        let tool = json!({"driver": {
            "name": TOOL_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "informationUri": "https://github.com/scanfleet/scanfleet",
            "rules": self.rules,
        }});
        let properties = json!({
            "scanId": s.id,
            "domain": s.domain,
            "engine": s.engine.as_str(),
            "status": s.status.as_str(),
            "partial": h.is_partial(),
            "generatedAt": h.generated_at,
            "coverage": h.coverage.to_json().unwrap_or_else(|| json!([])),
        });
        let mut out = Vec::with_capacity(self.results.len() + 4096);
        out.extend_from_slice(b"{\"$schema\":");
        serde_json::to_writer(&mut out, SCHEMA_URI)?;
        out.extend_from_slice(b",\"version\":\"2.1.0\",\"runs\":[{\"tool\":");
        serde_json::to_writer(&mut out, &tool)?;
        out.extend_from_slice(b",\"invocations\":[");
        serde_json::to_writer(&mut out, &invocation)?;
        out.extend_from_slice(b"],\"properties\":");
        serde_json::to_writer(&mut out, &properties)?;
        out.extend_from_slice(b",\"results\":[");
        out.extend_from_slice(&self.results);
        out.extend_from_slice(b"]}]}\n");
        Ok(out)
    }
}
