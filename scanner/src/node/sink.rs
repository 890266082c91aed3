//! Where a scan's events go: appended to the scan's own Redis stream, with a
//! pointer entry on the ingest index so the ingesters know the scan has new
//! events. A scanner node writes nothing else anywhere.

use std::sync::Mutex;
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::StreamsInterface;
use scanfleet_common::events::{
    FindingEvent, ScanEvent, ScanEventKind, ScanStatus, Stage, EVENT_FIELD,
};
use scanfleet_common::keys::Keys;
use uuid::Uuid;

use super::NodeError;

/// Attempts of one write before the scan gives up on Redis (about 30 s in
/// all), so a short Redis restart costs nothing.
const WRITE_ATTEMPTS: u32 = 12;

/// The event writer of one scan. Progress only ever grows: every progress
/// event carries the highest value reported so far (including by earlier
/// attempts of the scan on other nodes, the `floor`).
pub struct EventSink {
    redis: Client,
    scan_id: Uuid,
    stream: String,
    index: String,
    /// Last progress event sent: stage, value, tool.
    last: Mutex<(Option<Stage>, u8, Option<String>)>,
}

impl EventSink {
    pub fn new(redis: Client, keys: &Keys, scan_id: Uuid, floor: u8) -> EventSink {
        EventSink {
            redis,
            scan_id,
            stream: keys.scan_events_stream(scan_id),
            index: keys.scan_events_index(),
            last: Mutex::new((None, floor, None)),
        }
    }

    pub async fn status(&self, status: ScanStatus, error: Option<String>) -> Result<(), NodeError> {
        self.write(vec![ScanEventKind::Status { status, error }])
            .await
    }

    pub async fn error(&self, stage: Stage, message: String) -> Result<(), NodeError> {
        self.write(vec![ScanEventKind::Error {
            stage: Some(stage),
            message,
        }])
        .await
    }

    pub async fn findings(&self, findings: Vec<FindingEvent>) -> Result<(), NodeError> {
        if findings.is_empty() {
            return Ok(());
        }
        metrics::counter!("scanfleet_scanner_findings_total").increment(findings.len() as u64);
        self.write(findings.into_iter().map(ScanEventKind::Finding).collect())
            .await
    }

    /// Reports `value` in `stage` with `tool`; sends nothing when neither the
    /// stage, the tool nor the (never decreasing) value changed.
    pub async fn progress(&self, stage: Stage, value: u8, tool: &str) -> Result<(), NodeError> {
        let event = {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            let value = value.max(last.1).min(99);
            if last.0 == Some(stage) && last.1 == value && last.2.as_deref() == Some(tool) {
                return Ok(());
            }
            *last = (Some(stage), value, Some(tool.to_string()));
            ScanEventKind::Progress {
                stage,
                progress: value,
                current_tool: Some(tool.to_string()),
            }
        };
        self.write(vec![event]).await
    }

    /// Appends the events, then one index entry, retrying while Redis is
    /// unreachable. A retry after a partial write may append an event twice:
    /// every consumer is idempotent, so that is harmless.
    async fn write(&self, events: Vec<ScanEventKind>) -> Result<(), NodeError> {
        let lines: Vec<String> = events
            .into_iter()
            .map(|kind| ScanEvent::new(self.scan_id, kind).to_json())
            .collect();
        let mut delay = Duration::from_millis(100);
        for attempt in 1..=WRITE_ATTEMPTS {
            match self.append(&lines).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt == WRITE_ATTEMPTS => return Err(NodeError::Redis(e)),
                Err(e) => {
                    tracing::warn!(scan_id = %self.scan_id, error = %e, "writing scan events failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    async fn append(&self, lines: &[String]) -> Result<(), fred::error::Error> {
        let pipeline = self.redis.pipeline();
        for line in lines {
            let _: () = pipeline
                .xadd(&self.stream, false, None, "*", (EVENT_FIELD, line.as_str()))
                .await?;
        }
        let _: () = pipeline
            .xadd(
                &self.index,
                false,
                None,
                "*",
                ("scan_id", self.scan_id.to_string()),
            )
            .await?;
        let _: Vec<fred::types::Value> = pipeline.all().await?;
        Ok(())
    }
}

/// The highest progress an earlier attempt of the scan reported, read from
/// the end of its stream, so a scan restarted on another node never goes
/// backwards.
pub async fn progress_floor(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<u8, NodeError> {
    let entries: Vec<(String, std::collections::HashMap<String, String>)> = redis
        .xrevrange_values(keys.scan_events_stream(scan_id), "+", "-", Some(200))
        .await?;
    Ok(entries
        .iter()
        .filter_map(|(_, fields)| fields.get(EVENT_FIELD))
        .filter_map(|json| serde_json::from_str::<ScanEvent>(json).ok())
        .filter_map(|e| match e.kind {
            ScanEventKind::Progress { progress, .. } => Some(progress),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        .min(99))
}
