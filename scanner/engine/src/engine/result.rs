//! Findings as the engine reports them, one JSON Lines object each.

use chrono::{DateTime, Utc};
use scanfleet_common::events::{Classification, Evidence};
use scanfleet_common::Severity;
use serde::Serialize;

use crate::dsl::Vars;

/// One finding. Field names are the JSON Lines fields of the design.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScanResult {
    pub template_id: String,
    pub name: String,
    /// One of the five severities; anything else in a template becomes `info`.
    pub severity: Severity,
    /// The input target (`scheme://host[:port]`).
    pub host: String,
    /// The URL of the response that matched: with redirects followed, the
    /// hop that matched, which need not be the last.
    pub matched_at: String,
    pub extracted_results: Vec<String>,
    pub matcher_name: Option<String>,
    pub description: String,
    pub remediation: String,
    /// Boxed, as `evidence` is: results travel through channels by value.
    #[serde(skip_serializing_if = "Classification::is_empty")]
    pub classification: Box<Classification>,
    /// The request and response matched on (cut; see [`Evidence`]).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<Evidence>>,
    pub timestamp: DateTime<Utc>,
}

impl ScanResult {
    /// The finding as a scanner node sends it to the rest of the system.
    pub fn to_finding_event(&self) -> scanfleet_common::events::FindingEvent {
        scanfleet_common::events::FindingEvent {
            template_id: self.template_id.clone(),
            name: self.name.clone(),
            severity: self.severity,
            host: self.host.clone(),
            matched_at: self.matched_at.clone(),
            description: self.description.clone(),
            remediation: self.remediation.clone(),
            extracted_results: self.extracted_results.clone(),
            matcher_name: self.matcher_name.clone(),
            classification: self.classification.clone(),
            evidence: self.evidence.clone(),
        }
    }

