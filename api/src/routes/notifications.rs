//! `/notifications`: scan completion and failure notices, and skipped
//! scheduled runs.

use chrono::{DateTime, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::{Caller, CanRead};
use crate::contract::{self, PageLimit, PageOffset};
use crate::error::{Error, Result};
use crate::state::AppState;
use scanfleet_core::store::notifications::{self, Notification};

/// Details of a notification: finding counts for `scan_complete`, the error
/// for `scan_failed`, the reason for `schedule_skipped`.
#[derive(Debug, Object, Default)]
pub struct NotificationData {
    #[oai(skip_serializing_if_is_none)]
    pub total_findings: Option<i64>,
    #[oai(skip_serializing_if_is_none)]
    pub critical: Option<i64>,
    #[oai(skip_serializing_if_is_none)]
    pub high: Option<i64>,
    #[oai(skip_serializing_if_is_none)]
    pub medium: Option<i64>,
    #[oai(skip_serializing_if_is_none)]
    pub low: Option<i64>,
    #[oai(skip_serializing_if_is_none)]
    pub info: Option<i64>,
    #[oai(skip_serializing_if_is_none)]
    pub error: Option<String>,
    #[oai(skip_serializing_if_is_none)]
    pub reason: Option<String>,
}

#[derive(Debug, Object)]
pub struct NotificationOut {
    pub id: Uuid,
    /// `scan_complete`, `scan_failed` or `schedule_skipped`.
    #[oai(rename = "type")]
    pub kind: String,
    pub title: String,
    pub message: String,
    /// The scan, for scan notifications.
    #[oai(nullable)]
    pub scan_id: Option<Uuid>,
    /// The schedule, for `schedule_skipped`.
    #[oai(nullable)]
    pub schedule_id: Option<Uuid>,
    pub data: NotificationData,
    pub read: bool,
    pub created_at: DateTime<Utc>,
}

impl From<Notification> for NotificationOut {
    fn from(n: Notification) -> Self {
        let int = |k: &str| n.data.get(k).and_then(|v| v.as_i64());
        let text = |k: &str| n.data.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let data = NotificationData {
            total_findings: int("total_findings"),
            critical: int("critical"),
            high: int("high"),
            medium: int("medium"),
            low: int("low"),
            info: int("info"),
            error: text("error"),
            reason: text("reason"),
        };
        NotificationOut {
            id: n.id,
            kind: n.kind,
            title: n.title,
            message: n.message,
            scan_id: n.scan_id,
            schedule_id: n.schedule_id,
            data,
            read: n.read,
            created_at: n.created_at,
        }
    }
}

#[derive(Debug, Object)]
pub struct UnreadCount {
    pub unread_count: i64,
}

#[derive(Debug, Object)]
pub struct MarkedRead {
    /// How many notifications changed from unread to read.
    pub updated: i64,
}

#[derive(ApiResponse)]
pub enum NotificationList {
    /// Notifications, newest first.
    #[oai(status = 200)]
    Ok(
        Json<Vec<NotificationOut>>,
        #[oai(header = "X-Total-Count")] i64,
    ),
}

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
        state: Data<&AppState>,
        me: Caller<CanRead>,
        /// Only unread notifications when true.
        unread: Query<Option<bool>>,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<NotificationList> {
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (items, total) =
            notifications::list(&**db, me.user.id, unread.0.unwrap_or(false), page).await?;
        Ok(NotificationList::Ok(
            Json(items.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Mark a notification read
    #[oai(
        path = "/notifications/:notification_id/read",
        method = "put",
        operation_id = "mark_notification_read"
    )]
    async fn mark_notification_read(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
        notification_id: Path<Uuid>,
    ) -> Result<Json<NotificationOut>> {
        let db = state.db.get().await?;
        let n = notifications::mark_read(&**db, me.user.id, notification_id.0)
            .await?
            .ok_or(Error::NotFound("notification"))?;
        Ok(Json(n.into()))
    }

    /// Mark every notification read
    #[oai(
        path = "/notifications/read-all",
        method = "post",
        operation_id = "mark_all_notifications_read"
    )]
    async fn mark_all_notifications_read(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
    ) -> Result<Json<MarkedRead>> {
        let db = state.db.get().await?;
        let updated = notifications::mark_all_read(&**db, me.user.id).await?;
        Ok(Json(MarkedRead {
            updated: updated as i64,
        }))
    }

    /// Number of unread notifications
    #[oai(
        path = "/notifications/unread-count",
        method = "get",
        operation_id = "get_unread_count"
    )]
    async fn get_unread_count(
        &self,
        state: Data<&AppState>,
        me: Caller<CanRead>,
    ) -> Result<Json<UnreadCount>> {
        let db = state.db.get().await?;
        Ok(Json(UnreadCount {
            unread_count: notifications::unread_count(&**db, me.user.id).await?,
        }))
    }
}
