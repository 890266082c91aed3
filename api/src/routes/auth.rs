//! `/auth`: registration, login, token refresh with reuse detection, logout,
//! and the caller's profile and password.

use chrono::{DateTime, Duration, Utc};
use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use uuid::Uuid;

use super::ApiTags;
use crate::auth::tokens::{random_token, sha256};
use crate::auth::{account, BearerAuth, BearerCaller};
use crate::contract::{EmailAddress, FullName, NewPassword};
use crate::error::{Error, Result};
use crate::json_body::{JsonBody, OptionalJsonBody};
use crate::state::AppState;
use crate::validate::validate_full_name;
use scanfleet_core::store::sessions::{self, Rotation};
use scanfleet_core::store::users::{self, User};

/// A user's profile.
#[derive(Debug, Object)]
pub struct UserOut {
    pub id: Uuid,
    pub email: String,
    pub full_name: String,
    /// `user` or `admin`.
    pub role: String,
    /// `demo`, `monthly`, `yearly` or `admin`.
    pub tier_slug: String,
    pub created_at: DateTime<Utc>,
}

impl From<User> for UserOut {
    fn from(u: User) -> Self {
        UserOut {
            id: u.id,
            email: u.email,
            full_name: u.full_name,
            role: u.role,
            tier_slug: u.tier_slug,
            created_at: u.created_at,
        }
    }
}

#[derive(Debug, Object)]
pub struct RegisterRequest {
    pub email: EmailAddress,
    /// 8 to 128 characters.
    pub password: NewPassword,
    #[oai(default)]
    pub full_name: FullName,
}

/// The caller's new profile (`PUT /auth/me`).
#[derive(Debug, Object)]
pub struct ProfileUpdate {
    pub full_name: FullName,
}

#[derive(Debug, Object)]
pub struct LoginRequest {
    pub email: EmailAddress,
    pub password: String,
}

#[derive(Debug, Object)]
pub struct LoginResponse {
    pub access_token: String,
    pub refresh_token: String,
    /// Always `bearer`.
    pub token_type: String,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    pub user: UserOut,
}

#[derive(Debug, Object)]
pub struct RefreshRequest {
    pub refresh_token: String,
}

#[derive(Debug, Object)]
pub struct TokenPair {
    pub access_token: String,
    /// Replaces the refresh token that was sent, which is now invalid.
    pub refresh_token: String,
    pub token_type: String,
    pub expires_in: i64,
}

#[derive(Debug, Object)]
pub struct LogoutRequest {
    pub refresh_token: String,
}

#[derive(Debug, Object)]
pub struct ChangePasswordRequest {
    pub current_password: String,
    /// 8 to 128 characters.
    pub new_password: NewPassword,
}

#[derive(Debug, Object)]
pub struct MessageResponse {
    pub message: String,
}

#[derive(ApiResponse)]
pub enum RegisterResponse {
    /// The account was created.
    #[oai(status = 201)]
    Created(Json<UserOut>),
}

pub struct AuthApi;

#[OpenApi(prefix_path = "/api/v1", tag = "ApiTags::Auth")]
impl AuthApi {
    /// Create an account
    ///
    /// New accounts have role `user` on the `demo` tier.
    #[oai(path = "/auth/register", method = "post", operation_id = "register")]
    async fn register(
        &self,
        state: Data<&AppState>,
        body: JsonBody<RegisterRequest>,
    ) -> Result<RegisterResponse> {
        let body = body.0;
        let user = account::register(&state, &body.email, body.password.0, &body.full_name).await?;
        Ok(RegisterResponse::Created(Json(user.into())))
    }

    /// Log in
    ///
    /// Returns an access token and a refresh token. A wrong email and a wrong
    /// password give the same answer in the same time. After
    /// `SCANFLEET_RATE__ACCOUNT_FAILURES` (10) wrong passwords for one email
    /// within `SCANFLEET_RATE__ACCOUNT_WINDOW_SECS` (900), from any address,
    /// that email is refused with 429 (`account_throttled`) until the window
    /// ends.
    #[oai(path = "/auth/login", method = "post", operation_id = "login")]
    async fn login(
        &self,
        state: Data<&AppState>,
        body: JsonBody<LoginRequest>,
    ) -> Result<Json<LoginResponse>> {
        let body = body.0;
        let user = account::authenticate(&state, &body.email, body.password).await?;
        let db = state.db.get().await?;
        let refresh = random_token("sfr_");
        let ttl = Duration::seconds(state.settings.api.refresh_token_ttl_secs);
        let session_id = sessions::create(&**db, user.id, ttl, &sha256(&refresh)).await?;
        tracing::info!(user_id = %user.id, %session_id, "login");
        Ok(Json(LoginResponse {
            access_token: state.jwt.issue(user.id, session_id),
            refresh_token: refresh,
            token_type: "bearer".into(),
            expires_in: state.jwt.ttl_secs(),
            user: user.into(),
        }))
    }

