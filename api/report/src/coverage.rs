//! Per-host coverage (issue 35) in the shapes the contract names: the
//! `GET /scans/{scan_id}/coverage` answer's hosts, and the coverage of the
//! JSON report; the other formats show the same rows ([`Header::coverage`]).
//!
//! [`Header::coverage`]: crate::Header::coverage

use std::collections::BTreeMap;

use poem_openapi::Object;
use scanfleet_core::store::coverage::CoverageRow;

/// One live host of a scan.
#[derive(Debug, Clone, Object)]
pub struct HostCoverage {
    pub host: String,
    /// Technologies found (the `auto` engine's detection and the HTTP
    /// probe; other engines report what the probe saw).
    pub technologies: Vec<Technology>,
    pub templates: TemplateCoverage,
    /// Requests sent to the host during the scan: probe, detection and
    /// templates, retries and redirect hops included.
    pub requests: i64,
}

/// A technology and what named it.
#[derive(Debug, Clone, Object)]
pub struct Technology {
    /// Lower-case name (`wordpress`, `nginx`, `apache-tomcat`).
    pub name: String,
    /// The version, where a detector extracted one (absent otherwise).
    #[oai(skip_serializing_if_is_none)]
    pub version: Option<String>,
    /// What named it: `template:<id>` (`template:tech-detect:<matcher>`),
    /// `header:<name>: <value>`, `cookie:<name>`, `meta:generator: <value>`,
    /// `body:<marker>`.
    pub evidence: Vec<String>,
}

/// The scanner's templates for the host: `run` plus every `skipped`
/// count is `total`.
#[derive(Debug, Clone, Object)]
pub struct TemplateCoverage {
    /// Every template the scanner node holds, runnable or not.
    pub total: i64,
    /// Templates run on the host (detection included).
    pub run: i64,
    /// Templates not run, by reason: `technology_absent` (the `auto`
    /// engine found nothing they apply to), `needs_oob` (out-of-band, and no
    /// interactsh server configured), `needs_wordlist` (a payload file the
    /// node does not have), `unsupported_protocol` (DNS, TCP, headless,
    /// self-contained or third-party requests), `unsupported_feature` (an
    /// HTTP feature the engine does not run), `unreadable` (does not
    /// parse), `brute_force` (over 80 requests: left to `full`),
    /// `not_selected` (outside a `quick` or `recon` selection).
    pub skipped: BTreeMap<String, i64>,
}

impl From<CoverageRow> for HostCoverage {
    fn from(c: CoverageRow) -> Self {
        HostCoverage {
            host: c.host,
            technologies: c
                .technologies
                .into_iter()
                .map(|t| Technology {
                    name: t.name,
                    version: t.version,
                    evidence: t.evidence,
                })
                .collect(),
            templates: TemplateCoverage {
                total: c.total,
                run: c.run,
                skipped: c.skipped,
            },
            requests: c.requests,
        }
    }
}

impl HostCoverage {
    /// `wordpress 5.8.1, php 7.4.3`; `none detected` when empty.
    pub fn technologies_text(&self) -> String {
        if self.technologies.is_empty() {
            return "none detected".to_string();
        }
        self.technologies
            .iter()
            .map(|t| match &t.version {
                Some(v) => format!("{} {v}", t.name),
                None => t.name.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `run R of T`.
    pub fn run_text(&self) -> String {
        format!("{} of {}", self.templates.run, self.templates.total)
    }

    /// `technology_absent 6010, needs_oob 467`, largest first; `none`.
    pub fn skipped_text(&self) -> String {
        let mut skipped: Vec<(&String, &i64)> = self.templates.skipped.iter().collect();
        if skipped.is_empty() {
            return "none".to_string();
        }
        skipped.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        skipped
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The sentence under the coverage heading of the HTML and PDF reports.
pub const COVERAGE_NOTE: &str = "Per live host: the technologies found, the templates run out of \
     the scanner's template set and why the others were skipped, and the requests sent.";
