//! Reading and CAS-advancing the BuildCommit Operation row; commit, head and workspace reads.

use super::keys::{commit_key, decode_build, encode_build, head_key, op_key, sha};
use super::model::STEP_DOMAIN;
use crate::codec::{
    workspace_current, BuildCommitOperation, BuildCommitPhase, CommandResult, Commit,
    CommitRetireOperation, CommitRetirePhase, OperationKind, OperationResult, WorkbenchCommitHead,
    WorkspaceCurrent, WorkspaceState,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{CommitId, OperationId, RequestId, RootId};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

pub(super) fn step_digest(op_id: &OperationId, step: &[u8], before: &[u8]) -> [u8; 32] {
    let before_digest = sha(&[before]);
    sha(&[STEP_DOMAIN, op_id.as_bytes(), step, &before_digest])
}

pub(super) fn advanced(kind: OperationKind, op: &OperationId, phase: u8) -> CommandResult {
    CommandResult::OperationRecorded {
        kind,
        operation_id: *op,
        phase,
    }
}

/// The command of a plain phase step: CAS the BuildCommit row from exactly `bytes` to `next`
/// (callers add further predicates and mutations of the same step).
pub(super) fn advance_build(
    shard: &MetaShard,
    snap: &impl Snapshot,
    key: &[u8],
    bytes: Vec<u8>,
    op_id: &OperationId,
    step: &[u8],
    next: &BuildCommitOperation,
) -> Result<crate::command::MetadataCommand> {
    let mut cmd = header(
        shard,
        snap,
        step_digest(op_id, step, &bytes),
        advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
    )?;
    cmd.predicates = vec![Predicate::equals(Family::Operation, key.to_vec(), bytes)];
    cmd.mutations = vec![Mutation::put(
        Family::Operation,
        key.to_vec(),
        encode_build(next),
    )];
    Ok(cmd)
}

pub(super) fn header(
    shard: &MetaShard,
    snap: &impl Snapshot,
    digest: [u8; 32],
    result: CommandResult,
) -> Result<crate::command::MetadataCommand> {
    Ok(shard.command_header(RequestId::random()?, digest, snap.version(), result))
}

pub(super) fn commit_version(snap: &impl Snapshot) -> Result<u64> {
    snap.version()
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))
}

/// `(key, value bytes, decoded)` of one WorkspaceCurrent row.
pub(super) type WsRow = (Vec<u8>, Vec<u8>, WorkspaceCurrent);

pub(super) fn read_ws(
    snap: &impl Snapshot,
    root: &RootId,
    workbench_id: &str,
) -> Result<Option<WsRow>> {
    let key = workspace_current::key(root, workbench_id);
    match snap.get(Family::WorkspaceCurrent, &key)? {
        None => Ok(None),
        Some(b) => {
            let ws = WorkspaceCurrent::decode(&b)?;
            Ok(Some((key, b, ws)))
        }
    }
}

pub(super) fn read_commit(
    snap: &impl Snapshot,
    root: &RootId,
    id: &CommitId,
) -> Result<Option<(Vec<u8>, Commit)>> {
    match snap.get(Family::Commit, &commit_key(root, id))? {
        None => Ok(None),
        Some(b) => {
            let c = Commit::decode(&b)?;
            Ok(Some((b, c)))
        }
    }
}

/// Reads the BuildCommit operation `op_id` at `snap`: `(bytes, decoded)`.
pub(crate) fn read_build(
    snap: &impl Snapshot,
    root: &RootId,
    op_id: &OperationId,
) -> Result<Option<(Vec<u8>, BuildCommitOperation)>> {
    match snap.get(
        Family::Operation,
        &op_key(root, OperationKind::BuildCommit, op_id),
    )? {
        None => Ok(None),
        Some(b) => {
            let op = decode_build(&b)?;
            Ok(Some((b, op)))
        }
    }
}

