//! API keys: stored as the SHA-256 of the raw key (shown once, at creation)
//! with its last four characters for listings. A deleted key is gone: its
//! row is removed, so a lookup by hash finds nothing.

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::users::{self, User};
use super::Page;
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct ApiKey {
    pub id: Uuid,
    pub user_id: Uuid,
    pub name: String,
    pub last4: String,
    pub permissions: Vec<String>,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A key's columns (table alias `k`), each named `key_*` so that a row
/// joining a key with its owner's `users::COLUMNS` reads both by name.
const COLUMNS: &str = "k.id AS key_id, k.user_id AS key_user_id, k.name AS key_name, \
     k.last4 AS key_last4, k.permissions AS key_permissions, k.expires_at AS key_expires_at, \
     k.created_at AS key_created_at, k.last_used_at AS key_last_used_at";

/// A row holding [`COLUMNS`], read by name.
impl TryFrom<&Row> for ApiKey {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(ApiKey {
            id: row.try_get("key_id")?,
            user_id: row.try_get("key_user_id")?,
            name: row.try_get("key_name")?,
            last4: row.try_get("key_last4")?,
            permissions: row.try_get("key_permissions")?,
            expires_at: row.try_get("key_expires_at")?,
            created_at: row.try_get("key_created_at")?,
            last_used_at: row.try_get("key_last_used_at")?,
        })
    }
}

pub struct NewApiKey<'a> {
    pub user_id: Uuid,
    pub name: &'a str,
    pub key_hash: &'a [u8],
    pub last4: &'a str,
    pub permissions: &'a [String],
    pub expires_at: DateTime<Utc>,
}

pub async fn create(db: &impl GenericClient, new: NewApiKey<'_>) -> Result<ApiKey, Error> {
    let row = db
        .query_one(
            &format!(
                "INSERT INTO api_keys AS k (id, user_id, name, key_hash, last4, permissions, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
            ),
            &[
                &Uuid::now_v7(),
                &new.user_id,
                &new.name,
                &new.key_hash,
                &new.last4,
                &new.permissions,
                &new.expires_at,
            ],
        )
        .await?;
    ApiKey::try_from(&row)
}

/// Newest first, with the total count.
pub async fn list(
    db: &impl GenericClient,
    user_id: Uuid,
    page: Page,
) -> Result<(Vec<ApiKey>, i64), Error> {
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM api_keys k WHERE k.user_id = $1
                 ORDER BY k.created_at DESC, k.id DESC LIMIT $2 OFFSET $3"
            ),
            &[&user_id, &page.limit, &page.offset],
        )
        .await?;
    let total: i64 = db
        .query_one(
            "SELECT count(*) AS total FROM api_keys WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .try_get("total")?;
    let keys = rows
        .iter()
        .map(ApiKey::try_from)
        .collect::<Result<_, _>>()?;
    Ok((keys, total))
}

/// Deletes the user's key; someone else's is `NotFound`.
pub async fn delete(db: &impl GenericClient, user_id: Uuid, id: Uuid) -> Result<(), Error> {
    let n = db
        .execute(
            "DELETE FROM api_keys WHERE id = $1 AND user_id = $2",
            &[&id, &user_id],
        )
        .await?;
    if n == 0 {
        return Err(Error::NotFound("API key"));
    }
    super::changes::note_change(user_id);
    Ok(())
}

/// A key found by its hash, with its owner as stored now (tier, disabled).
#[derive(Debug, Clone)]
pub struct KeyOwner {
    pub key: ApiKey,
    pub user: User,
    /// The end of the owner's paid period when it is due to lapse.
    pub lapses_at: Option<DateTime<Utc>>,
}

/// One indexed lookup (the unique `key_hash` index) joined with the owner.
pub async fn find_by_hash(
    db: &impl GenericClient,
    key_hash: &[u8],
) -> Result<Option<KeyOwner>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {}, {COLUMNS}, (SELECT sub.current_period_end FROM subscriptions sub
                         WHERE sub.user_id = u.id AND sub.cancel_at_period_end
                               AND sub.status <> 'canceled') AS lapses_at
                 FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = $1",
                users::COLUMNS
            ),
            &[&key_hash],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(KeyOwner {
        key: ApiKey::try_from(&row)?,
        user: User::try_from(&row)?,
        lapses_at: row.try_get("lapses_at")?,
    }))
}

/// The owner and their tier's requests per minute, for the rate limiter
/// (expired keys are still counted against their owner: they were sent).
pub async fn rate_subject(
    db: &impl GenericClient,
    key_hash: &[u8],
) -> Result<Option<(Uuid, i32)>, Error> {
    let row = db
        .query_opt(
            "SELECT u.id AS user_id, t.rate_limit_rpm
             FROM api_keys k JOIN users u ON u.id = k.user_id
             JOIN tiers t ON t.slug = u.tier_slug WHERE k.key_hash = $1",
            &[&key_hash],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some((
        row.try_get("user_id")?,
        row.try_get("rate_limit_rpm")?,
    )))
}

/// Records a use; callers skip it when the stored time is recent, so a busy
/// key does not cost a write per request.
pub async fn touch(db: &impl GenericClient, id: Uuid) -> Result<(), Error> {
    db.execute(
        "UPDATE api_keys SET last_used_at = now() WHERE id = $1",
        &[&id],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a column list gives its columns: `x.a AS b` is `b`,
    /// `x.a` is `a`.
    fn output_names(columns: &str) -> Vec<&str> {
        columns
            .split(',')
            .map(|c| {
                let c = c.trim();
                match c.rsplit_once(" AS ") {
                    Some((_, name)) => name,
                    None => c.rsplit_once('.').map_or(c, |(_, name)| name),
                }
            })
            .collect()
    }

    #[test]
    fn a_key_joined_with_its_owner_reads_disjoint_column_names() {
        let key = output_names(COLUMNS);
        let user = output_names(users::COLUMNS);
        assert_eq!(key.len(), 8);
        assert_eq!(user.len(), 8);
        let shared: Vec<_> = key.iter().filter(|name| user.contains(name)).collect();
        assert!(shared.is_empty(), "both readers would read {shared:?}");
        for name in ["lapses_at", "active", "expires_at"] {
            assert!(!user.contains(&name), "a user column shadows {name}");
        }
    }
}
