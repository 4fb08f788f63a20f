//! `Aborting -> Cleaning -> Cleaned` and Quarantined reconciliation, driven by the ledger.

use super::ledger::{
    command, get, ledger, ledger_digest, op_key, read_op, run, staged_key, state_error, unregister,
};
use super::state::{is_terminal, DeleteOutcome, MAX_LEDGER_ROWS_PER_COMMAND};
use crate::codec::{
    Operation, PublishOperation, PublishPhase, StagedCleanupState, StagedObject,
    StagedProviderState,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::OperationId;
use crate::ops::publish::checked_publish;
use crate::ops::Step;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// One cleanup command: predicate the row, apply `edit` to the selected ledger rows and the
/// operation, and write them.
pub(super) fn cleanup_step(
    shard: &MetaShard,
    id: &OperationId,
    step: &[u8],
    rows: &[(u64, StagedCleanupState)],
    edit: impl Fn(&mut PublishOperation),
) -> Result<PublishOperation> {
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let Some((bytes, op)) = read_op(snap, &key)? else {
            return Err(state_error(id, None, "cleanup needs an aborted operation"));
        };
        if !matches!(
            op.phase,
            PublishPhase::Aborting | PublishPhase::Cleaning | PublishPhase::Quarantined
        ) {
            return Err(state_error(
                id,
                Some(op.phase),
                "cleanup needs an Aborting, Cleaning or Quarantined operation",
            ));
        }
        let mut next = op.clone();
        edit(&mut next);
        let mut cmd = command(shard, version, ledger_digest(step, id, &[]), id, next.phase)?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(checked_publish(&op, next.clone())).encode(),
        ));
        if is_terminal(next.phase) {
            // Cleaned: the registry row goes in the same command.
            cmd.mutations.push(unregister(id));
        }
        for (seq, state) in rows {
            let k = staged_key(shard, id, *seq);
            let Some(b) = snap.get(Family::StagedObject, &k)? else {
                return Err(Error::codec("staged_object", format!("row {seq} vanished")));
            };
            let mut row = StagedObject::decode(&b)?;
            row.cleanup_state = *state;
            if *state == StagedCleanupState::Deleted {
                row.provider_state = match row.provider_state {
                    StagedProviderState::Uploaded | StagedProviderState::Ambiguous => {
                        row.provider_state
                    }
                    _ => StagedProviderState::Aborted,
                };
            }
            cmd.mutations
                .push(Mutation::put(Family::StagedObject, k, row.encode()));
        }
        Ok(Step::Command(Box::new(cmd), next))
    })
}

