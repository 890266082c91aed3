//! The ingester: applies scan events from Redis to Postgres. One runs inside
//! every api process; replicas share the work through a consumer group.
//!
//! The stream layout (a stream per scan, an ingest index read by a
//! consumer group) is described in `scanfleet_bus::events`. For each scan
//! named in a batch of index entries (several scans at once, each in its
//! own transaction) the ingester locks the scan's row,
//! reads the scan's stream from the cursor saved in that row
//! (`scans.events_cursor`), applies everything new and saves the new cursor
//! in the same transaction, then acknowledges (and deletes) the index
//! entries. Two replicas handling the same scan are serialised by the row
//! lock and the second finds nothing new; a crash before the commit leaves
//! the index entries pending, and another ingester claims them after
//! [`CLAIM_IDLE`]. Postgres or Redis being down only delays the
//! acknowledgement: the batch is retried until it commits. After Redis
//! lost its data the consumer group is made again, and the scans' new
//! entries carry ids after every saved cursor.
//!
//! # Applying events
//! Findings are inserted with the dedup rule (first wins); the status only
//! moves forward; progress never goes down; the terminal event creates the
//! fixed fingerprints of a completed scan (`fingerprints::complete`), the
//! `scan_complete` or `scan_failed` notification (once: the functions are
//! idempotent) and closes the scan's stream for ingestion, so nothing the
//! scan emits after a stop is recorded.
//!
//! # Publishing what was recorded
//! After each commit the ingester appends the identity of every finding it
//! recorded (fingerprint, first seen, `new`/`recurring`/`regressed`) to the
//! scan's recorded stream (`events::append_recorded`); the WebSocket hub
//! reads it, so listeners never query Postgres per finding. A failed
//! append is logged, not retried: the events are committed, and a
//! listener that waited in vain reads the identity once for its process.

use std::time::Duration;

use fred::clients::Client;
use fred::interfaces::KeysInterface;
use scanfleet_bus::events::{self, Entry, IngestIndex};
use scanfleet_common::events::{
    CoverageEvent, FindingEvent, RecordedFinding, ScanEvent, ScanEventKind, ScanStatus,
};
use scanfleet_common::keys::Keys;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::Error;
use crate::store::{coverage, findings, fingerprints, notifications, scans, Db};

/// Index entries read at once.
const BATCH: u64 = 256;
/// Scans of one batch applied at once, each in its own transaction on a
/// connection of the pool. One at a time, the ingester was the fleet's
/// limit: a transaction a scan and a round, each waiting on its commit,
/// so at 32 nodes it was still writing for seconds after the nodes had
/// finished.
const SCANS_AT_ONCE: usize = 4;
/// Stream entries read per `XRANGE`.
const PAGE: u64 = 1000;
/// How long a read blocks when the index is idle.
const BLOCK: Duration = Duration::from_secs(1);
/// How long the ingester waits, after an idle read returned, for more of
/// the same burst of events.
const LINGER: Duration = Duration::from_millis(50);
/// The longest pause between retries while Postgres or Redis is away.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Index entries pending this long with another consumer (a dead api
/// process) are claimed.
pub const CLAIM_IDLE: Duration = Duration::from_secs(10);
/// How long a finished scan's stream stays readable (WebSocket snapshots).
const FINISHED_STREAM_TTL_SECS: i64 = 3600;

/// One ingester.
pub struct Ingester {
    pub db: Db,
    /// The index, on a connection of its own: it blocks.
    pub index: IngestIndex,
    /// Short commands: stream reads, expiries.
    pub redis: Client,
    pub keys: Keys,
}

