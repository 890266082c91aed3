//! Scans: the list, a scan's live page (progress and findings over
//! server-sent events, the same messages the WebSocket sends), stopping a
//! scan, and once it ends its changes and reports.

use askama::Template;
use futures::StreamExt;
use poem::web::sse::{Event, SSE};
use poem::web::{Data, Path, Query};
use poem::{handler, IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

use super::page::{self, Chrome, FormErrors, PageError, PageResult, Visitor};
use crate::state::AppState;
use scanfleet_core::store::findings::{self, FindingRow};
use scanfleet_core::store::fingerprints::{self, ChangeCounts};
use scanfleet_core::store::scans::{self, ScanFilter, ScanRow};
use scanfleet_core::store::Page;

const SCANS_PAGE: i64 = 50;
/// Findings the scan page lists (worst first); the rest are on the
/// target's page.
const LIVE_FINDINGS: i64 = 200;

#[derive(Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    offset: i64,
}

#[derive(Template)]
#[template(path = "scans.html")]
struct Scans {
    chrome: Chrome,
    scans: Vec<ScanRow>,
    total: i64,
    prev: Option<i64>,
    next: Option<i64>,
}

#[handler]
pub async fn index(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Query(q): Query<ListQuery>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let chrome = Chrome::load(&state, me, "scans").await?;
    let db = state.db.get().await?;
    let offset = q.offset.max(0);
    let (scans, total) = scans::list(
        &db,
        me.user.id,
        ScanFilter::default(),
        Page {
            limit: SCANS_PAGE,
            offset,
        },
    )
    .await?;
    page::html(&Scans {
        chrome,
        scans,
        total,
        prev: (offset > 0).then(|| (offset - SCANS_PAGE).max(0)),
        next: (offset + SCANS_PAGE < total).then_some(offset + SCANS_PAGE),
    })
}

/// A finding as the live page lists it.
pub struct LiveRow {
    pub id: Uuid,
    pub name: String,
    pub severity: &'static str,
    pub host: String,
    pub matched_at: String,
    pub fingerprint: String,
    pub change: String,
}

impl From<&FindingRow> for LiveRow {
    fn from(f: &FindingRow) -> Self {
        LiveRow {
            id: f.id,
            name: f.name.clone(),
            severity: f.severity.as_str(),
            host: f.host.clone(),
            matched_at: f.matched_at.clone(),
            fingerprint: f.fingerprint.clone().unwrap_or_default(),
            change: f.change.map(|c| c.as_str().to_string()).unwrap_or_default(),
        }
    }
}

/// A report format the scan page offers.
pub struct ReportLink {
    pub format: &'static str,
    pub label: &'static str,
}

#[derive(Template)]
#[template(path = "scan.html")]
struct ScanPage {
    chrome: Chrome,
    scan: ScanRow,
    findings: Vec<LiveRow>,
    /// Findings of the scan the page does not list.
    more_findings: usize,
    finished: bool,
    changes: Option<ChangeCounts>,
    previous: Option<String>,
    reports: Vec<ReportLink>,
    /// The tier has no reports: the upgrade prompt instead.
    reports_locked: bool,
    stop_error: Option<String>,
    /// Per host: technologies, templates run and skipped, requests.
    coverage: Vec<CoverageLine>,
}

/// One host's coverage as the scan page shows it.
pub struct CoverageLine {
    pub host: String,
    /// `name version` joined, with the evidence in the title.
    pub technologies: Vec<(String, String)>,
    pub total: i64,
    pub run: i64,
    /// `reason: count` joined.
    pub skipped: String,
    pub requests: i64,
}

impl From<scanfleet_core::store::coverage::CoverageRow> for CoverageLine {
    fn from(c: scanfleet_core::store::coverage::CoverageRow) -> Self {
        CoverageLine {
            host: c.host,
            technologies: c
                .technologies
                .into_iter()
                .map(|t| {
                    let label = match t.version {
                        Some(v) => format!("{} {v}", t.name),
                        None => t.name,
                    };
                    (label, t.evidence.join("; "))
                })
                .collect(),
            total: c.total,
            run: c.run,
            skipped: c
                .skipped
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            requests: c.requests,
        }
    }
}

