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
    pub proof: Proof,
    /// Requests a second to any one host of the target, at most; None:
    /// the scanner node's own ceiling.
    pub max_rps_per_host: Option<u32>,
}

/// The ownership proof of a target, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    /// Published as `scanfleet-verification=<token>`.
    pub token: String,
    /// `dns_txt`, `http_file` or `admin`; None while never proven.
    pub method: Option<String>,
    pub verified_at: Option<DateTime<Utc>>,
    /// None with a proof: it does not expire.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Where a target's proof stands at a given moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofStatus {
    Unverified,
    Verified,
    Expired,
}

impl ProofStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProofStatus::Unverified => "unverified",
            ProofStatus::Verified => "verified",
            ProofStatus::Expired => "expired",
        }
    }
}

impl Proof {
    pub fn status_at(&self, now: DateTime<Utc>) -> ProofStatus {
        match (self.verified_at, self.expires_at) {
            (None, _) => ProofStatus::Unverified,
            (Some(_), Some(expires)) if expires <= now => ProofStatus::Expired,
            (Some(_), _) => ProofStatus::Verified,
        }
    }
}

const COLUMNS: &str = "id, user_id, domain, organization, created_at, verification_token, \
                       verification_method, verified_at, verification_expires_at, \
                       max_rps_per_host";

/// A row holding [`COLUMNS`], read by name.
impl TryFrom<&Row> for TargetRow {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(TargetRow {
            id: row.try_get("id")?,
            user_id: row.try_get("user_id")?,
            domain: row.try_get("domain")?,
            organization: row.try_get("organization")?,
            created_at: row.try_get("created_at")?,
            proof: Proof {
                token: row.try_get("verification_token")?,
                method: row.try_get("verification_method")?,
                verified_at: row.try_get("verified_at")?,
                expires_at: row.try_get("verification_expires_at")?,
            },
            max_rps_per_host: row
                .try_get::<_, Option<i32>>("max_rps_per_host")?
                .and_then(|v| u32::try_from(v).ok()),
        })
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

/// What the user's tier says of new targets.
struct TierLimits {
    slug: String,
    /// None: unlimited.
    target_limit: Option<i32>,
    /// A new target's `max_rps_per_host` when none is given.
    default_rps: i32,
}

/// The user's tier limits, locking the user row until the end of the
/// transaction.
async fn lock_user_limit(db: &impl GenericClient, user_id: Uuid) -> Result<TierLimits, Error> {
    let row = db
        .query_opt(
            "SELECT u.tier_slug, t.target_limit, t.default_max_rps_per_host
             FROM users u JOIN tiers t ON t.slug = u.tier_slug
             WHERE u.id = $1 FOR UPDATE OF u",
            &[&user_id],
        )
        .await?
        .ok_or(Error::NotFound("user"))?;
    Ok(TierLimits {
        slug: row.try_get("tier_slug")?,
        target_limit: row.try_get("target_limit")?,
        default_rps: row.try_get("default_max_rps_per_host")?,
    })
}

pub async fn count(db: &impl GenericClient, user_id: Uuid) -> Result<i64, Error> {
    Ok(db
        .query_one(
            "SELECT count(*) AS total FROM targets WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .try_get("total")?)
}

/// Adds one target; without `max_rps_per_host`, it gets the tier's
/// default. Call inside a transaction: the user row stays locked until it
/// ends.
pub async fn create(
    db: &impl GenericClient,
    user_id: Uuid,
    domain: &Domain,
    organization: &str,
    max_rps_per_host: Option<u32>,
) -> Result<Result<TargetRow, AddError>, Error> {
    let tier = lock_user_limit(db, user_id).await?;
    if let Some(limit) = tier.target_limit {
        if count(db, user_id).await? >= i64::from(limit) {
            return Ok(Err(AddError::LimitReached {
                tier_slug: tier.slug,
                limit,
            }));
        }
    }
    let max_rps_per_host = max_rps_per_host
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(tier.default_rps);
    let result = db
        .query_one(
            &format!(
                "INSERT INTO targets (id, user_id, domain, organization, max_rps_per_host)
                 VALUES ($1, $2, $3, $4, $5) RETURNING {COLUMNS}"
            ),
            &[
                &Uuid::now_v7(),
                &user_id,
                &domain.as_str(),
                &organization,
                &max_rps_per_host,
            ],
        )
        .await;
    match result {
        Ok(row) => Ok(Ok(TargetRow::try_from(&row)?)),
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
    let tier = lock_user_limit(db, user_id).await?;
    let limit = tier.target_limit;
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
        .map(|r| r.try_get("domain"))
        .collect::<Result<_, _>>()?;
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
                    "INSERT INTO targets (id, user_id, domain, max_rps_per_host)
                     SELECT id, $1, domain, $4 FROM unnest($2::uuid[], $3::text[]) AS n(id, domain)
                     ON CONFLICT (user_id, domain) DO NOTHING
                     RETURNING {COLUMNS}"
                ),
                &[&user_id, &ids, &domains, &tier.default_rps],
            )
            .await?;
        let mut inserted: std::collections::HashMap<Uuid, TargetRow> = rows
            .iter()
            .map(|r| TargetRow::try_from(r).map(|t| (t.id, t)))
            .collect::<Result<_, _>>()?;
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

/// The user's targets, newest first, with the total count; with `search`,
/// those whose domain contains it.
pub async fn list(
    db: &impl GenericClient,
    user_id: Uuid,
    search: Option<&str>,
    page: Page,
) -> Result<(Vec<TargetRow>, i64), Error> {
    let Some(search) = search else {
        let rows = db
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM targets WHERE user_id = $1
                     ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
                ),
                &[&user_id, &page.limit, &page.offset],
            )
            .await?;
        let targets = rows
            .iter()
            .map(TargetRow::try_from)
            .collect::<Result<_, _>>()?;
        return Ok((targets, count(db, user_id).await?));
    };
    let search = search.to_lowercase();
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS}, count(*) OVER () AS total FROM targets
                 WHERE user_id = $1 AND strpos(domain, $4) > 0
                 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
            ),
            &[&user_id, &page.limit, &page.offset, &search],
        )
        .await?;
    let total = match rows.first() {
        Some(r) => r.try_get("total")?,
        None => 0,
    };
    let targets = rows
        .iter()
        .map(TargetRow::try_from)
        .collect::<Result<_, _>>()?;
    Ok((targets, total))
}

