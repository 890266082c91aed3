//! Notifications.
//!
//! The operations here are part of the contract but not provided by this
//! version yet: each answers 501 problem+json.

use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::OpenApi;
use uuid::Uuid;

use super::ApiTags;
use crate::auth::Credentials;
use crate::error::{Error, Result};
use crate::state::AppState;

pub struct NotificationsApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Notifications")]
impl NotificationsApi {
    /// List the caller's notifications
    #[oai(
        path = "/notifications",
        method = "get",
        operation_id = "list_notifications"
    )]
    async fn list_notifications(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        #[oai(name = "unread")] _unread: Query<Option<bool>>,
        #[oai(name = "limit")] _limit: Query<Option<i64>>,
        #[oai(name = "offset")] _offset: Query<Option<i64>>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /notifications"))
    }

    /// Mark a notification read
    #[oai(
        path = "/notifications/:notification_id/read",
        method = "put",
        operation_id = "mark_notification_read"
    )]
    async fn mark_notification_read(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
        _notification_id: Path<Uuid>,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented(
            "PUT /notifications/notification_id/read",
        ))
    }

    /// Mark every notification read
    #[oai(
        path = "/notifications/read-all",
        method = "post",
        operation_id = "mark_all_notifications_read"
    )]
    async fn mark_all_notifications_read(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("POST /notifications/read-all"))
    }

    /// Number of unread notifications
    #[oai(
        path = "/notifications/unread-count",
        method = "get",
        operation_id = "get_unread_count"
    )]
    async fn get_unread_count(
        &self,
        _state: Data<&AppState>,
        _auth: Credentials,
    ) -> Result<Json<serde_json::Value>> {
        Err(Error::NotImplemented("GET /notifications/unread-count"))
    }
}