    /// Exchange a refresh token for a new token pair
    ///
    /// The Bearer access token may be expired but must belong to the same
    /// session. Presenting a refresh token that was already used revokes the
    /// whole session.
    #[oai(
        path = "/auth/refresh",
        method = "post",
        operation_id = "refresh_token"
    )]
    async fn refresh(
        &self,
        state: Data<&AppState>,
        auth: BearerAuth,
        body: JsonBody<RefreshRequest>,
    ) -> Result<Json<TokenPair>> {
        let claims = state
            .jwt
            .verify_ignoring_expiry(&auth.0.token)
            .map_err(|_| Error::InvalidToken("the access token is invalid".into()))?;
        let next = random_token("sfr_");
        let mut db = state.db.get().await?;
        match sessions::rotate(
            &mut db,
            &sha256(&body.refresh_token),
            &sha256(&next),
            Some(claims.sid),
        )
        .await?
        {
            Rotation::Rotated {
                session_id,
                user_id,
            } => {
                let user = users::find(&**db, user_id)
                    .await?
                    .ok_or(Error::NotFound("user"))?;
                if user.disabled {
                    return Err(Error::Unauthenticated("this account is disabled".into()).into());
                }
                Ok(Json(TokenPair {
                    access_token: state.jwt.issue(user_id, session_id),
                    refresh_token: next,
                    token_type: "bearer".into(),
                    expires_in: state.jwt.ttl_secs(),
                }))
            }
            Rotation::Reused { session_id } => {
                tracing::warn!(%session_id, "refresh token reuse: session revoked");
                Err(Error::Unauthenticated(
                    "the refresh token was already used: the session is revoked, log in again"
                        .into(),
                )
                .into())
            }
            Rotation::Invalid => {
                Err(Error::Unauthenticated("the refresh token is invalid or expired".into()).into())
            }
        }
    }

    /// Log out
    ///
    /// Revokes the session of the given refresh token.
    #[oai(path = "/auth/logout", method = "post", operation_id = "logout")]
    async fn logout(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        body: JsonBody<LogoutRequest>,
    ) -> Result<Json<MessageResponse>> {
        let db = state.db.get().await?;
        match sessions::session_of_token(&**db, &sha256(&body.refresh_token)).await? {
            Some((session_id, user_id)) if user_id == me.user.id => {
                sessions::revoke(&**db, session_id, "logout").await?;
                Ok(Json(MessageResponse {
                    message: "logged out".into(),
                }))
            }
            _ => Err(Error::Unauthenticated("the refresh token is invalid".into()).into()),
        }
    }

    /// The caller's profile
    #[oai(path = "/auth/me", method = "get", operation_id = "get_me")]
    async fn me(&self, me: BearerCaller) -> Result<Json<UserOut>> {
        Ok(Json(me.identity.user.into()))
    }

    /// Change the caller's full name
    ///
    /// The name comes in the JSON body `{"full_name": "..."}`, or (as
    /// before) as the `full_name` query parameter; the body wins when both
    /// are sent, and a request with neither is a 400 saying it is missing.
    #[oai(path = "/auth/me", method = "put", operation_id = "update_me")]
    async fn update_me(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        /// The new name, when the body does not carry it.
        full_name: Query<Option<FullName>>,
        body: OptionalJsonBody<ProfileUpdate>,
    ) -> Result<Json<UserOut>> {
        // Both forms are checked when both are sent (a bad query value is
        // a 422 even beside a good body); the body's name is the one kept.
        let from_query = full_name
            .0
            .map(|name| validate_full_name(&name))
            .transpose()?;
        let full_name = match body.0 {
            Some(body) => validate_full_name(&body.full_name)?,
            None => from_query.ok_or_else(|| Error::BadRequest {
                code: "bad_request",
                detail: "`full_name` is missing: send the JSON body {\"full_name\": \"...\"} \
                         (or the `full_name` query parameter)"
                    .into(),
            })?,
        };
        let db = state.db.get().await?;
        Ok(Json(
            users::set_full_name(&**db, me.user.id, &full_name)
                .await?
                .into(),
        ))
    }

    /// Change the caller's password
    ///
    /// Every other session of the caller is revoked. Wrong current
    /// passwords are throttled per account like logins (429
    /// `account_throttled`).
    #[oai(
        path = "/auth/me/password",
        method = "put",
        operation_id = "change_password"
    )]
    async fn change_password(
        &self,
        state: Data<&AppState>,
        me: BearerCaller,
        body: JsonBody<ChangePasswordRequest>,
    ) -> Result<Json<MessageResponse>> {
        account::change_password(
            &state,
            &me.user,
            me.session_id,
            body.0.current_password,
            body.0.new_password.0,
        )
        .await?;
        Ok(Json(MessageResponse {
            message: "password changed; other sessions were logged out".into(),
        }))
    }
}
