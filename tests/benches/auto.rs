//! `full` against `auto` on the stack lab (issue 35): per lab host, the
//! requests the host received, the minutes they take at the per-host
//! ceiling, and the findings of each engine; and the requests of the
//! detection stage alone. Everything runs in-process with the scanner's
//! own library: the node's probe, `auto::detect`, `auto::plan` and the
//! engine, on the public corpus.
//!
//! `cargo bench -p scanfleet-tests --bench auto` (release). Settings:
//! `SCANFLEET_CORPUS` (default `../shared/corpus/nuclei-templates/http`
//! beside the checkout), `BENCH_RPS` (per-host ceiling, 50; 0 for none:
//! minutes are then requests / 50), `BENCH_HOSTS` (comma-separated subset).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scanfleet_engine::engine::load::load_templates_for;
use scanfleet_engine::engine::{CompiledTemplate, Engine, EngineConfig};
use scanfleet_engine::template::CheckOptions;
use scanfleet_http::{ClientConfig, TargetUrl};
use scanfleet_scanner::auto::plan::{auto_plan, left_out_counts};
use scanfleet_scanner::auto::techmap::TechMap;
use scanfleet_scanner::node::probe::probe;
use scanfleet_tests::stacks::{stack_hosts, StackLab};

fn corpus() -> PathBuf {
    if let Ok(p) = std::env::var("SCANFLEET_CORPUS") {
        return p.into();
    }
    let beside =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/nuclei-templates/http");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared/corpus/nuclei-templates/http")
}

fn engine(lab: &StackLab, rps: Option<u32>) -> Engine {
    let mut client = ClientConfig::default();
    for (k, v) in lab.node_env(&stack_hosts()) {
        match k.as_str() {
            "SCANFLEET_SCANNER__HOSTS" => {
                client.hosts = ClientConfig::parse_hosts(&v).expect("hosts");
            }
            "SCANFLEET_SCANNER__CONNECT_TO" => {
                client.connect_to = ClientConfig::parse_connect_to(&v).expect("connect-to");
            }
            _ => {}
        }
    }
    client.hosts_only = true;
    client.allow_private = true;
    client.per_host_rps = rps;
    Engine::new(EngineConfig {
        client,
        ..EngineConfig::default()
    })
    .expect("engine")
}

type Keys = BTreeSet<String>;

fn keys(results: &[scanfleet_engine::engine::ScanResult]) -> Keys {
    results
        .iter()
        .map(|r| format!("{} {}", r.template_id, r.matched_at))
        .collect()
}

struct Run {
    requests: u64,
    detect_requests: u64,
    seconds: f64,
    findings: Keys,
    templates: usize,
}

async fn full(
    engine: &Engine,
    lab: &StackLab,
    host: &str,
    templates: &[Arc<CompiledTemplate>],
) -> Run {
    let before = lab.requests(host);
    let started = Instant::now();
    let live = probe(engine.client(), host, Duration::from_secs(15))
        .await
        .expect("probe");
    let report = engine
        .run(templates, std::slice::from_ref(&live.base))
        .await;
    Run {
        requests: lab.requests(host) - before,
        detect_requests: 0,
        seconds: started.elapsed().as_secs_f64(),
        findings: keys(&report.results),
        templates: templates.len(),
    }
}

