//! Targets: the domains a user scans, with the tier's target limit.
//!
//! Creates and imports lock the owner's user row first, so that concurrent
//! requests of one user count targets one after the other and cannot
//! overshoot the limit together.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::{is_unique_violation, Page};
use crate::domain::{Domain, DomainError};
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct TargetRow {
    pub id: Uuid,
    pub user_id: Uuid,
    pub domain: String,
    pub organization: String,
    pub created_at: DateTime<Utc>,
}

const COLUMNS: &str = "id, user_id, domain, organization, created_at";

fn from_row(row: &Row) -> TargetRow {
    TargetRow {
        id: row.get(0),
        user_id: row.get(1),
        domain: row.get(2),
        organization: row.get(3),
        created_at: row.get(4),
    }
}

/// Why a target cannot be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddError {
    /// The user already has this domain.
    Duplicate,
    /// The tier's target limit is reached.
    LimitReached { tier_slug: String, limit: i32 },
}

/// The user's tier slug and target limit (None: unlimited), locking the
/// user row until the end of the transaction.
async fn lock_user_limit(
    db: &impl GenericClient,
    user_id: Uuid,
) -> Result<(String, Option<i32>), Error> {
    let row = db
        .query_opt(
            "SELECT u.tier_slug, t.target_limit FROM users u JOIN tiers t ON t.slug = u.tier_slug
             WHERE u.id = $1 FOR UPDATE OF u",
            &[&user_id],
        )
        .await?
        .ok_or(Error::NotFound("user"))?;
    Ok((row.get(0), row.get(1)))
}

