//! Targets: the list (search, add, bulk import), and a target's page: its
//! ownership proof, its findings with the lifecycle (filters in the URL,
//! bulk and inline triage, export of exactly the filtered list), its scans
//! and schedules, and starting a scan.

use askama::Template;
use poem::http::header;
use poem::web::{Data, Path, Query};
use poem::{handler, Request, Response};
use scanfleet_common::jobs::Engine;
use serde::Deserialize;
use uuid::Uuid;

use super::form::{self, FormData};
use super::page::{self, Chrome, FormErrors, PageError, PageResult, Visitor};
use crate::routes::findings::{filter_of, reason_of};
use crate::state::AppState;
use scanfleet_core::fingerprint::FindingStatus;
use scanfleet_core::ownership;
use scanfleet_core::store::findings::StatusChange;
use scanfleet_core::store::fingerprints::{self, FingerprintRow};
use scanfleet_core::store::scans::{self, ScanFilter, ScanRow};
use scanfleet_core::store::schedules::{self, Schedule};
use scanfleet_core::store::targets::{self, ImportLine, TargetRow};
use scanfleet_core::store::Page;

/// Findings a page of the target's list shows.
pub const FINDINGS_PAGE: i64 = 50;
/// Targets a page of the list shows.
const TARGETS_PAGE: i64 = 50;

/// Each engine a scan can be started with (`Engine::ALL`, the one list),
/// by name, with what it runs in a sentence, for the start-scan form.
pub fn engines() -> [(&'static str, &'static str); Engine::ALL.len()] {
    Engine::ALL.map(|e| (e.as_str(), what_it_runs(e)))
}

fn what_it_runs(engine: Engine) -> &'static str {
    match engine {
        Engine::Full => {
            "Discovery of subdomains, an HTTP probe of every host found, then every template."
        }
        Engine::Quick => {
            "The domain itself only: an HTTP probe, then templates of severity medium and above."
        }
        Engine::Recon => {
            "Discovery and the HTTP probe, with technology findings only: what runs where."
        }
        Engine::Auto => {
            "Discovery, the HTTP probe and technology detection, then on each host the templates \
             of what it runs plus a baseline of technology-independent checks."
        }
        // Started by a retest only, never from the form.
        Engine::Retest => "One finding's template against its host.",
    }
}

/// A target as its list and page show it.
pub struct TargetView {
    pub id: Uuid,
    pub domain: String,
    pub organization: String,
    pub status: String,
    pub token_value: String,
    pub dns_names: Vec<String>,
    pub file_url: String,
    pub verified_at: String,
    pub expires_at: String,
}

impl TargetView {
    fn of(state: &AppState, t: TargetRow) -> TargetView {
        let help = ownership::help_for(&t, &state.ownership.api_url);
        TargetView {
            status: t.proof.status_at(chrono::Utc::now()).as_str().to_string(),
            verified_at: t
                .proof
                .verified_at
                .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_default(),
            expires_at: t
                .proof
                .expires_at
                .map(|d| d.format("%Y-%m-%d").to_string())
                .unwrap_or_default(),
            id: t.id,
            domain: t.domain,
            organization: t.organization,
            token_value: help.value,
            dns_names: help.dns_txt_names,
            file_url: help.file_url,
        }
    }
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    offset: i64,
}

#[derive(Template)]
#[template(path = "targets.html")]
struct Targets {
    chrome: Chrome,
    targets: Vec<TargetView>,
    total: i64,
    q: String,
    prev: Option<i64>,
    next: Option<i64>,
    domain: String,
    errors: FormErrors,
    import_text: String,
    import: Option<ImportOutcome>,
}

struct ImportOutcome {
    imported: usize,
    failures: Vec<String>,
}

async fn targets_page(
    state: &AppState,
    visitor: &Visitor,
    q: &str,
    offset: i64,
    form: (String, FormErrors, String, Option<ImportOutcome>),
) -> PageResult {
    let me = page::signed(visitor)?;
    let chrome = Chrome::load(state, me, "targets").await?;
    let db = state.db.get().await?;
    let offset = offset.max(0);
    let search = Some(q.trim()).filter(|q| !q.is_empty());
    let (list, total) = targets::list(
        &**db,
        me.user.id,
        search,
        Page {
            limit: TARGETS_PAGE,
            offset,
        },
    )
    .await?;
    let (domain, errors, import_text, import) = form;
    let failed = !errors.is_empty();
    page::form_page(
        &Targets {
            chrome,
            targets: list.into_iter().map(|t| TargetView::of(state, t)).collect(),
            total,
            q: q.to_string(),
            prev: (offset > 0).then(|| (offset - TARGETS_PAGE).max(0)),
            next: (offset + TARGETS_PAGE < total).then_some(offset + TARGETS_PAGE),
            domain,
            errors,
            import_text,
            import,
        },
        failed,
    )
}

