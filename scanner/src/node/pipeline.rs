//! One scan, stage by stage: `RESOLVE`, `DISCOVER` (when the engine
//! discovers), `PROBE`, `DETECT` (the `auto` engine), `VALIDATE`, `REPORT`.
//! Each stage is announced with its `current_tool`, reports progress as
//! planned versus done work, and stops at its next step once the scan's
//! token is cancelled. Once `VALIDATE` is over, each live host's coverage
//! (technologies, templates run and skipped, requests) is reported, in the
//! write that ends the scan.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use scanfleet_common::chain::Chain;
use scanfleet_common::events::{CoverageEvent, FindingEvent, Stage, TechnologyEvent};
use scanfleet_common::jobs::ScanJob;
use tokio_util::sync::CancellationToken;

use super::control::ScanControl;
use super::discover::{self, lookup};
use super::engines::{progress, stage_deadline, EngineSpec};
use super::probe::{probe, LiveHost};
use super::sink::EventSink;
use super::{Node, NodeError};
use scanfleet_engine::engine::{CompiledTemplate, Engine, Event, Interactsh, OobTiming};
use scanfleet_http::TargetUrl;
use scanfleet_interactsh::{Session, SessionConfig};

use crate::auto::plan::{auto_plan, fixed_plan, HostPlan};

/// How a scan's work ended (the terminal status follows from it).
#[derive(Debug)]
pub enum Outcome {
    Completed,
    Failed(String),
    /// The token was cancelled: the control says why.
    Cancelled,
}

/// Findings are sent in batches of at most this many events.
const FINDING_BATCH: usize = 200;

pub async fn run(
    node: &Node,
    job: &ScanJob,
    spec: EngineSpec,
    sink: &EventSink,
    control: &ScanControl,
) -> Result<Outcome, NodeError> {
    let stages = spec.stages();
    let cancel = &control.token;
    let client = node.engine.client();
    let dns_timeout = Duration::from_millis(node.settings.scanner.dns_timeout_ms);
    let domain = job.domain.as_str();

    let mut timer = StageTimer::start(Stage::Resolve);
    // RESOLVE
    sink.progress(Stage::Resolve, 0, "dns").await?;
    let resolved = sink
        .meanwhile(tokio::time::timeout(
            stage_deadline(Stage::Resolve),
            lookup_with_retry(client, domain, dns_timeout),
        ))
        .await?
        .ok()
        .flatten();
    if resolved.is_none() {
        return Ok(Outcome::Failed(format!(
            "{domain} does not resolve to an address the scanner may reach \
             (no DNS answer within {dns_timeout:?}, or only non-public addresses)"
        )));
    }
    if cancel.is_cancelled() {
        return Ok(Outcome::Cancelled);
    }
    sink.progress(
        Stage::Resolve,
        progress(&stages, Stage::Resolve, 1, 1),
        "dns",
    )
    .await?;

    timer.next(Stage::Discover);
    // DISCOVER
    let mut hosts = vec![domain.to_string()];
    if spec.discover {
        hosts.extend(discover_hosts(node, &stages, domain, sink, cancel).await?);
        if cancel.is_cancelled() {
            return Ok(Outcome::Cancelled);
        }
    }

    // Politeness: the target's ceiling on every host of the scan for all
    // of its work (probe, detection, templates), lifted at the end, when
    // the connections kept alive to them are closed too.
    let _hosts = ScanHosts::hold(client, &hosts, job.max_rps_per_host);
    let before: BTreeMap<String, u64> = hosts
        .iter()
        .map(|h| (h.to_ascii_lowercase(), client.requests_sent_to(h)))
        .collect();

    timer.next(Stage::Probe);
    // PROBE
    let (live, misses) = probe_hosts(node, &stages, &hosts, sink, cancel).await?;
    if cancel.is_cancelled() {
        return Ok(Outcome::Cancelled);
    }
    if live.is_empty() {
        return Ok(Outcome::Failed(no_host_answered(
            domain,
            hosts.len(),
            &misses,
        )));
    }

    // DETECT (auto): technologies per host, then each host's own plan.
    // What the probe saw, for every engine; `auto` adds its detection.
    let mut technologies: BTreeMap<String, Vec<TechnologyEvent>> = live
        .iter()
        .map(|h| (h.host.clone(), h.seen.clone()))
        .collect();
    if spec.selection.detects() {
        timer.next(Stage::Detect);
        technologies = detect_stage(node, &stages, &live, sink, cancel).await?;
        if cancel.is_cancelled() {
            return Ok(Outcome::Cancelled);
        }
    }
    let plans = plan_hosts(node, job, spec, &live, &technologies);

    timer.next(Stage::Validate);
    // VALIDATE
    let groups = group_by_templates(&live, &plans);
    validate(node, &stages, groups, sink, cancel).await?;
    if cancel.is_cancelled() {
        return Ok(Outcome::Cancelled);
    }
    report_coverage(node, &plans, &mut technologies, &before, sink);

    timer.next(Stage::Report);
    // REPORT: the counts are the ingester's; the node says it is done.
    sink.progress(Stage::Report, 99, "report").await?;
    Ok(Outcome::Completed)
}

