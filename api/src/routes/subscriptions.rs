//! Subscriptions: tiers, usage and payment.
//!
//! The operations here are part of the contract but not provided by this
//! version yet: each answers 501 problem+json.

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::OpenApi;

use super::ApiTags;
use crate::auth::{BearerAuth, Credentials};
use crate::error::{Error, Result};
use crate::state::AppState;

pub struct SubscriptionsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Subscriptions")]
impl SubscriptionsApi {
    /// List tiers with pricing, limits and features
    #[oai(
        path = "/subscriptions/tiers",
        method = "get",
        operation_id = "list_tiers"
    )]
    async fn list_tiers(&self, _state: Data<&AppState>) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /subscriptions/tiers"))
    }

    /// The caller's subscription
    #[oai(
        path = "/subscriptions/current",
        method = "get",
        operation_id = "get_current_subscription"
    )]
    async fn get_current_subscription(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /subscriptions/current"))
    }

    /// Start a checkout at the payment provider
    #[oai(
        path = "/subscriptions/checkout",
        method = "post",
        operation_id = "create_checkout"
    )]
    async fn create_checkout(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/checkout"))
    }

    /// Change tier with proration
    #[oai(
        path = "/subscriptions/upgrade",
        method = "post",
        operation_id = "upgrade_subscription"
    )]
    async fn upgrade_subscription(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/upgrade"))
    }

    /// Cancel at the end of the billing period
    #[oai(
        path = "/subscriptions/cancel",
        method = "post",
        operation_id = "cancel_subscription"
    )]
    async fn cancel_subscription(
        &self,
        _state: Data<&AppState>,
        _auth: BearerAuth,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/cancel"))
    }

    /// Scans and targets used against the tier's limits
    #[oai(
        path = "/subscriptions/usage",
        method = "get",
        operation_id = "get_usage"
    )]
    async fn get_usage(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /subscriptions/usage"))
    }

    /// Events from the payment provider (signed)
    #[oai(
        path = "/subscriptions/webhook",
        method = "post",
        operation_id = "payment_webhook"
    )]
    async fn payment_webhook(
        &self,
        _state: Data<&AppState>,
        _body: Json<serde_json::Value>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /subscriptions/webhook"))
    }
}
