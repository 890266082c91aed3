//! Event bodies. A generic webhook gets `{id, type, created_at, data}`,
//! where `data` holds the scan (and the finding) in the API's own shapes
//! ([`Scan`], [`Vulnerability`]), read when the event is first sent. A
//! Slack webhook gets a Block Kit message within Slack's limits (50 blocks,
//! 3,000 characters a section text, 150 a header).

use chrono::SecondsFormat;
use poem_openapi::types::ToJSON;
use scanfleet_core::store::findings::{self, FindingRow};
use scanfleet_core::store::scans::{self, ScanRow};
use scanfleet_core::store::schedules;
use scanfleet_core::store::webhooks::{self, Claimed};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::dto::{Scan, ScheduleOut, Vulnerability};
use crate::error::Error;

/// Slack's limits on one message.
pub const SLACK_MAX_BLOCKS: usize = 50;
pub const SLACK_MAX_SECTION_TEXT: usize = 3000;
pub const SLACK_MAX_HEADER_TEXT: usize = 150;
/// New findings listed in a scan's Slack message.
const SLACK_TOP_FINDINGS: usize = 5;

fn id_in(data: &Value, name: &str) -> Option<Uuid> {
    data.get(name)?.as_str()?.parse().ok()
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The `data` of an event, in the API's shapes; what the event names when
/// the scan or finding is gone.
async fn event_data(db: &deadpool_postgres::Object, c: &Claimed) -> Result<Value, Error> {
    let mut data = c.event_data.clone();
    if let Some(scan_id) = id_in(&c.event_data, "scan_id") {
        if let Some(scan) = scans::find(db, c.user_id, scan_id).await? {
            data = json!({ "scan": to_value(&Scan::from(scan)) });
        }
    }
    if let Some(finding_id) = id_in(&c.event_data, "finding_id") {
        if let Some(f) = webhooks::finding(&***db, c.user_id, finding_id).await? {
            data["finding"] = to_value(&Vulnerability::from(&f));
        }
    }
    if let Some(schedule_id) = id_in(&c.event_data, "schedule_id") {
        if let Some(s) = schedules::find(&***db, c.user_id, schedule_id).await? {
            data["schedule"] = ScheduleOut::from(s).to_json().unwrap_or(Value::Null);
        }
    }
    Ok(data)
}

/// The generic body of the claimed event.
pub async fn generic_body(db: &deadpool_postgres::Object, c: &Claimed) -> Result<String, Error> {
    let body = json!({
        "id": c.event_id,
        "type": c.event_type,
        "created_at": c.event_created_at.to_rfc3339_opts(SecondsFormat::Micros, true),
        "data": event_data(db, c).await?,
    });
    Ok(body.to_string())
}

/// The Slack message of the claimed event; `api_url` is the API's base
/// (`.../api/v1`) for links.
pub async fn slack_body(
    db: &deadpool_postgres::Object,
    c: &Claimed,
    api_url: &str,
) -> Result<String, Error> {
    let scan_id = id_in(&c.event_data, "scan_id");
    if c.event_type == scanfleet_core::outbox::SCAN_COMPLETED {
        if let Some(scan_id) = scan_id {
            if let Some((scan, list)) = findings::scan_with_findings(db, c.user_id, scan_id).await?
            {
                return Ok(scan_message(&scan, &list, api_url).to_string());
            }
        }
    }
    let data = event_data(db, c).await?;
    let title = match c.event_type.as_str() {
        "ping" => "scanfleet webhook test".to_string(),
        other => format!("scanfleet: {other}"),
    };
    let mut lines = Vec::new();
    if let Some(scan) = data.get("scan") {
        lines.push(format!(
            "Scan of *{}*: {}",
            escape(scan["domain"].as_str().unwrap_or("")),
            escape(scan["status"].as_str().unwrap_or(""))
        ));
        if let Some(error) = scan["error"].as_str() {
            lines.push(format!("Error: {}", escape(error)));
        }
        if let Some(id) = scan_id {
            lines.push(format!("<{api_url}/scans/{id}|Open the scan>"));
        }
    }
    if let Some(f) = data.get("finding") {
        lines.push(finding_line(
            f["severity"].as_str().unwrap_or("info"),
            f["name"].as_str().unwrap_or(""),
            f["matched_at"].as_str().unwrap_or(""),
        ));
    }
    if let Some(reason) = data.get("reason").and_then(Value::as_str) {
        lines.push(format!("Skipped: {}", escape(reason)));
    }
    if lines.is_empty() {
        lines.push("This is a test delivery.".to_string());
    }
    Ok(message(&title, vec![section(&lines.join("\n"))]).to_string())
}

/// A completed scan: a header, the counts by severity, the top five new
/// findings (worst first) with links to the API.
pub fn scan_message(scan: &ScanRow, list: &[FindingRow], api_url: &str) -> Value {
    let link = format!("{api_url}/scans/{}", scan.id);
    let counts = format!(
        "*{}* findings: {} critical, {} high, {} medium, {} low, {} info",
        scan.findings_count,
        scan.critical_count,
        scan.high_count,
        scan.medium_count,
        scan.low_count,
        scan.info_count
    );
    let mut worst: Vec<&FindingRow> = list.iter().collect();
    worst.sort_by_key(|f| f.severity.rank());
    let mut blocks = vec![section(&counts)];
    if !worst.is_empty() {
        let top: Vec<String> = worst
            .iter()
            .take(SLACK_TOP_FINDINGS)
            .map(|f| finding_line(f.severity.as_str(), &f.name, &f.matched_at))
            .collect();
        blocks.push(section(&format!("*Top new findings*\n{}", top.join("\n"))));
    }
    blocks.push(section(&format!("<{link}|Open the scan in the API>")));
    message(&format!("Scan of {} completed", scan.domain), blocks)
}

fn finding_line(severity: &str, name: &str, matched_at: &str) -> String {
    format!(
        "• [{}] {} at {}",
        severity.to_uppercase(),
        escape(name),
        escape(matched_at)
    )
}

/// A header and sections, cut to Slack's limits.
fn message(title: &str, mut sections: Vec<Value>) -> Value {
    sections.truncate(SLACK_MAX_BLOCKS - 1);
    let mut blocks = vec![json!({
        "type": "header",
        "text": { "type": "plain_text", "text": truncate(title, SLACK_MAX_HEADER_TEXT) },
    })];
    blocks.extend(sections);
    json!({ "text": truncate(title, SLACK_MAX_SECTION_TEXT), "blocks": blocks })
}

fn section(text: &str) -> Value {
    json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": truncate(text, SLACK_MAX_SECTION_TEXT) },
    })
}

