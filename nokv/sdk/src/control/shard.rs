//! Shard records: one per logical shard, naming the TxnStore that backs it.

use meta::LogicalShardId;
use serde::{Deserialize, Serialize};

use super::{refused, ControlPlane, OwnerRecord, PlacementErrorKind, RootRecord};
use crate::error::{Error, Result};

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

    fn decode(bytes: &[u8]) -> Result<ShardRecord> {
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

impl ControlPlane {
    /// Creates the record of a new logical shard (fresh random id) backed by `engine`.
    ///
    /// Errors: [`Error::Meta`] (`StoreUnavailable`) when etcd cannot be reached.
    pub fn create_shard(&self, engine: ShardEngine) -> Result<ShardRecord> {
        let id = LogicalShardId::random()?;
        let record = ShardRecord {
            format: SHARD_RECORD_FORMAT.into(),
            version: 1,
            logical_shard_id: id.to_string(),
            engine,
            created_unix_ms: super::now_unix_ms(),
        };
        let key = self.shard_key(&id, "record");
        let value = serde_json::to_vec(&record)
            .map_err(|e| Error::InvalidArgument(format!("shard record: {e}")))?;
        let (k, v) = (key.clone(), value.clone());
        let resp = self.call("create shard", move |mut c| {
            let txn = etcd_client::Txn::new()
                .when(vec![etcd_client::Compare::version(
                    k.clone(),
                    etcd_client::CompareOp::Equal,
                    0,
                )])
                .and_then(vec![etcd_client::TxnOp::put(k.clone(), v.clone(), None)]);
            async move { c.txn(txn).await }
        })?;
        if !resp.succeeded() {
            // A retried create whose first attempt applied finds its own record.
            match self.get_shard(&id)? {
                Some(r) if r == record => {}
                _ => {
                    return Err(refused(
                        PlacementErrorKind::Conflict,
                        "a shard record with a fresh random id already exists",
                    ))
                }
            }
        }
        Ok(record)
    }

    /// The record of `id` (`None` when absent).
    ///
    /// Errors: a malformed record; etcd unavailable.
    pub fn get_shard(&self, id: &LogicalShardId) -> Result<Option<ShardRecord>> {
        let got = self.get_many(vec![self.shard_key(id, "record")])?;
        match got.into_iter().next().flatten() {
            None => Ok(None),
            Some((v, _)) => ShardRecord::decode(&v).map(Some),
        }
    }

    /// Every shard with its owner, last epoch and roots, in id order.
    ///
    /// Errors: a malformed record; etcd unavailable.
    pub fn list_shards(&self) -> Result<Vec<ShardStatus>> {
        let roots = self.list_roots()?;
        let rows = self.list(self.key("shards/"))?;
        let mut out: Vec<ShardStatus> = Vec::new();
        for (key, value) in &rows {
            if !key.ends_with(b"/record") {
                continue;
            }
            let record = ShardRecord::decode(value)?;
            let id = record.id()?;
            let owner_key = self.shard_key(&id, "owner");
            let epoch_key = self.shard_key(&id, "epoch");
            let owner = rows
                .iter()
                .find(|(k, _)| *k == owner_key)
                .map(|(_, v)| OwnerRecord::decode(v))
                .transpose()?;
            let last_epoch = rows
                .iter()
                .find(|(k, _)| *k == epoch_key)
                .map(|(_, v)| super::owner::decode_epoch(v))
                .transpose()?
                .unwrap_or(0);
            out.push(ShardStatus {
                roots: roots
                    .iter()
                    .filter(|r| r.placement.logical_shard_id == id)
                    .cloned()
                    .collect(),
                record,
                owner,
                last_epoch,
            });
        }
        Ok(out)
    }

    /// The shard record of `id`, or [`PlacementErrorKind::UnknownShard`].
    pub(crate) fn require_shard(&self, id: &LogicalShardId) -> Result<ShardRecord> {
        self.get_shard(id)?
            .ok_or_else(|| refused(PlacementErrorKind::UnknownShard, format!("no shard {id}")))
    }
}
