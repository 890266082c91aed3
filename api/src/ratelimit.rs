//! Per-user and per-IP rate limits, as a poem middleware around the whole
//! HTTP surface (outside the problem guard, so it sees every final response,
//! errors included, and adds the `X-RateLimit-*` headers to each).
//!
//! Counting is a fixed one-minute window in Redis (`INCRBY` + `EXPIRE` in
//! one pipeline on `rate_window(subject, minute)`), so every api process
//! shares one budget per subject. A process reserves slots of a window in
//! blocks (a [`Lease`]) and hands them out without asking Redis again: one
//! slot at a time while the limit is small or nearly spent (so counting is
//! exact there), up to [`MAX_BLOCK`] at a time when much of a large limit is
//! left. Every request served holds a slot counted in Redis, so the processes
//! together never serve more than the limit; what a process reserved and did
//! not use before the window ended is counted as used. A window found spent
//! stays spent (counts only grow), so its further requests are refused
//! without Redis. Subjects:
//! - `user:<id>` when the request carries a valid Bearer token (signature and
//!   expiry checked, no database) or a known API key; the limit is the
//!   tier's `rate_limit_rpm`;
//! - `ip:<address>` for login, register and the tier list, and for requests
//!   without valid credentials; the limit is `SCANFLEET_RATE__ANON_RPM`.
//!
//! The user's tier (and an API key's owner) are cached in-process for a few
//! seconds, so a limited request costs one Redis round trip and, at most
//! every [`CACHE_TTL`], one indexed query. A tier change, made by this
//! process or announced by the database to its auth-cache listener
//! ([`scanfleet_core::store::changes::note_change`]), drops the user's cached tier at
//! once.
//!
//! The payment webhook, `/healthz`, `/readyz`, the docs and the OpenAPI
//! document are not limited and carry no rate-limit headers.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fred::interfaces::{ClientLike, KeysInterface};
use poem::http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use uuid::Uuid;

use crate::auth::tokens::sha256;
use crate::error::{ApiError, Error};
use crate::state::AppState;
use scanfleet_core::store::api_keys;

/// How long a user's tier, or an API key's owner, is reused without asking
/// Postgres again.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// The counting window.
pub const WINDOW_SECS: u64 = 60;
/// A Redis round trip slower than this counts as Redis being down.
const REDIS_TIMEOUT: Duration = Duration::from_millis(500);
/// Cache size above which expired entries are swept.
const CACHE_SWEEP_AT: usize = 10_000;
/// The most slots one reservation takes.
const MAX_BLOCK: u64 = 64;
/// A reservation takes at most this share of what is left of the limit.
const BLOCK_SHARE: u64 = 64;

pub const LIMIT_HEADER: &str = "x-ratelimit-limit";
pub const REMAINING_HEADER: &str = "x-ratelimit-remaining";
pub const RESET_HEADER: &str = "x-ratelimit-reset";

/// The middleware; mount it outside the problem guard.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Arc<Limiter>,
}

impl RateLimit {
    pub fn new(state: AppState) -> RateLimit {
        RateLimit {
            limiter: Arc::new(Limiter {
                state,
                user_rpm: Mutex::new(HashMap::new()),
                key_owner: Mutex::new(HashMap::new()),
                leases: Mutex::new(HashMap::new()),
                skipping: AtomicBool::new(false),
            }),
        }
    }
}

impl<E: Endpoint> Middleware<E> for RateLimit {
    type Output = RateLimited<E>;

    fn transform(&self, ep: E) -> Self::Output {
        RateLimited {
            inner: ep,
            limiter: self.limiter.clone(),
        }
    }
}

pub struct RateLimited<E> {
    inner: E,
    limiter: Arc<Limiter>,
}

/// An in-process cache entry.
type Cached<T> = (T, Instant);
/// An API key's owner and their tier's requests per minute.
type KeyOwner = Option<(Uuid, u32)>;

struct Limiter {
    state: AppState,
    /// user id -> the tier's requests per minute (None: no such user).
    /// Written by request tasks on a miss; plain `Mutex`, never held across
    /// an await.
    user_rpm: Mutex<HashMap<Uuid, Cached<Option<u32>>>>,
    /// SHA-256 of an API key -> (owner, requests per minute), None for an
    /// unknown key. Same locking rule.
    key_owner: Mutex<HashMap<Vec<u8>, Cached<KeyOwner>>>,
    /// Subject key -> this process's reservation in the current window.
    leases: Mutex<HashMap<String, Arc<Reservation>>>,
    /// Set while requests go uncounted because Redis is unreachable, so
    /// the outage is logged once at each end.
    skipping: AtomicBool,
}

