//! `/scans/{scan_id}/report`: a scan's report in any format (`?format=`),
//! and one operation per format (`/report/html`, `/report/json`,
//! `/report/sarif`, `/report/csv`, `/report/pdf`).
//!
//! Why both: an OpenAPI response lists its media types, and a generator
//! gives an operation one answer type. Under one operation, five media
//! types made generated clients read every report as the first JSON one
//! (openapi-python-client failed on HTML, CSV, PDF and SARIF). Each
//! per-format operation declares exactly what it returns (text, the
//! `JsonReport` and `SarifLog` objects, PDF bytes), so a client gets a
//! `str`, a model or `bytes`. The `?format=` operation stays for the clients
//! and links that use it; its JSON answers carry no schema in the document
//! ([`any_format_answers_are_untyped`]), so generators hand its body over
//! as it came instead of parsing HTML as JSON.

use std::marker::PhantomData;

use chrono::Utc;
use poem::http::header;
use poem::web::Data;
use poem::{IntoResponse, Request, Response};
use poem_openapi::param::{Path, Query};
use poem_openapi::registry::{
    MetaHeader, MetaMediaType, MetaResponse, MetaResponses, MetaSchema, MetaSchemaRef, Registry,
};
use poem_openapi::types::Type;
use poem_openapi::{ApiResponse, OpenApi};
use serde_json::Value;
use uuid::Uuid;

use super::ApiTags;
use crate::auth::{Caller, CanRead, Identity};
use crate::contract::ReportFormatName;
use crate::error::{Error, Result};
use crate::state::AppState;
use scanfleet_core::scans::upgrade_prompt;
use scanfleet_core::store::tiers;
use scanfleet_report::json::JsonReport;
use scanfleet_report::sarif_schema::SarifLog;
use scanfleet_report::{self as report, Format, Rendered};

/// What a PDF is sent as to a client that asks for `application/octet-stream`
/// and not for `application/pdf` (generators that return bytes only for
/// that media type ask for it).
const OCTET_STREAM: &str = "application/octet-stream";

/// A rendered report with its media type and file name.
pub struct ReportResponse {
    format: Format,
    media_type: &'static str,
    rendered: Rendered,
}

impl ReportResponse {
    /// A report sent as its format's media type.
    pub fn new(format: Format, rendered: Rendered) -> ReportResponse {
        ReportResponse {
            format,
            media_type: format.media_type(),
            rendered,
        }
    }
}

impl IntoResponse for ReportResponse {
    fn into_response(self) -> Response {
        Response::builder()
            .content_type(self.media_type)
            .header(
                "Content-Disposition",
                format!(
                    "attachment; filename=\"{}\"",
                    self.rendered.header.file_name(self.format)
                ),
            )
            .header(
                "X-Report-Partial",
                self.rendered.header.is_partial().to_string(),
            )
            .body(self.rendered.body)
    }
}

fn text_schema() -> MetaSchemaRef {
    MetaSchemaRef::Inline(Box::new(MetaSchema::new("string")))
}

fn binary_schema() -> MetaSchemaRef {
    MetaSchemaRef::Inline(Box::new(MetaSchema::new_with_format("string", "binary")))
}

/// The one 200 of a report operation, with its headers.
fn report_answer(description: &'static str, content: Vec<MetaMediaType>) -> MetaResponses {
    let header = |name: &str, description: &str| MetaHeader {
        name: name.to_string(),
        description: Some(description.to_string()),
        required: true,
        deprecated: false,
        schema: String::schema_ref(),
    };
    MetaResponses {
        responses: vec![MetaResponse {
            description,
            status: Some(200),
            status_range: None,
            content,
            headers: vec![
                header(
                    "Content-Disposition",
                    "`attachment` with the file name \
                     `scanfleet-<domain>-<YYYY-MM-DD>[-partial].<format>`",
                ),
                header(
                    "X-Report-Partial",
                    "`true` when the scan has not completed and the report shows the \
                     findings known so far",
                ),
            ],
        }],
    }
}

/// A format's media type, with the schema generators read.
fn media_type(format: Format) -> MetaMediaType {
    MetaMediaType {
        content_type: format.media_type(),
        schema: match format {
            Format::Html | Format::Csv => text_schema(),
            Format::Json => JsonReport::schema_ref(),
            Format::Sarif => SarifLog::schema_ref(),
            Format::Pdf => binary_schema(),
        },
    }
}