async fn auto(
    engine: &Engine,
    lab: &StackLab,
    host: &str,
    map: &TechMap,
    left_out: &BTreeMap<String, u64>,
) -> (Run, Vec<String>) {
    let before = lab.requests(host);
    let started = Instant::now();
    let live = probe(engine.client(), host, Duration::from_secs(15))
        .await
        .expect("probe");
    let hosts = vec![(live.host.clone(), live.base.clone(), live.seen.clone())];
    let detection = scanfleet_scanner::auto::detect(
        engine,
        map,
        &hosts,
        tokio_util::sync::CancellationToken::new(),
        |_, _| {},
    )
    .await;
    let detect_requests = lab.requests(host) - before;
    let techs = detection
        .technologies
        .get(host)
        .cloned()
        .unwrap_or_default();
    let plan = auto_plan(map, &techs, left_out);
    let report = engine
        .run(&plan.templates, &[live.base.clone() as TargetUrl])
        .await;
    let mut findings = keys(&report.results);
    findings.extend(keys(&detection.results));
    let names = techs
        .iter()
        .map(|t| match &t.version {
            Some(v) => format!("{} {v}", t.name),
            None => t.name.clone(),
        })
        .collect();
    (
        Run {
            requests: lab.requests(host) - before,
            detect_requests,
            seconds: started.elapsed().as_secs_f64(),
            findings,
            templates: plan.run as usize,
        },
        names,
    )
}

#[tokio::main]
async fn main() {
    let corpus = corpus();
    let rps: Option<u32> = match std::env::var("BENCH_RPS").ok().as_deref() {
        Some("0") => None,
        Some(v) => Some(v.parse().expect("BENCH_RPS")),
        None => Some(50),
    };
    let hosts: Vec<&str> = match std::env::var("BENCH_HOSTS") {
        Ok(list) => stack_hosts()
            .into_iter()
            .filter(|h| list.split(',').any(|x| h.starts_with(x.trim())))
            .collect(),
        Err(_) => stack_hosts(),
    };
    let started = Instant::now();
    let loaded =
        load_templates_for(std::slice::from_ref(&corpus), CheckOptions::default()).expect("corpus");
    let left_out = left_out_counts(&loaded.left_out);
    let map = TechMap::build(&loaded.templates);
    println!(
        "corpus {}: {} runnable, left out {left_out:?}; loaded and mapped in {:.1} s; \
         detection stage {} templates, baseline {}",
        corpus.display(),
        loaded.templates.len(),
        started.elapsed().as_secs_f64(),
        map.detect_stage().len(),
        map.baseline().len()
    );
    let lab = StackLab::start().await;
    let engine = engine(&lab, rps);
    let templates = &loaded.templates;

    // Each engine on every host at once: the lab counts per host.
    let fulls =
        futures::future::join_all(hosts.iter().map(|h| full(&engine, &lab, h, templates))).await;
    let autos = futures::future::join_all(
        hosts
            .iter()
            .map(|h| auto(&engine, &lab, h, &map, &left_out)),
    )
    .await;

    let per_min = f64::from(rps.unwrap_or(50)) * 60.0;
    println!(
        "\n| host | full requests | full min | full findings | auto requests | auto min | \
         auto findings | detection requests | auto templates | same findings | technologies |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let (mut total_full, mut total_auto) = (0u64, 0u64);
    for ((host, f), (a, techs)) in hosts.iter().zip(&fulls).zip(&autos) {
        total_full += f.requests;
        total_auto += a.requests;
        let minutes = |r: &Run| match rps {
            Some(_) => r.seconds / 60.0,
            None => r.requests as f64 / per_min,
        };
        println!(
            "| {host} | {} | {:.1} | {} | {} | {:.1} | {} | {} | {} of {} | {} | {} |",
            f.requests,
            minutes(f),
            f.findings.len(),
            a.requests,
            minutes(a),
            a.findings.len(),
            a.detect_requests,
            a.templates,
            f.templates,
            if f.findings == a.findings {
                "yes"
            } else {
                "NO"
            },
            techs.join(", ")
        );
    }
    println!(
        "\nall hosts: full {total_full} requests, auto {total_auto} ({:.1}% of full)",
        100.0 * total_auto as f64 / total_full.max(1) as f64
    );
    for ((host, f), (a, _)) in hosts.iter().zip(&fulls).zip(&autos) {
        println!("\n{host} full findings:");
        for k in &f.findings {
            let mark = if a.findings.contains(k) { " " } else { "-" };
            println!("  {mark} {k}");
        }
        for k in a.findings.difference(&f.findings) {
            println!("  + {k}");
        }
    }
}
