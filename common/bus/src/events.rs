//! Scan event streams: where scanner nodes (and the api's stops, the
//! reaper's failures) append [`ScanEvent`]s, and where the ingester and the
//! WebSocket hub read them. Every read and write of the layout goes
//! through here.
//!
//! # Layout (the decision, and why)
//! - **One stream per scan**, `<prefix>:scan:{<id>}:events`, holding every
//!   event of that scan in the order it was written, one field
//!   ([`EVENT_FIELD`]) per entry holding the event's JSON. It is the record:
//!   the ingester applies it in order, and the WebSocket reads the same
//!   stream for snapshots and live updates. Nobody trims it; the ingester
//!   sets an expiry only after it committed the scan's terminal event.
//! - **One ingest index**, `<prefix>:scan-events`: each append also adds an
//!   entry naming the scan ([`INDEX_FIELD`]). The ingesters read it in the
//!   consumer group [`INGEST_GROUP`] ([`IngestIndex`]), so a thousand
//!   running scans cost one blocking read per api process, and replicas
//!   split the index between them. Index entries are only pointers: the
//!   ingester reads the scan's own stream from the cursor it saved.
//!
//! - **One recorded stream per scan**, `<prefix>:scan:{<id>}:recorded`:
//!   after each commit the ingester appends what it recorded of the scan's
//!   findings (their identity on the target, [`RecordedFinding`]), one
//!   entry per commit ([`append_recorded`]). The WebSocket hub reads it
//!   beside the events stream, so listeners never ask Postgres for a
//!   finding. It expires with the events stream.
//!
//! On a Redis Cluster a scan's streams are in the slot of its id (the hash
//! tag), so scans spread over the masters; an append's two `XADD`s (the
//! scan's stream, the index) go in one pipeline but are separate commands,
//! each sent to its own slot's master. A read of several scans' streams at
//! once ([`read_streams`]) must name streams of one slot only.
//!
//! After Redis lost its data the streams start again empty; new entries get
//! ids from the server's clock, after every id a cursor saved before, so
//! readers carry on from their cursors.

use std::collections::HashMap;
use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::StreamsInterface;
use scanfleet_common::events::{RecordedFinding, ScanEvent, EVENT_FIELD};
use scanfleet_common::keys::{Keys, INGEST_GROUP};
use uuid::Uuid;

use crate::BusError;

/// The one field of an ingest index entry: the scan's id.
pub const INDEX_FIELD: &str = "scan_id";

/// A stream entry as Redis answers it: id and fields.
pub type Entry = (String, HashMap<String, String>);

/// The event of a stream entry; `None` for an entry that is not one.
pub fn decode(fields: &HashMap<String, String>) -> Option<ScanEvent> {
    serde_json::from_str(fields.get(EVENT_FIELD)?).ok()
}