async fn scan_page(
    state: &AppState,
    visitor: &Visitor,
    scan_id: Uuid,
    stop_error: Option<String>,
) -> PageResult {
    let me = page::signed(visitor)?;
    let db = state.db.get().await?;
    let scan = scans::find(&db, me.user.id, scan_id)
        .await?
        .ok_or(PageError::NotFound)?;
    // The worst first, a page of them: a scan of a large estate holds
    // hundreds of thousands (its target's page lists them all, filtered).
    let list: Vec<FindingRow> = findings::worst_of_scan(&**db, scan_id, LIVE_FINDINGS).await?;
    let chrome = Chrome::load(state, me, "scans").await?;
    let finished = scan.status.is_terminal();
    let (changes, previous) = if finished {
        let changes = fingerprints::changes_so_far(&**db, scan_id).await?;
        let this = findings::diff_scan(&**db, me.user.id, scan_id).await?;
        let previous = match this {
            // The scan before it whatever its engine, named with its
            // engine, as the reports do.
            Some(s) => findings::previous_completed(&**db, &s, None)
                .await?
                .and_then(|p| {
                    let at = p.completed_at?;
                    Some(format!(
                        "a {} scan completed {}",
                        p.engine.as_str(),
                        at.format("%Y-%m-%d %H:%M UTC")
                    ))
                }),
            None => None,
        };
        (Some(changes), previous)
    } else {
        (None, None)
    };
    let reports_locked = me.user.tier_slug == "demo";
    let coverage = scanfleet_core::store::coverage::of_scan(&**db, scan_id)
        .await?
        .into_iter()
        .map(CoverageLine::from)
        .collect();
    page::html(&ScanPage {
        coverage,
        chrome,
        more_findings: (scan.findings_count.max(0) as usize).saturating_sub(list.len()),
        findings: list.iter().map(LiveRow::from).collect(),
        finished,
        changes,
        previous,
        reports: [
            ("html", "HTML"),
            ("pdf", "PDF"),
            ("sarif", "SARIF"),
            ("csv", "CSV"),
            ("json", "JSON"),
        ]
        .into_iter()
        .map(|(format, label)| ReportLink { format, label })
        .collect(),
        reports_locked,
        stop_error,
        scan,
    })
}

#[handler]
pub async fn show(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(scan_id): Path<Uuid>,
) -> PageResult {
    scan_page(&state, &visitor, scan_id, None).await
}

#[handler]
pub async fn stop(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(scan_id): Path<Uuid>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    match scanfleet_core::scans::stop_scan(&state.core, me.user.id, scan_id).await {
        Ok(_) => Ok(page::redirect(&format!("/scans/{scan_id}"))),
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            scan_page(&state, &visitor, scan_id, Some(errors.all().join(" "))).await
        }
    }
}

/// The scan's live messages as server-sent events (`message` events whose
/// data is the WebSocket's JSON message). On every connection the snapshot
/// comes first, with the findings the scan's stream holds, so a page that
/// lost its connection and reconnects misses nothing.
#[handler]
pub async fn events(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(scan_id): Path<Uuid>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let db = state.db.get().await?;
    let row = scans::find(&db, me.user.id, scan_id)
        .await?
        .ok_or(PageError::NotFound)?;
    drop(db);
    let messages = crate::ws::live_messages(&state.hub, state.db.clone(), &row, true).await?;
    let stream = messages.map(|m| {
        let data = serde_json::to_string(&m).unwrap_or_default();
        Event::message(data)
    });
    let resp: Response = SSE::new(stream)
        .keep_alive(std::time::Duration::from_secs(15))
        .into_response();
    Ok(resp)
}

#[derive(Deserialize)]
pub struct ReportQuery {
    #[serde(default)]
    format: String,
}

/// A report of the scan, downloaded (the tier gate as in the API).
#[handler]
pub async fn report(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(scan_id): Path<Uuid>,
    Query(q): Query<ReportQuery>,
) -> PageResult {
    use scanfleet_report::Format;
    let me = page::signed(&visitor)?;
    let format = Format::parse(if q.format.is_empty() {
        "html"
    } else {
        &q.format
    })
    .ok_or_else(|| PageError::BadRequest(format!("format: must be one of {}", Format::NAMES)))?;
    let rendered = crate::routes::reports::render(&state, &me.user, scan_id, format).await?;
    let mut resp = crate::routes::reports::ReportResponse::new(format, rendered).into_response();
    // Always a download: an HTML report is the scanned site's text in a
    // page of its own, never rendered inside the console.
    if format == Format::Html {
        let name = format!("scan-{scan_id}.html");
        if let Ok(v) = format!("attachment; filename=\"{name}\"").parse() {
            resp.headers_mut().insert("content-disposition", v);
        }
    }
    Ok(resp)
}
