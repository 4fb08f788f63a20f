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
        if applied {
            if let Some(r) = refill.change.reserve {
                self.add(r.id, r.revisions);
            }
        } else {
            self.unretired(refill.change.retire);
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

    /// Up to `n` settled reservations to retire with the next one (removed from the pool; give
    /// them back with [`ReservationPool::unretired`] if that command fails).
    pub(crate) fn to_retire(&self, n: usize) -> Vec<OperationId> {
        let mut st = self.lock();
        let n = n.min(st.settled.len());
        st.settled.drain(..n).collect()
    }

    /// Puts back reservations [`ReservationPool::to_retire`] handed out.
    pub(crate) fn unretired(&self, ids: Vec<OperationId>) {
        self.lock().settled.extend(ids);
    }

    /// Adds a reservation that was just made durable.
    pub(crate) fn add(&self, id: OperationId, revisions: Vec<ReservedRevision>) {
        self.lock().live.push_back(Live {
            id,
            free: revisions,
            outstanding: 0,
            dirty: false,
        });
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
        st.live.iter().any(|l| l.id == *id) || st.settled.contains(id)
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
