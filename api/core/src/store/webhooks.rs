//! Outbound webhooks: endpoints, their signing secrets, the outbox of events,
//! one delivery per (event, webhook) and the log of every attempt. SQL and
//! typed rows only: what goes into the outbox when is decided by
//! [`crate::outbox`], and the api's dispatcher sends it.
//!
//! An event is only written when at least one enabled webhook of its owner
//! wants it, and its deliveries are created by the same statement, so the
//! outbox never holds events nobody will send.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use scanfleet_common::sql::severity_rank;
use scanfleet_common::Severity;
use serde_json::{json, Value};
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

use super::Page;
use crate::error::Error;

/// The channel notified (on commit) whenever deliveries become due, so
/// idle dispatchers wake at once instead of at their next poll.
pub const NOTIFY_CHANNEL: &str = "scanfleet_webhooks";

#[derive(Debug, Clone)]
pub struct Webhook {
    pub id: Uuid,
    pub user_id: Uuid,
    pub url: String,
    /// `generic` or `slack`.
    pub kind: String,
    pub events: Vec<String>,
    pub min_severity: Severity,
    pub description: String,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str =
    "id, user_id, url, kind, events, min_severity, description, enabled, created_at, updated_at";

fn webhook_from_row(r: &Row) -> Result<Webhook, Error> {
    Ok(Webhook {
        id: r.try_get("id")?,
        user_id: r.try_get("user_id")?,
        url: r.try_get("url")?,
        kind: r.try_get("kind")?,
        events: r.try_get("events")?,
        min_severity: r.try_get("min_severity")?,
        description: r.try_get("description")?,
        enabled: r.try_get("enabled")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// The values of a webhook as created or after a change (the caller merges
/// a partial change into the current values).
#[derive(Debug, Clone)]
pub struct WebhookValues<'a> {
    pub url: &'a str,
    pub kind: &'a str,
    pub events: &'a [String],
    pub min_severity: Severity,
    pub description: &'a str,
    pub enabled: bool,
}

/// Inserts a webhook with its first signing secret, in one statement.
pub async fn create(
    db: &impl GenericClient,
    user_id: Uuid,
    values: &WebhookValues<'_>,
    secret: &str,
) -> Result<Webhook, Error> {
    let row = db
        .query_one(
            &format!(
                "WITH hook AS (
                     INSERT INTO webhooks (id, user_id, url, kind, events, min_severity,
                                           description, enabled)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLUMNS}
                 ), secret AS (
                     INSERT INTO webhook_secrets (id, webhook_id, secret)
                     SELECT $9, id, $10 FROM hook
                 )
                 SELECT {COLUMNS} FROM hook"
            ),
            &[
                &Uuid::now_v7(),
                &user_id,
                &values.url,
                &values.kind,
                &values.events,
                &values.min_severity,
                &values.description,
                &values.enabled,
                &Uuid::now_v7(),
                &secret,
            ],
        )
        .await?;
    webhook_from_row(&row)
}

/// The user's webhooks, newest first, with the total.
pub async fn list(
    db: &impl GenericClient,
    user_id: Uuid,
    page: Page,
) -> Result<(Vec<Webhook>, i64), Error> {
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM webhooks WHERE user_id = $1
                 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3"
            ),
            &[&user_id, &page.limit, &page.offset],
        )
        .await?;
    let total: i64 = db
        .query_one(
            "SELECT count(*) AS total FROM webhooks WHERE user_id = $1",
            &[&user_id],
        )
        .await?
        .try_get("total")?;
    let hooks = rows
        .iter()
        .map(webhook_from_row)
        .collect::<Result<_, _>>()?;
    Ok((hooks, total))
}

/// One of the user's webhooks; `None` when missing or someone else's.
pub async fn find(
    db: &impl GenericClient,
    user_id: Uuid,
    id: Uuid,
) -> Result<Option<Webhook>, Error> {
    let row = db
        .query_opt(
            &format!("SELECT {COLUMNS} FROM webhooks WHERE id = $1 AND user_id = $2"),
            &[&id, &user_id],
        )
        .await?;
    row.as_ref().map(webhook_from_row).transpose()
}

