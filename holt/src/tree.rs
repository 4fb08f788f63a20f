//! `Tree` handles and `View`s (consistent reads at one version).

use std::fmt;
use std::ops::ControlFlow;
use std::sync::{Arc, Weak};

use crate::error::{Error, Result};
use crate::mvcc;
use crate::published::Published;
use crate::range::{self, EntryRef, RangeIter, RangeSpec};
use crate::registry::TreeMeta;
use crate::state::State;

/// A handle to one named tree of a `Db`. Cheap to clone. It does not keep the database open:
/// once every `Db` clone is dropped, reads through a handle return `Error::Closed`.
#[derive(Clone)]
pub struct Tree {
    pub(crate) db: Weak<Published>,
    pub(crate) db_id: u64,
    pub(crate) meta: Arc<TreeMeta>,
}

impl fmt::Debug for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tree")
            .field("name", &self.meta.name)
            .field("tag", &self.meta.tag)
            .field("versioned", &self.meta.versioned)
            .finish()
    }
}

impl Tree {
    /// The tree's name (1..=64 bytes of `[a-z0-9_]`).
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The tree's stable one-byte tag.
    pub fn tag(&self) -> u8 {
        self.meta.tag
    }

    /// Whether the tree keeps MVCC history.
    pub fn is_versioned(&self) -> bool {
        self.meta.versioned
    }

    fn current(&self) -> Result<View> {
        let published = self.db.upgrade().ok_or(Error::Closed)?;
        Ok(View::latest(published.current(), published.id()))
    }

    /// The value of `key` in the latest committed state, or `None`: a point lookup on the
    /// pinned newest published state (the in-memory delta, then the mapped images).
    /// Errors: `Closed` if the database was dropped; `Corrupt` for an image block that fails
    /// its CRC check (naming the file and block) or a missing history row.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let state = self.db.upgrade().ok_or(Error::Closed)?.current();
        get_at(&state, self, key, state.version)
    }

    /// An ordered scan of the latest committed state (see [`RangeSpec`]). The iterator pins that
    /// state: later commits do not affect it.
    pub fn range(&self, spec: &RangeSpec) -> Result<RangeIter> {
        self.current()?.range(self, spec)
    }

    /// The allocation-free form of [`Tree::range`]: calls `f` with each entry of the scan of the
    /// latest committed state, borrowed ([`EntryRef`]), in order, until the scan ends, `limit`
    /// entries were passed or `f` returns `ControlFlow::Break`. Same entries as `range`; one
    /// pass over the pinned snapshot (no per-entry copies, no re-seeks).
    /// Errors: `Closed` if the database was dropped; `Corrupt` if a needed MVCC history row is
    /// missing (entries before it were already passed to `f`).
    pub fn for_each_in_range(
        &self,
        spec: &RangeSpec,
        mut f: impl FnMut(EntryRef<'_>) -> ControlFlow<()>,
    ) -> Result<()> {
        let state = self.db.upgrade().ok_or(Error::Closed)?.current();
        let Some(meta) = registered(&state, self) else {
            return Ok(());
        };
        range::for_each(&state, meta, state.version, spec, &mut f)
    }
}

/// A consistent, immutable read of every tree at one read version.
///
/// A view pins an in-memory snapshot; it never blocks writers and writers never block it. Views
/// from `Db::view_at(v)` with `v` below the current version read versioned trees as of `v`
/// (through the `history` tree) and **unversioned trees at their latest state** as of the moment
/// the view was taken — unversioned trees keep no history.
#[derive(Clone)]
pub struct View {
    pub(crate) state: Arc<State>,
    pub(crate) version: u64,
    pub(crate) db_id: u64,
}

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("View")
            .field("version", &self.version)
            .finish()
    }
}

impl View {
    /// A view of `state` at its own (latest) version, bound to database `db_id`.
    pub(crate) fn latest(state: Arc<State>, db_id: u64) -> View {
        View {
            version: state.version,
            state,
            db_id,
        }
    }

    /// The read version of this view.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Returns the pinned registry entry for `tree`, `None` if the tree was created after this
    /// view's snapshot was taken. Errors: `UnknownTree` for a handle from another database.
    fn meta(&self, tree: &Tree) -> Result<Option<Arc<TreeMeta>>> {
        if tree.db_id != self.db_id {
            return Err(Error::UnknownTree {
                name: tree.meta.name.clone(),
            });
        }
        Ok(registered(&self.state, tree).cloned())
    }

    /// The value of `key` in `tree` at this view's read version.
    /// Errors: `UnknownTree` (foreign handle), `Corrupt` if a needed history row is missing.
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if tree.db_id != self.db_id {
            return Err(Error::UnknownTree {
                name: tree.meta.name.clone(),
            });
        }
        get_at(&self.state, tree, key, self.version)
    }

    /// The allocation-free form of [`View::range`] (see [`Tree::for_each_in_range`]), at this
    /// view's read version. Errors: `UnknownTree` for a foreign handle; `Corrupt` if a needed
    /// history row is missing.
    pub fn for_each_in_range(
        &self,
        tree: &Tree,
        spec: &RangeSpec,
        mut f: impl FnMut(EntryRef<'_>) -> ControlFlow<()>,
    ) -> Result<()> {
        let Some(meta) = self.meta(tree)? else {
            return Ok(());
        };
        range::for_each(&self.state, &meta, self.version, spec, &mut f)
    }

    /// An ordered scan of `tree` at this view's read version (see [`RangeSpec`]).
    /// Errors: `UnknownTree` for a foreign handle; per-item `Corrupt` if history is missing.
    pub fn range(&self, tree: &Tree, spec: &RangeSpec) -> Result<RangeIter> {
        let meta = self.meta(tree)?;
        Ok(RangeIter::new(
            self.state.clone(),
            meta,
            self.version,
            spec.clone(),
        ))
    }
}

/// The registry entry of `tree` in `state` (`None` if the tree is not registered there, e.g. it
/// was created after `state`).
#[inline]
fn registered<'s>(state: &'s State, tree: &Tree) -> Option<&'s Arc<TreeMeta>> {
    state
        .registry
        .get(tree.meta.tag)
        .filter(|m| Arc::ptr_eq(m, &tree.meta) || m.name == tree.meta.name)
}

/// Point read of `key` in `tree` at `read_version` on `state`: one registry array access, one
/// lookup per layer until the key is found (the in-memory delta first, then the images, newest
/// first), and (only for a versioned key changed after `read_version`) one predecessor search
/// per layer of the history tree.
#[inline]
fn get_at(state: &State, tree: &Tree, key: &[u8], read_version: u64) -> Result<Option<Vec<u8>>> {
    let Some(meta) = registered(state, tree) else {
        return Ok(None);
    };
    match state.slot(meta.tag, key)? {
        None => Ok(None),
        Some(slot) => Ok(mvcc::visible(state, meta, key, slot, read_version)?.map(<[u8]>::to_vec)),
    }
}
