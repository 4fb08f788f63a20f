//! The `TxnStore` contract: the trait every metadata engine implements, its read view
//! ([`Snapshot`]) and the vocabulary of scans and checked writes (see the parent module docs and
//! docs/design.md, "Transaction Store Role"). A leaf under the engines: `holt_store.rs`,
//! `shard_store.rs` and `etcd/` import it by name.

use crate::error::{Error, Result};
use crate::family::Family;
use crate::store::predicate::{Mutation, Predicate};

/// Largest number of items one scan call may return (docs/metadata-format.md: each engine call returns at most
/// 255 logical items).
pub const MAX_SCAN_ITEMS: usize = 255;

/// A bounded ordered scan over one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanSpec {
    /// Only keys starting with these bytes.
    pub prefix: Vec<u8>,
    /// Only items whose bytes compare strictly greater (exclusive marker).
    pub start_after: Option<Vec<u8>>,
    /// Roll keys with this byte after the prefix up into one [`ScanItem::Prefix`].
    pub delimiter: Option<u8>,
    /// At most this many items (clamped to 1..=[`MAX_SCAN_ITEMS`]).
    pub limit: usize,
}

/// One scan result item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanItem {
    /// An exact row.
    Row {
        /// Full key.
        key: Vec<u8>,
        /// Value bytes.
        value: Vec<u8>,
    },
    /// A delimiter rollup: `prefix ..= delimiter`.
    Prefix(Vec<u8>),
}

impl ScanItem {
    /// The key or rollup bytes (the resume marker).
    pub fn marker(&self) -> &[u8] {
        match self {
            ScanItem::Row { key, .. } => key,
            ScanItem::Prefix(p) => p,
        }
    }
}

/// One checked atomic write.
#[derive(Debug, Clone, Default)]
pub struct CheckedWrite {
    /// When set, the store's current version must equal it (the commit version is then
    /// `read_version + 1`).
    pub read_version: Option<u64>,
    /// Key predicates checked before anything applies.
    pub predicates: Vec<Predicate>,
    /// Puts and deletes applied in order.
    pub mutations: Vec<Mutation>,
}

/// Why a checked write applied nothing.
#[derive(Debug)]
pub enum WriteFailure {
    /// A key predicate did not hold. `family` is `None` if the engine named an unknown tree.
    Predicate {
        /// Keyspace of the failed predicate.
        family: Option<Family>,
        /// Key of the failed predicate.
        key: Vec<u8>,
    },
    /// The read-version fence failed.
    ReadVersion {
        /// Version the write was built on.
        expected: u64,
        /// Store version at commit.
        actual: u64,
    },
    /// Any other failure.
    Other(Error),
}

/// A checked write the store has accepted — validated against its newest accepted state, which
/// later writes are validated against — whose durability is pending (see
/// [`TxnStore::write_pipelined`]).
#[must_use = "a pipelined write is acknowledged only by PendingWrite::wait"]
pub struct PendingWrite {
    version: u64,
    wait: Option<Box<dyn FnOnce() -> Result<u64> + Send>>,
}

impl std::fmt::Debug for PendingWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWrite")
            .field("version", &self.version)
            .field("pending", &self.wait.is_some())
            .finish()
    }
}

impl PendingWrite {
    /// A write that is already durable and visible at commit `version`.
    pub fn done(version: u64) -> Self {
        PendingWrite {
            version,
            wait: None,
        }
    }

    /// A write accepted at commit `version` whose durability `wait` awaits (and returns the
    /// commit version).
    pub fn deferred(version: u64, wait: impl FnOnce() -> Result<u64> + Send + 'static) -> Self {
        PendingWrite {
            version,
            wait: Some(Box::new(wait)),
        }
    }

    /// The commit version the write was accepted at.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Waits until the write is durable and visible; returns its commit version.
    ///
    /// Errors: the store's durability failure ([`Error::Storage`] from holt: the group's I/O
    /// error, or `Poisoned` when a group it was accepted on top of failed).
    pub fn wait(self) -> Result<u64> {
        match self.wait {
            None => Ok(self.version),
            Some(wait) => wait(),
        }
    }
}

/// A consistent read view at one version.
pub trait Snapshot {
    /// The read version.
    fn version(&self) -> u64;
    /// Point read. Errors: storage failures.
    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// One bounded scan call (≤ [`MAX_SCAN_ITEMS`] items). Errors: storage failures.
    fn scan(&self, family: Family, spec: &ScanSpec) -> Result<Vec<ScanItem>>;

