//! The HTML report: one self-contained document (inline CSS, an inline SVG
//! chart, no script, nothing fetched) that reads on screen and prints on
//! A4. Every value from the scan or a finding goes through [`escape`]:
//! finding text comes from scanned sites and may be hostile. Template texts
//! (name, description, remediation) show their inline code (`` `x` ``) in
//! `<code>` ([`escape_code_into`]); no other Markdown is read.

use std::fmt::Write as _;

use scanfleet_common::Severity;

use super::{
    display_host, inline, timestamp, Changes, Header, Renderer, ReportError, SEVERITY_LABELS,
};
use scanfleet_core::store::findings::FindingRow;

/// Escapes text for element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

fn escape_into(out: &mut String, s: &str) {
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
}

/// Escapes `text` as [`escape`] does, with its inline code spans
/// (`` `x` ``, see [`crate::inline`]) in `<code>`.
pub fn escape_code_into(out: &mut String, text: &str) {
    for span in inline::spans(text) {
        if span.code {
            out.push_str("<code>");
            escape_into(out, span.text);
            out.push_str("</code>");
        } else {
            escape_into(out, span.text);
        }
    }
}

/// Badge and bar colours, critical to info.
pub const SEVERITY_COLOURS: [&str; 5] = ["#7f1d1d", "#dc2626", "#ea8a0c", "#2563eb", "#6b7280"];

