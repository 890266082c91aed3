//! Live scan progress over WebSocket: `GET /api/v1/ws/scans/{scan_id}?token=`.
//!
//! The handshake is refused with 401 (missing, expired or tampered token)
//! or 403 (a scan that is missing or not the caller's). On connect the
//! client gets the current snapshot, then one message per change, each
//! carrying all eight fields `{type, scan_id, status, stage, progress,
//! current_tool, findings_count, at}`; after the terminal status the server
//! closes with code 1000. Pings keep idle connections open.
//!
//! A `finding` message also carries the finding: `{template_id, name,
//! severity, host, matched_at, fingerprint, first_seen_at, change}`, its
//! identity on the target as the ingester recorded it: `change` is `new`,
//! `recurring` or `regressed`; `first_seen_at` is when the target first
//! had it. The ingester publishes these after its commit and the process's
//! hub shares them among the scan's listeners ([`crate::hub::Identities`]),
//! so a finding costs Postgres no query however many listen; a listener
//! waits for its finding's identity (up to [`RECORDED_WAIT`], keeping the
//! messages in order). Should it not come (the ingester far behind, or
//! its note lost with Redis), the identity is read once per process
//! ([`fingerprints::identity`]; for a finding not recorded yet: `new`, the
//! event's time). When that read fails too the message still goes out,
//! with those two `null`.
//!
//! Once the node has reported a host's coverage (after VALIDATE), the
//! `progress` and `status` messages also carry `coverage: {hosts,
//! templates: {total, run, skipped: {<reason>: count}}, requests}`: the
//! counts of `GET /scans/{scan_id}/coverage` summed over the hosts reported
//! so far ([`LiveCoverage`]). Before that the field is absent; `finding`
//! messages never carry it.
//!
//! Listeners follow a scan through the process's [`Hub`] (`hub`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt};
use poem::web::websocket::{CloseCode, Message, WebSocket, WebSocketStream};
use poem::web::{Data, Path, Query};
use poem::{handler, IntoResponse, Response};
use poem_openapi::auth::Bearer;
use scanfleet_common::events::{
    CoverageEvent, FindingEvent, RecordedFinding, ScanEvent, ScanEventKind, ScanStatus,
};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::auth::scheme::BearerAuth;
use crate::error::{ApiError, Error};
use crate::hub::{Hub, Identities};
use crate::state::AppState;
use scanfleet_core::store::scans::{self, ScanRow};
use scanfleet_core::store::{coverage, fingerprints};

/// Ping interval of idle connections.
const PING_EVERY: Duration = Duration::from_secs(20);
/// How long a listener waits for the ingester to publish a finding's
/// identity before it is read from Postgres.
pub const RECORDED_WAIT: Duration = Duration::from_secs(5);

/// One message to a listener.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgressMessage {
    #[serde(rename = "type")]
    pub kind: String,
    pub scan_id: Uuid,
    pub status: ScanStatus,
    pub stage: Option<String>,
    pub progress: u8,
    pub current_tool: Option<String>,
    pub findings_count: i64,
    pub at: DateTime<Utc>,
    /// On `finding` messages only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<LiveFinding>,
    /// On `progress` and `status` messages once a host's coverage is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<LiveCoverage>,
}

/// The coverage counts of a scan so far: each count summed over the
/// `hosts` whose coverage the node reported (`total` is therefore the
/// node's template count times the hosts).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveCoverage {
    pub hosts: u64,
    pub templates: LiveTemplates,
    pub requests: u64,
}

/// `run` plus every `skipped` count is `total`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveTemplates {
    pub total: u64,
    pub run: u64,
    pub skipped: BTreeMap<String, u64>,
}

impl LiveCoverage {
    /// The sum over `hosts`; None when there is none.
    fn of<'a>(hosts: impl IntoIterator<Item = &'a CoverageEvent>) -> Option<LiveCoverage> {
        let mut sum = LiveCoverage::default();
        for c in hosts {
            sum.hosts += 1;
            sum.templates.total += c.total;
            sum.templates.run += c.run;
            for (reason, n) in &c.skipped {
                *sum.templates.skipped.entry(reason.clone()).or_default() += n;
            }
            sum.requests += c.requests;
        }
        (sum.hosts > 0).then_some(sum)
    }
}

