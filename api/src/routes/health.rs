//! Service endpoints outside the versioned API: liveness and readiness.

use std::time::Duration;

use fred::interfaces::ClientLike;
use poem::web::{Data, Json};
use poem::{handler, IntoResponse, Response};
use serde_json::json;

use crate::error::{ApiError, Error};
use crate::state::AppState;

/// The process is up.
#[handler]
pub fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Postgres and Redis are reachable.
#[handler]
pub async fn readyz(state: Data<&AppState>) -> Response {
    let postgres = tokio::time::timeout(Duration::from_secs(2), async {
        let db = state.db.get().await.map_err(|e| e.to_string())?;
        db.simple_query("SELECT 1")
            .await
            .map_err(|e| e.to_string())?;
        Ok::<(), String>(())
    })
    .await
    .unwrap_or_else(|_| Err("timed out".into()));
    let redis = tokio::time::timeout(Duration::from_secs(2), async {
        state
            .redis
            .ping::<String>(None)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|_| Err("timed out".into()));
    match (&postgres, &redis) {
        (Ok(()), Ok(())) => {
            Json(json!({"status": "ready", "postgres": "ok", "redis": "ok"})).into_response()
        }
        _ => {
            let describe = |r: &Result<(), String>| match r {
                Ok(()) => "ok".to_string(),
                Err(e) => e.clone(),
            };
            ApiError(Error::unavailable(format!(
                "postgres: {}; redis: {}",
                describe(&postgres),
                describe(&redis)
            )))
            .into_response()
        }
    }
}
