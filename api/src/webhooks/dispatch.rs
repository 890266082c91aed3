//! The dispatcher: a task in every api process that sends due deliveries.
//!
//! Deliveries are claimed with `FOR UPDATE SKIP LOCKED` under a lease, so
//! several api processes share the work without sending one twice, and a
//! delivery whose process died is taken again when its lease has passed:
//! delivery is at least once, and the receiver deduplicates by
//! `webhook-id`. Neither concurrency 1 per endpoint nor order per endpoint
//! is promised. A 2xx within the timeout is success; otherwise the next
//! attempt follows [`RETRY_DELAYS_SECS`] (times the retry scale), and an
//! endpoint that has failed every attempt for [`DISABLE_AFTER_SECS`] (also
//! scaled) is disabled and its owner notified.
//!
//! Idle dispatchers wake on the outbox's `NOTIFY` (sent on commit), with a
//! poll as the fallback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use scanfleet_common::settings::WebhookSettings;
use scanfleet_core::store::webhooks::{self, AttemptRecord, Claimed, Outcome};
use scanfleet_core::store::Db;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::guard::Guard;
use super::{render, sign};
use crate::error::Error;

/// Delays before the 2nd to 8th attempts: 5 s, 5 min, 30 min, 2 h, 5 h,
/// 10 h, 10 h.
pub const RETRY_DELAYS_SECS: [u64; 7] = [5, 300, 1800, 7200, 18000, 36000, 36000];
/// An endpoint failing every attempt this long is disabled (5 days).
pub const DISABLE_AFTER_SECS: f64 = 5.0 * 86400.0;
/// Response bytes kept in the log.
pub const RESPONSE_BODY_CAP: usize = 64 * 1024;
/// Deliveries one dispatcher claims at once (and sends concurrently).
const BATCH: i64 = 32;
/// The lease beyond the timeout: time to record the outcome.
const LEASE_MARGIN_SECS: u64 = 30;
/// Slack takes about one message a second per incoming webhook.
const SLACK_SPACING: Duration = Duration::from_secs(1);

/// The delay after failed attempt number `attempt` (from 1), scaled; `None`
/// when no attempt is left.
pub fn retry_delay(attempt: i32, scale: f64) -> Option<Duration> {
    let index = usize::try_from(attempt).ok()?.checked_sub(1)?;
    let secs = *RETRY_DELAYS_SECS.get(index)?;
    Some(Duration::from_secs_f64(secs as f64 * scale))
}

/// What one attempt gave.
#[derive(Debug, Default)]
struct Sent {
    status: Option<u16>,
    error: Option<String>,
    body: Option<String>,
    retry_after: Option<Duration>,
}

/// Shared by the process's dispatcher tasks.
pub struct Dispatcher {
    pub db: Db,
    pub guard: Guard,
    pub settings: WebhookSettings,
    /// The API's base URL (`.../api/v1`), for links in Slack messages.
    pub api_url: String,
    /// The next free send time per Slack webhook, in this process.
    slack_slots: Mutex<HashMap<Uuid, Instant>>,
    /// HTTP clients by host and the addresses checked for it: each client
    /// resolves that host to exactly those addresses, so a client is only
    /// reused while a fresh check gives the same answer. Cleared when it
    /// reaches [`MAX_CLIENTS`].
    clients: Mutex<HashMap<(String, Vec<SocketAddr>), reqwest::Client>>,
}

/// HTTP clients kept at most (each holds its pooled connections).
const MAX_CLIENTS: usize = 1024;

