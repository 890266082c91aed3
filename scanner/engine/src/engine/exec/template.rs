//! One template's execution against one target: the per-block state
//! machine. Blocks run in order or as the template's flow decides; each
//! block runs its requests once per payload combination (and once per
//! `iterate-all` round), judges every response of a request, carries
//! extracted values forward and publishes `{id}_{name}` history.

use std::collections::{HashSet, VecDeque};
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::super::build::{build, Built};
use super::super::compile::{CompiledBlock, CompiledTemplate};
use super::super::failure::{TargetErrorKind, TargetFailure};
use super::super::oob::{placeholders, MarkerLayer, Waiting};
use super::super::response::{prefixed, Numbered, ResponseVars, RunNames};
use super::super::result::{build_results, with_evidence, ResultHead};
use super::super::vars::{string_value, Layer, RequestLayers, Scope, VarMap};
use super::super::Event;
use super::send::send;
use super::{
    emit, judged_responses, match_job, next_run_id, on_rayon, outcome_of, report, send_options,
    RunShared, TargetRun,
};
use crate::dsl::Bytes;
use crate::operators::{OperatorResult, Operators};
use crate::template::FlowExpr;
use scanfleet_http::{CookieJar, Response, SendOptions};

mod iterate_all;
mod script_flow;

/// Evaluates template `variables` in order, each seeing the earlier ones.
/// Done once per template execution, so `rand_*` helpers give one value for
/// all its requests. A variable that does not resolve is left out: the
/// requests using it are then skipped as unresolved. A variable also given
/// as a `--var` option (or a scan variable) takes the option's value, as in
/// Nuclei, and later variables see that value.
fn template_vars(
    tpl: &CompiledTemplate,
    shared: &RunShared,
    input_layer: &Arc<VarMap>,
    extracted: Option<&VarMap>,
    markers: Option<&Arc<MarkerLayer>>,
) -> VarMap {
    let extracted = extracted.map(|e| Arc::new(e.clone()));
    // Constants first, so variables can use them (`{{randstr}}`).
    let mut out: VarMap = (*tpl.constants).clone();
    for (name, value) in &tpl.variables {
        if let Some(given) = shared.option_vars.get(name) {
            out.insert(name.clone(), given.clone());
            continue;
        }
        let mut scope = Scope::new()
            .below(Arc::new(out.clone()))
            .below(shared.option_vars.clone())
            .below(input_layer.clone());
        if let Some(extracted) = &extracted {
            scope = scope.below(extracted.clone());
        }
        if let Some(markers) = markers {
            scope = scope.below(markers.clone());
        }
        let rendered = value.render(&scope);
        if rendered.is_complete() {
            let v = match String::from_utf8(rendered.bytes) {
                Ok(s) => string_value(s),
                Err(e) => super::super::vars::bytes_value(e.into_bytes()),
            };
            out.insert(name.clone(), v);
        }
    }
    out
}

/// Payload values as variables. A value may itself hold `{{...}}` (e.g.
/// `admin@{{Host}}`): Nuclei renders it against the other variables first.
fn payload_values(
    combo: Vec<(String, String)>,
    template_layer: &Arc<VarMap>,
    shared: &RunShared,
    input_layer: &Arc<VarMap>,
    markers: Option<&Arc<MarkerLayer>>,
) -> VarMap {
    let needs_render = combo.iter().any(|(_, v)| v.contains("{{"));
    let scope = needs_render.then(|| {
        let scope = Scope::new()
            .below(template_layer.clone())
            .below(shared.option_vars.clone())
            .below(input_layer.clone());
        match markers {
            Some(m) => scope.below(m.clone()),
            None => scope,
        }
    });
    combo
        .into_iter()
        .map(|(k, v)| {
            let rendered = match (&scope, v.contains("{{")) {
                (Some(scope), true) => match crate::dsl::TemplateString::parse(&v) {
                    Ok(t) => {
                        let r = t.render(scope);
                        if r.is_complete() {
                            r.into_string_lossy()
                        } else {
                            v
                        }
                    }
                    Err(_) => v,
                },
                _ => v,
            };
            (k, string_value(rendered))
        })
        .collect()
}

