//! `/api-keys`: keys for machine access (monthly, yearly and admin tiers).
//!
//! Managing keys needs a Bearer token: a key cannot mint or delete keys. The
//! raw key (`sfk_...`) is returned once, by the create call; only its SHA-256
//! and last four characters are stored.

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};
use poem::web::Data;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use uuid::Uuid;

use super::{page, ApiTags};
use crate::auth::tokens::{random_token, sha256};
use crate::auth::BearerCaller;
use crate::contract::{self, KeyLifetimeDays, KeyName, PageLimit, PageOffset, PermissionList};
use crate::error::{Error, Result};
use crate::json_body::JsonBody;
use crate::state::AppState;
use scanfleet_core::store::api_keys::{self, ApiKey, NewApiKey};

/// The prefix of every raw key.
pub const KEY_PREFIX: &str = "sfk_";
use crate::contract::bounds::{
    KEY_DEFAULT_EXPIRES_IN_DAYS as DEFAULT_EXPIRES_IN_DAYS,
    KEY_MAX_EXPIRES_IN_DAYS as MAX_EXPIRES_IN_DAYS, KEY_NAME_MAX as NAME_MAX,
    KEY_PERMISSIONS as PERMISSIONS,
};

#[derive(Debug, Object)]
pub struct ApiKeyCreate {
    /// 1 to 100 characters.
    pub name: KeyName,
    /// A non-empty subset of `read` (GET endpoints), `scan` (start and stop
    /// scans, run schedules now) and `write` (create, change and delete
    /// targets and schedules).
    pub permissions: PermissionList,
    /// Lifetime in days, 1 to 365 (default 90).
    pub expires_in_days: Option<KeyLifetimeDays>,
}

