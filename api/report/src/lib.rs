//! Scan reports: the documents `GET /scans/{scan_id}/report` hands out, for
//! people (HTML, PDF) and for machines (JSON, SARIF 2.1.0, CSV).
//!
//! Data flow: the api's report operation -> **report** (finding rows from
//! the core's store, streamed) -> the document's bytes. It may import
//! `scanfleet-core` (rows, the store's streaming reads) and
//! `scanfleet-common`; it must not import the api: it knows no route, no
//! request and no HTTP status. `poem-openapi` is linked for one thing, the
//! JSON report, whose schema in the contract and whose writer are one
//! derive. Only the api imports it; the scheduler must not (it renders
//! nothing), and neither may the core, which it sits on.
//!
//! Findings stream from Postgres into a [`Renderer`] one row at a time
//! ([`build`]), already in the order the format shows them, so a report of
//! 10,000 findings never holds them twice (rows, then a sorted copy, then
//! the document). The summary comes from the scan's own counters, which the
//! ingester keeps with every inserted finding, and the changes since the
//! target's previous scan ([`Changes`]) from its findings' fingerprints;
//! all are read in one repeatable-read transaction so they agree even
//! while a scan is running. The HTML and PDF reports list the first few
//! new, regressed and fixed findings in their header; the SARIF report
//! streams every fixed one after the findings ([`Renderer::push_fixed`]).
//!
//! A scan that has not completed still gets its report, of what is known so
//! far, and every format says so ([`Header::partial_note`]).
//!
//! # Layout
//! - [`html`]: one self-contained page, inline CSS and SVG chart, print CSS.
//! - [`inline`]: inline code (`` `x` ``) in template texts, for HTML and PDF.
//! - [`pdf`]: A4 through krilla with the DejaVu fonts shipped in
//!   `api/report/fonts`.
//! - [`json`]: the `JsonReport` object of the OpenAPI contract.
//! - [`sarif`]: SARIF 2.1.0 for code-scanning viewers.
//! - [`sarif_schema`]: the SARIF log as the OpenAPI contract describes it.
//! - [`csv`]: RFC 4180, neutralised against spreadsheet formulas.
//! - [`coverage`]: per-host coverage (issue 35), which every format
//!   carries for a scan that has it.

pub mod coverage;
pub mod csv;
pub mod html;
pub mod inline;
pub mod json;
pub mod pdf;
pub mod sarif;
pub mod sarif_schema;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::TryStreamExt;
use scanfleet_common::events::ScanStatus;
use tokio_postgres::GenericClient;
use uuid::Uuid;

use scanfleet_core::fingerprint::Change;
use scanfleet_core::store::findings::{self, DiffScan, FindingOrder, FindingRow};
use scanfleet_core::store::fingerprints::{self, ChangeCounts, ChangedFinding, FixedFingerprint};
use scanfleet_core::store::scans::{self, ScanRow};
use scanfleet_core::Error;

use crate::coverage::HostCoverage;

/// The scanner's name in reports (the SARIF tool, the detail shape's `tool`).
pub const TOOL_NAME: &str = "scanfleet-templates";

