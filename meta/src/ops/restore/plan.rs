//! Resolving a request to its deterministic identity (read-only).

use super::identity::{destination_incarnation_for, operation_id_of};
use super::row::{read_op, same_request};
use super::state::{RestoreError, RestorePlan, RestoreTarget, Result};
use crate::codec::operation::restore_identity_digest;
use crate::codec::{
    workspace_current, workspace_incarnation_claim, Commit, CommitKey, CommitState, RestorePhase,
    RestoreSource, WorkspaceCurrent, WorkspaceState,
};
use crate::error::Error;
use crate::family::Family;
use crate::ids::{validate_workbench_id, RootId};
use crate::ops::snapshot::{SnapshotSelector, SnapshotStatus};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// Resolves a request to its deterministic identity (read-only).
///
/// Operation lookup precedes all live source reads: when the destination marker is owned by a
/// restore operation of this exact request (staging, visible or — for a cleaned one — retired),
/// its identity is reused and the live source is not consulted.
///
/// Errors: [`RestoreError::Meta`] with `InvalidArgument` for invalid ids or `destination == source`;
/// [`RestoreError::DestinationExists`]; [`RestoreError::SourceWorkbenchNotFound`];
/// [`RestoreError::SnapshotNotFound`] / [`RestoreError::SnapshotExpired`];
/// [`RestoreError::CommitNotFound`] / [`RestoreError::CommitUnavailable`]; codec and storage
/// errors.
pub fn plan(shard: &MetaShard, target: &RestoreTarget) -> Result<RestorePlan> {
    validate_workbench_id(&target.source_workbench_id)?;
    validate_workbench_id(&target.destination_workbench_id)?;
    if target.source_workbench_id == target.destination_workbench_id {
        return Err(Error::invalid("the destination workbench must differ from the source").into());
    }
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let dest_key = workspace_current::key(&root, &target.destination_workbench_id);
    let mut reclaim_marker = None;
    if let Some(bytes) = snap.get(Family::WorkspaceCurrent, &dest_key)? {
        let marker = WorkspaceCurrent::decode(&bytes)?;
        let owned = match marker.owning_operation {
            Some(id) => read_op(&snap, &root, &id)?,
            None => None,
        };
        let exists = || RestoreError::DestinationExists {
            workbench_id: target.destination_workbench_id.clone(),
        };
        match (marker.state, owned) {
            (WorkspaceState::Staging | WorkspaceState::Visible, Some((_, op)))
                if same_request(&op, target)
                    && op.destination_incarnation == marker.incarnation =>
            {
                return Ok(RestorePlan {
                    target: target.clone(),
                    source_incarnation: op.source_incarnation,
                    source_read_version: op.source_read_version,
                    destination_incarnation: op.destination_incarnation,
                    identity_digest: op.identity_digest,
                    operation_id: op.operation_id(),
                    existing: Some(Box::new(op)),
                    reclaim_marker: None,
                });
            }
            (WorkspaceState::Retired, Some((_, op))) if op.phase == RestorePhase::Cleaned => {
                reclaim_marker = Some(bytes);
            }
            _ => return Err(exists()),
        }
    }
    let src = snap
        .get(
            Family::WorkspaceCurrent,
            &workspace_current::key(&root, &target.source_workbench_id),
        )?
        .map(|b| WorkspaceCurrent::decode(&b))
        .transpose()?
        // A commit stays restorable after its workbench expired (docs/metadata-format.md,
        // "Workbench Expiry"); a snapshot needs a live source.
        .filter(|w| match target.source {
            RestoreSource::Commit(_) => {
                matches!(w.state, WorkspaceState::Visible | WorkspaceState::Expired)
            }
            RestoreSource::Snapshot(_) => {
                w.state == WorkspaceState::Visible && w.expired_at(target.now_unix_ms).is_none()
            }
        })
        .ok_or_else(|| RestoreError::SourceWorkbenchNotFound {
            workbench_id: target.source_workbench_id.clone(),
        })?;
    let source_read_version = match target.source {
        RestoreSource::Snapshot(id) => {
            let info = crate::ops::snapshot::get(
                shard,
                &target.source_workbench_id,
                &SnapshotSelector::Id(id),
                target.now_unix_ms,
                &target.policy,
            )
            .map_err(|e| snapshot_error(e, id.get()))?;
            match info.status {
                SnapshotStatus::Alive => {}
                // Retired answers like a read at the snapshot does (SnapshotExpired, "retired").
                status @ (SnapshotStatus::Expired
                | SnapshotStatus::Reaped
                | SnapshotStatus::Retired) => {
                    return Err(RestoreError::SnapshotExpired {
                        snapshot_id: id.get(),
                        status: status.as_str(),
                    })
                }
            }
            if info.incarnation != src.incarnation {
                return Err(RestoreError::SnapshotNotFound {
                    snapshot_id: id.get(),
                });
            }
            info.record.read_version
        }
        RestoreSource::Commit(id) => {
            let commit = read_commit(&snap, &root, &id)?
                .map(|(_, c)| c)
                .filter(|c| {
                    c.source_workbench_id == target.source_workbench_id
                        && c.source_incarnation == src.incarnation
                })
                .ok_or_else(|| RestoreError::CommitNotFound {
                    commit_id: id.to_hex(),
                })?;
            if commit.state != CommitState::Sealed {
                return Err(RestoreError::CommitUnavailable {
                    commit_id: id.to_hex(),
                    state: commit.state,
                });
            }
            commit.created_version
        }
    };
    let previous = match &reclaim_marker {
        Some(b) => Some(WorkspaceCurrent::decode(b)?.incarnation),
        None => None,
    };
    let destination_incarnation = destination_incarnation_for(
        &root,
        &target.source_workbench_id,
        &src.incarnation,
        &target.source,
        &target.destination_workbench_id,
        previous.as_ref(),
    );
    if snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &workspace_incarnation_claim::key(&root, &destination_incarnation),
        )?
        .is_some()
    {
        return Err(RestoreError::IdentityCollision);
    }
    let identity_digest = restore_identity_digest(
        &root,
        &target.source_workbench_id,
        &src.incarnation,
        &target.source,
        &target.destination_workbench_id,
        &destination_incarnation,
    );
    Ok(RestorePlan {
        target: target.clone(),
        source_incarnation: src.incarnation,
        source_read_version,
        destination_incarnation,
        identity_digest,
        operation_id: operation_id_of(&identity_digest),
        existing: None,
        reclaim_marker,
    })
}

/// Maps the snapshot module's typed errors onto restore's.
pub(super) fn snapshot_error(e: Error, snapshot_id: u64) -> RestoreError {
    match e {
        Error::SnapshotNotFound => RestoreError::SnapshotNotFound { snapshot_id },
        Error::SnapshotExpired { status, .. } => RestoreError::SnapshotExpired {
            snapshot_id,
            status,
        },
        other => RestoreError::Meta(other),
    }
}

pub(super) fn read_commit<S: Snapshot>(
    snap: &S,
    root: &RootId,
    id: &crate::ids::CommitId,
) -> Result<Option<(Vec<u8>, Commit)>> {
    let key = CommitKey {
        root: *root,
        commit_id: *id,
    }
    .encode();
    match snap.get(Family::Commit, &key)? {
        None => Ok(None),
        Some(b) => {
            let c = Commit::decode(&b)?;
            Ok(Some((b, c)))
        }
    }
}