#[handler]
pub async fn index(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Query(q): Query<ListQuery>,
) -> PageResult {
    let empty = (String::new(), FormErrors::default(), String::new(), None);
    targets_page(&state, &visitor, &q.q, q.offset, empty).await
}

#[handler]
pub async fn add(state: Data<&AppState>, visitor: Data<&Visitor>, body: poem::Body) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let raw = form.get("domain").to_string();
    let outcome = async {
        let domain = crate::validate::domain(&raw, "domain")?;
        let org = crate::validate::organization(form.opt("organization"))?;
        scanfleet_core::targets::add(&state.core, me.user.id, &domain, &org, None).await
    }
    .await;
    match outcome {
        Ok(t) => Ok(page::redirect(&format!("/targets/{}", t.id))),
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            targets_page(&state, &visitor, "", 0, (raw, errors, String::new(), None)).await
        }
    }
}

#[handler]
pub async fn import_domains(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let text = form.get("domains").to_string();
    let domains: Vec<String> = text
        .split(|c: char| c == '\n' || c == ',' || c.is_whitespace())
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    let max = crate::contract::bounds::IMPORT_MAX;
    if domains.is_empty() || domains.len() > max {
        let errors = FormErrors::general(format!("give between 1 and {max} domains, one a line"));
        return targets_page(&state, &visitor, "", 0, (String::new(), errors, text, None)).await;
    }
    let lines = scanfleet_core::targets::import(&state.core, me.user.id, &domains).await?;
    let mut outcome = ImportOutcome {
        imported: 0,
        failures: Vec::new(),
    };
    for (domain, line) in domains.iter().zip(lines) {
        let why = match line {
            ImportLine::Imported(_) => {
                outcome.imported += 1;
                continue;
            }
            ImportLine::Invalid(e) => e.message().to_string(),
            ImportLine::DuplicateInImport => "appears earlier in this list".into(),
            ImportLine::AlreadyExists => "you already have this target".into(),
            ImportLine::LimitReached => "over your tier's target limit".into(),
        };
        outcome.failures.push(format!("{domain}: {why}"));
    }
    let keep = if outcome.failures.is_empty() {
        String::new()
    } else {
        text
    };
    let form = (String::new(), FormErrors::default(), keep, Some(outcome));
    targets_page(&state, &visitor, "", 0, form).await
}

/// A target's findings filters, by the API list's parameter names.
#[derive(Deserialize, Default, Clone)]
pub struct FindingsQuery {
    #[serde(default)]
    pub severity: String,
    #[serde(default)]
    pub change: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub offset: i64,
}

impl FindingsQuery {
    fn filter(&self) -> Result<fingerprints::FingerprintFilter, PageError> {
        let opt = |v: &str| Some(v.to_string()).filter(|v| !v.is_empty());
        Ok(filter_of(
            None,
            opt(&self.status).as_deref(),
            opt(&self.severity).as_deref(),
            opt(&self.change).as_deref(),
            opt(&self.q).as_deref(),
        )?)
    }

    /// The filters as a query string (without the offset), for links.
    pub fn query_string(&self) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("severity", &self.severity),
            ("change", &self.change),
            ("status", &self.status),
            ("q", &self.q),
        ] {
            if !v.is_empty() {
                q.append_pair(k, v);
            }
        }
        q.finish()
    }
}

/// One option of a select.
pub struct Opt {
    pub value: &'static str,
    pub label: &'static str,
    pub selected: bool,
}

/// The options of a select, with `current` selected.
pub fn options(choices: &[(&'static str, &'static str)], current: &str) -> Vec<Opt> {
    choices
        .iter()
        .map(|(value, label)| Opt {
            value,
            label,
            selected: *value == current,
        })
        .collect()
}

/// One row of a target's findings.
pub struct FindingLine {
    pub row: FingerprintRow,
    /// `fixed`, or the change its last scan recorded.
    pub change: &'static str,
}