/// Extracted values that later requests may use: internal and named ones
/// (the operators report both in `internal`), first value each. Names in
/// `carried` were already set by a response of the same request and are
/// kept; the names set here are added to it.
fn carry_extracts(
    r: &OperatorResult,
    dynamic: &mut VarMap,
    this_block: &mut VarMap,
    carried: &mut HashSet<String>,
) {
    for (name, values) in &r.internal {
        if let Some(v) = values.first() {
            if !carried.insert(name.clone()) {
                continue;
            }
            dynamic.insert(name.clone(), string_value(v.clone()));
            this_block.insert(name.clone(), string_value(v.clone()));
        }
    }
}

/// One template's execution against one target: the state its blocks
/// share (cookies, variables, extracted values, `{id}_{name}` history).
struct TemplateRun<'a> {
    shared: &'a RunShared,
    target: &'a TargetRun,
    tpl: Arc<CompiledTemplate>,
    tid: String,
    head: ResultHead,
    jar: Option<CookieJar>,
    template_layer: Arc<VarMap>,
    /// Extracted values, visible to every later request and block.
    dynamic: VarMap,
    /// Responses of earlier blocks that have an `id`, as `{id}_{name}`.
    block_history: Vec<Arc<VarMap>>,
    /// Stop-at-first-match fired or the target stopped: no block runs any more.
    stopped: bool,
    /// Tells this execution's requests apart in the target's response cache.
    run_id: u64,
    /// Every extracted value list since the last look, for a JavaScript
    /// flow's template context; `None` (not collected) otherwise.
    flow_extracts: Option<Vec<(String, Vec<String>)>>,
    /// `host` and `template-id` as every response of this run names them.
    names: RunNames,
    /// Payload hosts of the template's variables and payload values (made
    /// per execution, not per request); `None` without a session.
    markers: Option<Arc<MarkerLayer>>,
    /// The hosts `markers` made for the variables: every request carries them.
    variable_hosts: Vec<(String, String)>,
}

/// What one block's run has gathered so far.
#[derive(Default)]
struct BlockRun {
    /// Whether the block counts as matched (Nuclei's flow rule, see
    /// `run_block`).
    status: bool,
    /// `_N` views of the final responses so far.
    numbered_history: Vec<Arc<Numbered>>,
    /// The last final response, with the URL it came from.
    last_response: Option<(Arc<ResponseVars>, String)>,
    /// Responses received.
    count: usize,
    /// This block's extracted values, published as `{id}_{name}` too.
    block_extracts: VarMap,
    /// Every list extracted in this block, for `iterate-all`.
    gathered: iterate_all::Gathered,
}

/// One request of a block to run: block and request index, the payload
/// combination's values, the `iterate-all` round's values.
struct Step<'s> {
    bi: usize,
    ri: usize,
    payload_layer: &'s Arc<VarMap>,
    round: Option<Arc<VarMap>>,
    options: &'s SendOptions,
    /// Payload hosts of the variables and this payload combination.
    oob_hosts: &'s [(String, String)],
}

/// What every response of one sent request is judged with.
struct RequestContext {
    bi: usize,
    /// The request's variables, the input's included.
    scope: Scope,
    /// The request as sent, for the `request` variable.
    dump: Bytes,
    /// Payload hosts the request carried.
    oob_hosts: Vec<(String, String)>,
}