/// Reads the BuildCommit operation `op_id` at the current version.
///
/// Errors: codec and storage errors.
pub fn read_operation(
    shard: &MetaShard,
    op_id: &OperationId,
) -> Result<Option<BuildCommitOperation>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_build(&snap, &shard.root_id(), op_id)?.map(|(_, op)| op))
}

/// Reads a Commit record at the current version.
///
/// Errors: codec and storage errors.
pub fn read_commit_record(shard: &MetaShard, id: &CommitId) -> Result<Option<Commit>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_commit(&snap, &shard.root_id(), id)?.map(|(_, c)| c))
}

/// The current WorkbenchCommitHead of a `Visible` workbench (`None`: never committed).
///
/// Errors: [`Error::WorkspaceNotFound`]; codec and storage errors.
pub fn read_head(shard: &MetaShard, workbench_id: &str) -> Result<Option<WorkbenchCommitHead>> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let ws = match read_ws(&snap, &root, workbench_id)? {
        Some((_, _, ws)) if ws.state == WorkspaceState::Visible => ws,
        _ => {
            return Err(Error::WorkspaceNotFound {
                workbench_id: workbench_id.to_owned(),
            })
        }
    };
    snap.get(
        Family::WorkbenchCommitHead,
        &head_key(&root, &ws.incarnation),
    )?
    .map(|b| WorkbenchCommitHead::decode(&b))
    .transpose()
}

/// Debug-checks one BuildCommit step and returns `to` (docs/metadata-format.md, "Commit Closure"):
/// the phase moves only along Building -> Sealing -> Complete or Building|Sealing -> Aborting ->
/// Cleaning -> Cleaned, a terminal operation is never rewritten, the frozen request never changes,
/// the member and parent counts never decrease while building, and Complete carries its result.
pub(super) fn checked_build<'a>(
    from: &BuildCommitOperation,
    to: &'a BuildCommitOperation,
) -> &'a BuildCommitOperation {
    use BuildCommitPhase::{Aborting, Building, Cleaned, Cleaning, Complete, Sealing};
    debug_assert!(
        matches!(
            (from.phase, to.phase),
            (Building, Building | Sealing | Aborting)
                | (Sealing, Complete | Aborting)
                | (Aborting, Cleaning)
                | (Cleaning, Cleaning | Cleaned)
        ),
        "BuildCommit {:?} -> {:?} is not a documented transition",
        from.phase,
        to.phase
    );
    debug_assert!(
        from.commit_id == to.commit_id
            && from.initialization_digest == to.initialization_digest
            && from.source_read_version == to.source_read_version
            && from.workbench_id == to.workbench_id,
        "a BuildCommit step changed its frozen request"
    );
    debug_assert!(
        to.phase != Building
            || (to.member_count >= from.member_count && to.parent_count >= from.parent_count),
        "BuildCommit member/parent counts decreased while building"
    );
    debug_assert!(
        to.phase != Complete || matches!(to.result, OperationResult::Succeeded(_)),
        "BuildCommit reached Complete without its result"
    );
    to
}

/// Debug-checks one CommitRetire step and returns `to` (docs/metadata-format.md, "Commit
/// Closure"): Releasing -> Releasing | Complete only, for the same commit and consumer epoch.
pub(super) fn checked_retire(
    from: &CommitRetireOperation,
    to: CommitRetireOperation,
) -> CommitRetireOperation {
    debug_assert!(
        from.phase == CommitRetirePhase::Releasing
            && matches!(
                to.phase,
                CommitRetirePhase::Releasing | CommitRetirePhase::Complete
            ),
        "CommitRetire {:?} -> {:?} is not a documented transition",
        from.phase,
        to.phase
    );
    debug_assert!(
        from.commit_id == to.commit_id
            && from.expected_consumer_epoch == to.expected_consumer_epoch,
        "a CommitRetire step changed its commit"
    );
    to
}