/// Replaces the changeable values; enabling again forgets the failures
/// that disabled it. `None` when missing or someone else's.
pub async fn update(
    db: &impl GenericClient,
    user_id: Uuid,
    id: Uuid,
    values: &WebhookValues<'_>,
) -> Result<Option<Webhook>, Error> {
    let row = db
        .query_opt(
            &format!(
                "UPDATE webhooks SET url = $3, events = $4, min_severity = $5, description = $6,
                        failing_since = CASE WHEN $7 AND NOT enabled THEN NULL ELSE failing_since END,
                        enabled = $7, updated_at = now()
                 WHERE id = $1 AND user_id = $2 RETURNING {COLUMNS}"
            ),
            &[
                &id,
                &user_id,
                &values.url,
                &values.events,
                &values.min_severity,
                &values.description,
                &values.enabled,
            ],
        )
        .await?;
    row.as_ref().map(webhook_from_row).transpose()
}

/// Deletes the user's webhook with its deliveries and log; false when it
/// is missing or someone else's.
pub async fn delete(db: &impl GenericClient, user_id: Uuid, id: Uuid) -> Result<bool, Error> {
    let n = db
        .execute(
            "DELETE FROM webhooks WHERE id = $1 AND user_id = $2",
            &[&id, &user_id],
        )
        .await?;
    Ok(n == 1)
}

/// Makes `secret` the webhook's current secret; the secrets that were
/// current keep signing until `old_until`. False when the webhook is
/// missing or someone else's.
pub async fn rotate_secret(
    db: &impl GenericClient,
    user_id: Uuid,
    id: Uuid,
    secret: &str,
    old_until: DateTime<Utc>,
) -> Result<bool, Error> {
    let row = db
        .query_one(
            "WITH hook AS (
                 SELECT id FROM webhooks WHERE id = $1 AND user_id = $2
             ), expired AS (
                 UPDATE webhook_secrets SET expires_at = $4
                 WHERE webhook_id IN (SELECT id FROM hook) AND expires_at IS NULL
             ), added AS (
                 INSERT INTO webhook_secrets (id, webhook_id, secret)
                 SELECT $3, id, $5 FROM hook RETURNING id
             )
             SELECT count(*) AS n FROM added",
            &[&id, &user_id, &Uuid::now_v7(), &old_until, &secret],
        )
        .await?;
    let n: i64 = row.try_get("n")?;
    Ok(n == 1)
}

/// The secrets that sign now: the current one first, then those of the
/// last rotation still within their overlap.
pub async fn signing_secrets(
    db: &impl GenericClient,
    webhook_id: Uuid,
) -> Result<Vec<String>, Error> {
    let rows = db
        .query(
            "SELECT secret FROM webhook_secrets
             WHERE webhook_id = $1 AND (expires_at IS NULL OR expires_at > now())
             ORDER BY expires_at DESC NULLS FIRST, created_at DESC",
            &[&webhook_id],
        )
        .await?;
    rows.iter()
        .map(|r| r.try_get("secret").map_err(Error::from))
        .collect()
}

/// An event for the outbox.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub user_id: Uuid,
    /// `scan.completed`, `ping`, ...
    pub kind: &'a str,
    /// What it reports (ids); the body is rendered from it when sent.
    pub data: Value,
    /// For finding events: webhooks whose `min_severity` is above it skip it.
    pub severity: Option<Severity>,
    /// Only this webhook, whatever its event list (a `ping`).
    pub only_webhook: Option<Uuid>,
}

/// Writes an event and its deliveries to every enabled webhook of the user
/// that wants it; nothing when none does. Returns the deliveries created.
pub async fn record_event(
    db: &impl deadpool_postgres::GenericClient,
    event: &NewEvent<'_>,
) -> Result<i64, Error> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH wanted AS (
                 SELECT w.id FROM webhooks w
                 WHERE w.user_id = $1 AND w.enabled
                   AND (($5::uuid IS NULL AND $2 = ANY (w.events)) OR w.id = $5)
                   AND ($4::text IS NULL OR {event} <= {wanted})
             ), event AS (
                 INSERT INTO webhook_events (id, user_id, type, data)
                 SELECT $6, $1, $2, $3 WHERE EXISTS (SELECT 1 FROM wanted)
                 RETURNING id
             ), created AS (
                 INSERT INTO webhook_deliveries (webhook_id, event_id)
                 SELECT wanted.id, event.id FROM event CROSS JOIN wanted
                 RETURNING id
             )
             SELECT count(*) AS n FROM created",
            event = severity_rank("$4::text"),
            wanted = severity_rank("w.min_severity"),
        )
    });
    let row = db
        .query_one(
            &db.prepare_cached(&SQL).await?,
            &[
                &event.user_id,
                &event.kind,
                &event.data,
                &event.severity,
                &event.only_webhook,
                &Uuid::now_v7(),
            ],
        )
        .await?;
    let created: i64 = row.try_get("n")?;
    wake_dispatchers(db, created).await?;
    Ok(created)
}

