//! The pack run end to end by the engine against the lab: every template
//! fires on its vulnerable route, and no template fires on any hardened or
//! catch-all route.

use std::path::Path;
use std::sync::Arc;

use scanfleet_engine::engine::{CompiledTemplate, Engine, EngineConfig, ScanResult};
use scanfleet_engine::{pack, template};
use scanfleet_http::TargetUrl;

use super::lab::Lab;

/// The pack, loaded and compiled the way the CLI does it.
fn compiled_pack() -> Vec<(String, Arc<CompiledTemplate>)> {
    pack::default_pack()
        .iter()
        .map(|(path, yaml)| {
            let loaded = template::parse_str(yaml, Path::new(path))
                .unwrap_or_else(|e| panic!("{path} does not load: {e}"));
            if let Err(reason) = template::check(&loaded) {
                panic!("{path} is not runnable: {reason}");
            }
            let id = loaded.id.clone();
            let compiled = CompiledTemplate::compile(loaded)
                .unwrap_or_else(|e| panic!("{path} does not compile: {e}"));
            (id, Arc::new(compiled))
        })
        .collect()
}

/// Whether the pack template `id` declares extractors.
fn has_extractors(id: &str) -> bool {
    pack::default_pack()
        .iter()
        .find(|(_, yaml)| pack::top_level_id(yaml) == Some(id))
        .is_some_and(|(_, yaml)| yaml.contains("\n    extractors:"))
}

fn lab_engine() -> Engine {
    let mut config = EngineConfig::default();
    // The lab listens on loopback, which the engine refuses by default.
    config.client.allow_private = true;
    Engine::new(config).expect("engine")
}

fn target(url: &str) -> TargetUrl {
    TargetUrl::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn describe(results: &[ScanResult]) -> String {
    results
        .iter()
        .map(|r| format!("{} at {}", r.template_id, r.matched_at))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pack_template_fires_on_its_vulnerable_route_and_stays_silent_on_the_hardened_ones() {
    let lab = Lab::start().await.expect("start the lab");
    let engine = lab_engine();
    let mut failures = Vec::new();
    for (id, compiled) in compiled_pack() {
        let vulnerable = lab.vulnerable_url(&id);
        let hardened = lab.hardened_url(&id);
        let catchall = lab.catchall_url(&id);
        let report = engine
            .run(
                &[compiled],
                &[target(&vulnerable), target(&hardened), target(&catchall)],
            )
            .await;
        if !report.errors.is_empty() {
            failures.push(format!("{id}: target errors {:?}", report.errors));
        }
        let on = |base: &str| -> Vec<ScanResult> {
            report
                .results
                .iter()
                .filter(|r| r.matched_at.starts_with(&format!("{base}/")) || r.matched_at == base)
                .cloned()
                .collect()
        };
        let fired = on(&vulnerable);
        if fired.is_empty() {
            failures.push(format!("{id}: silent on its vulnerable route"));
        }
        // Extractors are there to report versions, names and keys: each must
        // find its value on the vulnerable fixture.
        if has_extractors(&id) && fired.iter().all(|r| r.extracted_results.is_empty()) {
            failures.push(format!(
                "{id}: extractors found nothing on the vulnerable route"
            ));
        }
        if let Some(other) = fired.iter().find(|r| r.template_id != id) {
            failures.push(format!("{id}: reported as {}", other.template_id));
        }
        for (label, base) in [("hardened", &hardened), ("catch-all", &catchall)] {
            let false_positives = on(base);
            if !false_positives.is_empty() {
                failures.push(format!(
                    "{id}: fires on the {label} route: {}",
                    describe(&false_positives)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// All templates at once (so clustering of shared requests is exercised)
/// against every hardened case and the catch-all site: nothing may fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_pack_is_silent_on_every_hardened_route() {
    let lab = Lab::start().await.expect("start the lab");
    let engine = lab_engine();
    let templates: Vec<_> = compiled_pack().into_iter().map(|(_, t)| t).collect();
    let mut targets: Vec<TargetUrl> = super::lab::CASES
        .iter()
        .map(|case| target(&lab.hardened_url(case)))
        .collect();
    targets.push(target(&lab.catchall_url("any-case")));
    let report = engine.run(&templates, &targets).await;
    assert!(
        report.errors.is_empty(),
        "target errors: {:?}",
        report.errors
    );
    assert!(
        report.results.is_empty(),
        "false positives: {}",
        describe(&report.results)
    );
}

/// The same run on the vulnerable routes: each case yields its own finding
/// (other templates may legitimately fire there too, e.g. missing headers on
/// a default page), so the whole pack finds every case in one clustered run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_pack_finds_every_vulnerable_case_in_one_run() {
    let lab = Lab::start().await.expect("start the lab");
    let engine = lab_engine();
    let templates: Vec<_> = compiled_pack().into_iter().map(|(_, t)| t).collect();
    let targets: Vec<TargetUrl> = super::lab::CASES
        .iter()
        .map(|case| target(&lab.vulnerable_url(case)))
        .collect();
    let report = engine.run(&templates, &targets).await;
    assert!(
        report.errors.is_empty(),
        "target errors: {:?}",
        report.errors
    );
    let missing: Vec<&str> = super::lab::CASES
        .iter()
        .copied()
        .filter(|case| {
            let base = lab.vulnerable_url(case);
            !report.results.iter().any(|r| {
                r.template_id == *case
                    && (r.matched_at == base || r.matched_at.starts_with(&format!("{base}/")))
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "cases not found in the clustered run: {missing:?}"
    );
}