pub async fn count(db: &impl GenericClient, user_id: Uuid) -> Result<i64, Error> {
    Ok(db
        .query_one(
            "SELECT count(*) FROM targets WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .get(0))
}

/// Adds one target. Call inside a transaction: the user row stays locked
/// until it ends.
pub async fn create(
    db: &impl GenericClient,
    user_id: Uuid,
    domain: &Domain,
    organization: &str,
) -> Result<Result<TargetRow, AddError>, Error> {
    let (tier_slug, limit) = lock_user_limit(db, user_id).await?;
    if let Some(limit) = limit {
        if count(db, user_id).await? >= i64::from(limit) {
            return Ok(Err(AddError::LimitReached { tier_slug, limit }));
        }
    }
    let result = db
        .query_one(
            &format!(
                "INSERT INTO targets (id, user_id, domain, organization) VALUES ($1, $2, $3, $4)
                 RETURNING {COLUMNS}"
            ),
            &[&Uuid::now_v7(), &user_id, &domain.as_str(), &organization],
        )
        .await;
    match result {
        Ok(row) => Ok(Ok(from_row(&row))),
        Err(e) if is_unique_violation(&e) => Ok(Err(AddError::Duplicate)),
        Err(e) => Err(e.into()),
    }
}

/// The outcome of one line of an import.
#[derive(Debug, Clone)]
pub enum ImportLine {
    Imported(TargetRow),
    Invalid(DomainError),
    DuplicateInImport,
    AlreadyExists,
    LimitReached,
}

/// Imports domains in order: invalid ones, repeats within the list, ones
/// the user already has, and those past the tier's target limit fail; the
/// rest are inserted in one statement. Call inside a transaction.
pub async fn import(
    db: &impl GenericClient,
    user_id: Uuid,
    raw: &[String],
) -> Result<Vec<ImportLine>, Error> {
    let (_, limit) = lock_user_limit(db, user_id).await?;
    let mut lines: Vec<Option<ImportLine>> = vec![None; raw.len()];
    let mut candidates: Vec<(usize, Domain)> = Vec::new();
    let mut seen = HashSet::new();
    for (i, text) in raw.iter().enumerate() {
        match Domain::try_parse(text) {
            Err(e) => lines[i] = Some(ImportLine::Invalid(e)),
            Ok(d) if !seen.insert(d.clone()) => lines[i] = Some(ImportLine::DuplicateInImport),
            Ok(d) => candidates.push((i, d)),
        }
    }
    let names: Vec<&str> = candidates.iter().map(|(_, d)| d.as_str()).collect();
    let existing: HashSet<String> = db
        .query(
            "SELECT domain FROM targets WHERE user_id = $1 AND domain = ANY($2)",
            &[&user_id, &names],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut room = match limit {
        Some(limit) => (i64::from(limit) - count(db, user_id).await?).max(0),
        None => i64::MAX,
    };
    let mut to_insert: Vec<(usize, Uuid, String)> = Vec::new();
    for (i, d) in candidates {
        if existing.contains(d.as_str()) {
            lines[i] = Some(ImportLine::AlreadyExists);
        } else if room == 0 {
            lines[i] = Some(ImportLine::LimitReached);
        } else {
            room -= 1;
            to_insert.push((i, Uuid::now_v7(), d.into_string()));
        }
    }
    if !to_insert.is_empty() {
        let ids: Vec<Uuid> = to_insert.iter().map(|(_, id, _)| *id).collect();
        let domains: Vec<&str> = to_insert.iter().map(|(_, _, d)| d.as_str()).collect();
        let rows = db
            .query(
                &format!(
                    "INSERT INTO targets (id, user_id, domain)
                     SELECT id, $1, domain FROM unnest($2::uuid[], $3::text[]) AS n(id, domain)
                     ON CONFLICT (user_id, domain) DO NOTHING
                     RETURNING {COLUMNS}"
                ),
                &[&user_id, &ids, &domains],
            )
            .await?;
        let mut inserted: std::collections::HashMap<Uuid, TargetRow> = rows
            .iter()
            .map(|r| {
                let t = from_row(r);
                (t.id, t)
            })
            .collect();
        for (i, id, _) in to_insert {
            lines[i] = Some(match inserted.remove(&id) {
                Some(t) => ImportLine::Imported(t),
                // Only possible if the user row lock was bypassed.
                None => ImportLine::AlreadyExists,
            });
        }
    }
    Ok(lines
        .into_iter()
        .map(|l| l.unwrap_or(ImportLine::AlreadyExists))
        .collect())
}

/// The user's targets, newest first, with the total count.
pub async fn list(
    db: &impl GenericClient,
    user_id: Uuid,
    page: Page,
) -> Result<(Vec<TargetRow>, i64), Error> {
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM targets WHERE user_id = $1
                 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
            ),
            &[&user_id, &page.limit, &page.offset],
        )
        .await?;
    Ok((
        rows.iter().map(from_row).collect(),
        count(db, user_id).await?,
    ))
}

pub async fn find(
    db: &impl GenericClient,
    user_id: Uuid,
    target_id: Uuid,
) -> Result<Option<TargetRow>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM targets WHERE id = $1 AND user_id = $2"),
            &[&target_id, &user_id],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// Locks one of the user's targets until the transaction ends, so no scan
/// of it can be created meanwhile (the scan insert's foreign-key check
/// waits for the lock). False when it is not theirs.
pub async fn lock_owned(
    db: &impl GenericClient,
    user_id: Uuid,
    target_id: Uuid,
) -> Result<bool, Error> {
    Ok(db
        .query_opt(
            "SELECT 1 FROM targets WHERE id = $1 AND user_id = $2 FOR UPDATE",
            &[&target_id, &user_id],
        )
        .await?
        .is_some())
}

/// Deletes one of the user's targets; its scans, findings and schedules go
/// with it (ON DELETE CASCADE). False when it is not theirs.
pub async fn delete(
    db: &impl GenericClient,
    user_id: Uuid,
    target_id: Uuid,
) -> Result<bool, Error> {
    let n = db
        .execute(
            "DELETE FROM targets WHERE id = $1 AND user_id = $2",
            &[&target_id, &user_id],
        )
        .await?;
    Ok(n == 1)
}
