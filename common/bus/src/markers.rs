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

use std::sync::LazyLock;

use fred::clients::Client;
use fred::interfaces::{KeysInterface, PubsubInterface};
use fred::types::scripts::Script;
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

/// `KEYS[1]` the scan's closed marker, `KEYS[2]` its attempts counter,
/// `ARGV[1]` the counter's lifetime: -1 when the scan is over (nothing
/// counted), else the count with this take-up.
static TAKE_UP: LazyLock<Script> = LazyLock::new(|| {
    Script::from_lua(
        "if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
         local n = redis.call('INCR', KEYS[2])
         redis.call('EXPIRE', KEYS[2], ARGV[1])
         return n",
    )
});

/// A node taking up the scan's job: `None` when the scan is over (the job
/// is to be dropped, and is not counted), else one more take-up counted
/// and the count so far, this one included. One round trip: the marker
/// and the counter share the scan's slot on a cluster.
pub async fn take_up(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<Option<i64>, BusError> {
    let closed = keys.scan_closed(scan_id);
    let attempts = keys.scan_attempts(scan_id);
    let n: i64 = crate::queue::eval(
        &TAKE_UP,
        redis,
        vec![&closed, &attempts],
        vec![ATTEMPTS_TTL_SECS.to_string()],
    )
    .await?;
    Ok((n >= 0).then_some(n))
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
