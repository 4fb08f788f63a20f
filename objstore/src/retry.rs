//! Bounded retries with exponential backoff and full jitter, for remote providers ([`crate::S3`]).
//!
//! Attempt `n` (0-based, the first retry is `n = 0`) sleeps a uniformly random duration in
//! `[0, min(max_delay, base_delay * 2^n)]` ("full jitter"), so many clients throttled together
//! spread out instead of retrying in lock-step. At most `max_attempts` attempts are made in total.

use std::time::Duration;

/// How often and how patiently a remote call is repeated after a transient failure
/// (throttling, HTTP 5xx, timeouts, connection loss).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (`1` = never retry). Default 6.
    pub max_attempts: u32,
    /// Backoff cap of the first retry. Default 50 ms.
    pub base_delay: Duration,
    /// Largest backoff cap of any retry. Default 5 s.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 6,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// A policy that makes exactly one attempt.
    pub fn no_retries() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The upper bound of the backoff before retry number `retry` (0-based):
    /// `min(max_delay, base_delay * 2^retry)`.
    pub fn backoff_cap(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .map_or(self.max_delay, |d| d.min(self.max_delay))
    }

    /// The backoff before retry number `retry` (0-based) for a random value `random`
    /// (uniform over `u64`): `backoff_cap(retry) * random / 2^64`, i.e. full jitter.
    pub fn backoff(&self, retry: u32, random: u64) -> Duration {
        let cap = self.backoff_cap(retry);
        let nanos = cap.as_nanos();
        let scaled = nanos.saturating_mul(u128::from(random)) >> 64;
        Duration::from_nanos(u64::try_from(scaled).unwrap_or(u64::MAX))
    }

    /// [`RetryPolicy::backoff`] with a fresh random value (operating-system randomness; a
    /// failing random source yields the cap, never an error).
    pub fn jittered_backoff(&self, retry: u32) -> Duration {
        let mut raw = [0u8; 8];
        match getrandom::fill(&mut raw) {
            Ok(()) => self.backoff(retry, u64::from_le_bytes(raw)),
            Err(_) => self.backoff_cap(retry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_cap_doubles_then_saturates_at_max_delay() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(100),
        };
        assert_eq!(p.backoff_cap(0), Duration::from_millis(10));
        assert_eq!(p.backoff_cap(1), Duration::from_millis(20));
        assert_eq!(p.backoff_cap(3), Duration::from_millis(80));
        assert_eq!(p.backoff_cap(4), Duration::from_millis(100));
        assert_eq!(p.backoff_cap(200), Duration::from_millis(100));
    }

    #[test]
    fn jitter_stays_within_zero_and_the_cap() {
        let p = RetryPolicy::default();
        for retry in 0..12 {
            assert_eq!(p.backoff(retry, 0), Duration::ZERO);
            let top = p.backoff(retry, u64::MAX);
            assert!(top <= p.backoff_cap(retry));
            assert!(top + Duration::from_nanos(1) >= p.backoff_cap(retry));
            let mid = p.backoff(retry, u64::MAX / 2);
            assert!(mid <= top);
            assert!(p.jittered_backoff(retry) <= p.backoff_cap(retry));
        }
    }

    #[test]
    fn no_retries_makes_one_attempt() {
        assert_eq!(RetryPolicy::no_retries().max_attempts, 1);
    }
}
