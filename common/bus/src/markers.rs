//! Per-scan markers beside the queue, and the mark of Redis's data set.
//!
//! - The **closed** marker says a scan must not run any more (stopped by its
//!   owner, failed by the reaper, or finished): a node taking the job later
//!   drops it, and the node running it checks it every second.
//! - The **attempts** counter: how many times a node took the scan up.
//! - The **epoch**: written once per Redis data set. When it is missing,
//!   Redis lost its data (a restart without persistence), and the jobs of
//!   queued scans are pushed again from Postgres. Its name carries the key
//!   layout's version (`keys::LAYOUT`), so an upgrade to a new layout looks
//!   the same: the queue is rebuilt under the new names.

use fred::clients::Client;
use fred::interfaces::{KeysInterface, PubsubInterface};
use fred::types::{Expiration, SetOptions};
use scanfleet_common::events::{ScanEvent, ScanStatus};
use scanfleet_common::keys::Keys;
use uuid::Uuid;

use crate::{events, BusError};

/// How long a closed marker lives: long enough for any job of the scan
/// still in the queue to be taken (and dropped) by a node.
pub const CLOSED_TTL_SECS: i64 = 24 * 60 * 60;
/// How long a scan's attempt count lives.
const ATTEMPTS_TTL_SECS: i64 = 7 * 24 * 60 * 60;

/// Marks the scan over.
pub async fn close(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<(), BusError> {
    let _: () = redis
        .set(
            keys.scan_closed(scan_id),
            "1",
            Some(Expiration::EX(CLOSED_TTL_SECS)),
            None,
            false,
        )
        .await?;
    Ok(())
}

/// Whether the scan is over.
pub async fn is_closed(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<bool, BusError> {
    Ok(redis.exists::<bool, _>(keys.scan_closed(scan_id)).await?)
}

/// Counts one more take-up of the scan; the count so far, this one included.
pub async fn count_attempt(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<i64, BusError> {
    // One round trip: the count and its lifetime (one key, so one slot on
    // a cluster).
    let key = keys.scan_attempts(scan_id);
    let pipeline = redis.pipeline();
    let _: () = pipeline.incr(&key).await?;
    let _: () = pipeline.expire(&key, ATTEMPTS_TTL_SECS, None).await?;
    let (attempt, _): (i64, i64) = pipeline.all().await?;
    Ok(attempt)
}

/// Tells everyone a scan is stopped: the closed marker (a node taking the
/// job later drops it), a `stopped` event on the scan's stream (the
/// ingester records nothing the scan emits after it, and WebSocket
/// listeners see it), then a message on the stop channel for the node
/// running it now.
#[tracing::instrument(skip_all, fields(scan_id = %scan_id))]
pub async fn publish_stop(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<(), BusError> {
    close(redis, keys, scan_id).await?;
    events::append_event(
        redis,
        keys,
        &ScanEvent::status(scan_id, ScanStatus::Stopped, None),
    )
    .await?;
    let _: i64 = redis
        .publish(keys.scan_stop_channel(), scan_id.to_string())
        .await?;
    Ok(())
}

/// Whether Redis's data set is new since the last call of anyone (the mark
/// was missing, and is now written). True on the very first call against
/// a Redis too; what follows must be harmless then.
pub async fn data_set_is_new(redis: &Client, keys: &Keys) -> Result<bool, BusError> {
    let written: Option<String> = redis
        .set(
            keys.bus_epoch(),
            Uuid::new_v4().to_string(),
            None,
            Some(SetOptions::NX),
            false,
        )
        .await?;
    Ok(written.is_some())
}