/// At most `max` characters, with an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// Slack's control characters in mrkdwn text.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use scanfleet_common::events::ScanStatus;
    use scanfleet_common::jobs::Engine;
    use scanfleet_common::severity::Severity;

    fn scan(findings: i32) -> ScanRow {
        ScanRow {
            id: Uuid::now_v7(),
            user_id: Uuid::now_v7(),
            target_id: Uuid::now_v7(),
            schedule_id: None,
            domain: format!("{}.example.com", "a".repeat(200)),
            engine: Engine::Full,
            status: ScanStatus::Completed,
            stage: None,
            progress: 100,
            current_tool: None,
            error: None,
            findings_count: findings,
            critical_count: 100,
            high_count: 100,
            medium_count: 100,
            low_count: 100,
            info_count: 100,
            created_at: Utc::now(),
            started_at: None,
            completed_at: None,
            updated_at: Utc::now(),
            revision: 0,
        }
    }

    fn finding(i: usize, scan: &ScanRow) -> FindingRow {
        FindingRow {
            id: Uuid::now_v7(),
            scan_id: scan.id,
            user_id: scan.user_id,
            template_id: format!("t{i}"),
            name: format!("finding <{i}> & {}", "x".repeat(1000)),
            severity: Severity::ALL[i % 5],
            status: scanfleet_core::fingerprint::FindingStatus::Open,
            host: "h".into(),
            matched_at: format!("https://h/{}", "p".repeat(1000)),
            description: String::new(),
            remediation: String::new(),
            matcher_name: None,
            extracted_results: Vec::new(),
            created_at: Utc::now(),
            fingerprint: None,
            first_seen_at: None,
            change: None,
            accepted_until: None,
        }
    }

    /// Issue 27: a scan with 500 findings stays within Slack's limits.
    #[test]
    fn a_scan_with_500_findings_fits_slack_limits() {
        let s = scan(500);
        let list: Vec<FindingRow> = (0..500).map(|i| finding(i, &s)).collect();
        let m = scan_message(&s, &list, "https://api.example.com/api/v1");
        let blocks = m["blocks"].as_array().unwrap();
        assert!(blocks.len() <= SLACK_MAX_BLOCKS);
        assert_eq!(blocks[0]["type"], "header");
        let header = blocks[0]["text"]["text"].as_str().unwrap();
        assert!(header.chars().count() <= SLACK_MAX_HEADER_TEXT);
        for b in &blocks[1..] {
            let text = b["text"]["text"].as_str().unwrap();
            assert!(text.chars().count() <= SLACK_MAX_SECTION_TEXT);
            assert!(!text.contains("<0>"), "escaped: {text}");
        }
        let top = blocks[2]["text"]["text"].as_str().unwrap();
        assert!(top.starts_with("*Top new findings*"));
        // Five findings, worst first.
        assert!(top.contains("[CRITICAL]"));
        assert!(m.to_string().contains(&format!("/scans/{}", s.id)));
    }
}
