//! [`EtcdStore`]: a shard's metadata in an etcd cluster, so it survives the loss of any owner
//! process or machine (cargo feature `etcd`; issue "Beyond one machine").
//!
//! # Mapping the TxnStore onto etcd
//!
//! etcd is an ordered key-value store with MVCC transactions: ranges in key order, one
//! transaction of compares + puts/deletes applied atomically at one cluster revision, reads at
//! an older revision until compaction. Every [`TxnStore`] primitive maps onto those three, so
//! TiKV (ranges, optimistic transactions with conditions, reads at a timestamp, GC safe point)
//! or FoundationDB (ranges, transactions with read conflicts, read versions) can follow the
//! same design.
//!
//! ## Keys
//!
//! ```text
//! <ns>shards/<shard>/d<tag><key>   one row of the family with tree tag <tag> (docs/metadata-format.md tags;
//!                                   system 0xF0, recovery_outbox 0xF1)
//! <ns>shards/<shard>/e/clock       the shard commit clock: u64be commit version (absent = 0)
//! <ns>shards/<shard>/e/registry    the registry record (the schema gate's tree registry)
//! <ns>shards/<shard>/v<u64be v>    commit-version index: created by the commit of version v;
//!                                   create_revision = its etcd revision, value = write nonce
//! /nokv-compaction/floors/<h>      the shard's history floor: u64be floor | shard key prefix
//!                                   (<h> = 32 hex of SHA-256 of the shard key prefix)
//! /nokv-compaction/compacted       the revision NoKV compacted the cluster to (u64be)
//! ```
//!
//! `<ns>` is the deployment namespace (default `/nokv/`), `<shard>` the 32-hex logical shard id.
//! Several shards (and the control plane, under `<ns>control/`) share one cluster; the
//! compaction records are cluster-wide because compaction is.
//!
//! ## Versions and revisions
//!
//! etcd revisions are cluster-wide; a shard's commit versions are dense (1, 2, 3, …) as the
//! metadata layer requires (the commit version of a command is `read_version + 1`). Every write
//! transaction compares the clock key with the read version and puts `read_version + 1` into it,
//! so the clock is the read-version fence and the commit version. The same transaction creates
//! the version-index key `v<commit version>`: its create revision is the etcd revision of that
//! commit. A snapshot at version `v` reads at any revision in `[R(v), R(v+1))`: no commit of
//! this shard lies in between, whatever other shards wrote. The current snapshot is the clock
//! read plus the revision of that read.
//!
//! ## Checked writes
//!
//! One [`CheckedWrite`] is one etcd transaction:
//!
//! - compares: the clock equals the read version (absent when 0); the control-plane owner key is
//!   bound to this owner's lease when an [`OwnerFence`] is configured (a fenced owner can never
//!   commit); then every predicate: `Absent` = `version == 0`, `Present` = `version > 0`,
//!   `Equals(v)` = `value == v` (etcd fails a value compare on a missing key). The metadata
//!   executor already puts the owner epoch (`System("owner_epoch")`), RootFence and schema
//!   marker among the predicates of every command, so they are compared inside the same
//!   transaction as the writes;
//! - success: the puts/deletes (the last mutation of a key wins: etcd refuses a key twice in one
//!   transaction), the clock put and the version-index key;
//! - failure: a range of the clock, the version-index key, the owner key and every predicate key,
//!   from which the first failing check is named exactly like holt does (read version first,
//!   then predicates in order).
//!
//! A request that fails without an answer (member lost, leader change, deadline) may or may not
//! have applied. It is retried with the same 16-byte write nonce; if the retry finds the clock
//! already moved, the failure branch's version-index range tells whether the commit of
//! `read_version + 1` carries this write's nonce — then the first attempt applied and its
//! version is returned. Retries stop after [`EtcdOptions::retry_window`], with
//! [`Error::StoreUnavailable`] (`write_outcome_unknown` when an attempt may have applied).
//!
//! ## History floor and compaction
//!
//! etcd compaction is cluster-wide, so one shard may not simply compact at its own floor. Each
//! shard records its floor under `/nokv-compaction/floors/` (whatever its namespace). A
//! compaction pass reads every floor `f` and the
//! revision `R(f+1)` of the commit after it: the cluster may be compacted to
//! `min over shards of R(f+1) - 1` (a shard with no commit after its floor does not limit it),
//! because each shard can still read version `f` at that revision. The pass records the target
//! in `<ns>compacted` before compacting; a read that meets a compacted revision re-resolves its
//! version against that record and continues at the compacted revision when no commit of its
//! shard lies in between, else reports `HistoryPruned`. The metadata layer never raises a floor
//! past a HistoryHold, so compaction never passes one. etcd's own `--auto-compaction-*` must
//! stay off.
//!
//! ## Limits
//!
//! etcd refuses a transaction with more than `--max-txn-ops` compares, success ops or failure
//! ops, or a request over `--max-request-bytes`. [`EtcdLimits`] mirrors the server flags; a write
//! that would exceed them fails before it is sent with [`Error::ResourceExhausted`] and applies
//! nothing (see `docs/distribution.md` for what that means for shard and command size).
//!
//! ## Differences from holt a caller can observe
//!
//! - every read is a network round trip (linearizable reads: a read after an acknowledged write
//!   sees it, whichever member serves it);
//! - several processes may open the same shard at once: the owner epoch (advanced at every open,
//!   compared in every command) and the optional lease fence decide which one may commit;
//! - the reserved unversioned families (`system`, `recovery_outbox`) read as of the snapshot in a
//!   current snapshot and at their latest state in an older one (as holt does).