/// Runs the blocks of `tpl` against `target`, emitting results as they
/// come: in order, or as the template's boolean `flow` decides.
pub(crate) async fn run_template(
    shared: &RunShared,
    target: &TargetRun,
    tpl: Arc<CompiledTemplate>,
) {
    let head = {
        let mut h = tpl.head.clone();
        h.host = target.host.clone();
        h
    };
    let markers = shared
        .oob
        .as_ref()
        .map(|oob| Arc::new(MarkerLayer::new(oob.session.clone())));
    let template_layer = Arc::new(template_vars(
        &tpl,
        shared,
        &target.input.full,
        None,
        markers.as_ref(),
    ));
    let variable_hosts = markers.as_ref().map(|m| m.take()).unwrap_or_default();
    let mut run = TemplateRun {
        shared,
        target,
        tid: tpl.head.template_id.clone(),
        head,
        jar: tpl.blocks.iter().any(|b| b.cookie_jar).then(CookieJar::new),
        template_layer,
        markers,
        variable_hosts,
        dynamic: VarMap::default(),
        block_history: Vec::new(),
        stopped: false,
        run_id: next_run_id(),
        tpl: tpl.clone(),
        flow_extracts: None,
        names: RunNames::new(&target.host, &tpl.head.template_id),
    };
    match (&tpl.flow, &tpl.script_flow) {
        (Some(flow), _) => {
            run_flow(flow, &mut run).await;
        }
        (None, Some(script)) => script_flow::run(&mut run, script.clone()).await,
        (None, None) => {
            for bi in 0..tpl.blocks.len() {
                if run.stopped {
                    break;
                }
                run.run_block(bi).await;
            }
        }
    }
}

/// Evaluates a boolean flow as JavaScript would: `&&` and `||` short-circuit,
/// `&` runs both sides; `http(n)` runs block `n`. Boxed: the expression is
/// recursive.
fn run_flow<'r, 'a: 'r>(
    flow: &'r FlowExpr,
    run: &'r mut TemplateRun<'a>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + 'r>> {
    Box::pin(async move {
        match flow {
            FlowExpr::Block(bi) => {
                if run.stopped {
                    return false;
                }
                let matched = run.run_block(*bi).await;
                // Nuclei evaluates the template's variables again after each
                // step, so a variable built on an extracted value resolves.
                run.refresh_variables();
                matched
            }
            FlowExpr::Missing(n) => {
                let failure = TargetFailure::MissingStep {
                    step: *n,
                    blocks: run.tpl.blocks.len(),
                };
                report(
                    run.shared,
                    run.target,
                    Some(&run.tid),
                    TargetErrorKind::Skipped,
                    failure,
                )
                .await;
                false
            }
            FlowExpr::And(a, b) => run_flow(a, run).await && run_flow(b, run).await,
            FlowExpr::Or(a, b) => run_flow(a, run).await || run_flow(b, run).await,
            FlowExpr::BothAnd(a, b) => {
                let left = run_flow(a, run).await;
                let right = run_flow(b, run).await;
                left && right
            }
        }
    })
}

