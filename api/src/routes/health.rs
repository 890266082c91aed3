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

/// One readiness probe, given two seconds.
async fn probe(check: impl std::future::Future<Output = Result<(), Error>>) -> Result<(), Error> {
    tokio::time::timeout(Duration::from_secs(2), check)
        .await
        .unwrap_or_else(|_| Err(Error::unavailable("timed out")))
}

/// Postgres and Redis are reachable.
#[handler]
pub async fn readyz(state: Data<&AppState>) -> Response {
    let postgres = probe(async {
        let db = state.db.get().await?;
        db.simple_query("SELECT 1").await?;
        Ok(())
    })
    .await;
    let redis = probe(async {
        state.redis.ping::<String>(None).await?;
        Ok(())
    })
    .await;
    match (&postgres, &redis) {
        (Ok(()), Ok(())) => {
            Json(json!({"status": "ready", "postgres": "ok", "redis": "ok"})).into_response()
        }
        _ => {
            // Text only here, at the edge.
            let describe = |r: &Result<(), Error>| match r {
                Ok(()) => "ok".to_string(),
                Err(e) => scanfleet_common::chain::Chain(e).to_string(),
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