impl Ingester {
    /// Runs until `shutdown` fires. Errors (Redis or Postgres unreachable)
    /// are logged and retried with a growing pause; nothing is acknowledged
    /// before it is committed.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(100);
        let mut last_claim = tokio::time::Instant::now();
        // Start with this consumer's own pending entries (none for a new name).
        let mut pending_first = true;
        while !shutdown.is_cancelled() {
            let step = async {
                self.index.ensure_group().await?;
                let mut entries = if pending_first {
                    self.index.read("0", BATCH, None).await?
                } else {
                    Vec::new()
                };
                if last_claim.elapsed() >= CLAIM_IDLE / 2 {
                    entries.extend(self.index.claim(CLAIM_IDLE, BATCH).await?);
                    last_claim = tokio::time::Instant::now();
                }
                if entries.is_empty() {
                    entries = self.index.read(">", BATCH, Some(BLOCK)).await?;
                    // A scan's events come in bursts (a status, a stage, a
                    // few findings): what arrives within LINGER joins the
                    // batch, so each scan costs one transaction per burst,
                    // not one per event. The WebSocket reads the streams
                    // themselves and does not wait for this.
                    if !entries.is_empty() && (entries.len() as u64) < BATCH {
                        tokio::time::sleep(LINGER).await;
                        let more = BATCH - entries.len() as u64;
                        entries.extend(self.index.read(">", more, None).await?);
                    }
                }
                self.apply(&entries).await?;
                Ok::<usize, Error>(entries.len())
            };
            let result = tokio::select! {
                r = step => r,
                _ = shutdown.cancelled() => break,
            };
            match result {
                Ok(n) => {
                    backoff = Duration::from_millis(100);
                    // Own pending entries are drained once they read back empty.
                    if pending_first && n == 0 {
                        pending_first = false;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "ingester: will retry");
                    pending_first = true;
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.cancelled() => break,
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Applies every scan named in `entries`, [`SCANS_AT_ONCE`] at a time,
    /// then acknowledges them. Every scan's transaction runs to its end
    /// before an error is returned: one scan's failure does not cut the
    /// others short, and the batch is retried whole (the scans that
    /// committed find nothing new).
    async fn apply(&self, entries: &[Entry]) -> Result<(), Error> {
        use futures::StreamExt;
        if entries.is_empty() {
            return Ok(());
        }
        let results: Vec<Result<(), Error>> = futures::stream::iter(events::scans_named(entries))
            .map(|scan_id| self.ingest_scan(scan_id))
            .buffer_unordered(SCANS_AT_ONCE)
            .collect()
            .await;
        results.into_iter().collect::<Result<(), Error>>()?;
        let ids: Vec<String> = entries.iter().map(|(id, _)| id.clone()).collect();
        self.index.done(ids).await?;
        Ok(())
    }

    /// Applies the new part of one scan's stream in one transaction.
    #[tracing::instrument(skip_all, fields(scan_id = %scan_id))]
    pub async fn ingest_scan(&self, scan_id: Uuid) -> Result<(), Error> {
        let stream = self.keys.scan_events_stream(scan_id);
        let mut db = self.db.get().await?;
        let tx = db.transaction().await?;
        let Some(position) = scans::lock_for_ingest(&tx, scan_id).await? else {
            // The scan was deleted: its events have nowhere to go.
            drop(tx);
            let _: i64 = self.redis.del(&stream).await?;
            return Ok(());
        };
        if position.closed {
            return Ok(());
        }
        let mut cursor = position.cursor.clone();
        let mut closed = false;
        let mut applied = 0usize;
        let mut recorded = Vec::new();
        // The round's last stage and best progress, and its most advanced
        // status short of the end, written with the position (one update of
        // the scan's row, not three).
        let mut progress = None;
        let mut started: Option<ScanStatus> = None;
        // A page's findings and coverage, written once the next page is read
        // (the last page's with the position, in one round trip).
        let mut changes = Changes::default();
        'pages: loop {
            let page: Vec<Entry> = events::range(&self.redis, &stream, &cursor, "+", PAGE).await?;
            if page.is_empty() {
                break;
            }
            changes
                .flush(&tx, scan_id, position.user_id, &mut recorded)
                .await?;
            for (id, fields) in &page {
                cursor = id.clone();
                applied += 1;
                let Some(event) = events::decode(fields) else {
                    tracing::warn!(entry = %id, "skipping an unreadable scan event");
                    continue;
                };
                if let Some(terminal) = changes.add(event) {
                    changes
                        .flush(&tx, scan_id, position.user_id, &mut recorded)
                        .await?;
                    fold_progress(&mut progress, changes.progress.take());
                    fold_status(&mut started, changes.status.take());
                    let round = Ending {
                        from: position.status,
                        cursor: &cursor,
                        last: progress.take(),
                        started: position.may_start(started.take()),
                    };
                    finish(&tx, scan_id, round, terminal).await?;
                    closed = true;
                    break 'pages;
                }
            }
            fold_progress(&mut progress, changes.progress.take());
            fold_status(&mut started, changes.status.take());
            if (page.len() as u64) < PAGE {
                break;
            }
        }
        if applied == 0 {
            return Ok(());
        }
        if !closed {
            let round = scans::Round {
                cursor: &cursor,
                progress: progress.as_ref(),
                started: position.may_start(started),
                ..Default::default()
            };
            // The last page's writes and the position touch different
            // columns of the row the round holds locked: sent together.
            tokio::try_join!(
                changes.flush(&tx, scan_id, position.user_id, &mut recorded),
                async {
                    scans::save_ingest_position(&tx, scan_id, &round).await?;
                    Ok(())
                },
            )?;
        }
        tx.commit().await?;
        self.published(scan_id, &recorded, closed).await?;
        tracing::debug!(applied, closed, "scan events ingested");
        Ok(())
    }

    /// After a round's commit: the findings it recorded published to the
    /// scan's listeners and, once the scan ended, its streams set to expire.
    async fn published(
        &self,
        scan_id: Uuid,
        recorded: &[RecordedFinding],
        closed: bool,
    ) -> Result<(), Error> {
        if let Err(e) = events::append_recorded(&self.redis, &self.keys, scan_id, recorded).await {
            tracing::warn!(error = %e, "could not publish the recorded findings");
        }
        if closed {
            let _: bool = self
                .redis
                .expire(
                    self.keys.scan_events_stream(scan_id),
                    FINISHED_STREAM_TTL_SECS,
                    None,
                )
                .await?;
            let _: bool = self
                .redis
                .expire(
                    self.keys.scan_recorded_stream(scan_id),
                    FINISHED_STREAM_TTL_SECS,
                    None,
                )
                .await?;
        }
        Ok(())
    }
}

/// Events of one page, folded: findings in order, the last progress, and
/// the most advanced non-terminal status.
#[derive(Default)]
struct Changes {
    findings: Vec<FindingEvent>,
    coverage: Vec<CoverageEvent>,
    /// Left for the round to write (see [`fold_progress`]).
    progress: Option<scans::Progress>,
    /// Left for the round to write (see [`fold_status`]).
    status: Option<ScanStatus>,
}

/// The more advanced of two statuses short of the end.
fn fold_status(into: &mut Option<ScanStatus>, next: Option<ScanStatus>) {
    if let Some(next) = next {
        if into.is_none_or(|s| next.order() > s.order()) {
            *into = Some(next);
        }
    }
}

/// `next` folded into `into`: its stage and tool, and the best progress of
/// the two (progress never goes down).
fn fold_progress(into: &mut Option<scans::Progress>, next: Option<scans::Progress>) {
    let Some(mut next) = next else {
        return;
    };
    if let Some(before) = into.as_ref() {
        next.progress = next.progress.max(before.progress);
    }
    *into = Some(next);
}

impl Changes {
    /// Folds `event` in; returns the terminal status (with its error) when
    /// the event ends the scan.
    fn add(&mut self, event: ScanEvent) -> Option<(ScanStatus, Option<String>)> {
        match event.kind {
            ScanEventKind::Finding(f) => self.findings.push(f),
            ScanEventKind::Coverage(c) => self.coverage.push(c),
            ScanEventKind::Progress {
                stage,
                progress,
                current_tool,
            } => fold_progress(
                &mut self.progress,
                Some(scans::Progress {
                    stage: stage.as_str().to_string(),
                    progress: i16::from(progress),
                    current_tool,
                }),
            ),
            ScanEventKind::Status { status, error } if status.is_terminal() => {
                return Some((status, error));
            }
            // Only the most advanced one is written: a status may move
            // past those between (`ScanStatus::can_move_to`), and `pending`
            // and `running` both stamp the start.
            ScanEventKind::Status { status, .. } => fold_status(&mut self.status, Some(status)),
            ScanEventKind::Error { stage, message } => {
                tracing::debug!(stage = ?stage, %message, "scan reported an error");
            }
        }
        None
    }

    /// Writes the findings and coverage folded (the status and progress are
    /// the round's to write); the identities of the findings recorded go to
    /// `recorded`.
    async fn flush(
        &mut self,
        db: &impl deadpool_postgres::GenericClient,
        scan_id: Uuid,
        user_id: Uuid,
        recorded: &mut Vec<RecordedFinding>,
    ) -> Result<(), Error> {
        if !self.findings.is_empty() {
            let (_, identities) =
                findings::record_findings(db, scan_id, user_id, &self.findings).await?;
            recorded.extend(identities);
            self.findings.clear();
        }
        if !self.coverage.is_empty() {
            coverage::save(db, scan_id, &self.coverage).await?;
            self.coverage.clear();
        }
        Ok(())
    }
}

/// The round that ends a scan, as [`finish`] writes it.
struct Ending<'a> {
    /// The scan's status as the round's lock read it.
    from: ScanStatus,
    /// The terminal event's entry.
    cursor: &'a str,
    /// The round's progress: the scan's last stage as it ended.
    last: Option<scans::Progress>,
    /// The round's status short of the end that the scan may move to, if
    /// any (its start stamped).
    started: Option<ScanStatus>,
}

/// Applies a terminal status with the round's position, progress and
/// start in one update of the scan's row, then its notification and its
/// webhook events. A status only moves forward from the one the lock read
/// (`ScanStatus::can_move_to`); a scan that had already ended (the reaper
/// failed it, or its owner stopped it) keeps its outcome and is not
/// notified again.
async fn finish(
    db: &deadpool_postgres::Transaction<'_>,
    scan_id: Uuid,
    round: Ending<'_>,
    (status, error): (ScanStatus, Option<String>),
) -> Result<(), Error> {
    let ends = round.started.unwrap_or(round.from).can_move_to(status);
    let write = scans::Round {
        cursor: round.cursor,
        closed: true,
        progress: round.last.as_ref(),
        started: round.started,
        ended: ends.then_some((status, error.as_deref())),
    };
    let Some(facts) = scans::save_ingest_position(db, scan_id, &write).await? else {
        return Ok(());
    };
    let webhook_events = crate::outbox::scan_finished(db, scan_id, facts.user_id, status);
    match status {
        ScanStatus::Completed => {
            // The webhook events and the fixed rule touch different rows:
            // their statements go out together on the transaction's
            // connection (Postgres runs them in the order they were sent),
            // the worst findings kept once the changes' row exists.
            let changes = async {
                let changes = fingerprints::complete(db, scan_id).await?;
                findings::keep_worst(db, scan_id).await?;
                Ok::<_, Error>(changes)
            };
            let ((), changes) = tokio::try_join!(webhook_events, changes)?;
            notifications::scan_complete(db, scan_id, facts, Some(changes)).await?;
        }
        ScanStatus::Failed => {
            webhook_events.await?;
            let error = error.unwrap_or_else(|| "the scan failed".to_string());
            notifications::scan_failed(db, scan_id, facts, &error).await?;
        }
        _ => webhook_events.await?,
    }
    Ok(())
}