/// Why a report could not be rendered. Only our own assets or a renderer
/// can fail here; the data itself is always renderable.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The PDF library refused the document (a font it cannot embed, a
    /// limit of the PDF format).
    #[error("the PDF could not be written")]
    Pdf(#[from] krilla::error::KrillaError),
    /// A font shipped in `api/report/fonts` does not parse.
    #[error("the embedded font {0} does not parse")]
    Font(&'static str),
    #[error("the report could not be serialised")]
    Json(#[from] serde_json::Error),
}

/// A report that cannot be rendered is our own fault.
impl From<ReportError> for scanfleet_core::Error {
    fn from(e: ReportError) -> Self {
        scanfleet_core::Error::Unexpected(anyhow::Error::new(e))
    }
}

/// Report formats of `GET /scans/{scan_id}/report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Json,
    Sarif,
    Csv,
    Pdf,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Html,
        Format::Json,
        Format::Sarif,
        Format::Csv,
        Format::Pdf,
    ];
    pub const NAMES: &'static str = "html, json, sarif, csv, pdf";

    pub fn parse(value: &str) -> Option<Format> {
        match value {
            "html" => Some(Format::Html),
            "json" => Some(Format::Json),
            "sarif" => Some(Format::Sarif),
            "csv" => Some(Format::Csv),
            "pdf" => Some(Format::Pdf),
            _ => None,
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Format::Html => "text/html; charset=utf-8",
            Format::Json => "application/json",
            Format::Sarif => "application/sarif+json",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Pdf => "application/pdf",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Json => "json",
            Format::Sarif => "sarif",
            Format::Csv => "csv",
            Format::Pdf => "pdf",
        }
    }

    /// Whether the report has a result per fixed fingerprint after the
    /// findings (SARIF's `absent`; the HTML and PDF reports list the first
    /// few in their header, see [`Changes`]).
    pub fn lists_fixed(self) -> bool {
        self == Format::Sarif
    }

    /// Whether the format has the "Changes since the previous scan"
    /// section (for people: HTML and PDF).
    pub fn shows_changes(self) -> bool {
        matches!(self, Format::Html | Format::Pdf)
    }

    /// People read findings host by host; machines want the worst first.
    pub fn order(self) -> FindingOrder {
        match self {
            Format::Html | Format::Pdf => FindingOrder::ByHost,
            Format::Json | Format::Sarif | Format::Csv => FindingOrder::BySeverity,
        }
    }
}

/// What a report says before its first finding: the scan, when the report
/// was made and what changed since the target's previous scan.
#[derive(Debug, Clone)]
pub struct Header {
    pub scan: ScanRow,
    pub generated_at: DateTime<Utc>,
    /// `None` when not read (findings rendered from memory): the HTML and
    /// PDF reports then have no changes section.
    pub changes: Option<Changes>,
    /// What the scan covered on each live host, by host name; empty for a
    /// scan that has none (made before coverage, or still before REPORT).
    pub coverage: Vec<HostCoverage>,
}

impl Header {
    pub fn new(scan: ScanRow, generated_at: DateTime<Utc>) -> Header {
        Header {
            scan,
            generated_at,
            changes: None,
            coverage: Vec::new(),
        }
    }

    pub fn with_coverage(self, coverage: Vec<HostCoverage>) -> Header {
        Header { coverage, ..self }
    }

    /// The coverage of `host`, when the scan has it.
    pub fn coverage_of(&self, host: &str) -> Option<&HostCoverage> {
        self.coverage.iter().find(|c| c.host == host)
    }

    pub fn with_changes(self, changes: Changes) -> Header {
        Header {
            changes: Some(changes),
            ..self
        }
    }

    /// Critical, high, medium, low, info.
    pub fn counts(&self) -> [i64; 5] {
        let s = &self.scan;
        [
            s.critical_count,
            s.high_count,
            s.medium_count,
            s.low_count,
            s.info_count,
        ]
        .map(i64::from)
    }

    pub fn total(&self) -> i64 {
        self.counts().iter().sum()
    }

    /// Anything but a completed scan: still going, failed or stopped, its
    /// findings are what was found up to now.
    pub fn is_partial(&self) -> bool {
        self.scan.status != ScanStatus::Completed
    }

    /// The sentence every format shows on a partial report.
    pub fn partial_note(&self) -> Option<String> {
        let why = match self.scan.status {
            ScanStatus::Completed => return None,
            ScanStatus::Queued | ScanStatus::Pending => "has not started yet",
            ScanStatus::Running => "is still running",
            ScanStatus::Failed => "failed before it finished",
            ScanStatus::Stopped => "was stopped before it finished",
        };
        Some(format!(
            "Partial report: the scan {why}; it shows the findings known at {}.",
            timestamp(Some(self.generated_at))
        ))
    }

