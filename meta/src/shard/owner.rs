//! The writer side of a shard handle: its owner state (the epoch at open, whether this handle's
//! epoch is persisted, the verified tail, the last maintenance step) and the lazy owner-epoch
//! advance before its first write. A leaf of `shard/`: `handle.rs` holds it, `sequencer.rs`
//! runs the owner step with it.

use std::sync::Mutex;

use super::snapshot_policy::SnapshotPolicy;
use crate::codec::system::RecoveryTail;
use crate::error::Result;
use crate::outbox::RetentionPolicy;
use crate::store::ShardStore;

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
    /// The handle's epoch is persisted (its first write happened, or it initialized the store).
    pub(super) advanced: bool,
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
    /// write); `true` when this call advanced it.
    pub(super) fn advance_once(&self, store: &ShardStore, st: &mut OwnerState) -> Result<bool> {
        if st.advanced {
            return Ok(false);
        }
        crate::schema::advance_owner_epoch(
            store,
            st.epoch_at_open,
            st.verified_at_open,
            &self.retention,
        )?;
        st.advanced = true;
        Ok(true)
    }
}
