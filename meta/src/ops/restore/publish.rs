//! `Ready -> Complete`: the final marker command and the source release.

use super::copy::staging_marker;
use super::plan::read_commit;
use super::row::{command, run};
use super::row::{op_key, present};
use super::state::{checked_restore, RestoreMark, Result};
use crate::codec::{
    workspace_current, ChangeEvent, ChangeKind, CommitConsumerKey, CommitKey, ConsumerOwner,
    HistoryHoldKey, HoldId, Operation, OperationResult, PathEntry, RestoreOperation, RestorePhase,
    RestoreResult, RestoreSource, WorkspaceCurrent, WorkspaceState,
};
use crate::command::{Mutation, Predicate};
use crate::error::Error;
use crate::family::Family;
use crate::ids::RootId;
use crate::ops::snapshot::release_consumer_parts;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Mutations and predicates that release the source attachment (hold + snapshot consumer, or
/// commit lease consumer) exactly once.
pub(super) fn release_source<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
    cv: u64,
    predicates: &mut Vec<Predicate>,
    mutations: &mut Vec<Mutation>,
) -> Result<()> {
    let op_id = op.operation_id();
    match op.source {
        RestoreSource::Snapshot(id) => {
            let hold_key = HistoryHoldKey {
                root: *root,
                hold: HoldId::Restore(op_id),
            }
            .encode();
            if snap.get(Family::HistoryHold, &hold_key)?.is_some() {
                let parts = release_consumer_parts(shard, snap, &op.source_incarnation, id, op_id)?;
                predicates.extend(parts.predicates);
                mutations.extend(parts.mutations);
            }
        }
        RestoreSource::Commit(id) => {
            let consumer_key = CommitConsumerKey {
                root: *root,
                commit_id: id,
                owner: ConsumerOwner::Lease {
                    operation_id: op_id,
                },
            }
            .encode();
            if snap.get(Family::CommitConsumer, &consumer_key)?.is_some() {
                predicates.push(present(Family::CommitConsumer, consumer_key.clone()));
                mutations.push(Mutation::Delete {
                    family: Family::CommitConsumer,
                    key: consumer_key,
                });
                if let Some((bytes, mut c)) = read_commit(snap, root, &id)? {
                    c.consumer_count = c.consumer_count.checked_sub(1).ok_or_else(|| {
                        Error::codec("commit", "consumer count underflow on release")
                    })?;
                    c.consumer_epoch = c.consumer_epoch.saturating_add(1);
                    if c.consumer_count == 0 {
                        c.last_zero_consumer_version = Some(cv);
                    }
                    let key = CommitKey {
                        root: *root,
                        commit_id: id,
                    }
                    .encode();
                    predicates.push(Predicate::equals(Family::Commit, key.clone(), bytes));
                    mutations.push(Mutation::put(Family::Commit, key, c.encode()));
                }
            }
        }
    }
    Ok(())
}

/// Step 5: the one final command (Ready -> Complete, Staging -> Visible, one event, source
/// released).
pub(super) fn publish<S: Snapshot>(
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
    let manifest_entry = PathEntry::decode(&op.restore_manifest_entry)?;
    let visible = WorkspaceCurrent {
        state: WorkspaceState::Visible,
        ..marker.advanced(cv)
    };
    let key = op_key(&root, &op.operation_id());
    let dest_key = workspace_current::key(&root, &op.destination_workbench_id);
    let mut predicates = vec![
        Predicate::equals(Family::Operation, key.clone(), old),
        Predicate::equals(Family::WorkspaceCurrent, dest_key.clone(), marker_bytes),
    ];
    let mut mutations = vec![Mutation::put(
        Family::WorkspaceCurrent,
        dest_key,
        visible.encode(),
    )];
    release_source(shard, snap, &root, &op, cv, &mut predicates, &mut mutations)?;
    op.phase = RestorePhase::Complete;
    op.result = OperationResult::Succeeded(RestoreResult {
        commit_version: cv,
        destination_generation: manifest_entry.generation,
    });
    let event = ChangeEvent {
        workbench_id: op.destination_workbench_id.clone(),
        incarnation: op.destination_incarnation,
        kind: ChangeKind::WorkspaceCreated,
        path: None,
        before_generation: None,
        after_generation: None,
        moved_from: None,
    };
    let cmd = command(
        shard,
        read_version,
        b"publish",
        &op.operation_id(),
        &visible,
    )?;
    mutations.push(Mutation::put(
        Family::Operation,
        key,
        Operation::Restore(Box::new(checked_restore(from, op))).encode(),
    ));
    run(seq, cmd, predicates, mutations, vec![event])?;
    Ok(RestorePhase::Complete)
}