pub mod bridge;
mod history;
mod keys;
mod kv;
mod read;
mod write;

#[cfg(test)]
mod tests;

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::LogicalShardId;
use crate::store::{
    CheckedWrite, RegistryEntry, ScanItem, ScanSpec, Snapshot, TxnStore, WriteFailure,
};

pub(crate) use bridge::unavailable;
use keys::ShardKeys;

/// Default deployment namespace (every key of a deployment starts with it).
pub const DEFAULT_NAMESPACE: &str = "/nokv/";

/// The etcd server limits a shard's writes must stay inside. They mirror the cluster's flags;
/// the server enforces them too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdLimits {
    /// `--max-txn-ops`: most compares, or success ops, or failure ops of one transaction.
    pub max_txn_ops: usize,
    /// `--max-request-bytes`: largest request in bytes.
    pub max_request_bytes: usize,
    /// Largest response this client decodes, in bytes (a scan returns at most
    /// [`crate::store::MAX_SCAN_ITEMS`] rows; RecoveryOutbox chunks are 64 KiB each).
    pub max_response_bytes: usize,
}

impl Default for EtcdLimits {
    /// The limits NoKV documents for etcd clusters backing shards: `--max-txn-ops 16384`,
    /// `--max-request-bytes 33554432` (32 MiB); responses up to 256 MiB.
    fn default() -> Self {
        EtcdLimits {
            max_txn_ops: 16_384,
            max_request_bytes: 32 * 1024 * 1024,
            max_response_bytes: 256 * 1024 * 1024,
        }
    }
}

/// A control-plane ownership every transaction of the store must still hold: `key` must exist
/// and be bound to etcd lease `lease_id`. When the lease expires (the owner stopped renewing)
/// etcd deletes the key, and every later transaction of the store fails with
/// [`Error::Fenced`] — whatever the owner process believes.
///
/// With `serving` set, the owner's own fail-stop clock is consulted before every transaction is
/// sent: once it says the owner may no longer serve (its lease could be about to expire), the
/// write is refused with [`Error::Fenced`] without reaching etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerFence {
    /// The shard-owner record's etcd key.
    pub key: Vec<u8>,
    /// The etcd lease id the record is bound to.
    pub lease_id: i64,
    /// The owner's fail-stop check (`None`: only etcd's lease compare fences).
    pub serving: Option<ServingCheck>,
}

