//! [`HoltStore`]: the [`TxnStore`] on holt, the embedded default and the single-node fast path.
//! Families map one-to-one to holt trees; versions are holt commit versions; the history floor
//! is holt's.

use std::sync::Arc;

use super::txn::{
    CheckedWrite, PendingWrite, RegistryEntry, ScanItem, ScanSpec, Snapshot, TxnStore,
    WriteFailure, MAX_SCAN_ITEMS, VISIBILITY_WAIT,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::store::predicate::{Expectation, Mutation};

/// [`TxnStore`] on a holt database; one holt tree per [`Family`].
#[derive(Clone)]
pub struct HoltStore {
    db: holt::Db,
    trees: Arc<Vec<holt::Tree>>,
}

impl HoltStore {
    /// Binds every family to its tree. Errors: [`Error::SchemaMismatch`] if a tree is missing
    /// (the schema gate runs first, so this indicates a concurrent registry change).
    pub fn new(db: holt::Db) -> Result<Self> {
        let mut trees = Vec::with_capacity(Family::ALL.len());
        for f in Family::ALL {
            let t = db.tree(f.name()).ok_or_else(|| {
                Error::schema(
                    crate::error::SchemaMismatchKind::MissingTree,
                    format!("missing tree {}", f.name()),
                )
            })?;
            trees.push(t);
        }
        Ok(HoltStore {
            db,
            trees: Arc::new(trees),
        })
    }

    /// The underlying database.
    pub fn db(&self) -> &holt::Db {
        &self.db
    }

    fn tree(&self, f: Family) -> &holt::Tree {
        &self.trees[f.index()]
    }

    /// The tree registry of `db` (holt's `history` tree included).
    pub(crate) fn registry_of(db: &holt::Db) -> Vec<RegistryEntry> {
        db.trees()
            .into_iter()
            .map(|t| RegistryEntry {
                name: t.name,
                tag: t.tag,
                versioned: t.versioned,
            })
            .collect()
    }

    /// Creates every family tree `db` lacks (initialization of an empty store; holt creates each
    /// tree with its own durable registry entry, so an interrupted initialization leaves a
    /// subset, which the gate completes).
    ///
    /// Errors: holt errors.
    pub(crate) fn create_missing_trees(db: &holt::Db) -> Result<()> {
        for f in Family::ALL {
            if db.tree(f.name()).is_none() {
                db.create_tree(f.name(), f.tag(), f.versioned())?;
            }
        }
        Ok(())
    }
}

/// A holt [`holt::View`] bound to the family trees.
pub struct HoltSnapshot {
    view: holt::View,
    trees: Arc<Vec<holt::Tree>>,
}

impl Snapshot for HoltSnapshot {
    fn version(&self) -> u64 {
        self.view.version()
    }

    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.view.get(&self.trees[family.index()], key)?)
    }

    fn scan(&self, family: Family, spec: &ScanSpec) -> Result<Vec<ScanItem>> {
        let range = holt::RangeSpec {
            prefix: spec.prefix.clone(),
            start_after: spec.start_after.clone(),
            delimiter: spec.delimiter,
            limit: Some(spec.limit.clamp(1, MAX_SCAN_ITEMS)),
        };
        let mut out = Vec::new();
        for entry in self.view.range(&self.trees[family.index()], &range)? {
            out.push(match entry? {
                holt::Entry::Key { key, value } => ScanItem::Row { key, value },
                holt::Entry::CommonPrefix(p) => ScanItem::Prefix(p),
            });
            if out.len() >= MAX_SCAN_ITEMS {
                break;
            }
        }
        Ok(out)
    }
}

impl TxnStore for HoltStore {
    type Snap = HoltSnapshot;

    fn version(&self) -> u64 {
        self.db.version()
    }

    /// Blocks on `holt::Db::wait_visible` (no polling). A poisoned engine (WAL failure) reports
    /// `false`; the next write then returns the engine error.
    fn wait_for_version(&self, version: u64) -> bool {
        self.db
            .wait_visible(version, VISIBILITY_WAIT)
            .unwrap_or(false)
    }

    /// With a writer lock shared between processes, catches up with other writers first
    /// (`holt::Db::refresh`; when the lock cannot be had within its wait the state this process
    /// last saw is read — consistent, possibly older).
    fn snapshot(&self) -> HoltSnapshot {
        let _ = self.db.refresh();
        HoltSnapshot {
            view: self.db.view(),
            trees: Arc::clone(&self.trees),
        }
    }

    fn snapshot_at(&self, version: u64) -> Result<HoltSnapshot> {
        Ok(HoltSnapshot {
            view: self.db.view_at(version)?,
            trees: Arc::clone(&self.trees),
        })
    }

    fn history_floor(&self) -> Result<u64> {
        Ok(self.db.history_floor())
    }

    fn set_history_floor(&self, version: u64) -> Result<()> {
        if version > self.db.history_floor() {
            self.db.set_history_floor(version)?;
        }
        Ok(())
    }

    fn write(&self, write: CheckedWrite) -> std::result::Result<u64, WriteFailure> {
        self.db.commit(self.batch(write)).map_err(write_failure)
    }

    fn accepted_snapshot(&self) -> HoltSnapshot {
        HoltSnapshot {
            view: self.db.accepted_view(),
            trees: Arc::clone(&self.trees),
        }
    }

    /// `holt::Db::commit_pipelined`: validated and accepted now, durable on wait.
    fn write_pipelined(
        &self,
        write: CheckedWrite,
    ) -> std::result::Result<PendingWrite, WriteFailure> {
        let ticket = self
            .db
            .commit_pipelined(self.batch(write))
            .map_err(write_failure)?;
        let version = ticket.version();
        Ok(PendingWrite::deferred(version, move || {
            ticket.wait().map_err(Error::Storage)
        }))
    }

    /// `holt::Db::wait_visible` (no polling).
    fn wait_visible(&self, version: u64) -> Result<()> {
        if self.db.wait_visible(version, VISIBILITY_WAIT)? {
            Ok(())
        } else {
            Err(Error::Storage(holt::Error::Poisoned {
                reason: format!(
                    "version {version} did not become visible within {VISIBILITY_WAIT:?}"
                ),
            }))
        }
    }
}

impl HoltStore {
    /// The holt batch of one checked write.
    fn batch(&self, write: CheckedWrite) -> holt::Batch {
        let mut batch = holt::Batch::new();
        if let Some(v) = write.read_version {
            batch.expect_version(v);
        }
        for p in &write.predicates {
            let expect = match &p.expect {
                Expectation::Absent => holt::Expect::Absent,
                Expectation::Present => holt::Expect::Present,
                Expectation::Equals(v) => holt::Expect::Equals(v.clone()),
            };
            batch.expect(self.tree(p.family), p.key.clone(), expect);
        }
        for m in write.mutations {
            match m {
                Mutation::Put { family, key, value } => batch.put(self.tree(family), key, value),
                Mutation::Delete { family, key } => batch.delete(self.tree(family), key),
            }
        }
        batch
    }
}

/// Maps a holt commit refusal to the store's [`WriteFailure`].
fn write_failure(e: holt::Error) -> WriteFailure {
    match e {
        holt::Error::PredicateFailed { tree, key, .. } => WriteFailure::Predicate {
            family: Family::from_name(&tree),
            key,
        },
        holt::Error::VersionMismatch { expected, actual } => {
            WriteFailure::ReadVersion { expected, actual }
        }
        e => WriteFailure::Other(Error::from(e)),
    }
}
