//! Who is calling. A credential's session or API key, joined with its user,
//! is read with one indexed query and then kept in the process's
//! [`super::cache`], which drops it on any change to the user, their
//! sessions, keys or subscription; so logout, password changes, key
//! deletion, disabling and tier changes take effect on the next request,
//! not when an access token expires.

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::cache::{CacheKey, Cached};
use super::scheme::{BearerAuth, Credentials};
use super::tokens::{sha256, TokenError};
use crate::error::Error;
use crate::state::AppState;
use scanfleet_core::store::{api_keys, sessions, subscriptions, users::User};

/// What an operation needs from an API key's permissions. Bearer tokens of
/// the owner may do everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// GET endpoints.
    Read,
    /// Start and stop scans, run schedules now.
    Scan,
    /// Create, change and delete targets and schedules.
    Write,
}

impl Access {
    pub fn permission(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Scan => "scan",
            Access::Write => "write",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Identity {
    pub user: User,
    /// The login session, for Bearer tokens.
    pub session_id: Option<Uuid>,
    /// The key used, for API-key requests.
    pub api_key_id: Option<Uuid>,
}

impl Identity {
    pub fn require_admin(&self) -> Result<(), Error> {
        if self.user.is_admin() {
            Ok(())
        } else {
            Err(Error::forbidden(
                "admin_only",
                "this operation needs the admin role",
            ))
        }
    }
}

/// A paid user whose cancelled subscription's period has ended is returned
/// to `demo` here, before any tier check of the request (one indexed query,
/// paid tiers only).
/// `lapses_at` is when the user's cancelled paid period ends, if it does;
/// true when the user was just returned to `demo`.
async fn settle_lapsed_subscription(
    db: &impl tokio_postgres::GenericClient,
    user: &mut User,
    lapses_at: Option<DateTime<Utc>>,
) -> Result<bool, Error> {
    let due = lapses_at.is_some_and(|at| at <= Utc::now());
    if due
        && matches!(user.tier_slug.as_str(), "monthly" | "yearly")
        && subscriptions::settle_lapsed(db, user.id).await?
    {
        user.tier_slug = "demo".to_string();
        scanfleet_core::store::changes::note_change(user.id);
        return Ok(true);
    }
    Ok(false)
}

impl AppState {
    /// Bearer-only endpoints (auth, API keys, subscription changes).
    pub async fn authenticate_bearer(&self, auth: &BearerAuth) -> Result<Identity, Error> {
        let claims = self.jwt.verify(&auth.0.token).map_err(|e| match e {
            TokenError::Expired => Error::InvalidToken("the access token has expired".into()),
            TokenError::Invalid => Error::InvalidToken("the access token is invalid".into()),
        })?;
        let key = CacheKey::Session(claims.sid);
        let found = match self.auth_cache.get(&key) {
            Some(Cached::Session(found)) => found,
            _ => {
                let filled = self.auth_cache.fill_start();
                let db = self.db.get().await?;
                let mut found = sessions::find_with_user(&**db, claims.sid)
                    .await?
                    .ok_or_else(|| Error::InvalidToken("the access token is invalid".into()))?;
                if settle_lapsed_subscription(&**db, &mut found.user, found.lapses_at).await? {
                    found.lapses_at = None;
                }
                self.auth_cache
                    .put(key, Cached::Session(found.clone()), filled);
                found
            }
        };
        if found.user.id != claims.sub {
            return Err(Error::InvalidToken("the access token is invalid".into()));
        }
        if !found.active || found.expires_at <= Utc::now() {
            return Err(Error::InvalidToken(
                "the session has ended: log in again".into(),
            ));
        }
        if found.user.disabled {
            return Err(Error::Unauthenticated("this account is disabled".into()));
        }
        Ok(Identity {
            user: found.user,
            session_id: Some(found.session_id),
            api_key_id: None,
        })
    }

    /// Endpoints that accept a Bearer token or an API key with `access`.
    pub async fn authenticate(
        &self,
        creds: &Credentials,
        access: Access,
    ) -> Result<Identity, Error> {
        match creds {
            Credentials::Bearer(b) => self.authenticate_bearer(b).await,
            Credentials::ApiKey(k) => self.authenticate_api_key(&k.0.key, access).await,
        }
    }

    /// `X-API-Key`: one indexed lookup of the key's hash joined with its
    /// owner, so deleting a key, disabling the owner or moving them to the
    /// demo tier takes effect on the next request.
    async fn authenticate_api_key(&self, raw: &str, access: Access) -> Result<Identity, Error> {
        let hash = sha256(raw.trim());
        let key = CacheKey::ApiKey(hash.clone());
        let found = match self.auth_cache.get(&key) {
            Some(Cached::ApiKey(found)) => found,
            _ => {
                let filled = self.auth_cache.fill_start();
                let db = self.db.get().await?;
                let mut found = api_keys::find_by_hash(&**db, &hash).await?.ok_or_else(|| {
                    Error::Unauthenticated("the API key is invalid or was deleted".into())
                })?;
                if settle_lapsed_subscription(&**db, &mut found.user, found.lapses_at).await? {
                    found.lapses_at = None;
                }
                self.auth_cache
                    .put(key.clone(), Cached::ApiKey(found.clone()), filled);
                found
            }
        };
        if found.key.expires_at <= Utc::now() {
            return Err(Error::Unauthenticated("the API key has expired".into()));
        }
        if found.user.disabled {
            return Err(Error::Unauthenticated("this account is disabled".into()));
        }
        if found.user.tier_slug == "demo" {
            return Err(Error::UpgradeRequired {
                code: "api_keys_require_paid_tier",
                detail: "API keys work on the monthly and yearly tiers".into(),
                upgrade: scanfleet_core::scans::upgrade_prompt(
                    &self.upgrade_links,
                    &found.user.tier_slug,
                    "Upgrade to Monthly Pro to use API keys.",
                ),
            });
        }
        if !found
            .key
            .permissions
            .iter()
            .any(|p| p == access.permission())
        {
            return Err(Error::forbidden(
                "insufficient_permission",
                format!(
                    "this API key lacks the `{}` permission",
                    access.permission()
                ),
            ));
        }
        // At most one write per key and minute, however busy the key is.
        let now = Utc::now();
        let recent = found
            .key
            .last_used_at
            .is_some_and(|t| now - t < Duration::seconds(60));
        if !recent {
            let db = self.db.get().await?;
            api_keys::touch(&**db, found.key.id).await?;
            self.auth_cache.touch_key(&key, now);
        }
        Ok(Identity {
            user: found.user,
            session_id: None,
            api_key_id: Some(found.key.id),
        })
    }
}