/// The owner-side fail-stop check of an [`OwnerFence`]: true while the owner may still serve
/// (before its renewed lease can have expired, minus a safety margin).
#[derive(Clone)]
pub struct ServingCheck(pub std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl ServingCheck {
    /// Whether the owner may still serve now.
    pub fn serving(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for ServingCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServingCheck")
    }
}

/// Two checks are equal when they are the same closure.
impl PartialEq for ServingCheck {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ServingCheck {}

/// How to reach and lay out one etcd-backed shard.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Client URLs of the cluster members (`http://host:port`).
    pub endpoints: Vec<String>,
    /// Deployment namespace: every key starts with it (ends with `/`; default
    /// [`DEFAULT_NAMESPACE`]).
    pub namespace: String,
    /// The logical shard whose keyspace this store is.
    pub logical_shard_id: LogicalShardId,
    /// Server limits the writes stay inside.
    pub limits: EtcdLimits,
    /// Deadline of one etcd request (default 5 s).
    pub request_timeout: Duration,
    /// How long a call retries transient failures (no leader, member lost) before it reports
    /// [`Error::StoreUnavailable`] (default 20 s).
    pub retry_window: Duration,
    /// Ownership compared in every transaction (default none).
    pub owner_fence: Option<OwnerFence>,
    /// Least time between two automatic compaction passes after a floor advance (default 30 s;
    /// [`EtcdStore::compact_history`] runs one at once).
    pub compaction_interval: Duration,
}

impl EtcdOptions {
    /// Options for `logical_shard_id` on the cluster at `endpoints`, with every default.
    pub fn new(endpoints: Vec<String>, logical_shard_id: LogicalShardId) -> Self {
        EtcdOptions {
            endpoints,
            namespace: DEFAULT_NAMESPACE.to_owned(),
            logical_shard_id,
            limits: EtcdLimits::default(),
            request_timeout: Duration::from_secs(5),
            retry_window: Duration::from_secs(20),
            owner_fence: None,
            compaction_interval: Duration::from_secs(30),
        }
    }
}

/// Validates a deployment namespace: 1 ..= 256 bytes of printable ASCII without spaces,
/// starting and ending with `/`.
///
/// Errors: [`Error::InvalidArgument`].
pub fn validate_namespace(ns: &str) -> Result<()> {
    if ns.is_empty()
        || ns.len() > 256
        || !ns.starts_with('/')
        || !ns.ends_with('/')
        || !ns.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(Error::invalid(format!(
            "etcd namespace {ns:?} must be 1..=256 printable ASCII bytes starting and ending with '/'"
        )));
    }
    Ok(())
}

/// Connects an etcd client with the request deadline, keep-alive and require-leader settings
/// every NoKV etcd client uses (shards and the control plane).
///
/// Errors: [`Error::InvalidArgument`] for no or malformed endpoints; [`Error::StoreUnavailable`].
pub fn connect(endpoints: &[String], request_timeout: Duration) -> Result<etcd_client::Client> {
    if endpoints.is_empty() {
        return Err(Error::invalid("no etcd endpoints given"));
    }
    for e in endpoints {
        if !(e.starts_with("http://") || e.starts_with("https://")) || e.len() > 2048 {
            return Err(Error::invalid(format!(
                "etcd endpoint {e:?} must be an http:// or https:// URL"
            )));
        }
    }
    let opts = etcd_client::ConnectOptions::new()
        .with_timeout(request_timeout)
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
        .with_require_leader(true);
    let eps = endpoints.to_vec();
    bridge::run(async move { etcd_client::Client::connect(eps, Some(opts)).await })?.map_err(|e| {
        match e {
            etcd_client::Error::InvalidArgs(r) | etcd_client::Error::EndpointError(r) => {
                Error::invalid(format!("etcd endpoints: {r}"))
            }
            etcd_client::Error::InvalidUri(u) => Error::invalid(format!("etcd endpoint: {u}")),
            other => unavailable(format!("cannot connect to etcd: {other}"), false),
        }
    })
}

struct Inner {
    kv: etcd_client::KvClient,
    keys: ShardKeys,
    options: EtcdOptions,
    last_compaction: Mutex<Option<Instant>>,
}

