//! The totals `templates check` reports: how many templates were found,
//! parsed and runnable, and how many could not run, grouped by reason.

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use super::check::{check_for, CheckOptions, Reason};
use super::loader::{load_dir, LoadReport};

/// Totals over a set of templates. Every template found is either runnable
/// or counted under exactly one reason (its most fundamental one), so
/// `runnable + sum(unrunnable) == found`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckSummary {
    pub found: usize,
    pub parsed: usize,
    pub runnable: usize,
    /// Reason text (`"missing payload file"`) to number of templates.
    pub unrunnable: BTreeMap<String, usize>,
}

impl CheckSummary {
    /// Checks every template of a load report, with no interactsh server.
    pub fn from_report(report: &LoadReport) -> CheckSummary {
        CheckSummary::from_report_for(report, CheckOptions::default())
    }

    /// Checks every template of a load report under `options`.
    pub fn from_report_for(report: &LoadReport, options: CheckOptions) -> CheckSummary {
        let mut unrunnable: BTreeMap<String, usize> = BTreeMap::new();
        if !report.failures.is_empty() {
            unrunnable.insert(Reason::ParseError.to_string(), report.failures.len());
        }
        // Checking compiles every matcher and extractor: CPU work, spread
        // over the rayon pool like the parsing was.
        let outcomes: Vec<Option<String>> = report
            .templates
            .par_iter()
            .map(|t| {
                check_for(t, options)
                    .err()
                    .map(|why| why.primary().to_string())
            })
            .collect();
        let mut runnable = 0;
        for outcome in outcomes {
            match outcome {
                None => runnable += 1,
                Some(reason) => *unrunnable.entry(reason).or_default() += 1,
            }
        }
        CheckSummary {
            found: report.found,
            parsed: report.parsed(),
            runnable,
            unrunnable,
        }
    }

    /// Reasons with their counts, most frequent first (ties by name).
    pub fn reasons_by_count(&self) -> Vec<(&str, usize)> {
        let mut v: Vec<(&str, usize)> = self
            .unrunnable
            .iter()
            .map(|(r, n)| (r.as_str(), *n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v
    }

    /// Share of found templates that can run, in percent.
    pub fn runnable_percent(&self) -> f64 {
        if self.found == 0 {
            0.0
        } else {
            self.runnable as f64 * 100.0 / self.found as f64
        }
    }
}

/// Loads a directory tree and summarises it; the report is returned too so
/// callers can show individual parse errors.
pub fn check_dir(dir: &Path) -> (LoadReport, CheckSummary) {
    check_dir_for(dir, CheckOptions::default())
}

/// [`check_dir`] under `options` (an interactsh server configured or not).
pub fn check_dir_for(dir: &Path, options: CheckOptions) -> (LoadReport, CheckSummary) {
    let report = load_dir(dir);
    let summary = CheckSummary::from_report_for(&report, options);
    (report, summary)
}
