//! Out-of-band detection: `{{interactsh-url}}` payload hosts in requests,
//! and the templates' `interactsh_*` matchers judged when the target calls
//! one back, through an interactsh session (`scanfleet-interactsh`).
//!
//! The rules are Nuclei's (`pkg/protocols/common/interactsh`): every
//! occurrence of a marker (`{{interactsh-url}}`, `{{interactsh-url_N}}`,
//! or URL-encoded, `%7B%7Binteractsh-url%7D%7D`) is a fresh payload host; a
//! request that carried some and whose block reads interactsh parts is not
//! judged on its response alone but waits, with the response's variables,
//! for an interaction with one of its hosts (up to the eviction time). An
//! interaction that arrives before its request is recorded is held for the
//! eviction time too. A run that made payload hosts ends after a cooldown
//! with a last poll, so late callbacks are still matched.
//!
//! One [`OobRun`] per run holds the waiting requests and the early
//! interactions; its poller task polls the session every poll period.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scanfleet_interactsh::{Interaction, Session};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::build::{Built, Outgoing};
use super::compile::CompiledTemplate;
use super::result::{build_results, with_evidence, MatchOutcome, ResultHead};
use super::vars::{string_value, Scope, VarMap};
use super::Event;
use crate::dsl::{Value, Vars};

/// The marker's name, as templates write it between `{{` and `}}`.
const URL_MARKER: &str = "interactsh-url";

/// How long a run waits for interactions, as Nuclei's flags name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OobTiming {
    /// `--interactions-poll-duration`: time between two polls.
    pub poll: Duration,
    /// `--interactions-cooldown-period`: extra wait at the end of a run.
    pub cooldown: Duration,
    /// `--interactions-eviction`: how long a request waits for its
    /// interactions, and an early interaction for its request.
    pub eviction: Duration,
}

impl Default for OobTiming {
    fn default() -> Self {
        OobTiming {
            poll: Duration::from_secs(5),
            cooldown: Duration::from_secs(5),
            eviction: Duration::from_secs(60),
        }
    }
}

/// A registered session and the timing to use it with; given to
/// [`super::Engine::with_interactsh`].
#[derive(Debug, Clone)]
pub struct Interactsh {
    pub session: Arc<Session>,
    pub timing: OobTiming,
}

