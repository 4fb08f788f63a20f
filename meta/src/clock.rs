//! The store clock: the wall-clock source ([`WallClock`]) and the persisted lease-clock row
//! ([`LeaseClock`]) that keeps time from moving backwards (docs/metadata-format.md, "Snapshot
//! Lifecycle And History Holds", "Workbench Expiry").
//!
//! The lease-clock *observation* (a write) is [`crate::ops::lease_clock`]; this module is the
//! record and the read side, kept below the shard and the readers so every reader can evaluate
//! deadlines ([`store_clock_now`]) without importing the operations.
//!
//! ## Record
//!
//! One System row (reserved, unversioned tree), key `lease_clock`:
//!
//! ```text
//! u16be 1 | u64be high_water_unix_ms | u64be reap_not_before_unix_ms
//! ```
//!
//! - `high_water_unix_ms` is the largest wall clock any owner of the shard has observed and
//!   persisted; it never decreases.
//! - `reap_not_before_unix_ms` is raised to `high_water + skew_grace` whenever an owner observes
//!   a wall clock *below* the high-water (a regression); the reaper claims nothing before the
//!   wall clock reaches it. It never decreases either.

use crate::codec::wire::{Dec, Enc};
use crate::error::Result;
use crate::family::Family;
use crate::store::Snapshot;

/// System key of the persisted lease clock.
pub const KEY_LEASE_CLOCK: &[u8] = b"lease_clock";
/// Value format version of the lease-clock row.
pub const VALUE_VERSION: u16 = 1;

/// A source of wall-clock time in Unix milliseconds (injectable for tests).
pub trait WallClock: Send + Sync + std::fmt::Debug {
    /// The current wall clock, Unix milliseconds.
    fn now_unix_ms(&self) -> u64;
}

/// The operating system's wall clock (`SystemTime::now`; 0 if it reads before 1970).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_unix_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A manually driven clock for tests: starts at a given Unix millisecond and moves only when told
/// (forwards or backwards).
#[derive(Debug, Clone, Default)]
pub struct ManualClock(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ManualClock {
    /// A clock reading `unix_ms`.
    pub fn new(unix_ms: u64) -> Self {
        ManualClock(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(
            unix_ms,
        )))
    }

    /// Sets the clock to `unix_ms` (may go backwards).
    pub fn set(&self, unix_ms: u64) {
        self.0.store(unix_ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Moves the clock forward by `ms` (saturating).
    pub fn advance(&self, ms: u64) {
        let now = self.now_unix_ms();
        self.set(now.saturating_add(ms));
    }
}

impl WallClock for ManualClock {
    fn now_unix_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The persisted lease-clock row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseClock {
    /// Largest persisted wall-clock observation, Unix ms (never decreases).
    pub high_water_unix_ms: u64,
    /// The reaper claims nothing before the wall clock reaches this, Unix ms (never decreases).
    pub reap_not_before_unix_ms: u64,
}

impl LeaseClock {
    /// Encodes `u16 1 | u64 high_water | u64 reap_not_before` (18 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.high_water_unix_ms)
            .u64(self.reap_not_before_unix_ms)
            .finish()
    }

    /// Decodes the row. Errors: [`crate::Error::Codec`] (family `system`) for another version, a
    /// truncated value or trailing bytes.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new("system", b);
        d.expect_version(VALUE_VERSION)?;
        let v = LeaseClock {
            high_water_unix_ms: d.u64()?,
            reap_not_before_unix_ms: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }

    /// The state after observing `wall` with the given skew grace: the high-water rises to
    /// `wall` when it is later; a `wall` below the high-water raises `reap_not_before` to
    /// `high_water + grace`.
    pub fn observe(self, wall_unix_ms: u64, skew_grace_ms: u64) -> LeaseClock {
        if wall_unix_ms >= self.high_water_unix_ms {
            LeaseClock {
                high_water_unix_ms: wall_unix_ms,
                ..self
            }
        } else {
            LeaseClock {
                reap_not_before_unix_ms: self
                    .reap_not_before_unix_ms
                    .max(self.high_water_unix_ms.saturating_add(skew_grace_ms)),
                ..self
            }
        }
    }
}

/// The persisted lease-clock row at `snap` with its exact stored bytes (`None`: no row yet, the
/// default clock).
///
/// Errors: [`crate::Error::Codec`] for a corrupt row; storage errors.
pub fn read_lease_clock<S: Snapshot>(snap: &S) -> Result<(LeaseClock, Option<Vec<u8>>)> {
    let stored = snap.get(Family::System, KEY_LEASE_CLOCK)?;
    let clock = stored
        .as_deref()
        .map(LeaseClock::decode)
        .transpose()?
        .unwrap_or_default();
    Ok((clock, stored))
}

/// The store clock at `snap` for a process whose wall clock reads `wall_unix_ms`:
/// `max(wall, persisted high-water)`, Unix ms. A wall clock set back below what any writer of the
/// store already persisted never makes the store's time go back.
///
/// Errors: [`crate::Error::Codec`] for a corrupt lease-clock row; storage errors.
pub fn store_clock_now<S: Snapshot>(snap: &S, wall_unix_ms: u64) -> Result<u64> {
    Ok(wall_unix_ms.max(read_lease_clock(snap)?.0.high_water_unix_ms))
}
