//! Per-target sharing of identical requests across templates.
//!
//! Clustering ([`super::run`]) groups templates whose only request is the
//! same before anything is sent. This cache goes further, at send time:
//! any request of any template (path or raw, first step or later) that is
//! byte for byte the same as one already sent to the target, once header
//! order, name case and a written-out default Host are set aside, gets the earlier response instead
//! of going out again. Concurrent identical requests wait for the one in
//! flight.
//!
//! Only safe methods (GET, HEAD) without a body are shared: by HTTP
//! semantics they do not change the server's state, so whether a template
//! sends one itself or reuses another's answer cannot change what it sees.
//! The key holds everything that can change the response: method, origin,
//! request-target, every header value (the jar's cookies included), and the
//! redirect policy. `unsafe: true` requests are never shared: their exact
//! bytes and connection are the point.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::build::{Built, Outgoing};
use scanfleet_http::{Response, SendOptions};

/// Response bytes kept per target; past this, new responses are not kept
/// (their requests are sent again when repeated).
const BUDGET_BYTES: usize = 64 * 1024 * 1024;

/// A shared answer as it becomes known: `None` until the first sender is
/// done, then `Some(None)` when its request failed (the failure was
/// reported to the template that sent it; the others send again) or
/// `Some(Some(response))`. A dropped sender also counts as a failure.
type Answer = Option<Option<Arc<Response>>>;

/// How a request's redirects are followed: follow, most hops, same host only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RedirectPolicy(bool, u32, bool);

impl RedirectPolicy {
    pub(crate) fn of(options: &SendOptions) -> RedirectPolicy {
        RedirectPolicy(
            options.follow_redirects && options.max_redirects > 0,
            options.max_redirects,
            options.host_redirects_only,
        )
    }
}

/// The execution that sent a request first, its redirect policy, and its
/// answer.
type Entry = (u64, RedirectPolicy, watch::Receiver<Answer>);

/// The responses of one target's shareable requests.
#[derive(Default)]
pub(crate) struct ResponseCache {
    /// Key to answer (or answer in flight). Held only to look up or insert.
    /// Each answer carries the id of the execution that sent it.
    slots: Mutex<HashMap<Vec<u8>, Entry, ahash::RandomState>>,
    /// Body and header bytes of the answers kept.
    bytes: AtomicUsize,
}

/// What [`ResponseCache::lookup`] found.
pub(crate) enum Lookup {
    /// Not shareable: send it.
    Bypass,
    /// Send it and offer the outcome through [`ResponseCache::publish`].
    Leader(watch::Sender<Answer>, Vec<u8>),
    /// Answered, or in flight under another template (with that sender's
    /// redirect policy): [`ResponseCache::follow`].
    Follower(watch::Receiver<Answer>, RedirectPolicy),
}

impl ResponseCache {
    /// `run` names the template execution asking: an execution never gets
    /// back the answer to its own earlier request, since a template that
    /// repeats a request (a cache-poisoning check) wants the server's
    /// answer now.
    pub(crate) fn lookup(
        &self,
        built: &Built,
        options: &SendOptions,
        cookie: Option<&str>,
        run: u64,
    ) -> Lookup {
        let Some(key) = key(built, cookie) else {
            return Lookup::Bypass;
        };
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        match slots.get(&key) {
            Some((sender, _, _)) if *sender == run => Lookup::Bypass,
            Some((_, policy, answer)) => Lookup::Follower(answer.clone(), *policy),
            None => {
                let (tx, rx) = watch::channel(None);
                slots.insert(key.clone(), (run, RedirectPolicy::of(options), rx));
                Lookup::Leader(tx, key)
            }
        }
    }

    /// Publishes the leader's outcome. A failure or an answer past the
    /// budget is not kept for later requests (those in flight still get it).
    pub(crate) fn publish(
        &self,
        slot: watch::Sender<Answer>,
        key: Vec<u8>,
        outcome: Option<&Arc<Response>>,
    ) {
        let size = outcome.map_or(0, |r| response_size(r));
        // Nobody waiting is fine: the receiver in the map stays.
        let _ = slot.send(Some(outcome.cloned()));
        let keep = outcome.is_some()
            && self.bytes.fetch_add(size, Ordering::Relaxed) + size <= BUDGET_BYTES;
        if !keep {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.remove(&key);
        }
    }

    /// Waits for the leader; `None` when it failed or was cancelled, or
    /// when its answer does not fit this request's redirect policy: then
    /// the request goes out itself.
    pub(crate) async fn follow(
        &self,
        mut answer: watch::Receiver<Answer>,
        leader: RedirectPolicy,
        options: &SendOptions,
    ) -> Option<Arc<Response>> {
        let known = answer.wait_for(Option::is_some).await.ok()?;
        let response = known.as_ref()?.as_ref()?;
        fits_policy(response, leader, RedirectPolicy::of(options)).then(|| response.clone())
    }
}

