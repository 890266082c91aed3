//! Clustered templates: the one request a cluster of templates shares is
//! sent once, and its response matched against every member: on the task
//! that received it when the response and the cluster are small (see
//! [`INLINE_CLUSTER_MEMBERS`]), else in parallel on rayon.

use std::sync::Arc;

use rayon::prelude::*;

use super::super::build::build;
use super::super::compile::CompiledTemplate;
use super::super::failure::{TargetErrorKind, TargetFailure};
use super::super::response::{ResponseVars, RunNames};
use super::super::result::{build_results, with_evidence, ScanResult};
use super::super::vars::{RequestLayers, Scope};
use super::super::Event;
use super::send::send;
use super::{
    emit, judged_responses, next_run_id, outcome_of, report, run_job, send_options,
    INLINE_MATCH_BYTES,
};
use super::{RunShared, TargetRun};
use crate::dsl::Bytes;

/// Clusters of at most this many members are matched one after the other
/// on the task that received their response when its bodies are small
/// ([`INLINE_MATCH_BYTES`]): a few microseconds a member, less than the
/// two thread wake-ups of a trip to rayon and back (and, with many nodes
/// on few cores, the rayon threads' spinning while they wait for more).
const INLINE_CLUSTER_MEMBERS: usize = 16;

/// Sends the one request shared by a cluster of templates and matches its
/// response against all of them (see the module's doc).
pub(crate) async fn run_cluster(
    shared: &RunShared,
    target: &TargetRun,
    members: Arc<Vec<Arc<CompiledTemplate>>>,
) {
    let Some(first) = members.first() else { return };
    let tid = first.head.template_id.clone();
    let block = &first.blocks[0];
    let Some(spec) = block.requests.first() else {
        return;
    };
    let layers = RequestLayers {
        upper: vec![shared.option_vars.clone()],
        lower: Vec::new(),
        oob: None,
    };
    let built = match build(block, spec, &target.input, &layers) {
        Ok(b) => b,
        Err(skip) => {
            report(
                shared,
                target,
                Some(&tid),
                TargetErrorKind::Skipped,
                skip.into(),
            )
            .await;
            return;
        }
    };
    // One request, a fresh jar: cookies cannot matter, so none is kept.
    let options = send_options(block, None);
    let Some(resp) = send(shared, target, (&tid, next_run_id()), &built, &options).await else {
        return;
    };
    let host = target.host.clone();
    let request_scope = layers.with_input(target.input.full.clone());
    let dump = Bytes::from(built.dump);
    // Cluster members share one evaluation scope, so no one template's id.
    let names = RunNames::new(&host, "");
    let body_bytes: usize = resp.body.len()
        + resp
            .redirect_responses
            .iter()
            .map(|r| r.body.len())
            .sum::<usize>();
    // Otherwise on rayon, the members in parallel.
    let in_place = members.len() <= INLINE_CLUSTER_MEMBERS && body_bytes <= INLINE_MATCH_BYTES;
    let job = move || {
        let hops: Vec<(String, Scope)> = judged_responses(resp)
            .into_iter()
            .map(|hop| {
                let matched_at = hop.final_url.clone();
                let resp_layer = Arc::new(ResponseVars::new(hop, &dump, &names));
                let scope = Scope::new().below(resp_layer).below_all(&request_scope);
                (matched_at, scope)
            })
            .collect();
        match_members(&members, &hops, &host, !in_place)
    };
    match run_job(in_place, job).await {
        Some(results) => {
            for r in results {
                emit(shared, Event::Result(r)).await;
            }
        }
        None => {
            report(
                shared,
                target,
                Some(&tid),
                TargetErrorKind::Request,
                TargetFailure::MatchingPanicked,
            )
            .await
        }
    }
}

/// The results of every cluster member on every response of the shared
/// request (the redirects judged, then the final one), the members in
/// parallel on rayon when `parallel`.
fn match_members(
    members: &[Arc<CompiledTemplate>],
    hops: &[(String, Scope)],
    host: &str,
    parallel: bool,
) -> Vec<ScanResult> {
    let one = |tpl: &Arc<CompiledTemplate>| {
        let block = &tpl.blocks[0];
        let mut head = tpl.head.clone();
        head.host = host.to_string();
        let mut out = Vec::new();
        for (matched_at, scope) in hops {
            let result = block.operators.evaluate(scope);
            out.extend(with_evidence(
                build_results(&head, matched_at, &outcome_of(&result, &block.operators)),
                scope,
            ));
            if result.matched && block.stop_at_first_match {
                break;
            }
        }
        out
    };
    if parallel {
        members.par_iter().map(one).flatten().collect()
    } else {
        members.iter().flat_map(one).collect()
    }
}
