//! `/findings` and the findings of a target across scans (issue 26):
//! triage that sticks to the finding's fingerprint, the target's findings
//! one per fingerprint, and the diff of two scans.

use chrono::{DateTime, NaiveDate, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use scanfleet_common::Severity;
use uuid::Uuid;

use super::scans::{Scan, Vulnerability};
use super::{page, ApiTags};
use crate::auth::{Caller, CanRead, CanScan, CanWrite};
use crate::contract::{
    self, DateText, FindingChangeName, FindingStateName, FindingStatusName, PageLimit, PageOffset,
    SearchText, SeverityName,
};
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::state::AppState;
use scanfleet_core::store::findings;
use scanfleet_core::store::fingerprints::{self, FingerprintFilter, FingerprintRow};

#[derive(Debug, Object)]
pub struct FindingUpdate {
    /// `open`, `confirmed`, `false_positive`, `accepted_risk` or `fixed`.
    /// Set on the finding's fingerprint: every occurrence of it on the
    /// target, earlier and later, carries it.
    pub status: FindingStatusName,
    /// With `accepted_risk` only: the last day the risk is accepted; the
    /// status is `open` again after it.
    pub until: Option<DateText>,
    /// Why, kept in the finding's status history (up to 1,000 characters).
    pub reason: Option<String>,
}

/// One change of a finding's triage status.
#[derive(Debug, Object)]
pub struct StatusHistoryEntry {
    pub id: Uuid,
    /// The email of the user who made the change.
    pub actor: String,
    /// The status before.
    pub from_status: String,
    /// The status after.
    pub to_status: String,
    /// With `accepted_risk`: the last day the risk is accepted.
    pub until: Option<NaiveDate>,
    /// Why, as the user gave it; empty when none was given.
    pub reason: String,
    pub changed_at: DateTime<Utc>,
}

impl From<findings::HistoryEntry> for StatusHistoryEntry {
    fn from(h: findings::HistoryEntry) -> Self {
        StatusHistoryEntry {
            id: h.id,
            actor: h.actor_email,
            from_status: h.from_status.as_str().to_string(),
            to_status: h.to_status.as_str().to_string(),
            until: h.accepted_until,
            reason: h.reason,
            changed_at: h.changed_at,
        }
    }
}

/// The longest reason a status change keeps.
pub const REASON_MAX: usize = 1000;

/// A status change's reason, trimmed; `field` names it in errors.
pub fn reason_of(field: &str, raw: Option<&str>) -> Result<String, Error> {
    let reason = raw.unwrap_or_default().trim();
    if reason.chars().count() > REASON_MAX {
        return Err(Error::invalid(
            field,
            format!("must be at most {REASON_MAX} characters"),
        ));
    }
    if reason
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\r' && c != '\t')
    {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(reason.to_string())
}

/// One finding of a target across its scans (one per fingerprint). Two
/// ids: the fingerprint's (`fingerprint_id`, also `id`) and the finding
/// of its last occurrence (`finding_id`), which is the one `PATCH
/// /findings/{finding_id}` and `POST /findings/{finding_id}/retest` take.
#[derive(Debug, Object)]
pub struct TargetFinding {
    /// The fingerprint's id, as `fingerprint_id` (kept for compatibility).
    /// Not a finding id: `PATCH /findings/{finding_id}` takes `finding_id`.
    pub id: Uuid,
    /// The fingerprint's id.
    pub fingerprint_id: Uuid,
    /// `template_id:` and the normalised `matched_at`.
    pub fingerprint: String,
    pub template_id: String,
    pub name: String,
    /// `critical`, `high`, `medium`, `low` or `info`.
    pub severity: String,
    pub host: String,
    /// Normalised (scheme and host lower-cased, default port dropped).
    pub matched_at: String,
    /// The user's triage: `open`, `confirmed`, `false_positive`,
    /// `accepted_risk` or `fixed`.
    pub status: String,
    /// The last day an `accepted_risk` holds.
    pub until: Option<NaiveDate>,
    /// What the scans say: `open` or `fixed`.
    pub state: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub first_scan_id: Option<Uuid>,
    pub last_scan_id: Option<Uuid>,
    /// When a scan found it fixed; `null` while open.
    pub fixed_at: Option<DateTime<Utc>>,
    /// Scans that found it.
    pub occurrences: i32,
    /// The id to triage or retest it with: the finding of its last
    /// occurrence, as `PATCH /findings/{finding_id}` and `POST
    /// /findings/{finding_id}/retest` take it.
    pub finding_id: Option<Uuid>,
}

impl From<FingerprintRow> for TargetFinding {
    fn from(f: FingerprintRow) -> Self {
        TargetFinding {
            id: f.id,
            fingerprint_id: f.id,
            fingerprint: f.fingerprint,
            template_id: f.template_id,
            name: f.name,
            severity: f.severity.as_str().to_string(),
            host: f.host,
            matched_at: f.matched_at,
            status: f.status.as_str().to_string(),
            until: f.accepted_until,
            state: f.state,
            first_seen_at: f.first_seen_at,
            last_seen_at: f.last_seen_at,
            first_scan_id: f.first_scan_id,
            last_scan_id: f.last_scan_id,
            fixed_at: f.fixed_at,
            occurrences: f.occurrences,
            finding_id: f.last_finding_id,
        }
    }
}

#[derive(ApiResponse)]
pub enum TargetFindingList {
    /// The target's findings, worst first, then the most recently found
    /// first within a severity (by when each was first seen).
    #[oai(status = 200)]
    Ok(
        Json<Vec<TargetFinding>>,
        #[oai(header = "X-Total-Count")] i64,
    ),
}

/// Two scans of one target compared by fingerprint. A finding is `new` or
/// `regressed` here only when its own `change` says so and the other scan
/// would have found it (the coverage rule of the fixed rule: its host
/// reached, its template run by the other scan's engine), so the diff
/// agrees with the scan's `changes`, its report and its notification.
#[derive(Debug, Object)]
pub struct ScanDiff {
    pub scan_id: Uuid,
    /// The scan's engine.
    pub engine: String,
    /// The scan compared with: `against`, or by default the target's
    /// previous completed scan of the same engine; `null` when there is
    /// none.
    pub against_scan_id: Option<Uuid>,
    /// The engine of the scan compared with; `null` with it.
    pub against_engine: Option<String>,
    /// When the scan compared with completed; `null` when it has not (or
    /// there is none).
    pub against_completed_at: Option<DateTime<Utc>>,
    /// In the scan and not in the other, which would have found it, and
    /// never seen on the target before this scan (`change` `new`).
    pub new: Vec<Vulnerability>,
    /// In the scan and not in the other, which would have found it, and
    /// found again after a fix (`change` `regressed`).
    pub regressed: Vec<Vulnerability>,
    /// In the other scan (its findings), not in the scan, which would have
    /// found it, and fixed by a scan between the two.
    pub fixed: Vec<Vulnerability>,
    /// Fingerprints in both.
    pub unchanged: i64,
    /// Fingerprints in one of the two only that are neither new, regressed
    /// nor fixed: the other scan could not have found them (its engine does
    /// not run the template, it did not reach the host, it retested another
    /// finding), or they were already open (`recurring`) and the other
    /// scan missed them without fixing them.
    pub not_compared: i64,
}

/// The filters of a target's findings list, by the list's parameter names
/// (the console's filters use the same names and values).
pub fn filter_of(
    state: Option<&str>,
    status: Option<&str>,
    severity: Option<&str>,
    change: Option<&str>,
    text: Option<&str>,
) -> Result<FingerprintFilter, Error> {
    let change = change
        .map(|v| {
            matches!(v, "new" | "recurring" | "regressed" | "fixed")
                .then(|| v.to_string())
                .ok_or_else(|| {
                    Error::invalid("change", "must be one of new, recurring, regressed, fixed")
                })
        })
        .transpose()?;
    // `fixed` is the fixed state: answered by the kept counts.
    let (state, change) = match (state, change) {
        (None, Some(c)) if c == "fixed" => (Some("fixed"), None),
        other => other,
    };
    let text = text.map(str::trim).filter(|t| !t.is_empty());
    if text.is_some_and(|t| t.chars().count() > 200) {
        return Err(Error::invalid("q", "must be at most 200 characters"));
    }
    if text.is_some_and(|t| t.chars().any(char::is_control)) {
        return Err(Error::invalid("q", "must not contain control characters"));
    }
    let text = text.map(str::to_string);
    let state = state
        .map(|v| {
            matches!(v, "open" | "fixed")
                .then(|| v.to_string())
                .ok_or_else(|| Error::invalid("state", "must be one of open, fixed"))
        })
        .transpose()?;
    let severity = severity
        .map(|v| {
            Severity::parse(v).ok_or_else(|| {
                Error::invalid(
                    "severity",
                    "must be one of critical, high, medium, low, info",
                )
            })
        })
        .transpose()?;
    Ok(FingerprintFilter {
        state,
        status: status
            .map(|v| contract::finding_status("status", v))
            .transpose()?,
        severity,
        change,
        text,
    })
}

#[derive(ApiResponse)]
pub enum RetestStarted {
    /// The retest scan is queued.
    #[oai(status = 202)]
    Accepted(Json<Scan>),
}

/// A finding as its own page shows it: the vulnerability shape, the
/// template's references and classification, and the exchange it was
/// matched on.
#[derive(Debug, Object)]
pub struct FindingRecord {
    #[oai(flatten)]
    pub finding: Vulnerability,
    /// The template's references (advisories, write-ups), as it lists them.
    pub references: Vec<String>,
    pub classification: FindingClassification,
    /// The request sent, as text, up to 4 KiB; absent when none was kept
    /// (findings of the probe stage, or recorded before requests were kept).
    #[oai(skip_serializing_if_is_none)]
    pub request: Option<String>,
    /// The response matched (status line, headers, body), as text, up to
    /// 8 KiB. Written by the scanned site: show it escaped.
    #[oai(skip_serializing_if_is_none)]
    pub response: Option<String>,
}

/// The template's `classification` block.
#[derive(Debug, Object)]
pub struct FindingClassification {
    /// `CVE-YYYY-N` identifiers.
    pub cve_ids: Vec<String>,
    /// `CWE-N` identifiers.
    pub cwe_ids: Vec<String>,
    #[oai(skip_serializing_if_is_none)]
    pub cvss_score: Option<f64>,
    /// The CVSS vector.
    #[oai(skip_serializing_if_is_none)]
    pub cvss_metrics: Option<String>,
}

impl From<(findings::FindingRow, findings::FindingDetail)> for FindingRecord {
    fn from((row, detail): (findings::FindingRow, findings::FindingDetail)) -> Self {
        let c = detail.classification;
        let (request, response) = match detail.evidence {
            Some(e) => (Some(e.request), Some(e.response)),
            None => (None, None),
        };
        FindingRecord {
            finding: Vulnerability::from(&row),
            references: c.references,
            classification: FindingClassification {
                cve_ids: c.cve_ids,
                cwe_ids: c.cwe_ids,
                cvss_score: c.cvss_score,
                cvss_metrics: c.cvss_metrics,
            },
            request,
            response,
        }
    }
}

pub struct FindingsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Findings")]
impl FindingsApi {
    /// A finding, with its evidence
    ///
    /// The vulnerability shape plus the template's references and
    /// classification (CVE, CWE, CVSS) and the request and response the
    /// match was judged on. Another user's finding is a 404.
    #[oai(
        path = "/findings/:finding_id",
        method = "get",
        operation_id = "get_finding"
    )]
    async fn get_finding(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        finding_id: Path<Uuid>,
    ) -> Result<Json<FindingRecord>> {
        let db = state.db.get().await?;
        let found = findings::find_with_detail(&**db, me.user.id, finding_id.0)
            .await?
            .ok_or(Error::NotFound("finding"))?;
        Ok(Json(found.into()))
    }

    /// Set a finding's status
    ///
    /// The status belongs to the finding's fingerprint on its target: the
    /// target's later scans report the finding with it. `accepted_risk` may
    /// carry `until`, after which the status is `open` again.
    #[oai(
        path = "/findings/:finding_id",
        method = "patch",
        operation_id = "update_finding"
    )]
    async fn update_finding(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        finding_id: Path<Uuid>,
        body: JsonBody<FindingUpdate>,
    ) -> Result<Json<Vulnerability>> {
        let status = contract::finding_status("status", &body.status)?;
        let until = body
            .until
            .as_ref()
            .map(|d| contract::date("until", d))
            .transpose()?;
        let reason = reason_of("reason", body.reason.as_deref())?;
        let change = findings::StatusChange {
            status,
            until,
            reason: &reason,
            actor_email: &me.user.email,
        };
        let finding =
            scanfleet_core::triage::set_status(&state.core, me.user.id, finding_id.0, &change)
                .await?;
        Ok(Json(Vulnerability::from(&finding)))
    }

    /// A finding's status history
    ///
    /// Every change of the finding's triage status, oldest first: who made
    /// it, from what, to what, when and why. The status belongs to the
    /// finding's fingerprint, so changes made through any of its
    /// occurrences are listed.
    #[oai(
        path = "/findings/:finding_id/history",
        method = "get",
        operation_id = "get_finding_history"
    )]
    async fn get_finding_history(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        finding_id: Path<Uuid>,
    ) -> Result<Json<Vec<StatusHistoryEntry>>> {
        let db = state.db.get().await?;
        let history = findings::status_history(&**db, me.user.id, finding_id.0)
            .await?
            .ok_or(Error::NotFound("finding"))?;
        Ok(Json(history.into_iter().map(Into::into).collect()))
    }

    /// Retest a finding
    ///
    /// Starts a scan of engine `retest` that runs only the finding's
    /// template against its host: found, the finding stays open with
    /// `last_seen_at` moved; not found, it is fixed. Retests do not count
    /// toward the tier's scan limit; at most 5 run at once per user (429
    /// beyond).
    #[oai(
        path = "/findings/:finding_id/retest",
        method = "post",
        operation_id = "retest_finding"
    )]
    async fn retest_finding(
        &self,
        state: Data<&AppState>,
        me: Caller<CanScan>,
        finding_id: Path<Uuid>,
    ) -> Result<RetestStarted> {
        let scan =
            scanfleet_core::retest::start_retest(&state.core, &me.user, finding_id.0).await?;
        Ok(RetestStarted::Accepted(Json(scan.into())))
    }

    /// The target's findings across its scans
    ///
    /// One item per fingerprint (target, `template_id` and normalised
    /// `matched_at`), with its life: first and last seen, state, the user's
    /// status, occurrences.
    #[oai(
        path = "/targets/:target_id/findings",
        method = "get",
        operation_id = "list_target_findings"
    )]
    #[allow(clippy::too_many_arguments)]
    async fn list_target_findings(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        target_id: Path<Uuid>,
        /// Only `open` or only `fixed` findings.
        #[oai(name = "state")]
        finding_state: Query<Option<FindingStateName>>,
        /// Only findings with this status.
        status: Query<Option<FindingStatusName>>,
        /// Only findings of this severity.
        severity: Query<Option<SeverityName>>,
        /// Only findings whose last scan recorded them `new`, `recurring`
        /// or `regressed` (and still open), or `fixed` ones.
        change: Query<Option<FindingChangeName>>,
        /// Only findings whose name, template id, host or URL contains this
        /// text (any case).
        q: Query<Option<SearchText>>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<TargetFindingList> {
        let filter = filter_of(
            finding_state.0.as_deref(),
            status.0.as_deref(),
            severity.0.as_deref(),
            change.0.as_deref(),
            q.0.as_deref(),
        )?;
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (list, total) = fingerprints::list_for_target(
            &db,
            me.user.id,
            target_id.0,
            &filter,
            (page.limit, page.offset),
        )
        .await?
        .ok_or(Error::NotFound("target"))?;
        Ok(TargetFindingList::Ok(
            Json(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Compare a scan with another scan of its target
    ///
    /// `against` defaults to the target's previous completed scan of the
    /// same engine; the answer names the scan and engine compared with.
    /// Findings the other scan could not have found are neither new nor
    /// fixed (`not_compared`).
    #[oai(
        path = "/scans/:scan_id/diff",
        method = "get",
        operation_id = "get_scan_diff"
    )]
    async fn get_scan_diff(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
        /// A scan of the same target.
        against: Query<Option<Uuid>>,
    ) -> Result<Json<ScanDiff>> {
        let db = state.db.get().await?;
        let scan = findings::diff_scan(&**db, me.user.id, scan_id.0)
            .await?
            .ok_or(Error::NotFound("scan"))?;
        let other = match against.0 {
            Some(id) => {
                let other = findings::diff_scan(&**db, me.user.id, id)
                    .await?
                    .ok_or(Error::NotFound("scan"))?;
                if other.target_id != scan.target_id {
                    return Err(
                        Error::invalid("against", "must be a scan of the same target").into(),
                    );
                }
                Some(other)
            }
            None => findings::previous_completed(&**db, &scan, Some(scan.engine)).await?,
        };
        let diff = findings::diff(&**db, &scan, other.as_ref()).await?;
        let shape =
            |list: Vec<findings::FindingRow>| list.iter().map(Vulnerability::from).collect();
        Ok(Json(ScanDiff {
            scan_id: scan.id,
            engine: scan.engine.as_str().to_string(),
            against_scan_id: other.map(|o| o.id),
            against_engine: other.map(|o| o.engine.as_str().to_string()),
            against_completed_at: other.and_then(|o| o.completed_at),
            new: shape(diff.new),
            regressed: shape(diff.regressed),
            fixed: shape(diff.fixed),
            unchanged: diff.unchanged,
            not_compared: diff.not_compared,
        }))
    }
}
