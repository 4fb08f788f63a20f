//! `TxnStore`: the narrow storage trait under the metadata layer (ARCHITECTURE.md, docs/design.md
//! "Transaction Store Role"), and its engines.
//!
//! A store offers exactly: snapshots at the current or an older version, point reads, bounded
//! ordered prefix/delimiter scans, and one checked atomic multi-keyspace write (key predicates,
//! an optional read-version fence, puts and deletes), plus the MVCC history floor below which
//! older versions may be discarded. That is the shape of an ordered key-value store with MVCC
//! transactions: any engine offering ordered ranges, multi-key compare-and-write transactions
//! and reads at an older revision can back a shard (etcd today; TiKV or FoundationDB follow the
//! same mapping).
//!
//! ```text
//! store/
//!   txn.rs         the trait, its snapshots, the scan and checked-write vocabulary
//!   predicate.rs   key predicates and mutations (the words of a checked write)
//!   holt_store.rs  HoltStore: embedded holt database, one tree per family (default, fast path)
//!   etcd/          EtcdStore: a shard's keyspace in an etcd cluster (cargo feature `etcd`)
//!   shard_store.rs ShardStore: the engine of one shard, holt or etcd
//! ```
//!
//! Which engine backs a shard is part of its placement: [`ShardStore`] is the one switch,
//! an enum rather than a trait object because [`TxnStore::Snap`] is an associated type and the
//! metadata layer is generic over it. The etcd engine lives behind the `etcd` cargo feature so
//! that `meta` without it stays free of tokio, tonic and protobuf code.

#[cfg(feature = "etcd")]
pub mod etcd;
mod holt_store;
pub mod predicate;
mod shard_store;
mod txn;

pub use holt_store::{HoltSnapshot, HoltStore};
pub use predicate::{Expectation, Mutation, Predicate};
pub use shard_store::{ShardSnapshot, ShardStore};
pub use txn::{
    CheckedWrite, PendingWrite, RegistryEntry, ScanItem, ScanSpec, Snapshot, TxnStore,
    WriteFailure, MAX_SCAN_ITEMS, VISIBILITY_WAIT,
};
