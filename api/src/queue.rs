//! The api's side of the job queue: pushing [`ScanJob`]s to the apalis Redis
//! queue that scanner nodes consume, and publishing scan stops.
//!
//! The queue is apalis' Redis storage under the deployment prefix
//! ([`Keys::scan_queue`]), JSON-encoded, so a scanner node built on
//! `apalis-redis` with the same queue name takes exactly these jobs. The
//! storage holds a `redis` [`ConnectionManager`] (apalis' own client, which
//! reconnects by itself); the rest of the api talks to Redis through `fred`.

use std::time::Duration;

use apalis::prelude::TaskSink;
use apalis_redis::{Client, Config, ConnectionManager, RedisStorage};
use fred::interfaces::{KeysInterface, PubsubInterface, StreamsInterface};
use fred::types::Expiration;
use scanfleet_common::events::{ScanEvent, ScanStatus, EVENT_FIELD};
use scanfleet_common::jobs::ScanJob;
use scanfleet_common::keys::Keys;
use uuid::Uuid;

use crate::error::Error;

/// A push that takes longer than this is reported as a failure, so that a
/// hung Redis fails the request instead of holding it open.
const PUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the stopped marker of a scan lives: long enough for any queued
/// job to be taken (and skipped) by a node.
pub const STOPPED_MARKER_TTL_SECS: i64 = 24 * 60 * 60;

/// The producer end of the scan queue. Cheap to clone: clones share one
/// connection.
#[derive(Clone)]
pub struct ScanQueue {
    storage: RedisStorage<ScanJob>,
}

impl ScanQueue {
    /// Connects to `redis_url` and addresses the queue named by `keys`.
    pub async fn connect(
        redis_url: &str,
        keys: &Keys,
    ) -> Result<ScanQueue, apalis_redis::RedisError> {
        let client = Client::open(redis_url)?;
        let conn: ConnectionManager = client.get_connection_manager().await?;
        Ok(ScanQueue::with_connection(conn, keys))
    }

    pub fn with_connection(conn: ConnectionManager, keys: &Keys) -> ScanQueue {
        let config = Config::default().queue(keys.scan_queue());
        ScanQueue {
            storage: RedisStorage::new(conn).with_config(config),
        }
    }

    /// The apalis configuration (key names of the queue).
    pub fn config(&self) -> &Config {
        self.storage.get_config()
    }

    /// Pushes one job; any failure (Redis down, timeout, script error) is
    /// `Error::Unavailable`.
    #[tracing::instrument(skip_all, fields(scan_id = %job.scan_id))]
    pub async fn push(&self, job: ScanJob) -> Result<(), Error> {
        let mut storage = self.storage.clone();
        match tokio::time::timeout(PUSH_TIMEOUT, storage.push(job)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::Unavailable(format!("scan queue push: {e}"))),
            Err(_) => Err(Error::Unavailable("scan queue push timed out".into())),
        }
    }
}

/// Tells everyone a scan is stopped: the closed marker (a node taking the
/// job later drops it), a `stopped` event on the scan's stream (the
/// ingester records nothing the scan emits after it, and WebSocket
/// listeners see it), then a PUBLISH for the node running it now.
#[tracing::instrument(skip_all, fields(scan_id = %scan_id))]
pub async fn publish_stop(
    redis: &fred::clients::Client,
    keys: &Keys,
    scan_id: Uuid,
) -> Result<(), Error> {
    let _: () = redis
        .set(
            keys.scan_closed(scan_id),
            "1",
            Some(Expiration::EX(STOPPED_MARKER_TTL_SECS)),
            None,
            false,
        )
        .await?;
    append_event(
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

/// Appends an event to a scan's stream and points the ingesters at it, as a
/// scanner node does (the api's stop and the scheduler's reaper use it).
pub async fn append_event(
    redis: &fred::clients::Client,
    keys: &Keys,
    event: &ScanEvent,
) -> Result<(), Error> {
    let pipeline = redis.pipeline();
    let _: () = pipeline
        .xadd(
            keys.scan_events_stream(event.scan_id),
            false,
            None,
            "*",
            (EVENT_FIELD, event.to_json()),
        )
        .await?;
    let _: () = pipeline
        .xadd(
            keys.scan_events_index(),
            false,
            None,
            "*",
            ("scan_id", event.scan_id.to_string()),
        )
        .await?;
    let _: Vec<fred::types::Value> = pipeline.all().await?;
    Ok(())
}
