//! The PDF report, through krilla: A4 pages, a cover with the scan, the
//! executive summary and a severity bar chart, then the findings grouped by
//! host, a page number on every page.
//!
//! Text is set in DejaVu Sans (regular and bold), inline code of template
//! texts (`` `x` ``, see [`crate::inline`]) in DejaVu Sans Mono on a light
//! band, all shipped in `api/report/fonts` and compiled into the binary: no system font is looked up and nothing is
//! fetched. DejaVu covers Latin, Greek and Cyrillic (IDN hosts such as
//! `пример.рф`, descriptions in those scripts); krilla subsets it and
//! writes ToUnicode maps, so the text can be selected and searched. CJK is
//! outside DejaVu and would show as empty boxes (the text layer still
//! carries it).
//!
//! Pages are laid out as the findings arrive: drawing operations of the
//! page being filled are kept, and the page is written to the document when
//! it is full. So "Page N" carries no total: that would mean holding every
//! page until the end.
//!
//! # Layout
//! - [`typeset`]: fonts, shaping, line breaking and drawing operations.
//! - this module: the report's content (cover, summary, changes, findings)
//!   laid out on pages.

mod typeset;

use krilla::metadata::Metadata;
use krilla::page::PageSettings;
use krilla::Document;

use self::typeset::{draw, fonts, runs, wrap, wrap_runs, Colour, Fonts, Line, Op, Style};
use super::{display_host, timestamp, Changes, Header, Renderer, ReportError, SEVERITY_LABELS};
use scanfleet_core::store::findings::FindingRow;
use scanfleet_core::store::fingerprints::ChangedFinding;

/// A4 in points.
const PAGE_W: f32 = 595.28;
const PAGE_H: f32 = 841.89;
const LEFT: f32 = 50.0;
const RIGHT: f32 = PAGE_W - 50.0;
const WIDTH: f32 = RIGHT - LEFT;
/// The first baseline and the lowest one of the findings pages.
const TOP: f32 = 78.0;
const BOTTOM: f32 = PAGE_H - 62.0;

const INK: Colour = (0x1f, 0x29, 0x33);
const MUTED: Colour = (0x52, 0x60, 0x6d);
const RULE: Colour = (0xd9, 0xe2, 0xec);
const ACCENT: Colour = (0x24, 0x3b, 0x53);
const WHITE: Colour = (0xff, 0xff, 0xff);
const TRACK: Colour = (0xee, 0xf2, 0xf7);
/// Same as the HTML badges, critical to info.
const SEVERITY_COLOURS: [Colour; 5] = [
    (0x7f, 0x1d, 0x1d),
    (0xdc, 0x26, 0x26),
    (0xea, 0x8a, 0x0c),
    (0x25, 0x63, 0xeb),
    (0x6b, 0x72, 0x80),
];

pub struct PdfRenderer {
    fonts: &'static Fonts,
    document: Document,
    header: Header,
    /// The page being filled; written out by [`PdfRenderer::end_page`].
    ops: Vec<Op>,
    /// The baseline of the next line on the page being filled.
    y: f32,
    /// Pages written so far.
    pages: u32,
    current_host: Option<String>,
    findings: u64,
}

impl PdfRenderer {
    pub fn new(header: Header) -> Result<PdfRenderer, ReportError> {
        let fonts = fonts()?;
        let mut document = Document::new();
        document.set_metadata(
            Metadata::new()
                .title(format!(
                    "Security scan report: {}{}",
                    display_host(&header.scan.domain),
                    if header.is_partial() {
                        " (partial)"
                    } else {
                        ""
                    }
                ))
                .creator("scanfleet".to_string())
                .language("en".to_string()),
        );
        let mut r = PdfRenderer {
            fonts,
            document,
            header,
            ops: Vec::with_capacity(512),
            y: TOP,
            pages: 0,
            current_host: None,
            findings: 0,
        };
        r.cover();
        r.end_page();
        r.start_findings_page();
        r.change_lists();
        r.coverage();
        Ok(r)
    }

