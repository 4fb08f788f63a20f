//! RootPlacement records (docs/metadata-format.md, "Placement Authority").
//!
//! `create_root` writes the RootPlacement (`Provisioning`, placement generation 1) and the name
//! index in one transaction, before the root's first write. The owner that first opens the
//! root's shard installs the matching RootFence (the schema gate writes it in the shard's
//! initializing commit) and then moves the record to `Active` with [`ControlPlane::activate_root`].
//! A `Provisioning` root may still be reassigned to another logical shard (its generation
//! advances); an `Active` (populated) root never changes logical shard, because object keys
//! embed the shard id.
//!
//! [`ControlPlane::list_shards`] is here too: it joins every shard record with its owner and the
//! roots placed on it (`nokv shard list`).

use meta::codec::{RootPlacement, RootPlacementLifecycle};
use meta::{LogicalShardId, RootId};

use super::plane::{refused, ControlPlane};
pub use super::records::RootRecord;
use super::records::{decode_epoch, decode_root, encode_root, OwnerRecord, ShardRecord};
use super::shard::{ShardEngine, ShardStatus};
use crate::error::{Error, PlacementErrorKind, Result};

/// Validates a root name (the workbench-id rules).
///
/// Errors: [`Error::InvalidArgument`].
pub fn validate_root_name(name: &str) -> Result<()> {
    meta::validate_workbench_id(name)
        .map_err(|_| Error::InvalidArgument(format!("invalid root name {name:?}: use 1..=128 ASCII letters, digits, '_' or '-', starting with a letter or digit")))
}

fn cmp_absent(key: &[u8]) -> etcd_client::Compare {
    etcd_client::Compare::version(key.to_vec(), etcd_client::CompareOp::Equal, 0)
}

fn cmp_equals(key: &[u8], value: &[u8]) -> etcd_client::Compare {
    etcd_client::Compare::value(key.to_vec(), etcd_client::CompareOp::Equal, value.to_vec())
}

fn put(key: &[u8], value: &[u8]) -> etcd_client::TxnOp {
    etcd_client::TxnOp::put(key.to_vec(), value.to_vec(), None)
}

impl ControlPlane {
    /// Creates root `name`: a RootPlacement (`Provisioning`, generation 1) on `shard`, or on a
    /// new etcd-backed logical shard when `shard` is `None`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad name; [`Error::Placement`] with
    /// `NameTaken`, `UnknownShard` or `ShardHasRoot` (a logical shard serves one root in this
    /// version); etcd unavailable. Nothing is written on any error.
    pub fn create_root(&self, name: &str, shard: Option<LogicalShardId>) -> Result<RootRecord> {
        validate_root_name(name)?;
        if self.root_by_name(name)?.is_some() {
            return Err(refused(
                PlacementErrorKind::NameTaken,
                format!("a root named {name:?} already exists"),
            ));
        }
        let shard = match shard {
            Some(id) => {
                self.require_shard(&id)?;
                id
            }
            None => self.create_shard(ShardEngine::Etcd)?.id()?,
        };
        let record = RootRecord {
            name: name.to_owned(),
            placement: RootPlacement {
                root_id: RootId::random()?,
                logical_shard_id: shard,
                placement_generation: 1,
                lifecycle: RootPlacementLifecycle::Provisioning,
            },
        };
        let root_hex = record.placement.root_id.to_string();
        let name_key = self.root_name_key(name);
        let root_key = self.root_key(&record.placement.root_id);
        let shard_root_key = self.shard_key(&shard, "root");
        let value = encode_root(&record);
        let (nk, rk, sk, v, hex) = (name_key, root_key, shard_root_key, value, root_hex);
        let resp = self.call("create root", move |mut c| {
            let txn = etcd_client::Txn::new()
                .when(vec![cmp_absent(&nk), cmp_absent(&rk), cmp_absent(&sk)])
                .and_then(vec![
                    put(&nk, hex.as_bytes()),
                    put(&rk, &v),
                    put(&sk, hex.as_bytes()),
                ]);
            async move { c.txn(txn).await }
        })?;
        if resp.succeeded() {
            return Ok(record);
        }
        // Lost to a concurrent create, or a retried create whose first attempt applied.
        match self.root_by_name(name)? {
            Some(r) if r == record => Ok(record),
            Some(_) => Err(refused(
                PlacementErrorKind::NameTaken,
                format!("a root named {name:?} already exists"),
            )),
            None => Err(refused(
                PlacementErrorKind::ShardHasRoot,
                format!("logical shard {shard} already serves a root"),
            )),
        }
    }

    /// The root named `name` (`None` when absent).
    ///
    /// Errors: malformed records; etcd unavailable.
    pub fn root_by_name(&self, name: &str) -> Result<Option<RootRecord>> {
        validate_root_name(name)?;
        let Some((hex, _)) = self
            .get_many(vec![self.root_name_key(name)])?
            .into_iter()
            .next()
            .flatten()
        else {
            return Ok(None);
        };
        let id = std::str::from_utf8(&hex)
            .ok()
            .and_then(|h| RootId::from_hex(h).ok())
            .ok_or_else(|| Error::InvalidArgument("malformed root name index".into()))?;
        self.root_by_id(&id)
    }

