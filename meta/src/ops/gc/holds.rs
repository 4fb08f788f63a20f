//! What holds the history floor back and why a candidate waits: HistoryHolds, in-flight publications, wait reasons.

use super::state::{HoldHolder, HoldInfo, WaitReason};
use crate::codec::{HistoryHold, HistoryHoldKey, HoldId, SnapshotRef, SnapshotRefKey};
use crate::error::Result;
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId, RootId};
use crate::shard::MetaShard;
use crate::store::{ShardSnapshot, Snapshot, TxnStore};
use std::collections::BTreeMap;

/// Every HistoryHold of the root with its holder named (snapshot workbench and alias, restore
/// destination, build workbench). Cost: the HistoryHold rows, the SnapshotRef rows when a
/// snapshot hold exists, and one Operation point read per restore/build hold.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn holds(shard: &MetaShard) -> Result<Vec<HoldInfo>> {
    let snap = shard.inner.store.snapshot();
    holds_at(&snap, &shard.root_id())
}

pub(crate) fn holds_at(snap: &ShardSnapshot, root: &RootId) -> Result<Vec<HoldInfo>> {
    let mut raw = Vec::new();
    snap.for_each_row(
        Family::HistoryHold,
        root.as_bytes(),
        "history_hold",
        |k, v| {
            raw.push((HistoryHoldKey::decode(k)?.hold, HistoryHold::decode(v)?));
            Ok(())
        },
    )?;
    let mut snapshots: BTreeMap<u64, (Option<String>, Option<String>)> = BTreeMap::new();
    if raw.iter().any(|(h, _)| matches!(h, HoldId::Snapshot(_))) {
        snap.for_each_row(
            Family::SnapshotRef,
            root.as_bytes(),
            "snapshot_ref",
            |k, v| {
                let key = SnapshotRefKey::decode(k)?;
                let r = SnapshotRef::decode(v)?;
                let wb = workbench_of(snap, root, &key.incarnation)?;
                snapshots.insert(
                    key.snapshot_id.get(),
                    (wb, r.alias.map(|a| a.as_str().to_owned())),
                );
                Ok(())
            },
        )?;
    }
    let mut out = Vec::with_capacity(raw.len());
    for (hold, h) in raw {
        let holder = match hold {
            HoldId::Snapshot(id) => {
                let (workbench_id, alias) = snapshots.get(&id.get()).cloned().unwrap_or_default();
                HoldHolder::Snapshot {
                    workbench_id,
                    snapshot_id: id,
                    alias,
                }
            }
            HoldId::Restore(op) => {
                // Diagnostic naming only: an undecodable row names no workbench.
                let destination_workbench_id = crate::ops::restore::read_op(snap, root, &op)
                    .ok()
                    .flatten()
                    .map(|(_, r)| r.destination_workbench_id);
                HoldHolder::Restore {
                    operation_id: op,
                    destination_workbench_id,
                }
            }
            HoldId::BuildCommit(op) => {
                let workbench_id = crate::ops::commit::read_build(snap, root, &op)
                    .ok()
                    .flatten()
                    .map(|(_, o)| o.workbench_id);
                HoldHolder::BuildCommit {
                    operation_id: op,
                    workbench_id,
                }
            }
        };
        out.push(HoldInfo {
            hold,
            read_version: h.read_version,
            holder,
        });
    }
    Ok(out)
}

/// The stable workbench id of an incarnation (its WorkspaceIncarnationClaim), if claimed.
pub(crate) fn workbench_of<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &crate::ids::WorkspaceIncarnationId,
) -> Result<Option<String>> {
    Ok(snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &crate::codec::workspace_incarnation_claim::key(root, inc),
        )?
        .map(|b| crate::codec::WorkspaceIncarnationClaim::decode(&b))
        .transpose()?
        .map(|c| c.workbench_id))
}

/// Revisions named by non-terminal Publish operations (new revision or append base) → the
/// operation, through the pending-operation registry (O(non-terminal operations)).
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn in_flight_publications(
    shard: &MetaShard,
) -> Result<BTreeMap<ArtifactRevisionId, OperationId>> {
    let mut out = BTreeMap::new();
    for listed in crate::ops::publish::operation::list_pending(shard)? {
        let op = &listed.operation;
        if crate::ops::publish::operation::is_terminal(op.phase) {
            continue;
        }
        out.insert(op.artifact_revision_id, listed.operation_id);
        if let Some(base) = &op.base {
            out.insert(base.revision, listed.operation_id);
        }
    }
    Ok(out)
}

/// The reasons a revision zeroed at `z` waits, given the floor, tip, retention and holds.
pub(crate) fn wait_reasons(
    z: u64,
    floor: u64,
    tip: u64,
    retention: u64,
    holds: &[HoldInfo],
    in_flight: Option<OperationId>,
) -> Vec<WaitReason> {
    let mut reasons = Vec::new();
    if let Some(operation_id) = in_flight {
        reasons.push(WaitReason::InFlightPublish { operation_id });
    }
    if floor <= z {
        for h in holds.iter().filter(|h| h.read_version <= z) {
            reasons.push(WaitReason::HistoryHold(h.clone()));
        }
        if tip.saturating_sub(retention) <= z {
            reasons.push(WaitReason::RetentionWindow {
                retention_versions: retention,
                tip,
            });
        }
    }
    reasons
}

// ---------------------------------------------------------------------------------------------
// The pass
