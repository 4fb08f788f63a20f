//! Driving one revision's Gc operation from its claim to a terminal phase.

use super::claim::claim;
use super::finish::finish;
use super::rows::{manifest_rows, read_rows};
use super::state::{
    operation_id, Boundary, CollectedRevision, InterruptedRevision, ObjectRemover, OwnedObject,
    ProbeOutcome, QuarantinedRevision, DELETE_BATCH,
};
use super::transition::{transition, Transition};
use crate::codec::{GcCandidateKey, GcPhase, RevisionState};
use crate::error::Result;
use crate::ops::publish::operation::DeleteOutcome;
use crate::shard::MetaShard;
use crate::store::TxnStore;

/// Outcome of driving one candidate.
pub(super) enum Driven {
    Collected(CollectedRevision),
    Quarantined(QuarantinedRevision),
    Interrupted(InterruptedRevision),
    /// Lost a CAS or no longer collectable.
    Skipped,
}

/// Bound on the steps of one revision in one pass (each step is one command or one batch).
pub(super) fn step_bound(block_count: u64) -> u64 {
    block_count / DELETE_BATCH as u64 + 16
}

/// Drives one candidate through the state machine until Deleted, Quarantined, interrupted or
/// skipped.
pub(super) fn drive(
    shard: &MetaShard,
    key: &GcCandidateKey,
    remover: &mut dyn ObjectRemover,
    observe: &mut dyn FnMut(Boundary),
) -> Result<Driven> {
    let root = key.root;
    let id = operation_id(&root, &key.revision, key.reference_epoch);
    let mut reconciled = false;
    let mut objects_deleted = 0u64;
    let mut bytes_deleted = 0u64;
    let mut bound = u64::MAX;
    let mut steps = 0u64;
    loop {
        steps += 1;
        if steps > bound {
            return Ok(Driven::Interrupted(InterruptedRevision {
                revision: key.revision,
                reason: "the collection did not converge within its step bound".into(),
            }));
        }
        let snap = shard.inner.store.snapshot();
        let Some(rows) = read_rows(&snap, key, &id)? else {
            return Ok(Driven::Skipped);
        };
        if rows.rev.reference_epoch != key.reference_epoch {
            return Ok(Driven::Skipped);
        }
        bound = bound.min(step_bound(rows.rev.block_count));
        let phase = rows.op.as_ref().map(|(_, o)| o.phase);
        match (rows.rev.state, phase) {
            (RevisionState::Available, None) => {
                drop(snap);
                if !claim(shard, key, &id)? {
                    return Ok(Driven::Skipped);
                }
                observe(Boundary::Claimed);
            }
            (RevisionState::Deleting, Some(GcPhase::Claimed)) => {
                drop(snap);
                if !transition(shard, key, &id, Transition::StartDeleting)? {
                    return Ok(Driven::Skipped);
                }
                observe(Boundary::Deleting);
            }
            (RevisionState::Deleting, Some(GcPhase::Deleting)) => {
                let Some((_, op)) = rows.op else {
                    return Ok(Driven::Skipped);
                };
                let todo = manifest_rows(
                    &snap,
                    &root,
                    &key.revision,
                    op.next_object_index,
                    DELETE_BATCH,
                )?;
                drop(snap);
                let own: Vec<(u64, OwnedObject)> = todo
                    .iter()
                    .filter(|r| r.physical_owner_revision == key.revision)
                    .map(|r| {
                        (
                            r.object_index,
                            OwnedObject {
                                revision: key.revision,
                                physical_object_index: r.physical_object_index,
                                key: r.object_key.clone(),
                                length: r.length,
                            },
                        )
                    })
                    .collect();
                if own.is_empty() {
                    let Some(c) = finish(shard, key, &id)? else {
                        return Ok(Driven::Skipped);
                    };
                    observe(Boundary::Deleted);
                    return Ok(Driven::Collected(CollectedRevision {
                        objects: objects_deleted,
                        object_bytes: bytes_deleted,
                        reconciled,
                        ..c
                    }));
                }
                let mut done = 0u64;
                let mut next = op.next_object_index;
                let mut stop: Option<DeleteOutcome> = None;
                for (i, (index, obj)) in own.iter().enumerate() {
                    match remover.delete(obj) {
                        DeleteOutcome::Deleted => {
                            done += 1;
                            objects_deleted += 1;
                            bytes_deleted += obj.length;
                            next = index.saturating_add(1);
                            if i == 0 {
                                observe(Boundary::ObjectDeleted);
                            }
                        }
                        other => {
                            next = *index;
                            stop = Some(other);
                            break;
                        }
                    }
                }
                if stop.is_none() {
                    // Past the batch's last row (also skipping dependency rows after it).
                    next = todo
                        .last()
                        .map_or(next, |r| r.object_index.saturating_add(1));
                }
                match stop {
                    None => {
                        if !transition(shard, key, &id, Transition::Progress { next, done })? {
                            return Ok(Driven::Skipped);
                        }
                        observe(Boundary::Batch);
                    }
                    Some(DeleteOutcome::Quarantined(evidence)) => {
                        if done > 0
                            && !transition(shard, key, &id, Transition::Progress { next, done })?
                        {
                            return Ok(Driven::Skipped);
                        }
                        let evidence = format!(
                            "object {} ({}): {evidence}",
                            own.iter()
                                .find(|(ix, _)| *ix == next)
                                .map_or(0, |(_, o)| o.physical_object_index),
                            key.revision
                        );
                        if !transition(shard, key, &id, Transition::Quarantine(evidence.clone()))? {
                            return Ok(Driven::Skipped);
                        }
                        observe(Boundary::Quarantined);
                        return Ok(Driven::Quarantined(QuarantinedRevision {
                            revision: key.revision,
                            evidence,
                        }));
                    }
                    Some(DeleteOutcome::Failed(reason)) => {
                        if done > 0
                            && !transition(shard, key, &id, Transition::Progress { next, done })?
                        {
                            return Ok(Driven::Skipped);
                        }
                        return Ok(Driven::Interrupted(InterruptedRevision {
                            revision: key.revision,
                            reason,
                        }));
                    }
                    Some(DeleteOutcome::Deleted) => {}
                }
            }
            (RevisionState::Quarantined, Some(GcPhase::Quarantined)) => {
                let rows_all = manifest_rows(&snap, &root, &key.revision, 0, usize::MAX)?;
                drop(snap);
                let mut first_present = None;
                for r in rows_all
                    .iter()
                    .filter(|r| r.physical_owner_revision == key.revision)
                {
                    let obj = OwnedObject {
                        revision: key.revision,
                        physical_object_index: r.physical_object_index,
                        key: r.object_key.clone(),
                        length: r.length,
                    };
                    match remover.probe(&obj) {
                        ProbeOutcome::Absent => {}
                        ProbeOutcome::Present => {
                            first_present = Some(r.object_index);
                            break;
                        }
                        ProbeOutcome::Failed(why) => {
                            let evidence = rows
                                .op
                                .as_ref()
                                .and_then(|(_, o)| o.quarantine_evidence.clone())
                                .unwrap_or_default();
                            return Ok(Driven::Quarantined(QuarantinedRevision {
                                revision: key.revision,
                                evidence: format!("{evidence}; reconciliation HEAD failed: {why}"),
                            }));
                        }
                    }
                }
                reconciled = true;
                match first_present {
                    None => {
                        let Some(c) = finish(shard, key, &id)? else {
                            return Ok(Driven::Skipped);
                        };
                        observe(Boundary::Deleted);
                        return Ok(Driven::Collected(CollectedRevision {
                            objects: objects_deleted,
                            object_bytes: bytes_deleted,
                            reconciled,
                            ..c
                        }));
                    }
                    Some(index) => {
                        if !transition(shard, key, &id, Transition::Reopen(index))? {
                            return Ok(Driven::Skipped);
                        }
                        observe(Boundary::Reopened);
                    }
                }
            }
            (RevisionState::Deleted, _) => return Ok(Driven::Skipped),
            (state, phase) => {
                return Ok(Driven::Interrupted(InterruptedRevision {
                    revision: key.revision,
                    reason: format!(
                        "revision is {state:?} but its Gc operation is {}",
                        phase.map_or_else(|| "absent".to_owned(), |p| format!("{p:?}"))
                    ),
                }));
            }
        }
    }
}