/// DISCOVER: the subdomains and linked hosts of `domain`, within the
/// stage's deadline (what was found by then, and an error event, past it).
async fn discover_hosts(
    node: &Node,
    stages: &[Stage],
    domain: &str,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> Result<BTreeSet<String>, NodeError> {
    let tool = "subdomains";
    let dns_timeout = Duration::from_millis(node.settings.scanner.dns_timeout_ms);
    sink.progress(
        Stage::Discover,
        progress(stages, Stage::Discover, 0, 1),
        tool,
    )
    .await?;
    let mut last = (0, 1);
    let found = sink
        .meanwhile(tokio::time::timeout(
            stage_deadline(Stage::Discover),
            discover::discover(
                node.engine.client(),
                domain,
                dns_timeout,
                node.settings.scanner.dns_concurrency,
                cancel,
                |done, planned| last = (done, planned),
            ),
        ))
        .await?;
    let hosts = match found {
        Ok(found) => found,
        Err(_) => {
            sink.error(
                Stage::Discover,
                "discovery ran out of time; scanning the hosts found so far".into(),
            )
            .await?;
            BTreeSet::new()
        }
    };
    sink.progress(
        Stage::Discover,
        progress(stages, Stage::Discover, last.0.max(1), last.1.max(1)),
        tool,
    )
    .await?;
    Ok(hosts)
}

/// Records how long each stage took (`scanfleet_scanner_stage_duration_seconds`);
/// the running stage is recorded when the timer moves on or is dropped.
struct StageTimer {
    stage: Stage,
    started: std::time::Instant,
}

impl StageTimer {
    fn start(stage: Stage) -> StageTimer {
        StageTimer {
            stage,
            started: std::time::Instant::now(),
        }
    }

    fn next(&mut self, stage: Stage) {
        self.record();
        self.stage = stage;
        self.started = std::time::Instant::now();
    }

    fn record(&self) {
        metrics::histogram!(
            "scanfleet_scanner_stage_duration_seconds",
            "stage" => self.stage.as_str()
        )
        .record(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for StageTimer {
    fn drop(&mut self) {
        self.record();
    }
}

/// DNS of the domain itself, asked twice: one lost packet must not fail a scan.
async fn lookup_with_retry(
    client: &scanfleet_http::HttpClient,
    domain: &str,
    timeout: Duration,
) -> Option<Vec<std::net::IpAddr>> {
    match lookup(client, domain, timeout).await {
        Some(ips) => Some(ips),
        None => lookup(client, domain, timeout).await,
    }
}

/// The failure of a scan none of whose hosts answered, with why the first
/// of them did not (the rest went to the scan's event stream).
fn no_host_answered(domain: &str, tried: usize, misses: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut text =
        format!("no host of {domain} answered over HTTPS or HTTP ({tried} host(s) tried)");
    if !misses.is_empty() {
        text.push_str(": ");
        text.push_str(&misses[..misses.len().min(SHOWN)].join("; "));
        if misses.len() > SHOWN {
            text.push_str(&format!("; and {} more", misses.len() - SHOWN));
        }
    }
    text
}

/// The hosts that answered, sorted, and why each of the others did not.
async fn probe_hosts(
    node: &Node,
    stages: &[Stage],
    hosts: &[String],
    sink: &EventSink,
    cancel: &CancellationToken,
) -> Result<(Vec<LiveHost>, Vec<String>), NodeError> {
    use futures::StreamExt;
    let tool = "http-probe";
    sink.progress(
        Stage::Probe,
        progress(stages, Stage::Probe, 0, hosts.len()),
        tool,
    )
    .await?;
    let client = node.engine.client().clone();
    let per_host = Duration::from_secs(15);
    let deadline = tokio::time::Instant::now() + stage_deadline(Stage::Probe);
    let mut results = futures::stream::iter(hosts.to_vec())
        .map(move |host| {
            let client = client.clone();
            async move { probe(&client, &host, per_host).await }
        })
        .buffer_unordered(8);
    let mut live = Vec::new();
    let mut misses = Vec::new();
    let mut done = 0;
    loop {
        let next = tokio::select! {
            next = sink.meanwhile(results.next()) => next?,
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep_until(deadline) => {
                sink.error(Stage::Probe, "probing ran out of time".into()).await?;
                break;
            }
        };
        let Some(result) = next else { break };
        done += 1;
        let mut found = Vec::new();
        match result {
            Ok(host) => {
                found.push(host.finding.clone());
                live.push(host);
            }
            // The event stream carries text: this is the edge.
            Err(miss) => {
                let text = Chain(&miss).to_string();
                sink.error(Stage::Probe, text.clone()).await?;
                misses.push(text);
            }
        }
        sink.progress_with(
            Stage::Probe,
            progress(stages, Stage::Probe, done, hosts.len()),
            tool,
            found,
        )
        .await?;
    }
    live.sort_by(|a, b| a.host.cmp(&b.host));
    Ok((live, misses))
}

/// Each live host's templates: `auto` from its technologies, the other
/// engines their fixed selection.
fn plan_hosts(
    node: &Node,
    job: &ScanJob,
    spec: EngineSpec,
    live: &[LiveHost],
    technologies: &BTreeMap<String, Vec<TechnologyEvent>>,
) -> Vec<(String, HostPlan)> {
    if spec.selection.detects() {
        return live
            .iter()
            .map(|h| {
                let techs = technologies.get(&h.host).cloned().unwrap_or_default();
                (
                    h.host.clone(),
                    auto_plan(&node.techmap, &techs, &node.left_out),
                )
            })
            .collect();
    }
    let templates = spec.select(&node.templates, &job.templates);
    live.iter()
        .map(|h| {
            (
                h.host.clone(),
                fixed_plan(node.templates.len(), templates.clone(), &node.left_out),
            )
        })
        .collect()
}

/// Templates and the hosts that run them in one engine run.
type Group = (Vec<Arc<CompiledTemplate>>, Vec<TargetUrl>);

/// A scan's hold on its hosts in the node's client: the target's request
/// ceiling while it runs (when it has one); when dropped, however the
/// scan ended, the ceiling lifted and the idle connections to the hosts
/// closed rather than left open on the target until the pool drops them.
struct ScanHosts {
    client: scanfleet_http::HttpClient,
    hosts: Vec<String>,
    limited: bool,
}

impl ScanHosts {
    fn hold(client: &scanfleet_http::HttpClient, hosts: &[String], rps: Option<u32>) -> ScanHosts {
        if let Some(rps) = rps {
            for h in hosts {
                client.limit_host(h, rps);
            }
        }
        ScanHosts {
            client: client.clone(),
            hosts: hosts.to_vec(),
            limited: rps.is_some(),
        }
    }
}

impl Drop for ScanHosts {
    fn drop(&mut self) {
        if self.limited {
            for h in &self.hosts {
                self.client.unlimit_host(h);
            }
        }
        self.client.close_idle_to(&self.hosts);
    }
}

/// DETECT: the detection templates on every live host, joined with what
/// the probe saw; their results are findings like any other.
async fn detect_stage(
    node: &Node,
    stages: &[Stage],
    live: &[LiveHost],
    sink: &EventSink,
    cancel: &CancellationToken,
) -> Result<BTreeMap<String, Vec<TechnologyEvent>>, NodeError> {
    let tool = "tech-detect";
    sink.progress(Stage::Detect, progress(stages, Stage::Detect, 0, 1), tool)
        .await?;
    let hosts: Vec<(String, TargetUrl, Vec<TechnologyEvent>)> = live
        .iter()
        .map(|h| (h.host.clone(), h.base.clone(), h.seen.clone()))
        .collect();
    let mut last = (0, 1);
    let found = sink
        .meanwhile(tokio::time::timeout(
            stage_deadline(Stage::Detect),
            crate::auto::detect(
                &node.engine,
                &node.techmap,
                &hosts,
                cancel.child_token(),
                |done, total| last = (done, total),
            ),
        ))
        .await?;
    let detection = match found {
        Ok(d) => d,
        Err(_) => {
            sink.error(
                Stage::Detect,
                "detection ran out of time; the hosts get the baseline and what the probe saw"
                    .into(),
            )
            .await?;
            crate::auto::Detection {
                technologies: hosts.into_iter().map(|(h, _, seen)| (h, seen)).collect(),
                results: Vec::new(),
            }
        }
    };
    let findings = detection
        .results
        .iter()
        .map(|r| {
            let mut f = r.to_finding_event();
            f.host = host_name(&f.host);
            f
        })
        .collect();
    sink.findings(findings).await?;
    sink.progress(
        Stage::Detect,
        progress(stages, Stage::Detect, last.0.max(1), last.1.max(1)),
        tool,
    )
    .await?;
    Ok(detection.technologies)
}

/// Hosts with the same templates run together (one engine run, so its
/// clustering and request cache work across them).
fn group_by_templates(live: &[LiveHost], plans: &[(String, HostPlan)]) -> Vec<Group> {
    let mut groups: BTreeMap<Vec<String>, Group> = BTreeMap::new();
    for (host, plan) in plans {
        let Some(h) = live.iter().find(|l| &l.host == host) else {
            continue;
        };
        let key: Vec<String> = plan
            .templates
            .iter()
            .map(|t| t.template.id.clone())
            .collect();
        groups
            .entry(key)
            .or_insert_with(|| (plan.templates.clone(), Vec::new()))
            .1
            .push(h.base.clone());
    }
    groups
        .into_values()
        .filter(|(t, _)| !t.is_empty())
        .collect()
}

/// One coverage event per live host, once its templates finished, held
/// for the write that ends the scan.
fn report_coverage(
    node: &Node,
    plans: &[(String, HostPlan)],
    technologies: &mut BTreeMap<String, Vec<TechnologyEvent>>,
    before: &BTreeMap<String, u64>,
    sink: &EventSink,
) {
    let client = node.engine.client();
    for (host, plan) in plans {
        let sent = client.requests_sent_to(host);
        let requests = sent.saturating_sub(before.get(host).copied().unwrap_or(0));
        sink.coverage(CoverageEvent {
            host: host.clone(),
            technologies: technologies.remove(host).unwrap_or_default(),
            total: plan.total(),
            run: plan.run,
            skipped: plan.skipped.clone(),
            requests,
        });
    }
}

async fn validate(
    node: &Node,
    stages: &[Stage],
    groups: Vec<Group>,
    sink: &EventSink,
    cancel: &CancellationToken,
) -> Result<(), NodeError> {
    let tool = "templates";
    sink.progress(
        Stage::Validate,
        progress(stages, Stage::Validate, 0, 1),
        tool,
    )
    .await?;
    let engine = sink.meanwhile(scan_engine(node)).await?;
    // One engine run per group of hosts; their events meet in one channel
    // (each forwarder holds a sender; it closes when every run is over).
    let (tx, mut events) = tokio::sync::mpsc::channel::<(usize, Event)>(1024);
    let runs = groups.len();
    for (gi, (templates, targets)) in groups.into_iter().enumerate() {
        let mut rx = engine.start(templates, targets, cancel.child_token());
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                if tx.send((gi, e)).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut counts: Vec<(usize, usize)> = vec![(0, 0); runs];
    let mut batch: Vec<FindingEvent> = Vec::new();
    let mut failed_requests = 0usize;
    while let Some((gi, event)) = sink.meanwhile(events.recv()).await? {
        let event = match event {
            Event::Progress { done, total } => {
                counts[gi] = (done, total);
                let (done, total) = counts
                    .iter()
                    .fold((0, 0), |(d, t), (d1, t1)| (d + d1, t + t1));
                Event::Progress { done, total }
            }
            other => other,
        };
        match event {
            Event::Result(r) => {
                let mut finding = r.to_finding_event();
                // The engine names the input URL; findings are grouped by
                // host name (intel, reports), as probe findings are.
                finding.host = host_name(&finding.host);
                batch.push(finding);
            }
            Event::Error(_) => {
                failed_requests += 1;
                metrics::counter!("scanfleet_scanner_requests_failed_total").increment(1);
            }
            Event::Progress { done, total } => {
                metrics::counter!("scanfleet_scanner_template_jobs_total").increment(1);
                sink.progress_with(
                    Stage::Validate,
                    progress(stages, Stage::Validate, done, total),
                    tool,
                    std::mem::take(&mut batch),
                )
                .await?;
            }
        }
        if batch.len() >= FINDING_BATCH {
            sink.findings(std::mem::take(&mut batch)).await?;
        }
    }
    // Findings already found are kept even when the scan was stopped: the
    // ingester drops only those that reach the stream after the stop.
    sink.findings(batch).await?;
    if let Some(oob) = engine.interactsh() {
        if let Err(e) = oob.session.deregister().await {
            tracing::warn!(error = %e, "deregistering from the interactsh server failed");
        }
    }
    if failed_requests > 0 {
        tracing::debug!(failed_requests, "template requests failed");
    }
    Ok(())
}

/// The node's engine with an interactsh session of this scan's own, when
/// the node has a server (`SCANFLEET_SCANNER__INTERACTSH_SERVER`). A server
/// that cannot be reached only costs the out-of-band templates: their
/// requests are then skipped (unresolved `{{interactsh-url}}`), the rest
/// of the scan runs.
async fn scan_engine(node: &Node) -> Engine {
    let scanner = &node.settings.scanner;
    let Some(server) = &scanner.interactsh_server else {
        return node.engine.clone();
    };
    let config = SessionConfig {
        server_url: server.clone(),
        token: scanner
            .interactsh_token
            .as_ref()
            .map(|t| t.expose().to_string()),
        payload_domain: scanner.interactsh_domain.clone(),
        ..SessionConfig::default()
    };
    match Session::register_with(config).await {
        Ok(session) => node.engine.with_interactsh(Interactsh {
            session: Arc::new(session),
            timing: OobTiming::default(),
        }),
        Err(e) => {
            tracing::warn!(error = %e, server, "registering with the interactsh server failed");
            node.engine.clone()
        }
    }
}

use crate::auto::host_name;

#[cfg(test)]
mod tests {
    use super::{host_name, no_host_answered};

    #[test]
    fn a_scan_no_host_answered_says_why_for_the_first_three() {
        assert_eq!(
            no_host_answered("shop.test", 1, &[]),
            "no host of shop.test answered over HTTPS or HTTP (1 host(s) tried)"
        );
        let misses: Vec<String> = (1..=5).map(|i| format!("h{i} refused")).collect();
        assert_eq!(
            no_host_answered("shop.test", 5, &misses),
            "no host of shop.test answered over HTTPS or HTTP (5 host(s) tried): h1 refused; \
             h2 refused; h3 refused; and 2 more"
        );
    }

    #[test]
    fn findings_are_grouped_by_bare_host_names() {
        assert_eq!(
            host_name("http://Shop.example.test:8080/x"),
            "shop.example.test"
        );
        assert_eq!(host_name("https://[::1]:8443/"), "::1");
        assert_eq!(host_name("api.example.test"), "api.example.test");
    }
}