const STYLE: &str = r#"
:root{--ink:#1f2933;--muted:#52606d;--line:#d9e2ec;--bg:#f5f7fa;--accent:#243b53}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif;color:var(--ink);background:var(--bg)}
main{max-width:1040px;margin:0 auto;padding:2rem 1.5rem 4rem}
header.cover{background:var(--accent);color:#fff;padding:2rem 1.5rem}
header.cover .inner{max-width:1040px;margin:0 auto}
header.cover .kicker{text-transform:uppercase;letter-spacing:.12em;font-size:.8rem;opacity:.8}
header.cover h1{margin:.25rem 0 1rem;font-size:2rem;word-break:break-all}
dl.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:.5rem 1.5rem;margin:0}
dl.meta div{min-width:0}
dl.meta dt{font-size:.75rem;text-transform:uppercase;letter-spacing:.08em;opacity:.75}
dl.meta dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.partial{margin:1.5rem 0 0;padding:.9rem 1.1rem;border-left:6px solid #d97706;background:#fffbeb;color:#78350f;font-weight:600}
section.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:1.25rem 1.5rem;margin-top:1.5rem}
h2{font-size:1.25rem;margin:0 0 1rem}
.summary{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.4fr);gap:1.5rem;align-items:center}
.totals{display:grid;grid-template-columns:repeat(3,1fr);gap:.75rem}
.total{border:1px solid var(--line);border-radius:6px;padding:.6rem .8rem}
.total b{display:block;font-size:1.6rem;line-height:1.2}
.total span{font-size:.8rem;color:var(--muted);text-transform:uppercase;letter-spacing:.06em}
.total.all{grid-column:span 3;background:var(--bg)}
svg.chart{width:100%;height:auto}
svg.chart text{font:13px system-ui,sans-serif;fill:var(--ink)}
.host{margin-top:2rem}
.host>h2{border-bottom:2px solid var(--accent);padding-bottom:.4rem;overflow-wrap:anywhere}
article.finding{background:#fff;border:1px solid var(--line);border-left:6px solid var(--sev);border-radius:6px;padding:1rem 1.25rem;margin:.9rem 0;break-inside:avoid}
article.finding h3{margin:0 0 .5rem;font-size:1.05rem;display:flex;gap:.6rem;align-items:baseline;flex-wrap:wrap}
.badge{display:inline-block;min-width:5.2em;text-align:center;padding:.1rem .5rem;border-radius:999px;background:var(--sev);color:#fff;font-size:.72rem;font-weight:700;text-transform:uppercase;letter-spacing:.06em}
dl.fields{display:grid;grid-template-columns:9rem minmax(0,1fr);gap:.3rem 1rem;margin:0}
dl.fields dt{color:var(--muted);font-size:.85rem}
dl.fields dd{margin:0;overflow-wrap:anywhere;white-space:pre-wrap}
code{font:13px ui-monospace,"DejaVu Sans Mono",monospace;background:var(--bg);padding:.05rem .3rem;border-radius:3px}
ul.extracted{margin:0;padding-left:1.1rem}
p.none{color:var(--muted)}
.change-counts{display:grid;grid-template-columns:repeat(4,1fr);gap:.75rem;margin-bottom:.75rem}
.change{border:1px solid var(--line);border-radius:6px;padding:.6rem .8rem}
.change b{display:block;font-size:1.4rem;line-height:1.2}
.change span{font-size:.8rem;color:var(--muted);text-transform:uppercase;letter-spacing:.06em}
.change.new{border-top:4px solid #dc2626}.change.regressed{border-top:4px solid #ea8a0c}
.change.fixed{border-top:4px solid #16a34a}.change.recurring{border-top:4px solid #6b7280}
p.previous,p.change-note,p.more{color:var(--muted);margin:.4rem 0}
section.changes h3{font-size:1rem;margin:1rem 0 .4rem}
ul.change-list{list-style:none;margin:0;padding:0}
ul.change-list li{padding:.3rem 0;border-bottom:1px solid var(--line);overflow-wrap:anywhere}
ul.change-list .name{font-weight:600}
ul.change-list .host{color:var(--muted)}
table.coverage{width:100%;border-collapse:collapse;font-size:.9rem}
table.coverage th,table.coverage td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top;overflow-wrap:anywhere}
table.coverage th{color:var(--muted);font-weight:600}
footer{margin-top:3rem;color:var(--muted);font-size:.8rem}
@media (max-width:720px){.summary{grid-template-columns:1fr}dl.fields{grid-template-columns:1fr}.change-counts{grid-template-columns:repeat(2,1fr)}}
@page{size:A4;margin:14mm 12mm}
@media print{
 body{background:#fff;font-size:10.5pt}
 *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 header.cover{padding:0 0 1rem;background:#fff;color:var(--ink);border-bottom:3px solid var(--accent)}
 main{max-width:none;padding:0}
 section.card,article.finding{box-shadow:none}
 .host>h2{break-after:avoid}
 a{color:inherit;text-decoration:none}
}
"#;

/// The HTML document, written as the findings arrive (grouped by host:
/// they come in [`super::Format::order`]).
pub struct HtmlRenderer {
    out: String,
    current_host: Option<String>,
    count: u64,
}

impl HtmlRenderer {
    pub fn new(header: Header) -> HtmlRenderer {
        let mut out = String::with_capacity(64 * 1024);
        write_head(&mut out, &header);
        HtmlRenderer {
            out,
            current_host: None,
            count: 0,
        }
    }
}

fn write_head(out: &mut String, h: &Header) {
    let s = &h.scan;
    let domain = escape(&display_host(&s.domain));
    let partial = if h.is_partial() { " (partial)" } else { "" };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"scanfleet\">\n\
         <title>Security scan report: {domain}{partial}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <header class=\"cover\"><div class=\"inner\">\n\
         <div class=\"kicker\">Security scan report{partial}</div>\n<h1>{domain}</h1>\n<dl class=\"meta\">\n"
    );
    let meta = [
        ("Engine", s.engine.as_str().to_string()),
        ("Status", s.status.as_str().to_string()),
        ("Started", timestamp(s.started_at)),
        ("Completed", timestamp(s.completed_at)),
        ("Duration", h.duration_text()),
        ("Created", timestamp(Some(s.created_at))),
        ("Generated", timestamp(Some(h.generated_at))),
        ("Scan", s.id.to_string()),
    ];
    for (k, v) in meta {
        let _ = writeln!(out, "<div><dt>{k}</dt><dd>{}</dd></div>", escape(&v));
    }
    out.push_str("</dl>\n</div></header>\n<main>\n");
    if let Some(note) = h.partial_note() {
        let _ = writeln!(
            out,
            "<p class=\"partial\" role=\"status\">{}</p>",
            escape(&note)
        );
    }
    let counts = h.counts();
    out.push_str(
        "<section class=\"card\" aria-labelledby=\"summary\">\n\
         <h2 id=\"summary\">Executive summary</h2>\n<div class=\"summary\">\n<div class=\"totals\">\n",
    );
    let _ = writeln!(
        out,
        "<div class=\"total all\"><b>{}</b><span>findings in total</span></div>",
        h.total()
    );
    for (i, label) in SEVERITY_LABELS.iter().enumerate() {
        let _ = writeln!(
            out,
            "<div class=\"total\" style=\"border-top:4px solid {}\"><b>{}</b><span>{label}</span></div>",
            SEVERITY_COLOURS[i], counts[i]
        );
    }
    out.push_str("</div>\n");
    write_chart(out, &counts);
    out.push_str("</div>\n</section>\n");
    if let Some(changes) = &h.changes {
        write_changes(out, h, changes);
    }
    write_coverage(out, h);
    out.push_str("<section aria-labelledby=\"findings\">\n");
    out.push_str("<h2 id=\"findings\" style=\"margin-top:2rem\">Findings by host</h2>\n");
}

/// "Changes since the previous scan": the scan compared with, the counts,
/// what is not known yet, and the lists (when there is a previous scan).
fn write_changes(out: &mut String, h: &Header, changes: &Changes) {
    out.push_str(
        "<section class=\"card changes\" aria-labelledby=\"changes\">\n\
         <h2 id=\"changes\">Changes since the previous scan</h2>\n<p class=\"previous\">",
    );
    escape_into(out, &changes.previous_text());
    out.push_str("</p>\n<div class=\"change-counts\">\n");
    for (label, count) in changes.figures(h.scan.status) {
        let count = count.map_or_else(|| "–".to_string(), |c| c.to_string());
        let _ = writeln!(
            out,
            "<div class=\"change {label}\"><b>{count}</b><span>{label}</span></div>"
        );
    }
    out.push_str("</div>\n");
    if let Some(note) = Changes::pending_note(h.scan.status) {
        let _ = writeln!(out, "<p class=\"change-note\">{}</p>", escape(note));
    }
    if changes.previous.is_some() {
        for (title, list, total) in changes.lists() {
            if list.is_empty() {
                continue;
            }
            let class = title.to_ascii_lowercase();
            let _ = writeln!(out, "<h3>{title}</h3>\n<ul class=\"change-list {class}\">");
            for f in list {
                let i = severity_index(f.severity);
                let _ = write!(
                    out,
                    "<li style=\"--sev:{}\"><span class=\"badge\">{}</span> <span class=\"name\">",
                    SEVERITY_COLOURS[i], SEVERITY_LABELS[i]
                );
                escape_code_into(out, &f.name);
                out.push_str("</span> <span class=\"host\">");
                escape_into(out, &display_host(&f.host));
                out.push_str("</span> <code class=\"at\">");
                escape_into(out, &f.matched_at);
                out.push_str("</code></li>\n");
            }
            out.push_str("</ul>\n");
            let more = i64::from(total) - list.len() as i64;
            if more > 0 {
                let _ = writeln!(out, "<p class=\"more\">and {more} more</p>");
            }
        }
    }
    out.push_str("</section>\n");
}

/// "Coverage": one row per live host, for a scan that has it.
fn write_coverage(out: &mut String, h: &Header) {
    if h.coverage.is_empty() {
        return;
    }
    out.push_str(
        "<section class=\"card coverage\" aria-labelledby=\"coverage\">\n\
         <h2 id=\"coverage\">Coverage</h2>\n<p class=\"change-note\">",
    );
    escape_into(out, crate::coverage::COVERAGE_NOTE);
    out.push_str(
        "</p>\n<table class=\"coverage\">\n<thead><tr><th>Host</th><th>Technologies</th>\
         <th>Templates run</th><th>Skipped, by reason</th><th>Requests</th></tr></thead>\n<tbody>\n",
    );
    for c in &h.coverage {
        out.push_str("<tr><td>");
        escape_into(out, &display_host(&c.host));
        out.push_str("</td><td>");
        escape_into(out, &c.technologies_text());
        let _ = write!(out, "</td><td>{}</td><td>", escape(&c.run_text()));
        escape_into(out, &c.skipped_text());
        let _ = writeln!(out, "</td><td>{}</td></tr>", c.requests);
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

/// A horizontal bar per severity, scaled to the largest count.
fn write_chart(out: &mut String, counts: &[i64; 5]) {
    const LABEL_W: f64 = 80.0;
    const BAR_W: f64 = 360.0;
    const ROW_H: f64 = 34.0;
    let max = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let height = ROW_H * 5.0 + 8.0;
    let _ = writeln!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-labelledby=\"chart-title\" \
         xmlns=\"http://www.w3.org/2000/svg\"><title id=\"chart-title\">Findings by severity: {}</title>",
        SEVERITY_LABELS
            .iter()
            .zip(counts)
            .map(|(l, c)| format!("{l} {c}"))
            .collect::<Vec<_>>()
            .join(", "),
        w = LABEL_W + BAR_W + 60.0,
    );
    for (i, label) in SEVERITY_LABELS.iter().enumerate() {
        let y = 4.0 + ROW_H * i as f64;
        let _ = write!(
            out,
            "<text x=\"0\" y=\"{ty}\">{label}</text>\
             <rect x=\"{LABEL_W}\" y=\"{y}\" width=\"{BAR_W}\" height=\"22\" rx=\"4\" fill=\"#eef2f7\"/>",
            ty = y + 16.0,
        );
        // A zero draws no bar at all (issue 37, item 10: a sliver read as
        // "a few"); the smallest count still shows.
        if counts[i] > 0 {
            let width = (counts[i] as f64 / max * BAR_W).max(4.0);
            let _ = write!(
                out,
                "<rect class=\"bar\" x=\"{LABEL_W}\" y=\"{y}\" width=\"{width:.1}\" height=\"22\" \
                 rx=\"4\" fill=\"{colour}\"/>",
                colour = SEVERITY_COLOURS[i],
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{tx}\" y=\"{ty}\" font-weight=\"700\">{count}</text>",
            ty = y + 16.0,
            tx = LABEL_W + BAR_W + 10.0,
            count = counts[i],
        );
    }
    out.push_str("</svg>\n");
}

fn severity_index(s: Severity) -> usize {
    s.rank() as usize
}

impl Renderer for HtmlRenderer {
    fn push(&mut self, f: &FindingRow) -> Result<(), ReportError> {
        let out = &mut self.out;
        if self.current_host.as_deref() != Some(f.host.as_str()) {
            if self.current_host.is_some() {
                out.push_str("</section>\n");
            }
            out.push_str("<section class=\"host\">\n<h2>");
            escape_into(out, &display_host(&f.host));
            out.push_str("</h2>\n");
            self.current_host = Some(f.host.clone());
        }
        self.count += 1;
        let i = severity_index(f.severity);
        let _ = write!(
            out,
            "<article class=\"finding\" style=\"--sev:{}\">\n<h3><span class=\"badge\">{}</span> ",
            SEVERITY_COLOURS[i], SEVERITY_LABELS[i]
        );
        escape_code_into(out, &f.name);
        out.push_str("</h3>\n<dl class=\"fields\">\n<dt>Template</dt><dd><code>");
        escape_into(out, &f.template_id);
        out.push_str("</code></dd>\n<dt>Matched at</dt><dd><code>");
        escape_into(out, &f.matched_at);
        out.push_str("</code></dd>\n<dt>Status</dt><dd>");
        escape_into(out, &f.status.as_str().replace('_', " "));
        out.push_str("</dd>\n");
        for (label, value) in [
            ("Description", &f.description),
            ("Remediation", &f.remediation),
        ] {
            if !value.trim().is_empty() {
                let _ = write!(out, "<dt>{label}</dt><dd>");
                escape_code_into(out, value);
                out.push_str("</dd>\n");
            }
        }
        if !f.extracted_results.is_empty() {
            out.push_str("<dt>Extracted</dt><dd><ul class=\"extracted\">");
            for v in &f.extracted_results {
                out.push_str("<li><code>");
                escape_into(out, v);
                out.push_str("</code></li>");
            }
            out.push_str("</ul></dd>\n");
        }
        out.push_str("</dl>\n</article>\n");
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Vec<u8>, ReportError> {
        let mut out = self.out;
        if self.current_host.is_some() {
            out.push_str("</section>\n");
        } else {
            out.push_str("<p class=\"none\">No findings.</p>\n");
        }
        out.push_str(
            "</section>\n<footer>Generated by scanfleet. Findings are grouped by host, \
             most severe first.</footer>\n</main>\n</body>\n</html>\n",
        );
        Ok(out.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_turns_markup_into_text() {
        assert_eq!(
            escape("\"><img src=x onerror='alert(1)'>&"),
            "&quot;&gt;&lt;img src=x onerror=&#39;alert(1)&#39;&gt;&amp;"
        );
    }

    fn with_code(text: &str) -> String {
        let mut out = String::new();
        escape_code_into(&mut out, text);
        out
    }

    #[test]
    fn inline_code_becomes_a_code_element_and_stays_escaped() {
        assert_eq!(
            with_code("Set `X-Frame-Options` & <b>"),
            "Set <code>X-Frame-Options</code> &amp; &lt;b&gt;"
        );
        assert_eq!(
            with_code("`</code><script>alert(1)</script>`"),
            "<code>&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;</code>"
        );
        assert_eq!(with_code("a ` b"), "a ` b");
    }
}