/// Slots of one subject's window that this process reserved in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lease {
    window: u64,
    /// The limit the slots were reserved under; a tier change starts over.
    limit: u32,
    /// The window's count in Redis after this process's last reservation,
    /// not counting slots asked for beyond the limit.
    counted: u64,
    /// Reserved slots not yet handed out.
    left: u64,
}

impl Lease {
    /// Hands out one slot of `window` under `limit`: `Some(count)` when the
    /// lease decides (a slot, or the window known spent), `None` when Redis
    /// must be asked.
    fn take(&mut self, window: u64, limit: u32) -> Option<u64> {
        if self.window != window || self.limit != limit {
            return None;
        }
        if self.left > 0 {
            self.left -= 1;
            return Some(self.counted - self.left);
        }
        (self.counted >= u64::from(limit)).then_some(self.counted + 1)
    }

    /// How many slots the next reservation asks for.
    fn block(&self, window: u64, limit: u32) -> u64 {
        let counted = if self.window == window && self.limit == limit {
            self.counted
        } else {
            0
        };
        (u64::from(limit).saturating_sub(counted) / BLOCK_SHARE).clamp(1, MAX_BLOCK)
    }

    /// The lease after Redis counted `asked` more slots, reaching `total`:
    /// the request that asked takes the first slot granted, the rest are
    /// left; returns the request's count.
    fn reserved(&mut self, window: u64, limit: u32, asked: u64, total: u64) -> u64 {
        let before = total.saturating_sub(asked);
        let granted = u64::from(limit).saturating_sub(before).min(asked);
        *self = Lease {
            window,
            limit,
            counted: before + granted,
            left: granted.saturating_sub(1),
        };
        if granted == 0 {
            total
        } else {
            before + 1
        }
    }
}

/// A subject's lease and the lock that lets one request at a time refill it.
#[derive(Default)]
struct Reservation {
    lease: Mutex<Lease>,
    refill: tokio::sync::Mutex<()>,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            window: u64::MAX,
            limit: 0,
            counted: 0,
            left: 0,
        }
    }
}

/// Who a request is counted against, and at what limit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Subject {
    key: String,
    limit: u32,
}

/// The outcome of counting one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Count {
    limit: u32,
    used: u64,
    reset_secs: u64,
}

impl Count {
    fn exceeded(&self) -> bool {
        self.used > u64::from(self.limit)
    }

    fn remaining(&self) -> u64 {
        u64::from(self.limit).saturating_sub(self.used)
    }

    fn apply(&self, resp: &mut Response) {
        let headers = resp.headers_mut();
        for (name, value) in [
            (LIMIT_HEADER, u64::from(self.limit)),
            (REMAINING_HEADER, self.remaining()),
            (RESET_HEADER, self.reset_secs),
        ] {
            headers.insert(HeaderName::from_static(name), HeaderValue::from(value));
        }
    }
}

/// What the limiter does with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathClass {
    /// Not limited, no headers.
    Exempt,
    /// Always counted per client IP.
    Anonymous,
    /// Counted per user when credentials are valid, else per IP.
    Authenticated,
}

fn classify(method: &poem::http::Method, path: &str) -> PathClass {
    let path = path.trim_end_matches('/');
    // The web console's pages are not API requests: a person browsing
    // must not spend the tier's budget. Its sign-in and register forms are
    // limited per address as the API's are.
    if !path.starts_with("/api/") {
        return match path {
            "/signin" | "/register" if method == poem::http::Method::POST => PathClass::Anonymous,
            _ => PathClass::Exempt,
        };
    }
    match path {
        "/healthz"
        | "/readyz"
        | "/metrics"
        | "/api/v1/openapi.json"
        | "/api/v1/subscriptions/webhook" => PathClass::Exempt,
        _ if path == "/api/v1/docs" || path.starts_with("/api/v1/docs/") => PathClass::Exempt,
        "/api/v1/auth/login" | "/api/v1/auth/register" | "/api/v1/subscriptions/tiers" => {
            PathClass::Anonymous
        }
        _ => PathClass::Authenticated,
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The Bearer token of an `Authorization` header, or a WebSocket's `token`
/// query parameter (browsers cannot set headers on a WebSocket handshake).
fn bearer_token(req: &Request) -> Option<String> {
    if let Some(v) = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, token) = v.trim().split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_string());
    }
    if req.uri().path().starts_with("/api/v1/ws/") {
        return req.uri().query().and_then(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == "token")
                .map(|(_, v)| v.to_string())
        });
    }
    None
}