/// The finding of a `finding` message with its identity on the target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LiveFinding {
    pub template_id: String,
    pub name: String,
    pub severity: String,
    pub host: String,
    pub matched_at: String,
    pub fingerprint: String,
    pub first_seen_at: Option<DateTime<Utc>>,
    pub change: Option<String>,
}

impl LiveFinding {
    /// The finding with its identity as the ingester recorded it (see the
    /// module's doc).
    async fn of(
        db: &deadpool_postgres::Pool,
        identities: &Identities,
        live: &LiveScan,
        f: &FindingEvent,
    ) -> LiveFinding {
        let fingerprint = scanfleet_core::fingerprint::fingerprint(&f.template_id, &f.matched_at);
        let key = f.dedup_key();
        let recorded = match identities.wait(&key, RECORDED_WAIT).await {
            Some(r) => Some(r),
            None => identities
                .fallback(&key)
                .get_or_try_init(|| read_identity(db, live, &key, &fingerprint))
                .await
                .ok()
                .cloned(),
        };
        let (first_seen_at, change) = match recorded {
            Some(r) => (Some(r.first_seen_at), Some(r.change)),
            None => (None, None),
        };
        LiveFinding {
            template_id: f.template_id.clone(),
            name: f.name.clone(),
            severity: f.severity.as_str().to_string(),
            host: f.host.clone(),
            matched_at: f.matched_at.clone(),
            fingerprint,
            first_seen_at,
            change,
        }
    }
}

/// A finding's identity read from Postgres (the fallback of
/// [`LiveFinding::of`]).
async fn read_identity(
    db: &deadpool_postgres::Pool,
    live: &LiveScan,
    dedup_key: &str,
    fingerprint: &str,
) -> Result<RecordedFinding, scanfleet_core::Error> {
    let identity = async {
        let client = db.get().await?;
        fingerprints::identity(&**client, live.scan_id, live.target_id, fingerprint).await
    }
    .await;
    match identity {
        Ok(i) => Ok(RecordedFinding {
            dedup_key: dedup_key.to_string(),
            fingerprint: fingerprint.to_string(),
            first_seen_at: i.first_seen_at.unwrap_or(live.at),
            change: i.change.as_str().to_string(),
        }),
        Err(e) => {
            tracing::warn!(scan_id = %live.scan_id, error = %e,
                "websocket: the finding's identity could not be read");
            Err(e)
        }
    }
}

/// A scan as its listener sees it: the stored row, then its stream folded in.
struct LiveScan {
    scan_id: Uuid,
    target_id: Uuid,
    status: ScanStatus,
    stage: Option<String>,
    progress: u8,
    current_tool: Option<String>,
    stored_findings: i64,
    /// Dedup keys of findings seen in the stream before its terminal event.
    findings: HashSet<String>,
    /// Each host's coverage as last reported, by host.
    coverage: BTreeMap<String, CoverageEvent>,
    at: DateTime<Utc>,
}

impl LiveScan {
    fn from_row(row: &ScanRow) -> LiveScan {
        LiveScan {
            scan_id: row.id,
            target_id: row.target_id,
            status: row.status,
            stage: row.stage.clone(),
            progress: row.progress.clamp(0, 100) as u8,
            current_tool: row.current_tool.clone(),
            stored_findings: row.findings_count as i64,
            findings: HashSet::new(),
            coverage: BTreeMap::new(),
            at: row.updated_at,
        }
    }