/// `finding.new` for every fingerprint this scan saw for the first time,
/// and `finding.regressed` for every one it found again after it was
/// fixed, at or above each webhook's `min_severity`: one event per
/// fingerprint (a scan can hold two spellings of one). Returns the
/// deliveries created.
pub async fn record_new_findings_of_scan(
    db: &impl deadpool_postgres::GenericClient,
    scan_id: Uuid,
) -> Result<i64, Error> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "WITH changed AS (
                 SELECT DISTINCT ON (COALESCE(f.fingerprint_id, f.id)) f.id, f.user_id, f.scan_id, f.severity,
                        f.created_at,
                        CASE f.change WHEN 'regressed' THEN 'finding.regressed'
                                      ELSE 'finding.new' END AS type
                 FROM findings f
                 WHERE f.scan_id = $1 AND f.change IN ('new', 'regressed')
                 ORDER BY COALESCE(f.fingerprint_id, f.id), f.created_at, f.id
             ), event AS (
                 INSERT INTO webhook_events (user_id, type, data)
                 SELECT c.user_id, c.type,
                        jsonb_build_object('scan_id', c.scan_id, 'finding_id', c.id,
                                           'severity', c.severity)
                 FROM changed c
                 WHERE EXISTS (
                     SELECT 1 FROM webhooks w
                     WHERE w.user_id = c.user_id AND w.enabled AND c.type = ANY (w.events)
                       AND {found} <= {wanted})
                 ORDER BY c.created_at, c.id
                 RETURNING id, user_id, type, data->>'severity' AS severity
             ), created AS (
                 INSERT INTO webhook_deliveries (webhook_id, event_id)
                 SELECT w.id, event.id FROM event JOIN webhooks w
                   ON w.user_id = event.user_id AND w.enabled AND event.type = ANY (w.events)
                  AND {sent} <= {wanted}
                 RETURNING id
             )
             SELECT count(*) AS n FROM created",
            found = severity_rank("c.severity"),
            sent = severity_rank("event.severity"),
            wanted = severity_rank("w.min_severity"),
        )
    });
    let row = db
        .query_one(&db.prepare_cached(&SQL).await?, &[&scan_id])
        .await?;
    let created: i64 = row.try_get("n")?;
    wake_dispatchers(db, created).await?;
    Ok(created)
}

/// `NOTIFY` is delivered on commit, and not at all on a rollback.
async fn wake_dispatchers(
    db: &impl deadpool_postgres::GenericClient,
    created: i64,
) -> Result<(), Error> {
    if created > 0 {
        db.execute(
            &db.prepare_cached("SELECT pg_notify($1, '')").await?,
            &[&NOTIFY_CHANNEL],
        )
        .await?;
    }
    Ok(())
}

/// A delivery a dispatcher holds under lease, with what it needs to send.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery_id: Uuid,
    pub webhook_id: Uuid,
    pub user_id: Uuid,
    pub event_id: Uuid,
    /// The `webhook-id` header: the same on every attempt.
    pub message_id: String,
    /// This attempt's number, from 1.
    pub attempt: i32,
    pub url: String,
    pub kind: String,
    pub enabled: bool,
    pub event_type: String,
    pub event_data: Value,
    /// The body as first rendered, when an earlier attempt rendered it.
    pub body: Option<String>,
    pub event_created_at: DateTime<Utc>,
}

fn claimed_from_row(r: &Row) -> Result<Claimed, Error> {
    Ok(Claimed {
        delivery_id: r.try_get("delivery_id")?,
        webhook_id: r.try_get("webhook_id")?,
        user_id: r.try_get("user_id")?,
        event_id: r.try_get("event_id")?,
        message_id: r.try_get("message_id")?,
        attempt: r.try_get("attempt")?,
        url: r.try_get("url")?,
        kind: r.try_get("kind")?,
        enabled: r.try_get("enabled")?,
        event_type: r.try_get("event_type")?,
        event_data: r.try_get("data")?,
        body: r.try_get("body")?,
        event_created_at: r.try_get("created_at")?,
    })
}

