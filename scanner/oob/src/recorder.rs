//! Turns what a listener saw into stored interactions: finds the ids it
//! carries, builds the [`Interaction`] and appends it for each registered
//! id. Shared by every listener so the fields are filled one way.

use std::net::IpAddr;

use scanfleet_interactsh::{IdMatch, Interaction};

use crate::metrics;
use crate::store::Store;

/// The parts of an interaction that depend on the listener.
#[derive(Debug, Default)]
pub struct Seen {
    pub protocol: &'static str,
    pub q_type: String,
    pub raw_request: String,
    pub raw_response: String,
    pub smtp_from: String,
}

/// Records interactions in the store; cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    store: Store,
}

impl Recorder {
    pub fn new(store: Store) -> Recorder {
        Recorder { store }
    }

    /// Stores `seen` once per distinct correlation id among `matches`
    /// that is registered; returns how many were stored. A Redis failure
    /// is logged, not returned: the listener answers its peer either way.
    pub async fn record(&self, matches: &[IdMatch], remote: IpAddr, seen: &Seen) -> usize {
        let mut stored = 0;
        let mut done: Vec<&str> = Vec::new();
        for m in matches {
            if done.contains(&m.correlation_id()) {
                continue;
            }
            done.push(m.correlation_id());
            let interaction = Interaction {
                protocol: seen.protocol.to_string(),
                unique_id: m.unique_id.clone(),
                full_id: m.full_id.clone(),
                q_type: seen.q_type.clone(),
                raw_request: seen.raw_request.clone(),
                raw_response: seen.raw_response.clone(),
                smtp_from: seen.smtp_from.clone(),
                remote_address: remote.to_string(),
                timestamp: chrono::Utc::now(),
            };
            let json = match serde_json::to_string(&interaction) {
                Ok(json) => json,
                Err(e) => {
                    tracing::warn!(error = %e, "could not encode an interaction");
                    continue;
                }
            };
            match self.store.record(m.correlation_id(), json).await {
                Ok(true) => {
                    stored += 1;
                    metrics::interaction_stored(seen.protocol);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, protocol = seen.protocol, "could not store an interaction")
                }
            }
        }
        stored
    }
}
