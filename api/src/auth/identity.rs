//! Who is calling. Every authenticated request costs one indexed query (the
//! session joined with its user), so logout, password changes, disabling and
//! tier changes take effect at once, not when an access token expires.

use uuid::Uuid;

use super::scheme::{BearerAuth, Credentials};
use super::tokens::TokenError;
use crate::error::Error;
use crate::state::AppState;
use crate::store::{sessions, users::User};

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

impl AppState {
    /// Bearer-only endpoints (auth, API keys, subscription changes).
    pub async fn authenticate_bearer(&self, auth: &BearerAuth) -> Result<Identity, Error> {
        let claims = self.jwt.verify(&auth.0.token).map_err(|e| match e {
            TokenError::Expired => Error::Unauthenticated("the access token has expired".into()),
            TokenError::Invalid => Error::Unauthenticated("the access token is invalid".into()),
        })?;
        let db = self.db.get().await?;
        let found = sessions::find_with_user(&**db, claims.sid)
            .await?
            .filter(|s| s.user.id == claims.sub)
            .ok_or_else(|| Error::Unauthenticated("the access token is invalid".into()))?;
        if !found.active {
            return Err(Error::Unauthenticated(
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
            Credentials::ApiKey(_) => {
                let _ = access;
                Err(Error::Unauthenticated(
                    "API-key authentication is not available in this version".into(),
                ))
            }
        }
    }
}
