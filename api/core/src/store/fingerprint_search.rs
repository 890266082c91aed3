//! The text index of fingerprints (migration 0037): fingerprints whose text
//! is new are listed as pending by the triggers in the statement that wrote
//! them; [`index_pending`] moves them into the trigram index, and
//! [`keep_indexed`] does so for as long as the process runs. A search
//! (`fingerprints::list_for_target` with a text) reads the index and the
//! pending list together, so it never depends on how far behind this is.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::store::Db;

/// Pending fingerprints moved per transaction.
pub const BATCH: i64 = 5000;
/// How long [`keep_indexed`] waits after finding fewer than a batch (the
/// pending list is searched too, so this only bounds its length).
const IDLE: Duration = Duration::from_secs(1);

/// Moves up to `limit` pending fingerprints into the index in one
/// statement (rows another process is moving are skipped) and returns how
/// many pending rows it took; a fingerprint gone since is dropped.
pub async fn index_pending(db: &impl GenericClient, limit: i64) -> Result<u64, Error> {
    let row = db
        .query_one(
            "WITH taken AS (
                 DELETE FROM fingerprint_search_pending
                 WHERE ctid = ANY (ARRAY(SELECT ctid FROM fingerprint_search_pending
                                         LIMIT $1 FOR UPDATE SKIP LOCKED))
                 RETURNING fingerprint_id),
             written AS (
                 INSERT INTO fingerprint_search (fingerprint_id, target_id, text)
                 SELECT fp.id, fp.target_id,
                        scanfleet_fingerprint_text(fp.name, fp.template_id, fp.host, fp.matched_at)
                 FROM fingerprints fp
                 WHERE fp.id IN (SELECT fingerprint_id FROM taken)
                 ORDER BY fp.id
                 ON CONFLICT (fingerprint_id) DO UPDATE SET text = EXCLUDED.text
                 WHERE fingerprint_search.text IS DISTINCT FROM EXCLUDED.text
                 RETURNING 1)
             SELECT (SELECT count(*) FROM taken) AS taken",
            &[&limit],
        )
        .await?;
    let taken: i64 = row.try_get("taken")?;
    Ok(u64::try_from(taken).unwrap_or(0))
}

/// Keeps the index up with the pending list until `stop` is cancelled:
/// batch after batch while there are full ones, then a look every
/// [`IDLE`]. Errors (Postgres away) are logged and retried.
pub async fn keep_indexed(db: Db, stop: CancellationToken) {
    loop {
        let moved = async { index_pending(&db.get().await?, BATCH).await };
        let wait = tokio::select! {
            () = stop.cancelled() => return,
            moved = moved => match moved {
                Ok(n) if n >= BATCH as u64 => Duration::ZERO,
                Ok(_) => IDLE,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "fingerprint search index: will retry");
                    IDLE
                }
            },
        };
        if !wait.is_zero() {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