fn client_ip(req: &Request) -> String {
    req.remote_addr()
        .as_socket_addr()
        .map(|a| match a.ip() {
            // An IPv4 client on a dual-stack socket is the same client.
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .unwrap_or(IpAddr::V6(v6)),
            ip => ip,
        })
        .map(|ip| ip.to_string())
        .unwrap_or_else(|| "unknown".to_string())
}

fn cached<K: std::hash::Hash + Eq + Clone, V: Clone>(
    map: &Mutex<HashMap<K, Cached<V>>>,
    key: &K,
) -> Option<Cached<V>> {
    let map = map.lock().unwrap_or_else(|p| p.into_inner());
    map.get(key)
        .filter(|(_, at)| at.elapsed() < CACHE_TTL)
        .cloned()
}

/// Whether a cache entry for `user_id` made at `cached_at` predates a tier
/// change.
fn outdated(user_id: Uuid, cached_at: Instant) -> bool {
    scanfleet_core::store::changes::changed_since(user_id, cached_at)
}

fn remember<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, Cached<V>>>, key: K, value: V) {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= CACHE_SWEEP_AT {
        map.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
    }
    map.insert(key, (value, Instant::now()));
}

impl Limiter {
    fn anonymous(&self, req: &Request) -> Subject {
        Subject {
            key: format!("ip:{}", client_ip(req)),
            limit: self.state.settings.rate.anon_rpm,
        }
    }

    fn user(id: Uuid, rpm: u32) -> Subject {
        Subject {
            key: format!("user:{id}"),
            limit: rpm,
        }
    }

    async fn subject(&self, req: &Request, class: PathClass) -> Result<Subject, Error> {
        if class == PathClass::Anonymous {
            return Ok(self.anonymous(req));
        }
        if let Some(token) = bearer_token(req) {
            if let Ok(claims) = self.state.jwt.verify(&token) {
                if let Some(rpm) = self.user_rpm(claims.sub).await? {
                    return Ok(Self::user(claims.sub, rpm));
                }
            }
            return Ok(self.anonymous(req));
        }
        if let Some(key) = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()) {
            if let Some((user_id, rpm)) = self.key_owner(key.trim()).await? {
                return Ok(Self::user(user_id, rpm));
            }
        }
        Ok(self.anonymous(req))
    }

    async fn user_rpm(&self, user_id: Uuid) -> Result<Option<u32>, Error> {
        if let Some((hit, at)) = cached(&self.user_rpm, &user_id) {
            if !outdated(user_id, at) {
                return Ok(hit);
            }
        }
        let db = self.state.db.get().await?;
        let rpm = db
            .query_opt(
                "SELECT t.rate_limit_rpm FROM users u JOIN tiers t ON t.slug = u.tier_slug
                 WHERE u.id = $1",
                &[&user_id],
            )
            .await?
            .map(|r| r.try_get::<_, i32>("rate_limit_rpm"))
            .transpose()?
            .map(|rpm| rpm.max(1) as u32);
        remember(&self.user_rpm, user_id, rpm);
        Ok(rpm)
    }

    async fn key_owner(&self, raw: &str) -> Result<KeyOwner, Error> {
        let hash = sha256(raw);
        if let Some((hit, at)) = cached(&self.key_owner, &hash) {
            if !hit.is_some_and(|(user_id, _)| outdated(user_id, at)) {
                return Ok(hit);
            }
        }
        let db = self.state.db.get().await?;
        let owner = api_keys::rate_subject(&**db, &hash)
            .await?
            .map(|(id, rpm)| (id, rpm.max(1) as u32));
        remember(&self.key_owner, hash, owner);
        Ok(owner)
    }

    /// This process's reservation for `subject`.
    fn reservation(&self, subject: &Subject) -> Arc<Reservation> {
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = leases.get(&subject.key) {
            return r.clone();
        }
        if leases.len() >= CACHE_SWEEP_AT {
            let window = now_secs() / WINDOW_SECS;
            leases
                .retain(|_, r| r.lease.lock().unwrap_or_else(|p| p.into_inner()).window >= window);
        }
        let r = Arc::new(Reservation::default());
        leases.insert(subject.key.clone(), r.clone());
        r
    }

    /// Counts one request of `subject` in the current window.
    async fn count(&self, subject: &Subject) -> Result<Count, Error> {
        let now = now_secs();
        let window = now / WINDOW_SECS;
        let count = |used| Count {
            limit: subject.limit,
            used,
            reset_secs: WINDOW_SECS - now % WINDOW_SECS,
        };
        let reservation = self.reservation(subject);
        let lease = || reservation.lease.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(used) = lease().take(window, subject.limit) {
            return Ok(count(used));
        }
        // One request refills; the others wait for it and take from what it
        // reserved.
        let _refill = reservation.refill.lock().await;
        let asked = {
            let mut l = lease();
            if let Some(used) = l.take(window, subject.limit) {
                return Ok(count(used));
            }
            l.block(window, subject.limit)
        };
        let key = self.state.keys.rate_window(&subject.key, window as i64);
        let pipeline = self.state.redis.pipeline();
        let _: () = pipeline.incr_by(&key, asked as i64).await?;
        // Outlives the window a little, so a clock skew between api
        // processes cannot drop a live counter.
        let _: () = pipeline.expire(&key, 2 * WINDOW_SECS as i64, None).await?;
        let (total, _): (u64, i64) = pipeline.all().await?;
        let used = lease().reserved(window, subject.limit, asked, total);
        Ok(count(used))
    }

    /// The subject's count, or `None` when it cannot be had.
    async fn check(&self, req: &Request, class: PathClass) -> Option<Count> {
        // While Redis is away the client queues commands until it is back:
        // answer at once instead, and count again as soon as it reconnects.
        if !self.state.redis.is_connected() {
            if !self.skipping.swap(true, Ordering::Relaxed) {
                tracing::warn!("rate limiting skipped while Redis is unreachable");
            }
            metrics::counter!("scanfleet_rate_limit_skipped_total").increment(1);
            return None;
        }
        if self.skipping.swap(false, Ordering::Relaxed) {
            tracing::info!("rate limiting resumed: Redis is back");
        }
        let work = async {
            let subject = self.subject(req, class).await?;
            self.count(&subject).await
        };
        // Fail open: when Redis (or Postgres, for a tier lookup) is down or
        // slow, serving requests unlimited is better than failing every one
        // of them; the outage is logged and /readyz reports it.
        match tokio::time::timeout(REDIS_TIMEOUT, work).await {
            Ok(Ok(count)) => Some(count),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "rate limiting skipped: cannot count the request");
                None
            }
            Err(_) => {
                tracing::warn!("rate limiting skipped: counting timed out");
                None
            }
        }
    }
}