impl FindingLine {
    fn of(row: FingerprintRow) -> FindingLine {
        let change = if row.state == "fixed" {
            "fixed"
        } else {
            row.last_change.as_str()
        };
        FindingLine { row, change }
    }

    pub fn label(&self) -> String {
        format!("{} on {}", self.row.name, self.row.host)
    }

    pub fn severity(&self) -> &'static str {
        self.row.severity.as_str()
    }

    pub fn status_label(&self) -> &'static str {
        status_label(self.row.status)
    }

    /// The row's status select.
    pub fn status_opts(&self) -> Vec<Opt> {
        options(&status_choices(), self.row.status.as_str())
    }
}

pub fn status_label(status: FindingStatus) -> &'static str {
    match status {
        FindingStatus::Open => "Open",
        FindingStatus::Confirmed => "Confirmed",
        FindingStatus::FalsePositive => "False positive",
        FindingStatus::AcceptedRisk => "Accepted risk",
        FindingStatus::Fixed => "Fixed",
    }
}

/// The statuses a row's select offers, with their labels.
pub fn status_choices() -> Vec<(&'static str, &'static str)> {
    FindingStatus::ALL
        .iter()
        .map(|s| (s.as_str(), status_label(*s)))
        .collect()
}

#[derive(Template)]
#[template(path = "findings_block.html")]
pub struct FindingsBlock {
    pub target_id: Uuid,
    pub lines: Vec<FindingLine>,
    pub total: i64,
    pub filters: FindingsQuery,
    pub query: String,
    pub prev: Option<i64>,
    pub next: Option<i64>,
    pub severity_opts: Vec<Opt>,
    pub change_opts: Vec<Opt>,
    pub status_opts: Vec<Opt>,
    pub notice: Option<String>,
    pub csrf: String,
}

#[derive(Template)]
#[template(path = "finding_row.html")]
pub struct RowBlock {
    pub line: FindingLine,
}

const SEVERITIES: [(&str, &str); 5] = [
    ("critical", "critical"),
    ("high", "high"),
    ("medium", "medium"),
    ("low", "low"),
    ("info", "info"),
];
const CHANGES: [(&str, &str); 4] = [
    ("new", "new"),
    ("recurring", "recurring"),
    ("regressed", "regressed"),
    ("fixed", "fixed"),
];

async fn findings_block(
    state: &AppState,
    user_id: Uuid,
    target_id: Uuid,
    filters: FindingsQuery,
    csrf: &str,
    notice: Option<String>,
) -> Result<FindingsBlock, PageError> {
    let filter = filters.filter()?;
    let offset = filters.offset.max(0);
    let db = state.db.get().await?;
    let (rows, total) =
        fingerprints::list_for_target(&db, user_id, target_id, &filter, (FINDINGS_PAGE, offset))
            .await?
            .ok_or(PageError::NotFound)?;
    let lines = rows.into_iter().map(FindingLine::of).collect();
    Ok(FindingsBlock {
        target_id,
        lines,
        total,
        query: filters.query_string(),
        prev: (offset > 0).then(|| (offset - FINDINGS_PAGE).max(0)),
        next: (offset + FINDINGS_PAGE < total).then_some(offset + FINDINGS_PAGE),
        severity_opts: options(&SEVERITIES, &filters.severity),
        change_opts: options(&CHANGES, &filters.change),
        status_opts: options(&status_choices(), &filters.status),
        filters,
        notice,
        csrf: csrf.to_string(),
    })
}

#[derive(Template)]
#[template(path = "target.html")]
struct TargetPage {
    chrome: Chrome,
    target: TargetView,
    findings: FindingsBlock,
    scans: Vec<ScanRow>,
    schedules: Vec<Schedule>,
    engines: [(&'static str, &'static str); Engine::ALL.len()],
    verify_errors: Vec<String>,
    scan_error: Option<String>,
}