/// Whether stream id `a` comes after `b` (`ms-seq`, compared as numbers).
pub fn id_after(a: &str, b: &str) -> bool {
    fn split(id: &str) -> (u64, u64) {
        let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
        (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
    }
    split(a) > split(b)
}

/// Appends events (as JSON lines, [`ScanEvent::to_json`]) to the scan's
/// stream, then one index entry, in one round trip. Not atomic: a retry
/// after a failure may append an event twice, which every reader absorbs.
pub async fn append(
    redis: &Client,
    keys: &Keys,
    scan_id: Uuid,
    lines: &[String],
) -> Result<(), BusError> {
    let stream = keys.scan_events_stream(scan_id);
    let pipeline = redis.pipeline();
    for line in lines {
        let _: () = pipeline
            .xadd(&stream, false, None, "*", (EVENT_FIELD, line.as_str()))
            .await?;
    }
    let _: () = pipeline
        .xadd(
            keys.scan_events_index(),
            false,
            None,
            "*",
            (INDEX_FIELD, scan_id.to_string()),
        )
        .await?;
    let _: Vec<fred::types::Value> = pipeline.all().await?;
    Ok(())
}

/// Appends one event (the api's stop, the reaper's failure).
pub async fn append_event(redis: &Client, keys: &Keys, event: &ScanEvent) -> Result<(), BusError> {
    append(redis, keys, event.scan_id, &[event.to_json()]).await
}

/// The one field of a recorded stream entry: a JSON array of
/// [`RecordedFinding`]s.
pub const RECORDED_FIELD: &str = "findings";

/// How long a recorded stream lives after its last write: longer than any
/// scan's deadline; the ingester shortens it with the events stream's.
const RECORDED_TTL_SECS: i64 = 24 * 60 * 60;

/// Appends what the ingester recorded of a scan's findings (after its
/// commit), in one round trip.
pub async fn append_recorded(
    redis: &Client,
    keys: &Keys,
    scan_id: Uuid,
    findings: &[RecordedFinding],
) -> Result<(), BusError> {
    use fred::interfaces::KeysInterface;
    if findings.is_empty() {
        return Ok(());
    }
    let json = serde_json::to_string(findings).map_err(BusError::Encode)?;
    let stream = keys.scan_recorded_stream(scan_id);
    let pipeline = redis.pipeline();
    let _: () = pipeline
        .xadd(&stream, false, None, "*", (RECORDED_FIELD, json.as_str()))
        .await?;
    let _: () = pipeline.expire(&stream, RECORDED_TTL_SECS, None).await?;
    let _: Vec<fred::types::Value> = pipeline.all().await?;
    Ok(())
}

/// The recorded findings of a recorded stream's entry (none for an entry
/// that is not one).
pub fn decode_recorded(fields: &HashMap<String, String>) -> Vec<RecordedFinding> {
    fields
        .get(RECORDED_FIELD)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// Entries of `stream` after `after` (exclusive; `-` for the start) up to
/// `upto` (inclusive; `+` for the end), at most `count`.
pub async fn range(
    redis: &Client,
    stream: &str,
    after: &str,
    upto: &str,
    count: u64,
) -> Result<Vec<Entry>, BusError> {
    let start = if after == "-" {
        "-".to_string()
    } else {
        format!("({after}")
    };
    Ok(redis
        .xrange_values(stream, start, upto, Some(count))
        .await?)
}

/// The last `count` entries of `stream`, newest first.
pub async fn latest(redis: &Client, stream: &str, count: u64) -> Result<Vec<Entry>, BusError> {
    Ok(redis
        .xrevrange_values(stream, "+", "-", Some(count))
        .await?)
}

/// A blocking read of several streams from their ids; entries by stream.
/// `redis` must be a connection of its own: it blocks. On a cluster the
/// streams must share a slot.
pub async fn read_streams(
    redis: &Client,
    streams: Vec<String>,
    ids: Vec<String>,
    count: u64,
    block: Duration,
) -> Result<HashMap<String, Vec<Entry>>, BusError> {
    let reply: fred::types::Value = redis
        .xread(Some(count), Some(block.as_millis() as u64), streams, ids)
        .await?;
    // A read that timed out answers nil.
    if reply.is_null() {
        return Ok(HashMap::new());
    }
    Ok(reply.into_xread_response()?)
}

/// The ingesters' side of the ingest index: a consumer group read.
pub struct IngestIndex {
    /// Blocking reads: a connection of its own.
    redis: Client,
    index: String,
    /// This process's consumer name in the group.
    consumer: String,
}

impl IngestIndex {
    pub fn new(redis: Client, keys: &Keys, consumer: String) -> IngestIndex {
        IngestIndex {
            redis,
            index: keys.scan_events_index(),
            consumer,
        }
    }

    /// The client the index is read on.
    pub fn client(&self) -> &Client {
        &self.redis
    }

    /// Creates the consumer group (and the index) unless it exists; after
    /// Redis lost its data this makes them again.
    pub async fn ensure_group(&self) -> Result<(), BusError> {
        let created: Result<(), fred::error::Error> = self
            .redis
            .xgroup_create(&self.index, INGEST_GROUP, "0", true)
            .await;
        match created {
            Ok(()) => Ok(()),
            Err(e) if e.details().contains("BUSYGROUP") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Entries from `from` (`>`: new ones; `0`: this consumer's pending
    /// ones), blocking up to `block` when there are none.
    pub async fn read(
        &self,
        from: &str,
        count: u64,
        block: Option<Duration>,
    ) -> Result<Vec<Entry>, BusError> {
        let reply: fred::types::Value = self
            .redis
            .xreadgroup(
                INGEST_GROUP,
                self.consumer.as_str(),
                Some(count),
                block.map(|b| b.as_millis() as u64),
                false,
                self.index.as_str(),
                from,
            )
            .await?;
        if reply.is_null() {
            return Ok(Vec::new());
        }
        let mut reply: HashMap<String, Vec<Entry>> = reply.into_xread_response()?;
        Ok(reply.remove(&self.index).unwrap_or_default())
    }

    /// Takes over entries another consumer left pending for `idle`.
    pub async fn claim(&self, idle: Duration, count: u64) -> Result<Vec<Entry>, BusError> {
        let (_, entries): (String, Vec<Entry>) = self
            .redis
            .xautoclaim_values(
                &self.index,
                INGEST_GROUP,
                self.consumer.as_str(),
                idle.as_millis() as u64,
                "0-0",
                Some(count),
                false,
            )
            .await?;
        Ok(entries)
    }

    /// Acknowledges and deletes handled entries.
    pub async fn done(&self, ids: Vec<String>) -> Result<(), BusError> {
        if ids.is_empty() {
            return Ok(());
        }
        let _: i64 = self
            .redis
            .xack(&self.index, INGEST_GROUP, ids.clone())
            .await?;
        let _: i64 = self.redis.xdel(&self.index, ids).await?;
        Ok(())
    }
}

/// The scans named by index entries, each once, in order.
pub fn scans_named(entries: &[Entry]) -> Vec<Uuid> {
    let mut scans: Vec<Uuid> = entries
        .iter()
        .filter_map(|(_, f)| f.get(INDEX_FIELD).and_then(|s| Uuid::parse_str(s).ok()))
        .collect();
    scans.sort();
    scans.dedup();
    scans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_compare_as_numbers() {
        assert!(id_after("10-0", "9-5"));
        assert!(id_after("10-11", "10-2"));
        assert!(!id_after("10-2", "10-2"));
        assert!(!id_after("0-0", "1-0"));
        assert!(id_after("1-0", "0-0"));
    }

    #[test]
    fn index_entries_name_each_scan_once() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let entry = |id: &str, scan: Uuid| {
            (
                id.to_string(),
                HashMap::from([(INDEX_FIELD.to_string(), scan.to_string())]),
            )
        };
        let entries = vec![
            entry("1-0", b),
            entry("2-0", a),
            entry("3-0", b),
            ("4-0".to_string(), HashMap::new()),
        ];
        assert_eq!(scans_named(&entries), vec![a, b]);
    }
}
