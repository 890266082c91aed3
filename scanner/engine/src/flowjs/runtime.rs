//! The boa context a flow script runs in: Nuclei's flow bindings (`http`,
//! `set`, `log`, `iterate`, `Dedupe`, `template`) and the run loop that
//! enforces the [`Budget`].

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Instant;

use boa_engine::error::{EngineError, PanicError};
use boa_engine::property::Attribute;
use boa_engine::{
    js_string, Context, JsArgs, JsError, JsResult, JsValue, NativeFunction, Script, Source,
};
use serde_json::{Map, Value as Json};
use tokio::sync::mpsc;

use super::{Budget, FlowError, HostCall, HttpReply};

/// VM "clock cycles" per slice between two wall-clock checks: a few
/// hundred microseconds of work.
const SLICE: u32 = 20_000;

/// Nuclei's `iterate` and `Dedupe`, written in the script's own language:
/// they only reshape values, so they need no host access.
const PRELUDE: &str = r#"
function iterate() {
  var out = [];
  for (var i = 0; i < arguments.length; i++) {
    var v = arguments[i];
    if (v === null || v === undefined) continue;
    if (Array.isArray(v)) {
      for (var j = 0; j < v.length; j++) out.push(v[j]);
    } else {
      out.push(v);
    }
  }
  return out;
}
function Dedupe() {
  var seen = {};
  var values = [];
  this.Add = function () {
    var items = iterate.apply(null, arguments);
    for (var i = 0; i < items.length; i++) {
      var key = typeof items[i] + ":" + String(items[i]);
      if (!Object.prototype.hasOwnProperty.call(seen, key)) {
        seen[key] = true;
        values.push(items[i]);
      }
    }
  };
  this.Values = function () { return values.slice(); };
}
"#;

/// What the host functions reach through the context's host data.
struct Host {
    /// To the engine task driving this flow; it owns the receiver and drops
    /// it when the flow ends or is stopped.
    calls: mpsc::Sender<HostCall>,
    deadline: Instant,
    budget: Budget,
    /// Set when a host function ended the script (deadline, engine gone),
    /// so the uncatchable error it threw is reported for what it is.
    stopped: RefCell<Option<FlowError>>,
}

impl Host {
    fn of(ctx: &Context) -> &Host {
        // Inserted by `run` before any script code runs.
        ctx.get_data::<Host>().expect("flow host data")
    }

    /// Ends the script with an error JavaScript cannot catch.
    fn stop(&self, why: FlowError) -> JsError {
        let message = why.to_string();
        *self.stopped.borrow_mut() = Some(why);
        PanicError::new(message).into()
    }

    fn check_deadline(&self) -> JsResult<()> {
        if Instant::now() >= self.deadline {
            return Err(self.stop(FlowError::TimedOut(self.budget.wall)));
        }
        Ok(())
    }

    fn send(&self, call: HostCall) -> JsResult<()> {
        self.check_deadline()?;
        // Runs on a blocking thread of its own, never inside the runtime's
        // async context, so the blocking send is allowed.
        self.calls
            .blocking_send(call)
            .map_err(|_| self.stop(FlowError::Stopped))
    }
}

/// Checks that `source` parses as a script.
pub fn check_syntax(source: &str) -> Result<(), FlowError> {
    let mut ctx = Context::default();
    Script::parse(Source::from_bytes(source), None, &mut ctx)
        .map(|_| ())
        .map_err(|e| FlowError::Syntax(e.to_string()))
}