impl ApiResponse for ReportResponse {
    fn meta() -> MetaResponses {
        report_answer(
            "The report, in the media type of the requested format. A scan that has not \
             completed gets a partial report of the findings known so far, marked so in \
             every format.",
            Format::ALL.into_iter().map(media_type).collect(),
        )
    }

    fn register(registry: &mut Registry) {
        JsonReport::register(registry);
        SarifLog::register(registry);
    }
}

/// A report format as the answer of its own operation.
pub trait FormatAnswer: Send {
    const FORMAT: Format;
}

macro_rules! format_answer {
    ($name:ident, $format:expr) => {
        pub struct $name;
        impl FormatAnswer for $name {
            const FORMAT: Format = $format;
        }
    };
}
format_answer!(HtmlAnswer, Format::Html);
format_answer!(JsonAnswer, Format::Json);
format_answer!(SarifAnswer, Format::Sarif);
format_answer!(CsvAnswer, Format::Csv);
format_answer!(PdfAnswer, Format::Pdf);

/// The report of one format: the contract declares only its media type.
pub struct FormatReport<F>(ReportResponse, PhantomData<F>);

impl<F: FormatAnswer> IntoResponse for FormatReport<F> {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

impl<F: FormatAnswer> ApiResponse for FormatReport<F> {
    fn meta() -> MetaResponses {
        let mut content = vec![media_type(F::FORMAT)];
        if F::FORMAT == Format::Pdf {
            content.push(MetaMediaType {
                content_type: OCTET_STREAM,
                schema: binary_schema(),
            });
        }
        report_answer(
            "The report. A scan that has not completed gets a partial report of the \
             findings known so far, marked so in the document and in `X-Report-Partial`.",
            content,
        )
    }

    fn register(registry: &mut Registry) {
        match F::FORMAT {
            Format::Json => JsonReport::register(registry),
            Format::Sarif => SarifLog::register(registry),
            Format::Html | Format::Csv | Format::Pdf => {}
        }
    }
}

/// Checks the user's tier and renders the report (the API and the web
/// console both serve it).
pub async fn render(
    state: &AppState,
    me: &scanfleet_core::store::users::User,
    scan_id: Uuid,
    format: Format,
) -> Result<Rendered, Error> {
    let mut db = state.db.get().await?;
    let tier = tiers::get(&**db, &me.tier_slug).await?;
    if !tier.is_some_and(|t| t.features.iter().any(|f| f == "reports")) {
        return Err(Error::UpgradeRequired {
            code: "feature_not_in_tier",
            detail: format!("reports are not part of the {} tier", me.tier_slug),
            upgrade: upgrade_prompt(
                &state.upgrade_links,
                &me.tier_slug,
                "Upgrade to Monthly Pro or Yearly Pro to download scan reports.",
            ),
        });
    }
    report::build(&mut db, me.id, scan_id, format, Utc::now()).await
}

async fn format_report<F: FormatAnswer>(
    state: &AppState,
    me: &Identity,
    scan_id: Uuid,
    media_type: &'static str,
) -> Result<FormatReport<F>> {
    let rendered = render(state, &me.user, scan_id, F::FORMAT).await?;
    Ok(FormatReport(
        ReportResponse {
            format: F::FORMAT,
            media_type,
            rendered,
        },
        PhantomData,
    ))
}

/// `application/octet-stream` when the request's `Accept` names it and not
/// `application/pdf`, else `application/pdf`.
fn pdf_media_type(req: &Request) -> &'static str {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if accept.contains(OCTET_STREAM) && !accept.contains("application/pdf") {
        OCTET_STREAM
    } else {
        Format::Pdf.media_type()
    }
}

