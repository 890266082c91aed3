//! Subscriptions: the paid period of a user as the payment provider reports
//! it, the rule that returns a cancelled subscription to `demo` when its
//! period ends ([`settle_lapsed`]), and the period rule every scan count
//! uses ([`current_period`]).
//!
//! Rows are written from the provider's answers and webhook events (see
//! `crate::payments`); a user without one is on their tier with the calendar
//! month as period. `users.tier_slug` stays the one tier every check reads
//! (rate limits, scan and target limits, API keys, reports): applying a
//! subscription change sets it in the same transaction.

use chrono::{DateTime, Datelike, TimeZone, Utc};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use crate::error::Error;

/// The state of a paid subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionStatus {
    /// Paid up (or cancelled, but the paid period is still running).
    Active,
    /// A renewal payment failed; the tier is kept while the provider retries.
    PastDue,
    /// Ended: the user is back on `demo`.
    Canceled,
}

impl SubscriptionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionStatus::Active => "active",
            SubscriptionStatus::PastDue => "past_due",
            SubscriptionStatus::Canceled => "canceled",
        }
    }

    pub fn parse(text: &str) -> Option<SubscriptionStatus> {
        match text {
            "active" => Some(SubscriptionStatus::Active),
            "past_due" => Some(SubscriptionStatus::PastDue),
            "canceled" => Some(SubscriptionStatus::Canceled),
            _ => None,
        }
    }
}

scanfleet_common::text_column!(SubscriptionStatus, SubscriptionStatus::parse);

/// The subscription row of a user.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub user_id: Uuid,
    pub tier_slug: String,
    pub status: SubscriptionStatus,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    pub cancel_at_period_end: bool,
    pub provider_customer_id: Option<String>,
    pub provider_subscription_id: Option<String>,
    pub provider_item_id: Option<String>,
    pub provider_price_id: Option<String>,
    /// Provider time of the newest change applied; `None` until a snapshot
    /// of the provider's subscription has been applied.
    pub provider_updated_at: Option<DateTime<Utc>>,
}

impl Subscription {
    /// Whether the provider still bills it (it can be upgraded or cancelled).
    pub fn is_live(&self) -> bool {
        self.status != SubscriptionStatus::Canceled && self.provider_subscription_id.is_some()
    }
}

impl TryFrom<&Row> for Subscription {
    type Error = Error;

    fn try_from(r: &Row) -> Result<Self, Error> {
        Ok(Subscription {
            user_id: r.try_get("user_id")?,
            tier_slug: r.try_get("tier_slug")?,
            status: r.try_get("status")?,
            current_period_start: r.try_get("current_period_start")?,
            current_period_end: r.try_get("current_period_end")?,
            cancel_at_period_end: r.try_get("cancel_at_period_end")?,
            provider_customer_id: r.try_get("provider_customer_id")?,
            provider_subscription_id: r.try_get("provider_subscription_id")?,
            provider_item_id: r.try_get("provider_item_id")?,
            provider_price_id: r.try_get("provider_price_id")?,
            provider_updated_at: r.try_get("provider_updated_at")?,
        })
    }
}

const COLUMNS: &str = "user_id, tier_slug, status, current_period_start, current_period_end, \
                       cancel_at_period_end, provider_customer_id, provider_subscription_id, \
                       provider_item_id, provider_price_id, provider_updated_at";

pub async fn find(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
) -> Result<Option<Subscription>, Error> {
    // Prepared once a connection: every scan's start reads it.
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!("SELECT {COLUMNS} FROM subscriptions WHERE user_id = $1")
    });
    let row = db
        .query_opt(&db.prepare_cached(&SQL).await?, &[&user_id])
        .await?;
    row.as_ref().map(Subscription::try_from).transpose()
}

/// The user's row, locked until the transaction ends.
pub async fn lock(db: &impl GenericClient, user_id: Uuid) -> Result<Option<Subscription>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM subscriptions WHERE user_id = $1 FOR UPDATE"),
            &[&user_id],
        )
        .await?;
    row.as_ref().map(Subscription::try_from).transpose()
}