/// The [`TxnStore`] of one logical shard in an etcd cluster (see the module docs). Cheap to
/// clone; `Send + Sync`; every method blocks on network round trips.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.inner.options.endpoints)
            .field("namespace", &self.inner.options.namespace)
            .field("logical_shard_id", &self.inner.options.logical_shard_id)
            .finish()
    }
}

impl EtcdStore {
    /// Connects to the cluster (lazily: no request is sent yet) for the shard of `options`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad namespace, endpoints or limits;
    /// [`Error::StoreUnavailable`] when the client cannot be built.
    pub fn open(options: EtcdOptions) -> Result<EtcdStore> {
        validate_namespace(&options.namespace)?;
        if options.limits.max_txn_ops < 16 || options.limits.max_request_bytes < 64 * 1024 {
            return Err(Error::invalid(
                "etcd limits below 16 transaction ops or 64 KiB requests cannot hold a metadata command",
            ));
        }
        let client = connect(&options.endpoints, options.request_timeout)?;
        let kv = client
            .kv_client()
            .max_decoding_message_size(options.limits.max_response_bytes)
            .max_encoding_message_size(options.limits.max_request_bytes.saturating_mul(2));
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                kv,
                keys: ShardKeys::new(&options.namespace, &options.logical_shard_id),
                options,
                last_compaction: Mutex::new(None),
            }),
        })
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &EtcdOptions {
        &self.inner.options
    }

    /// The etcd key prefix of every row of `family` in this shard (diagnostics and tests).
    pub fn family_prefix(&self, family: Family) -> Vec<u8> {
        self.inner.keys.family_prefix(family)
    }

    /// The shard's registry record (`Ok(empty)` when none was written yet).
    ///
    /// Errors: [`Error::Codec`] for a malformed record; [`Error::StoreUnavailable`].
    pub fn registry(&self) -> Result<Vec<RegistryEntry>> {
        match kv::get_latest(self, self.inner.keys.registry())? {
            None => Ok(Vec::new()),
            Some(kv) => keys::decode_registry(&kv.value),
        }
    }

    /// Writes the full registry record when none exists (initialization of an empty shard; a
    /// concurrent initializer writing the same record is fine).
    ///
    /// Errors: [`Error::StoreUnavailable`].
    pub(crate) fn create_registry(&self) -> Result<()> {
        write::put_if_absent(
            self,
            self.inner.keys.registry(),
            keys::encode_registry(&keys::expected_registry()),
        )
    }

    /// Runs one compaction pass now (see the module docs): returns the revision the cluster was
    /// compacted to, or `None` when no shard floor allows compacting past the last pass.
    ///
    /// Errors: [`Error::StoreUnavailable`]; [`Error::Codec`] for a malformed floor record.
    pub fn compact_history(&self) -> Result<Option<i64>> {
        history::compact(self)
    }

    /// The etcd revision of the last compaction NoKV recorded for the deployment (0 = none).
    ///
    /// Errors: [`Error::StoreUnavailable`]; [`Error::Codec`].
    pub fn compacted_revision(&self) -> Result<i64> {
        history::compacted_revision(self)
    }

    pub(crate) fn keys(&self) -> &ShardKeys {
        &self.inner.keys
    }

    pub(crate) fn kv(&self) -> etcd_client::KvClient {
        self.inner.kv.clone()
    }
}

/// A consistent read view of an etcd-backed shard at one commit version (see the module docs).
///
/// Taking a snapshot needs a round trip; when it fails, the snapshot reports version 0 and every
/// read returns the failure (so the infallible [`TxnStore::snapshot`] signature holds and no
/// caller can act on data it did not read).
pub struct EtcdSnapshot {
    store: EtcdStore,
    version: u64,
    /// etcd revision the rows are read at; moves forward (within `[R(v), R(v+1))`) when
    /// compaction passes it.
    revision: AtomicI64,
    /// Taken by `snapshot_at` (unversioned families then read their latest state).
    historical: bool,
    failure: Option<String>,
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
