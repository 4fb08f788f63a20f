//! The shard's persisted lease clock (docs/metadata-format.md, "Snapshot Lifecycle And History Holds": "Lease
//! deadlines use the shard's persisted lease clock. An owner that observes wall-clock regression
//! below its persisted high-water does not reap until time has caught up plus the skew grace.").
//!
//! ## Record
//!
//! The System row `lease_clock` and the wall-clock sources are [`crate::clock`] (re-exported
//! here): the readers below the operations evaluate deadlines on it too.
//!
//! ## Observation (a write entrypoint)
//!
//! [`observe`] reads the row, computes the next state from the injected wall clock, and — only
//! when the row changes — commits one holt batch: the new row plus a
//! [`crate::outbox::RecoveryEntry::LeaseClockObservation`] RecoveryOutbox record, fenced like a
//! metadata command (schema marker, RootFence, owner epoch, recovery tail and the read version)
//! and predicated on the exact previous lease-clock bytes. Time is a parameter (`wall_unix_ms`),
//! so tests inject any clock; [`WallClock`] is the process-level source.
//!
//! ## Lease arithmetic
//!
//! The lease clock *now* is `max(wall, high_water)`: deadlines are minted and compared on it, so
//! a wall clock that went backwards neither shortens a new lease nor makes an old one look alive
//! longer than the persisted clock says. The reaper additionally requires (see
//! [`LeaseReading::may_reap`]) that the wall clock is not below the high-water, has reached
//! `reap_not_before`, and is at least `deadline + skew_grace`.

use crate::codec::system::marker_bytes;
use crate::codec::system::{
    encode_owner_epoch, RecoveryTail, KEY_OWNER_EPOCH, KEY_RECOVERY_TAIL, KEY_SCHEMA,
};
use crate::command::executor::check_handle_fences;
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::outbox::RecoveryEntry;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::{CheckedWrite, Snapshot, WriteFailure};

pub use crate::clock::{
    LeaseClock, ManualClock, SystemWallClock, WallClock, KEY_LEASE_CLOCK, VALUE_VERSION,
};
pub use crate::shard::history_floor::DEFAULT_SKEW_GRACE_MS;

/// A lease-clock reading: the wall clock used, the persisted row, and its exact stored bytes (so
/// a command can predicate on the clock it computed deadlines with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseReading {
    /// The wall clock observed, Unix ms.
    pub wall_unix_ms: u64,
    /// The persisted row at the reading's version (default when none is recorded yet).
    pub clock: LeaseClock,
    /// The stored bytes (`None`: no row yet).
    pub stored: Option<Vec<u8>>,
    /// Configured maximum clock-skew grace, ms.
    pub skew_grace_ms: u64,
}

impl LeaseReading {
    /// The lease clock now: `max(wall, high_water)`, Unix ms.
    pub fn now_unix_ms(&self) -> u64 {
        self.wall_unix_ms.max(self.clock.high_water_unix_ms)
    }

    /// True when the wall clock is below the persisted high-water (a regression).
    pub fn regressed(&self) -> bool {
        self.wall_unix_ms < self.clock.high_water_unix_ms
    }

    /// Whether a lease ending at `deadline_unix_ms` has passed on the lease clock (the derived
    /// `expired` status).
    pub fn is_expired(&self, deadline_unix_ms: u64) -> bool {
        deadline_unix_ms <= self.now_unix_ms()
    }

    /// Whether the reaper may claim a lease ending at `deadline_unix_ms`: no regression, the wall
    /// clock has reached `reap_not_before`, and `wall >= deadline + skew_grace`.
    pub fn may_reap(&self, deadline_unix_ms: u64) -> bool {
        !self.regressed()
            && self.wall_unix_ms >= self.clock.reap_not_before_unix_ms
            && self.wall_unix_ms >= deadline_unix_ms.saturating_add(self.skew_grace_ms)
    }

    /// The predicate binding a command to this exact persisted clock.
    pub fn predicate(&self) -> Predicate {
        match &self.stored {
            None => Predicate::absent(Family::System, KEY_LEASE_CLOCK.to_vec()),
            Some(b) => Predicate::equals(Family::System, KEY_LEASE_CLOCK.to_vec(), b.clone()),
        }
    }
}

/// Reads the persisted clock at `snap` and pairs it with `wall_unix_ms` without writing.
///
/// Errors: [`Error::Codec`] for a corrupt row; storage errors.
pub fn peek<S: Snapshot>(snap: &S, wall_unix_ms: u64, skew_grace_ms: u64) -> Result<LeaseReading> {
    let (clock, stored) = crate::clock::read_lease_clock(snap)?;
    Ok(LeaseReading {
        wall_unix_ms,
        clock,
        stored,
        skew_grace_ms,
    })
}

/// Observes `wall_unix_ms` (see the module docs) and returns the reading after any write. The
/// row is written (with its RecoveryOutbox record) only when it changes; the write goes through
/// the shard's command sequencer and is durable when this returns.
///
/// Errors: [`Error::Fenced`] (stale owner epoch, changed RootFence or marker);
/// [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`] stale attempts; codec and storage
/// errors.
pub fn observe(shard: &MetaShard, wall_unix_ms: u64, skew_grace_ms: u64) -> Result<LeaseReading> {
    super::sequenced_retrying(shard, |seq| {
        observe_in(shard, seq, wall_unix_ms, skew_grace_ms)
    })
}

