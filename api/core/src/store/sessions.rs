//! Refresh-token sessions. A login opens a session; each refresh rotates its
//! token. A token that was already rotated and is presented again means it
//! leaked, so the whole session is revoked (reuse detection).

use chrono::{DateTime, Duration, Utc};
use tokio_postgres::GenericClient;
use uuid::Uuid;

use super::users::{self, User};
use crate::error::Error;

pub async fn create(
    db: &impl GenericClient,
    user_id: Uuid,
    ttl: Duration,
    token_hash: &[u8],
) -> Result<Uuid, Error> {
    let id = Uuid::now_v7();
    db.execute(
        "INSERT INTO sessions (id, user_id, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))",
        &[&id, &user_id, &(ttl.num_seconds() as f64)],
    )
    .await?;
    db.execute(
        "INSERT INTO refresh_tokens (token_hash, session_id) VALUES ($1, $2)",
        &[&token_hash, &id],
    )
    .await?;
    Ok(id)
}

/// A live session and its user, as the auth layer sees it on each request.
#[derive(Debug, Clone)]
pub struct SessionUser {
    pub session_id: Uuid,
    pub user: User,
    pub active: bool,
    pub expires_at: DateTime<Utc>,
    /// The end of a paid period that is due to lapse (cancelled at period
    /// end), when there is one.
    pub lapses_at: Option<DateTime<Utc>>,
}

pub async fn find_with_user(
    db: &impl GenericClient,
    session_id: Uuid,
) -> Result<Option<SessionUser>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {}, (s.revoked_at IS NULL AND s.expires_at > now()) AS active,
                        s.expires_at, (SELECT sub.current_period_end FROM subscriptions sub
                         WHERE sub.user_id = u.id AND sub.cancel_at_period_end
                               AND sub.status <> 'canceled') AS lapses_at
                 FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1",
                users::COLUMNS
            ),
            &[&session_id],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(SessionUser {
        session_id,
        user: User::try_from(&row)?,
        active: row.try_get("active")?,
        expires_at: row.try_get("expires_at")?,
        lapses_at: row.try_get("lapses_at")?,
    }))
}

/// What presenting a refresh token led to.
#[derive(Debug, PartialEq, Eq)]
pub enum Rotation {
    /// The token was current: it is now used and `new_hash` replaces it.
    Rotated { session_id: Uuid, user_id: Uuid },
    /// The token had been used before: the session is now revoked.
    Reused { session_id: Uuid },
    /// Unknown token, or its session is revoked or expired.
    Invalid,
}

/// Rotates atomically: of two concurrent uses of one token exactly one wins,
/// and the other counts as reuse.
pub async fn rotate(
    db: &mut deadpool_postgres::Client,
    token_hash: &[u8],
    new_hash: &[u8],
    expected_session: Option<Uuid>,
) -> Result<Rotation, Error> {
    let tx = db.transaction().await?;
    let row = tx
        .query_opt(
            "SELECT t.session_id, s.user_id, t.used_at IS NOT NULL AS used,
                    (s.revoked_at IS NULL AND s.expires_at > now()) AS active
             FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id
             WHERE t.token_hash = $1 FOR UPDATE OF t",
            &[&token_hash],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Rotation::Invalid);
    };
    let session_id: Uuid = row.try_get("session_id")?;
    let user_id: Uuid = row.try_get("user_id")?;
    let used: bool = row.try_get("used")?;
    let active: bool = row.try_get("active")?;
    if expected_session.is_some_and(|s| s != session_id) || !active {
        return Ok(Rotation::Invalid);
    }
    if used {
        tx.execute(
            "UPDATE sessions SET revoked_at = now(), revoked_reason = 'refresh token reuse'
             WHERE id = $1 AND revoked_at IS NULL",
            &[&session_id],
        )
        .await?;
        tx.commit().await?;
        super::changes::note_change(user_id);
        return Ok(Rotation::Reused { session_id });
    }
    tx.execute(
        "UPDATE refresh_tokens SET used_at = now() WHERE token_hash = $1",
        &[&token_hash],
    )
    .await?;
    tx.execute(
        "INSERT INTO refresh_tokens (token_hash, session_id) VALUES ($1, $2)",
        &[&new_hash, &session_id],
    )
    .await?;
    tx.commit().await?;
    Ok(Rotation::Rotated {
        session_id,
        user_id,
    })
}

