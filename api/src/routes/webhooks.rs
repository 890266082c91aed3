//! `/webhooks`: outbound webhooks and Slack (issue 27). Owner-only, for
//! paid tiers; API keys need `write` to change them. Another user's webhook
//! is 404 everywhere. The secret (`whsec_` and the base64 of 32 random
//! bytes) is shown once, at creation and at each rotation; after a
//! rotation the previous secret keeps signing beside the new one for 24 h.
//! The URL passes the SSRF guard ([`crate::webhooks::guard`]) when saved,
//! and again at every delivery.

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::{Caller, CanRead, CanWrite};
use crate::contract::{
    self, PageLimit, PageOffset, SeverityName, WebhookDescription, WebhookEventList,
    WebhookKindName, WebhookUrl,
};
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::state::AppState;
use crate::webhooks::manage;
use scanfleet_core::store::webhooks::{self, Attempt, Webhook, WebhookValues};

#[derive(Debug, Object)]
pub struct WebhookCreate {
    /// Where events are sent: `https` in production, public addresses only;
    /// a Slack incoming-webhook URL (`https://hooks.slack.com/...`) for
    /// `kind: slack`.
    pub url: WebhookUrl,
    /// `generic` (default) or `slack`.
    pub kind: Option<WebhookKindName>,
    /// The event types to send.
    pub events: WebhookEventList,
    /// `finding.*` events below this severity are not sent (default `info`).
    pub min_severity: Option<SeverityName>,
    pub description: Option<WebhookDescription>,
}

/// Any of the fields; absent ones stay as they are.
#[derive(Debug, Object)]
pub struct WebhookUpdate {
    pub url: Option<WebhookUrl>,
    pub events: Option<WebhookEventList>,
    pub min_severity: Option<SeverityName>,
    pub description: Option<WebhookDescription>,
    /// Enabling a webhook that was disabled after failing starts afresh.
    pub enabled: Option<bool>,
}

#[derive(Debug, Object)]
pub struct WebhookOut {
    pub id: Uuid,
    pub url: String,
    /// `generic` or `slack`.
    pub kind: String,
    pub events: Vec<String>,
    pub min_severity: String,
    pub description: String,
    /// False once disabled by its owner, or after failing for 5 days.
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
}

impl From<Webhook> for WebhookOut {
    fn from(w: Webhook) -> Self {
        WebhookOut {
            id: w.id,
            url: w.url,
            kind: w.kind,
            events: w.events,
            min_severity: w.min_severity.as_str().to_string(),
            description: w.description,
            enabled: w.enabled,
            created_at: w.created_at,
        }
    }
}

/// A new webhook with its signing secret, shown this once.
#[derive(Debug, Object)]
pub struct WebhookCreatedOut {
    #[oai(flatten)]
    pub webhook: WebhookOut,
    /// `whsec_` and the base64 of 32 random bytes; sign-checking key.
    pub secret: String,
}

#[derive(Debug, Object)]
pub struct RotatedSecret {
    /// The new secret, shown this once.
    pub secret: String,
    /// Until then the previous secret signs too.
    pub previous_secret_expires_at: DateTime<Utc>,
}

#[derive(Debug, Object)]
pub struct QueuedDelivery {
    /// True when a delivery was queued.
    pub queued: bool,
}

/// One attempt of the delivery log.
#[derive(Debug, Object)]
pub struct DeliveryAttemptOut {
    pub id: Uuid,
    /// The delivery (one event to this webhook); redeliver takes it.
    pub delivery_id: Uuid,
    pub event_type: String,
    pub event_id: Uuid,
    /// The `webhook-id` header, the same on every attempt.
    pub message_id: String,
    /// From 1.
    pub attempt: i32,
    #[oai(nullable)]
    pub status_code: Option<i32>,
    pub duration_ms: i32,
    #[oai(nullable)]
    pub error: Option<String>,
    /// The first 64 KiB of the answer.
    #[oai(nullable)]
    pub response_body: Option<String>,
    /// When the next attempt is due, after a failure with attempts left.
    #[oai(nullable)]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[oai(nullable)]
    pub delivered_at: Option<DateTime<Utc>>,
    pub attempted_at: DateTime<Utc>,
}

