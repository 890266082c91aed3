//! `GET /metrics`: Prometheus text for operators, outside `/api/v1` and not
//! behind user auth (keep it off the public network at the proxy).
//!
//! Counted as they happen (the `metrics` facade, rendered by
//! `metrics-exporter-prometheus`): requests by route template, method and
//! status, with a latency histogram; rate-limit refusals; open WebSocket
//! connections. Read at scrape time: scans by status, the queue's depth
//! and the age of its oldest waiting scan, the fleet (nodes by state,
//! slots in all and in use, from the registry), and the ingest backlog (index entries not yet applied, and the age of
//! the oldest), and the webhook outbox (deliveries waiting, the age of the
//! oldest due one). Webhook deliveries are counted by outcome
//! (`scanfleet_webhook_deliveries_total`) by the dispatcher.

use std::sync::OnceLock;
use std::time::Instant;

use fred::interfaces::StreamsInterface;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use poem::http::StatusCode;
use poem::web::Data;
use poem::PathPattern;
use poem::{handler, Endpoint, IntoResponse, Request, Response};
use scanfleet_common::events::ScanStatus;

use crate::state::AppState;

/// Latency buckets in seconds, from a cached read to a slow report.
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The process's recorder, installed on first use (tests start several
/// apps in one process; they share it).
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
            .map(|b| b.build_recorder())
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        // Another recorder already set means this is not the first app of
        // the process; counting still goes to that one.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

/// Wraps the whole surface: one count and one latency sample per request,
/// labelled with the matched route template as the router names it
/// (`/api/v1/scans/:param0`), never the raw path, whose ids would make the
/// label set unbounded.
pub async fn count_requests<E: Endpoint>(next: E, req: Request) -> poem::Result<Response> {
    let method = req.method().to_string();
    let started = Instant::now();
    let result = next.call(req).await.map(IntoResponse::into_response);
    let (status, route) = match &result {
        Ok(resp) => (
            resp.status(),
            resp.data::<PathPattern>().map(|p| p.0.to_string()),
        ),
        Err(err) => (
            err.status(),
            err.data::<PathPattern>().map(|p| p.0.to_string()),
        ),
    };
    let route = route.unwrap_or_else(|| "unmatched".to_string());
    let labels = [
        ("method", method),
        ("route", route),
        ("status", status.as_u16().to_string()),
    ];
    metrics::counter!("scanfleet_http_requests_total", &labels).increment(1);
    metrics::histogram!("scanfleet_http_request_duration_seconds", &labels[..2])
        .record(started.elapsed().as_secs_f64());
    result
}

/// Refreshes the scrape-time gauges, then renders everything.
#[handler]
pub async fn metrics_endpoint(state: Data<&AppState>) -> Response {
    let handle = handle();
    if let Err(e) = refresh(&state).await {
        // Counters are still worth serving when a gauge cannot be read.
        tracing::warn!(error = %format!("{e:#}"), "metrics: gauges not refreshed");
    }
    Response::builder()
        .status(StatusCode::OK)
        .content_type("text/plain; version=0.0.4")
        .body(handle.render())
}

/// Seconds since the oldest of the waiting scans was created (scan ids are
/// UUID v7: their first 48 bits are the creation time in milliseconds); 0
/// when none waits. A scan put back after its node died counts from its
/// creation too: it has been waiting to be done that long.
fn oldest_waiting_secs(waiting: &[uuid::Uuid]) -> f64 {
    let now_ms = chrono::Utc::now().timestamp_millis();
    waiting
        .iter()
        .filter_map(|id| id.get_timestamp())
        .map(|ts| {
            let (secs, nanos) = ts.to_unix();
            secs as i64 * 1000 + i64::from(nanos / 1_000_000)
        })
        .min()
        .map_or(0.0, |ms| (now_ms - ms).max(0) as f64 / 1000.0)
}

/// The fleet from its registry: `scanfleet_nodes{state}` (live, draining,
/// lost), `scanfleet_slots_total` and `scanfleet_slots_used` (of the nodes
/// not lost).
async fn fleet_gauges(state: &AppState) -> Result<(), crate::error::Error> {
    use scanfleet_bus::nodes::NodeState;
    let now_ms = chrono::Utc::now().timestamp_millis().max(0) as u64;
    let nodes = scanfleet_bus::nodes::list(&state.redis, &state.keys, now_ms).await?;
    let (mut total, mut used) = (0u64, 0u64);
    let mut by_state = [
        (NodeState::Live, 0u64),
        (NodeState::Draining, 0),
        (NodeState::Lost, 0),
    ];
    for n in &nodes {
        let node_state = n.state_at(now_ms);
        if let Some(entry) = by_state.iter_mut().find(|(s, _)| *s == node_state) {
            entry.1 += 1;
        }
        if node_state != NodeState::Lost {
            total += u64::from(n.slots_total);
            used += n.running.len() as u64;
        }
    }
    for (node_state, n) in by_state {
        metrics::gauge!("scanfleet_nodes", "state" => node_state.as_str()).set(n as f64);
    }
    metrics::gauge!("scanfleet_slots_total").set(total as f64);
    metrics::gauge!("scanfleet_slots_used").set(used as f64);
    Ok(())
}

async fn refresh(state: &AppState) -> Result<(), crate::error::Error> {
    let db = state.db.get().await?;
    for status in ScanStatus::ALL {
        metrics::gauge!("scanfleet_scans", "status" => status.as_str()).set(0.0);
    }
    for row in db
        .query(
            "SELECT status, count(*) AS n FROM scans GROUP BY status",
            &[],
        )
        .await?
    {
        let status: ScanStatus = row.try_get("status")?;
        let n: i64 = row.try_get("n")?;
        metrics::gauge!("scanfleet_scans", "status" => status.as_str()).set(n as f64);
    }
    let waiting = state.scan_queue.waiting().await?;
    metrics::gauge!("scanfleet_queue_depth").set(waiting.len() as f64);
    metrics::gauge!("scanfleet_queue_oldest_waiting_seconds").set(oldest_waiting_secs(&waiting));
    fleet_gauges(state).await?;
    let index = state.keys.scan_events_index();
    let backlog: i64 = state.redis.xlen(&index).await?;
    metrics::gauge!("scanfleet_ingest_backlog_entries").set(backlog as f64);
    let oldest: Vec<(String, std::collections::HashMap<String, String>)> =
        state.redis.xrange_values(&index, "-", "+", Some(1)).await?;
    let lag = oldest
        .first()
        .and_then(|(id, _)| id.split('-').next()?.parse::<i64>().ok())
        .map(|ms| ((chrono::Utc::now().timestamp_millis() - ms).max(0)) as f64 / 1000.0)
        .unwrap_or(0.0);
    metrics::gauge!("scanfleet_ingest_lag_seconds").set(lag);
    let (pending, oldest) = scanfleet_core::store::webhooks::queue_stats(&**db).await?;
    metrics::gauge!("scanfleet_webhook_queue_depth").set(pending as f64);
    metrics::gauge!("scanfleet_webhook_oldest_pending_seconds").set(oldest);
    Ok(())
}
