//! The handle's pool of reserved revisions for small puts (a leaf: meta's types only; used by
//! `client.rs`, which owns the pool, and `publication/`, which takes from it).
//!
//! A small put takes one reserved revision ([`ReservationPool::take`]). Refills cost no command
//! of their own: once the handle has finished a put and fewer than [`LOW_WATER`] revisions are
//! left, the next publication command also writes a new reservation of [`RESERVATION_SIZE`]
//! revisions ([`ReservationPool::begin_refill`]; docs/metadata-format.md, "Revision
//! reservations"), so a one-shot process (a CLI call) never reserves anything. A reservation is
//! *settled* when every revision it handed out was published or had its object deleted, and none
//! is left to hand out; settled reservations are retired by the next refill, or when the handle
//! closes. A reservation with a revision whose object could not be deleted stays unsettled: the
//! sweep at the next open deletes it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use meta::codec::ReservedRevision;
use meta::ops::publish::operation::{Reservation, ReservationChange};
use meta::OperationId;

/// Revisions one reservation holds (at most meta's `MAX_RESERVED_REVISIONS`).
pub(crate) const RESERVATION_SIZE: usize = 32;
/// A refill rides on the next publication once fewer revisions than this are free.
pub(crate) const LOW_WATER: usize = 16;

/// One reservation this handle wrote.
#[derive(Debug)]
struct Live {
    id: OperationId,
    free: Vec<ReservedRevision>,
    /// Revisions handed out whose put has not finished.
    outstanding: usize,
    /// A put could not delete its object: only the sweep at the next open may retire it.
    dirty: bool,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct ReservationPool {
    state: Mutex<PoolState>,
    /// Set while one publication command carries a refill.
    refilling: AtomicBool,
    /// Publications this handle finished (a refill needs at least one).
    completed: AtomicU64,
}

/// A refill in flight ([`ReservationPool::begin_refill`]); hand it back with
/// [`ReservationPool::end_refill`].
#[derive(Debug)]
pub(crate) struct Refill {
    /// The change the publication command carries.
    pub(crate) change: ReservationChange,
}

#[derive(Debug, Default)]
struct PoolState {
    /// Reservations with revisions to hand out (front first) or with puts outstanding.
    live: VecDeque<Live>,
    /// Settled reservations not yet retired.
    settled: Vec<OperationId>,
    /// The reservation a publication command is writing right now (held by this handle from
    /// before its command commits, so a concurrent recovery pass never sweeps it).
    refilling: Option<OperationId>,
}

impl ReservationPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a finished publication.
    pub(crate) fn completed_one(&self) {
        self.completed.fetch_add(1, Ordering::Relaxed);
    }

    /// A refill for the next publication command when one is due (the handle finished a put,
    /// fewer than [`LOW_WATER`] revisions are free, no other refill is in flight): a new
    /// reservation made by `make` plus up to 8 settled reservations to retire. `None` otherwise
    /// (also when `make` fails: the put goes on without a refill).
    pub(crate) fn begin_refill(
        &self,
        make: impl FnOnce() -> Option<Vec<ReservedRevision>>,
    ) -> Option<Refill> {
        if self.completed.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let free: usize = self.lock().live.iter().map(|l| l.free.len()).sum();
        if free >= LOW_WATER
            || self
                .refilling
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        let Some(revisions) = make().and_then(|r| Some((OperationId::random().ok()?, r))) else {
            self.refilling.store(false, Ordering::Release);
            return None;
        };
        self.lock().refilling = Some(revisions.0);
        Some(Refill {
            change: ReservationChange {
                reserve: Some(Reservation {
                    id: revisions.0,
                    revisions: revisions.1,
                }),
                retire: self.to_retire(8),
            },
        })
    }

    /// Ends a refill: `applied` when its command committed (the new reservation joins the pool,
    /// the retired ones are gone), else the retirements are given back.
    pub(crate) fn end_refill(&self, refill: Refill, applied: bool) {
        {
            // One critical section: `holds` sees the new reservation as refilling or live.
            let mut st = self.lock();
            if applied {
                if let Some(r) = refill.change.reserve {
                    st.live.push_back(Live {
                        id: r.id,
                        free: r.revisions,
                        outstanding: 0,
                        dirty: false,
                    });
                }
            } else {
                st.settled.extend(refill.change.retire);
            }
            st.refilling = None;
        }
        self.refilling.store(false, Ordering::Release);
    }

    /// Hands out one reserved revision (`None`: the pool is empty; refill it).
    pub(crate) fn take(&self) -> Option<(OperationId, ReservedRevision)> {
        let mut st = self.lock();
        let live = st.live.iter_mut().find(|l| !l.free.is_empty())?;
        let rev = live.free.pop()?;
        live.outstanding += 1;
        Some((live.id, rev))
    }

