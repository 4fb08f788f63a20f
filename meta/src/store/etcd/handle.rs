//! [`EtcdStore`], the handle on one etcd-backed shard (a connection, the shard's key layout and
//! its options), and [`EtcdSnapshot`], a read view of it. What they do as a TxnStore is in
//! `txn_store.rs`; the steps it is built of (`kv.rs`, `read.rs`, `write.rs`, `history.rs`) take
//! these handles by name.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::keys::ShardKeys;
use super::options::{connect, validate_namespace, EtcdOptions};
use crate::error::{Error, Result};
use crate::family::Family;

struct Inner {
    kv: etcd_client::KvClient,
    keys: ShardKeys,
    options: EtcdOptions,
    last_compaction: Mutex<Option<Instant>>,
}

/// The [`TxnStore`](crate::store::TxnStore) of one logical shard in an etcd cluster (see the
/// module docs of [`crate::store::etcd`]). Cheap to clone; `Send + Sync`; every method blocks on
/// network round trips.
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

    pub(crate) fn keys(&self) -> &ShardKeys {
        &self.inner.keys
    }

    pub(crate) fn kv(&self) -> etcd_client::KvClient {
        self.inner.kv.clone()
    }

    /// When the last automatic compaction pass ran (`history.rs` spaces the passes out).
    pub(super) fn last_compaction(&self) -> &Mutex<Option<Instant>> {
        &self.inner.last_compaction
    }
}

/// A consistent read view of an etcd-backed shard at one commit version (see the module docs of
/// [`crate::store::etcd`]).
///
/// Taking a snapshot needs a round trip; when it fails, the snapshot reports version 0 and every
/// read returns the failure (so the infallible
/// [`TxnStore::snapshot`](crate::store::TxnStore::snapshot) signature holds and no caller can act
/// on data it did not read).
pub struct EtcdSnapshot {
    pub(super) store: EtcdStore,
    pub(super) version: u64,
    /// etcd revision the rows are read at; moves forward (within `[R(v), R(v+1))`) when
    /// compaction passes it.
    pub(super) revision: AtomicI64,
    /// Taken by `snapshot_at` (unversioned families then read their latest state).
    pub(super) historical: bool,
    pub(super) failure: Option<String>,
}