impl<E: Endpoint> Endpoint for RateLimited<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        let class = classify(req.method(), req.uri().path());
        if !self.limiter.state.settings.rate.enabled || class == PathClass::Exempt {
            return self.inner.call(req).await.map(IntoResponse::into_response);
        }
        let Some(count) = self.limiter.check(&req, class).await else {
            return self.inner.call(req).await.map(IntoResponse::into_response);
        };
        let mut resp = if count.exceeded() {
            metrics::counter!("scanfleet_rate_limited_total").increment(1);
            ApiError(Error::RateLimited {
                retry_after_secs: count.reset_secs,
            })
            .into_response()
        } else {
            match self.inner.call(req).await {
                Ok(r) => r.into_response(),
                // The problem guard inside turns errors into responses; this
                // is only a fallback.
                Err(e) => e.into_response(),
            }
        };
        count.apply(&mut resp);
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_endpoints_docs_and_the_webhook_are_not_limited() {
        for p in [
            "/healthz",
            "/readyz",
            "/api/v1/openapi.json",
            "/api/v1/docs",
            "/api/v1/docs/index.html",
            "/api/v1/subscriptions/webhook",
        ] {
            assert_eq!(
                classify(&poem::http::Method::GET, p),
                PathClass::Exempt,
                "{p}"
            );
        }
    }

    #[test]
    fn login_register_and_tiers_are_limited_per_ip() {
        for p in [
            "/api/v1/auth/login",
            "/api/v1/auth/register/",
            "/api/v1/subscriptions/tiers",
        ] {
            assert_eq!(
                classify(&poem::http::Method::POST, p),
                PathClass::Anonymous,
                "{p}"
            );
        }
        for p in [
            "/api/v1/scans",
            "/api/v1/auth/me",
            "/api/v1/docsx",
            "/api/nope",
        ] {
            assert_eq!(
                classify(&poem::http::Method::GET, p),
                PathClass::Authenticated,
                "{p}"
            );
        }
    }

    #[test]
    fn console_pages_are_not_counted_but_its_sign_in_and_register_are_per_ip() {
        use poem::http::Method;
        for p in ["/", "/targets", "/scans/x", "/nope"] {
            assert_eq!(classify(&Method::GET, p), PathClass::Exempt, "{p}");
            assert_eq!(classify(&Method::POST, p), PathClass::Exempt, "{p}");
        }
        for p in ["/signin", "/register"] {
            assert_eq!(classify(&Method::GET, p), PathClass::Exempt, "{p}");
            assert_eq!(classify(&Method::POST, p), PathClass::Anonymous, "{p}");
        }
    }

    #[test]
    fn a_tier_change_outdates_only_older_cache_entries_of_that_user() {
        let user = Uuid::new_v4();
        let before = Instant::now();
        assert!(!outdated(user, before));
        scanfleet_core::store::changes::note_change(user);
        assert!(outdated(user, before));
        assert!(!outdated(user, Instant::now()));
        assert!(!outdated(Uuid::new_v4(), before));
    }

    #[test]
    fn a_small_limit_is_reserved_one_slot_at_a_time() {
        let mut l = Lease::default();
        assert_eq!(l.take(7, 10), None);
        assert_eq!(l.block(7, 10), 1);
        // Redis counted 1: the request is the window's first.
        assert_eq!(l.reserved(7, 10, 1, 1), 1);
        assert_eq!(l.take(7, 10), None);
        // Another process used 5 meanwhile.
        assert_eq!(l.reserved(7, 10, 1, 7), 7);
        assert_eq!(l.reserved(7, 10, 1, 11), 11);
        // Spent: refused without Redis for the rest of the window...
        assert_eq!(l.take(7, 10), Some(11));
        // ...but not under another limit (a tier change) or window.
        assert_eq!(l.take(7, 60), None);
        assert_eq!(l.take(8, 10), None);
    }

    #[test]
    fn a_large_limit_is_reserved_in_blocks_that_shrink_near_the_end() {
        let limit = 1_000_000;
        let mut l = Lease::default();
        assert_eq!(l.block(1, limit), MAX_BLOCK);
        assert_eq!(l.reserved(1, limit, MAX_BLOCK, MAX_BLOCK), 1);
        for used in 2..=MAX_BLOCK {
            assert_eq!(l.take(1, limit), Some(used));
        }
        assert_eq!(l.take(1, limit), None);
        // Near the end of the budget, blocks shrink to one slot.
        let mut near = Lease {
            window: 1,
            limit: 1000,
            counted: 990,
            left: 0,
        };
        assert_eq!(near.block(1, 1000), 1);
        near.counted = 0;
        assert_eq!(near.block(1, 1000), 15);
    }

    #[test]
    fn a_block_crossing_the_limit_grants_only_what_is_left() {
        let mut l = Lease::default();
        // 5 slots asked at 98 counted before: 2 granted (99, 100), the
        // request takes 99 and one is left.
        assert_eq!(l.reserved(1, 100, 5, 103), 99);
        assert_eq!(l.take(1, 100), Some(100));
        assert_eq!(l.take(1, 100), Some(101));
        // Nothing granted: the request is over the limit.
        let mut over = Lease::default();
        assert_eq!(over.reserved(1, 100, 3, 110), 110);
        assert!(Count {
            limit: 100,
            used: 110,
            reset_secs: 1
        }
        .exceeded());
    }

    #[test]
    fn counts_report_what_is_left() {
        let c = Count {
            limit: 10,
            used: 3,
            reset_secs: 42,
        };
        assert_eq!(c.remaining(), 7);
        assert!(!c.exceeded());
        let over = Count { used: 11, ..c };
        assert!(over.exceeded());
        assert_eq!(over.remaining(), 0);
        let at = Count { used: 10, ..c };
        assert!(!at.exceeded());
        let mut resp = Response::default();
        c.apply(&mut resp);
        assert_eq!(resp.headers()[LIMIT_HEADER], "10");
        assert_eq!(resp.headers()[REMAINING_HEADER], "7");
        assert_eq!(resp.headers()[RESET_HEADER], "42");
    }

    #[test]
    fn bearer_tokens_come_from_the_header_or_the_websocket_query() {
        let r = Request::builder()
            .uri_str("/api/v1/scans")
            .header(AUTHORIZATION, "Bearer abc.def")
            .finish();
        assert_eq!(bearer_token(&r).as_deref(), Some("abc.def"));
        let ws = Request::builder()
            .uri_str("/api/v1/ws/scans/1?x=1&token=tok")
            .finish();
        assert_eq!(bearer_token(&ws).as_deref(), Some("tok"));
        let basic = Request::builder()
            .uri_str("/api/v1/scans")
            .header(AUTHORIZATION, "Basic xyz")
            .finish();
        assert_eq!(bearer_token(&basic), None);
    }
}