impl Dispatcher {
    pub fn new(db: Db, guard: Guard, settings: WebhookSettings, api_url: String) -> Dispatcher {
        Dispatcher {
            db,
            guard,
            settings,
            api_url,
            slack_slots: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Claims and sends until `shutdown`; `wake` is notified when the outbox
    /// commits new deliveries.
    pub async fn run(self: Arc<Self>, wake: Arc<Notify>, shutdown: CancellationToken) {
        let poll = Duration::from_millis(self.settings.poll_interval_ms);
        while !shutdown.is_cancelled() {
            // Registered before claiming, so a commit during the claim wakes us.
            let woken = wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            match self.claim().await {
                Ok(batch) if !batch.is_empty() => {
                    let sends = batch.into_iter().map(|c| self.deliver(c));
                    tokio::select! {
                        _ = futures::future::join_all(sends) => {}
                        _ = shutdown.cancelled() => break,
                    }
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "webhooks: cannot claim"),
            }
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(poll) => {}
                _ = shutdown.cancelled() => break,
            }
        }
    }

    async fn claim(&self) -> Result<Vec<Claimed>, Error> {
        let db = self.db.get().await?;
        let lease = (self.settings.timeout_secs + LEASE_MARGIN_SECS) as f64;
        webhooks::claim_due(&**db, BATCH, lease).await
    }

    /// One attempt and its record; errors are logged (the lease expires
    /// and the delivery is tried again).
    #[tracing::instrument(skip_all, fields(delivery_id = %c.delivery_id, attempt = c.attempt))]
    async fn deliver(&self, c: Claimed) {
        let started = Instant::now();
        let sent = match self.attempt(&c).await {
            Ok(sent) => sent,
            Err(e) => Sent {
                error: Some(format!("{e:#}")),
                ..Sent::default()
            },
        };
        let elapsed = started.elapsed();
        if let Err(e) = self.record(&c, sent, elapsed).await {
            tracing::warn!(error = %format!("{e:#}"), "webhooks: cannot record an attempt");
        }
    }

    async fn record(&self, c: &Claimed, sent: Sent, elapsed: Duration) -> Result<(), Error> {
        let delivered = sent.status.is_some_and(|s| (200..300).contains(&s));
        let scale = self.settings.retry_scale;
        let outcome = if delivered {
            Outcome::Delivered
        } else if !c.enabled {
            Outcome::GaveUp
        } else {
            match retry_delay(c.attempt, scale) {
                Some(delay) => {
                    let delay = delay.max(sent.retry_after.unwrap_or_default());
                    Outcome::RetryAt(Utc::now() + delay)
                }
                None => Outcome::GaveUp,
            }
        };
        let record = AttemptRecord {
            delivery_id: c.delivery_id,
            webhook_id: c.webhook_id,
            attempt: c.attempt,
            status_code: sent.status.map(i32::from),
            duration_ms: i32::try_from(elapsed.as_millis()).unwrap_or(i32::MAX),
            error: sent.error,
            response_body: sent.body,
        };
        let mut db = self.db.get().await?;
        let tx = db.transaction().await?;
        webhooks::record_attempt(&*tx, &record, outcome).await?;
        let disabled = !delivered
            && webhooks::disable_if_failing(&*tx, c.webhook_id, DISABLE_AFTER_SECS * scale).await?;
        tx.commit().await?;
        let label = match outcome {
            Outcome::Delivered => "delivered",
            Outcome::RetryAt(_) => "retry",
            Outcome::GaveUp => "failed",
        };
        metrics::counter!("scanfleet_webhook_deliveries_total", "outcome" => label).increment(1);
        metrics::histogram!("scanfleet_webhook_attempt_duration_seconds")
            .record(elapsed.as_secs_f64());
        if delivered {
            let latency = (Utc::now() - c.event_created_at).num_milliseconds().max(0);
            metrics::histogram!("scanfleet_webhook_event_latency_seconds")
                .record(latency as f64 / 1000.0);
        }
        if disabled {
            metrics::counter!("scanfleet_webhook_disabled_total").increment(1);
            tracing::info!(webhook_id = %c.webhook_id, "webhook disabled after failing for the whole window");
        }
        Ok(())
    }

    /// Renders, checks the URL, signs and sends.
    async fn attempt(&self, c: &Claimed) -> Result<Sent, Error> {
        if !c.enabled {
            return Ok(Sent {
                error: Some("the webhook is disabled".into()),
                ..Sent::default()
            });
        }
        let slack = c.kind == "slack";
        let (body, secrets) = self.body_and_secrets(c, slack).await?;
        let checked = match self.guard.check(&c.url, slack).await {
            Ok(checked) => checked,
            Err(refused) => {
                return Ok(Sent {
                    error: Some(format!("refused: {refused}")),
                    ..Sent::default()
                })
            }
        };
        if slack {
            self.wait_for_slack_slot(c.webhook_id).await;
        }
        let timestamp = Utc::now().timestamp();
        let signature = sign::header(&secrets, &c.message_id, timestamp, body.as_bytes())
            .map_err(|e| Error::Unexpected(anyhow::Error::new(e)))?;
        let client = self.client_for(&checked.host, &checked.addrs)?;
        let request = client
            .post(checked.url)
            .header("content-type", "application/json")
            .header("user-agent", "scanfleet-webhooks/1")
            .header("webhook-id", &c.message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body);
        let exchange = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| Duration::from_secs(s.min(3600)));
            let body = read_capped(response).await;
            Ok::<Sent, reqwest::Error>(Sent {
                status: Some(status),
                error: None,
                body: Some(body),
                retry_after,
            })
        };
        let timeout = Duration::from_secs(self.settings.timeout_secs);
        Ok(match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(sent)) => sent,
            Ok(Err(e)) => Sent {
                error: Some(describe(&e)),
                ..Sent::default()
            },
            Err(_) => Sent {
                error: Some(format!("no answer within {} s", timeout.as_secs())),
                ..Sent::default()
            },
        })
    }

    /// The body to send (a generic one is rendered once and kept) and the
    /// secrets that sign it.
    async fn body_and_secrets(
        &self,
        c: &Claimed,
        slack: bool,
    ) -> Result<(String, Vec<String>), Error> {
        let db = self.db.get().await?;
        let body = if slack {
            render::slack_body(&db, c, &self.api_url).await?
        } else if let Some(body) = &c.body {
            body.clone()
        } else {
            let rendered = render::generic_body(&db, c).await?;
            webhooks::save_body(&**db, c.event_id, &rendered).await?
        };
        let secrets = webhooks::signing_secrets(&**db, c.webhook_id).await?;
        Ok((body, secrets))
    }

    /// A client that connects `host` to `addrs` only, never follows a
    /// redirect and ignores proxy settings.
    fn client_for(&self, host: &str, addrs: &[SocketAddr]) -> Result<reqwest::Client, Error> {
        let mut key_addrs = addrs.to_vec();
        key_addrs.sort();
        let key = (host.to_string(), key_addrs);
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(self.settings.timeout_secs))
            .resolve_to_addrs(host, addrs)
            .build()
            .map_err(|e| Error::Unexpected(anyhow::Error::new(e)))?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// Spaces this process's messages to one Slack webhook a second apart.
    async fn wait_for_slack_slot(&self, webhook_id: Uuid) {
        let slot = {
            let mut slots = self
                .slack_slots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = Instant::now();
            let slot = slots.get(&webhook_id).copied().unwrap_or(now).max(now);
            slots.insert(webhook_id, slot + SLACK_SPACING);
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// An error with its causes, for the log.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
        text.push_str(" (timed out)");
    }
    text
}

/// Up to [`RESPONSE_BODY_CAP`] bytes of the answer, as text.
async fn read_capped(mut response: reqwest::Response) -> String {
    let mut kept = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = RESPONSE_BODY_CAP - kept.len();
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if kept.len() >= RESPONSE_BODY_CAP {
            break;
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_schedule_scales_and_ends_after_seven_retries() {
        assert_eq!(retry_delay(1, 1.0), Some(Duration::from_secs(5)));
        assert_eq!(retry_delay(2, 1.0), Some(Duration::from_secs(300)));
        assert_eq!(retry_delay(7, 1.0), Some(Duration::from_secs(36000)));
        assert_eq!(retry_delay(8, 1.0), None);
        assert_eq!(retry_delay(0, 1.0), None);
        assert_eq!(retry_delay(2, 0.01), Some(Duration::from_secs(3)));
    }
}
