//! Where a scan's events go: appended to the scan's own Redis stream, with a
//! pointer entry on the ingest index ([`scanfleet_bus::events::append`]). A
//! scanner node writes nothing else anywhere.
//!
//! Progress within a stage is written at most every [`PROGRESS_EVERY`]: a
//! value that comes sooner is held, and goes out with the scan's next
//! write or once it is due ([`EventSink::meanwhile`] flushes it while a
//! stage waits). A new stage or tool is held for at most [`STEP_HOLD`]:
//! a stage that ends sooner, or whose first finding comes sooner, goes out
//! in the same write as what follows it (every stage is still written, in
//! order). A quick scan reported each finished template before (44 writes
//! of 55 for a scan of the paced lab), then each stage's start at once (11
//! writes), each write a Redis round trip and an entry the ingester reads.
//!
//! The sink keeps what it wrote (statuses, findings, the last progress), so
//! that after Redis lost its data ([`EventSink::replay`]) the scan's record
//! is written again: findings are unique per scan and statuses and progress
//! only move forward, so a replay adds nothing twice.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use fred::clients::Client;
use scanfleet_bus::connect::until_redis_answers;
use scanfleet_bus::events;
use scanfleet_common::events::{
    CoverageEvent, FindingEvent, ScanEvent, ScanEventKind, ScanStatus, Stage,
};
use scanfleet_common::keys::Keys;
use tokio::time::Instant;
use uuid::Uuid;

use super::NodeError;

/// How often progress within one stage is written at most.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// How long a new stage or tool waits at most for the scan's next write.
pub const STEP_HOLD: Duration = Duration::from_millis(250);

/// The event writer of one scan. Progress only ever grows: every progress
/// event carries the highest value reported so far (including by earlier
/// attempts of the scan on other nodes, the `floor`).
pub struct EventSink {
    redis: Client,
    keys: Keys,
    scan_id: Uuid,
    last: Mutex<LastProgress>,
    /// What was written, for a replay.
    written: Mutex<Written>,
}

/// The last progress reported, and what of it was not written yet.
struct LastProgress {
    stage: Option<Stage>,
    value: u8,
    tool: Option<String>,
    /// Whether the current step (stage and tool) was written at least once.
    step_written: bool,
    /// When a progress event was last written.
    written_at: Option<Instant>,
    /// Reported and not written yet, oldest first: the last value of each
    /// step reported since the last write, and coverage
    /// ([`EventSink::coverage`]).
    held: Vec<ScanEventKind>,
    /// When the held progress is due: [`STEP_HOLD`] after a new step was
    /// reported, [`PROGRESS_EVERY`] after the last write for a new value of
    /// a step already written; the earliest of those that apply.
    due: Option<Instant>,
}

impl LastProgress {
    /// Holds `value` of `stage` with `tool` (progress never goes down);
    /// nothing changes when neither the step nor the value did.
    fn hold(&mut self, stage: Stage, value: u8, tool: &str) {
        let value = value.max(self.value).min(99);
        let same_step = self.stage == Some(stage) && self.tool.as_deref() == Some(tool);
        if same_step && self.value == value {
            return;
        }
        let event = ScanEventKind::Progress {
            stage,
            progress: value,
            current_tool: Some(tool.to_string()),
        };
        // A step's values replace each other; a new step joins the queue.
        match self.held.last_mut() {
            Some(last @ ScanEventKind::Progress { .. }) if same_step => *last = event,
            _ => self.held.push(event),
        }
        let now = Instant::now();
        let due = if same_step && self.step_written {
            self.written_at.map_or(now, |at| at + PROGRESS_EVERY)
        } else {
            now + STEP_HOLD
        };
        self.due = Some(self.due.map_or(due, |d| d.min(due)));
        if !same_step {
            self.step_written = false;
            self.stage = Some(stage);
            self.tool = Some(tool.to_string());
        }
        self.value = value;
    }

    /// What is held, taken for a write.
    fn take(&mut self) -> Vec<ScanEventKind> {
        if self
            .held
            .iter()
            .any(|e| matches!(e, ScanEventKind::Progress { .. }))
        {
            self.written_at = Some(Instant::now());
            self.step_written = true;
        }
        self.due = None;
        std::mem::take(&mut self.held)
    }
}

#[derive(Default)]
struct Written {
    statuses: Vec<String>,
    findings: Vec<String>,
    progress: Option<String>,
}

impl EventSink {
    pub fn new(redis: Client, keys: &Keys, scan_id: Uuid, floor: u8) -> EventSink {
        EventSink {
            redis,
            keys: keys.clone(),
            scan_id,
            last: Mutex::new(LastProgress {
                stage: None,
                value: floor,
                tool: None,
                step_written: false,
                written_at: None,
                held: Vec::new(),
                due: None,
            }),
            written: Mutex::new(Written::default()),
        }
    }

    pub async fn status(&self, status: ScanStatus, error: Option<String>) -> Result<(), NodeError> {
        self.write(vec![ScanEventKind::Status { status, error }])
            .await
    }

    /// `pending` (a node took the scan) and `running`, in one write.
    pub async fn started(&self) -> Result<(), NodeError> {
        self.write(
            [ScanStatus::Pending, ScanStatus::Running]
                .into_iter()
                .map(|status| ScanEventKind::Status {
                    status,
                    error: None,
                })
                .collect(),
        )
        .await
    }

