//! `Uploading`: staging more ledger rows and recording multipart upload ids.

use super::begin::{staged_row, validate_block};
use super::ledger::{command, ledger_digest, op_key, read_uploading, run, staged_key};
use super::state::{StagedBlock, MAX_LEDGER_ROWS_PER_COMMAND};
use crate::codec::{Operation, PublishOperation, PublishPhase, StagedObject, StagedProviderState};
use crate::command::{MetadataCommand, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::OperationId;
use crate::ops::publish::{self, checked_publish};
use crate::ops::Step;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Adds the provider-state `marks` (`(sequence, state)`) of the current attempt's rows to `cmd`
/// (reads each row at `snap`).
pub(super) fn push_marks<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
    op: &PublishOperation,
    marks: &[(u64, StagedProviderState)],
    cmd: &mut MetadataCommand,
) -> Result<()> {
    for (seq, state) in marks {
        let k = staged_key(shard, id, *seq);
        let Some(b) = snap.get(Family::StagedObject, &k)? else {
            return Err(Error::invalid(format!(
                "no staged object at sequence {seq}"
            )));
        };
        let mut row = StagedObject::decode(&b)?;
        if row.artifact_revision_id != op.artifact_revision_id {
            return Err(Error::invalid(format!(
                "staged object {seq} belongs to an earlier attempt"
            )));
        }
        if row.provider_state == *state {
            continue;
        }
        row.provider_state = *state;
        cmd.mutations
            .push(Mutation::put(Family::StagedObject, k, row.encode()));
    }
    Ok(())
}

/// Stages more objects of an Uploading operation: one command (predicating the operation row
/// unchanged) writing `blocks` as the next StagedObject rows — before any of their bytes is
/// sent — and recording provider states of earlier rows in `marks` (`(sequence, state)`:
/// Uploaded once a send completed, Ambiguous when the provider could not tell).
/// Returns the first sequence assigned to `blocks`.
///
/// Errors: [`Error::OperationState`] when the operation is not Uploading (cleanup won: the
/// caller joins cleanup instead of sending); [`Error::InvalidArgument`] (more than
/// [`MAX_LEDGER_ROWS_PER_COMMAND`] rows either way, a bad row, an unknown sequence); codec and
/// storage errors.
pub fn stage(
    shard: &MetaShard,
    id: &OperationId,
    blocks: &[StagedBlock],
    marks: &[(u64, StagedProviderState)],
) -> Result<u64> {
    if blocks.len() > MAX_LEDGER_ROWS_PER_COMMAND || marks.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    for b in blocks {
        validate_block(b)?;
    }
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let (bytes, op) = read_uploading(snap, &key, id, "staging needs an Uploading operation")?;
        let start = op.staged_object_count;
        let mut next = op.clone();
        next.staged_object_count = start.saturating_add(blocks.len() as u64);
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"stage", id, &start.to_be_bytes()),
            id,
            PublishPhase::Uploading,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(checked_publish(&op, next)).encode(),
        ));
        for (i, b) in blocks.iter().enumerate() {
            cmd.mutations.push(Mutation::put(
                Family::StagedObject,
                staged_key(shard, id, start.saturating_add(i as u64)),
                staged_row(op.artifact_revision_id, b).encode(),
            ));
        }
        push_marks(shard, snap, id, &op, marks, &mut cmd)?;
        Ok(Step::Command(Box::new(cmd), start))
    })
}

/// Records the provider's multipart upload id on StagedObject row `sequence` of an Uploading
/// operation, in one command predicating the operation row — called by the uploader after the
/// provider created the upload and before its first part is sent, so a process killed mid-upload
/// leaves the upload owned by the ledger and cleanup can abort it (docs/metadata-format.md, "Upload And
/// Append": the ledger owns "all object keys, multipart ids, lengths, and digests").
///
/// Errors: [`Error::OperationState`] when the operation is not Uploading (cleanup won: the caller
/// must not send the parts); [`Error::InvalidArgument`] for an unknown sequence, a row of an
/// earlier attempt, an empty or over-long id (> 1024 bytes) or a row that already records
/// another id; codec and storage errors.
pub fn record_upload_id(
    shard: &MetaShard,
    id: &OperationId,
    sequence: u64,
    upload_id: &str,
) -> Result<()> {
    if upload_id.is_empty() || upload_id.len() > publish::MAX_OBJECT_KEY_BYTES {
        return Err(Error::invalid(
            "a multipart upload id must be 1..=1024 bytes",
        ));
    }
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let (bytes, op) =
            read_uploading(snap, &key, id, "an upload id needs an Uploading operation")?;
        let k = staged_key(shard, id, sequence);
        let Some(row_bytes) = snap.get(Family::StagedObject, &k)? else {
            return Err(Error::invalid(format!(
                "no staged object at sequence {sequence}"
            )));
        };
        let mut row = StagedObject::decode(&row_bytes)?;
        if row.artifact_revision_id != op.artifact_revision_id {
            return Err(Error::invalid(format!(
                "staged object {sequence} belongs to an earlier attempt"
            )));
        }
        match row.upload_id.as_deref() {
            Some(existing) if existing == upload_id => return Ok(Step::Done(())),
            Some(_) => {
                return Err(Error::invalid(format!(
                    "staged object {sequence} already records another upload id"
                )))
            }
            None => {}
        }
        row.upload_id = Some(upload_id.to_owned());
        row.provider_state = StagedProviderState::Uploading;
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"upload-id", id, &sequence.to_be_bytes()),
            id,
            PublishPhase::Uploading,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.predicates.push(Predicate::equals(
            Family::StagedObject,
            k.clone(),
            row_bytes,
        ));
        cmd.mutations
            .push(Mutation::put(Family::StagedObject, k, row.encode()));
        Ok(Step::Command(Box::new(cmd), ()))
    })
}
