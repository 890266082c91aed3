//! The CSV report: RFC 4180 (a header line, CRLF line ends, fields quoted
//! when they hold a comma, quote or line break, quotes doubled), one row
//! per finding. A CSV has no place for a note, so every row carries the
//! scan's status and whether the report is partial.

use super::{timestamp, Header, Renderer, ReportError};
use scanfleet_core::store::findings::FindingRow;

/// The columns, in order. `change` came last, after the columns of the
/// first version, so that sheets reading columns by position keep working:
/// `new`, `recurring` or `regressed` against the target's earlier scans
/// (empty for a finding without a fingerprint).
pub const CSV_HEADER: [&str; 16] = [
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
        }
    }
}

impl Renderer for CsvRenderer {
    fn push(&mut self, f: &FindingRow) -> Result<(), ReportError> {
        let extracted = f.extracted_results.join("; ");
        let fields: [&str; 16] = [
            &f.id.to_string(),
            &f.scan_id.to_string(),
            &self.domain,
            &f.template_id,
            &f.name,
            f.severity.as_str(),
            &f.status,
            &f.host,
            &f.matched_at,
            &f.description,
            &f.remediation,
            &extracted,
            &timestamp(Some(f.created_at)),
            self.scan_status,
            self.partial,
            f.change.map_or("", |c| c.as_str()),
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