/// [`observe`] inside a command-sequencer section: the observation is planned at the newest
/// accepted state and submitted to group commit, so a command planned next in the same section
/// predicates the observed clock (see [`LeaseReading::predicate`]) without any race.
///
/// Errors: as [`observe`] ([`Error::ReadVersionConflict`] with `attempts: 1` for a stale plan).
pub(crate) fn observe_in(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    wall_unix_ms: u64,
    skew_grace_ms: u64,
) -> Result<LeaseReading> {
    seq.prepare_write()?;
    let fence = &shard.inner.fence();
    let snap = seq.snapshot();
    check_handle_fences(&snap, fence)?;
    let reading = peek(&snap, wall_unix_ms, skew_grace_ms)?;
    let next = reading.clock.observe(wall_unix_ms, skew_grace_ms);
    if reading.stored.is_some() && next == reading.clock {
        return Ok(reading);
    }
    let tail_bytes = snap
        .get(Family::System, KEY_RECOVERY_TAIL)?
        .ok_or_else(|| Error::Fenced {
            reason: "no System recovery tail is recorded".into(),
        })?;
    let tail = RecoveryTail::decode(&tail_bytes)?;
    let read_version = snap.version();
    drop(snap);
    let commit_version = read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;
    let next_bytes = next.encode();
    let mutations = vec![Mutation::put(
        Family::System,
        KEY_LEASE_CLOCK.to_vec(),
        next_bytes.clone(),
    )];
    let appended = crate::outbox::append(
        &tail,
        commit_version,
        &RecoveryEntry::LeaseClockObservation {
            owner_epoch: fence.owner_epoch,
            observed_wall_unix_ms: wall_unix_ms,
            previous_high_water_unix_ms: reading.clock.high_water_unix_ms,
            high_water_unix_ms: next.high_water_unix_ms,
            reap_not_before_unix_ms: next.reap_not_before_unix_ms,
        },
        &mutations,
    )?;
    let write = CheckedWrite {
        read_version: Some(read_version),
        predicates: vec![
            Predicate::equals(Family::System, KEY_SCHEMA.to_vec(), marker_bytes()),
            Predicate::equals(
                Family::RootFence,
                crate::codec::root_fence::key(&fence.root_id),
                fence.root_fence_bytes.clone(),
            ),
            Predicate::equals(
                Family::System,
                KEY_OWNER_EPOCH.to_vec(),
                encode_owner_epoch(fence.owner_epoch),
            ),
            appended.tail_predicate,
            reading.predicate(),
        ],
        mutations: mutations.into_iter().chain(appended.rows).collect(),
    };
    match seq.write(write) {
        Ok(_) => Ok(LeaseReading {
            wall_unix_ms,
            clock: next,
            stored: Some(next_bytes),
            skew_grace_ms,
        }),
        Err(WriteFailure::ReadVersion { .. }) => Err(Error::ReadVersionConflict { attempts: 1 }),
        Err(WriteFailure::Predicate { family, key }) => match family {
            Some(Family::System) if key == KEY_LEASE_CLOCK || key == KEY_RECOVERY_TAIL => {
                Err(Error::ReadVersionConflict { attempts: 1 })
            }
            _ => Err(Error::Fenced {
                reason: "schema marker, RootFence or owner epoch changed; reopen the store".into(),
            }),
        },
        Err(WriteFailure::Other(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_clock_row_golden_bytes_and_rejections() {
        let c = LeaseClock {
            high_water_unix_ms: 0x0102,
            reap_not_before_unix_ms: 3,
        };
        let b = c.encode();
        assert_eq!(
            b,
            vec![0, 1, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 3]
        );
        assert_eq!(LeaseClock::decode(&b).unwrap(), c);
        let mut v2 = b.clone();
        v2[1] = 2;
        assert!(LeaseClock::decode(&v2).is_err());
        assert!(LeaseClock::decode(&b[..17]).is_err());
    }

    #[test]
    fn lease_clock_observation_outbox_record_golden_bytes() {
        use crate::outbox::{decode_record, encode_record};
        let entry = RecoveryEntry::LeaseClockObservation {
            owner_epoch: 2,
            observed_wall_unix_ms: 3,
            previous_high_water_unix_ms: 4,
            high_water_unix_ms: 5,
            reap_not_before_unix_ms: 6,
        };
        let b = encode_record(7, 8, &entry, &[]);
        let mut expected = vec![0, 2];
        for v in [7u64, 8] {
            expected.extend_from_slice(&v.to_be_bytes());
        }
        expected.push(4);
        for v in [2u64, 3, 4, 5, 6] {
            expected.extend_from_slice(&v.to_be_bytes());
        }
        expected.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(b, expected);
        let r = decode_record(&b).unwrap();
        assert_eq!(r.entry, entry);
        let mut short = b;
        short.truncate(short.len() - 5);
        assert!(decode_record(&short).is_err());
    }

    #[test]
    fn regression_never_lowers_the_high_water_and_delays_reaping() {
        let c = LeaseClock::default().observe(10_000, 500);
        assert_eq!(c.high_water_unix_ms, 10_000);
        let back = c.observe(4_000, 500);
        assert_eq!(back.high_water_unix_ms, 10_000);
        assert_eq!(back.reap_not_before_unix_ms, 10_500);
        let r = LeaseReading {
            wall_unix_ms: 4_000,
            clock: back,
            stored: None,
            skew_grace_ms: 500,
        };
        assert_eq!(r.now_unix_ms(), 10_000);
        assert!(r.is_expired(9_000));
        assert!(!r.may_reap(1_000), "a regressed owner never reaps");
        let caught_up = LeaseReading {
            wall_unix_ms: 10_200,
            clock: back.observe(10_200, 500),
            ..r.clone()
        };
        assert!(!caught_up.may_reap(1_000), "caught up but inside the grace");
        let later = LeaseReading {
            wall_unix_ms: 10_500,
            clock: back.observe(10_500, 500),
            ..r
        };
        assert!(later.may_reap(1_000));
        assert!(!later.may_reap(10_100), "deadline plus grace not reached");
    }
}
