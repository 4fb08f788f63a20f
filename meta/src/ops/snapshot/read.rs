//! Reads: one snapshot, the list of a workbench's snapshots, a reader at a snapshot's read version.

use super::rows::{alias_key, info, read_alias, resolve, visible_marker};
use super::state::{Resolved, SnapshotInfo, SnapshotSelector, SnapshotStatus};
use crate::codec::{snapshot_ref::SnapshotRefKey, SnapshotRef};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ops::lease_clock;
use crate::read::Reader;
use crate::shard::history_floor::SnapshotPolicy;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// The selected snapshot of a visible workbench with its derived status (read-only; the lease
/// clock is peeked, not written).
///
/// Errors: [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`]; codec and storage errors.
pub fn get(
    shard: &MetaShard,
    workbench_id: &str,
    selector: &SnapshotSelector,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotInfo> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let lease = lease_clock::peek(&snap, wall_unix_ms, policy.skew_grace_ms)?;
    let (_, ws) = visible_marker(&snap, &root, workbench_id, shard.wall_unix_ms())?;
    let r = resolve(&snap, &root, &ws.incarnation, selector)?;
    Ok(info(workbench_id, ws.incarnation, &r, &lease))
}

/// Every snapshot of a visible workbench's current incarnation in snapshot-id order (paged scans
/// of ≤255 rows), with derived statuses.
///
/// Errors: [`Error::WorkspaceNotFound`]; codec and storage errors.
pub fn list(
    shard: &MetaShard,
    workbench_id: &str,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<Vec<SnapshotInfo>> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let lease = lease_clock::peek(&snap, wall_unix_ms, policy.skew_grace_ms)?;
    let (_, ws) = visible_marker(&snap, &root, workbench_id, shard.wall_unix_ms())?;
    let mut prefix = root.as_bytes().to_vec();
    prefix.extend_from_slice(ws.incarnation.as_bytes());
    let mut out = Vec::new();
    for (key, bytes) in scan_all(&snap, Family::SnapshotRef, prefix)? {
        let k = SnapshotRefKey::decode(&key)?;
        let record = SnapshotRef::decode(&bytes)?;
        let alias = match &record.alias {
            None => None,
            Some(a) => read_alias(&snap, alias_key(&root, &ws.incarnation, a))?,
        };
        let r = Resolved {
            id: k.snapshot_id,
            key,
            bytes,
            record,
            alias,
            by_name: false,
        };
        out.push(info(workbench_id, ws.incarnation, &r, &lease));
    }
    Ok(out)
}

/// Opens a frozen [`Reader`] at the selected snapshot's read version (holt `view_at`), after
/// checking that the snapshot is alive on the lease clock.
///
/// Errors: [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`];
/// [`Error::SnapshotExpired`] with status `expired`, `retired` or `reaped` (also when the
/// history was pruned under a concurrent reap); codec and storage errors.
pub fn open_at(
    shard: &MetaShard,
    workbench_id: &str,
    selector: &SnapshotSelector,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<(SnapshotInfo, Reader)> {
    let info = get(shard, workbench_id, selector, wall_unix_ms, policy)?;
    let expired = |status| Error::SnapshotExpired {
        snapshot_id: info.snapshot_id.get(),
        status,
    };
    match info.status {
        SnapshotStatus::Alive => {}
        SnapshotStatus::Expired => return Err(expired("expired")),
        SnapshotStatus::Retired => return Err(expired("retired")),
        SnapshotStatus::Reaped => return Err(expired("reaped")),
    }
    match shard.read_at(info.record.read_version) {
        Ok(reader) => Ok((info, reader)),
        Err(Error::Storage(holt::Error::HistoryPruned { .. })) => Err(expired("reaped")),
        Err(e) => Err(e),
    }
}

/// All rows of one scan prefix ([`Snapshot::rows`]).
pub(super) fn scan_all<S: Snapshot>(
    snap: &S,
    family: Family,
    prefix: Vec<u8>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    snap.rows(family, &prefix, "snapshot")
}

// ---------------------------------------------------------------------------------------------
// Reaper and history floor
