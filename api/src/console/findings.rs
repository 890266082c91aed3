//! A finding: what was found, where, the evidence the scan kept (as text,
//! never as markup: the scanned site wrote it), its status history, and a
//! retest.

use askama::Template;
use poem::handler;
use poem::web::{Data, Path};
use uuid::Uuid;

use super::page::{self, Chrome, FormErrors, PageError, PageResult, Visitor};
use super::targets::{options, status_choices, status_label, Opt};
use crate::state::AppState;
use scanfleet_core::store::findings::{self, FindingRow, HistoryEntry};
use scanfleet_core::store::fingerprints::{self, FingerprintRow};

/// A run of a description: plain text, or `inline code` (the templates'
/// backticks), rendered as `<code>`.
pub struct Span {
    pub code: bool,
    pub text: String,
}

/// Splits `text` at backticks into text and code spans.
pub fn spans(text: &str) -> Vec<Span> {
    text.split('`')
        .enumerate()
        .filter(|(_, t)| !t.is_empty())
        .map(|(i, t)| Span {
            code: i % 2 == 1,
            text: t.to_string(),
        })
        .collect()
}

pub struct HistoryLine {
    pub entry: HistoryEntry,
}

impl HistoryLine {
    // `from` is the status the finding changed from, not a conversion (the
    // template names it; the lint fires since the module is no longer
    // exported).
    #[allow(clippy::wrong_self_convention)]
    pub fn from_label(&self) -> &'static str {
        status_label(self.entry.from_status)
    }
    pub fn to_label(&self) -> &'static str {
        status_label(self.entry.to_status)
    }
}

#[derive(Template)]
#[template(path = "finding.html")]
struct FindingPage {
    chrome: Chrome,
    finding: FindingRow,
    target_id: Option<Uuid>,
    fingerprint: Option<FingerprintRow>,
    description: Vec<Span>,
    remediation: Vec<Span>,
    history: Vec<HistoryLine>,
    detail: findings::FindingDetail,
    status_opts: Vec<Opt>,
    status_label: &'static str,
    retest_error: Option<String>,
}

async fn finding_page(
    state: &AppState,
    visitor: &Visitor,
    finding_id: Uuid,
    retest_error: Option<String>,
) -> PageResult {
    let me = page::signed(visitor)?;
    let db = state.db.get().await?;
    let (finding, detail) = findings::find_with_detail(&**db, me.user.id, finding_id)
        .await?
        .ok_or(PageError::NotFound)?;
    let fingerprint = fingerprints::row_of_finding(&**db, me.user.id, finding_id).await?;
    let history = findings::status_history(&**db, me.user.id, finding_id)
        .await?
        .unwrap_or_default();
    let chrome = Chrome::load(state, me, "targets").await?;
    page::form_page(
        &FindingPage {
            chrome,
            target_id: fingerprint.as_ref().map(|f| f.target_id),
            description: spans(&finding.description),
            remediation: spans(&finding.remediation),
            history: history
                .into_iter()
                .map(|entry| HistoryLine { entry })
                .collect(),
            status_opts: options(&status_choices(), finding.status.as_str()),
            status_label: status_label(finding.status),
            fingerprint,
            finding,
            detail,
            retest_error: retest_error.clone(),
        },
        retest_error.is_some(),
    )
}

#[handler]
pub async fn show(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(finding_id): Path<Uuid>,
) -> PageResult {
    finding_page(&state, &visitor, finding_id, None).await
}

#[handler]
pub async fn set_status(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(finding_id): Path<Uuid>,
    body: poem::Body,
) -> PageResult {
    let me = page::signed(&visitor)?;
    let form = super::form::read(body).await;
    let reason = crate::routes::findings::reason_of("reason", form.opt("reason"))?;
    let change = super::targets::change_of(&form, "status", &reason, &me.user.email)?;
    scanfleet_core::triage::set_statuses(&state.core, me.user.id, &[finding_id], &change).await?;
    Ok(page::redirect(&format!("/findings/{finding_id}")))
}

#[handler]
pub async fn retest(
    state: Data<&AppState>,
    visitor: Data<&Visitor>,
    Path(finding_id): Path<Uuid>,
) -> PageResult {
    let me = page::signed(&visitor)?;
    match scanfleet_core::retest::start_retest(&state.core, &me.user, finding_id).await {
        Ok(scan) => Ok(page::redirect(&format!("/scans/{}", scan.id))),
        Err(e) => {
            let errors = FormErrors::from_error(e.into())?;
            finding_page(&state, &visitor, finding_id, Some(errors.all().join(" "))).await
        }
    }
}