/// Runs `source` to its end. Blocking: call it from a thread that may
/// block (`spawn_blocking`), never from an async task, since every
/// `http(...)` waits for the engine to run the blocks.
///
/// `template` is the initial template context (variables, constants,
/// `--var` options).
pub fn run(
    source: &str,
    template: Map<String, Json>,
    calls: mpsc::Sender<HostCall>,
    budget: Budget,
) -> Result<(), FlowError> {
    let deadline = Instant::now() + budget.wall;
    let mut ctx = Context::default();
    ctx.runtime_limits_mut()
        .set_loop_iteration_limit(budget.loop_iterations);
    ctx.runtime_limits_mut()
        .set_recursion_limit(budget.recursion);
    ctx.insert_data(Host {
        calls,
        deadline,
        budget,
        stopped: RefCell::new(None),
    });
    install(&mut ctx, template).map_err(|e| FlowError::Script(e.to_string()))?;

    let script = Script::parse(Source::from_bytes(source), None, &mut ctx)
        .map_err(|e| FlowError::Syntax(e.to_string()))?;
    let outcome = {
        let mut evaluation = pin!(script.evaluate_async_with_budget(&mut ctx, SLICE));
        let mut cx = TaskContext::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(r) = evaluation.as_mut().poll(&mut cx) {
                break Some(r);
            }
            // Pending only means a slice ended: nothing to wait for.
            if Instant::now() >= deadline {
                break None;
            }
        }
    };
    let stopped = Host::of(&ctx).stopped.borrow_mut().take();
    match outcome {
        None => Err(FlowError::TimedOut(budget.wall)),
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => Err(stopped.unwrap_or_else(|| classify(&e))),
    }
}

fn classify(e: &JsError) -> FlowError {
    match e.as_engine() {
        Some(EngineError::RuntimeLimit(limit)) => FlowError::StepBudget(limit.to_string()),
        _ => FlowError::Script(e.to_string()),
    }
}

/// The bindings: host functions, the prelude and the `template` object.
fn install(ctx: &mut Context, template: Map<String, Json>) -> JsResult<()> {
    ctx.register_global_callable(js_string!("http"), 0, NativeFunction::from_fn_ptr(http))?;
    ctx.register_global_callable(js_string!("set"), 2, NativeFunction::from_fn_ptr(set))?;
    ctx.register_global_callable(js_string!("log"), 1, NativeFunction::from_fn_ptr(log))?;
    ctx.eval(Source::from_bytes(PRELUDE))?;
    let template = JsValue::from_json(&Json::Object(template), ctx)?;
    ctx.register_global_property(js_string!("template"), template, Attribute::all())?;
    Ok(())
}

/// A request selector as Nuclei's `types.ToString` writes it: whole
/// numbers without a fraction (`http(1)` names block "1").
fn selector_text(value: &JsValue, ctx: &mut Context) -> JsResult<String> {
    if let Some(n) = value.as_number() {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            return Ok(format!("{}", n as i64));
        }
    }
    Ok(value.to_string(ctx)?.to_std_string_escaped())
}

/// `http(...)`: runs blocks and answers whether one matched; the
/// `template` object is replaced by the context after the step.
fn http(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let selectors = args
        .iter()
        .map(|a| selector_text(a, ctx))
        .collect::<JsResult<Vec<_>>>()?;
    let (reply_tx, reply_rx) = std::sync::mpsc::sync_channel::<HttpReply>(1);
    let host = Host::of(ctx);
    host.send(HostCall::Http {
        selectors,
        reply: reply_tx,
    })?;
    // The engine answers, or drops the sender when it stops the flow (its
    // own deadline, or the target was cancelled).
    let reply = match reply_rx.recv() {
        Ok(r) => r,
        Err(_) => {
            let why = if Instant::now() >= host.deadline {
                FlowError::TimedOut(host.budget.wall)
            } else {
                FlowError::Stopped
            };
            return Err(host.stop(why));
        }
    };
    let template = JsValue::from_json(&Json::Object(reply.template), ctx)?;
    ctx.global_object()
        .set(js_string!("template"), template, false, ctx)?;
    Ok(JsValue::from(reply.matched))
}

/// `set(name, value)`: a variable for the following requests. The
/// `template` object shows it after the next `http(...)`, as in Nuclei.
fn set(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let name = args
        .get_or_undefined(0)
        .to_string(ctx)?
        .to_std_string_escaped();
    let value = args.get_or_undefined(1).to_json(ctx)?.unwrap_or(Json::Null);
    Host::of(ctx).send(HostCall::Set { name, value })?;
    Ok(JsValue::null())
}

/// `log(value)`: strings as they are, anything else as JSON; returns its
/// argument.
fn log(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let value = args.get_or_undefined(0).clone();
    let text = match value.as_string() {
        Some(s) => s.to_std_string_escaped(),
        None => match value.to_json(ctx) {
            Ok(Some(json)) => json.to_string(),
            _ => value.display().to_string(),
        },
    };
    Host::of(ctx).send(HostCall::Log(text))?;
    Ok(value)
}
