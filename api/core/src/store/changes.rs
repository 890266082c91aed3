//! The change log of credentials: which users' account, sessions, API keys
//! or subscription changed, and when. Every such change fires a trigger
//! (migration 0012) that sends `NOTIFY scanfleet_auth, '<user id>'` at
//! commit, and the store records its own changes here right after their
//! commit; whoever caches who a credential belongs to (the api's auth
//! cache, the rate limiter's tiers) asks [`changed_since`] before it
//! trusts an entry.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

/// The channel the triggers notify.
pub const CHANNEL: &str = "scanfleet_auth";
/// How long a change is remembered: longer than any cache entry lives.
const CHANGE_MEMORY: Duration = Duration::from_secs(2 * 60);
/// Remembered changes above which old ones are swept.
const SWEEP_AT: usize = 50_000;

/// Users whose account, sessions, keys or subscription changed, and when.
/// Process-wide: user ids are unique, so several apps in one process (the
/// tests) cannot disturb each other.
static CHANGES: LazyLock<Mutex<HashMap<Uuid, Instant>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Records that `user_id`'s credentials or tier just changed; call after the
/// commit (or on the trigger's notification).
pub fn note_change(user_id: Uuid) {
    let mut changes = CHANGES.lock().unwrap_or_else(|p| p.into_inner());
    if changes.len() > SWEEP_AT {
        changes.retain(|_, at| at.elapsed() < CHANGE_MEMORY);
    }
    changes.insert(user_id, Instant::now());
}

/// Whether `user_id` changed at or after `since`.
pub fn changed_since(user_id: Uuid, since: Instant) -> bool {
    CHANGES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&user_id)
        .is_some_and(|changed| *changed >= since)
}
