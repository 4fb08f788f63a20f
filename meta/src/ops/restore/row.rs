//! Reading and writing the Restore Operation row: its key, the command header of one step,
//! running one command, the bounded re-plan loop and the CAS rewrite of the row alone.

use super::state::{RestoreError, RestoreTarget, Result};
use crate::codec::{
    workspace_current, ChangeEvent, CommandResult, Operation, OperationKey, OperationKind,
    RestoreOperation, RestorePhase, WorkspaceCurrent,
};
use crate::command::{MetadataCommand, Mutation, Predicate};
use crate::error::Error;
use crate::family::Family;
use crate::ids::{validate_workbench_id, OperationId, RequestId, RootId};
use crate::ops::MAX_ATTEMPTS;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};
use sha2::{Digest, Sha256};

pub(super) fn present(family: Family, key: Vec<u8>) -> Predicate {
    Predicate {
        family,
        key,
        expect: crate::command::Expectation::Present,
    }
}

pub(super) fn op_key(root: &RootId, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: *root,
        kind: OperationKind::Restore,
        operation_id: *id,
    }
    .encode()
}

/// Reads the restore operation `id` at `snap`: `(bytes, decoded)`.
pub(crate) fn read_op<S: Snapshot>(
    snap: &S,
    root: &RootId,
    id: &OperationId,
) -> Result<Option<(Vec<u8>, RestoreOperation)>> {
    let Some(bytes) = snap.get(Family::Operation, &op_key(root, id))? else {
        return Ok(None);
    };
    match Operation::decode_for_kind(OperationKind::Restore, &bytes)? {
        Operation::Restore(op) => Ok(Some((bytes, *op))),
        _ => Err(RestoreError::Meta(Error::codec(
            "operation",
            "restore key holds another kind",
        ))),
    }
}

/// Reads the restore operation `id` at the current version.
///
/// Errors: codec and storage errors.
pub fn load(shard: &MetaShard, id: &OperationId) -> Result<Option<RestoreOperation>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_op(&snap, &shard.root_id(), id)?.map(|(_, op)| op))
}

pub(super) fn same_request(op: &RestoreOperation, t: &RestoreTarget) -> bool {
    op.source_workbench_id == t.source_workbench_id
        && op.source == t.source
        && op.destination_workbench_id == t.destination_workbench_id
}

/// The restore operation that owns `destination_workbench_id`'s marker, if any (a staging,
/// visible or retired destination created by a restore).
///
/// Errors: [`RestoreError::Meta`] with `InvalidArgument` for an invalid id; codec and storage
/// errors.
pub fn owning_operation(
    shard: &MetaShard,
    destination_workbench_id: &str,
) -> Result<Option<RestoreOperation>> {
    validate_workbench_id(destination_workbench_id)?;
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let Some(bytes) = snap.get(
        Family::WorkspaceCurrent,
        &workspace_current::key(&root, destination_workbench_id),
    )?
    else {
        return Ok(None);
    };
    let marker = WorkspaceCurrent::decode(&bytes)?;
    let Some(id) = marker.owning_operation else {
        return Ok(None);
    };
    Ok(read_op(&snap, &root, &id)?
        .map(|(_, op)| op)
        .filter(|op| op.destination_incarnation == marker.incarnation))
}

/// A command header for one restore step; the command digest binds the step name, operation id
/// and read version (request ids are fresh: every step CASes the Operation row instead).
pub(super) fn command(
    shard: &MetaShard,
    read_version: u64,
    step: &[u8],
    op_id: &OperationId,
    marker: &WorkspaceCurrent,
) -> Result<MetadataCommand> {
    let mut h = Sha256::new();
    h.update(b"nokv.restore.step.v1\0");
    h.update((step.len() as u32).to_be_bytes());
    h.update(step);
    h.update(op_id.as_bytes());
    h.update(read_version.to_be_bytes());
    Ok(shard.command_header(
        RequestId::random()?,
        h.finalize().into(),
        read_version,
        CommandResult::WorkspaceCreated {
            workspace: marker.clone(),
        },
    ))
}

pub(super) fn run(
    seq: &mut Sequenced<'_>,
    mut cmd: MetadataCommand,
    predicates: Vec<Predicate>,
    mutations: Vec<Mutation>,
    events: Vec<ChangeEvent>,
) -> Result<()> {
    // A writer's first write advances its owner epoch (a commit) first; the command then meets a
    // stale read version and every caller's retry loop re-plans it.
    seq.prepare_write()?;
    cmd.predicates = predicates;
    cmd.mutations = mutations;
    cmd.event_projection = events;
    seq.execute(cmd)?;
    Ok(())
}

/// Runs `attempt` (one re-read and one command) up to [`MAX_ATTEMPTS`] times, again on a stale
/// read version or a failed predicate.
pub(super) fn retrying<T>(mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    for _ in 0..MAX_ATTEMPTS {
        match attempt() {
            Err(RestoreError::Meta(Error::ReadVersionConflict { .. }))
            | Err(RestoreError::Meta(Error::CommandPredicateFailed)) => continue,
            other => return other,
        }
    }
    Err(Error::ReadVersionConflict {
        attempts: MAX_ATTEMPTS,
    }
    .into())
}

/// A command that only rewrites the Operation row (CAS on its exact bytes).
pub(super) fn commit_op<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    next: RestoreOperation,
    marker: &WorkspaceCurrent,
    step: &[u8],
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let id = next.operation_id();
    let key = op_key(&root, &id);
    let phase = next.phase;
    let cmd = command(shard, snap.version(), step, &id, marker)?;
    run(
        seq,
        cmd,
        vec![Predicate::equals(Family::Operation, key.clone(), old)],
        vec![Mutation::put(
            Family::Operation,
            key,
            Operation::Restore(Box::new(next)).encode(),
        )],
        Vec::new(),
    )?;
    Ok(phase)
}
