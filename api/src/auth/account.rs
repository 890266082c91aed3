//! The account operations the API and the web console share: register,
//! check a sign-in (throttled per account, the same time whether or not
//! the email exists), change a password (revoking the other sessions).

use scanfleet_core::store::sessions;
use scanfleet_core::store::users::{self, NewUser, User};
use uuid::Uuid;

use super::password;
use crate::error::Error;
use crate::state::AppState;
use crate::throttle;
use crate::validate::{normalize_email, validate_full_name};

/// Creates an account of role `user` on the `demo` tier.
pub async fn register(
    state: &AppState,
    email: &str,
    new_password: String,
    full_name: &str,
) -> Result<User, Error> {
    let email = normalize_email(email)?;
    password::validate("password", &new_password)?;
    let full_name = validate_full_name(full_name)?;
    let hash = password::hash(new_password).await?;
    let db = state.db.get().await?;
    let user = users::create(
        &**db,
        NewUser {
            email: &email,
            password_hash: &hash,
            full_name: &full_name,
            role: "user",
            tier_slug: "demo",
        },
    )
    .await?;
    tracing::info!(user_id = %user.id, "user registered");
    Ok(user)
}

/// The user whose email and password these are. A wrong email and a wrong
/// password give the same error in the same time; too many wrong
/// passwords for one email are refused for a while (`AccountThrottled`);
/// a disabled account is `Forbidden`.
pub async fn authenticate(state: &AppState, email: &str, given: String) -> Result<User, Error> {
    let email = normalize_email(email)?;
    let account = throttle::Account::Login(&email);
    throttle::check(state, &account).await?;
    let db = state.db.get().await?;
    let user = users::find_by_email(&**db, &email).await?;
    // Verify against a real hash either way so timing does not reveal
    // whether the email exists.
    let stored = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| state.dummy_password_hash.to_string());
    let matches = password::verify(given, stored).await?;
    let user = match user {
        Some(u) if matches => u,
        _ => {
            throttle::failed(state, &account).await?;
            return Err(Error::Unauthenticated("invalid email or password".into()));
        }
    };
    throttle::succeeded(state, &account).await?;
    if user.disabled {
        return Err(Error::forbidden(
            "account_disabled",
            "this account is disabled",
        ));
    }
    Ok(user)
}

/// Changes the user's password after checking the current one (throttled
/// per account), and revokes every session but `keep`.
pub async fn change_password(
    state: &AppState,
    user: &User,
    keep: Option<Uuid>,
    current: String,
    new_password: String,
) -> Result<u64, Error> {
    password::validate("new_password", &new_password)?;
    let account = throttle::Account::User(user.id);
    throttle::check(state, &account).await?;
    if !password::verify(current, user.password_hash.clone()).await? {
        throttle::failed(state, &account).await?;
        return Err(Error::invalid(
            "current_password",
            "does not match the current password",
        ));
    }
    throttle::succeeded(state, &account).await?;
    let hash = password::hash(new_password).await?;
    let db = state.db.get().await?;
    users::set_password_hash(&**db, user.id, &hash).await?;
    let revoked = sessions::revoke_all_except(&**db, user.id, keep, "password changed").await?;
    tracing::info!(user_id = %user.id, revoked, "password changed");
    Ok(revoked)
}
