//! User accounts.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;
use tokio_postgres::Row;
use uuid::Uuid;

use super::{is_unique_violation, Page};
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct User {
    pub id: Uuid,
    pub email: String,
    pub password_hash: String,
    pub full_name: String,
    pub role: String,
    pub tier_slug: String,
    pub disabled: bool,
    pub created_at: DateTime<Utc>,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role == "admin"
    }
}

/// A user's columns (table alias `u`), each named `user_*` so that a row
/// joining users with another table (sessions, API keys) reads both by name
/// without one's `id` or `created_at` hiding the other's.
pub(crate) const COLUMNS: &str = "u.id AS user_id, u.email AS user_email, \
     u.password_hash AS user_password_hash, u.full_name AS user_full_name, \
     u.role AS user_role, u.tier_slug AS user_tier_slug, u.disabled AS user_disabled, \
     u.created_at AS user_created_at";

/// A row holding [`COLUMNS`], read by name.
impl TryFrom<&Row> for User {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(User {
            id: row.try_get("user_id")?,
            email: row.try_get("user_email")?,
            password_hash: row.try_get("user_password_hash")?,
            full_name: row.try_get("user_full_name")?,
            role: row.try_get("user_role")?,
            tier_slug: row.try_get("user_tier_slug")?,
            disabled: row.try_get("user_disabled")?,
            created_at: row.try_get("user_created_at")?,
        })
    }
}

pub struct NewUser<'a> {
    pub email: &'a str,
    pub password_hash: &'a str,
    pub full_name: &'a str,
    pub role: &'a str,
    pub tier_slug: &'a str,
}

/// Inserts a user; a taken email is `Error::Conflict`.
pub async fn create(db: &impl GenericClient, new: NewUser<'_>) -> Result<User, Error> {
    let row = db
        .query_one(
            &format!(
                "INSERT INTO users AS u (id, email, password_hash, full_name, role, tier_slug)
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
            ),
            &[
                &Uuid::now_v7(),
                &new.email,
                &new.password_hash,
                &new.full_name,
                &new.role,
                &new.tier_slug,
            ],
        )
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                Error::conflict("email_taken", "an account with this email already exists")
            } else {
                e.into()
            }
        })?;
    User::try_from(&row)
}

pub async fn find_by_email(db: &impl GenericClient, email: &str) -> Result<Option<User>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM users u WHERE u.email = $1"),
            &[&email],
        )
        .await?;
    row.as_ref().map(User::try_from).transpose()
}

pub async fn find(db: &impl GenericClient, id: Uuid) -> Result<Option<User>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM users u WHERE u.id = $1"),
            &[&id],
        )
        .await?;
    row.as_ref().map(User::try_from).transpose()
}

/// Whether the user `id` exists.
pub async fn exists(db: &impl GenericClient, id: Uuid) -> Result<bool, Error> {
    Ok(db
        .query_opt("SELECT 1 FROM users WHERE id = $1", &[&id])
        .await?
        .is_some())
}

/// The tier the user `id` is on now.
pub async fn tier_of(db: &impl GenericClient, id: Uuid) -> Result<String, Error> {
    Ok(db
        .query_one("SELECT tier_slug FROM users WHERE id = $1", &[&id])
        .await?
        .try_get("tier_slug")?)
}

pub async fn set_full_name(
    db: &impl GenericClient,
    id: Uuid,
    full_name: &str,
) -> Result<User, Error> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE users u SET full_name = $2, updated_at = now() WHERE u.id = $1 RETURNING {COLUMNS}"
            ),
            &[&id, &full_name],
        )
        .await?
        .ok_or(Error::NotFound("user"))?;
    super::changes::note_change(id);
    User::try_from(&row)
}

pub async fn set_password_hash(db: &impl GenericClient, id: Uuid, hash: &str) -> Result<(), Error> {
    db.execute(
        "UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1",
        &[&id, &hash],
    )
    .await?;
    super::changes::note_change(id);
    Ok(())
}

/// Newest first, with the total count.
pub async fn list(db: &impl GenericClient, page: Page) -> Result<(Vec<User>, i64), Error> {
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM users u ORDER BY u.created_at DESC, u.id DESC LIMIT $1 OFFSET $2"
            ),
            &[&page.limit, &page.offset],
        )
        .await?;
    let total: i64 = db
        .query_one("SELECT count(*) AS total FROM users", &[])
        .await?
        .try_get("total")?;
    let users = rows.iter().map(User::try_from).collect::<Result<_, _>>()?;
    Ok((users, total))
}

/// Changes made by an administrator; `None` leaves a field as it is.
#[derive(Debug, Default)]
pub struct AdminChange<'a> {
    pub tier_slug: Option<&'a str>,
    pub role: Option<&'a str>,
    pub disabled: Option<bool>,
}

pub async fn admin_update(
    db: &impl GenericClient,
    id: Uuid,
    change: AdminChange<'_>,
) -> Result<User, Error> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE users u SET tier_slug = COALESCE($2, u.tier_slug),
                        role = COALESCE($3, u.role),
                        disabled = COALESCE($4, u.disabled),
                        updated_at = now()
                 WHERE u.id = $1 RETURNING {COLUMNS}"
            ),
            &[&id, &change.tier_slug, &change.role, &change.disabled],
        )
        .await?
        .ok_or(Error::NotFound("user"))?;
    super::changes::note_change(id);
    User::try_from(&row)
}