/// Whether an answer got under the `leader`'s redirect policy is the one
/// this request would get under its own: the same policy, or an answer of
/// one hop (nothing was followed) that this request would not follow either
/// (not a redirect status, or this request does not follow).
fn fits_policy(answer: &Response, leader: RedirectPolicy, own: RedirectPolicy) -> bool {
    if leader == own {
        return true;
    }
    let one_hop = answer.redirect_responses.is_empty();
    let redirect = matches!(answer.status, 301 | 302 | 303 | 307 | 308);
    let follows = own.0;
    one_hop && !(redirect && follows)
}

fn response_size(r: &Response) -> usize {
    let own = r.body.len()
        + r.headers
            .iter()
            .map(|(n, v)| n.len() + v.len())
            .sum::<usize>();
    own + r
        .redirect_responses
        .iter()
        .map(response_size)
        .sum::<usize>()
}

/// Appends one field of a sharing key, ended by a NUL.
fn push_field(key: &mut Vec<u8>, bytes: impl IntoIterator<Item = u8>) {
    key.extend(bytes);
    key.push(0);
}

/// A name's bytes in ASCII lower case.
fn lower_bytes(name: &str) -> impl Iterator<Item = u8> + '_ {
    name.bytes().map(|b| b.to_ascii_lowercase())
}

/// The sharing key, or `None` for a request that must go out itself.
fn key(built: &Built, cookie: Option<&str>) -> Option<Vec<u8>> {
    let Outgoing::Normal(req) = &built.outgoing else {
        return None;
    };
    let safe = req.method.eq_ignore_ascii_case("GET") || req.method.eq_ignore_ascii_case("HEAD");
    if !safe || !req.body.is_empty() {
        return None;
    }
    // A Host header written as the one the client would send anyway.
    let default_host = |value: &str| value.trim().eq_ignore_ascii_case(&req.url.authority());
    let mut headers: Vec<(&str, &str)> = req
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .filter(|(n, v)| !(n.eq_ignore_ascii_case("host") && default_host(v)))
        .collect();
    // Header order and name case do not change what a server answers;
    // the order of repeated headers of one name might, so it is kept.
    headers.sort_by(|a, b| lower_bytes(a.0).cmp(lower_bytes(b.0)));
    let mut key = Vec::with_capacity(256);
    push_field(&mut key, req.method.bytes().map(|b| b.to_ascii_uppercase()));
    push_field(&mut key, req.url.scheme.as_str().bytes());
    push_field(&mut key, lower_bytes(&req.url.host));
    push_field(&mut key, itoa::Buffer::new().format(req.url.port).bytes());
    push_field(&mut key, req.target.iter().copied());
    for (name, value) in &headers {
        push_field(&mut key, lower_bytes(name));
        push_field(&mut key, value.bytes());
    }
    push_field(&mut key, cookie.unwrap_or("").bytes());
    Some(key)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use scanfleet_http::{Request, TargetUrl};

    fn built(method: &str, target: &str, headers: &[(&str, &str)]) -> Built {
        let url = TargetUrl::parse("http://Shop.test:8080").unwrap();
        Built {
            outgoing: Outgoing::Normal(Request {
                url,
                method: method.to_string(),
                target: target.as_bytes().to_vec(),
                headers: headers
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
                body: Vec::new(),
            }),
            url: String::new(),
            dump: Vec::new(),
            wait: Duration::ZERO,
            digest: None,
        }
    }

    #[test]
    fn the_key_ignores_header_order_name_case_and_a_default_host_only() {
        let base = key(&built("GET", "/a", &[("Accept", "x"), ("X-Id", "1")]), None).unwrap();
        for same in [
            built("get", "/a", &[("x-id", "1"), ("ACCEPT", "x")]),
            built(
                "GET",
                "/a",
                &[("Accept", "x"), ("Host", " shop.test:8080"), ("X-Id", "1")],
            ),
        ] {
            assert_eq!(key(&same, None).as_ref(), Some(&base));
        }
        for other in [
            built("HEAD", "/a", &[("Accept", "x"), ("X-Id", "1")]),
            built("GET", "/b", &[("Accept", "x"), ("X-Id", "1")]),
            built("GET", "/a", &[("Accept", "y"), ("X-Id", "1")]),
            built(
                "GET",
                "/a",
                &[("Accept", "x"), ("X-Id", "1"), ("Host", "other.test")],
            ),
            built("GET", "/a", &[("Accept", "x")]),
        ] {
            assert_ne!(key(&other, None).as_ref(), Some(&base));
        }
        assert_ne!(
            key(
                &built("GET", "/a", &[("Accept", "x"), ("X-Id", "1")]),
                Some("s=1")
            ),
            Some(base)
        );
        // Repeated headers of one name keep their order.
        assert_ne!(
            key(&built("GET", "/", &[("A", "1"), ("a", "2")]), None),
            key(&built("GET", "/", &[("a", "2"), ("A", "1")]), None)
        );
        // Unsafe methods and bodies are never shared.
        assert!(key(&built("POST", "/a", &[]), None).is_none());
    }
}
