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
}

const COLUMNS: &str = "slug, name, price_cents, currency, billing_interval, rate_limit_rpm, \
                       scan_limit, target_limit, features, purchasable";

fn from_row(row: &Row) -> Tier {
    Tier {
        slug: row.get(0),
        name: row.get(1),
        price_cents: row.get(2),
        currency: row.get(3),
        interval: row.get(4),
        rate_limit_rpm: row.get(5),
        scan_limit: row.get(6),
        target_limit: row.get(7),
        features: row.get(8),
        purchasable: row.get(9),
    }
}

pub async fn list(db: &impl GenericClient) -> Result<Vec<Tier>, Error> {
    let rows = db
        .query(
            &format!("SELECT {COLUMNS} FROM tiers ORDER BY sort_order"),
            &[],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

pub async fn get(db: &impl GenericClient, slug: &str) -> Result<Option<Tier>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM tiers WHERE slug = $1"),
            &[&slug],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}
