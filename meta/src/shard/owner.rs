//! The writer side of a shard handle: its owner state (the epoch at open, the lock acquisition
//! whose epoch is persisted, the verified tail, the last maintenance step) and the lazy
//! owner-epoch advance before its first write — and, with a holt lock shared between processes,
//! before the first write of every acquisition (docs/metadata-format.md, "Owner epochs of a
//! shared writer lock"). A leaf of `shard/`: `handle.rs` holds it, `sequencer.rs`
//! runs the owner step with it.

use std::sync::Mutex;

use super::snapshot_policy::SnapshotPolicy;
use crate::codec::system::RecoveryTail;
use crate::error::Result;
use crate::outbox::RetentionPolicy;
use crate::store::{PendingWrite, ShardStore};

/// The owner side of a writer handle: the lazy owner-epoch advance and the RecoveryOutbox
/// maintenance steps.
pub(crate) struct Owner {
    pub(super) state: Mutex<OwnerState>,
    pub(super) retention: RetentionPolicy,
    pub(super) history_policy: Option<SnapshotPolicy>,
}

pub(super) struct OwnerState {
    /// The persisted owner epoch when the handle opened.
    pub(super) epoch_at_open: u64,
    /// The writer-lock acquisition term (`holt::WriterHold::term`; always 1 for a lock held for
    /// the handle's life and for etcd) under which this handle's epoch was persisted: its first
    /// write of that acquisition happened, or it initialized the store. `None`: not yet.
    pub(super) advanced_term: Option<u64>,
    /// The recovery tail whose chain the open verified.
    pub(super) verified_at_open: RecoveryTail,
    /// Commit version after this handle's last maintenance step.
    pub(super) last_step_version: u64,
}

impl Owner {
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, OwnerState> {
        // A panic while holding the lock leaves consistent state (every field is written after
        // the durable commit it describes), so a poisoned lock is taken over.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Persists this handle's owner epoch if it is not yet (the lazy advance before the first
    /// write) with its own commit; `true` when this call advanced it. For a lock held for the
    /// handle's life (term 1).
    pub(super) fn advance_once(&self, store: &ShardStore, st: &mut OwnerState) -> Result<bool> {
        if st.advanced_term.is_some() {
            return Ok(false);
        }
        crate::schema::advance_owner_epoch(
            store,
            st.epoch_at_open,
            st.verified_at_open,
            &self.retention,
        )?;
        st.advanced_term = Some(1);
        Ok(true)
    }

    /// The advance of a shared lock's acquisition `term` when it has not been made yet:
    /// submitted to group commit without waiting (the section's first command joins its
    /// fdatasync); returns the new epoch and the pending write, or `None` when this acquisition
    /// needs none — it advanced already, or `current` (the epoch this handle advanced to at an
    /// earlier acquisition) is still the persisted one because no other writer advanced since.
    /// The first acquisition's advance also moves the verified outbox head to the tail verified
    /// at open.
    pub(super) fn advance_for_term(
        &self,
        store: &ShardStore,
        st: &mut OwnerState,
        term: u64,
        current: u64,
    ) -> Result<Option<(u64, PendingWrite)>> {
        if st.advanced_term == Some(term) {
            return Ok(None);
        }
        let first = st.advanced_term.is_none();
        let advanced = crate::schema::advance_owner_epoch_pipelined(
            store,
            first.then_some(st.verified_at_open),
            (!first).then_some(current),
            &self.retention,
        )?;
        st.advanced_term = Some(term);
        Ok(advanced)
    }
}
