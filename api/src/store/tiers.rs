//! Subscription tiers: seeded by the first migration, read-only at run time;
//! and the in-process record of users whose tier just changed
//! ([`note_change`]), so that caches of a user's tier (the rate limiter's)
//! can drop it at once.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::GenericClient;
use tokio_postgres::Row;

use uuid::Uuid;

use crate::error::Error;

/// How long a change is remembered: longer than any cache of a tier lives.
const CHANGE_MEMORY: Duration = Duration::from_secs(60);

/// Users whose tier this process changed, and when. Process-wide: user ids
/// are unique, so several apps in one process (the tests) cannot disturb
/// each other. Written after the change is committed; other processes'
/// caches see it when they expire.
static CHANGES: LazyLock<Mutex<HashMap<Uuid, Instant>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Records that `user_id`'s tier has just changed; call after the commit.
pub fn note_change(user_id: Uuid) {
    let mut changes = CHANGES.lock().unwrap_or_else(|p| p.into_inner());
    changes.retain(|_, at| at.elapsed() < CHANGE_MEMORY);
    changes.insert(user_id, Instant::now());
}

/// Whether `user_id`'s tier changed at or after `since`.
pub fn changed_since(user_id: Uuid, since: Instant) -> bool {
    CHANGES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&user_id)
        .is_some_and(|changed| *changed >= since)
}

#[derive(Debug, Clone)]
pub struct Tier {
    pub slug: String,
    pub name: String,
    pub price_cents: i32,
    pub currency: String,
    pub interval: String,
    pub rate_limit_rpm: i32,
    pub scan_limit: Option<i32>,
    pub target_limit: Option<i32>,
    pub features: Vec<String>,
    pub purchasable: bool,
}

const COLUMNS: &str = "slug, name, price_cents, currency, billing_interval, rate_limit_rpm, \
                       scan_limit, target_limit, features, purchasable";

impl TryFrom<&Row> for Tier {
    type Error = Error;

    fn try_from(row: &Row) -> Result<Self, Error> {
        Ok(Tier {
            slug: row.try_get("slug")?,
            name: row.try_get("name")?,
            price_cents: row.try_get("price_cents")?,
            currency: row.try_get("currency")?,
            interval: row.try_get("billing_interval")?,
            rate_limit_rpm: row.try_get("rate_limit_rpm")?,
            scan_limit: row.try_get("scan_limit")?,
            target_limit: row.try_get("target_limit")?,
            features: row.try_get("features")?,
            purchasable: row.try_get("purchasable")?,
        })
    }
}

pub async fn list(db: &impl GenericClient) -> Result<Vec<Tier>, Error> {
    let rows = db
        .query(
            &format!("SELECT {COLUMNS} FROM tiers ORDER BY sort_order"),
            &[],
        )
        .await?;
    rows.iter().map(Tier::try_from).collect()
}

pub async fn get(db: &impl GenericClient, slug: &str) -> Result<Option<Tier>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM tiers WHERE slug = $1"),
            &[&slug],
        )
        .await?;
    row.as_ref().map(Tier::try_from).transpose()
}