    /// Folds an event in; returns the message type when it changed
    /// something a listener sees.
    fn apply(&mut self, event: &ScanEvent) -> Option<&'static str> {
        if self.status.is_terminal() {
            return None;
        }
        self.at = event.at;
        match &event.kind {
            ScanEventKind::Status { status, .. } => {
                if !self.status.can_move_to(*status) {
                    return None;
                }
                self.status = *status;
                if *status == ScanStatus::Completed {
                    self.progress = 100;
                }
                Some("status")
            }
            ScanEventKind::Progress {
                stage,
                progress,
                current_tool,
            } => {
                self.stage = Some(stage.as_str().to_string());
                self.progress = self.progress.max((*progress).min(99));
                if current_tool.is_some() {
                    self.current_tool = current_tool.clone();
                }
                Some("progress")
            }
            ScanEventKind::Finding(f) => self.findings.insert(f.dedup_key()).then_some("finding"),
            ScanEventKind::Coverage(c) => {
                // Carried by the next stage or status message.
                self.coverage.insert(c.host.clone(), c.clone());
                None
            }
            ScanEventKind::Error { .. } => None,
        }
    }

    fn message(&self, kind: &str) -> ProgressMessage {
        ProgressMessage {
            kind: kind.to_string(),
            scan_id: self.scan_id,
            status: self.status,
            stage: self.stage.clone(),
            progress: self.progress,
            current_tool: self.current_tool.clone(),
            findings_count: self.stored_findings.max(self.findings.len() as i64),
            at: self.at,
            finding: None,
            coverage: match kind {
                "finding" => None,
                _ => LiveCoverage::of(self.coverage.values()),
            },
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct WsQuery {
    token: Option<String>,
}

/// The handshake: authenticate, check the scan, then upgrade.
#[handler]
pub async fn scan_websocket(
    Path(scan_id): Path<String>,
    Query(query): Query<WsQuery>,
    state: Data<&AppState>,
    ws: poem::Result<WebSocket>,
) -> Response {
    match accept(&state, &scan_id, query.token).await {
        Err(e) => ApiError(e).into_response(),
        Ok(row) => match ws {
            Err(_) => ApiError(Error::bad_request(
                "this endpoint speaks WebSocket: send an Upgrade: websocket request",
            ))
            .into_response(),
            Ok(ws) => {
                let hub = state.hub.clone();
                let db = state.db.clone();
                ws.on_upgrade(move |socket| follow(socket, hub, db, row))
                    .into_response()
            }
        },
    }
}

async fn accept(state: &AppState, scan_id: &str, token: Option<String>) -> Result<ScanRow, Error> {
    let token = token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Error::Unauthenticated("the `token` query parameter is missing".into()))?;
    let me = state
        .authenticate_bearer(&BearerAuth(Bearer { token }))
        .await?;
    let not_yours = || Error::forbidden("scan_forbidden", "no scan of yours has this id");
    let scan_id = Uuid::parse_str(scan_id).map_err(|_| not_yours())?;
    let db = state.db.get().await?;
    scans::find(&db, me.user.id, scan_id)
        .await?
        .ok_or_else(not_yours)
}

/// The messages a listener of `row` gets: the snapshot first (with
/// `replay`, also one `finding` message per finding the stream already
/// holds, so a page that reconnects misses none), then one per change,
/// ending after the terminal status. Fails when the scan's stream cannot be
/// followed. WebSocket and the console's server-sent events both speak it.
pub async fn live_messages(
    hub: &Hub,
    db: deadpool_postgres::Pool,
    row: &ScanRow,
    replay: bool,
) -> Result<futures::channel::mpsc::Receiver<ProgressMessage>, Error> {
    let mut live = LiveScan::from_row(row);
    let subscription = if row.status.is_terminal() {
        // A finished scan's stream may be gone: its coverage is stored.
        live.coverage = stored_coverage(&db, row.id).await;
        None
    } else {
        Some(hub.subscribe(row.id).await?)
    };
    // Dropped by the consumer when its listener leaves, which ends the task.
    let (mut tx, rx) = futures::channel::mpsc::channel(64);
    tokio::spawn(async move {
        let mut backlog = Vec::new();
        let identities = subscription
            .as_ref()
            .map(|s| s.identities.clone())
            .unwrap_or_default();
        let mut rx = match subscription {
            Some(s) => {
                for event in &s.history {
                    if live.apply(event) == Some("finding") && replay {
                        if let ScanEventKind::Finding(f) = &event.kind {
                            backlog.push(f.clone());
                        }
                    }
                }
                Some(s.rx)
            }
            None => None,
        };
        if tx.send(live.message("status")).await.is_err() {
            return;
        }
        for f in backlog {
            let mut message = live.message("finding");
            message.finding = Some(LiveFinding::of(&db, &identities, &live, &f).await);
            if tx.send(message).await.is_err() {
                return;
            }
        }
        let Some(rx) = rx.as_mut() else { return };
        loop {
            match rx.recv().await {
                Ok(event) => {
                    let Some(kind) = live.apply(&event) else {
                        continue;
                    };
                    let mut message = live.message(kind);
                    if let ScanEventKind::Finding(f) = &event.kind {
                        message.finding = Some(LiveFinding::of(&db, &identities, &live, f).await);
                    }
                    if tx.send(message).await.is_err() || live.status.is_terminal() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(scan_id = %live.scan_id, skipped = n, "live listener lagged");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
    Ok(rx)
}

/// The coverage the ingester stored for `scan_id`, by host; none when it
/// cannot be read (the message then goes out without it).
async fn stored_coverage(
    db: &deadpool_postgres::Pool,
    scan_id: Uuid,
) -> BTreeMap<String, CoverageEvent> {
    let rows = async {
        let client = db.get().await?;
        coverage::of_scan(&**client, scan_id).await
    }
    .await;
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(%scan_id, error = %e, "websocket: the scan's coverage could not be read");
            return BTreeMap::new();
        }
    };
    let count = |v: i64| u64::try_from(v).unwrap_or(0);
    rows.into_iter()
        .map(|c| {
            let event = CoverageEvent {
                host: c.host.clone(),
                technologies: c.technologies,
                total: count(c.total),
                run: count(c.run),
                skipped: c.skipped.into_iter().map(|(k, v)| (k, count(v))).collect(),
                requests: count(c.requests),
            };
            (c.host, event)
        })
        .collect()
}

/// Sends the snapshot, then every change, until the scan ends or the client
/// leaves.
async fn follow(socket: WebSocketStream, hub: Arc<Hub>, db: deadpool_postgres::Pool, row: ScanRow) {
    let _open = OpenConnection::new();
    let (mut sink, mut incoming) = socket.split();
    let mut messages = match live_messages(&hub, db, &row, false).await {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(scan_id = %row.id, error = %e, "websocket: cannot follow the scan");
            let _ = sink
                .send(Message::close_with(CloseCode::Again, "try again later"))
                .await;
            return;
        }
    };
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            message = messages.next() => match message {
                Some(message) => {
                    let status = message.status;
                    if !deliver(&mut sink, message, status).await {
                        return;
                    }
                }
                None => return,
            },
            message = incoming.next() => match message {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if sink.send(Message::ping(Vec::new())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Counts an open WebSocket connection for `/metrics` while it lives.
struct OpenConnection;

impl OpenConnection {
    fn new() -> OpenConnection {
        metrics::gauge!("scanfleet_websocket_connections").increment(1.0);
        OpenConnection
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        metrics::gauge!("scanfleet_websocket_connections").decrement(1.0);
    }
}

/// Sends a message; after a terminal status also the close (1000). False
/// when the connection is over, either way.
async fn deliver(
    sink: &mut futures::stream::SplitSink<WebSocketStream, Message>,
    message: ProgressMessage,
    status: ScanStatus,
) -> bool {
    let Ok(text) = serde_json::to_string(&message) else {
        return false;
    };
    if sink.send(Message::text(text)).await.is_err() {
        return false;
    }
    if status.is_terminal() {
        let _ = sink
            .send(Message::close_with(CloseCode::Normal, "scan finished"))
            .await;
        return false;
    }
    true
}
