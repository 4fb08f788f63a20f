//! The published state: the newest durable [`State`], the one every reader sees. The database
//! owns it; `Tree` handles reach it through a `Weak` pointer, so a handle does not keep the
//! database open.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::state::State;

/// The published state of one database, with the id its tree handles and views are bound to.
pub(crate) struct Published {
    id: u64,
    state: RwLock<Arc<State>>,
}

impl Published {
    pub(crate) fn new(id: u64, state: Arc<State>) -> Self {
        Published {
            id,
            state: RwLock::new(state),
        }
    }

    /// The id of the database that owns this state.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The newest published state.
    #[inline]
    pub(crate) fn current(&self) -> Arc<State> {
        self.state.read().clone()
    }

    /// The lock itself, for the group commit, which publishes each group's state after its sync.
    pub(crate) fn cell(&self) -> &RwLock<Arc<State>> {
        &self.state
    }

    /// Publishes `st` (an in-memory database, where every accepted state is at once durable).
    pub(crate) fn set(&self, st: Arc<State>) {
        let mut published = self.state.write();
        debug_assert!(st.lsn >= published.lsn, "publication went back in the log");
        *published = st;
    }

    /// Publishes `st` when it holds no record beyond the published state (the same LSN: a
    /// change of structure or a prune step over durable content); a state with records still
    /// syncing is published by their group commit instead. Returns whether `st` was published.
    pub(crate) fn set_if_durable(&self, st: Arc<State>) -> bool {
        let mut published = self.state.write();
        if published.lsn == st.lsn {
            *published = st;
            true
        } else {
            false
        }
    }
}
