//! `Available -> Deleting` claim: the command that creates the Gc operation.

use super::holds::in_flight_publications;
use super::rows::{op_key, read_rows, recorded, step_digest};
use crate::codec::{
    artifact_revision, GcCandidate, GcCandidateKey, GcClaimState, GcOperation, GcPhase, Operation,
    OperationResult, RevisionState,
};
use crate::command::{Mutation, Predicate};
use crate::error::Result;
use crate::family::Family;
use crate::ids::{OperationId, RequestId};
use crate::ops::{run_step, Step};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// The claim command (see the module docs). Returns false when the candidate is no longer
/// claimable at a fresh snapshot (a reference was added, another collector claimed it, the floor
/// or an in-flight publication holds it).
pub(super) fn claim(shard: &MetaShard, key: &GcCandidateKey, id: &OperationId) -> Result<bool> {
    let root = key.root;
    let in_flight = in_flight_publications(shard)?;
    run_step(shard, |snap| {
        let Some(rows) = read_rows(snap, key, id)? else {
            return Ok(Step::Done(false));
        };
        let floor = shard.store().history_floor()?;
        let z = rows
            .rev
            .last_zero_ref_version
            .unwrap_or(rows.cand.last_zero_ref_version);
        if rows.rev.state != RevisionState::Available
            || rows.rev.reference_epoch != key.reference_epoch
            || rows.rev.strong_reference_count != 0
            || rows.cand.claim_state != GcClaimState::Candidate
            || rows.op.is_some()
            || floor <= z
            || in_flight.contains_key(&key.revision)
        {
            return Ok(Step::Done(false));
        }
        let okey = op_key(&root, id);
        let rkey = artifact_revision::key(&root, &key.revision);
        let ckey = key.encode();
        let mut rev = rows.rev.clone();
        rev.state = RevisionState::Deleting;
        let cand = GcCandidate {
            claim_state: GcClaimState::Claimed,
            ..rows.cand
        };
        let op = GcOperation {
            phase: GcPhase::Claimed,
            artifact_revision_id: key.revision,
            reference_epoch: key.reference_epoch,
            next_object_index: 0,
            deleted_object_count: 0,
            quarantine_evidence: None,
            result: OperationResult::Pending,
        };
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"claim", id, &rows.rev_bytes),
            snap.version(),
            recorded(id, GcPhase::Claimed),
        );
        cmd.predicates = vec![
            Predicate::equals(Family::ArtifactRevision, rkey.clone(), rows.rev_bytes),
            Predicate::equals(Family::GcCandidate, ckey.clone(), rows.cand_bytes),
            Predicate::absent(Family::Operation, okey.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::ArtifactRevision, rkey, rev.encode()),
            Mutation::put(Family::GcCandidate, ckey, cand.encode()),
            Mutation::put(Family::Operation, okey, Operation::Gc(op).encode()),
        ];
        Ok(Step::Command(Box::new(cmd), true))
    })
}
