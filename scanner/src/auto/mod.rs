//! The `auto` engine's parts: technology detection, the technology ->
//! templates map, and each host's plan with the account of what it skips.
//!
//! A scan of engine `auto` runs `DETECT` after `PROBE`: the detection
//! templates of the node's set (those under `technologies/` or tagged
//! `tech`, minus those that only make sense under a parent, such as
//! WordPress plugins) on every live host, plus what the probe saw. Each
//! host then runs, in `VALIDATE`, the templates of its technologies
//! ([`techmap`]) and the technology-independent baseline
//! ([`techmap::BASELINE_DIRS`]); a host where nothing was detected runs the
//! baseline. [`plan`] counts what was not run and why, for the coverage.
//!
//! # Layout
//! - [`techmap`]: the map, built from the loaded templates.
//! - [`detect`]: technologies with their evidence.
//! - [`plan`]: a host's templates and skip reasons.

pub mod detect;
pub mod plan;
pub mod techmap;

use std::collections::BTreeMap;

use scanfleet_common::events::TechnologyEvent;
use scanfleet_engine::engine::{Engine, Event, ScanResult};
use scanfleet_http::TargetUrl;
use tokio_util::sync::CancellationToken;

use techmap::TechMap;

/// What `DETECT` found on each host (by the host name of its base URL).
#[derive(Debug, Default)]
pub struct Detection {
    pub technologies: BTreeMap<String, Vec<TechnologyEvent>>,
    /// The detection templates' own results: findings like any other.
    pub results: Vec<ScanResult>,
}

/// Runs the map's detection templates on `hosts` (host name, base URL,
/// what the probe saw) and joins their results with the probe's.
/// `on_progress` gets (done, total) of the engine's jobs.
pub async fn detect(
    engine: &Engine,
    map: &TechMap,
    hosts: &[(String, TargetUrl, Vec<TechnologyEvent>)],
    cancel: CancellationToken,
    mut on_progress: impl FnMut(usize, usize),
) -> Detection {
    let templates = map
        .detect_stage()
        .into_iter()
        .map(|i| map.templates[i].clone())
        .collect();
    let targets: Vec<TargetUrl> = hosts.iter().map(|(_, base, _)| base.clone()).collect();
    let mut found: BTreeMap<String, Vec<TechnologyEvent>> = hosts
        .iter()
        .map(|(h, _, seen)| (h.clone(), seen.clone()))
        .collect();
    let mut results = Vec::new();
    let mut rx = engine.start(templates, targets, cancel);
    while let Some(event) = rx.recv().await {
        match event {
            Event::Result(r) => {
                let host = host_name(&r.host);
                found
                    .entry(host)
                    .or_default()
                    .extend(detect::from_result(map, &r));
                results.push(r);
            }
            Event::Progress { done, total } => on_progress(done, total),
            Event::Error(_) => {}
        }
    }
    Detection {
        technologies: found
            .into_iter()
            .map(|(h, list)| (h, detect::merge(list)))
            .collect(),
        results,
    }
}

/// `http://shop.example.test:8080/x` -> `shop.example.test`.
pub fn host_name(input: &str) -> String {
    let rest = input.split_once("://").map_or(input, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.split(':').next().unwrap_or(authority),
    };
    host.to_ascii_lowercase()
}