    /// One JSON object on one line.
    pub fn to_json_line(&self) -> String {
        // Serialising plain strings, numbers and a timestamp cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// What one evaluation of a block's operators produced, reduced to what
/// result building needs (kept independent of the operators' own types so
/// the multiplicity rules can be tested alone).
#[derive(Debug, Clone, Default)]
pub struct MatchOutcome {
    pub has_matchers: bool,
    /// Every matcher is `internal: true`: a match only decides (a flow
    /// step, a later request), it is never reported.
    pub only_internal_matchers: bool,
    pub matched: bool,
    /// Names of the named matchers that matched, in template order.
    pub matched_names: Vec<String>,
    /// Non-internal extractor output: (name, values), in template order.
    pub extracts: Vec<(Option<String>, Vec<String>)>,
}

/// The fixed part of every result of one template on one target.
#[derive(Debug, Clone)]
pub struct ResultHead {
    pub template_id: String,
    pub name: String,
    pub severity: Severity,
    pub host: String,
    pub description: String,
    pub remediation: String,
    pub classification: Classification,
}

/// `results` with the exchange they were matched on, read once from the
/// variables of the response (`request` and `response`, as the template's
/// own matchers read them), and only when there is a result to carry it.
pub fn with_evidence(mut results: Vec<ScanResult>, vars: &(impl Vars + ?Sized)) -> Vec<ScanResult> {
    if results.is_empty() {
        return results;
    }
    let evidence = evidence_of(vars).map(Box::new);
    for r in &mut results {
        r.evidence = evidence.clone();
    }
    results
}

fn evidence_of(vars: &(impl Vars + ?Sized)) -> Option<Evidence> {
    let response = vars.get("response")?;
    let request = vars.get("request");
    let request = request.as_ref().map(|r| r.as_bytes());
    Some(Evidence::of(
        request.as_deref().unwrap_or_default(),
        &response.as_bytes(),
    ))
}

/// Turns one match event into results, with the multiplicity of Nuclei's
/// `MakeDefaultResultEvent`:
/// - matchers exist and none matched: nothing, whatever was extracted;
/// - matchers matched but all of them are internal: nothing (Nuclei's
///   template executor drops such events);
/// - named matchers matched: one result per name (the operators list them
///   under `or` only, as Nuclei does);
/// - otherwise named extractors with values: one result per extractor,
///   holding its own values (also when an unnamed matcher matched);
/// - otherwise one result, when a matcher matched or something was
///   extracted.
pub fn build_results(
    head: &ResultHead,
    matched_at: &str,
    outcome: &MatchOutcome,
) -> Vec<ScanResult> {
    if outcome.has_matchers && (!outcome.matched || outcome.only_internal_matchers) {
        return Vec::new();
    }
    let mut all_values: Vec<String> = Vec::new();
    for v in outcome.extracts.iter().flat_map(|(_, v)| v.iter()) {
        if !all_values.contains(v) {
            all_values.push(v.clone());
        }
    }
    let make = |matcher_name: Option<String>, extracted: Vec<String>| ScanResult {
        template_id: head.template_id.clone(),
        name: head.name.clone(),
        severity: head.severity,
        host: head.host.clone(),
        matched_at: matched_at.to_string(),
        extracted_results: extracted,
        matcher_name,
        description: head.description.clone(),
        remediation: head.remediation.clone(),
        classification: Box::new(head.classification.clone()),
        evidence: None,
        timestamp: Utc::now(),
    };
    if !outcome.matched_names.is_empty() {
        return outcome
            .matched_names
            .iter()
            .map(|n| make(Some(n.clone()), all_values.clone()))
            .collect();
    }
    let named: Vec<_> = outcome
        .extracts
        .iter()
        .filter_map(|(n, v)| n.as_ref().map(|n| (n, v)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if !named.is_empty() {
        return named
            .into_iter()
            .map(|(n, v)| make(Some(n.clone()), v.clone()))
            .collect();
    }
    if !outcome.matched && all_values.is_empty() {
        return Vec::new();
    }
    vec![make(None, all_values)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> ResultHead {
        ResultHead {
            template_id: "t".into(),
            name: "T".into(),
            severity: Severity::Low,
            host: "http://h".into(),
            description: String::new(),
            remediation: String::new(),
            classification: Classification::default(),
        }
    }

    #[test]
    fn a_match_of_internal_matchers_only_is_not_reported() {
        let mut o = MatchOutcome {
            has_matchers: true,
            only_internal_matchers: true,
            matched: true,
            matched_names: vec![],
            extracts: vec![(None, vec!["v".into()])],
        };
        assert!(build_results(&head(), "u", &o).is_empty());
        o.only_internal_matchers = false;
        assert_eq!(build_results(&head(), "u", &o).len(), 1);
    }

    #[test]
    fn unmatched_matchers_give_no_result_even_with_extracts() {
        let o = MatchOutcome {
            has_matchers: true,
            only_internal_matchers: false,
            matched: false,
            matched_names: vec![],
            extracts: vec![(None, vec!["v".into()])],
        };
        assert!(build_results(&head(), "u", &o).is_empty());
    }

    #[test]
    fn or_with_two_named_matches_gives_two_results() {
        let o = MatchOutcome {
            has_matchers: true,
            only_internal_matchers: false,
            matched: true,
            matched_names: vec!["a".into(), "b".into()],
            extracts: vec![],
        };
        let r = build_results(&head(), "u", &o);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].matcher_name.as_deref(), Some("b"));
    }

    #[test]
    fn extractor_only_templates_give_one_result_per_named_extractor() {
        let o = MatchOutcome {
            has_matchers: false,
            only_internal_matchers: false,
            matched: false,
            matched_names: vec![],
            extracts: vec![
                (Some("x".into()), vec!["1".into()]),
                (Some("y".into()), vec!["2".into(), "3".into()]),
                (Some("z".into()), vec![]),
            ],
        };
        let r = build_results(&head(), "u", &o);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[1].extracted_results,
            vec!["2".to_string(), "3".to_string()]
        );
    }

    #[test]
    fn an_unnamed_match_gives_one_result_per_named_extractor() {
        let o = MatchOutcome {
            has_matchers: true,
            only_internal_matchers: false,
            matched: true,
            matched_names: vec![],
            extracts: vec![
                (Some("x".into()), vec!["1".into()]),
                (None, vec!["2".into()]),
                (Some("y".into()), vec!["3".into()]),
            ],
        };
        let r = build_results(&head(), "u", &o);
        let got: Vec<_> = r
            .iter()
            .map(|r| (r.matcher_name.clone(), r.extracted_results.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some("x".to_string()), vec!["1".to_string()]),
                (Some("y".to_string()), vec!["3".to_string()]),
            ]
        );
    }

    #[test]
    fn a_match_without_names_or_values_gives_one_result() {
        let o = MatchOutcome {
            has_matchers: true,
            only_internal_matchers: false,
            matched: true,
            ..Default::default()
        };
        assert_eq!(build_results(&head(), "u", &o).len(), 1);
        let nothing = MatchOutcome::default();
        assert!(build_results(&head(), "u", &nothing).is_empty());
    }

    #[test]
    fn json_line_uses_the_design_field_names() {
        let o = MatchOutcome {
            has_matchers: true,
            only_internal_matchers: false,
            matched: true,
            ..Default::default()
        };
        let line = build_results(&head(), "http://h/x", &o)[0].to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        for k in [
            "template_id",
            "name",
            "severity",
            "host",
            "matched_at",
            "extracted_results",
            "matcher_name",
            "description",
            "remediation",
            "timestamp",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        assert_eq!(v["severity"], "low");
    }
}
