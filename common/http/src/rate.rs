//! Per-host request-rate ceiling.
//!
//! A token bucket with a burst of one, kept as "the earliest instant the
//! next request to this host may start": each request reserves that slot
//! and pushes it one interval further. In any window of one second a host
//! therefore sees at most `rps` request starts (plus the one at the edge),
//! and waiting requests are spread evenly instead of bursting.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Size of the slot table above which finished hosts are forgotten.
const PRUNE_ABOVE: usize = 4096;

pub(crate) struct HostRateLimiter {
    /// The client's own ceiling; None: hosts without an override are not
    /// limited.
    interval: Option<Duration>,
    /// Ceilings set for single hosts (a target's `max_rps_per_host`), in
    /// place of `interval`.
    overrides: Mutex<HashMap<String, Duration>>,
    /// Next free start slot per host; only grows.
    next_slot: Mutex<HashMap<String, Instant>>,
}

impl HostRateLimiter {
    #[cfg(test)]
    pub(crate) fn new(rps: u32) -> HostRateLimiter {
        HostRateLimiter::with_default(Some(rps))
    }

    /// A limiter with the ceiling `rps` for every host (none when None).
    pub(crate) fn with_default(rps: Option<u32>) -> HostRateLimiter {
        HostRateLimiter {
            interval: rps.map(|r| Duration::from_secs(1) / r.max(1)),
            overrides: Mutex::new(HashMap::new()),
            next_slot: Mutex::new(HashMap::new()),
        }
    }

    /// From now on at most `rps` request starts a second to `host`,
    /// whatever the client's own ceiling.
    pub(crate) fn set_host_rps(&self, host: &str, rps: u32) {
        let mut overrides = self.overrides.lock().unwrap_or_else(|p| p.into_inner());
        overrides.insert(
            host.to_ascii_lowercase(),
            Duration::from_secs(1) / rps.max(1),
        );
    }

    /// Back to the client's own ceiling for `host`.
    pub(crate) fn clear_host_rps(&self, host: &str) {
        let mut overrides = self.overrides.lock().unwrap_or_else(|p| p.into_inner());
        overrides.remove(&host.to_ascii_lowercase());
    }

    fn interval_for(&self, host: &str) -> Option<Duration> {
        let overrides = self.overrides.lock().unwrap_or_else(|p| p.into_inner());
        if overrides.is_empty() {
            return self.interval;
        }
        overrides
            .get(&host.to_ascii_lowercase())
            .copied()
            .or(self.interval)
    }

    /// Reserves the next start slot for `host` as seen at `now` and returns
    /// it; the caller waits until then. Pure apart from the reservation, so
    /// tests drive it with their own clock.
    pub(crate) fn reserve(&self, host: &str, now: Instant) -> Instant {
        let Some(interval) = self.interval_for(host) else {
            return now;
        };
        let mut slots = self.next_slot.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match slots.get(host) {
            Some(next) if *next > now => *next,
            _ => now,
        };
        slots.insert(host.to_string(), slot + interval);
        // Hosts whose slot has passed are back to a full bucket and need no
        // entry; dropping them keeps a long scan of many hosts small.
        if slots.len() > PRUNE_ABOVE {
            slots.retain(|_, next| *next > now);
        }
        slot
    }

    /// Waits until a request to `host` may start.
    pub(crate) async fn acquire(&self, host: &str) {
        let now = Instant::now();
        let slot = self.reserve(host, now);
        if slot > now {
            tokio::time::sleep_until(slot.into()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_to_one_host_are_spaced_by_the_interval() {
        let limiter = HostRateLimiter::new(4);
        let t0 = Instant::now();
        let slots: Vec<Duration> = (0..5).map(|_| limiter.reserve("a.test", t0) - t0).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(slots, vec![ms(0), ms(250), ms(500), ms(750), ms(1000)]);
        // Within any one-second window starting at t0, at most 4 starts.
        assert_eq!(slots.iter().filter(|d| **d < ms(1000)).count(), 4);
    }

    #[test]
    fn a_host_override_replaces_the_default_and_can_be_cleared() {
        let limiter = HostRateLimiter::with_default(None);
        let t0 = Instant::now();
        // No default: unlimited.
        assert_eq!(limiter.reserve("a.test", t0), t0);
        assert_eq!(limiter.reserve("a.test", t0), t0);
        limiter.set_host_rps("A.test", 2);
        assert_eq!(limiter.reserve("a.test", t0), t0);
        assert_eq!(
            limiter.reserve("a.test", t0),
            t0 + Duration::from_millis(500)
        );
        assert_eq!(limiter.reserve("b.test", t0), t0);
        assert_eq!(limiter.reserve("b.test", t0), t0);
        limiter.clear_host_rps("a.test");
        let later = t0 + Duration::from_secs(5);
        assert_eq!(limiter.reserve("a.test", later), later);
        assert_eq!(limiter.reserve("a.test", later), later);
    }

    #[test]
    fn hosts_have_separate_budgets_and_idle_time_is_not_banked() {
        let limiter = HostRateLimiter::new(2);
        let t0 = Instant::now();
        assert_eq!(limiter.reserve("a.test", t0), t0);
        assert_eq!(limiter.reserve("b.test", t0), t0);
        assert_eq!(
            limiter.reserve("a.test", t0),
            t0 + Duration::from_millis(500)
        );
        // After a long pause the next request goes at once, but only one:
        // the bucket holds a single token.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(limiter.reserve("a.test", later), later);
        assert_eq!(
            limiter.reserve("a.test", later),
            later + Duration::from_millis(500)
        );
    }
}
