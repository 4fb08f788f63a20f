//! `Claimed|Deleting -> Deleting|Quarantined`: one phase transition of the Gc operation.

use super::rows::{op_key, read_rows, recorded, step_digest};
use super::state::checked_gc;
use crate::codec::{
    artifact_revision, GcCandidateKey, GcClaimState, GcPhase, Operation, RevisionState,
};
use crate::command::{Mutation, Predicate};
use crate::error::Result;
use crate::family::Family;
use crate::ids::{OperationId, RequestId};
use crate::ops::{run_step, Step};
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// A single-row-set transition of a claimed revision.
pub(super) enum Transition {
    /// Gc Claimed -> Deleting.
    StartDeleting,
    /// Cursor and count advance (phase Deleting).
    Progress { next: u64, done: u64 },
    /// Deleting -> Quarantined with evidence (revision, operation, candidate).
    Quarantine(String),
    /// Quarantined -> Deleting from this object index (revision, operation, candidate).
    Reopen(u64),
}

/// Runs one transition; `Ok(false)` when another collector moved the rows first (the caller
/// skips the revision).
pub(super) fn transition(
    shard: &MetaShard,
    key: &GcCandidateKey,
    id: &OperationId,
    t: Transition,
) -> Result<bool> {
    let root = key.root;
    let okey = op_key(&root, id);
    let rkey = artifact_revision::key(&root, &key.revision);
    let ckey = key.encode();
    run_step(shard, |snap| {
        let Some(rows) = read_rows(snap, key, id)? else {
            return Ok(Step::Done(false));
        };
        let Some((op_bytes, op)) = rows.op else {
            return Ok(Step::Done(false));
        };
        let mut next_op = op.clone();
        let mut next_rev = rows.rev.clone();
        let mut next_cand = rows.cand;
        let (wanted_phase, wanted_state) = match &t {
            Transition::StartDeleting => {
                next_op.phase = GcPhase::Deleting;
                (GcPhase::Claimed, RevisionState::Deleting)
            }
            Transition::Progress { next, done } => {
                next_op.next_object_index = (*next).max(op.next_object_index);
                next_op.deleted_object_count = op.deleted_object_count.saturating_add(*done);
                (GcPhase::Deleting, RevisionState::Deleting)
            }
            Transition::Quarantine(evidence) => {
                next_op.phase = GcPhase::Quarantined;
                next_op.quarantine_evidence =
                    Some(append_evidence(op.quarantine_evidence.as_deref(), evidence));
                next_rev.state = RevisionState::Quarantined;
                next_cand.claim_state = GcClaimState::Quarantined;
                next_cand.retry_count = next_cand.retry_count.saturating_add(1);
                (GcPhase::Deleting, RevisionState::Deleting)
            }
            Transition::Reopen(index) => {
                next_op.phase = GcPhase::Deleting;
                next_op.next_object_index = *index;
                next_op.quarantine_evidence = Some(append_evidence(
                    op.quarantine_evidence.as_deref(),
                    "reconciliation found objects still present; deleting them again",
                ));
                next_rev.state = RevisionState::Deleting;
                next_cand.claim_state = GcClaimState::Claimed;
                (GcPhase::Quarantined, RevisionState::Quarantined)
            }
        };
        if op.phase != wanted_phase || rows.rev.state != wanted_state {
            return Ok(Step::Done(false));
        }
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"transition", id, &op_bytes),
            snap.version(),
            recorded(id, next_op.phase),
        );
        cmd.predicates
            .push(Predicate::equals(Family::Operation, okey.clone(), op_bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            okey.clone(),
            Operation::Gc(checked_gc(&op, next_op)).encode(),
        ));
        if next_rev != rows.rev {
            cmd.predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                rkey.clone(),
                rows.rev_bytes,
            ));
            cmd.mutations.push(Mutation::put(
                Family::ArtifactRevision,
                rkey.clone(),
                next_rev.encode(),
            ));
        }
        if next_cand != rows.cand {
            cmd.predicates.push(Predicate::equals(
                Family::GcCandidate,
                ckey.clone(),
                rows.cand_bytes,
            ));
            cmd.mutations.push(Mutation::put(
                Family::GcCandidate,
                ckey.clone(),
                next_cand.encode(),
            ));
        }
        Ok(Step::Command(Box::new(cmd), true))
    })
}

pub(super) fn append_evidence(before: Option<&str>, more: &str) -> String {
    match before {
        None | Some("") => more.to_owned(),
        Some(b) => format!("{b}; {more}"),
    }
}