impl TemplateRun<'_> {
    /// Variables that did not resolve before may now, with the values
    /// extracted since; those that did keep their value (a `rand_*` stays
    /// the same across steps).
    fn refresh_variables(&mut self) {
        let missing = self
            .tpl
            .variables
            .iter()
            .any(|(name, _)| !self.template_layer.contains_key(name));
        if self.dynamic.is_empty() || !missing {
            return;
        }
        let again = template_vars(
            &self.tpl,
            self.shared,
            &self.target.input.full,
            Some(&self.dynamic),
            self.markers.as_ref(),
        );
        if let Some(m) = &self.markers {
            self.variable_hosts.extend(m.take());
        }
        let mut merged = (*self.template_layer).clone();
        for (name, value) in again {
            merged.entry(name).or_insert(value);
        }
        self.template_layer = Arc::new(merged);
    }

    /// Runs block `bi` and tells whether it matched, as Nuclei's flow does:
    /// true when a response matched, or the block has no matchers and
    /// extracted something, or it has no operators and got a response.
    async fn run_block(&mut self, bi: usize) -> bool {
        let tpl = self.tpl.clone();
        let block = &tpl.blocks[bi];
        let options = send_options(block, self.jar.as_ref());
        let mut run = BlockRun::default();
        for (ci, combo) in block.payloads.combinations().enumerate() {
            let payload_layer = Arc::new(payload_values(
                combo,
                &self.template_layer,
                self.shared,
                &self.target.input.full,
                self.markers.as_ref(),
            ));
            let mut oob_hosts = self.variable_hosts.clone();
            if let Some(m) = &self.markers {
                oob_hosts.extend(m.take());
            }
            // Requests in order; with `iterate-all` a request meets values
            // extracted before it and is queued again once per round.
            let mut pending: VecDeque<(usize, Option<Arc<VarMap>>)> =
                (0..block.requests.len()).map(|ri| (ri, None)).collect();
            while let Some((ri, round)) = pending.pop_front() {
                if round.is_none() && block.iterate_all && !run.gathered.is_empty() {
                    for layer in run.gathered.rounds().into_iter().rev() {
                        pending.push_front((ri, Some(Arc::new(layer))));
                    }
                    continue;
                }
                if ci > 0 && block.once[ri] {
                    continue;
                }
                let request = Step {
                    bi,
                    ri,
                    payload_layer: &payload_layer,
                    round,
                    options: &options,
                    oob_hosts: &oob_hosts,
                };
                if self.run_request(request, &mut run).await.is_break() {
                    self.stopped = true;
                    return run.status;
                }
            }
        }
        if let Some((resp_layer, matched_at)) = run.last_response.take() {
            if block.req_condition {
                self.judge_req_condition(bi, &resp_layer, &matched_at, &mut run)
                    .await;
            }
            if let Some(id) = &block.id {
                let mut published = prefixed(&resp_layer.to_map(), id);
                published.extend(prefixed(&run.block_extracts, id));
                self.block_history.insert(0, Arc::new(published));
            }
        }
        run.status
    }

    /// The variables of one request: payload (when there is one), template
    /// and option values above the input's; this round's `iterate-all`
    /// values, the extracted values and earlier blocks' history below.
    fn request_layers(
        &self,
        payload_layer: Option<&Arc<VarMap>>,
        round: Option<Arc<VarMap>>,
    ) -> RequestLayers {
        let mut lower: Vec<Arc<VarMap>> = round.into_iter().collect();
        lower.push(Arc::new(self.dynamic.clone()));
        lower.extend(self.block_history.iter().cloned());
        let mut upper: Vec<Arc<VarMap>> = payload_layer.into_iter().cloned().collect();
        upper.push(self.template_layer.clone());
        upper.push(self.shared.option_vars.clone());
        RequestLayers {
            upper,
            lower,
            oob: None,
        }
    }

    /// Builds, sends and judges one request of a block. `Break` when the
    /// template must stop: the target was cancelled, or a match ended a
    /// `stop-at-first-match` template.
    async fn run_request(&mut self, step: Step<'_>, run: &mut BlockRun) -> ControlFlow<()> {
        let (shared, target) = (self.shared, self.target);
        if target.cancel.is_cancelled() {
            return ControlFlow::Break(());
        }
        let tpl = self.tpl.clone();
        let block = &tpl.blocks[step.bi];
        let mut layers = self.request_layers(Some(step.payload_layer), step.round);
        let (built, oob_hosts) =
            match self.build_marked(block, step.ri, &mut layers, step.oob_hosts) {
                Ok(b) => b,
                Err(skip) => {
                    report(
                        shared,
                        target,
                        Some(&self.tid),
                        TargetErrorKind::Skipped,
                        skip.into(),
                    )
                    .await;
                    return ControlFlow::Continue(());
                }
            };
        let Some(resp) = send(
            shared,
            target,
            (&self.tid, self.run_id),
            &built,
            step.options,
        )
        .await
        else {
            return if target.cancel.is_cancelled() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            };
        };
        run.count += 1;
        if block.operators.is_empty() {
            run.status = true;
        }
        let mut scope = layers.with_input(target.input.full.clone());
        if let (Some(oob), false) = (&shared.oob, oob_hosts.is_empty()) {
            scope = scope.above(Arc::new(placeholders(&oob.session, &oob_hosts)));
        }
        let request = RequestContext {
            bi: step.bi,
            scope,
            dump: Bytes::from(built.dump),
            oob_hosts,
        };
        // Names this request's responses already set, so an earlier hop
        // does not overwrite what the final response extracted.
        let mut carried = HashSet::new();
        for (hi, hop) in judged_responses(resp).into_iter().enumerate() {
            let is_final = hi == 0;
            // A `req-condition` block is judged once, on the final
            // responses of all its requests, after the loop.
            if !is_final && block.req_condition {
                break;
            }
            self.judge_hop(&request, hop, is_final, run, &mut carried)
                .await?;
        }
        ControlFlow::Continue(())
    }

    /// Builds request `ri` of `block`, its out-of-band markers rendered as
    /// fresh payload hosts when the run has a session: the request, and
    /// every payload host it carries (`inherited` ones from the variables
    /// and payload values included).
    fn build_marked(
        &self,
        block: &CompiledBlock,
        ri: usize,
        layers: &mut RequestLayers,
        inherited: &[(String, String)],
    ) -> Result<(Built, Vec<(String, String)>), super::super::build::Skip> {
        let Some(oob) = &self.shared.oob else {
            let built = build(block, &block.requests[ri], &self.target.input, layers)?;
            return Ok((built, Vec::new()));
        };
        let markers = Arc::new(MarkerLayer::new(oob.session.clone()));
        layers.oob = Some(markers.clone() as Layer);
        let mut built = build(block, &block.requests[ri], &self.target.input, layers)?;
        markers.replace_encoded(&mut built);
        let made = markers.take();
        let mut hosts = Vec::with_capacity(inherited.len() + made.len());
        // Only hosts the request really carries: a payload value or
        // variable this request does not use made its host elsewhere.
        let sent = String::from_utf8_lossy(&built.dump);
        hosts.extend(
            inherited
                .iter()
                .filter(|(_, host)| sent.contains(host.as_str()))
                .cloned(),
        );
        hosts.extend(made);
        if !hosts.is_empty() {
            oob.note_generated();
        }
        Ok((built, hosts))
    }

    /// Evaluates a block's operators on one response of a request (the
    /// final one, or a redirect hop before it) and reports what matched.
    async fn judge_hop(
        &mut self,
        request: &RequestContext,
        hop: Arc<Response>,
        is_final: bool,
        run: &mut BlockRun,
        carried: &mut HashSet<String>,
    ) -> ControlFlow<()> {
        let tpl = self.tpl.clone();
        let bi = request.bi;
        let block = &tpl.blocks[bi];
        let matched_at = hop.final_url.clone();
        let hop_bytes = hop.body.len();
        let history_now = run.numbered_history.clone();
        let tpl_job = tpl.clone();
        let names = self.names.clone();
        let dump = request.dump.clone();
        let request_scope = request.scope.clone();
        let count = run.count;
        let job = move || {
            let block = &tpl_job.blocks[bi];
            let resp_layer = Arc::new(ResponseVars::new(hop, &dump, &names));
            // `body_2` and friends name the final response of request 2,
            // not a redirect before it.
            let numbered_layer = (is_final && block.needs_history)
                .then(|| Arc::new(Numbered::new(resp_layer.clone(), count)));
            let mut scope = Scope::new().below(resp_layer.clone());
            if let Some(n) = &numbered_layer {
                scope = scope.below(n.clone());
            }
            for h in history_now.iter().rev() {
                scope = scope.below(h.clone());
            }
            let scope = scope.below_all(&request_scope);
            let result = block.operators.evaluate(&scope);
            (resp_layer, numbered_layer, result, scope)
        };
        let Some((resp_layer, numbered_layer, result, scope)) = match_job(hop_bytes, job).await
        else {
            report(
                self.shared,
                self.target,
                Some(&self.tid),
                TargetErrorKind::Request,
                TargetFailure::MatchingPanicked,
            )
            .await;
            return ControlFlow::Continue(());
        };
        if let Some(n) = numbered_layer {
            run.numbered_history.push(n);
        }
        carry_extracts(&result, &mut self.dynamic, &mut run.block_extracts, carried);
        self.note_flow_extracts(&result);
        if block.iterate_all {
            run.gathered.add(&result);
        }
        if is_final {
            run.last_response = Some((resp_layer.clone(), matched_at.clone()));
        }
        if block.req_condition {
            return ControlFlow::Continue(());
        }
        if block.uses_interactsh && !request.oob_hosts.is_empty() {
            // Judged when an interaction arrives, with this response.
            if is_final {
                self.wait_for_interactions(request, scope, &matched_at)
                    .await;
            }
            return ControlFlow::Continue(());
        }
        run.status |= step_matched(&result, &block.operators);
        self.emit_results(&matched_at, &result, &block.operators, &resp_layer)
            .await;
        // Nuclei stops on a matcher match only: values found by extractors
        // alone do not end the template.
        if result.matched && block.stop_at_first_match {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    /// Judges a `req-condition` block once, on the last final response with
    /// every earlier one as `_N` history.
    async fn judge_req_condition(
        &mut self,
        bi: usize,
        last: &Arc<ResponseVars>,
        matched_at: &str,
        run: &mut BlockRun,
    ) {
        let tpl = self.tpl.clone();
        let block = &tpl.blocks[bi];
        let tpl_job = tpl.clone();
        let history = run.numbered_history.clone();
        let response = last.clone();
        let last = last.clone();
        let request_scope = self
            .request_layers(None, None)
            .with_input(self.target.input.full.clone());
        let job = move || {
            let mut scope = Scope::new().below(last);
            for h in history.iter().rev() {
                scope = scope.below(h.clone());
            }
            let scope = scope.below_all(&request_scope);
            tpl_job.blocks[bi].operators.evaluate(&scope)
        };
        let Some(result) = on_rayon(job).await else {
            return;
        };
        carry_extracts(
            &result,
            &mut self.dynamic,
            &mut run.block_extracts,
            &mut HashSet::new(),
        );
        self.note_flow_extracts(&result);
        run.status |= step_matched(&result, &block.operators);
        self.emit_results(matched_at, &result, &block.operators, &response)
            .await;
    }

    /// Hands a request whose block reads interactsh parts to the run's
    /// out-of-band state, to be judged when its interactions arrive.
    async fn wait_for_interactions(
        &self,
        request: &RequestContext,
        scope: Scope,
        matched_at: &str,
    ) {
        let Some(oob) = &self.shared.oob else { return };
        let waiting = Waiting {
            tpl: self.tpl.clone(),
            block: request.bi,
            head: self.head.clone(),
            matched_at: matched_at.to_string(),
            scope,
            reported: AtomicBool::new(false),
        };
        oob.wait_for(&request.oob_hosts, waiting).await;
    }

    /// Sends the results an evaluation gives, as Nuclei would report them.
    async fn emit_results(
        &self,
        matched_at: &str,
        result: &OperatorResult,
        operators: &Operators,
        response: &ResponseVars,
    ) {
        let outcome = outcome_of(result, operators);
        let results = build_results(&self.head, matched_at, &outcome);
        for r in with_evidence(results, response) {
            emit(self.shared, Event::Result(r)).await;
        }
    }
}

/// Whether one evaluation makes its flow step true: a match, or, for a
/// block without matchers, anything extracted (Nuclei's flow callback).
fn step_matched(result: &OperatorResult, operators: &Operators) -> bool {
    result.matched
        || (operators.matchers().is_empty()
            && (!result.extracts.is_empty() || !result.internal.is_empty()))
}