/// Cleanup of an aborted operation, driven by its ledger only: Aborting -> Cleaning; then, in
/// batches of at most [`MAX_LEDGER_ROWS_PER_COMMAND`] rows from `cleanup_next_sequence`, the rows
/// are marked DeletePending (one command), `delete` is called for each (the caller issues the
/// provider DELETE of exactly that key) and the outcomes are recorded (one command: Deleted, or
/// Quarantined with evidence); finally Cleaning -> Cleaned, or -> Quarantined when any row is
/// quarantined. For a Quarantined operation (`reconcile`), `delete` is called for each
/// Quarantined row instead and the operation becomes Cleaned once every row is Deleted.
/// A [`DeleteOutcome::Failed`] stops the pass with the operation left Cleaning (or
/// Quarantined); the next pass resumes. Returns the record after the pass.
///
/// Errors: [`Error::OperationState`] when the operation is not Aborting, Cleaning or
/// Quarantined (Cleaned is returned unchanged); codec and storage errors.
pub fn clean(
    shard: &MetaShard,
    id: &OperationId,
    delete: &mut dyn FnMut(&StagedObject) -> DeleteOutcome,
) -> Result<PublishOperation> {
    let Some(mut op) = get(shard, id)? else {
        return Err(state_error(id, None, "cleanup needs an aborted operation"));
    };
    if op.phase == PublishPhase::Cleaned {
        return Ok(op);
    }
    if op.phase == PublishPhase::Quarantined {
        return reconcile(shard, id, delete);
    }
    if op.phase == PublishPhase::Aborting {
        op = cleanup_step(shard, id, b"cleaning", &[], |o| {
            o.phase = PublishPhase::Cleaning;
        })?;
    }
    if op.phase != PublishPhase::Cleaning {
        return Err(state_error(
            id,
            Some(op.phase),
            "cleanup needs an aborted operation",
        ));
    }
    let rows = ledger(shard, id)?;
    let pending: Vec<&(u64, StagedObject)> = rows
        .iter()
        .filter(|(seq, _)| *seq >= op.cleanup_next_sequence)
        .collect();
    for batch in pending.chunks(MAX_LEDGER_ROWS_PER_COMMAND) {
        let marks: Vec<(u64, StagedCleanupState)> = batch
            .iter()
            .filter(|(_, r)| r.cleanup_state == StagedCleanupState::Owned)
            .map(|(seq, _)| (*seq, StagedCleanupState::DeletePending))
            .collect();
        if !marks.is_empty() {
            cleanup_step(shard, id, b"delete-pending", &marks, |_| {})?;
        }
        let mut settled = Vec::new();
        let mut evidence = Vec::new();
        let mut failed = None;
        for (seq, row) in batch.iter() {
            if row.cleanup_state == StagedCleanupState::Deleted {
                settled.push((*seq, StagedCleanupState::Deleted));
                continue;
            }
            match delete(row) {
                DeleteOutcome::Deleted => settled.push((*seq, StagedCleanupState::Deleted)),
                DeleteOutcome::Quarantined(why) => {
                    settled.push((*seq, StagedCleanupState::Quarantined));
                    evidence.push(format!("object {seq}: {why}"));
                }
                DeleteOutcome::Failed(why) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        let next_seq = settled.last().map(|(s, _)| s.saturating_add(1));
        op = cleanup_step(shard, id, b"settle", &settled, |o| {
            if let Some(n) = next_seq {
                o.cleanup_next_sequence = o.cleanup_next_sequence.max(n);
            }
            if !evidence.is_empty() {
                let mut all = o.quarantine_evidence.take().unwrap_or_default();
                for e in &evidence {
                    if !all.is_empty() {
                        all.push_str("; ");
                    }
                    all.push_str(e);
                }
                o.quarantine_evidence = Some(all);
            }
        })?;
        if failed.is_some() {
            return Ok(op);
        }
    }
    cleanup_step(shard, id, b"cleaned", &[], |o| {
        o.cleanup_next_sequence = o.staged_object_count;
        o.phase = if o.quarantine_evidence.is_some() {
            PublishPhase::Quarantined
        } else {
            PublishPhase::Cleaned
        };
    })
}

/// The reconciliation pass of a Quarantined operation (see [`clean`]).
pub(super) fn reconcile(
    shard: &MetaShard,
    id: &OperationId,
    delete: &mut dyn FnMut(&StagedObject) -> DeleteOutcome,
) -> Result<PublishOperation> {
    let rows = ledger(shard, id)?;
    let quarantined: Vec<&(u64, StagedObject)> = rows
        .iter()
        .filter(|(_, r)| r.cleanup_state != StagedCleanupState::Deleted)
        .collect();
    let mut remaining = false;
    for batch in quarantined.chunks(MAX_LEDGER_ROWS_PER_COMMAND) {
        let mut settled = Vec::new();
        for (seq, row) in batch.iter() {
            match delete(row) {
                DeleteOutcome::Deleted => settled.push((*seq, StagedCleanupState::Deleted)),
                DeleteOutcome::Quarantined(_) | DeleteOutcome::Failed(_) => remaining = true,
            }
        }
        if !settled.is_empty() {
            cleanup_step(shard, id, b"reconcile", &settled, |_| {})?;
        }
    }
    if remaining {
        return get(shard, id)?.ok_or_else(|| state_error(id, None, "reconciliation"));
    }
    cleanup_step(shard, id, b"reconciled", &[], |o| {
        o.phase = PublishPhase::Cleaned;
        if let Some(e) = o.quarantine_evidence.take() {
            o.quarantine_evidence = Some(format!("{e}; reconciled: every object confirmed absent"));
        }
    })
}
