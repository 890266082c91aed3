//! Subscriptions: the paid period of a user, and the period rule every scan
//! count uses ([`current_period`]).
//!
//! Rows are written by the payment integration (a later version); until a
//! user has one, they are on their tier with the calendar month as period.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use tokio_postgres::GenericClient;
use uuid::Uuid;

use crate::error::Error;

/// The subscription row of a user.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub tier_slug: String,
    pub status: String,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    pub cancel_at_period_end: bool,
}

pub async fn find(db: &impl GenericClient, user_id: Uuid) -> Result<Option<Subscription>, Error> {
    let row = db
        .query_opt(
            "SELECT tier_slug, status, current_period_start, current_period_end,
                    cancel_at_period_end
             FROM subscriptions WHERE user_id = $1",
            &[&user_id],
        )
        .await?;
    Ok(row.map(|r| Subscription {
        tier_slug: r.get(0),
        status: r.get(1),
        current_period_start: r.get(2),
        current_period_end: r.get(3),
        cancel_at_period_end: r.get(4),
    }))
}

/// The calendar month (UTC) that contains `now`: `[first day, first day of
/// the next month)`.
pub fn calendar_month(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = Utc
        .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
        .single()
        .expect("the first of a month at midnight UTC exists");
    let (y, m) = if now.month() == 12 {
        (now.year() + 1, 1)
    } else {
        (now.year(), now.month() + 1)
    };
    let end = Utc
        .with_ymd_and_hms(y, m, 1, 0, 0, 0)
        .single()
        .expect("the first of a month at midnight UTC exists");
    (start, end)
}

/// Whether a subscription row's period is the one to count in, for a user on
/// `tier_slug`: only non-demo tiers have billing periods, and only a period
/// that covers `now` (a lapsed row falls back to the calendar month).
pub fn uses_billing_period(tier_slug: &str, sub: &Subscription, now: DateTime<Utc>) -> bool {
    tier_slug != "demo" && sub.current_period_start <= now && now < sub.current_period_end
}

/// The period in which a user's scans are counted, `[start, end)`: the
/// subscription's current billing period for paid tiers when there is one
/// covering now, else the calendar month (UTC). `scan_usage.period_start`
/// is the `start` of this period. Scan creation and the usage report both
/// use this one rule.
pub async fn current_period(
    db: &impl GenericClient,
    user_id: Uuid,
    tier_slug: &str,
) -> Result<(DateTime<Utc>, DateTime<Utc>), Error> {
    let now = Utc::now();
    Ok(match find(db, user_id).await? {
        Some(sub) if uses_billing_period(tier_slug, &sub, now) => {
            (sub.current_period_start, sub.current_period_end)
        }
        _ => calendar_month(now),
    })
}

/// Scans created in the period starting at `period_start`.
pub async fn scans_used(
    db: &impl GenericClient,
    user_id: Uuid,
    period_start: DateTime<Utc>,
) -> Result<i64, Error> {
    let row = db
        .query_opt(
            "SELECT scans FROM scan_usage WHERE user_id = $1 AND period_start = $2",
            &[&user_id, &period_start],
        )
        .await?;
    Ok(row.map(|r| i64::from(r.get::<_, i32>(0))).unwrap_or(0))
}

pub async fn targets_used(db: &impl GenericClient, user_id: Uuid) -> Result<i64, Error> {
    Ok(db
        .query_one(
            "SELECT count(*) FROM targets WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calendar_month_runs_from_the_first_to_the_next_first() {
        let t = Utc.with_ymd_and_hms(2026, 11, 21, 6, 41, 0).unwrap();
        assert_eq!(
            calendar_month(t),
            (
                Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap(),
                Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
            )
        );
        let dec = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap();
        assert_eq!(
            calendar_month(dec).1,
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
    }

    #[test]
    fn only_paid_tiers_with_a_covering_period_use_the_billing_period() {
        let now = Utc.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap();
        let sub = Subscription {
            tier_slug: "monthly".into(),
            status: "active".into(),
            current_period_start: Utc.with_ymd_and_hms(2026, 11, 10, 0, 0, 0).unwrap(),
            current_period_end: Utc.with_ymd_and_hms(2026, 12, 10, 0, 0, 0).unwrap(),
            cancel_at_period_end: false,
        };
        assert!(uses_billing_period("monthly", &sub, now));
        assert!(!uses_billing_period("demo", &sub, now));
        let later = Utc.with_ymd_and_hms(2026, 12, 11, 0, 0, 0).unwrap();
        assert!(!uses_billing_period("monthly", &sub, later));
    }
}
