//! The immutable in-memory image of every tree at one commit version.
//!
//! A `State` is never mutated once published: each commit clones the tip (cheap: every tree is
//! a persistent, `Arc`-shared [`Art`], so a clone copies one root pointer per tree), applies its
//! physical operations — which path-copy only the nodes on the written keys' paths — and is
//! wrapped in a new `Arc`. Readers and views pin an `Arc<State>`, so they never wait for a writer
//! or an fdatasync.

use std::sync::Arc;

use crate::art::{Art, Summarize};
use crate::mvcc::{self, PruneCursor};
use crate::registry::{Registry, TreeMeta};
use crate::wal::record::Record;

/// The adaptive radix tree backing one named tree.
pub(crate) type TreeMap = Art<Slot>;

/// Values of at most this many bytes are stored inline in their slot, i.e. inside the ART leaf
/// next to the key, so a point read touches no separate value allocation.
pub(crate) const INLINE_VALUE_BYTES: usize = 64;

/// A slot's value: a tombstone, a small value stored inline, or a shared heap value (the same
/// `Arc` the WAL record of the commit carried).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// Deleted (versioned trees only).
    Tombstone,
    /// Up to [`INLINE_VALUE_BYTES`] bytes, stored in place.
    Inline {
        len: u8,
        buf: [u8; INLINE_VALUE_BYTES],
    },
    /// A larger value.
    Shared(Arc<[u8]>),
}

impl Value {
    /// A value from borrowed bytes (`None`: a tombstone); copies small values inline.
    pub(crate) fn from_bytes(v: Option<&[u8]>) -> Self {
        match v {
            None => Value::Tombstone,
            Some(b) if b.len() <= INLINE_VALUE_BYTES => {
                let mut buf = [0u8; INLINE_VALUE_BYTES];
                buf[..b.len()].copy_from_slice(b);
                Value::Inline {
                    len: b.len() as u8,
                    buf,
                }
            }
            Some(b) => Value::Shared(Arc::from(b)),
        }
    }

    /// A value from a shared buffer (`None`: a tombstone); small values are copied inline, larger
    /// ones keep sharing the buffer.
    pub(crate) fn from_arc(v: Option<Arc<[u8]>>) -> Self {
        match v {
            Some(a) if a.len() > INLINE_VALUE_BYTES => Value::Shared(a),
            other => Value::from_bytes(other.as_deref()),
        }
    }

    /// The bytes, or `None` for a tombstone.
    #[inline]
    pub(crate) fn as_deref(&self) -> Option<&[u8]> {
        match self {
            Value::Tombstone => None,
            Value::Inline { len, buf } => buf.get(..usize::from(*len)),
            Value::Shared(a) => Some(a),
        }
    }

    /// True unless a tombstone.
    #[inline]
    pub(crate) fn is_some(&self) -> bool {
        !matches!(self, Value::Tombstone)
    }

    /// True for a tombstone.
    #[inline]
    pub(crate) fn is_none(&self) -> bool {
        matches!(self, Value::Tombstone)
    }
}

/// One key's current slot.
///
/// Invariant: a tombstone only occurs in versioned trees, where deleted keys stay until the
/// history floor passes `version`, so that ranges at older read versions can find them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Slot {
    /// The value, or a tombstone. First, so it sits right after the leaf's key.
    pub(crate) value: Value,
    /// The commit version that last wrote this slot.
    pub(crate) version: u64,
}

impl Summarize for Slot {
    /// Tombstones are dead: the ART counts them per subtree so that listings skip subtrees
    /// holding only tombstones and the pruner skips subtrees holding none.
    fn is_live(&self) -> bool {
        self.value.is_some()
    }

    /// The commit version that wrote the slot: a subtree whose largest stamp is at or below a
    /// read version holds no change newer than that version.
    fn stamp(&self) -> u64 {
        self.version
    }
}

/// One physical write, as logged in the WAL and replayed on open: a put (`value = Some`) or a
/// delete (`None`) of `key` in the tree with `tag`. History rows are ordinary puts into tag 0x00.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PhysOp {
    pub(crate) tag: u8,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Arc<[u8]>>,
}

/// Every tree at one version.
#[derive(Clone)]
pub(crate) struct State {
    /// Last committed version (0 before the first commit).
    pub(crate) version: u64,
    /// LSN of the last WAL record reflected in this state (0 = none).
    pub(crate) lsn: u64,
    /// MVCC history floor: the lowest version `view_at` accepts.
    pub(crate) floor: u64,
    pub(crate) registry: Registry,
    /// Indexed by tag; unregistered tags hold empty trees.
    pub(crate) trees: Vec<TreeMap>,
    /// The incremental prune sweep in progress, if any (see `mvcc`). Not persisted: it only
    /// tracks the removal of rows that no read version at or above `floor` can reach.
    pub(crate) prune: Option<PruneCursor>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("version", &self.version)
            .field("lsn", &self.lsn)
            .field("floor", &self.floor)
            .field("trees", &self.registry.len())
            .field("prune", &self.prune)
            .finish()
    }
}

