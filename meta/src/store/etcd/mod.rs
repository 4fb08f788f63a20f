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
//!
//! [`TxnStore`]: crate::store::TxnStore
//! [`CheckedWrite`]: crate::store::CheckedWrite
//! [`Error::StoreUnavailable`]: crate::Error::StoreUnavailable
//! [`Error::ResourceExhausted`]: crate::Error::ResourceExhausted

pub mod bridge;
mod handle;
mod history;
mod keys;
mod kv;
mod options;
mod read;
mod txn_store;
mod write;

#[cfg(test)]
mod tests;

pub use handle::{EtcdSnapshot, EtcdStore};
pub use options::{
    connect, validate_namespace, EtcdLimits, EtcdOptions, OwnerFence, ServingCheck,
    DEFAULT_NAMESPACE,
};
