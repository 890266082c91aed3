//! Per-account throttling of password guesses, on top of the per-IP limit
//! of [`crate::ratelimit`]: a guesser spread over many addresses still gets
//! `SCANFLEET_RATE__ACCOUNT_FAILURES` wrong passwords per account per
//! `SCANFLEET_RATE__ACCOUNT_WINDOW_SECS`, then 429 until the window ends.
//!
//! The counter lives in Redis so every api process shares it. Logins are
//! counted by a hash of the normalised email, known or not (so a refusal
//! does not tell whether the account exists); password changes by user id.
//! A correct password clears the counter. The window starts at the first
//! failure and is not extended by later ones.
//!
//! Unlike request rate limiting this fails closed only for the check: when
//! Redis cannot be asked, the request is refused with 503 rather than let
//! unlimited guesses through.

use fred::interfaces::KeysInterface;
use uuid::Uuid;

use crate::auth::tokens::sha256;
use crate::error::Error;
use crate::state::AppState;

/// Whose failures are counted.
pub enum Account<'a> {
    /// A login, by normalised email.
    Login(&'a str),
    /// A password change, by user.
    User(Uuid),
}

fn key(state: &AppState, account: &Account<'_>) -> String {
    let subject = match account {
        Account::Login(email) => format!("login:{}", hex::encode(sha256(email))),
        Account::User(id) => format!("user:{id}"),
    };
    state.keys.auth_failures(&subject)
}

/// 429 when the account has used up its failures in the current window.
pub async fn check(state: &AppState, account: &Account<'_>) -> Result<(), Error> {
    let key = key(state, account);
    let failures: Option<u64> = state.redis.get(&key).await?;
    if failures.unwrap_or(0) >= u64::from(state.settings.rate.account_failures) {
        let ttl: i64 = state.redis.ttl(&key).await?;
        return Err(Error::AccountThrottled {
            retry_after_secs: u64::try_from(ttl)
                .unwrap_or(state.settings.rate.account_window_secs)
                .max(1),
        });
    }
    Ok(())
}

/// Counts one wrong password.
pub async fn failed(state: &AppState, account: &Account<'_>) -> Result<(), Error> {
    let key = key(state, account);
    let pipeline = state.redis.pipeline();
    let _: () = pipeline.incr(&key).await?;
    // NX: the window runs from the first failure.
    let _: () = pipeline
        .expire(
            &key,
            state.settings.rate.account_window_secs as i64,
            Some(fred::types::ExpireOptions::NX),
        )
        .await?;
    let _: (u64, i64) = pipeline.all().await?;
    Ok(())
}

/// A correct password: the account starts afresh.
pub async fn succeeded(state: &AppState, account: &Account<'_>) -> Result<(), Error> {
    let _: i64 = state.redis.del(key(state, account)).await?;
    Ok(())
}
