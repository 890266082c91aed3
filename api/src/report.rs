//! Scan reports: HTML, SARIF 2.1.0, CSV (RFC 4180) and PDF renderings of one
//! scan and its findings (the JSON report is an OpenAPI object of the scan
//! routes). Pure functions of the data: no I/O, no clock.
//!
//! The PDF writer is deliberately tiny (one standard font, text lines,
//! pages): a report is a list of findings, and a layout engine would be a
//! heavy dependency for that.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use scanfleet_common::Severity;
use serde_json::{json, Value};

use crate::store::findings::FindingRow;
use crate::store::scans::ScanRow;

/// The scanner's name in reports (the SARIF tool, the detail shape's `tool`).
pub const TOOL_NAME: &str = "scanfleet-templates";

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
}

/// What every report shows.
pub struct ReportData<'a> {
    pub scan: &'a ScanRow,
    pub findings: &'a [FindingRow],
    pub generated_at: DateTime<Utc>,
}

impl ReportData<'_> {
    /// Findings by severity (critical first), then in the order found.
    fn sorted(&self) -> Vec<&FindingRow> {
        let mut v: Vec<&FindingRow> = self.findings.iter().collect();
        v.sort_by_key(|f| f.severity.rank());
        v
    }

    fn counts(&self) -> [usize; 5] {
        let mut c = [0; 5];
        for f in self.findings {
            c[f.severity.rank() as usize] += 1;
        }
        c
    }
}