    pub async fn error(&self, stage: Stage, message: String) -> Result<(), NodeError> {
        self.write(vec![ScanEventKind::Error {
            stage: Some(stage),
            message,
        }])
        .await
    }

    /// One host's coverage, held for the scan's next write (the end of the
    /// scan follows it: every host's coverage goes out with the status in
    /// one write); kept for a replay, like findings.
    pub fn coverage(&self, coverage: CoverageEvent) {
        self.last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .held
            .push(ScanEventKind::Coverage(coverage));
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
    /// stage, the tool nor the (never decreasing) value changed, and holds
    /// it until it is due: [`STEP_HOLD`] after a new stage or tool,
    /// [`PROGRESS_EVERY`] after the last write for a new value of a step
    /// already written. A write of anything else takes it along.
    pub async fn progress(&self, stage: Stage, value: u8, tool: &str) -> Result<(), NodeError> {
        self.progress_with(stage, value, tool, Vec::new()).await
    }

    /// [`EventSink::progress`] and `findings` in one write: with findings to
    /// send, the progress goes with them whether due or not.
    pub async fn progress_with(
        &self,
        stage: Stage,
        value: u8,
        tool: &str,
        findings: Vec<FindingEvent>,
    ) -> Result<(), NodeError> {
        let now_due = {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            last.hold(stage, value, tool);
            last.due.is_some_and(|due| due <= Instant::now())
        };
        if now_due || !findings.is_empty() {
            self.findings(findings).await?;
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes the held progress, if any.
    pub async fn flush(&self) -> Result<(), NodeError> {
        self.write(Vec::new()).await
    }

    /// Awaits `work`, writing the held progress once it is due meanwhile, so
    /// that a stage waiting on slow work still shows where it is.
    pub async fn meanwhile<T>(&self, work: impl Future<Output = T>) -> Result<T, NodeError> {
        tokio::pin!(work);
        loop {
            let due = self.last.lock().unwrap_or_else(|p| p.into_inner()).due;
            let Some(due) = due else {
                return Ok(work.await);
            };
            tokio::select! {
                done = &mut work => return Ok(done),
                _ = tokio::time::sleep_until(due) => self.flush().await?,
            }
        }
    }

    /// Writes again everything the scan reported so far, after Redis lost
    /// its data (the events may have gone before the ingester read them).
    pub async fn replay(&self) -> Result<(), NodeError> {
        let lines: Vec<String> = {
            let w = self.written.lock().unwrap_or_else(|p| p.into_inner());
            w.statuses
                .iter()
                .chain(&w.findings)
                .chain(&w.progress)
                .cloned()
                .collect()
        };
        tracing::warn!(
            scan_id = %self.scan_id,
            events = lines.len(),
            "Redis lost the scan's events; writing them again"
        );
        self.append(&lines).await
    }

    /// Appends the events, retrying while Redis is unreachable: a scan's
    /// record is never dropped for an outage (the node's shutdown or the
    /// scan's end stops the retries).
    ///
    /// What was held goes first: it was reported before them.
    async fn write(&self, events: Vec<ScanEventKind>) -> Result<(), NodeError> {
        let held = self.last.lock().unwrap_or_else(|p| p.into_inner()).take();
        if held.is_empty() && events.is_empty() {
            return Ok(());
        }
        let kinds: Vec<(Kind, String)> = held
            .into_iter()
            .chain(events)
            .map(|kind| {
                let k = Kind::of(&kind);
                (k, ScanEvent::new(self.scan_id, kind).to_json())
            })
            .collect();
        let lines: Vec<String> = kinds.iter().map(|(_, l)| l.clone()).collect();
        self.append(&lines).await?;
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        for (kind, line) in kinds {
            match kind {
                Kind::Status => w.statuses.push(line),
                Kind::Finding => w.findings.push(line),
                Kind::Progress => w.progress = Some(line),
                Kind::Other => {}
            }
        }
        Ok(())
    }

    async fn append(&self, lines: &[String]) -> Result<(), NodeError> {
        until_redis_answers(self.scan_id, "writing scan events", None, || {
            events::append(&self.redis, &self.keys, self.scan_id, lines)
        })
        .await?;
        Ok(())
    }
}

/// Which part of the record an event belongs to.
#[derive(Clone, Copy)]
enum Kind {
    Status,
    Finding,
    Progress,
    Other,
}

impl Kind {
    fn of(kind: &ScanEventKind) -> Kind {
        match kind {
            ScanEventKind::Status { .. } => Kind::Status,
            ScanEventKind::Finding(_) | ScanEventKind::Coverage(_) => Kind::Finding,
            ScanEventKind::Progress { .. } => Kind::Progress,
            ScanEventKind::Error { .. } => Kind::Other,
        }
    }
}

/// The highest progress an earlier attempt of the scan reported, read from
/// the end of its stream, so a scan restarted on another node never goes
/// backwards.
pub async fn progress_floor(redis: &Client, keys: &Keys, scan_id: Uuid) -> Result<u8, NodeError> {
    let entries = events::latest(redis, &keys.scan_events_stream(scan_id), 200).await?;
    Ok(entries
        .iter()
        .filter_map(|(_, fields)| events::decode(fields))
        .filter_map(|e| match e.kind {
            ScanEventKind::Progress { progress, .. } => Some(progress),
            _ => None,
        })
        .max()
        .unwrap_or(0)
        .min(99))
}
