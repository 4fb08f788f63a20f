//! How to reach and lay out one etcd-backed shard: [`EtcdOptions`], the server limits its writes
//! stay inside, the owner fence every transaction carries, the namespace rule, and the one way
//! every NoKV etcd client connects (shards and the control plane). A leaf of `etcd/`.

use std::time::Duration;

use super::bridge::{self, unavailable};
use crate::error::{Error, Result};
use crate::ids::LogicalShardId;

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
    /// [`EtcdStore::compact_history`](crate::store::etcd::EtcdStore::compact_history) runs one
    /// at once).
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