    /// From start to completion, or to now for a running scan.
    pub fn duration(&self) -> Option<chrono::Duration> {
        let start = self.scan.started_at?;
        let end = self.scan.completed_at.unwrap_or(self.generated_at);
        Some(end - start)
    }

    pub fn duration_text(&self) -> String {
        match self.duration() {
            None => "-".to_string(),
            Some(d) => {
                let secs = d.num_seconds().max(0);
                let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
                match (h, m) {
                    (0, 0) => format!("{s} s"),
                    (0, _) => format!("{m} min {s} s"),
                    _ => format!("{h} h {m} min"),
                }
            }
        }
    }

    /// `scanfleet-<domain>-<YYYY-MM-DD>[-partial].<ext>`: the ASCII form
    /// of the domain (an IDN as punycode), so the header needs no encoding.
    pub fn file_name(&self, format: Format) -> String {
        let ascii =
            idna::domain_to_ascii(&self.scan.domain).unwrap_or_else(|_| self.scan.domain.clone());
        let domain: String = ascii
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect();
        format!(
            "scanfleet-{domain}-{}{}.{}",
            self.generated_at.format("%Y-%m-%d"),
            if self.is_partial() { "-partial" } else { "" },
            format.extension()
        )
    }
}

/// How many entries each list of the changes section shows; the counts
/// above them are complete, and the SARIF report has every fixed one.
pub const CHANGE_LIST_LIMIT: i64 = 50;

/// What changed since the target's previous completed scan, as the HTML and
/// PDF reports show it: the counts, and the first [`CHANGE_LIST_LIMIT`] new,
/// regressed and fixed findings, worst first.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// The latest completed scan of the target created before this one;
    /// `None` for its first.
    pub previous: Option<DiffScan>,
    /// New, recurring and regressed findings so far; fixed ones are
    /// counted when the scan completes (0 before).
    pub counts: ChangeCounts,
    /// The lists are read only when there is a previous scan: without one
    /// there is nothing to compare with, and the findings section has them.
    pub new: Vec<ChangedFinding>,
    pub regressed: Vec<ChangedFinding>,
    pub fixed: Vec<ChangedFinding>,
}

impl Changes {
    /// Reads the changes of `scan` (call it in the report's transaction).
    pub async fn read(db: &impl GenericClient, scan: &ScanRow) -> Result<Changes, Error> {
        // The scan before it whatever its engine: the scan's changes are
        // against everything the target's earlier scans found.
        let previous = findings::previous_completed(db, &DiffScan::from(scan), None).await?;
        let counts = fingerprints::changes_so_far(db, scan.id).await?;
        let mut changes = Changes {
            previous,
            counts,
            ..Changes::default()
        };
        if changes.previous.is_none() {
            return Ok(changes);
        }
        changes.new =
            fingerprints::changed_findings(db, scan.id, Change::New, CHANGE_LIST_LIMIT).await?;
        changes.regressed =
            fingerprints::changed_findings(db, scan.id, Change::Regressed, CHANGE_LIST_LIMIT)
                .await?;
        let fixed =
            fingerprints::stream_fixed_by_scan(db, scan.id, Some(CHANGE_LIST_LIMIT)).await?;
        changes.fixed = fixed
            .map_ok(|f| ChangedFinding::from(&f))
            .try_collect()
            .await?;
        Ok(changes)
    }

    /// The sentence naming the scan compared with.
    pub fn previous_text(&self) -> String {
        match &self.previous {
            Some(p) => format!(
                "Compared with the target's previous completed scan, a {} scan completed at {}.",
                p.engine.as_str(),
                timestamp(p.completed_at.or(Some(p.created_at)))
            ),
            None => {
                "First scan of this target: there is no earlier completed scan to compare with."
                    .to_string()
            }
        }
    }

