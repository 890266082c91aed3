//! `/scans`: creation (through [`scans::create_scan`], which counts the tier
//! limit and enqueues the job), listing, detail with findings, stop and
//! intel. Reports are in [`super::reports`].

use std::collections::BTreeMap;

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use scanfleet_common::events::ScanStatus;
use scanfleet_common::jobs::Engine;
use serde::Serialize;
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::{Caller, CanRead, CanScan};
use crate::contract::{self, EngineName, PageLimit, PageOffset, ScanStatusName};
pub use crate::dto::{Scan, Vulnerability};
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::payload::{Direct, Serialized};
use crate::state::AppState;
use scanfleet_core::store::findings::{self, FindingRow};
use scanfleet_core::store::fingerprints::{self, ChangeCounts};
use scanfleet_core::store::scans::{self, ScanFilter, ScanRow};
use scanfleet_report::TOOL_NAME;

#[derive(Debug, Object)]
pub struct ScanCreate {
    /// One of the caller's targets.
    pub target_id: Uuid,
    /// `full` (default), `quick` or `recon`.
    pub engine: Option<EngineName>,
}

/// What a completed scan changed on its target (fingerprints).
#[derive(Debug, Clone, Copy, Object, Serialize)]
pub struct ScanChanges {
    /// Never seen on the target before.
    pub new: i32,
    /// Seen before, and again.
    pub recurring: i32,
    /// Fixed before, and found again.
    pub regressed: i32,
    /// Open before, and fixed by this scan (see the fixed rule).
    pub fixed: i32,
}

impl From<ChangeCounts> for ScanChanges {
    fn from(c: ChangeCounts) -> Self {
        ScanChanges {
            new: c.new,
            recurring: c.recurring,
            regressed: c.regressed,
            fixed: c.fixed,
        }
    }
}

/// A finding in the detail shape.
#[derive(Debug, Object, Serialize)]
pub struct FindingDetail {
    pub id: Uuid,
    pub severity: String,
    /// The template's name.
    pub title: String,
    /// Where it was detected (`matched_at`).
    pub path: String,
    /// The detecting engine.
    pub tool: String,
    pub description: String,
}

impl From<&FindingRow> for FindingDetail {
    fn from(f: &FindingRow) -> Self {
        FindingDetail {
            id: f.id,
            severity: f.severity.as_str().to_string(),
            title: f.name.clone(),
            path: f.matched_at.clone(),
            tool: TOOL_NAME.to_string(),
            description: f.description.clone(),
        }
    }
}

#[derive(Debug, Object, Serialize)]
pub struct ScanSummary {
    pub total_findings: i64,
    pub critical: i64,
    pub high: i64,
    pub medium: i64,
    pub low: i64,
    pub info: i64,
}

#[derive(Debug, Object)]
pub struct SeverityCounts {
    pub critical: i64,
    pub high: i64,
    pub medium: i64,
    pub low: i64,
    pub info: i64,
}

fn severity_counts(findings: &[FindingRow]) -> [i64; 5] {
    let mut c = [0i64; 5];
    for f in findings {
        c[f.severity.rank() as usize] += 1;
    }
    c
}

fn summary_of(findings: &[FindingRow]) -> ScanSummary {
    let c = severity_counts(findings);
    ScanSummary {
        total_findings: findings.len() as i64,
        critical: c[0],
        high: c[1],
        medium: c[2],
        low: c[3],
        info: c[4],
    }
}

/// Scan detail: the scan with its findings in both shapes.
#[derive(Debug, Object, Serialize)]
pub struct ScanDetail {
    #[oai(flatten)]
    #[serde(flatten)]
    pub scan: Scan,
    /// Detail shape, worst first (in the order found within a severity).
    pub findings: Vec<FindingDetail>,
    /// Vulnerability shape, in the same order.
    pub vulnerabilities: Vec<Vulnerability>,
    pub summary: ScanSummary,
    /// `null` until the scan is completed.
    pub changes: Option<ScanChanges>,
}

/// Correlated intelligence of a scan.
#[derive(Debug, Object)]
pub struct ScanIntel {
    pub scan_id: Uuid,
    pub domain: String,
    pub severity_counts: SeverityCounts,
    /// Critical, high, medium, low, then the rest; in the order found
    /// within a severity.
    pub vulnerabilities: Vec<Vulnerability>,
    /// Each affected host with its vulnerabilities (same order).
    pub hosts: BTreeMap<String, Vec<Vulnerability>>,
}

