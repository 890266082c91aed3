//! Serialised scan details kept in memory between requests.
//!
//! A scan detail (the scan with all its findings in two shapes) is the
//! heaviest read of the api and the one clients poll. Each answer is kept
//! with the scan's `revision` (migration 13: it grows with every change to
//! the scan row or its findings), and a request first reads the revision
//! with one index lookup that also checks the scan is the caller's; while it
//! is unchanged the kept bytes are sent as they are. A change made by any
//! process moves the revision in Postgres, so no announcement is needed and
//! an answer can never be older than the revision read for the request.
//!
//! Bounded by bytes: bodies over [`MAX_BODY`] are not kept, and past
//! [`BUDGET`] in all, arbitrary entries make room.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use uuid::Uuid;

/// The largest body kept (a scan with a few hundred findings).
pub const MAX_BODY: usize = 256 * 1024;
/// The most bytes kept in all, per process.
pub const BUDGET: usize = 64 * 1024 * 1024;

/// Scan id -> (revision, serialised detail). Request tasks read and write
/// it; the lock is never held across an await.
#[derive(Default)]
pub struct DetailCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Uuid, (i64, Bytes)>,
    bytes: usize,
}

impl DetailCache {
    /// The detail of `scan_id` serialised at `revision`, if kept.
    pub fn get(&self, scan_id: Uuid, revision: i64) -> Option<Bytes> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match inner.entries.get(&scan_id) {
            Some((kept, body)) if *kept == revision => Some(body.clone()),
            _ => None,
        }
    }

    /// Keeps `body` as the detail of `scan_id` at `revision` (unless a newer
    /// revision is already kept, or the body is too large).
    pub fn put(&self, scan_id: Uuid, revision: i64, body: Bytes) {
        if body.len() > MAX_BODY {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((kept, old)) = inner.entries.get(&scan_id) {
            if *kept > revision {
                return;
            }
            let freed = old.len();
            inner.bytes -= freed;
        }
        while inner.bytes + body.len() > BUDGET {
            let Some(victim) = inner.entries.keys().next().copied() else {
                break;
            };
            if let Some((_, old)) = inner.entries.remove(&victim) {
                inner.bytes -= old.len();
            }
        }
        inner.bytes += body.len();
        inner.entries.insert(scan_id, (revision, body));
    }

    /// Bytes kept now.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_served_only_at_the_revision_it_was_read_at() {
        let cache = DetailCache::default();
        let scan = Uuid::new_v4();
        assert_eq!(cache.get(scan, 3), None);
        cache.put(scan, 3, Bytes::from_static(b"{\"v\":3}"));
        assert_eq!(cache.get(scan, 3).as_deref(), Some(&b"{\"v\":3}"[..]));
        assert_eq!(cache.get(scan, 4), None);
        assert_eq!(cache.get(Uuid::new_v4(), 3), None);
        // A slower request that read an older revision does not replace it.
        cache.put(scan, 2, Bytes::from_static(b"{\"v\":2}"));
        assert_eq!(cache.get(scan, 3).as_deref(), Some(&b"{\"v\":3}"[..]));
        cache.put(scan, 4, Bytes::from_static(b"{}"));
        assert_eq!(cache.get(scan, 4).as_deref(), Some(&b"{}"[..]));
        assert_eq!(cache.bytes(), 2);
    }

    #[test]
    fn large_bodies_are_not_kept_and_the_total_stays_within_budget() {
        let cache = DetailCache::default();
        cache.put(Uuid::new_v4(), 1, Bytes::from(vec![b' '; MAX_BODY + 1]));
        assert_eq!(cache.bytes(), 0);
        let body = Bytes::from(vec![b' '; MAX_BODY]);
        for _ in 0..(BUDGET / MAX_BODY + 10) {
            cache.put(Uuid::new_v4(), 1, body.clone());
            assert!(cache.bytes() <= BUDGET);
        }
        assert_eq!(cache.bytes(), BUDGET);
    }
}