impl From<Attempt> for DeliveryAttemptOut {
    fn from(a: Attempt) -> Self {
        DeliveryAttemptOut {
            id: a.id,
            delivery_id: a.delivery_id,
            event_type: a.event_type,
            event_id: a.event_id,
            message_id: a.message_id,
            attempt: a.attempt,
            status_code: a.status_code,
            duration_ms: a.duration_ms,
            error: a.error,
            response_body: a.response_body,
            next_attempt_at: a.next_attempt_at,
            delivered_at: a.delivered_at,
            attempted_at: a.attempted_at,
        }
    }
}

#[derive(ApiResponse)]
pub enum CreateResponse {
    /// The webhook, with its secret shown this once.
    #[oai(status = 201)]
    Created(Json<WebhookCreatedOut>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    /// The caller's webhooks, newest first.
    #[oai(status = 200)]
    Ok(Json<Vec<WebhookOut>>, #[oai(header = "X-Total-Count")] i64),
}

#[derive(ApiResponse)]
pub enum DeliveriesResponse {
    /// The webhook's delivery attempts, newest first.
    #[oai(status = 200)]
    Ok(
        Json<Vec<DeliveryAttemptOut>>,
        #[oai(header = "X-Total-Count")] i64,
    ),
}

#[derive(ApiResponse)]
pub enum DeleteResponse {
    /// The webhook, its deliveries and log are gone.
    #[oai(status = 204)]
    Deleted,
}

#[derive(ApiResponse)]
pub enum QueuedResponse {
    /// A delivery is queued.
    #[oai(status = 202)]
    Accepted(Json<QueuedDelivery>),
}

pub struct WebhooksApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Webhooks")]
impl WebhooksApi {
    /// Create a webhook
    ///
    /// Returns the signing secret once. Paid tiers; API keys need `write`.
    #[oai(path = "/webhooks", method = "post", operation_id = "create_webhook")]
    async fn create_webhook(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        body: JsonBody<WebhookCreate>,
    ) -> Result<CreateResponse> {
        let (webhook, secret) = manage::create(
            &state,
            &me.user,
            &manage::NewHook {
                url: &body.url,
                kind: body.kind.as_deref(),
                events: &body.events,
                min_severity: body.min_severity.as_deref(),
                description: body.description.as_deref(),
            },
        )
        .await?;
        Ok(CreateResponse::Created(Json(WebhookCreatedOut {
            webhook: webhook.into(),
            secret,
        })))
    }

    /// List the caller's webhooks
    #[oai(path = "/webhooks", method = "get", operation_id = "list_webhooks")]
    async fn list_webhooks(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<ListResponse> {
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        manage::ensure_paid(&state, &me.user).await?;
        let db = state.db.get().await?;
        let (list, total) = webhooks::list(&**db, me.user.id, page).await?;
        Ok(ListResponse::Ok(
            Json(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Get a webhook
    #[oai(
        path = "/webhooks/:webhook_id",
        method = "get",
        operation_id = "get_webhook"
    )]
    async fn get_webhook(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        webhook_id: Path<Uuid>,
    ) -> Result<Json<WebhookOut>> {
        Ok(Json(
            manage::owned(&state, &me.user, webhook_id.0).await?.into(),
        ))
    }

    /// Change a webhook
    ///
    /// Any of url, events, min_severity, description and enabled.
    #[oai(
        path = "/webhooks/:webhook_id",
        method = "patch",
        operation_id = "update_webhook"
    )]
    async fn update_webhook(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        webhook_id: Path<Uuid>,
        body: JsonBody<WebhookUpdate>,
    ) -> Result<Json<WebhookOut>> {
        let current = manage::owned(&state, &me.user, webhook_id.0).await?;
        let events = body
            .events
            .as_deref()
            .map(|e| manage::checked_events(e))
            .transpose()?;
        let min_severity = manage::checked_severity(body.min_severity.as_deref())?;
        let description = manage::checked_description(body.description.as_deref())?;
        let url = match body.url.as_deref() {
            Some(raw) => Some(manage::checked_url(&state, raw, &current.kind).await?),
            None => None,
        };
        let values = WebhookValues {
            url: url.as_deref().unwrap_or(&current.url),
            kind: &current.kind,
            events: events.as_deref().unwrap_or(&current.events),
            min_severity: min_severity.unwrap_or(current.min_severity),
            description: description.as_deref().unwrap_or(&current.description),
            enabled: body.enabled.unwrap_or(current.enabled),
        };
        let db = state.db.get().await?;
        let updated = webhooks::update(&**db, me.user.id, current.id, &values)
            .await?
            .ok_or(Error::NotFound("webhook"))?;
        Ok(Json(updated.into()))
    }

    /// Delete a webhook
    #[oai(
        path = "/webhooks/:webhook_id",
        method = "delete",
        operation_id = "delete_webhook"
    )]
    async fn delete_webhook(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        webhook_id: Path<Uuid>,
    ) -> Result<DeleteResponse> {
        manage::delete(&state, &me.user, webhook_id.0).await?;
        Ok(DeleteResponse::Deleted)
    }

    /// Rotate a webhook's signing secret
    ///
    /// Returns the new secret once; the previous one keeps signing beside
    /// it for 24 hours.
    #[oai(
        path = "/webhooks/:webhook_id/rotate-secret",
        method = "post",
        operation_id = "rotate_webhook_secret"
    )]
    async fn rotate_webhook_secret(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        webhook_id: Path<Uuid>,
    ) -> Result<Json<RotatedSecret>> {
        let (secret, until) = manage::rotate(&state, &me.user, webhook_id.0).await?;
        Ok(Json(RotatedSecret {
            secret,
            previous_secret_expires_at: until,
        }))
    }

    /// Send a test event
    ///
    /// Queues a `ping` to the webhook; 409 when it is disabled.
    #[oai(
        path = "/webhooks/:webhook_id/test",
        method = "post",
        operation_id = "test_webhook"
    )]
    async fn test_webhook(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        webhook_id: Path<Uuid>,
    ) -> Result<QueuedResponse> {
        manage::test(&state, &me.user, webhook_id.0).await?;
        Ok(QueuedResponse::Accepted(Json(QueuedDelivery {
            queued: true,
        })))
    }

    /// List a webhook's delivery attempts
    #[oai(
        path = "/webhooks/:webhook_id/deliveries",
        method = "get",
        operation_id = "list_webhook_deliveries"
    )]
    async fn list_webhook_deliveries(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        webhook_id: Path<Uuid>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<DeliveriesResponse> {
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let hook = manage::owned(&state, &me.user, webhook_id.0).await?;
        let db = state.db.get().await?;
        let (list, total) = webhooks::list_attempts(&**db, hook.id, page).await?;
        Ok(DeliveriesResponse::Ok(
            Json(list.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Send a delivery again
    ///
    /// Queues the delivery now, with the same `webhook-id`.
    #[oai(
        path = "/webhooks/:webhook_id/deliveries/:delivery_id/redeliver",
        method = "post",
        operation_id = "redeliver_webhook_delivery"
    )]
    async fn redeliver_webhook_delivery(
        &self,
        state: Data<&AppState>,
        me: Caller<CanWrite>,
        webhook_id: Path<Uuid>,
        delivery_id: Path<Uuid>,
    ) -> Result<QueuedResponse> {
        manage::redeliver(&state, &me.user, webhook_id.0, delivery_id.0).await?;
        Ok(QueuedResponse::Accepted(Json(QueuedDelivery {
            queued: true,
        })))
    }
}