#[derive(ApiResponse)]
pub enum ScanList {
    /// The caller's scans, newest first.
    #[oai(status = 200)]
    Ok(Direct<Vec<Scan>>, #[oai(header = "X-Total-Count")] i64),
}

#[derive(ApiResponse)]
pub enum ScanCreated {
    /// The scan is queued.
    #[oai(status = 201)]
    Created(Json<Scan>),
}

fn parse_engine(raw: Option<&str>) -> Result<Engine, Error> {
    match raw {
        None => Ok(Engine::Full),
        // `retest` is started by POST /findings/{id}/retest only.
        Some(v) => Engine::parse(v)
            .filter(|e| Engine::ALL.contains(e))
            .ok_or_else(|| Error::invalid("engine", "must be one of full, quick, recon, auto")),
    }
}

fn parse_status(raw: Option<&str>) -> Result<Option<ScanStatus>, Error> {
    raw.map(|v| {
        ScanStatus::parse(v).ok_or_else(|| {
            Error::invalid(
                "status",
                "must be one of queued, pending, running, completed, failed, stopped",
            )
        })
    })
    .transpose()
}

async fn owned_scan_with_findings(
    state: &AppState,
    user_id: Uuid,
    scan_id: Uuid,
) -> Result<(ScanRow, Vec<FindingRow>)> {
    let db = state.db.get().await?;
    findings::scan_with_findings(&db, user_id, scan_id)
        .await?
        .ok_or(Error::NotFound("scan").into())
}

fn by_severity(list: &[FindingRow]) -> Vec<Vulnerability> {
    let mut sorted: Vec<&FindingRow> = list.iter().collect();
    // Stable: the order found is kept within a severity.
    sorted.sort_by_key(|f| f.severity.rank());
    sorted.into_iter().map(Vulnerability::from).collect()
}

pub struct ScansApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Scans")]
impl ScansApi {
    /// List the caller's scans
    #[oai(path = "/scans", method = "get", operation_id = "list_scans")]
    async fn list_scans(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        /// Only scans of this target.
        target_id: Query<Option<Uuid>>,
        /// Only scans with this status: `queued`, `pending`, `running`,
        /// `completed`, `failed` or `stopped`.
        status: Query<Option<ScanStatusName>>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<ScanList> {
        let filter = ScanFilter {
            target_id: target_id.0,
            status: parse_status(status.0.as_deref())?,
        };
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (list, total) = scans::list(&db, me.user.id, filter, page).await?;
        Ok(ScanList::Ok(
            Direct(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Start a scan
    ///
    /// The scan is `queued` and its job pushed to the scanner queue. Over the
    /// tier's scan limit for the period: 403 with an upgrade prompt. If the
    /// queue cannot be reached the scan is marked `failed` and the answer is 503.
    #[oai(path = "/scans", method = "post", operation_id = "create_scan")]
    async fn create_scan(
        &self,
        state: Data<&AppState>,
        me: Caller<CanScan>,
        body: JsonBody<ScanCreate>,
    ) -> Result<ScanCreated> {
        let engine = parse_engine(body.engine.as_deref())?;
        let scan =
            scanfleet_core::scans::start_scan(&state.core, &me.user, body.target_id, engine, None)
                .await?;
        Ok(ScanCreated::Created(Json(scan.into())))
    }

    /// Scan detail with findings
    #[oai(path = "/scans/:scan_id", method = "get", operation_id = "get_scan")]
    async fn get_scan(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<Serialized<ScanDetail>> {
        let scan_id = scan_id.0;
        let db = state.db.get().await?;
        // One index lookup decides: not the caller's scan, or unchanged
        // since an answer was kept, or read in full.
        let revision = scans::revision(&db, me.user.id, scan_id)
            .await?
            .ok_or(Error::NotFound("scan"))?;
        if let Some(body) = state.detail_cache.get(scan_id, revision) {
            return Ok(Serialized::from_bytes(body));
        }
        let (s, list) = findings::scan_with_findings(&db, me.user.id, scan_id)
            .await?
            .ok_or(Error::NotFound("scan"))?;
        let revision = s.revision;
        let changes = fingerprints::changes_of(&db, scan_id).await?;
        let body = Serialized::new(&ScanDetail {
            scan: s.into(),
            findings: list.iter().map(FindingDetail::from).collect(),
            vulnerabilities: list.iter().map(Vulnerability::from).collect(),
            summary: summary_of(&list),
            changes: changes.map(ScanChanges::from),
        })
        .map_err(|e| Error::Unexpected(anyhow::Error::new(e).context("serialising a scan")))?;
        state.detail_cache.put(scan_id, revision, body.bytes());
        Ok(body)
    }

    /// Stop a queued, pending or running scan
    ///
    /// The scan becomes `stopped` and the stop is published to the scanner
    /// nodes; a finished scan is a 409.
    #[oai(
        path = "/scans/:scan_id/stop",
        method = "post",
        operation_id = "stop_scan"
    )]
    async fn stop_scan(
        &self,
        state: Data<&AppState>,
        me: Caller<CanScan>,
        scan_id: Path<Uuid>,
    ) -> Result<Json<Scan>> {
        let scan = scanfleet_core::scans::stop_scan(&state.core, me.user.id, scan_id.0).await?;
        tracing::info!(scan_id = %scan.id, "scan stopped");
        Ok(Json(scan.into()))
    }

    /// Correlated intelligence of a scan
    #[oai(
        path = "/scans/:scan_id/intel",
        method = "get",
        operation_id = "get_scan_intel"
    )]
    async fn get_scan_intel(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<Json<ScanIntel>> {
        let (s, list) = owned_scan_with_findings(&state, me.user.id, scan_id.0).await?;
        let vulnerabilities = by_severity(&list);
        let mut hosts: BTreeMap<String, Vec<Vulnerability>> = BTreeMap::new();
        for v in &vulnerabilities {
            hosts.entry(v.host.clone()).or_default().push(v.clone());
        }
        let c = severity_counts(&list);
        Ok(Json(ScanIntel {
            scan_id: s.id,
            domain: s.domain,
            severity_counts: SeverityCounts {
                critical: c[0],
                high: c[1],
                medium: c[2],
                low: c[3],
                info: c[4],
            },
            vulnerabilities,
            hosts,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload;
    use chrono::Utc;
    use scanfleet_common::severity::Severity;

    fn finding(i: usize, severity: Severity) -> FindingRow {
        FindingRow {
            id: Uuid::new_v4(),
            scan_id: Uuid::new_v4(),
            user_id: Uuid::new_v4(),
            template_id: format!("t-{i}"),
            name: format!("Finding \"{i}\" <é>\n"),
            severity,
            status: scanfleet_core::fingerprint::FindingStatus::Open,
            host: "shop.example.test".into(),
            matched_at: format!("https://shop.example.test/p{i}?a=1&b=\u{1}"),
            description: String::new(),
            remediation: "Upgrade.".into(),
            matcher_name: None,
            extracted_results: vec![],
            created_at: Utc::now(),
            fingerprint: Some(format!("t-{i}:https://shop.example.test/p{i}")),
            first_seen_at: Some(Utc::now()),
            change: Some(scanfleet_core::fingerprint::Change::Regressed),
            accepted_until: None,
        }
    }

    fn scan(all_set: bool) -> Scan {
        let now = Utc::now();
        Scan {
            id: Uuid::new_v4(),
            target_id: Uuid::new_v4(),
            domain: "shop.example.test".into(),
            engine: "full".into(),
            status: "running".into(),
            progress: 40,
            stage: all_set.then(|| "PROBE".into()),
            schedule_id: all_set.then(Uuid::new_v4),
            created_at: now,
            started_at: all_set.then_some(now),
            completed_at: all_set.then_some(now),
            error: all_set.then(|| "node lost".into()),
            findings_count: 2,
            critical_count: 1,
            high_count: 0,
            medium_count: 0,
            low_count: 0,
            info_count: 1,
        }
    }

    #[test]
    fn directly_serialised_answers_are_the_contracts_documents() {
        let list = [finding(1, Severity::Critical), finding(2, Severity::Info)];
        for all_set in [false, true] {
            let detail = ScanDetail {
                scan: scan(all_set),
                findings: list.iter().map(FindingDetail::from).collect(),
                vulnerabilities: list.iter().map(Vulnerability::from).collect(),
                summary: summary_of(&list),
                changes: all_set.then_some(ScanChanges {
                    new: 1,
                    recurring: 1,
                    regressed: 0,
                    fixed: 2,
                }),
            };
            payload::same_json(&detail).unwrap();
            payload::same_json(&vec![scan(all_set), scan(!all_set)]).unwrap();
        }
    }
}