/// Takes up to `limit` due deliveries for `lease_secs`: rows other
/// dispatchers are taking are skipped (`SKIP LOCKED`), and a delivery whose
/// dispatcher died is taken again once its lease has passed.
pub async fn claim_due(
    db: &impl GenericClient,
    limit: i64,
    lease_secs: f64,
) -> Result<Vec<Claimed>, Error> {
    let rows = db
        .query(
            "WITH due AS (
                 SELECT id FROM webhook_deliveries
                 WHERE state = 'pending' AND next_attempt_at <= now()
                   AND (lease_until IS NULL OR lease_until < now())
                 ORDER BY next_attempt_at LIMIT $1
                 FOR UPDATE SKIP LOCKED
             )
             UPDATE webhook_deliveries d
             SET lease_until = now() + make_interval(secs => $2), attempts = d.attempts + 1
             FROM due, webhooks w, webhook_events e
             WHERE d.id = due.id AND w.id = d.webhook_id AND e.id = d.event_id
             RETURNING d.id AS delivery_id, d.webhook_id, w.user_id, d.event_id, d.message_id,
                       d.attempts AS attempt, w.url, w.kind, w.enabled, e.type AS event_type,
                       e.data, e.body, e.created_at",
            &[&limit, &lease_secs],
        )
        .await?;
    rows.iter().map(claimed_from_row).collect()
}

/// Keeps the first rendering of an event's body and returns the one kept.
pub async fn save_body(
    db: &impl GenericClient,
    event_id: Uuid,
    body: &str,
) -> Result<String, Error> {
    let row = db
        .query_one(
            "UPDATE webhook_events SET body = COALESCE(body, $2) WHERE id = $1 RETURNING body",
            &[&event_id, &body],
        )
        .await?;
    Ok(row.try_get("body")?)
}

/// One attempt, as the log keeps it.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub delivery_id: Uuid,
    pub webhook_id: Uuid,
    pub attempt: i32,
    pub status_code: Option<i32>,
    pub duration_ms: i32,
    pub error: Option<String>,
    pub response_body: Option<String>,
}

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Delivered,
    RetryAt(DateTime<Utc>),
    /// No attempt is left (or the webhook was disabled or deleted).
    GaveUp,
}

/// Logs an attempt and moves the delivery on; the webhook's failure streak
/// starts or ends with it.
pub async fn record_attempt(
    db: &impl GenericClient,
    attempt: &AttemptRecord,
    outcome: Outcome,
) -> Result<(), Error> {
    let (state, next, delivered) = match outcome {
        Outcome::Delivered => ("delivered", None, Some(Utc::now())),
        Outcome::RetryAt(at) => ("pending", Some(at), None),
        Outcome::GaveUp => ("failed", None, None),
    };
    db.execute(
        "INSERT INTO webhook_attempts (id, delivery_id, webhook_id, attempt, status_code,
                                       duration_ms, error, response_body, next_attempt_at,
                                       delivered_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[
            &Uuid::now_v7(),
            &attempt.delivery_id,
            &attempt.webhook_id,
            &attempt.attempt,
            &attempt.status_code,
            &attempt.duration_ms,
            &attempt.error,
            &attempt.response_body,
            &next,
            &delivered,
        ],
    )
    .await?;
    db.execute(
        "UPDATE webhook_deliveries SET state = $2, next_attempt_at = COALESCE($3, next_attempt_at),
                lease_until = NULL, delivered_at = $4
         WHERE id = $1",
        &[&attempt.delivery_id, &state, &next, &delivered],
    )
    .await?;
    db.execute(
        "UPDATE webhooks SET failing_since =
             CASE WHEN $2 THEN NULL ELSE COALESCE(failing_since, now()) END
         WHERE id = $1",
        &[&attempt.webhook_id, &delivered.is_some()],
    )
    .await?;
    Ok(())
}

/// Disables the webhook when every attempt has failed for `window_secs`,
/// and tells its owner with a `webhook_disabled` notification. True when
/// this call disabled it.
pub async fn disable_if_failing(
    db: &impl GenericClient,
    webhook_id: Uuid,
    window_secs: f64,
) -> Result<bool, Error> {
    let Some(row) = db
        .query_opt(
            "UPDATE webhooks SET enabled = false, updated_at = now()
             WHERE id = $1 AND enabled
               AND failing_since <= now() - make_interval(secs => $2)
             RETURNING user_id, url",
            &[&webhook_id, &window_secs],
        )
        .await?
    else {
        return Ok(false);
    };
    let user_id: Uuid = row.try_get("user_id")?;
    let url: String = row.try_get("url")?;
    let reason = format!("every delivery to {url} failed for the whole retry window");
    db.execute(
        "INSERT INTO notifications (id, user_id, type, title, message, data)
         VALUES ($1, $2, 'webhook_disabled', 'Webhook disabled', $3, $4)",
        &[
            &Uuid::now_v7(),
            &user_id,
            &format!(
                "The webhook to {url} was disabled: {reason}. Enable it again once it answers."
            ),
            &json!({ "reason": reason, "webhook_id": webhook_id }),
        ],
    )
    .await?;
    Ok(true)
}