/// The `?format=` operation's JSON media types lose their schema in the
/// document: a generator parses an operation's answer by its first JSON
/// media type, so with a schema there it would read HTML, CSV and PDF as
/// JSON. The per-format operations carry the schemas.
pub fn any_format_answers_are_untyped(spec: &mut Value) {
    let Some(content) = super::operation_mut(spec, "get_scan_report")
        .and_then(|op| op.pointer_mut("/responses/200/content"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for (media_type, entry) in content.iter_mut() {
        if media_type.ends_with("json") {
            if let Some(entry) = entry.as_object_mut() {
                entry.remove("schema");
            }
        }
    }
}

pub struct ReportsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Scans")]
impl ReportsApi {
    /// A formatted report of a scan
    ///
    /// Formats: `html` (default; one self-contained page with a severity
    /// chart, findings grouped by host), `pdf` (A4, same content), `json`
    /// (the `JsonReport` schema), `sarif` (SARIF 2.1.0, one rule per
    /// template), `csv` (RFC 4180, one row per finding). A scan that has not
    /// completed gets a partial report of what is known so far. Monthly and
    /// yearly tiers; demo gets a 403 with an upgrade prompt. Generated
    /// clients get a typed answer from the operation of each format
    /// (`/report/html`, `/report/json`, ...); this one's body is as sent.
    #[oai(
        path = "/scans/:scan_id/report",
        method = "get",
        operation_id = "get_scan_report"
    )]
    async fn get_scan_report(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
        /// `html` (default), `json`, `sarif`, `csv` or `pdf`.
        format: Query<Option<ReportFormatName>>,
    ) -> Result<ReportResponse> {
        let format = match format.0.as_deref() {
            None => Format::Html,
            Some(v) => Format::parse(v).ok_or_else(|| {
                Error::invalid("format", format!("must be one of {}", Format::NAMES))
            })?,
        };
        let rendered = render(&state, &me.user, scan_id.0, format).await?;
        Ok(ReportResponse {
            format,
            media_type: format.media_type(),
            rendered,
        })
    }

    /// The HTML report of a scan
    ///
    /// One self-contained page (inline CSS, a severity chart), findings
    /// grouped by host. Monthly and yearly tiers.
    #[oai(
        path = "/scans/:scan_id/report/html",
        method = "get",
        operation_id = "get_scan_report_html"
    )]
    async fn get_scan_report_html(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<FormatReport<HtmlAnswer>> {
        format_report(&state, &me, scan_id.0, Format::Html.media_type()).await
    }

    /// The JSON report of a scan
    ///
    /// The `JsonReport` object, findings sorted by severity. Monthly and
    /// yearly tiers.
    #[oai(
        path = "/scans/:scan_id/report/json",
        method = "get",
        operation_id = "get_scan_report_json"
    )]
    async fn get_scan_report_json(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<FormatReport<JsonAnswer>> {
        format_report(&state, &me, scan_id.0, Format::Json.media_type()).await
    }

    /// The SARIF report of a scan
    ///
    /// SARIF 2.1.0 (`application/sarif+json`), one rule per template, one
    /// result per finding with its `baselineState`, then one result of
    /// `baselineState: absent` per finding the scan fixed, for
    /// code-scanning viewers. Monthly and yearly tiers.
    #[oai(
        path = "/scans/:scan_id/report/sarif",
        method = "get",
        operation_id = "get_scan_report_sarif"
    )]
    async fn get_scan_report_sarif(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<FormatReport<SarifAnswer>> {
        format_report(&state, &me, scan_id.0, Format::Sarif.media_type()).await
    }

    /// The CSV report of a scan
    ///
    /// RFC 4180, one row per finding, cells neutralised against spreadsheet
    /// formulas. Columns: `id`, `scan_id`, `domain`, `template_id`, `name`,
    /// `severity`, `status`, `host`, `matched_at`, `description`,
    /// `remediation`, `extracted_results`, `created_at`, `scan_status`,
    /// `partial`, `change` (`new`, `recurring` or `regressed`). Monthly and
    /// yearly tiers.
    #[oai(
        path = "/scans/:scan_id/report/csv",
        method = "get",
        operation_id = "get_scan_report_csv"
    )]
    async fn get_scan_report_csv(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<FormatReport<CsvAnswer>> {
        format_report(&state, &me, scan_id.0, Format::Csv.media_type()).await
    }

    /// The PDF report of a scan
    ///
    /// A4, the HTML report's content, with page numbers. Sent as
    /// `application/pdf`, or as `application/octet-stream` to a client whose
    /// `Accept` asks for that and not for `application/pdf`. Monthly and
    /// yearly tiers.
    #[oai(
        path = "/scans/:scan_id/report/pdf",
        method = "get",
        operation_id = "get_scan_report_pdf"
    )]
    async fn get_scan_report_pdf(
        &self,
        state: Data<&AppState>,
        req: &Request,
        me: Caller<CanRead>,
        scan_id: Path<Uuid>,
    ) -> Result<FormatReport<PdfAnswer>> {
        format_report(&state, &me, scan_id.0, pdf_media_type(req)).await
    }
}