/// The session a refresh token belongs to, if the token is known.
pub async fn session_of_token(
    db: &impl GenericClient,
    token_hash: &[u8],
) -> Result<Option<(Uuid, Uuid)>, Error> {
    let row = db
        .query_opt(
            "SELECT s.id AS session_id, s.user_id
             FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id
             WHERE t.token_hash = $1",
            &[&token_hash],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some((row.try_get("session_id")?, row.try_get("user_id")?)))
}

pub async fn revoke(db: &impl GenericClient, session_id: Uuid, reason: &str) -> Result<(), Error> {
    let row = db
        .query_opt(
            "UPDATE sessions SET revoked_at = now(), revoked_reason = $2
             WHERE id = $1 AND revoked_at IS NULL RETURNING user_id",
            &[&session_id, &reason],
        )
        .await?;
    if let Some(row) = row {
        super::changes::note_change(row.try_get("user_id")?);
    }
    Ok(())
}

/// Revokes every live session of a user except `keep` (password change,
/// account disabled).
pub async fn revoke_all_except(
    db: &impl GenericClient,
    user_id: Uuid,
    keep: Option<Uuid>,
    reason: &str,
) -> Result<u64, Error> {
    let n = db
        .execute(
            "UPDATE sessions SET revoked_at = now(), revoked_reason = $3
             WHERE user_id = $1 AND revoked_at IS NULL AND ($2::uuid IS NULL OR id <> $2)",
            &[&user_id, &keep, &reason],
        )
        .await?;
    super::changes::note_change(user_id);
    Ok(n)
}

/// A web console session: a row of `sessions` named by the hash of the
/// cookie's token, with the CSRF token its forms and fragments echo.
#[derive(Debug, Clone)]
pub struct ConsoleSession {
    pub session_id: Uuid,
    pub user: User,
    pub csrf_token: String,
}

/// Opens a console session for `ttl`.
pub async fn create_console(
    db: &impl GenericClient,
    user_id: Uuid,
    ttl: Duration,
    token_hash: &[u8],
    csrf_token: &str,
) -> Result<Uuid, Error> {
    let id = Uuid::now_v7();
    db.execute(
        "WITH s AS (INSERT INTO sessions (id, user_id, expires_at)
                    VALUES ($1, $2, now() + make_interval(secs => $3)))
         INSERT INTO console_sessions (token_hash, session_id, csrf_token) VALUES ($4, $1, $5)",
        &[
            &id,
            &user_id,
            &(ttl.num_seconds() as f64),
            &token_hash,
            &csrf_token,
        ],
    )
    .await?;
    Ok(id)
}

/// The live console session whose cookie token hashes to `token_hash`,
/// with its user; None when unknown, expired, revoked or the account is
/// disabled.
pub async fn find_console(
    db: &impl GenericClient,
    token_hash: &[u8],
) -> Result<Option<ConsoleSession>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {}, s.id AS session_id, c.csrf_token
                 FROM console_sessions c JOIN sessions s ON s.id = c.session_id
                 JOIN users u ON u.id = s.user_id
                 WHERE c.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()
                   AND NOT u.disabled",
                users::COLUMNS
            ),
            &[&token_hash],
        )
        .await?;
    row.map(|row| {
        Ok(ConsoleSession {
            session_id: row.try_get("session_id")?,
            user: User::try_from(&row)?,
            csrf_token: row.try_get("csrf_token")?,
        })
    })
    .transpose()
}