async fn target_page(
    state: &AppState,
    visitor: &Visitor,
    target_id: Uuid,
    filters: FindingsQuery,
    verify_errors: Vec<String>,
    scan_error: Option<String>,
) -> PageResult {
    let me = page::signed(visitor)?;
    let db = state.db.get().await?;
    let target = targets::find(&db, me.user.id, target_id)
        .await?
        .ok_or(PageError::NotFound)?;
    let chrome = Chrome::load(state, me, "targets").await?;
    let findings =
        findings_block(state, me.user.id, target_id, filters, &me.csrf_token, None).await?;
    let (scans, _) = scans::list(
        &db,
        me.user.id,
        ScanFilter {
            target_id: Some(target_id),
            status: None,
        },
        Page {
            limit: 10,
            offset: 0,
        },
    )
    .await?;
    let (all, _) = schedules::list(
        &**db,
        me.user.id,
        Page {
            limit: 500,
            offset: 0,
        },
    )
    .await?;
    let failed = !verify_errors.is_empty() || scan_error.is_some();
    page::form_page(
        &TargetPage {
            chrome,
            target: TargetView::of(state, target),
            findings,
            scans,
            schedules: all
                .into_iter()
                .filter(|s| s.target_id == target_id)
                .collect(),
            engines: engines(),
            verify_errors,
            scan_error,
        },
        failed,
    )
}

#[handler]
pub async fn show(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(target_id): Path<Uuid>,
    Query(filters): Query<FindingsQuery>,
    req: &Request,
) -> PageResult {
    // The filter form swaps just the findings.
    if page::is_htmx(req) {
        let me = page::signed(&visitor)?;
        let block =
            findings_block(&state, me.user.id, target_id, filters, &me.csrf_token, None).await?;
        return page::html(&block);
    }
    target_page(&state, &visitor, target_id, filters, Vec::new(), None).await
}

#[handler]
pub async fn verify(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(target_id): Path<Uuid>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    match scanfleet_core::targets::verify(&state.core, me.user.id, target_id).await {
        Ok(_) => Ok(page::redirect(&format!("/targets/{target_id}"))),
        Err(crate::error::Error::VerificationFailed { detail, errors, .. }) => {
            let mut lines = vec![detail];
            lines.extend(
                errors
                    .into_iter()
                    .map(|e| format!("{}: {}", e.field, e.message)),
            );
            target_page(
                &state,
                &visitor,
                target_id,
                FindingsQuery::default(),
                lines,
                None,
            )
            .await
        }
        Err(e) => Err(e.into()),
    }
}

#[handler]
pub async fn start_scan(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(target_id): Path<Uuid>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let engine = match Engine::parse(form.get("engine")) {
        Some(e) if Engine::ALL.contains(&e) => e,
        _ => {
            let message = "engine: must be one of full, quick, recon, auto".to_string();
            return target_page(
                &state,
                &visitor,
                target_id,
                FindingsQuery::default(),
                Vec::new(),
                Some(message),
            )
            .await;
        }
    };
    match scanfleet_core::scans::start_scan(&state.core, &me.user, target_id, engine, None).await {
        Ok(scan) => Ok(page::redirect(&format!("/scans/{}", scan.id))),
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            let message = errors.all().join(" ");
            target_page(
                &state,
                &visitor,
                target_id,
                FindingsQuery::default(),
                Vec::new(),
                Some(message),
            )
            .await
        }
    }
}

/// The status change a triage form asks for: `status` (the form's field
/// `status_field`), and `until` for an accepted risk.
pub(super) fn change_of<'a>(
    form: &'a FormData,
    status_field: &str,
    reason: &'a str,
    actor_email: &'a str,
) -> Result<StatusChange<'a>, PageError> {
    let status = FindingStatus::parse(form.get(status_field)).ok_or_else(|| {
        PageError::BadRequest(format!(
            "{status_field}: must be one of {}",
            FindingStatus::names().join(", ")
        ))
    })?;
    let until = match form.opt("until") {
        Some(d) if status == FindingStatus::AcceptedRisk => {
            Some(crate::contract::date("until", d)?)
        }
        _ => None,
    };
    Ok(StatusChange {
        status,
        until,
        reason,
        actor_email,
    })
}

/// Bulk triage: one request for every checked row; answers the findings
/// block as it now stands, with the same filters.
#[handler]
pub async fn triage(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(target_id): Path<Uuid>,
    Query(filters): Query<FindingsQuery>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let ids: Vec<Uuid> = form
        .all("finding")
        .map(|v| Uuid::parse_str(v).map_err(|_| PageError::NotFound))
        .collect::<Result<_, _>>()?;
    let reason = reason_of("reason", form.opt("reason"))?;
    let notice = if ids.is_empty() {
        "Select findings first.".to_string()
    } else {
        let change = change_of(&form, "action", &reason, &me.user.email)?;
        let done =
            scanfleet_core::triage::set_statuses(&state.core, me.user.id, &ids, &change).await?;
        format!(
            "{} finding{} marked {}.",
            done.len(),
            if done.len() == 1 { "" } else { "s" },
            status_label(change.status).to_lowercase()
        )
    };
    let block = findings_block(
        &state,
        me.user.id,
        target_id,
        filters,
        &me.csrf_token,
        Some(notice),
    )
    .await?;
    let mut resp = page::html(&block)?;
    resp.headers_mut()
        .insert("hx-push-url", poem::http::HeaderValue::from_static("false"));
    Ok(resp)
}