    /// The root with id `id` (`None` when absent).
    ///
    /// Errors: malformed records; etcd unavailable.
    pub fn root_by_id(&self, id: &RootId) -> Result<Option<RootRecord>> {
        match self
            .get_many(vec![self.root_key(id)])?
            .into_iter()
            .next()
            .flatten()
        {
            None => Ok(None),
            Some((v, _)) => decode_root(&v).map(Some),
        }
    }

    /// Every root, in name order.
    ///
    /// Errors: malformed records; etcd unavailable.
    pub fn list_roots(&self) -> Result<Vec<RootRecord>> {
        let mut roots = self
            .list(self.key("roots/id/"))?
            .into_iter()
            .map(|(_, v)| decode_root(&v))
            .collect::<Result<Vec<_>>>()?;
        roots.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(roots)
    }

    /// Replaces `expected` by `next` (same root) with a compare on the exact stored bytes.
    fn cas_root(
        &self,
        expected: &RootRecord,
        next: &RootRecord,
        extra: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<bool> {
        let key = self.root_key(&expected.placement.root_id);
        let (old, new) = (encode_root(expected), encode_root(next));
        let resp = self.call("update root", move |mut c| {
            let mut cmps = vec![cmp_equals(&key, &old)];
            let mut ops = vec![put(&key, &new)];
            for (k, v) in &extra {
                match v {
                    Some(v) => {
                        cmps.push(cmp_absent(k));
                        ops.push(put(k, v));
                    }
                    None => ops.push(etcd_client::TxnOp::delete(k.clone(), None)),
                }
            }
            let txn = etcd_client::Txn::new().when(cmps).and_then(ops);
            async move { c.txn(txn).await }
        })?;
        Ok(resp.succeeded())
    }

    /// Moves root `name` from `Provisioning` to `Active`: its shard has installed the matching
    /// RootFence. Idempotent for an `Active` root at the same placement.
    ///
    /// Errors: `UnknownRoot`; `Conflict` when the placement moved (other shard or generation);
    /// `PopulatedRoot` for a `Draining`/`Retired` root; etcd unavailable.
    pub fn activate_root(&self, placement: &RootPlacement) -> Result<RootRecord> {
        let current = self.root_by_id(&placement.root_id)?.ok_or_else(|| {
            refused(
                PlacementErrorKind::UnknownRoot,
                format!("no root {}", placement.root_id),
            )
        })?;
        if current.placement.logical_shard_id != placement.logical_shard_id
            || current.placement.placement_generation != placement.placement_generation
        {
            return Err(refused(
                PlacementErrorKind::Conflict,
                "the root's placement changed since it was read",
            ));
        }
        match current.placement.lifecycle {
            RootPlacementLifecycle::Active => Ok(current),
            RootPlacementLifecycle::Provisioning => {
                let next = RootRecord {
                    placement: RootPlacement {
                        lifecycle: RootPlacementLifecycle::Active,
                        ..current.placement
                    },
                    ..current.clone()
                };
                if self.cas_root(&current, &next, Vec::new())? {
                    Ok(next)
                } else {
                    // A concurrent activation (or a retried one) wins the same way.
                    match self.root_by_id(&placement.root_id)? {
                        Some(r) if r == next => Ok(next),
                        _ => Err(refused(
                            PlacementErrorKind::Conflict,
                            "the root's placement changed concurrently",
                        )),
                    }
                }
            }
            other => Err(refused(
                PlacementErrorKind::PopulatedRoot,
                format!("root {} is {other:?}", current.name),
            )),
        }
    }

    /// Places the `Provisioning` root `name` on `shard` instead, advancing its placement
    /// generation. Refused for a populated (`Active` or later) root: its objects and rows are
    /// owned by its logical shard for good.
    ///
    /// Errors: `UnknownRoot`, `UnknownShard`, `PopulatedRoot`, `ShardHasRoot`, `Conflict`; etcd
    /// unavailable. Nothing is written on any error.
    pub fn reassign_root(&self, name: &str, shard: LogicalShardId) -> Result<RootRecord> {
        let current = self.root_by_name(name)?.ok_or_else(|| {
            refused(
                PlacementErrorKind::UnknownRoot,
                format!("no root named {name:?}"),
            )
        })?;
        if current.placement.lifecycle != RootPlacementLifecycle::Provisioning {
            return Err(refused(
                PlacementErrorKind::PopulatedRoot,
                format!(
                    "root {name} is {:?}: a populated root never changes logical shard",
                    current.placement.lifecycle
                ),
            ));
        }
        self.require_shard(&shard)?;
        let next = RootRecord {
            placement: RootPlacement {
                logical_shard_id: shard,
                placement_generation: current.placement.placement_generation.saturating_add(1),
                ..current.placement
            },
            ..current.clone()
        };
        let hex = current.placement.root_id.to_string().into_bytes();
        let extra = vec![
            (self.shard_key(&shard, "root"), Some(hex)),
            (
                self.shard_key(&current.placement.logical_shard_id, "root"),
                None,
            ),
        ];
        if self.cas_root(&current, &next, extra)? {
            return Ok(next);
        }
        Err(refused(
            PlacementErrorKind::ShardHasRoot,
            format!("logical shard {shard} already serves a root, or root {name} changed"),
        ))
    }
}

/// The listing that joins every record kind.
impl ControlPlane {
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
                .map(|(_, v)| decode_epoch(v))
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
}
