//! Abort and fenced takeover: `Uploading|Finalizing -> Aborting`.

use super::ledger::{command, ledger_digest, op_key, read_op, run, state_error};
use super::state::{final_request_id, ABORTED_CODE};
use crate::codec::{
    artifact_revision, command_dedupe, Operation, OperationResult, PublishOperation, PublishPhase,
    TerminalError,
};
use crate::command::{Mutation, Predicate};
use crate::error::Result;
use crate::family::Family;
use crate::ids::OperationId;
use crate::ops::publish::checked_publish;
use crate::ops::Step;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Abort claim: CAS Uploading -> Aborting (the cleanup side of the race with [`finalize`]'s
/// Uploading -> Finalizing CAS; exactly one wins). The record stores a failed result
/// (`Aborted`, `reason`). An operation already Aborting, Cleaning, Quarantined or Cleaned is
/// returned unchanged.
///
/// Errors: [`Error::OperationState`] when the operation is absent, Finalizing (use
/// [`take_over`]) or Published; codec and storage errors.
pub fn abort(shard: &MetaShard, id: &OperationId, reason: &str) -> Result<PublishOperation> {
    claim(shard, id, reason, false)
}

/// Takeover by cleanup: like [`abort`], but a Finalizing operation is also claimed
/// (Finalizing -> Aborting) — only with fenced proof that no publication exists: the command
/// predicates the Finalizing row unchanged, the final request's CommandDedupe row Absent and the
/// new ArtifactRevision Absent, so it and the publication command (which rewrites the same row)
/// have exactly one winner.
///
/// Errors: [`Error::OperationState`] when the operation is absent or Published (or its
/// publication exists); codec and storage errors.
pub fn take_over(shard: &MetaShard, id: &OperationId, reason: &str) -> Result<PublishOperation> {
    claim(shard, id, reason, true)
}

pub(super) fn claim(
    shard: &MetaShard,
    id: &OperationId,
    reason: &str,
    takeover: bool,
) -> Result<PublishOperation> {
    let key = op_key(shard, id);
    let root = shard.root_id();
    run(shard, |snap, version| {
        let Some((bytes, op)) = read_op(snap, &key)? else {
            return Err(state_error(
                id,
                None,
                "only an unpublished operation can be aborted",
            ));
        };
        match op.phase {
            PublishPhase::Aborting
            | PublishPhase::Cleaning
            | PublishPhase::Quarantined
            | PublishPhase::Cleaned => return Ok(Step::Done(op)),
            PublishPhase::Published => {
                return Err(state_error(
                    id,
                    Some(op.phase),
                    "a published operation cannot be aborted",
                ))
            }
            PublishPhase::Finalizing if !takeover => {
                return Err(state_error(
                    id,
                    Some(op.phase),
                    "finalization won the CAS; only a takeover with proof can abort it",
                ))
            }
            PublishPhase::Uploading | PublishPhase::Finalizing => {}
        }
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"abort", id, reason.as_bytes()),
            id,
            PublishPhase::Aborting,
        )?;
        if op.phase == PublishPhase::Finalizing {
            let dedupe = command_dedupe::key(&root, &final_request_id(id));
            let rev = artifact_revision::key(&root, &op.artifact_revision_id);
            if snap.get(Family::CommandDedupe, &dedupe)?.is_some()
                || snap.get(Family::ArtifactRevision, &rev)?.is_some()
            {
                return Err(state_error(
                    id,
                    Some(op.phase),
                    "its publication exists; it cannot be taken over by cleanup",
                ));
            }
            cmd.predicates
                .push(Predicate::absent(Family::CommandDedupe, dedupe));
            cmd.predicates
                .push(Predicate::absent(Family::ArtifactRevision, rev));
        }
        let mut next = op.clone();
        next.phase = PublishPhase::Aborting;
        next.result = OperationResult::Failed(TerminalError {
            code: ABORTED_CODE.to_owned(),
            message: reason.to_owned(),
        });
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(checked_publish(&op, next.clone())).encode(),
        ));
        Ok(Step::Command(Box::new(cmd), next))
    })
}