fn ts(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_else(|| "-".to_string())
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub fn html(data: &ReportData<'_>) -> String {
    let s = data.scan;
    let counts = data.counts();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Scan report: {domain}</title>\n<style>\n\
         body{{font-family:system-ui,sans-serif;margin:2rem;color:#222}}\
         table{{border-collapse:collapse;width:100%}}\
         th,td{{border:1px solid #ccc;padding:.35rem .5rem;text-align:left;vertical-align:top}}\
         th{{background:#f3f3f3}}.critical{{color:#8b0000}}.high{{color:#c0392b}}\
         .medium{{color:#d35400}}.low{{color:#2c3e50}}.info{{color:#555}}\n\
         </style>\n</head>\n<body>\n<h1>Scan report: {domain}</h1>\n<table>\n\
         <tr><th>Scan</th><td>{id}</td></tr>\n<tr><th>Engine</th><td>{engine}</td></tr>\n\
         <tr><th>Status</th><td>{status}</td></tr>\n<tr><th>Created</th><td>{created}</td></tr>\n\
         <tr><th>Started</th><td>{started}</td></tr>\n<tr><th>Completed</th><td>{completed}</td></tr>\n\
         <tr><th>Generated</th><td>{generated}</td></tr>\n</table>\n<h2>Summary</h2>\n<table>\n\
         <tr><th>Total</th><th>Critical</th><th>High</th><th>Medium</th><th>Low</th><th>Info</th></tr>\n\
         <tr><td>{total}</td><td>{c0}</td><td>{c1}</td><td>{c2}</td><td>{c3}</td><td>{c4}</td></tr>\n\
         </table>\n<h2>Findings</h2>\n",
        domain = html_escape(&s.domain),
        id = s.id,
        engine = s.engine.as_str(),
        status = s.status.as_str(),
        created = ts(Some(s.created_at)),
        started = ts(s.started_at),
        completed = ts(s.completed_at),
        generated = ts(Some(data.generated_at)),
        total = data.findings.len(),
        c0 = counts[0],
        c1 = counts[1],
        c2 = counts[2],
        c3 = counts[3],
        c4 = counts[4],
    );
    if data.findings.is_empty() {
        out.push_str("<p>No findings.</p>\n");
    } else {
        out.push_str(
            "<table>\n<tr><th>Severity</th><th>Name</th><th>Template</th><th>Host</th>\
             <th>Matched at</th><th>Status</th><th>Description</th><th>Remediation</th></tr>\n",
        );
        for f in data.sorted() {
            let _ = writeln!(
                out,
                "<tr><td class=\"{sev}\">{sev}</td><td>{name}</td><td>{tpl}</td><td>{host}</td>\
                 <td>{at}</td><td>{status}</td><td>{desc}</td><td>{rem}</td></tr>",
                sev = f.severity.as_str(),
                name = html_escape(&f.name),
                tpl = html_escape(&f.template_id),
                host = html_escape(&f.host),
                at = html_escape(&f.matched_at),
                status = html_escape(&f.status),
                desc = html_escape(&f.description),
                rem = html_escape(&f.remediation),
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn sarif_level(s: Severity) -> &'static str {
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

/// SARIF 2.1.0: one run, one rule per template, one result per finding.
pub fn sarif(data: &ReportData<'_>) -> Value {
    let mut rule_index: Vec<(&str, usize)> = Vec::new();
    let mut rules = Vec::new();
    let mut results = Vec::new();
    for f in data.sorted() {
        let index = match rule_index.iter().find(|(id, _)| *id == f.template_id) {
            Some((_, i)) => *i,
            None => {
                let i = rules.len();
                rule_index.push((&f.template_id, i));
                rules.push(json!({
                    "id": f.template_id,
                    "name": f.name,
                    "shortDescription": {"text": f.name},
                    "fullDescription": {"text": if f.description.is_empty() { &f.name } else { &f.description }},
                    "help": {"text": if f.remediation.is_empty() { "No remediation provided." } else { &f.remediation }},
                    "defaultConfiguration": {"level": sarif_level(f.severity)},
                    "properties": {
                        "security-severity": security_severity(f.severity),
                        "severity": f.severity.as_str(),
                        "tags": ["security"],
                    },
                }));
                i
            }
        };
        results.push(json!({
            "ruleId": f.template_id,
            "ruleIndex": index,
            "level": sarif_level(f.severity),
            "message": {"text": format!("{} at {}", f.name, f.matched_at)},
            "locations": [{
                "physicalLocation": {"artifactLocation": {"uri": f.matched_at}},
            }],
            "partialFingerprints": {"dedupKey/v1": format!("{}:{}", f.template_id, f.matched_at)},
            "properties": {
                "findingId": f.id,
                "severity": f.severity.as_str(),
                "status": f.status,
                "host": f.host,
            },
        }));
    }
    let s = data.scan;
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": TOOL_NAME,
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/scanfleet/scanfleet",
                "rules": rules,
            }},
            "invocations": [{
                "executionSuccessful": s.status.as_str() == "completed",
                "startTimeUtc": s.started_at,
                "endTimeUtc": s.completed_at,
            }],
            "properties": {
                "scanId": s.id,
                "domain": s.domain,
                "engine": s.engine.as_str(),
                "status": s.status.as_str(),
                "generatedAt": data.generated_at,
            },
            "results": results,
        }],
    })
}

/// One RFC 4180 field: quoted when it holds a comma, quote or line break,
/// quotes doubled. A leading `=`, `+`, `-`, `@` gets a `'` so spreadsheet
/// programs do not run it as a formula (finding text comes from scanned
/// sites).
fn csv_field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if value.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

pub const CSV_HEADER: [&str; 12] = [
    "id",
    "scan_id",
    "domain",
    "template_id",
    "name",
    "severity",
    "status",
    "host",
    "matched_at",
    "description",
    "remediation",
    "created_at",
];

/// RFC 4180: a header line, one line per finding, CRLF line ends.
pub fn csv(data: &ReportData<'_>) -> String {
    let mut out = CSV_HEADER.join(",");
    out.push_str("\r\n");
    for f in data.sorted() {
        let fields = [
            f.id.to_string(),
            f.scan_id.to_string(),
            data.scan.domain.clone(),
            f.template_id.clone(),
            f.name.clone(),
            f.severity.as_str().to_string(),
            f.status.clone(),
            f.host.clone(),
            f.matched_at.clone(),
            f.description.clone(),
            f.remediation.clone(),
            ts(Some(f.created_at)),
        ];
        let line: Vec<String> = fields.iter().map(|v| csv_field(v)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

/// The report as plain text lines, for the PDF.
fn text_lines(data: &ReportData<'_>) -> Vec<String> {
    let s = data.scan;
    let c = data.counts();
    let mut lines = vec![
        format!("Scan report: {}", s.domain),
        String::new(),
        format!("Scan:       {}", s.id),
        format!("Engine:     {}", s.engine.as_str()),
        format!("Status:     {}", s.status.as_str()),
        format!("Created:    {}", ts(Some(s.created_at))),
        format!("Started:    {}", ts(s.started_at)),
        format!("Completed:  {}", ts(s.completed_at)),
        format!("Generated:  {}", ts(Some(data.generated_at))),
        String::new(),
        format!(
            "Findings: {} (critical {}, high {}, medium {}, low {}, info {})",
            data.findings.len(),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4]
        ),
        String::new(),
    ];
    if data.findings.is_empty() {
        lines.push("No findings.".into());
    }
    for (n, f) in data.sorted().into_iter().enumerate() {
        lines.push(format!(
            "{}. [{}] {}",
            n + 1,
            f.severity.as_str().to_uppercase(),
            f.name
        ));
        lines.push(format!(
            "   Template: {}   Status: {}",
            f.template_id, f.status
        ));
        lines.push(format!("   Host: {}", f.host));
        lines.push(format!("   Matched at: {}", f.matched_at));
        if !f.description.is_empty() {
            lines.push(format!("   Description: {}", f.description));
        }
        if !f.remediation.is_empty() {
            lines.push(format!("   Remediation: {}", f.remediation));
        }
        lines.push(String::new());
    }
    lines
}

const PDF_WRAP: usize = 95;
const PDF_LINES_PER_PAGE: usize = 60;

/// Wraps at `width` characters, breaking at spaces when it can.
fn wrap(line: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= width {
        return vec![line.to_string()];
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < chars.len() {
        let mut end = (start + width).min(chars.len());
        if end < chars.len() {
            if let Some(space) = chars[start..end].iter().rposition(|c| *c == ' ') {
                if space > width / 2 {
                    end = start + space + 1;
                }
            }
        }
        let piece: String = chars[start..end].iter().collect();
        out.push(if out.is_empty() {
            piece
        } else {
            format!("      {}", piece.trim_start())
        });
        start = end;
    }
    out
}

/// A PDF string literal in the standard font's encoding: printable ASCII,
/// with `\`, `(` and `)` escaped; anything else becomes `?`.
fn pdf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('(');
    for c in text.chars() {
        match c {
            '\\' | '(' | ')' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push(')');
    out
}

/// A PDF 1.4 document of the report: A4 pages of Courier text.
pub fn pdf(data: &ReportData<'_>) -> Vec<u8> {
    let lines: Vec<String> = text_lines(data)
        .iter()
        .flat_map(|l| wrap(l, PDF_WRAP))
        .collect();
    let pages: Vec<&[String]> = lines.chunks(PDF_LINES_PER_PAGE).collect();
    let page_count = pages.len().max(1);

    // Object numbers: 1 catalog, 2 page tree, 3 font, then per page i:
    // 4 + 2i the page, 5 + 2i its content stream.
    let mut objects: Vec<Vec<u8>> = Vec::new();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    let kids: Vec<String> = (0..page_count)
        .map(|i| format!("{} 0 R", 4 + 2 * i))
        .collect();
    objects.push(
        format!(
            "<< /Type /Pages /Kids [{}] /Count {page_count} >>",
            kids.join(" ")
        )
        .into_bytes(),
    );
    objects.push(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>".to_vec(),
    );
    for i in 0..page_count {
        let body: &[String] = pages.get(i).copied().unwrap_or(&[]);
        let mut content = String::from("BT\n/F1 9 Tf\n11 TL\n40 800 Td\n");
        for line in body {
            content.push_str(&pdf_string(line));
            content.push_str(" Tj T*\n");
        }
        let _ = write!(
            content,
            "ET\nBT\n/F1 8 Tf\n40 30 Td\n{} Tj\nET\n",
            pdf_string(&format!("Page {} of {}", i + 1, page_count))
        );
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] \
                 /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * i
            )
            .into_bytes(),
        );
        let mut stream = format!("<< /Length {} >>\nstream\n", content.len()).into_bytes();
        stream.extend_from_slice(content.as_bytes());
        stream.extend_from_slice(b"\nendstream");
        objects.push(stream);
    }

    let mut out: Vec<u8> = b"%PDF-1.4\n%\xE2\xE3\xCF\xD3\n".to_vec();
    let mut offsets = Vec::with_capacity(objects.len());
    for (n, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", n + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref_at = out.len();
    let mut xref = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for off in offsets {
        // Each entry is exactly 20 bytes: the space before the newline counts.
        let _ = writeln!(xref, "{off:010} 00000 n ");
    }
    let _ = write!(
        xref,
        "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref_at}\n%%EOF\n",
        objects.len() + 1
    );
    out.extend_from_slice(xref.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_follow_rfc_4180() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
    }

    #[test]
    fn pdf_strings_escape_delimiters_and_replace_non_ascii() {
        assert_eq!(pdf_string("a(b)\\c"), "(a\\(b\\)\\\\c)");
        assert_eq!(pdf_string("é"), "(?)");
    }

    #[test]
    fn long_lines_wrap_at_spaces() {
        let line = "word ".repeat(40);
        let wrapped = wrap(line.trim_end(), 30);
        assert!(wrapped.len() > 1);
        assert!(
            wrapped.iter().all(|l| l.chars().count() <= 36),
            "{wrapped:?}"
        );
    }

    #[test]
    fn formats_parse_by_name_only() {
        for f in ["html", "json", "sarif", "csv", "pdf"] {
            assert_eq!(Format::parse(f).unwrap().extension(), f);
        }
        assert_eq!(Format::parse("xml"), None);
        assert_eq!(Format::parse("PDF"), None);
    }
}