    /// Up to `n` settled reservations to retire with the next one (removed from the pool;
    /// [`ReservationPool::end_refill`] gives them back if that command fails).
    pub(crate) fn to_retire(&self, n: usize) -> Vec<OperationId> {
        let mut st = self.lock();
        let n = n.min(st.settled.len());
        st.settled.drain(..n).collect()
    }

    /// A put that took a revision of reservation `id` ended: `clean` when its revision was
    /// published or its object is confirmed deleted.
    pub(crate) fn finish(&self, id: &OperationId, clean: bool) {
        let mut st = self.lock();
        let Some(pos) = st.live.iter().position(|l| l.id == *id) else {
            return;
        };
        let live = &mut st.live[pos];
        live.outstanding = live.outstanding.saturating_sub(1);
        live.dirty |= !clean;
        if live.free.is_empty() && live.outstanding == 0 {
            if let Some(done) = st.live.remove(pos) {
                if !done.dirty {
                    st.settled.push(done.id);
                }
            }
        }
    }

    /// True when `id` is one of this handle's reservations (recovery leaves it alone).
    pub(crate) fn holds(&self, id: &OperationId) -> bool {
        let st = self.lock();
        st.live.iter().any(|l| l.id == *id) || st.settled.contains(id) || st.refilling == Some(*id)
    }

    /// At close: every reservation that may be retired without a sweep — settled ones, and live
    /// ones with no put outstanding and none dirty (their free revisions were never written).
    pub(crate) fn retirable_at_close(&self) -> Vec<OperationId> {
        let mut st = self.lock();
        let mut out: Vec<OperationId> = st.settled.drain(..).collect();
        out.extend(
            st.live
                .iter()
                .filter(|l| l.outstanding == 0 && !l.dirty)
                .map(|l| l.id),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revisions(n: usize) -> Vec<ReservedRevision> {
        (0..n)
            .map(|i| ReservedRevision {
                revision: meta::ArtifactRevisionId([i as u8; 16]),
                object_key: format!("k{i}"),
            })
            .collect()
    }

    #[test]
    fn a_refill_is_held_from_before_its_command_until_its_revisions_are_settled() {
        let pool = ReservationPool::default();
        // No refill before the handle finished a put (a one-shot process never reserves).
        assert!(pool.begin_refill(|| Some(revisions(2))).is_none());
        pool.completed_one();
        let refill = pool.begin_refill(|| Some(revisions(2))).unwrap();
        let id = refill.change.reserve.as_ref().unwrap().id;
        // Held while its command runs: a recovery pass must not sweep it.
        assert!(pool.holds(&id));
        // Only one refill at a time.
        assert!(pool.begin_refill(|| Some(revisions(2))).is_none());
        pool.end_refill(refill, true);
        assert!(pool.holds(&id));
        let (a, _) = pool.take().unwrap();
        let (b, _) = pool.take().unwrap();
        assert_eq!((a, b), (id, id));
        assert!(pool.take().is_none());
        pool.finish(&id, true);
        pool.finish(&id, true);
        // Settled: retired by the next refill (or at close), still held until then.
        assert!(pool.holds(&id));
        assert_eq!(pool.to_retire(8), vec![id]);
        assert!(!pool.holds(&id));
    }

    #[test]
    fn a_failed_refill_gives_its_retirements_back_and_a_dirty_reservation_is_never_retired() {
        let pool = ReservationPool::default();
        pool.completed_one();
        let first = pool.begin_refill(|| Some(revisions(1))).unwrap();
        let id = first.change.reserve.as_ref().unwrap().id;
        pool.end_refill(first, true);
        pool.take().unwrap();
        pool.finish(&id, true);
        // The next refill carries the settled one; its command fails.
        let second = pool.begin_refill(|| Some(revisions(1))).unwrap();
        assert_eq!(second.change.retire, vec![id]);
        let lost = second.change.reserve.as_ref().unwrap().id;
        pool.end_refill(second, false);
        assert!(
            !pool.holds(&lost),
            "a reservation whose command failed was never written"
        );
        assert_eq!(pool.retirable_at_close(), vec![id]);
        // A put that could not delete its object leaves its reservation to the sweep.
        let third = pool.begin_refill(|| Some(revisions(1))).unwrap();
        let dirty = third.change.reserve.as_ref().unwrap().id;
        pool.end_refill(third, true);
        pool.take().unwrap();
        pool.finish(&dirty, false);
        assert!(pool.retirable_at_close().is_empty());
    }
}
