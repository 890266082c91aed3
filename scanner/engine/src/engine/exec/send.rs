//! Sending one request of a run: unless the target is cancelled, through
//! the target's response cache, counting the target's failures in a row
//! and stopping it when it is refused or gives up.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::build::{Built, Outgoing};
use super::super::cache::Lookup;
use super::super::failure::{TargetErrorKind, TargetFailure};
use super::{report, RunShared, TargetRun};
use scanfleet_http::{HttpError, Response, SendOptions};

mod digest;

/// After this many failed requests in a row a target is given up (Nuclei's
/// `max-host-error` default): a dead host would otherwise cost a timeout
/// per remaining request.
const MAX_CONSECUTIVE_FAILURES: usize = 30;

/// Sends one request unless the target is cancelled. `None` when the
/// request failed (already reported) or the target stopped. An identical
/// safe request already sent to the target (by any template) is answered
/// from the target's
/// [`ResponseCache`](super::super::cache::ResponseCache) instead.
pub(super) async fn send(
    shared: &RunShared,
    target: &TargetRun,
    (template_id, run_id): (&str, u64),
    built: &Built,
    options: &SendOptions,
) -> Option<Arc<Response>> {
    if target.cancel.is_cancelled() {
        return None;
    }
    if !built.wait.is_zero() {
        // `wait_for(n)` in the request: Nuclei sleeps while building it.
        // Bounded by the request timeout so a template cannot park a slot
        // for long; asleep here, the request holds no connection.
        let wait = built.wait.min(shared.client.config().timeout);
        tokio::select! {
            _ = target.cancel.cancelled() => return None,
            _ = tokio::time::sleep(wait) => {}
        }
    }
    if let Some(credentials) = &built.digest {
        return digest::send(shared, target, template_id, built, options, credentials).await;
    }
    let cookie = match (&built.outgoing, &options.cookie_jar) {
        (Outgoing::Normal(req), Some(jar)) => jar.header_for(&req.url, &req.target),
        _ => None,
    };
    match target
        .cache
        .lookup(built, options, cookie.as_deref(), run_id)
    {
        Lookup::Bypass => send_now(shared, target, template_id, built, options).await,
        Lookup::Leader(slot, key) => {
            let outcome = send_now(shared, target, template_id, built, options).await;
            target.cache.publish(slot, key, outcome.as_ref());
            outcome
        }
        Lookup::Follower(slot, leader_policy) => {
            let shared_answer = tokio::select! {
                _ = target.cancel.cancelled() => return None,
                r = target.cache.follow(slot, leader_policy, options) => r,
            };
            match shared_answer {
                Some(resp) => {
                    // The template's own jar sees the cookies it would have
                    // been given (those of the final response).
                    if let (Outgoing::Normal(req), Some(jar)) =
                        (&built.outgoing, &options.cookie_jar)
                    {
                        jar.store_from_headers(&req.url, &req.target, &resp.headers);
                    }
                    Some(resp)
                }
                // The first sender failed, or its answer does not fit our
                // redirect policy: send on our own.
                None => send_now(shared, target, template_id, built, options).await,
            }
        }
    }
}

/// Sends one request on the wire.
async fn send_now(
    shared: &RunShared,
    target: &TargetRun,
    template_id: &str,
    built: &Built,
    options: &SendOptions,
) -> Option<Arc<Response>> {
    // Boxed: the client's future is a few kilobytes, and every future that
    // awaits this one would otherwise carry it and copy it when moved.
    let fut = Box::pin(async {
        match &built.outgoing {
            Outgoing::Normal(req) => shared.client.send(req, options).await,
            Outgoing::Unsafe { url, bytes } => shared.client.send_raw(url, bytes, options).await,
        }
    });
    let outcome = tokio::select! {
        _ = target.cancel.cancelled() => return None,
        r = fut => r,
    };
    match outcome {
        Ok(resp) => {
            target.failures.store(0, Ordering::Relaxed);
            Some(Arc::new(resp))
        }
        Err(e @ HttpError::ForbiddenAddress { .. }) => {
            if !target.refused.swap(true, Ordering::SeqCst) {
                report(
                    shared,
                    target,
                    None,
                    TargetErrorKind::Refused,
                    TargetFailure::Refused(e),
                )
                .await;
            }
            target.cancel.cancel();
            None
        }
        Err(e) => {
            let n = target.failures.fetch_add(1, Ordering::Relaxed) + 1;
            report(
                shared,
                target,
                Some(template_id),
                TargetErrorKind::Request,
                TargetFailure::Request {
                    url: built.url.clone(),
                    source: e,
                },
            )
            .await;
            if n == MAX_CONSECUTIVE_FAILURES {
                report(
                    shared,
                    target,
                    None,
                    TargetErrorKind::Request,
                    TargetFailure::GaveUp(n),
                )
                .await;
                target.cancel.cancel();
            }
            None
        }
    }
}