    /// Every `(key, value)` row of `family` under `prefix`, in key order (see
    /// [`Snapshot::for_each_row`]; cost and memory O(rows under the prefix)).
    ///
    /// Errors: those of [`Snapshot::for_each_row`].
    fn rows(
        &self,
        family: Family,
        prefix: &[u8],
        what: &'static str,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>
    where
        Self: Sized,
    {
        let mut out = Vec::new();
        self.for_each_row(family, prefix, what, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f(key, value)` for every row of `family` whose key starts with `prefix`, in key
    /// order, through bounded scans of ≤ [`MAX_SCAN_ITEMS`] rows, each resuming strictly after
    /// the last key seen (cost O(rows under the prefix)). `what` names the family in errors.
    ///
    /// Errors: storage failures; [`Error::Codec`] if the store returns a common-prefix roll-up
    /// (none is requested); the first error `f` returns, which stops the scan.
    fn for_each_row(
        &self,
        family: Family,
        prefix: &[u8],
        what: &'static str,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let mut marker: Option<Vec<u8>> = None;
        loop {
            let spec = ScanSpec {
                prefix: prefix.to_vec(),
                start_after: marker.take(),
                delimiter: None,
                limit: MAX_SCAN_ITEMS,
            };
            let batch = self.scan(family, &spec)?;
            let exhausted = batch.len() < MAX_SCAN_ITEMS;
            for item in batch {
                let ScanItem::Row { key, value } = item else {
                    return Err(Error::codec(what, "unexpected rollup"));
                };
                f(&key, &value)?;
                marker = Some(key);
            }
            if exhausted {
                return Ok(());
            }
        }
    }
}

/// The narrow transactional store used by the metadata layer.
pub trait TxnStore: Send + Sync {
    /// Snapshot type.
    type Snap: Snapshot;
    /// Last committed version.
    fn version(&self) -> u64;
    /// A snapshot at the current version.
    fn snapshot(&self) -> Self::Snap;
    /// A snapshot at an older version. Errors: pruned history or a version above the current.
    fn snapshot_at(&self, version: u64) -> Result<Self::Snap>;
    /// Applies one checked atomic write and returns its commit version.
    fn write(&self, write: CheckedWrite) -> std::result::Result<u64, WriteFailure>;

    /// The MVCC history floor: the oldest version [`TxnStore::snapshot_at`] still serves.
    /// The default (for stores that keep every version) is 0.
    ///
    /// Errors: storage failures.
    fn history_floor(&self) -> Result<u64> {
        Ok(0)
    }

    /// Raises the history floor to `version` (never lowers it; at most the current version), after
    /// which older versions may be discarded. Callers pass a floor at or below every HistoryHold
    /// (docs/metadata-format.md, "Snapshot Lifecycle And History Holds"). The default refuses: a store must
    /// implement it to discard history.
    ///
    /// Errors: [`Error::InvalidArgument`] above the current version or when unsupported;
    /// storage failures.
    fn set_history_floor(&self, version: u64) -> Result<()> {
        let _ = version;
        Err(Error::invalid("this store does not discard history"))
    }

    /// Waits (bounded by [`VISIBILITY_WAIT`]) until `version` is visible to new snapshots.
    /// Returns whether it became visible.
    ///
    /// Needed because an engine checks write predicates against its newest *accepted* state,
    /// which may run ahead of the readable state while a group commit is being made durable:
    /// a command rebuilt from a fresh snapshot immediately after a conflict would otherwise
    /// meet the same conflict again. The default implementation polls [`TxnStore::version`]
    /// with exponential backoff (20 µs doubling up to 1 ms); [`crate::store::HoltStore`] overrides it with
    /// holt's condition-variable wait (`holt::Db::wait_visible`), which does not poll.
    fn wait_for_version(&self, version: u64) -> bool {
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(20);
        while self.version() < version {
            if start.elapsed() >= VISIBILITY_WAIT {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(1));
        }
        true
    }

    /// A snapshot of the newest *accepted* state: every write accepted so far, including
    /// pipelined ones not yet durable. For planning under the command sequencer only (see
    /// [`crate::shard::sequencer`]); never return data read from it before
    /// [`TxnStore::wait_visible`] for its version returned. The default is
    /// [`TxnStore::snapshot`] (a store without pipelining accepts only durable writes).
    fn accepted_snapshot(&self) -> Self::Snap {
        self.snapshot()
    }

    /// Validates `write` against the newest accepted state and accepts it without waiting for
    /// durability; [`PendingWrite::wait`] returns once it is durable and visible. The default
    /// runs [`TxnStore::write`] (durable at return).
    ///
    /// Errors: as [`TxnStore::write`]; nothing is accepted on any error.
    fn write_pipelined(
        &self,
        write: CheckedWrite,
    ) -> std::result::Result<PendingWrite, WriteFailure> {
        self.write(write).map(PendingWrite::done)
    }

    /// Waits until `version` is visible to new snapshots (bounded by [`VISIBILITY_WAIT`]).
    ///
    /// Errors: [`Error::Storage`] when the engine failed (a poisoned WAL: the version will never
    /// become visible) or the wait timed out.
    fn wait_visible(&self, version: u64) -> Result<()> {
        if self.wait_for_version(version) {
            Ok(())
        } else {
            Err(Error::Storage(holt::Error::Poisoned {
                reason: format!("version {version} did not become visible"),
            }))
        }
    }
}

/// Upper bound of [`TxnStore::wait_for_version`].
pub const VISIBILITY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// One keyspace of a store's registry (docs/metadata-format.md, "Schema Gate": the exact tree registry). For
/// holt these are the database's named trees; for etcd the registry record written at
/// initialization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// Tree (family) name.
    pub name: String,
    /// Stable one-byte tag.
    pub tag: u8,
    /// Whether the engine keeps MVCC history for it.
    pub versioned: bool,
}
