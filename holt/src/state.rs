//! The immutable in-memory image of every tree at one commit version.
//!
//! A `State` is never mutated once published: each commit clones the tip (cheap: the tree maps
//! are persistent, structurally shared `imbl::OrdMap`s), applies its physical operations and is
//! wrapped in a new `Arc`. Readers and views pin an `Arc<State>`, so they never wait for a writer
//! or an fdatasync. The ordered map is a private placeholder: the from-scratch ART replaces it and
//! nothing outside this crate can see it.

use std::sync::Arc;

use crate::mvcc;
use crate::registry::{Registry, TreeMeta};
use crate::wal::record::Record;

/// The ordered map backing one tree (placeholder for the ART).
pub(crate) type TreeMap = imbl::OrdMap<Vec<u8>, Slot>;

/// One key's current slot.
///
/// Invariant: `value == None` (a tombstone) only occurs in versioned trees, where deleted keys
/// stay until the history floor passes `version`, so that ranges at older read versions can find
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The value, or `None` for a tombstone.
    pub(crate) value: Option<Arc<[u8]>>,
    /// The commit version that last wrote this slot.
    pub(crate) version: u64,
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
#[derive(Clone, Debug)]
pub(crate) struct State {
    /// Last committed version (0 before the first commit).
    pub(crate) version: u64,
    /// LSN of the last WAL record reflected in this state (0 = none).
    pub(crate) lsn: u64,
    /// MVCC history floor: the lowest version `view_at` accepts.
    pub(crate) floor: u64,
    pub(crate) registry: Registry,
    /// Indexed by tag; unregistered tags hold empty maps.
    pub(crate) trees: Vec<TreeMap>,
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
        }
    }

    pub(crate) fn tree(&self, tag: u8) -> &TreeMap {
        &self.trees[usize::from(tag)]
    }

    /// Latest value of `key` (tombstones read as absent).
    pub(crate) fn latest(&self, tag: u8, key: &[u8]) -> Option<&Arc<[u8]>> {
        self.tree(tag).get(key).and_then(|s| s.value.as_ref())
    }

    /// Applies one physical op at commit `version`. Deletes leave a tombstone in versioned trees
    /// and remove the key elsewhere.
    pub(crate) fn apply(&mut self, meta: &TreeMeta, op: PhysOp, version: u64) {
        let map = &mut self.trees[usize::from(op.tag)];
        match op.value {
            Some(v) => {
                map.insert(
                    op.key,
                    Slot {
                        value: Some(v),
                        version,
                    },
                );
            }
            None if meta.versioned => {
                map.insert(
                    op.key,
                    Slot {
                        value: None,
                        version,
                    },
                );
            }
            None => {
                map.remove(op.key.as_slice());
            }
        }
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
                mvcc::prune(self, floor);
                self.floor = floor;
            }
        }
        self.lsn = lsn;
        Ok(())
    }
}