/// Inline status change of one row: answers the row.
#[handler]
pub async fn row_status(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path((target_id, finding_id)): Path<(Uuid, Uuid)>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = form::read(body).await;
    let change = change_of(&form, "status", "", &me.user.email)?;
    let rows =
        scanfleet_core::triage::set_statuses(&state.core, me.user.id, &[finding_id], &change)
            .await?;
    let db = state.db.get().await?;
    let row = fingerprints::row_of_finding(&**db, me.user.id, finding_id)
        .await?
        .filter(|r| r.target_id == target_id && !rows.is_empty())
        .ok_or(PageError::NotFound)?;
    let line = FindingLine::of(row);
    page::html(&RowBlock { line })
}

#[derive(Deserialize)]
pub struct ExportQuery {
    #[serde(flatten)]
    filters: FindingsQuery,
    #[serde(default)]
    format: String,
}

/// Exactly the filtered list (every page of it) as CSV or JSON.
#[handler]
pub async fn export(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(target_id): Path<Uuid>,
    Query(q): Query<ExportQuery>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let filter = q.filters.filter()?;
    let db = state.db.get().await?;
    let mut rows = Vec::new();
    loop {
        let (page_rows, total) = fingerprints::list_for_target(
            &db,
            me.user.id,
            target_id,
            &filter,
            (500, rows.len() as i64),
        )
        .await?
        .ok_or(PageError::NotFound)?;
        let done = page_rows.is_empty();
        rows.extend(page_rows);
        if done || rows.len() as i64 >= total {
            break;
        }
    }
    let lines: Vec<FindingLine> = rows.into_iter().map(FindingLine::of).collect();
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let (body, kind, ext) = match q.format.as_str() {
        "json" => (export_json(&lines), "application/json", "json"),
        "csv" | "" => (export_csv(&lines), "text/csv; charset=utf-8", "csv"),
        _ => {
            return Err(PageError::BadRequest(
                "format: must be csv or json".to_string(),
            ))
        }
    };
    Ok(Response::builder()
        .content_type(kind)
        .header(
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"findings-{target_id}-{stamp}.{ext}\""),
        )
        .body(body))
}

fn export_json(lines: &[FindingLine]) -> String {
    let items: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| {
            let r = &l.row;
            serde_json::json!({
                "id": r.id, "finding_id": r.last_finding_id, "fingerprint": r.fingerprint,
                "template_id": r.template_id, "name": r.name, "severity": r.severity.as_str(),
                "host": r.host, "matched_at": r.matched_at, "status": r.status.as_str(),
                "until": r.accepted_until, "state": r.state, "change": l.change,
                "first_seen_at": r.first_seen_at, "last_seen_at": r.last_seen_at,
                "fixed_at": r.fixed_at, "occurrences": r.occurrences,
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

fn export_csv(lines: &[FindingLine]) -> String {
    let mut out = String::from(
        "finding_id,fingerprint,template_id,name,severity,host,matched_at,status,until,state,change,first_seen_at,last_seen_at,occurrences\n",
    );
    for l in lines {
        let r = &l.row;
        let cells = [
            r.last_finding_id.map(|i| i.to_string()).unwrap_or_default(),
            r.fingerprint.clone(),
            r.template_id.clone(),
            r.name.clone(),
            r.severity.as_str().to_string(),
            r.host.clone(),
            r.matched_at.clone(),
            r.status.as_str().to_string(),
            r.accepted_until.map(|d| d.to_string()).unwrap_or_default(),
            r.state.clone(),
            l.change.to_string(),
            r.first_seen_at.to_rfc3339(),
            r.last_seen_at.to_rfc3339(),
            r.occurrences.to_string(),
        ];
        let cells: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// One CSV cell: quoted when needed, and a leading `=`, `+`, `-` or `@`
/// defused so a spreadsheet never reads scanned text as a formula.
fn csv_cell(v: &str) -> String {
    let v = if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{v}")
    } else {
        v.to_string()
    };
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}
