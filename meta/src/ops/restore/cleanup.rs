//! `Aborting|Cleaning -> Cleaning -> Cleaned`: cleanup driven by the RestoreMember rows.

use super::copy::{flush_touched, staging_marker, touch, Touched};
use super::identity::manifest_path;
use super::publish::release_source;
use super::row::op_key;
use super::row::{command, run};
use super::state::{checked_restore, RestoreMark, Result, MAX_BATCH_MEMBERS};
use crate::codec::{
    path_current, revision_ref, workspace_current, Operation, OperationResult, PathEntry, RefOwner,
    RestoreMember, RestoreMemberKey, RestoreOperation, RestorePhase, TerminalError,
    WorkspaceCurrent, WorkspaceState,
};
use crate::command::projection as index_projection;
use crate::command::{
    Mutation, Predicate, MAX_COMMAND_MUTATIONS, MAX_COMMAND_PREDICATES, MAX_INDEX_MUTATIONS,
};
use crate::error::Error;
use crate::family::Family;
use crate::ids::RootId;
use crate::path::NormPath;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Number of SecondaryIndex rows the staged entry at `path` owns (0 when absent).
pub(super) fn staged_index_rows<S: Snapshot>(
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
    path: &NormPath,
) -> Result<usize> {
    let dest = op.destination_incarnation;
    match snap.get(Family::PathCurrent, &path_current::key(root, &dest, path))? {
        None => Ok(0),
        Some(bytes) => {
            let entry = PathEntry::decode(&bytes)?;
            Ok(index_projection::index_rows(
                root,
                &dest,
                &op.destination_workbench_id,
                path,
                &entry,
            )?
            .len())
        }
    }
}

/// Removes one staged path (PathCurrent, index rows, Path RevisionRef, revision count) if present.
#[allow(clippy::too_many_arguments)]
pub(super) fn unstage_path<S: Snapshot>(
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
    path: &NormPath,
    touched: &mut Touched,
    predicates: &mut Vec<Predicate>,
    mutations: &mut Vec<Mutation>,
) -> Result<usize> {
    let dest = op.destination_incarnation;
    let pkey = path_current::key(root, &dest, path);
    let mut index_rows = 0;
    if let Some(bytes) = snap.get(Family::PathCurrent, &pkey)? {
        let entry = PathEntry::decode(&bytes)?;
        let index = index_projection::index_mutations(
            root,
            &dest,
            &op.destination_workbench_id,
            path,
            Some(&entry),
            None,
        )?;
        index_rows = index.len();
        mutations.extend(index);
        predicates.push(Predicate::equals(Family::PathCurrent, pkey.clone(), bytes));
        mutations.push(Mutation::Delete {
            family: Family::PathCurrent,
            key: pkey,
        });
        let rkey = revision_ref::key(
            root,
            &RefOwner::Path {
                incarnation: dest,
                path: path.clone(),
            },
            &entry.artifact_revision_id,
        );
        if snap.get(Family::RevisionRef, &rkey)?.is_some() {
            mutations.push(Mutation::Delete {
                family: Family::RevisionRef,
                key: rkey,
            });
            let row = touch(snap, root, touched, entry.artifact_revision_id)?;
            row.strong_reference_count =
                row.strong_reference_count.checked_sub(1).ok_or_else(|| {
                    Error::codec("artifact_revision", "strong reference count underflow")
                })?;
            row.reference_epoch = row.reference_epoch.saturating_add(1);
        }
    }
    Ok(index_rows)
}

pub(super) fn cleanup_batch<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    mut op: RestoreOperation,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let from = RestoreMark::of(&op);
    let (marker_bytes, marker) = staging_marker(snap, &root, &op)?;
    let read_version = snap.version();
    let cv = read_version + 1;
    let key = op_key(&root, &op.operation_id());
    let mut predicates = vec![Predicate::equals(Family::Operation, key.clone(), old)];
    let mut mutations = Vec::new();
    let mut touched = Touched::new();
    let end = op.cursor.next_member_sequence;
    let step: &[u8];
    let result_marker;
    if op.cleanup_next_sequence < end {
        // One bounded batch of members, in sequence order.
        let mut index_rows = 0usize;
        let mut handled = 0usize;
        while op.cleanup_next_sequence < end && handled < MAX_BATCH_MEMBERS {
            let mkey = RestoreMemberKey {
                root,
                operation_id: op.operation_id(),
                member_sequence: op.cleanup_next_sequence,
            }
            .encode();
            if let Some(bytes) = snap.get(Family::RestoreMember, &mkey)? {
                let m = RestoreMember::decode(&bytes)?;
                let need = staged_index_rows(snap, &root, &op, &m.destination_path)?;
                let bounded = mutations.len() - index_rows;
                if handled > 0
                    && (index_rows + need > MAX_INDEX_MUTATIONS
                        || bounded + 3 + 2 * (touched.len() + 1) + 2 > MAX_COMMAND_MUTATIONS
                        || predicates.len() + 1 + touched.len() + 1 + 1 > MAX_COMMAND_PREDICATES)
                {
                    break;
                }
                index_rows += unstage_path(
                    snap,
                    &root,
                    &op,
                    &m.destination_path,
                    &mut touched,
                    &mut predicates,
                    &mut mutations,
                )?;
                mutations.push(Mutation::Delete {
                    family: Family::RestoreMember,
                    key: mkey,
                });
            }
            op.cleanup_next_sequence += 1;
            handled += 1;
        }
        op.phase = RestorePhase::Cleaning;
        step = b"clean";
        result_marker = marker;
    } else {
        // Terminal: the manifest path, the marker, the source attachment.
        let mpath = manifest_path()?;
        unstage_path(
            snap,
            &root,
            &op,
            &mpath,
            &mut touched,
            &mut predicates,
            &mut mutations,
        )?;
        let dest_key = workspace_current::key(&root, &op.destination_workbench_id);
        let retired = WorkspaceCurrent {
            state: WorkspaceState::Retired,
            modified_version: cv,
            ..marker
        };
        predicates.push(Predicate::equals(
            Family::WorkspaceCurrent,
            dest_key.clone(),
            marker_bytes,
        ));
        mutations.push(Mutation::put(
            Family::WorkspaceCurrent,
            dest_key,
            retired.encode(),
        ));
        release_source(shard, snap, &root, &op, cv, &mut predicates, &mut mutations)?;
        op.phase = RestorePhase::Cleaned;
        if matches!(op.result, OperationResult::Pending) {
            op.result = OperationResult::Failed(TerminalError {
                code: "InvalidState".into(),
                message: "the restore was aborted".into(),
            });
        }
        step = b"cleaned";
        result_marker = retired;
    }
    flush_touched(&root, cv, touched, &mut predicates, &mut mutations);
    let phase = op.phase;
    let cmd = command(
        shard,
        read_version,
        step,
        &op.operation_id(),
        &result_marker,
    )?;
    mutations.push(Mutation::put(
        Family::Operation,
        key,
        Operation::Restore(Box::new(checked_restore(from, op))).encode(),
    ));
    run(seq, cmd, predicates, mutations, Vec::new())?;
    Ok(phase)
}
