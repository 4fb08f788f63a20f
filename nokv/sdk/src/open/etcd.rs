//! Opening a store whose metadata lives on etcd — the embedded client's side of the control
//! plane: a [`crate::client::Client`] whose store keeps its metadata in etcd owns the root's logical
//! shard for as long as it is open, exactly as an embedded holt store is locked by one process
//! at a time.

use std::time::Duration;

use meta::codec::RootPlacementLifecycle;
use meta::{MetaShard, RootId};

use crate::control::{
    refused, ControlPlane, PlacementErrorKind, RootRecord, ShardEngine, ShardOwnership,
};
use crate::error::{Error, Result};
use crate::store_config::config::MetadataConfig;

/// Opens the etcd-backed shard of the root named by `metadata`: resolves root → logical shard in
/// the control plane, acquires the shard-owner lease (recording `address`, where this process
/// serves the shard; empty for an embedded owner) (waiting up to `lock_wait` for another
/// owner to release it or for its lease to lapse), opens the shard with that ownership as the
/// fence of every transaction, and moves a `Provisioning` root to `Active` once its RootFence is
/// installed.
///
/// Errors: [`Error::StoreBusy`] when another owner kept the shard for the whole wait;
/// [`Error::StoreConfig`] when the root or shard is missing or not etcd-backed; the errors of
/// [`MetaShard::open_etcd`].
pub(crate) fn open_shard(
    metadata: &MetadataConfig,
    open: meta::OpenOptions,
    lock_wait: Duration,
    lease_ttl: Duration,
    address: &str,
) -> Result<(MetaShard, ShardOwnership)> {
    let (control, record, endpoints, namespace, root) = resolve(metadata)?;
    let shard = record.placement.logical_shard_id;
    let kind = if address.is_empty() {
        "embedded"
    } else {
        "server"
    };
    let owner_id = format!("{kind}-{}-{}", std::process::id(), random_tag()?);
    let ownership = control
        .acquire_shard_waiting(&shard, &owner_id, address, lease_ttl, lock_wait)
        .map_err(|e| match e {
            Error::Placement {
                kind: PlacementErrorKind::OwnerHeld,
                ..
            } => Error::StoreBusy,
            other => other,
        })?;
    let mut options = meta::store::etcd::EtcdOptions::new(endpoints.clone(), shard);
    options.namespace = namespace.clone();
    options.owner_fence = Some(ownership.fence());
    let meta = MetaShard::open_etcd(
        options,
        meta::OpenOptions {
            placement: Some(record.placement),
            ..open
        },
    )?;
    if record.placement.lifecycle == RootPlacementLifecycle::Provisioning {
        control.activate_root(&record.placement)?;
    } else if record.placement.lifecycle != RootPlacementLifecycle::Active {
        return Err(refused(
            PlacementErrorKind::PopulatedRoot,
            format!("root {root} is {:?}", record.placement.lifecycle),
        ));
    }
    Ok((meta, ownership))
}

/// Opens the etcd-backed shard of the root named by `metadata` **read-only**
/// ([`MetaShard::open_etcd_read_only`]): no shard-owner lease, nothing written, the state as of
/// the open.
///
/// Errors: [`Error::StoreConfig`] when the root or shard is missing or not etcd-backed; the
/// errors of [`MetaShard::open_etcd_read_only`].
pub(crate) fn open_shard_read_only(
    metadata: &MetadataConfig,
    open: meta::OpenOptions,
) -> Result<MetaShard> {
    let (_, record, endpoints, namespace, _) = resolve(metadata)?;
    let mut options =
        meta::store::etcd::EtcdOptions::new(endpoints, record.placement.logical_shard_id);
    options.namespace = namespace;
    Ok(MetaShard::open_etcd_read_only(
        options,
        meta::OpenOptions {
            placement: Some(record.placement),
            ..open
        },
    )?)
}

/// The control plane, root record, endpoints, namespace and root name of an etcd-backed store
/// whose shard record names the etcd engine.
fn resolve(
    metadata: &MetadataConfig,
) -> Result<(ControlPlane, RootRecord, Vec<String>, String, String)> {
    let MetadataConfig::Etcd {
        endpoints,
        namespace,
        root,
        root_id,
    } = metadata
    else {
        return Err(config("the store keeps its metadata in holt, not etcd"));
    };
    let control = ControlPlane::connect(endpoints.clone(), namespace)?;
    let id = RootId::from_hex(root_id).map_err(|_| config("malformed root_id"))?;
    let record = control.root_by_id(&id)?.ok_or_else(|| {
        config(&format!(
            "root {root} ({root_id}) is not in the control plane"
        ))
    })?;
    let shard = record.placement.logical_shard_id;
    match control.get_shard(&shard)? {
        Some(s) if s.engine == ShardEngine::Etcd => {}
        Some(_) => return Err(config(&format!("logical shard {shard} is not etcd-backed"))),
        None => return Err(config(&format!("logical shard {shard} has no record"))),
    }
    Ok((
        control,
        record,
        endpoints.clone(),
        namespace.clone(),
        root.clone(),
    ))
}

fn config(reason: &str) -> Error {
    Error::StoreConfig {
        reason: reason.to_owned(),
    }
}

fn random_tag() -> Result<String> {
    let mut b = [0u8; 4];
    getrandom::fill(&mut b).map_err(|e| config(&format!("no randomness: {e}")))?;
    Ok(objstore::hex_lower(&b))
}
