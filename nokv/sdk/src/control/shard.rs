//! Shard records: one per logical shard, naming the TxnStore that backs it.

use meta::LogicalShardId;

use super::plane::{now_unix_ms, refused, ControlPlane};
pub use super::records::{ShardEngine, ShardRecord, ShardStatus, SHARD_RECORD_FORMAT};
use crate::error::{Error, PlacementErrorKind, Result};

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
            created_unix_ms: now_unix_ms(),
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

    /// The shard record of `id`, or [`PlacementErrorKind::UnknownShard`].
    pub(crate) fn require_shard(&self, id: &LogicalShardId) -> Result<ShardRecord> {
        self.get_shard(id)?
            .ok_or_else(|| refused(PlacementErrorKind::UnknownShard, format!("no shard {id}")))
    }
}