    fn text(&mut self, x: f32, y: f32, size: f32, bold: bool, colour: Colour, text: &str) {
        self.ops.push(Op::Text {
            x,
            y,
            size,
            style: if bold { Style::Bold } else { Style::Regular },
            colour,
            text: text.to_string(),
        });
    }

    /// A line of runs from `x`; inline code on a light band.
    fn line(&mut self, x: f32, y: f32, size: f32, colour: Colour, line: Line) {
        let mut x = x;
        for (style, text) in line {
            let w = self.fonts.width(style, &text, size);
            if style == Style::Mono {
                self.rect(x - 1.0, y - size * 0.82, w + 2.0, size * 1.1, TRACK);
            }
            self.ops.push(Op::Text {
                x,
                y,
                size,
                style,
                colour,
                text,
            });
            x += w;
        }
    }

    fn rect(&mut self, x: f32, y: f32, w: f32, h: f32, colour: Colour) {
        self.ops.push(Op::Rect { x, y, w, h, colour });
    }

    /// Writes the page being filled, with its footer, to the document.
    fn end_page(&mut self) {
        self.pages += 1;
        let label = format!("Page {}", self.pages);
        let w = self.fonts.regular.width(&label, 8.0);
        self.rect(LEFT, PAGE_H - 44.0, WIDTH, 0.6, RULE);
        self.text(
            LEFT,
            PAGE_H - 30.0,
            8.0,
            false,
            MUTED,
            &format!("scanfleet · {}", timestamp(Some(self.header.generated_at))),
        );
        self.text(RIGHT - w, PAGE_H - 30.0, 8.0, false, MUTED, &label);
        let mut page = self
            .document
            .start_page_with(PageSettings::from_wh(PAGE_W, PAGE_H).expect("A4 is a valid size"));
        let mut surface = page.surface();
        for op in self.ops.drain(..) {
            draw(&mut surface, self.fonts, &op);
        }
        surface.finish();
        page.finish();
    }

    /// A findings page: the running head, then content from [`TOP`].
    fn start_findings_page(&mut self) {
        let head = format!(
            "Security scan report: {}{}",
            display_host(&self.header.scan.domain),
            if self.header.is_partial() {
                " — PARTIAL"
            } else {
                ""
            }
        );
        self.text(LEFT, 38.0, 8.0, false, MUTED, &head);
        self.rect(LEFT, 46.0, WIDTH, 0.6, RULE);
        self.y = TOP;
    }

    /// Starts a new page unless `needed` points still fit on this one.
    fn ensure(&mut self, needed: f32) {
        if self.y + needed > BOTTOM {
            self.end_page();
            self.start_findings_page();
        }
    }

    fn cover(&mut self) {
        let h = self.header.clone();
        self.cover_band(&h);
        let y = self.cover_scan(&h);
        let y = self.cover_summary(&h, y);
        if let Some(changes) = &h.changes {
            self.cover_changes(&h, changes, y);
        }
    }

    /// The band with the title.
    fn cover_band(&mut self, h: &Header) {
        let s = &h.scan;
        self.rect(0.0, 0.0, PAGE_W, 170.0, ACCENT);
        self.text(LEFT, 62.0, 10.0, true, WHITE, "SECURITY SCAN REPORT");
        let mut y = 100.0;
        for line in wrap(
            self.fonts,
            Style::Bold,
            &display_host(&s.domain),
            26.0,
            WIDTH,
        )
        .into_iter()
        .take(2)
        {
            self.text(LEFT, y, 26.0, true, WHITE, &line);
            y += 30.0;
        }
        if h.is_partial() {
            self.rect(LEFT, 142.0, 70.0, 16.0, (0xd9, 0x77, 0x06));
            self.text(LEFT + 9.0, 154.0, 9.0, true, WHITE, "PARTIAL");
        }
    }

