//! Running a `flow:` that is JavaScript: the script runs in
//! [`crate::flowjs`] on a blocking thread, and every `http(...)` it calls
//! comes back here as a [`HostCall`] that runs blocks on this task, just as
//! a boolean flow's steps run (same results, same `stop-at-first-match`,
//! same variable refresh after each step).
//!
//! The template context the script sees as `template` follows Nuclei's
//! flow executor: the values of `set(...)` and every extracted list
//! (`template.links` is an array), with the template's variables and the
//! `--var` options over them after every step.

use std::sync::Arc;

use serde_json::{Map, Value as Json};
use tokio::sync::mpsc;

use super::super::report;
use super::TemplateRun;
use crate::dsl::Value;
use crate::engine::failure::{TargetErrorKind, TargetFailure};
use crate::engine::vars::string_value;
use crate::flowjs::{self, Budget, FlowError, HostCall, HttpReply};
use crate::operators::OperatorResult;

impl TemplateRun<'_> {
    /// Keeps extracted lists for the script's template context; a no-op
    /// unless a JavaScript flow is running.
    pub(super) fn note_flow_extracts(&mut self, result: &OperatorResult) {
        if let Some(out) = &mut self.flow_extracts {
            for (name, values) in &result.internal {
                if !values.is_empty() {
                    out.push((name.clone(), values.clone()));
                }
            }
        }
    }
}

/// Runs `source` for `run`, reporting a script that failed or ran out of
/// budget as a [`TargetErrorKind::Flow`] error; results of the steps that
/// ran stand, as in Nuclei.
pub(super) async fn run(run: &mut TemplateRun<'_>, source: Arc<str>) {
    let budget = Budget::default();
    let deadline = tokio::time::Instant::now() + budget.wall;
    run.flow_extracts = Some(Vec::new());
    let mut context = FlowContext::default();
    let initial = context.snapshot(run);
    // The script's thread sends, this task receives; dropping `calls` (when
    // the flow ends here first) makes the script's next host call fail.
    let (tx, mut calls) = mpsc::channel::<HostCall>(1);
    // A blocking thread, not rayon: the script waits on this task for every
    // `http(...)`, and a rayon worker parked on the network would starve
    // the matching that the requests themselves need.
    let script = tokio::task::spawn_blocking(move || flowjs::run(&source, initial, tx, budget));
    let mut engine_side: Option<FlowError> = None;
    loop {
        let call = tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                engine_side = Some(FlowError::TimedOut(budget.wall));
                break;
            }
            _ = run.target.cancel.cancelled() => break,
            call = calls.recv() => match call {
                Some(call) => call,
                None => break,
            },
        };
        match call {
            HostCall::Http { selectors, reply } => {
                let step = run_selected(run, &selectors, &mut context);
                let matched = tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {
                        engine_side = Some(FlowError::TimedOut(budget.wall));
                        break;
                    }
                    matched = step => matched,
                };
                let template = context.snapshot(run);
                // The script may have ended meanwhile: nothing to answer.
                let _ = reply.send(HttpReply { matched, template });
            }
            HostCall::Set { name, value } => {
                run.dynamic.insert(name.clone(), json_to_value(&value));
                context.values.insert(name, value);
            }
            HostCall::Log(text) => {
                tracing::debug!(template_id = %run.tid, "flow log: {text}");
            }
        }
    }
    drop(calls);
    let outcome = match script.await {
        Ok(outcome) => outcome.map_err(TargetFailure::Flow),
        Err(e) => Err(TargetFailure::FlowThread(e)),
    };
    let failure = match (outcome, engine_side) {
        (_, Some(why)) => Some(TargetFailure::Flow(why)),
        (Ok(()), None) => None,
        (Err(why), None) => Some(why),
    };
    match failure {
        // A cancelled target has been reported already.
        None | Some(TargetFailure::Flow(FlowError::Stopped)) => {}
        Some(why) => {
            report(
                run.shared,
                run.target,
                Some(&run.tid),
                TargetErrorKind::Flow,
                why,
            )
            .await
        }
    }
}

/// `http(...)`: runs the named blocks in order (all of them when none is
/// named) and tells whether one matched. A name that is not a block ends
/// the step with what it had, as in Nuclei.
async fn run_selected(
    run: &mut TemplateRun<'_>,
    selectors: &[String],
    context: &mut FlowContext,
) -> bool {
    let blocks: Vec<Result<usize, TargetFailure>> = if selectors.is_empty() {
        (0..run.tpl.blocks.len()).map(Ok).collect()
    } else {
        selectors.iter().map(|s| resolve(run, s)).collect()
    };
    let mut matched = false;
    for block in blocks {
        let bi = match block {
            Ok(bi) => bi,
            Err(no_such_block) => {
                report(
                    run.shared,
                    run.target,
                    Some(&run.tid),
                    TargetErrorKind::Skipped,
                    no_such_block,
                )
                .await;
                break;
            }
        };
        if run.stopped {
            break;
        }
        matched |= run.run_block(bi).await;
        run.refresh_variables();
        context.take_extracts(run);
    }
    matched
}

/// A selector as Nuclei's flow resolves it: a number `n` names block `n`
/// (1-based; numbers win over ids, as Nuclei registers them last), any
/// other text a block `id`.
fn resolve(run: &TemplateRun<'_>, selector: &str) -> Result<usize, TargetFailure> {
    let blocks = &run.tpl.blocks;
    if let Ok(n) = selector.trim().parse::<usize>() {
        if (1..=blocks.len()).contains(&n) {
            return Ok(n - 1);
        }
    }
    blocks
        .iter()
        .position(|b| b.id.as_deref() == Some(selector))
        .ok_or_else(|| TargetFailure::NoSuchBlock(selector.to_string()))
}

/// The part of the template context that the flow itself made: values
/// given to `set(...)` and extracted lists, the latest of each name.
#[derive(Default)]
struct FlowContext {
    values: Map<String, Json>,
}

impl FlowContext {
    fn take_extracts(&mut self, run: &mut TemplateRun<'_>) {
        if let Some(found) = &mut run.flow_extracts {
            for (name, values) in found.drain(..) {
                let list = values.into_iter().map(Json::String).collect();
                self.values.insert(name, Json::Array(list));
            }
        }
    }

    /// The `template` object: the flow's own values, then the `--var`
    /// options and the template's variables and constants over them (Nuclei
    /// merges the evaluated variables back after every step).
    fn snapshot(&self, run: &TemplateRun<'_>) -> Map<String, Json> {
        let mut out = self.values.clone();
        for layer in [&run.shared.option_vars, &run.template_layer] {
            for (name, value) in layer.iter() {
                out.insert(name.clone(), value_to_json(value));
            }
        }
        out
    }
}

fn value_to_json(value: &Value) -> Json {
    match value {
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .unwrap_or(Json::Null),
        Value::Str(_) => Json::String(value.to_string_lossy()),
        Value::List(items) => Json::Array(items.iter().map(value_to_json).collect()),
        Value::Null => Json::Null,
    }
}

/// A `set(...)` value as a request variable: strings stay strings, numbers
/// and booleans keep their type (rendered as Go prints them), arrays become
/// lists, objects their JSON text.
fn json_to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        Json::String(s) => string_value(s.clone()),
        Json::Array(items) => Value::List(items.iter().map(json_to_value).collect()),
        Json::Object(_) => string_value(json.to_string()),
    }
}