/// The row holding the provider subscription `provider_id`, locked.
pub async fn lock_by_provider_id(
    db: &impl GenericClient,
    provider_id: &str,
) -> Result<Option<Subscription>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM subscriptions
                 WHERE provider_subscription_id = $1 FOR UPDATE"
            ),
            &[&provider_id],
        )
        .await?;
    row.as_ref().map(Subscription::try_from).transpose()
}

/// What the provider says a subscription is now.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub subscription_id: String,
    pub customer_id: Option<String>,
    pub status: SubscriptionStatus,
    /// The tier its price stands for, when the price is one of ours.
    pub tier_slug: Option<String>,
    pub price_id: Option<String>,
    pub item_id: Option<String>,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    pub cancel_at_period_end: bool,
    /// The user named in the subscription's metadata (set at checkout).
    pub user_id: Option<Uuid>,
}

/// Whether a change dated `at` for provider subscription `subscription_id`
/// (ending it when `ends`) may be applied over `existing`, the user's row.
///
/// Events arrive out of order: a change older than what the row holds is
/// stale, and news about an older subscription never overrides a newer live
/// one (a late `deleted` of a replaced subscription must not cancel the
/// current one).
pub fn is_newer(
    existing: Option<&Subscription>,
    subscription_id: &str,
    ends: bool,
    at: DateTime<Utc>,
) -> bool {
    let Some(row) = existing else {
        return true;
    };
    let newer_than_row = row.provider_updated_at.is_none_or(|t| t <= at);
    if row.provider_subscription_id.as_deref() == Some(subscription_id) {
        return newer_than_row;
    }
    if row.status == SubscriptionStatus::Canceled {
        // The row's subscription is over: any other one may take its place.
        return !ends || newer_than_row;
    }
    !ends && newer_than_row
}

/// Writes `snap` as the user's subscription, dated `at` (the provider's
/// time of the change), and sets the user's tier: the subscription's tier
/// while it runs, `demo` once it has ended. Admin-tier users keep their tier.
/// The caller has checked [`is_newer`] under [`lock`].
pub async fn apply_snapshot(
    db: &impl GenericClient,
    user_id: Uuid,
    tier_slug: &str,
    snap: &Snapshot,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    db.execute(
        "INSERT INTO subscriptions (user_id, tier_slug, status, current_period_start,
             current_period_end, cancel_at_period_end, provider_customer_id,
             provider_subscription_id, provider_item_id, provider_price_id, provider_updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (user_id) DO UPDATE SET
             tier_slug = EXCLUDED.tier_slug, status = EXCLUDED.status,
             current_period_start = EXCLUDED.current_period_start,
             current_period_end = EXCLUDED.current_period_end,
             cancel_at_period_end = EXCLUDED.cancel_at_period_end,
             provider_customer_id = COALESCE(EXCLUDED.provider_customer_id,
                                             subscriptions.provider_customer_id),
             provider_subscription_id = EXCLUDED.provider_subscription_id,
             provider_item_id = EXCLUDED.provider_item_id,
             provider_price_id = EXCLUDED.provider_price_id,
             provider_updated_at = EXCLUDED.provider_updated_at,
             updated_at = now()",
        &[
            &user_id,
            &tier_slug,
            &snap.status,
            &snap.current_period_start,
            &snap.current_period_end,
            &snap.cancel_at_period_end,
            &snap.customer_id,
            &snap.subscription_id,
            &snap.item_id,
            &snap.price_id,
            &at,
        ],
    )
    .await?;
    let effective = if snap.status == SubscriptionStatus::Canceled {
        "demo"
    } else {
        tier_slug
    };
    set_user_tier(db, user_id, effective).await?;
    // A snapshot can describe a cancelled subscription whose period is over.
    settle_lapsed(db, user_id).await?;
    Ok(())
}