    /// The scan's facts and the partial note; answers where the page goes on.
    fn cover_scan(&mut self, h: &Header) -> f32 {
        let s = &h.scan;
        let mut y = 210.0;
        let meta = [
            ("Target", display_host(&s.domain)),
            ("Engine", s.engine.as_str().to_string()),
            ("Status", s.status.as_str().to_string()),
            ("Started", timestamp(s.started_at)),
            ("Completed", timestamp(s.completed_at)),
            ("Duration", h.duration_text()),
            ("Generated", timestamp(Some(h.generated_at))),
            ("Scan", s.id.to_string()),
        ];
        for (k, v) in meta {
            self.text(LEFT, y, 9.0, false, MUTED, k);
            let v = wrap(self.fonts, Style::Regular, &v, 10.5, WIDTH - 90.0)
                .into_iter()
                .next()
                .unwrap_or_default();
            self.text(LEFT + 90.0, y, 10.5, false, INK, &v);
            y += 18.0;
        }
        if let Some(note) = h.partial_note() {
            y += 6.0;
            let lines = wrap(self.fonts, Style::Bold, &note, 10.0, WIDTH - 24.0);
            let box_h = 14.0 * lines.len() as f32 + 14.0;
            self.rect(LEFT, y - 4.0, WIDTH, box_h, (0xff, 0xfb, 0xeb));
            self.rect(LEFT, y - 4.0, 5.0, box_h, (0xd9, 0x77, 0x06));
            let mut ly = y + 12.0;
            for line in lines {
                self.text(LEFT + 16.0, ly, 10.0, true, (0x78, 0x35, 0x0f), &line);
                ly += 14.0;
            }
            y += box_h + 4.0;
        }
        y
    }

    /// The executive summary and its chart, from `y` down; answers where
    /// the page goes on.
    fn cover_summary(&mut self, h: &Header, mut y: f32) -> f32 {
        y += 30.0;
        self.text(LEFT, y, 16.0, true, INK, "Executive summary");
        self.rect(LEFT, y + 8.0, WIDTH, 1.2, ACCENT);
        y += 42.0;
        let total = h.total();
        self.text(LEFT, y, 30.0, true, INK, &total.to_string());
        let tw = self.fonts.bold.width(&total.to_string(), 30.0);
        self.text(
            LEFT + tw + 10.0,
            y,
            11.0,
            false,
            MUTED,
            if total == 1 {
                "finding in total"
            } else {
                "findings in total"
            },
        );
        y += 30.0;
        let counts = h.counts();
        let max = counts.iter().copied().max().unwrap_or(0).max(1) as f32;
        let bar_x = LEFT + 80.0;
        let bar_w = WIDTH - 80.0 - 50.0;
        for (i, label) in SEVERITY_LABELS.iter().enumerate() {
            self.text(LEFT, y + 13.0, 11.0, false, INK, label);
            self.rect(bar_x, y, bar_w, 18.0, TRACK);
            // A zero draws no bar at all (issue 37, item 10), the smallest
            // count still shows.
            if counts[i] > 0 {
                let w = (counts[i] as f32 / max * bar_w).max(3.0);
                self.rect(bar_x, y, w, 18.0, SEVERITY_COLOURS[i]);
            }
            self.text(
                bar_x + bar_w + 10.0,
                y + 13.0,
                11.0,
                true,
                INK,
                &counts[i].to_string(),
            );
            y += 28.0;
        }
        y += 14.0;
        let hint = if total == 0 {
            "No findings."
        } else {
            "The findings follow, grouped by host, most severe first."
        };
        self.text(LEFT, y, 10.0, false, MUTED, hint);
        y
    }

    /// The counts of the changes since the previous scan, below the
    /// summary (the lists open the findings pages, [`Self::change_lists`]).
    fn cover_changes(&mut self, h: &Header, changes: &Changes, mut y: f32) {
        y += 34.0;
        self.text(LEFT, y, 13.0, true, INK, "Changes since the previous scan");
        self.rect(LEFT, y + 7.0, WIDTH, 1.0, ACCENT);
        y += 24.0;
        for line in wrap(
            self.fonts,
            Style::Regular,
            &changes.previous_text(),
            9.5,
            WIDTH,
        ) {
            self.text(LEFT, y, 9.5, false, MUTED, &line);
            y += 13.0;
        }
        y += 10.0;
        let column = WIDTH / 4.0;
        for (i, (label, count)) in changes.figures(h.scan.status).into_iter().enumerate() {
            let x = LEFT + column * i as f32;
            let count = count.map_or_else(|| "–".to_string(), |c| c.to_string());
            self.text(x, y, 15.0, true, INK, &count);
            let w = self.fonts.bold.width(&count, 15.0);
            self.text(x + w + 6.0, y, 9.5, false, MUTED, label);
        }
        y += 18.0;
        if let Some(note) = Changes::pending_note(h.scan.status) {
            for line in wrap(self.fonts, Style::Regular, note, 9.0, WIDTH) {
                self.text(LEFT, y, 9.0, false, MUTED, &line);
                y += 12.0;
            }
        }
    }

