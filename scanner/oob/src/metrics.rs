//! Prometheus metrics: counted as things happen through the `metrics`
//! facade, rendered as text at `/metrics` on `--metrics ADDR`.
//!
//! Names: `oob_interactions_stored_total{protocol}`,
//! `oob_registrations_total`, `oob_polls_total`,
//! `oob_dns_queries_total{result="answered"|"refused"}`.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process's recorder, installed on first use (tests start several
/// servers in one process; they share it).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // Another recorder already set means something else in the process
        // installed one first; counting then goes there.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

pub fn interaction_stored(protocol: &'static str) {
    metrics::counter!("oob_interactions_stored_total", "protocol" => protocol).increment(1);
}

pub fn registered() {
    metrics::counter!("oob_registrations_total").increment(1);
}

pub fn polled() {
    metrics::counter!("oob_polls_total").increment(1);
}

pub fn dns_query(answered: bool) {
    let result = if answered { "answered" } else { "refused" };
    metrics::counter!("oob_dns_queries_total", "result" => result).increment(1);
}
