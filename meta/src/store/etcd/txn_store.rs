//! The [`TxnStore`] on etcd: [`EtcdStore`]'s snapshots, checked writes and history floor, and
//! its registry and compaction calls (see the module docs of `etcd/` for the mapping), each
//! handed to the step that implements it (`kv.rs`, `read.rs`, `write.rs`, `history.rs`).

use std::sync::atomic::AtomicI64;

use super::handle::{EtcdSnapshot, EtcdStore};
use super::{history, keys, kv, read, write};
use crate::error::Result;
use crate::family::Family;
use crate::store::txn::{
    CheckedWrite, RegistryEntry, ScanItem, ScanSpec, Snapshot, TxnStore, WriteFailure,
};

impl EtcdStore {
    /// The shard's registry record (`Ok(empty)` when none was written yet).
    ///
    /// Errors: [`Error::Codec`](crate::Error::Codec) for a malformed record; [`Error::StoreUnavailable`](crate::Error::StoreUnavailable).
    pub fn registry(&self) -> Result<Vec<RegistryEntry>> {
        match kv::get_latest(self, self.keys().registry())? {
            None => Ok(Vec::new()),
            Some(kv) => keys::decode_registry(&kv.value),
        }
    }

    /// Writes the full registry record when none exists (initialization of an empty shard; a
    /// concurrent initializer writing the same record is fine).
    ///
    /// Errors: [`Error::StoreUnavailable`](crate::Error::StoreUnavailable).
    pub(crate) fn create_registry(&self) -> Result<()> {
        write::put_if_absent(
            self,
            self.keys().registry(),
            keys::encode_registry(&keys::expected_registry()),
        )
    }

    /// Runs one compaction pass now (see the module docs of [`crate::store::etcd`]): returns the revision the cluster was
    /// compacted to, or `None` when no shard floor allows compacting past the last pass.
    ///
    /// Errors: [`Error::StoreUnavailable`](crate::Error::StoreUnavailable); [`Error::Codec`](crate::Error::Codec) for a malformed floor record.
    pub fn compact_history(&self) -> Result<Option<i64>> {
        history::compact(self)
    }

    /// The etcd revision of the last compaction NoKV recorded for the deployment (0 = none).
    ///
    /// Errors: [`Error::StoreUnavailable`](crate::Error::StoreUnavailable); [`Error::Codec`](crate::Error::Codec).
    pub fn compacted_revision(&self) -> Result<i64> {
        history::compacted_revision(self)
    }
}

impl Snapshot for EtcdSnapshot {
    fn version(&self) -> u64 {
        self.version
    }

    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>> {
        read::snapshot_get(self, family, key)
    }

    fn scan(&self, family: Family, spec: &ScanSpec) -> Result<Vec<ScanItem>> {
        read::snapshot_scan(self, family, spec)
    }
}

impl TxnStore for EtcdStore {
    type Snap = EtcdSnapshot;

    /// The shard commit clock; 0 when it cannot be read (every read of a snapshot then reports
    /// the failure, and a write built on it fails its read-version compare).
    fn version(&self) -> u64 {
        kv::clock(self).map(|(v, _)| v).unwrap_or(0)
    }

    fn snapshot(&self) -> EtcdSnapshot {
        match kv::clock(self) {
            Ok((version, revision)) => EtcdSnapshot {
                store: self.clone(),
                version,
                revision: AtomicI64::new(revision),
                historical: false,
                failure: None,
            },
            Err(e) => EtcdSnapshot {
                store: self.clone(),
                version: 0,
                revision: AtomicI64::new(0),
                historical: false,
                failure: Some(e.to_string()),
            },
        }
    }

    fn snapshot_at(&self, version: u64) -> Result<EtcdSnapshot> {
        let revision = history::resolve(self, version, None)?;
        Ok(EtcdSnapshot {
            store: self.clone(),
            version,
            revision: AtomicI64::new(revision),
            historical: true,
            failure: None,
        })
    }

    fn write(&self, write: CheckedWrite) -> std::result::Result<u64, WriteFailure> {
        write::write(self, write)
    }

    /// Reads are linearizable: an acknowledged commit is visible to every later snapshot.
    fn wait_for_version(&self, _version: u64) -> bool {
        true
    }

    fn history_floor(&self) -> Result<u64> {
        history::floor(self)
    }

    fn set_history_floor(&self, version: u64) -> Result<()> {
        history::set_floor(self, version)
    }
}