    /// The new, regressed and fixed findings, before the findings by host;
    /// nothing on a target's first scan (every finding is new).
    fn change_lists(&mut self) {
        let Some(changes) = self.header.changes.clone() else {
            return;
        };
        let lists = changes.lists();
        if changes.previous.is_none() || lists.iter().all(|(_, list, _)| list.is_empty()) {
            return;
        }
        self.text(
            LEFT,
            self.y,
            14.0,
            true,
            ACCENT,
            "Changes since the previous scan",
        );
        self.rect(LEFT, self.y + 6.0, WIDTH, 1.5, ACCENT);
        self.y += 26.0;
        for (title, list, total) in lists {
            if list.is_empty() {
                continue;
            }
            self.ensure(40.0);
            self.text(LEFT, self.y, 11.0, true, INK, &format!("{title} ({total})"));
            self.y += 16.0;
            for f in list {
                self.change_entry(f);
            }
            let more = i64::from(total) - list.len() as i64;
            if more > 0 {
                self.ensure(12.0);
                self.text(LEFT, self.y, 9.0, false, MUTED, &format!("and {more} more"));
                self.y += 12.0;
            }
            self.y += 8.0;
        }
        self.rect(LEFT, self.y - 4.0, WIDTH, 0.6, RULE);
        self.y += 14.0;
    }

    /// "Coverage": per live host, its technologies, templates run and
    /// skipped, and requests, before the findings; nothing for a scan
    /// without coverage.
    fn coverage(&mut self) {
        let hosts = self.header.coverage.clone();
        if hosts.is_empty() {
            return;
        }
        self.ensure(80.0);
        self.text(LEFT, self.y, 14.0, true, ACCENT, "Coverage");
        self.rect(LEFT, self.y + 6.0, WIDTH, 1.5, ACCENT);
        self.y += 22.0;
        for line in wrap(
            self.fonts,
            Style::Regular,
            crate::coverage::COVERAGE_NOTE,
            9.0,
            WIDTH,
        ) {
            self.text(LEFT, self.y, 9.0, false, MUTED, &line);
            self.y += 12.0;
        }
        self.y += 6.0;
        for c in &hosts {
            self.ensure(60.0);
            self.text(LEFT, self.y, 11.0, true, INK, &display_host(&c.host));
            self.y += 15.0;
            self.field("Technologies", &c.technologies_text(), false);
            self.field("Templates run", &c.run_text(), false);
            self.field("Skipped", &c.skipped_text(), false);
            self.field("Requests", &c.requests.to_string(), false);
            self.y += 6.0;
        }
        self.rect(LEFT, self.y - 4.0, WIDTH, 0.6, RULE);
        self.y += 14.0;
    }

    /// One entry of a change list: severity, name, then host and URL.
    fn change_entry(&mut self, f: &ChangedFinding) {
        const BADGE_W: f32 = 50.0;
        const TEXT_X: f32 = LEFT + BADGE_W + 8.0;
        let name = runs(&f.name, Style::Regular);
        let name_lines = wrap_runs(self.fonts, &name, Style::Regular, 9.5, RIGHT - TEXT_X);
        let place = format!("{} · {}", display_host(&f.host), f.matched_at);
        let place_lines = wrap(self.fonts, Style::Regular, &place, 8.0, RIGHT - TEXT_X);
        self.ensure(12.0 * name_lines.len() as f32 + 11.0 * place_lines.len() as f32);
        let rank = f.severity.rank() as usize;
        self.rect(LEFT, self.y - 8.5, BADGE_W, 11.0, SEVERITY_COLOURS[rank]);
        let label = SEVERITY_LABELS[rank].to_uppercase();
        let lw = self.fonts.bold.width(&label, 6.5);
        self.text(
            LEFT + (BADGE_W - lw) / 2.0,
            self.y,
            6.5,
            true,
            WHITE,
            &label,
        );
        for line in name_lines {
            self.line(TEXT_X, self.y, 9.5, INK, line);
            self.y += 12.0;
        }
        for line in place_lines {
            self.text(TEXT_X, self.y, 8.0, false, MUTED, &line);
            self.y += 11.0;
        }
        self.y += 3.0;
    }