impl State {
    /// The state of a brand-new database: only the `history` tree, version 0.
    pub(crate) fn new() -> Self {
        State {
            version: 0,
            lsn: 0,
            floor: 0,
            registry: Registry::with_history(),
            trees: vec![TreeMap::new(); 256],
            prune: None,
        }
    }

    #[inline]
    pub(crate) fn tree(&self, tag: u8) -> &TreeMap {
        &self.trees[usize::from(tag)]
    }

    pub(crate) fn tree_mut(&mut self, tag: u8) -> &mut TreeMap {
        &mut self.trees[usize::from(tag)]
    }

    /// Latest value of `key` (tombstones read as absent).
    pub(crate) fn latest(&self, tag: u8, key: &[u8]) -> Option<&[u8]> {
        self.tree(tag).get(key).and_then(|s| s.value.as_deref())
    }

    /// Applies one physical op at commit `version`. Deletes leave a tombstone in versioned trees
    /// and remove the key elsewhere.
    pub(crate) fn apply(&mut self, meta: &TreeMeta, op: PhysOp, version: u64) {
        let map = self.tree_mut(op.tag);
        match op.value {
            Some(v) => {
                map.insert(
                    &op.key,
                    Slot {
                        value: Value::from_arc(Some(v)),
                        version,
                    },
                );
            }
            None if meta.versioned => {
                map.insert(
                    &op.key,
                    Slot {
                        value: Value::Tombstone,
                        version,
                    },
                );
            }
            None => {
                map.remove(&op.key);
            }
        }
    }

    /// Raises the history floor and schedules the incremental prune sweep (see `mvcc`).
    pub(crate) fn raise_floor(&mut self, floor: u64) {
        self.floor = floor;
        mvcc::schedule_prune(self);
    }

    /// Applies a logged record at `lsn` (replay, and the live path for registry and floor
    /// changes). Fails with a description if the record does not fit this state — a sign of a
    /// corrupt or foreign log.
    pub(crate) fn apply_record(&mut self, rec: Record, lsn: u64) -> Result<(), String> {
        match rec {
            Record::Commit { version, ops } => {
                if version != self.version + 1 {
                    return Err(format!(
                        "commit version {version} does not follow version {}",
                        self.version
                    ));
                }
                for op in ops {
                    let meta =
                        self.registry.get(op.tag).cloned().ok_or_else(|| {
                            format!("write to unregistered tree tag {:#04x}", op.tag)
                        })?;
                    self.apply(&meta, op, version);
                }
                self.version = version;
            }
            Record::CreateTree {
                tag,
                versioned,
                name,
            } => {
                self.registry
                    .check_new(&name, tag)
                    .map_err(|e| format!("cannot register tree {name:?}: {e}"))?;
                self.registry = self.registry.with(TreeMeta {
                    name,
                    tag,
                    versioned,
                });
            }
            Record::SetFloor { floor } => {
                if floor <= self.floor || floor > self.version {
                    return Err(format!(
                        "history floor {floor} outside ({}, {}]",
                        self.floor, self.version
                    ));
                }
                self.raise_floor(floor);
            }
        }
        self.lsn = lsn;
        Ok(())
    }
}

/// Wakes [`Db::wait_visible`](crate::Db::wait_visible) callers when a newer state is published.
///
/// Notifiers call [`Visibility::notify`] after the publication they announce (the committer
/// whose record became durable, once its `wait_durable` returned); waiters re-check their
/// condition under the same mutex, so no wake-up is lost between a check and the wait.
#[derive(Default)]
pub(crate) struct Visibility {
    lock: parking_lot::Mutex<()>,
    cond: parking_lot::Condvar,
}

impl Visibility {
    /// Wakes every waiter so it re-checks its condition.
    pub(crate) fn notify(&self) {
        let _guard = self.lock.lock();
        self.cond.notify_all();
    }

    /// Blocks until `ready` returns `Ok(true)` (→ `Ok(true)`), returns an error (→ that error),
    /// or `deadline` passes (→ the last check, normally `Ok(false)`). `None` waits without limit.
    pub(crate) fn wait_until(
        &self,
        mut ready: impl FnMut() -> crate::error::Result<bool>,
        deadline: Option<std::time::Instant>,
    ) -> crate::error::Result<bool> {
        let mut guard = self.lock.lock();
        loop {
            if ready()? {
                return Ok(true);
            }
            match deadline {
                Some(d) => {
                    if self.cond.wait_until(&mut guard, d).timed_out() {
                        return ready();
                    }
                }
                None => self.cond.wait(&mut guard),
            }
        }
    }
}