/// A completed checkout, before the provider's subscription itself has been
/// seen: the tier starts now, for one billing interval, and the first
/// snapshot of the subscription replaces these provisional values.
pub struct CheckoutCompletion<'a> {
    pub user_id: Uuid,
    pub tier_slug: &'a str,
    pub customer_id: Option<&'a str>,
    pub subscription_id: &'a str,
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
}

pub async fn apply_checkout(
    db: &impl GenericClient,
    done: &CheckoutCompletion<'_>,
) -> Result<(), Error> {
    db.execute(
        "INSERT INTO subscriptions (user_id, tier_slug, status, current_period_start,
             current_period_end, cancel_at_period_end, provider_customer_id,
             provider_subscription_id, provider_item_id, provider_price_id, provider_updated_at)
         VALUES ($1, $2, 'active', $3, $4, false, $5, $6, NULL, NULL, NULL)
         ON CONFLICT (user_id) DO UPDATE SET
             tier_slug = EXCLUDED.tier_slug, status = 'active',
             current_period_start = EXCLUDED.current_period_start,
             current_period_end = EXCLUDED.current_period_end,
             cancel_at_period_end = false,
             provider_customer_id = EXCLUDED.provider_customer_id,
             provider_subscription_id = EXCLUDED.provider_subscription_id,
             provider_item_id = NULL, provider_price_id = NULL,
             provider_updated_at = NULL, updated_at = now()",
        &[
            &done.user_id,
            &done.tier_slug,
            &done.period_start,
            &done.period_end,
            &done.customer_id,
            &done.subscription_id,
        ],
    )
    .await?;
    set_user_tier(db, done.user_id, done.tier_slug).await
}

/// A failed renewal payment dated `at`: the subscription is `past_due` (the
/// tier stays while the provider retries; its final word is a `deleted`).
pub async fn mark_past_due(
    db: &impl GenericClient,
    user_id: Uuid,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    db.execute(
        "UPDATE subscriptions SET status = 'past_due', provider_updated_at = $2, updated_at = now()
         WHERE user_id = $1 AND status <> 'canceled'",
        &[&user_id, &at],
    )
    .await?;
    Ok(())
}

/// Sets the user's tier, except for users on the admin tier.
async fn set_user_tier(
    db: &impl GenericClient,
    user_id: Uuid,
    tier_slug: &str,
) -> Result<(), Error> {
    db.execute(
        "UPDATE users SET tier_slug = $2, updated_at = now()
         WHERE id = $1 AND tier_slug <> 'admin' AND tier_slug <> $2",
        &[&user_id, &tier_slug],
    )
    .await?;
    Ok(())
}

/// Returns the user to `demo` when their subscription was cancelled at
/// period end and that end has passed; true when it did.
///
/// The provider ends such a subscription itself (its `deleted` event does
/// the same), but this does not wait for the event: it runs lazily, when the
/// user authenticates and before a scan is counted (scheduled ones too), so
/// no paid feature outlives the paid period by a request.
pub async fn settle_lapsed(db: &impl GenericClient, user_id: Uuid) -> Result<bool, Error> {
    Ok(db.query_opt(SETTLE_LAPSED, &[&user_id]).await?.is_some())
}

/// [`settle_lapsed`]'s statement (the start of every scan prepares it once
/// a connection).
pub(crate) const SETTLE_LAPSED: &str = "WITH lapsed AS (
         UPDATE subscriptions SET status = 'canceled', updated_at = now()
         WHERE user_id = $1 AND cancel_at_period_end AND status <> 'canceled'
               AND current_period_end <= now()
         RETURNING user_id)
     UPDATE users u SET tier_slug = 'demo', updated_at = now()
     FROM lapsed WHERE u.id = lapsed.user_id AND u.tier_slug <> 'admin'
     RETURNING u.id";

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
    counts_in_billing_period(
        tier_slug,
        sub.current_period_start,
        sub.current_period_end,
        now,
    )
}

fn counts_in_billing_period(
    tier_slug: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    now: DateTime<Utc>,
) -> bool {
    tier_slug != "demo" && start <= now && now < end
}

