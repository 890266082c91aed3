//! Live scan progress over WebSocket: `GET /api/v1/ws/scans/{scan_id}?token=`.
//!
//! The handshake is refused with 401 (missing, expired or tampered token)
//! or 403 (a scan that is missing or not the caller's). On connect the
//! client gets the current snapshot, then one message per change, each
//! carrying all eight fields `{type, scan_id, status, stage, progress,
//! current_tool, findings_count, at}`; after the terminal status the server
//! closes with code 1000. Pings keep idle connections open.
//!
//! Listeners follow a scan through the process's [`Hub`] (`hub`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{SinkExt, StreamExt};
use poem::web::websocket::{CloseCode, Message, WebSocket, WebSocketStream};
use poem::web::{Data, Path, Query};
use poem::{handler, IntoResponse, Response};
use poem_openapi::auth::Bearer;
use scanfleet_common::events::{ScanEvent, ScanEventKind, ScanStatus};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::auth::scheme::BearerAuth;
use crate::error::{ApiError, Error};
use crate::hub::Hub;
use crate::state::AppState;
use scanfleet_core::store::scans::{self, ScanRow};

/// Ping interval of idle connections.
const PING_EVERY: Duration = Duration::from_secs(20);

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
}

/// A scan as its listener sees it: the stored row, then its stream folded in.
struct LiveScan {
    scan_id: Uuid,
    status: ScanStatus,
    stage: Option<String>,
    progress: u8,
    current_tool: Option<String>,
    stored_findings: i64,
    /// Dedup keys of findings seen in the stream before its terminal event.
    findings: HashSet<String>,
    at: DateTime<Utc>,
}

impl LiveScan {
    fn from_row(row: &ScanRow) -> LiveScan {
        LiveScan {
            scan_id: row.id,
            status: row.status,
            stage: row.stage.clone(),
            progress: row.progress.clamp(0, 100) as u8,
            current_tool: row.current_tool.clone(),
            stored_findings: row.findings_count as i64,
            findings: HashSet::new(),
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
                ws.on_upgrade(move |socket| follow(socket, hub, row))
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

/// Sends the snapshot, then every change, until the scan ends or the client
/// leaves.
async fn follow(socket: WebSocketStream, hub: Arc<Hub>, row: ScanRow) {
    let _open = OpenConnection::new();
    let (mut sink, mut incoming) = socket.split();
    let mut live = LiveScan::from_row(&row);
    let subscription = if row.status.is_terminal() {
        None
    } else {
        match hub.subscribe(row.id).await {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(scan_id = %row.id, error = %e, "websocket: cannot follow the scan");
                let _ = sink
                    .send(Message::close_with(CloseCode::Again, "try again later"))
                    .await;
                return;
            }
        }
    };
    let mut rx = match subscription {
        Some(s) => {
            for event in &s.history {
                live.apply(event);
            }
            Some(s.rx)
        }
        None => None,
    };
    if !deliver(&mut sink, &live, "status").await {
        return;
    }
    let Some(rx) = rx.as_mut() else { return };
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Ok(event) => {
                    if let Some(kind) = live.apply(&event) {
                        if !deliver(&mut sink, &live, kind).await {
                            return;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(scan_id = %live.scan_id, skipped = n, "websocket listener lagged");
                }
                Err(broadcast::error::RecvError::Closed) => return,
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

/// Sends the scan's state as a `kind` message; after a terminal status also
/// the close (1000). False when the connection is over, either way.
async fn deliver(
    sink: &mut futures::stream::SplitSink<WebSocketStream, Message>,
    live: &LiveScan,
    kind: &str,
) -> bool {
    let Ok(text) = serde_json::to_string(&live.message(kind)) else {
        return false;
    };
    if sink.send(Message::text(text)).await.is_err() {
        return false;
    }
    if live.status.is_terminal() {
        let _ = sink
            .send(Message::close_with(CloseCode::Normal, "scan finished"))
            .await;
        return false;
    }
    true
}