/// A new key, with the raw value: shown this once, never again.
#[derive(Debug, Object)]
pub struct ApiKeyCreated {
    pub id: Uuid,
    pub name: String,
    /// The raw key (`sfk_...`), to send as `X-API-Key`.
    pub key: String,
    pub permissions: Vec<String>,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

/// A key as listed: its value masked.
#[derive(Debug, Object)]
pub struct ApiKeyOut {
    pub id: Uuid,
    pub name: String,
    /// `sfk_…` and the key's last four characters.
    pub key: String,
    pub permissions: Vec<String>,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    /// When the key last authenticated a request (to the minute); null when
    /// never used.
    #[oai(nullable)]
    pub last_used_at: Option<DateTime<Utc>>,
}

/// `sfk_…` plus the last four characters.
pub fn masked(last4: &str) -> String {
    format!("{KEY_PREFIX}\u{2026}{last4}")
}

impl From<ApiKey> for ApiKeyOut {
    fn from(k: ApiKey) -> Self {
        ApiKeyOut {
            id: k.id,
            key: masked(&k.last4),
            name: k.name,
            permissions: k.permissions,
            expires_at: k.expires_at,
            created_at: k.created_at,
            last_used_at: k.last_used_at,
        }
    }
}

#[derive(ApiResponse)]
pub enum CreateResponse {
    /// The key was created; `key` is shown only in this response.
    #[oai(status = 201)]
    Created(Json<ApiKeyCreated>),
}

#[derive(ApiResponse)]
pub enum ListResponse {
    /// The caller's keys, newest first, masked.
    #[oai(status = 200)]
    Ok(Json<Vec<ApiKeyOut>>, #[oai(header = "X-Total-Count")] i64),
}

#[derive(ApiResponse)]
pub enum DeleteResponse {
    /// The key was deleted; it no longer authenticates.
    #[oai(status = 204)]
    Deleted,
}

/// A validated create request.
struct ValidKey {
    name: String,
    permissions: Vec<String>,
    expires_in_days: i64,
}

fn validate(
    name: &str,
    requested: &[String],
    expires_in_days: Option<i64>,
) -> Result<ValidKey, Error> {
    let name = name.trim();
    let len = name.chars().count();
    if len == 0 || len > NAME_MAX {
        return Err(Error::invalid(
            "name",
            format!("must be 1 to {NAME_MAX} characters"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::invalid(
            "name",
            "must not contain control characters",
        ));
    }
    if requested.is_empty() {
        return Err(Error::invalid(
            "permissions",
            "must name at least one of read, scan, write",
        ));
    }
    let mut permissions = BTreeSet::new();
    for p in requested {
        if !PERMISSIONS.contains(&p.as_str()) {
            return Err(Error::invalid(
                "permissions",
                format!("`{p}` is not one of read, scan, write"),
            ));
        }
        permissions.insert(p.clone());
    }
    let expires_in_days = expires_in_days.unwrap_or(DEFAULT_EXPIRES_IN_DAYS);
    if !(1..=MAX_EXPIRES_IN_DAYS).contains(&expires_in_days) {
        return Err(Error::invalid(
            "expires_in_days",
            format!("must be between 1 and {MAX_EXPIRES_IN_DAYS}"),
        ));
    }
    // In the fixed order read, scan, write.
    let permissions = PERMISSIONS
        .iter()
        .filter(|p| permissions.contains(**p))
        .map(|p| p.to_string())
        .collect();
    Ok(ValidKey {
        name: name.to_string(),
        permissions,
        expires_in_days,
    })
}

/// Creates an API key for `user` (paid tiers only); returns it with the
/// raw key, which is shown once and never stored. The API and the web
/// console both create keys through it.
pub async fn issue(
    state: &AppState,
    user: &scanfleet_core::store::users::User,
    name: &str,
    permissions: &[String],
    expires_in_days: Option<i64>,
) -> Result<(ApiKey, String), Error> {
    let valid = validate(name, permissions, expires_in_days)?;
    if user.tier_slug == "demo" {
        return Err(Error::UpgradeRequired {
            code: "api_keys_require_paid_tier",
            detail: "API keys are available on the monthly and yearly tiers".into(),
            upgrade: scanfleet_core::scans::upgrade_prompt(
                &state.upgrade_links,
                &user.tier_slug,
                "Upgrade to Monthly Pro to create API keys.",
            ),
        });
    }
    let raw = random_token(KEY_PREFIX);
    let last4: String = raw[raw.len() - 4..].to_string();
    let db = state.db.get().await?;
    let key = api_keys::create(
        &**db,
        NewApiKey {
            user_id: user.id,
            name: &valid.name,
            key_hash: &sha256(&raw),
            last4: &last4,
            permissions: &valid.permissions,
            expires_at: Utc::now() + Duration::days(valid.expires_in_days),
        },
    )
    .await?;
    Ok((key, raw))
}

pub struct ApiKeysApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::ApiKeys")]
impl ApiKeysApi {
    /// Create an API key
    ///
    /// Needs a Bearer token and the monthly, yearly or admin tier. The raw
    /// key is in this response only.
    #[oai(path = "/api-keys", method = "post", operation_id = "create_api_key")]
    async fn create_api_key(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        body: JsonBody<ApiKeyCreate>,
    ) -> Result<CreateResponse> {
        let (key, raw) = issue(
            &state,
            &me.user,
            &body.name,
            &body.permissions,
            contract::raw(body.expires_in_days),
        )
        .await?;
        tracing::info!(user_id = %me.user.id, key_id = %key.id, "API key created");
        Ok(CreateResponse::Created(Json(ApiKeyCreated {
            id: key.id,
            name: key.name,
            key: raw,
            permissions: key.permissions,
            expires_at: key.expires_at,
            created_at: key.created_at,
        })))
    }

    /// List the caller's API keys, masked
    #[oai(path = "/api-keys", method = "get", operation_id = "list_api_keys")]
    async fn list_api_keys(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        /// Page size, 1 to 500 (default 50).
        limit: Query<Option<PageLimit>>,
        /// Items to skip.
        offset: Query<Option<PageOffset>>,
    ) -> Result<ListResponse> {
        let page = page(contract::raw(limit.0), contract::raw(offset.0))?;
        let db = state.db.get().await?;
        let (keys, total) = api_keys::list(&**db, me.user.id, page).await?;
        Ok(ListResponse::Ok(
            Json(keys.into_iter().map(Into::into).collect()),
            total,
        ))
    }

    /// Revoke and delete an API key
    #[oai(
        path = "/api-keys/:key_id",
        method = "delete",
        operation_id = "delete_api_key"
    )]
    async fn delete_api_key(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        key_id: Path<Uuid>,
    ) -> Result<DeleteResponse> {
        let db = state.db.get().await?;
        api_keys::delete(&**db, me.user.id, key_id.0).await?;
        tracing::info!(user_id = %me.user.id, key_id = %key_id.0, "API key deleted");
        Ok(DeleteResponse::Deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(name: &str, perms: &[&str], days: Option<i64>) -> ApiKeyCreate {
        ApiKeyCreate {
            name: KeyName(name.into()),
            permissions: PermissionList(perms.iter().map(|p| p.to_string()).collect()),
            expires_in_days: days.map(contract::Bounded),
        }
    }

    fn validate_body(b: &ApiKeyCreate) -> Result<ValidKey, Error> {
        validate(&b.name, &b.permissions, contract::raw(b.expires_in_days))
    }

    fn field(r: Result<ValidKey, Error>) -> String {
        match r {
            Err(Error::Validation(e)) => e[0].field.clone(),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn create_requests_are_validated_field_by_field() {
        let ok = validate_body(&body(" ci ", &["scan", "read", "read"], None)).unwrap();
        assert_eq!(ok.name, "ci");
        assert_eq!(ok.permissions, vec!["read", "scan"]);
        assert_eq!(ok.expires_in_days, 90);
        assert_eq!(field(validate_body(&body("", &["read"], None))), "name");
        assert_eq!(
            field(validate_body(&body(&"x".repeat(101), &["read"], None))),
            "name"
        );
        assert!(validate_body(&body(&"é".repeat(100), &["read"], None)).is_ok());
        assert_eq!(field(validate_body(&body("k", &[], None))), "permissions");
        assert_eq!(
            field(validate_body(&body("k", &["admin"], None))),
            "permissions"
        );
        assert_eq!(
            field(validate_body(&body("k", &["read"], Some(0)))),
            "expires_in_days"
        );
        assert_eq!(
            field(validate_body(&body("k", &["read"], Some(366)))),
            "expires_in_days"
        );
        assert_eq!(
            validate_body(&body("k", &["read"], Some(365)))
                .unwrap()
                .expires_in_days,
            365
        );
    }

    #[test]
    fn listings_show_the_prefix_and_last_four_only() {
        assert_eq!(masked("abcd"), "sfk_\u{2026}abcd");
    }
}