/// [`current_period`]'s rule on what was read: `billing` is the user's
/// subscription row's period `[start, end)`, when there is a row.
pub fn period_of(
    tier_slug: &str,
    billing: Option<(DateTime<Utc>, DateTime<Utc>)>,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, DateTime<Utc>) {
    match billing {
        Some((start, end)) if counts_in_billing_period(tier_slug, start, end, now) => (start, end),
        _ => calendar_month(now),
    }
}

/// The period in which a user's scans are counted, `[start, end)`: the
/// subscription's current billing period for paid tiers when there is one
/// covering now, else the calendar month (UTC). `scan_usage.period_start`
/// is the `start` of this period. Scan creation and the usage report both
/// use this one rule.
pub async fn current_period(
    db: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    tier_slug: &str,
) -> Result<(DateTime<Utc>, DateTime<Utc>), Error> {
    let billing = find(db, user_id)
        .await?
        .map(|sub| (sub.current_period_start, sub.current_period_end));
    Ok(period_of(tier_slug, billing, Utc::now()))
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
    Ok(row
        .map(|r| r.try_get::<_, i32>("scans"))
        .transpose()?
        .map(i64::from)
        .unwrap_or(0))
}

pub async fn targets_used(db: &impl GenericClient, user_id: Uuid) -> Result<i64, Error> {
    Ok(db
        .query_one(
            "SELECT count(*) AS targets FROM targets WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .try_get("targets")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Subscription {
        Subscription {
            user_id: Uuid::nil(),
            tier_slug: "monthly".into(),
            status: SubscriptionStatus::Active,
            current_period_start: Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap(),
            current_period_end: Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap(),
            cancel_at_period_end: false,
            provider_customer_id: Some("cus_1".into()),
            provider_subscription_id: Some("sub_1".into()),
            provider_item_id: Some("si_1".into()),
            provider_price_id: Some("price_m".into()),
            provider_updated_at: Some(Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 10).unwrap()),
        }
    }

    fn at(secs: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, secs).unwrap()
    }

    #[test]
    fn a_change_is_applied_unless_the_row_holds_a_newer_one_of_the_same_subscription() {
        assert!(is_newer(None, "sub_1", false, at(0)));
        assert!(is_newer(Some(&row()), "sub_1", false, at(11)));
        // Same second: both apply (event ids, not times, stop replays).
        assert!(is_newer(Some(&row()), "sub_1", true, at(10)));
        assert!(!is_newer(Some(&row()), "sub_1", false, at(9)));
        let provisional = Subscription {
            provider_updated_at: None,
            ..row()
        };
        assert!(is_newer(Some(&provisional), "sub_1", false, at(0)));
    }

    #[test]
    fn the_end_of_an_older_subscription_never_cancels_a_live_newer_one() {
        assert!(!is_newer(Some(&row()), "sub_old", true, at(50)));
        assert!(!is_newer(Some(&row()), "sub_old", false, at(5)));
        assert!(is_newer(Some(&row()), "sub_new", false, at(50)));
        let ended = Subscription {
            status: SubscriptionStatus::Canceled,
            ..row()
        };
        assert!(is_newer(Some(&ended), "sub_new", false, at(5)));
        assert!(!is_newer(Some(&ended), "sub_old", true, at(5)));
    }

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
            user_id: Uuid::nil(),
            tier_slug: "monthly".into(),
            status: SubscriptionStatus::Active,
            current_period_start: Utc.with_ymd_and_hms(2026, 11, 10, 0, 0, 0).unwrap(),
            current_period_end: Utc.with_ymd_and_hms(2026, 12, 10, 0, 0, 0).unwrap(),
            cancel_at_period_end: false,
            ..row()
        };
        assert!(uses_billing_period("monthly", &sub, now));
        assert!(!uses_billing_period("demo", &sub, now));
        let later = Utc.with_ymd_and_hms(2026, 12, 11, 0, 0, 0).unwrap();
        assert!(!uses_billing_period("monthly", &sub, later));
    }
}
