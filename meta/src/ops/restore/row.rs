//! Reading the Restore Operation row.

#[allow(unused_imports)]
use super::*;

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
