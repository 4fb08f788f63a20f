//! [`ShardStore`]: the engine that backs one shard — the one switch between holt and etcd.

use super::holt_store::{HoltSnapshot, HoltStore};
use super::txn::{
    CheckedWrite, PendingWrite, ScanItem, ScanSpec, Snapshot, TxnStore, WriteFailure,
};
use crate::error::Result;
use crate::family::Family;

/// The [`TxnStore`] of one shard: holt (embedded default, single-node fast path) or, with the
/// `etcd` cargo feature, etcd (replicated; see [`super::etcd`]). Which one backs a shard is part
/// of its placement.
#[derive(Clone)]
pub enum ShardStore {
    /// An embedded holt database.
    Holt(HoltStore),
    /// A shard keyspace in an etcd cluster.
    #[cfg(feature = "etcd")]
    Etcd(super::etcd::EtcdStore),
}

impl std::fmt::Debug for ShardStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShardStore::Holt(_) => f.write_str("ShardStore::Holt"),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(e) => write!(f, "ShardStore::Etcd({e:?})"),
        }
    }
}

/// A snapshot of a [`ShardStore`].
pub enum ShardSnapshot {
    /// A holt view.
    Holt(HoltSnapshot),
    /// An etcd snapshot.
    #[cfg(feature = "etcd")]
    Etcd(super::etcd::EtcdSnapshot),
}

impl ShardStore {
    /// `"holt"` or `"etcd"`.
    pub fn engine_name(&self) -> &'static str {
        match self {
            ShardStore::Holt(_) => "holt",
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(_) => "etcd",
        }
    }

    /// The holt database of a holt-backed shard (`None` for other engines).
    pub fn holt_db(&self) -> Option<&holt::Db> {
        match self {
            ShardStore::Holt(h) => Some(h.db()),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(_) => None,
        }
    }

    /// Pins the writer lock of a holt store opened with a lock shared between processes
    /// (`holt::WriterLock::Shared`, see docs/holt-format.md, "Sharing the writer lock between
    /// processes"): the store catches up with other writers first when this process did not hold
    /// the lock. `None` for a lock held for the handle's life and for etcd (the owner lease
    /// fences there).
    ///
    /// Errors: [`crate::Error::Storage`] (`holt::Error::Locked` after the wait, `Io`,
    /// `Corrupt`).
    pub fn hold_writer(&self) -> Result<Option<holt::WriterHold>> {
        match self {
            ShardStore::Holt(h) if h.db().shares_writer_lock() => Ok(Some(h.db().hold_writer()?)),
            _ => Ok(None),
        }
    }

    /// The etcd store of an etcd-backed shard (`None` for other engines).
    #[cfg(feature = "etcd")]
    pub fn etcd(&self) -> Option<&super::etcd::EtcdStore> {
        match self {
            ShardStore::Etcd(e) => Some(e),
            ShardStore::Holt(_) => None,
        }
    }
}

impl Snapshot for ShardSnapshot {
    fn version(&self) -> u64 {
        match self {
            ShardSnapshot::Holt(s) => s.version(),
            #[cfg(feature = "etcd")]
            ShardSnapshot::Etcd(s) => s.version(),
        }
    }

    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self {
            ShardSnapshot::Holt(s) => s.get(family, key),
            #[cfg(feature = "etcd")]
            ShardSnapshot::Etcd(s) => s.get(family, key),
        }
    }

    fn scan(&self, family: Family, spec: &ScanSpec) -> Result<Vec<ScanItem>> {
        match self {
            ShardSnapshot::Holt(s) => s.scan(family, spec),
            #[cfg(feature = "etcd")]
            ShardSnapshot::Etcd(s) => s.scan(family, spec),
        }
    }
}

impl TxnStore for ShardStore {
    type Snap = ShardSnapshot;

    fn version(&self) -> u64 {
        match self {
            ShardStore::Holt(s) => s.version(),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.version(),
        }
    }

    fn snapshot(&self) -> ShardSnapshot {
        match self {
            ShardStore::Holt(s) => ShardSnapshot::Holt(s.snapshot()),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => ShardSnapshot::Etcd(s.snapshot()),
        }
    }

    fn snapshot_at(&self, version: u64) -> Result<ShardSnapshot> {
        match self {
            ShardStore::Holt(s) => s.snapshot_at(version).map(ShardSnapshot::Holt),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.snapshot_at(version).map(ShardSnapshot::Etcd),
        }
    }

    fn write(&self, write: CheckedWrite) -> std::result::Result<u64, WriteFailure> {
        match self {
            ShardStore::Holt(s) => s.write(write),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.write(write),
        }
    }

    fn wait_for_version(&self, version: u64) -> bool {
        match self {
            ShardStore::Holt(s) => s.wait_for_version(version),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.wait_for_version(version),
        }
    }

    fn history_floor(&self) -> Result<u64> {
        match self {
            ShardStore::Holt(s) => s.history_floor(),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.history_floor(),
        }
    }

    fn set_history_floor(&self, version: u64) -> Result<()> {
        match self {
            ShardStore::Holt(s) => s.set_history_floor(version),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.set_history_floor(version),
        }
    }

    fn accepted_snapshot(&self) -> ShardSnapshot {
        match self {
            ShardStore::Holt(s) => ShardSnapshot::Holt(s.accepted_snapshot()),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => ShardSnapshot::Etcd(s.accepted_snapshot()),
        }
    }

    fn write_pipelined(
        &self,
        write: CheckedWrite,
    ) -> std::result::Result<PendingWrite, WriteFailure> {
        match self {
            ShardStore::Holt(s) => s.write_pipelined(write),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.write_pipelined(write),
        }
    }

    fn wait_visible(&self, version: u64) -> Result<()> {
        match self {
            ShardStore::Holt(s) => s.wait_visible(version),
            #[cfg(feature = "etcd")]
            ShardStore::Etcd(s) => s.wait_visible(version),
        }
    }
}
