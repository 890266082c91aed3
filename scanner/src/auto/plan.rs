//! Which templates run on a host, and the account of those that do not.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use scanfleet_common::events::TechnologyEvent;
use scanfleet_engine::engine::load::LeftOut;
use scanfleet_engine::engine::CompiledTemplate;
use scanfleet_engine::template::Reason;

use super::techmap::TechMap;

/// Skip reasons, as the coverage reports them.
pub const TECHNOLOGY_ABSENT: &str = "technology_absent";
pub const NEEDS_OOB: &str = "needs_oob";
pub const NEEDS_WORDLIST: &str = "needs_wordlist";
pub const UNSUPPORTED_PROTOCOL: &str = "unsupported_protocol";
pub const UNSUPPORTED_FEATURE: &str = "unsupported_feature";
pub const UNREADABLE: &str = "unreadable";
pub const BRUTE_FORCE: &str = "brute_force";
/// Outside the engine's selection (`quick`: below medium; `recon`: not a
/// technology template).
pub const NOT_SELECTED: &str = "not_selected";

/// The coverage reason of a template left out at load time.
pub fn left_out_reason(left: &LeftOut) -> &'static str {
    match left {
        LeftOut::NotRunnable { reason, .. } => match reason.primary() {
            Reason::Interactsh => NEEDS_OOB,
            Reason::MissingPayloadFile => NEEDS_WORDLIST,
            Reason::UnsupportedProtocol(_)
            | Reason::NoHttpRequests
            | Reason::SelfContained
            | Reason::FixedHost => UNSUPPORTED_PROTOCOL,
            Reason::ParseError => UNREADABLE,
            _ => UNSUPPORTED_FEATURE,
        },
        LeftOut::Pack { .. } | LeftOut::Unreadable(_) | LeftOut::Compile(_) => UNREADABLE,
    }
}

/// Templates left out at load, counted by coverage reason.
pub fn left_out_counts(left_out: &[LeftOut]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for l in left_out {
        *counts.entry(left_out_reason(l).to_string()).or_insert(0) += 1;
    }
    counts
}

/// One host's templates and the account of the rest.
#[derive(Debug, Clone)]
pub struct HostPlan {
    /// What runs in `VALIDATE` (the detection templates ran already).
    pub templates: Vec<Arc<CompiledTemplate>>,
    /// Templates run on the host in all: detection plus `templates`.
    pub run: u64,
    /// Templates not run, by reason, load-time reasons included.
    pub skipped: BTreeMap<String, u64>,
}

impl HostPlan {
    /// Every template the node holds, runnable or not.
    pub fn total(&self) -> u64 {
        self.run + self.skipped.values().sum::<u64>()
    }
}

/// The `auto` engine's choice for a host with `technologies`: its
/// technologies' templates and the baseline, never the detection
/// templates again, never a brute force.
pub fn auto_plan(
    map: &TechMap,
    technologies: &[TechnologyEvent],
    left_out: &BTreeMap<String, u64>,
) -> HostPlan {
    let detect: BTreeSet<usize> = map.detect_stage().into_iter().collect();
    let mut chosen: BTreeSet<usize> = map.baseline().into_iter().collect();
    for t in technologies {
        chosen.extend(map.templates_of(&t.name));
    }
    let mut brute = 0u64;
    chosen.retain(|i| {
        if detect.contains(i) {
            return false;
        }
        if map.is_brute_force(*i) {
            brute += 1;
            return false;
        }
        true
    });
    let run = (detect.len() + chosen.len()) as u64;
    let mut skipped = left_out.clone();
    let absent = (map.len() as u64).saturating_sub(run + brute);
    if absent > 0 {
        skipped.insert(TECHNOLOGY_ABSENT.to_string(), absent);
    }
    if brute > 0 {
        skipped.insert(BRUTE_FORCE.to_string(), brute);
    }
    HostPlan {
        templates: chosen
            .into_iter()
            .map(|i| map.templates[i].clone())
            .collect(),
        run,
        skipped,
    }
}

/// The account of a fixed selection (`full`, `quick`, `recon`): `run` of
/// the `runnable` ran, the rest were not selected.
pub fn fixed_plan(
    runnable: usize,
    selected: Vec<Arc<CompiledTemplate>>,
    left_out: &BTreeMap<String, u64>,
) -> HostPlan {
    let run = selected.len() as u64;
    let mut skipped = left_out.clone();
    let rest = (runnable as u64).saturating_sub(run);
    if rest > 0 {
        skipped.insert(NOT_SELECTED.to_string(), rest);
    }
    HostPlan {
        templates: selected,
        run,
        skipped,
    }
}
