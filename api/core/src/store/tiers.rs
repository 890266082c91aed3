//! Subscription tiers: seeded by the first migration, read-only at run time.

use tokio_postgres::GenericClient;
use tokio_postgres::Row;

use crate::error::Error;

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
    /// The `max_rps_per_host` a new target gets when none is given.
    pub default_max_rps_per_host: i32,
}

const COLUMNS: &str = "slug, name, price_cents, currency, billing_interval, rate_limit_rpm, \
                       scan_limit, target_limit, features, purchasable, default_max_rps_per_host";

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
            default_max_rps_per_host: row.try_get("default_max_rps_per_host")?,
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
