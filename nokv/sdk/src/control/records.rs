//! The control plane's records and their encodings: the lease-bound [`OwnerRecord`] and the
//! owner-epoch counter, [`RootRecord`] (a RootPlacement with its name), [`ShardRecord`] with its
//! [`ShardEngine`], and [`ShardStatus`], one shard joined with its owner and roots. A leaf of
//! `control/`: `owner.rs`, `placement.rs` and `shard.rs` read and write them, and re-export
//! them under their own paths.

use meta::codec::RootPlacement;
use meta::LogicalShardId;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The lease-bound owner record of a shard (JSON at `<ns>control/shards/<id>/owner`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnerRecord {
    /// Opaque owner identity (e.g. `host:pid:random`).
    pub owner_id: String,
    /// Where the owner serves the shard (`host:port`; empty for an embedded owner).
    pub address: String,
    /// The owner epoch granted with this ownership (strictly increasing per shard).
    pub epoch: u64,
    /// The etcd lease the record is bound to.
    pub lease_id: i64,
    /// Lease TTL in seconds.
    pub ttl_seconds: i64,
    /// Acquisition time, Unix milliseconds.
    pub acquired_unix_ms: u64,
}

impl OwnerRecord {
    pub(crate) fn decode(b: &[u8]) -> Result<OwnerRecord> {
        serde_json::from_slice(b)
            .map_err(|e| Error::InvalidArgument(format!("malformed owner record: {e}")))
    }
}

pub(crate) fn decode_epoch(b: &[u8]) -> Result<u64> {
    let arr: [u8; 8] = b
        .try_into()
        .map_err(|_| Error::InvalidArgument("malformed owner epoch counter".into()))?;
    Ok(u64::from_be_bytes(arr))
}

/// A root's placement with its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootRecord {
    /// The root's unique name (same rules as a workbench id: ASCII letters, digits, `_`, `-`,
    /// starting with a letter or digit, at most 128 bytes).
    pub name: String,
    /// root_id → logical_shard_id, placement_generation, lifecycle.
    pub placement: RootPlacement,
}

/// Value of a root record: `u32be name_len | name | RootPlacement (meta codec)`.
pub(super) fn encode_root(r: &RootRecord) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + r.name.len() + 48);
    v.extend_from_slice(
        &u32::try_from(r.name.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    v.extend_from_slice(r.name.as_bytes());
    v.extend_from_slice(&r.placement.encode());
    v
}

pub(super) fn decode_root(b: &[u8]) -> Result<RootRecord> {
    let bad = |why: &str| Error::InvalidArgument(format!("malformed root record: {why}"));
    let (len, rest) = b.split_at_checked(4).ok_or_else(|| bad("truncated"))?;
    let len = u32::from_be_bytes(len.try_into().map_err(|_| bad("truncated"))?) as usize;
    let (name, placement) = rest.split_at_checked(len).ok_or_else(|| bad("truncated"))?;
    let name = std::str::from_utf8(name).map_err(|_| bad("name is not UTF-8"))?;
    Ok(RootRecord {
        name: name.to_owned(),
        placement: RootPlacement::decode(placement).map_err(|e| bad(&e.to_string()))?,
    })
}

/// `format` of a shard record.
pub const SHARD_RECORD_FORMAT: &str = "nokv-shard";

/// Which TxnStore backs a logical shard (part of its placement).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ShardEngine {
    /// The shard's keyspace in the control plane's own etcd cluster and namespace
    /// (`<ns>shards/<shard>/…`, see `meta::store::etcd`): survives the loss of any owner.
    Etcd,
    /// A holt database on its owner's disk (the embedded single-node fast path): it moves only
    /// with that disk.
    Holt,
}

/// The control-plane record of one logical shard (JSON at `<ns>control/shards/<id>/record`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRecord {
    /// Always [`SHARD_RECORD_FORMAT`].
    pub format: String,
    /// Record version, 1.
    pub version: u32,
    /// 32 lowercase hex characters.
    pub logical_shard_id: String,
    /// The backing engine.
    pub engine: ShardEngine,
    /// Creation time, Unix milliseconds.
    pub created_unix_ms: u64,
}

impl ShardRecord {
    /// The logical shard id.
    ///
    /// Errors: [`Error::InvalidArgument`] for a malformed id.
    pub fn id(&self) -> Result<LogicalShardId> {
        LogicalShardId::from_hex(&self.logical_shard_id)
            .map_err(|e| Error::InvalidArgument(format!("shard record: {e}")))
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<ShardRecord> {
        let r: ShardRecord = serde_json::from_slice(bytes)
            .map_err(|e| Error::InvalidArgument(format!("malformed shard record: {e}")))?;
        if r.format != SHARD_RECORD_FORMAT || r.version != 1 {
            return Err(Error::InvalidArgument(format!(
                "shard record format {:?} version {} is not supported",
                r.format, r.version
            )));
        }
        r.id()?;
        Ok(r)
    }
}

/// A shard with its current owner and roots (`nokv shard list`).
#[derive(Clone, Debug)]
pub struct ShardStatus {
    /// The record.
    pub record: ShardRecord,
    /// The lease-bound owner record, if an owner holds the shard now.
    pub owner: Option<OwnerRecord>,
    /// The last owner epoch granted (0 = never owned).
    pub last_epoch: u64,
    /// Roots placed on the shard.
    pub roots: Vec<RootRecord>,
}
