//! An in-process cache of who a credential belongs to, so that an
//! authenticated request normally costs no database query, while logout,
//! password changes, key deletion, disabling and tier changes still take
//! effect on the next request.
//!
//! How revocation stays immediate:
//! - Every change to a user, a session, an API key or a subscription fires a
//!   trigger (migration 0011) that sends `NOTIFY scanfleet_auth, '<user id>'`
//!   at commit. Each api process listens on a dedicated connection
//!   ([`listen`]) and records the user as changed ([`note_change`]); a cached
//!   entry filled before the user's last change is not used.
//! - The process that makes a change also records it itself right after its
//!   commit, so its own next request never waits for the notification.
//! - While the listening connection is down (and until it first connects),
//!   the cache is bypassed: every request reads the database.
//! - An entry also ends at its session's or key's expiry, at the end of a
//!   paid period due to lapse (the full path then settles the subscription),
//!   and after [`ENTRY_TTL`] in any case.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use scanfleet_core::store::api_keys::KeyOwner;
use scanfleet_core::store::changes::{changed_since, note_change, CHANNEL};
use scanfleet_core::store::listen::{self, Heard};
use scanfleet_core::store::sessions::SessionUser;

/// The longest an entry is used without reading the database again.
pub const ENTRY_TTL: Duration = Duration::from_secs(60);
/// Entries above which expired ones are swept.
const SWEEP_AT: usize = 50_000;

/// What a credential resolved to.
#[derive(Debug, Clone)]
pub enum Cached {
    Session(SessionUser),
    ApiKey(KeyOwner),
}

impl Cached {
    fn user_id(&self) -> Uuid {
        match self {
            Cached::Session(s) => s.user.id,
            Cached::ApiKey(k) => k.user.id,
        }
    }

    /// The end of the session or key, or of a paid period due to lapse,
    /// whichever comes first: the entry is not used after it.
    fn valid_until(&self) -> DateTime<Utc> {
        let (expires, lapses) = match self {
            Cached::Session(s) => (s.expires_at, s.lapses_at),
            Cached::ApiKey(k) => (k.key.expires_at, k.lapses_at),
        };
        lapses.map_or(expires, |l| l.min(expires))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CacheKey {
    Session(Uuid),
    /// SHA-256 of the raw key.
    ApiKey(Vec<u8>),
}

struct Entry {
    value: Cached,
    /// Taken before the database was read.
    filled_at: Instant,
}

#[derive(Default)]
pub struct AuthCache {
    entries: Mutex<HashMap<CacheKey, Entry>>,
    /// Whether the invalidation listener is connected.
    live: AtomicBool,
}

impl AuthCache {
    /// The instant to pass to [`AuthCache::put`]; take it before reading the
    /// database, so that a change committed during the read is not hidden.
    pub fn fill_start(&self) -> Instant {
        Instant::now()
    }

    /// A usable entry, if there is one.
    pub fn get(&self, key: &CacheKey) -> Option<Cached> {
        if !self.live.load(Ordering::Acquire) {
            return None;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.get(key)?;
        let usable = entry.filled_at.elapsed() < ENTRY_TTL
            && entry.value.valid_until() > Utc::now()
            && !changed_since(entry.value.user_id(), entry.filled_at);
        if usable {
            Some(entry.value.clone())
        } else {
            entries.remove(key);
            None
        }
    }

    /// Stores what the database said at `filled_at` (from
    /// [`AuthCache::fill_start`]).
    pub fn put(&self, key: CacheKey, value: Cached, filled_at: Instant) {
        if !self.live.load(Ordering::Acquire) || changed_since(value.user_id(), filled_at) {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= SWEEP_AT {
            let now = Utc::now();
            entries.retain(|_, e| e.filled_at.elapsed() < ENTRY_TTL && e.value.valid_until() > now);
            if entries.len() >= SWEEP_AT {
                entries.clear();
            }
        }
        entries.insert(key, Entry { value, filled_at });
    }

    /// Updates an API key's last use in its entry, if cached.
    pub fn touch_key(&self, key: &CacheKey, at: DateTime<Utc>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Entry {
            value: Cached::ApiKey(owner),
            ..
        }) = entries.get_mut(key)
        {
            owner.key.last_used_at = Some(at);
        }
    }

    /// Drops every entry.
    fn forget_all(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn set_live(&self, live: bool) {
        if !live {
            self.live.store(false, Ordering::Release);
        }
        // Whatever was cached may have missed notifications.
        self.forget_all();
        if live {
            self.live.store(true, Ordering::Release);
        }
    }

    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }
}

/// Listens for the triggers' notifications until `stop`, reconnecting with
/// backoff; the cache is used only while connected.
pub async fn listen(
    cache: std::sync::Arc<AuthCache>,
    database_url: String,
    stop: CancellationToken,
) {
    listen::listen(
        &database_url,
        CHANNEL,
        "auth cache",
        &stop,
        |heard| match heard {
            Heard::Listening => {
                cache.set_live(true);
                tracing::debug!("auth cache: listening for credential changes");
            }
            Heard::Notified(payload) => match payload.parse::<Uuid>() {
                Ok(user) => note_change(user),
                // Not one user: forget everyone.
                Err(_) => cache.forget_all(),
            },
            Heard::Lost => cache.set_live(false),
        },
    )
    .await;
    cache.set_live(false);
}