pub async fn find(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    target_id: Uuid,
) -> Result<Option<TargetRow>, Error> {
    // Prepared once a connection: every scan's start reads it.
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {COLUMNS} FROM targets WHERE id = $1 AND user_id = $2")
    });
    let row = db
        .query_opt(&db.prepare_cached(&SQL).await?, &[&target_id, &user_id])
        .await?;
    row.as_ref().map(TargetRow::try_from).transpose()
}

/// Sets the ceiling on requests a second to any one host of one of the
/// user's targets (1 to 1000, checked by the caller); None when it is not
/// theirs. Scans queued from now on take it.
pub async fn set_max_rps_per_host(
    db: &impl GenericClient,
    user_id: Uuid,
    target_id: Uuid,
    max_rps_per_host: u32,
) -> Result<Option<TargetRow>, Error> {
    let value = i32::try_from(max_rps_per_host).unwrap_or(i32::MAX);
    let row = db
        .query_opt(
            &format!(
                "UPDATE targets SET max_rps_per_host = $3 WHERE id = $1 AND user_id = $2
                 RETURNING {COLUMNS}"
            ),
            &[&target_id, &user_id, &value],
        )
        .await?;
    row.as_ref().map(TargetRow::try_from).transpose()
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

/// Any user's target (administrators).
pub async fn find_any(
    db: &impl GenericClient,
    target_id: Uuid,
) -> Result<Option<TargetRow>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM targets WHERE id = $1"),
            &[&target_id],
        )
        .await?;
    row.as_ref().map(TargetRow::try_from).transpose()
}

/// Records a proof made now by `method` and lasting until `expires_at`
/// (None: for good), or with `None` forgets the proof (an administrator
/// revoking it; the token stays). None when the target is gone.
pub async fn set_proof(
    db: &impl GenericClient,
    target_id: Uuid,
    proof: Option<(&str, Option<DateTime<Utc>>)>,
) -> Result<Option<TargetRow>, Error> {
    let (method, expires_at) = proof.unzip();
    let row = db
        .query_opt(
            &format!(
                "UPDATE targets SET verification_method = $2,
                     verified_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END,
                     verification_expires_at = $3
                 WHERE id = $1 RETURNING {COLUMNS}"
            ),
            &[&target_id, &method, &expires_at.flatten()],
        )
        .await?;
    row.as_ref().map(TargetRow::try_from).transpose()
}

/// The user's targets whose proof would cover `domain`: the domain itself
/// and its parent domains (a verified domain covers its subdomains), the
/// most specific first.
pub async fn covering(
    db: &impl GenericClient,
    user_id: Uuid,
    domain: &str,
) -> Result<Vec<TargetRow>, Error> {
    let mut names = vec![domain.to_string()];
    let mut rest = domain;
    while let Some((_, parent)) = rest.split_once('.') {
        // Nobody proves a top-level domain; no need to ask for one.
        if parent.contains('.') {
            names.push(parent.to_string());
        }
        rest = parent;
    }
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM targets WHERE user_id = $1 AND domain = ANY($2)
                 ORDER BY length(domain) DESC"
            ),
            &[&user_id, &names],
        )
        .await?;
    rows.iter().map(TargetRow::try_from).collect()
}