    fn host_heading(&mut self, host: &str) {
        self.ensure(70.0);
        self.y += 6.0;
        let lines = wrap(self.fonts, Style::Bold, &display_host(host), 14.0, WIDTH);
        for line in lines {
            self.text(LEFT, self.y, 14.0, true, ACCENT, &line);
            self.y += 18.0;
        }
        self.rect(LEFT, self.y - 12.0, WIDTH, 1.5, ACCENT);
        self.y += 8.0;
    }

    /// A label and its wrapped value; continues on the next page when the
    /// page is full. `template_text` shows the value's inline code.
    fn field(&mut self, label: &str, value: &str, template_text: bool) {
        const LABEL_W: f32 = 82.0;
        const SIZE: f32 = 9.0;
        const LINE: f32 = 12.0;
        let runs = if template_text {
            runs(value, Style::Regular)
        } else {
            vec![(Style::Regular, value)]
        };
        let lines = wrap_runs(self.fonts, &runs, Style::Regular, SIZE, WIDTH - LABEL_W);
        self.ensure(LINE);
        self.text(LEFT, self.y, 8.5, false, MUTED, label);
        for line in lines {
            self.ensure(LINE);
            self.line(LEFT + LABEL_W, self.y, SIZE, INK, line);
            self.y += LINE;
        }
        self.y += 2.0;
    }
}

impl Renderer for PdfRenderer {
    fn push(&mut self, f: &FindingRow) -> Result<(), ReportError> {
        if self.current_host.as_deref() != Some(f.host.as_str()) {
            self.host_heading(&f.host);
            self.current_host = Some(f.host.clone());
        }
        self.findings += 1;
        let rank = f.severity.rank() as usize;
        const BADGE_W: f32 = 62.0;
        let name = runs(&f.name, Style::Bold);
        let name_lines = wrap_runs(self.fonts, &name, Style::Bold, 11.0, WIDTH - BADGE_W - 10.0);
        // The badge, the name and the first fields stay together.
        self.ensure(14.0 * name_lines.len() as f32 + 40.0);
        self.y += 4.0;
        self.rect(LEFT, self.y - 10.5, BADGE_W, 14.0, SEVERITY_COLOURS[rank]);
        let label = SEVERITY_LABELS[rank].to_uppercase();
        let lw = self.fonts.bold.width(&label, 7.5);
        self.text(
            LEFT + (BADGE_W - lw) / 2.0,
            self.y,
            7.5,
            true,
            WHITE,
            &label,
        );
        for line in name_lines {
            self.line(LEFT + BADGE_W + 10.0, self.y, 11.0, INK, line);
            self.y += 14.0;
        }
        self.y += 3.0;
        self.field("Template", &f.template_id, false);
        self.field("Matched at", &f.matched_at, false);
        self.field("Status", &f.status.as_str().replace('_', " "), false);
        if !f.description.trim().is_empty() {
            self.field("Description", &f.description, true);
        }
        if !f.remediation.trim().is_empty() {
            self.field("Remediation", &f.remediation, true);
        }
        if !f.extracted_results.is_empty() {
            self.field("Extracted", &f.extracted_results.join("\n"), false);
        }
        self.y += 4.0;
        if self.y + 10.0 < BOTTOM {
            self.rect(LEFT, self.y - 6.0, WIDTH, 0.5, RULE);
        }
        self.y += 6.0;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<u8>, ReportError> {
        if self.findings == 0 {
            self.text(LEFT, self.y, 11.0, false, MUTED, "No findings.");
        }
        self.end_page();
        Ok(self.document.finish()?)
    }
}