    /// The sentence on what is not known yet; `None` for a completed scan.
    pub fn pending_note(status: ScanStatus) -> Option<&'static str> {
        match status {
            ScanStatus::Completed => None,
            ScanStatus::Queued | ScanStatus::Pending | ScanStatus::Running => Some(
                "Fixed findings are counted when the scan completes; new and regressed \
                 ones are those found so far.",
            ),
            ScanStatus::Failed | ScanStatus::Stopped => Some(
                "The scan did not complete, so it marks no finding fixed; new and \
                 regressed ones are those it found.",
            ),
        }
    }

    /// `(label, count)` of the changes section, fixed `None` until the
    /// scan completes.
    pub fn figures(&self, status: ScanStatus) -> [(&'static str, Option<i32>); 4] {
        let c = &self.counts;
        let fixed = (status == ScanStatus::Completed).then_some(c.fixed);
        [
            ("new", Some(c.new)),
            ("regressed", Some(c.regressed)),
            ("fixed", fixed),
            ("recurring", Some(c.recurring)),
        ]
    }

    /// The lists with their headings and full counts, in the order shown.
    pub fn lists(&self) -> [(&'static str, &[ChangedFinding], i32); 3] {
        [
            ("New", &self.new, self.counts.new),
            ("Regressed", &self.regressed, self.counts.regressed),
            ("Fixed", &self.fixed, self.counts.fixed),
        ]
    }
}

/// A host as people read it: an IDN (stored in its ASCII form,
/// `xn--e1afmkfd.xn--p1ai`) in Unicode with the ASCII form after it,
/// anything else as it is.
pub fn display_host(host: &str) -> String {
    if !host.contains("xn--") {
        return host.to_string();
    }
    match idna::domain_to_unicode(host) {
        (unicode, Ok(())) if unicode != host => format!("{unicode} ({host})"),
        _ => host.to_string(),
    }
}

/// RFC 3339 in UTC to the second, `-` when absent.
pub fn timestamp(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_else(|| "-".to_string())
}

/// Names of the severities in rank order, for headings and charts.
pub const SEVERITY_LABELS: [&str; 5] = ["Critical", "High", "Medium", "Low", "Info"];

/// A report being written: findings go in one at a time, in the format's
/// [`Format::order`], and the document comes out at the end.
///
/// Not `Send`: krilla's document is not, so a renderer is made and used on
/// one thread ([`build`] makes it on the blocking thread that renders).
pub trait Renderer {
    fn push(&mut self, finding: &FindingRow) -> Result<(), ReportError>;
    /// A fingerprint the scan fixed, after the last finding; only the
    /// formats of [`Format::lists_fixed`] get them.
    fn push_fixed(&mut self, _fixed: &FixedFingerprint) -> Result<(), ReportError> {
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<Vec<u8>, ReportError>;
}

/// The renderer of `format` for the scan in `header`.
pub fn renderer(format: Format, header: Header) -> Result<Box<dyn Renderer>, ReportError> {
    Ok(match format {
        Format::Html => Box::new(html::HtmlRenderer::new(header)),
        Format::Json => Box::new(json::JsonRenderer::new(header)),
        Format::Sarif => Box::new(sarif::SarifRenderer::new(header)),
        Format::Csv => Box::new(csv::CsvRenderer::new(header)),
        Format::Pdf => Box::new(pdf::PdfRenderer::new(header)?),
    })
}

/// Renders findings already in memory (benchmarks, unit tests); they must
/// be in `format.order()`.
pub fn render<'a>(
    format: Format,
    header: Header,
    findings: impl IntoIterator<Item = &'a FindingRow>,
) -> Result<Vec<u8>, ReportError> {
    let mut r = renderer(format, header)?;
    for f in findings {
        r.push(f)?;
    }
    r.finish()
}

/// A rendered report with what its response headers need.
pub struct Rendered {
    pub header: Header,
    pub body: Vec<u8>,
}

/// Rows on their way from Postgres to the renderer, in batches.
enum Batch {
    Findings(Vec<FindingRow>),
    Fixed(Vec<FixedFingerprint>),
}

/// Rows per hand-over: a hand-over per row cost more thread wake-ups than
/// rendering some rows.
const BATCH: usize = 128;

/// Reads the user's scan and streams its findings into the renderer of
/// `format`, in one read-only repeatable-read transaction (the counters on
/// the cover, the changes since the previous scan and the rows below agree
/// even while the ingester writes).
///
/// Rendering is CPU work (shaping and subsetting for the PDF above all), so
/// it runs on a blocking thread; rows reach it through a bounded channel as
/// Postgres sends them. `NotFound` when the scan is not the user's.
#[tracing::instrument(skip_all, fields(scan_id = %scan_id, format = format.extension()))]
pub async fn build(
    db: &mut deadpool_postgres::Client,
    user_id: Uuid,
    scan_id: Uuid,
    format: Format,
    generated_at: DateTime<Utc>,
) -> Result<Rendered, Error> {
    let tx = db
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let scan = scans::find(&tx, user_id, scan_id)
        .await?
        .ok_or(Error::NotFound("scan"))?;
    let coverage = scanfleet_core::store::coverage::of_scan(&*tx, scan_id).await?;
    let mut header = Header::new(scan, generated_at)
        .with_coverage(coverage.into_iter().map(HostCoverage::from).collect());
    if format.shows_changes() {
        let changes = Changes::read(&*tx, &header.scan).await?;
        header = header.with_changes(changes);
    }
    // Who sends: this task, rows in batches of `BATCH` as Postgres streams
    // them. Who drops: this task after the last batch (closing tells the
    // renderer the rows are complete), or the renderer when it fails (the
    // send then errs and the streams stop early; the error comes from
    // `join`).
    let (rows_tx, mut rows_rx) = tokio::sync::mpsc::channel::<Batch>(4);
    let for_renderer = header.clone();
    let render = tokio::task::spawn_blocking(move || {
        let mut renderer = renderer(format, for_renderer)?;
        while let Some(batch) = rows_rx.blocking_recv() {
            match batch {
                Batch::Findings(rows) => rows.iter().try_for_each(|f| renderer.push(f))?,
                Batch::Fixed(rows) => rows.iter().try_for_each(|f| renderer.push_fixed(f))?,
            }
        }
        renderer.finish()
    });
    let findings = findings::stream_for_scan(&*tx, scan_id, format.order()).await?;
    let open = send_batches(findings, &rows_tx, Batch::Findings).await?;
    if open && format.lists_fixed() {
        let fixed = fingerprints::stream_fixed_by_scan(&*tx, scan_id, None).await?;
        send_batches(fixed, &rows_tx, Batch::Fixed).await?;
    }
    drop(rows_tx);
    let body = render
        .await
        .map_err(|e| Error::Unexpected(anyhow::Error::new(e).context("report renderer")))??;
    tx.commit().await?;
    Ok(Rendered { header, body })
}

/// Sends `rows` to the renderer in batches; answers whether the renderer
/// still listens (when it failed, `join` reports why).
async fn send_batches<T>(
    rows: impl futures::Stream<Item = Result<T, Error>>,
    to: &tokio::sync::mpsc::Sender<Batch>,
    wrap: fn(Vec<T>) -> Batch,
) -> Result<bool, Error> {
    let mut rows = std::pin::pin!(rows);
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(row) = rows.try_next().await? {
        batch.push(row);
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if to.send(wrap(full)).await.is_err() {
                return Ok(false);
            }
        }
    }
    if batch.is_empty() {
        return Ok(true);
    }
    Ok(to.send(wrap(batch)).await.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idn_hosts_are_shown_in_unicode_with_their_ascii_form() {
        assert_eq!(
            display_host("xn--e1afmkfd.xn--p1ai"),
            "пример.рф (xn--e1afmkfd.xn--p1ai)"
        );
        assert_eq!(display_host("example.com"), "example.com");
    }

    #[test]
    fn formats_parse_by_name_only() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.extension()), Some(f));
        }
        assert_eq!(Format::parse("xml"), None);
        assert_eq!(Format::parse("PDF"), None);
    }
}