/// Whether a name is an interactsh URL marker: `interactsh-url` or
/// `interactsh-url_N`.
fn is_url_marker(name: &str) -> bool {
    match name.strip_prefix(URL_MARKER) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('_')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// The variables a request renders its markers with: every read of a URL
/// marker makes a fresh payload host and notes it (name, host).
pub(crate) struct MarkerLayer {
    session: Arc<Session>,
    made: Mutex<Vec<(String, String)>>,
}

impl MarkerLayer {
    pub(crate) fn new(session: Arc<Session>) -> MarkerLayer {
        MarkerLayer {
            session,
            made: Mutex::default(),
        }
    }

    fn fresh(&self, name: &str) -> String {
        let host = self.session.payload_host();
        self.made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((name.to_string(), host.clone()));
        host
    }

    /// The hosts made since the last call, with the marker each replaced.
    pub(crate) fn take(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.made.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Replaces the URL-encoded markers (`%7B%7Binteractsh-url%7D%7D`,
    /// either brace encoded) left in a built request, each with a fresh
    /// host; the request's dump follows.
    pub(crate) fn replace_encoded(&self, built: &mut Built) {
        let mut changed = false;
        let mut fix = |bytes: &mut Vec<u8>| {
            if let Some(new) = self.replace_in(bytes) {
                *bytes = new;
                changed = true;
            }
        };
        match &mut built.outgoing {
            Outgoing::Normal(req) => {
                fix(&mut req.target);
                fix(&mut req.body);
                for (_, value) in &mut req.headers {
                    let mut v = std::mem::take(value).into_bytes();
                    fix(&mut v);
                    *value = String::from_utf8_lossy(&v).into_owned();
                }
                if changed {
                    built.dump = super::build::dump(req);
                }
            }
            Outgoing::Unsafe { bytes, .. } => {
                fix(bytes);
                if changed {
                    built.dump = bytes.clone();
                }
            }
        }
        if changed {
            let mut url = std::mem::take(&mut built.url).into_bytes();
            if let Some(new) = self.replace_in(&url) {
                url = new;
            }
            built.url = String::from_utf8_lossy(&url).into_owned();
        }
    }

    /// `bytes` with every encoded marker replaced, or `None` when it holds
    /// none.
    fn replace_in(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut rest = bytes;
        let mut found = false;
        while let Some((start, end, name)) = next_encoded_marker(rest) {
            found = true;
            out.extend_from_slice(&rest[..start]);
            out.extend_from_slice(self.fresh(&name).as_bytes());
            rest = &rest[end..];
        }
        found.then(|| {
            out.extend_from_slice(rest);
            out
        })
    }
}

/// The first marker in `text` written with at least one pair of encoded
/// braces: its start, end and name.
fn next_encoded_marker(text: &[u8]) -> Option<(usize, usize, String)> {
    let open = |at: &[u8]| -> Option<usize> {
        if at.starts_with(b"{{") {
            Some(2)
        } else if at.len() >= 6 && at[..6].eq_ignore_ascii_case(b"%7b%7b") {
            Some(6)
        } else {
            None
        }
    };
    let close = |at: &[u8]| -> Option<usize> {
        if at.starts_with(b"}}") {
            Some(2)
        } else if at.len() >= 6 && at[..6].eq_ignore_ascii_case(b"%7d%7d") {
            Some(6)
        } else {
            None
        }
    };
    let mut from = 0;
    while let Some(pos) = memchr::memmem::find(&text[from..], URL_MARKER.as_bytes()) {
        let at = from + pos;
        from = at + URL_MARKER.len();
        let Some(open_len) = [6, 2]
            .into_iter()
            .find(|n| at >= *n && open(&text[at - n..]) == Some(*n))
        else {
            continue;
        };
        let mut end = at + URL_MARKER.len();
        if text.get(end) == Some(&b'_') {
            let digits = text[end + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits > 0 {
                end += 1 + digits;
            }
        }
        let Some(close_len) = close(&text[end..]) else {
            continue;
        };
        if open_len == 2 && close_len == 2 {
            // Plain braces are the renderer's: left as they are.
            continue;
        }
        let name = String::from_utf8_lossy(&text[at..end]).into_owned();
        return Some((at - open_len, end + close_len, name));
    }
    None
}

impl Vars for MarkerLayer {
    fn get(&self, name: &str) -> Option<Value> {
        if is_url_marker(name) {
            Some(string_value(self.fresh(name)))
        } else if name == "interactsh-server" {
            Some(string_value(self.session.payload_domain().to_string()))
        } else {
            None
        }
    }

    fn contains(&self, name: &str) -> bool {
        is_url_marker(name) || name == "interactsh-server"
    }
}

/// The values a request's hosts give its matchers, as Nuclei's
/// `MakePlaceholders`: each marker's last host, `interactsh-id` (the
/// host's 33-character id) beside each `interactsh-url`, and the server.
pub(crate) fn placeholders(session: &Session, hosts: &[(String, String)]) -> VarMap {
    let mut map = VarMap::default();
    map.insert(
        "interactsh-server".to_string(),
        string_value(session.payload_domain().to_string()),
    );
    for (name, host) in hosts {
        map.insert(name.clone(), string_value(host.clone()));
        map.insert(
            name.replacen("url", "id", 1),
            string_value(unique_id(host).to_string()),
        );
    }
    map
}

/// The interaction id of a payload host: its first label, lower-cased.
fn unique_id(host: &str) -> String {
    host.split('.').next().unwrap_or(host).to_ascii_lowercase()
}

/// A request waiting for its interactions: what judging it needs.
pub(crate) struct Waiting {
    pub tpl: Arc<CompiledTemplate>,
    pub block: usize,
    pub head: ResultHead,
    pub matched_at: String,
    /// The response's variables above the request's.
    pub scope: Scope,
    /// Reported already (through another of its hosts): Nuclei writes an
    /// event once.
    pub reported: AtomicBool,
}

#[derive(Default)]
struct State {
    /// By interaction id: the request that sent the host, since when.
    waiting: HashMap<String, (Instant, Arc<Waiting>)>,
    /// By interaction id: interactions no request claimed yet.
    early: HashMap<String, (Instant, Vec<Interaction>)>,
}

/// The out-of-band state of one run.
pub(crate) struct OobRun {
    pub session: Arc<Session>,
    timing: OobTiming,
    sink: mpsc::Sender<Event>,
    state: Mutex<State>,
    /// A payload host was made: the run ends after the cooldown.
    generated: AtomicBool,
}

impl OobRun {
    pub(crate) fn new(oob: &Interactsh, sink: mpsc::Sender<Event>) -> OobRun {
        OobRun {
            session: oob.session.clone(),
            timing: oob.timing,
            sink,
            state: Mutex::default(),
            generated: AtomicBool::new(false),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that payload hosts went out (whether or not a block waits
    /// for them), so the run waits the cooldown.
    pub(crate) fn note_generated(&self) {
        self.generated.store(true, Ordering::Relaxed);
    }

    /// Records a request that waits for interactions with `hosts`; judges
    /// at once any interaction that came before it.
    pub(crate) async fn wait_for(&self, hosts: &[(String, String)], waiting: Waiting) {
        let waiting = Arc::new(waiting);
        for (_, host) in hosts {
            let id = unique_id(host);
            let early = {
                let mut state = self.state();
                match state.early.remove(&id) {
                    Some((_, interactions)) => interactions,
                    None => {
                        state.waiting.insert(id, (Instant::now(), waiting.clone()));
                        continue;
                    }
                }
            };
            for interaction in early {
                if self.judge(&waiting, &interaction).await {
                    break;
                }
            }
        }
    }

    /// Hands one polled interaction to its waiting request, or holds it.
    async fn handle(&self, interaction: Interaction) {
        let id = interaction.unique_id.to_ascii_lowercase();
        let waiting = self.state().waiting.get(&id).map(|(_, w)| w.clone());
        match waiting {
            Some(waiting) => {
                if self.judge(&waiting, &interaction).await {
                    self.state().waiting.remove(&id);
                }
            }
            None => {
                let mut state = self.state();
                let entry = state
                    .early
                    .entry(id)
                    .or_insert_with(|| (Instant::now(), Vec::new()));
                entry.1.push(interaction);
            }
        }
    }

    /// Judges a waiting request with one interaction; reports what matched
    /// (once per request). True when the operators matched.
    async fn judge(&self, waiting: &Waiting, interaction: &Interaction) -> bool {
        let operators = &waiting.tpl.blocks[waiting.block].operators;
        let scope = waiting
            .scope
            .clone()
            .above(Arc::new(interaction_vars(interaction)));
        let result = operators.evaluate(&scope);
        let matched = result.matched || (!result.has_matchers && !result.extracts.is_empty());
        if !matched || waiting.reported.swap(true, Ordering::SeqCst) {
            return matched;
        }
        let outcome = MatchOutcome {
            has_matchers: result.has_matchers,
            only_internal_matchers: operators.only_internal_matchers(),
            matched: result.matched,
            matched_names: result.matched_names.clone(),
            extracts: result.extracts.clone(),
        };
        let results = build_results(&waiting.head, &waiting.matched_at, &outcome);
        for r in with_evidence(results, &waiting.scope) {
            // A closed receiver means nobody wants the rest.
            let _ = self.sink.send(Event::Result(r)).await;
        }
        true
    }

    /// Drops requests and early interactions older than the eviction time.
    fn evict(&self) {
        let eviction = self.timing.eviction;
        let mut state = self.state();
        state
            .waiting
            .retain(|_, (since, _)| since.elapsed() < eviction);
        state
            .early
            .retain(|_, (since, _)| since.elapsed() < eviction);
    }

    /// One poll: evicts, fetches and hands out what arrived.
    async fn poll_once(&self) {
        self.evict();
        match self.session.poll().await {
            Ok(interactions) => {
                for interaction in interactions {
                    self.handle(interaction).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "polling the interactsh server failed"),
        }
    }

    /// Polls every poll period until dropped (the run aborts it).
    pub(crate) async fn poll_forever(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(self.timing.poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate; nothing was sent yet.
        ticks.tick().await;
        loop {
            ticks.tick().await;
            self.poll_once().await;
        }
    }

    /// The end of a run: when payload hosts went out, waits the cooldown
    /// (the poller still running) and polls a last time.
    pub(crate) async fn finish(&self, cancel: &CancellationToken) {
        if !self.generated.load(Ordering::Relaxed) || cancel.is_cancelled() {
            return;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(self.timing.cooldown) => {}
        }
        self.poll_once().await;
    }
}

/// The variables an interaction adds for the matchers, as Nuclei names
/// them; a DNS request is lower-cased (resolvers change the case of names).
fn interaction_vars(interaction: &Interaction) -> VarMap {
    let request = if interaction.protocol.eq_ignore_ascii_case("dns") {
        interaction.raw_request.to_lowercase()
    } else {
        interaction.raw_request.clone()
    };
    let mut map = VarMap::default();
    for (name, value) in [
        ("interactsh_protocol", interaction.protocol.clone()),
        ("interactsh_request", request),
        ("interactsh_response", interaction.raw_response.clone()),
        ("interactsh_ip", interaction.remote_address.clone()),
    ] {
        map.insert(name.to_string(), string_value(value));
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_markers_are_the_plain_and_numbered_names() {
        assert!(is_url_marker("interactsh-url"));
        assert!(is_url_marker("interactsh-url_2"));
        assert!(!is_url_marker("interactsh-url_"));
        assert!(!is_url_marker("interactsh-url_x"));
        assert!(!is_url_marker("interactsh-server"));
    }

    #[test]
    fn encoded_markers_are_found_and_plain_ones_left_to_the_renderer() {
        let text = b"a={{interactsh-url}}&b=%7B%7Binteractsh-url_1%7d%7d&c=%7b%7binteractsh-url}}";
        let (start, end, name) = next_encoded_marker(text).unwrap();
        assert_eq!(&text[start..end], b"%7B%7Binteractsh-url_1%7d%7d");
        assert_eq!(name, "interactsh-url_1");
        let (start2, end2, name2) = next_encoded_marker(&text[end..]).unwrap();
        assert_eq!(&text[end + start2..end + end2], b"%7b%7binteractsh-url}}");
        assert_eq!(name2, "interactsh-url");
        assert!(next_encoded_marker(b"{{interactsh-url}}").is_none());
    }

    #[test]
    fn a_dns_request_is_lower_cased_for_the_matchers_and_others_are_not() {
        let mut i: Interaction = serde_json::from_value(serde_json::json!({
            "protocol": "dns", "unique-id": "u", "full-id": "f",
            "raw-request": "ABC.Example", "remote-address": "127.0.0.1",
            "timestamp": "2024-05-01T10:00:00Z"
        }))
        .unwrap();
        let vars = interaction_vars(&i);
        assert_eq!(
            vars.get("interactsh_request").unwrap().to_string_lossy(),
            "abc.example"
        );
        i.protocol = "http".into();
        let vars = interaction_vars(&i);
        assert_eq!(
            vars.get("interactsh_request").unwrap().to_string_lossy(),
            "ABC.Example"
        );
    }
}