/// One line of a webhook's delivery log.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: Uuid,
    pub delivery_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub message_id: String,
    pub attempt: i32,
    pub status_code: Option<i32>,
    pub duration_ms: i32,
    pub error: Option<String>,
    pub response_body: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub attempted_at: DateTime<Utc>,
}

fn attempt_from_row(r: &Row) -> Result<Attempt, Error> {
    Ok(Attempt {
        id: r.try_get("id")?,
        delivery_id: r.try_get("delivery_id")?,
        event_id: r.try_get("event_id")?,
        event_type: r.try_get("event_type")?,
        message_id: r.try_get("message_id")?,
        attempt: r.try_get("attempt")?,
        status_code: r.try_get("status_code")?,
        duration_ms: r.try_get("duration_ms")?,
        error: r.try_get("error")?,
        response_body: r.try_get("response_body")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        delivered_at: r.try_get("delivered_at")?,
        attempted_at: r.try_get("attempted_at")?,
    })
}

/// The webhook's attempts, newest first, with the total. The caller has
/// checked that the webhook is the user's.
pub async fn list_attempts(
    db: &impl GenericClient,
    webhook_id: Uuid,
    page: Page,
) -> Result<(Vec<Attempt>, i64), Error> {
    let rows = db
        .query(
            "SELECT a.id, a.delivery_id, d.event_id, e.type AS event_type, d.message_id,
                    a.attempt, a.status_code, a.duration_ms, a.error, a.response_body,
                    a.next_attempt_at, a.delivered_at, a.attempted_at
             FROM webhook_attempts a
             JOIN webhook_deliveries d ON d.id = a.delivery_id
             JOIN webhook_events e ON e.id = d.event_id
             WHERE a.webhook_id = $1
             ORDER BY a.attempted_at DESC, a.id DESC LIMIT $2 OFFSET $3",
            &[&webhook_id, &page.limit, &page.offset],
        )
        .await?;
    let total: i64 = db
        .query_one(
            "SELECT count(*) AS total FROM webhook_attempts WHERE webhook_id = $1",
            &[&webhook_id],
        )
        .await?
        .try_get("total")?;
    let attempts = rows
        .iter()
        .map(attempt_from_row)
        .collect::<Result<_, _>>()?;
    Ok((attempts, total))
}

/// Puts a delivery of the webhook back in the queue, due now, with the same
/// `webhook-id`; false when the webhook has no such delivery.
pub async fn redeliver(
    db: &impl deadpool_postgres::GenericClient,
    webhook_id: Uuid,
    delivery_id: Uuid,
) -> Result<bool, Error> {
    let n = db
        .execute(
            "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = now(),
                    lease_until = NULL
             WHERE id = $1 AND webhook_id = $2",
            &[&delivery_id, &webhook_id],
        )
        .await?;
    wake_dispatchers(db, n as i64).await?;
    Ok(n == 1)
}

/// The outbox's backlog: deliveries waiting, and how long the oldest due
/// one has waited, in seconds.
pub async fn queue_stats(db: &impl GenericClient) -> Result<(i64, f64), Error> {
    let row = db
        .query_one(
            "SELECT count(*) AS pending,
                    COALESCE(EXTRACT(EPOCH FROM now() - min(next_attempt_at))
                             FILTER (WHERE next_attempt_at <= now()), 0)::float8 AS oldest
             FROM webhook_deliveries WHERE state = 'pending'",
            &[],
        )
        .await?;
    Ok((row.try_get("pending")?, row.try_get("oldest")?))
}

/// One of the user's findings, for an event's body.
pub async fn finding(
    db: &impl GenericClient,
    user_id: Uuid,
    finding_id: Uuid,
) -> Result<Option<super::findings::FindingRow>, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT {} FROM {} WHERE f.id = $1 AND f.user_id = $2",
                super::findings::COLUMNS,
                super::findings::FROM
            ),
            &[&finding_id, &user_id],
        )
        .await?;
    row.as_ref()
        .map(super::findings::FindingRow::try_from)
        .transpose()
}
