//! The CSV report: RFC 4180 (a header line, CRLF line ends, fields quoted
//! when they hold a comma, quote or line break, quotes doubled), one row
//! per finding. A CSV has no place for a note, so every row carries the
//! scan's status and whether the report is partial, and the coverage of
//! its host (empty cells for a scan without coverage).

use super::{timestamp, Header, Renderer, ReportError};
use scanfleet_core::store::findings::FindingRow;

/// The columns, in order. `change` came last, after the columns of the
/// first version, so that sheets reading columns by position keep working:
/// `new`, `recurring` or `regressed` against the target's earlier scans
/// (empty for a finding without a fingerprint). The coverage of the
/// finding's host follows, last again: its technologies, templates run,
/// the node's template count, the skipped ones by reason
/// (`technology_absent 6010; needs_oob 467`) and the requests sent.
pub const CSV_HEADER: [&str; 21] = [
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
    "extracted_results",
    "created_at",
    "scan_status",
    "partial",
    "change",
    "host_technologies",
    "host_templates_run",
    "host_templates_total",
    "host_templates_skipped",
    "host_requests",
];

/// One field. Finding text comes from scanned sites, so a value that a
/// spreadsheet would run as a formula (leading `=`, `+`, `-`, `@`, tab or
/// carriage return) gets a leading `'`, which spreadsheets show as text.
pub fn field(out: &mut String, value: &str) {
    let neutralise = value.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let quote = value.contains([',', '"', '\r', '\n']);
    if quote {
        out.push('"');
    }
    if neutralise {
        out.push('\'');
    }
    if quote {
        for c in value.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(value);
    }
}

pub struct CsvRenderer {
    out: String,
    domain: String,
    scan_status: &'static str,
    partial: &'static str,
    /// The coverage cells of each covered host, by host name.
    coverage: std::collections::HashMap<String, [String; 5]>,
}

impl CsvRenderer {
    pub fn new(header: Header) -> CsvRenderer {
        let mut out = CSV_HEADER.join(",");
        out.push_str("\r\n");
        CsvRenderer {
            out,
            domain: header.scan.domain.clone(),
            scan_status: header.scan.status.as_str(),
            partial: if header.is_partial() { "yes" } else { "no" },
            coverage: header
                .coverage
                .iter()
                .map(|c| {
                    let cells = [
                        c.technologies_text(),
                        c.templates.run.to_string(),
                        c.templates.total.to_string(),
                        c.skipped_text().replace(", ", "; "),
                        c.requests.to_string(),
                    ];
                    (c.host.clone(), cells)
                })
                .collect(),
        }
    }
}

impl Renderer for CsvRenderer {
    fn push(&mut self, f: &FindingRow) -> Result<(), ReportError> {
        let extracted = f.extracted_results.join("; ");
        let none: [String; 5] = Default::default();
        let host = self.coverage.get(&f.host).unwrap_or(&none);
        let fields: [&str; 21] = [
            &f.id.to_string(),
            &f.scan_id.to_string(),
            &self.domain,
            &f.template_id,
            &f.name,
            f.severity.as_str(),
            f.status.as_str(),
            &f.host,
            &f.matched_at,
            &f.description,
            &f.remediation,
            &extracted,
            &timestamp(Some(f.created_at)),
            self.scan_status,
            self.partial,
            f.change.map_or("", |c| c.as_str()),
            &host[0],
            &host[1],
            &host[2],
            &host[3],
            &host[4],
        ];
        for (i, value) in fields.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            field(&mut self.out, value);
        }
        self.out.push_str("\r\n");
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Vec<u8>, ReportError> {
        Ok(self.out.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &str) -> String {
        let mut s = String::new();
        field(&mut s, v);
        s
    }

    #[test]
    fn fields_follow_rfc_4180() {
        assert_eq!(f("plain"), "plain");
        assert_eq!(f("a,b"), "\"a,b\"");
        assert_eq!(f("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(f("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn formula_starts_are_neutralised() {
        assert_eq!(f("=cmd()"), "'=cmd()");
        assert_eq!(f("+1"), "'+1");
        assert_eq!(f("-1"), "'-1");
        assert_eq!(f("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(f("\tx"), "'\tx");
        assert_eq!(
            f("=HYPERLINK(\"x\",\"y\")"),
            "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\""
        );
    }
}
