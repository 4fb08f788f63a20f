//! `Uploading -> Finalizing`: the CAS that seals the expected length and digest.

use super::ledger::{command, ledger_digest, op_key, read_uploading, run};
use super::stage::push_marks;
use super::state::MAX_LEDGER_ROWS_PER_COMMAND;
use crate::codec::{Operation, PublishOperation, PublishPhase, StagedObject, StagedProviderState};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::OperationId;
use crate::ops::publish::{checked_publish, validate_digest_uri};
use crate::ops::Step;
use crate::shard::MetaShard;

/// Finalize CAS: Uploading -> Finalizing in one command that seals the body length (bytes) and
/// `sha256:` digest and records the provider states `marks` (at most
/// [`MAX_LEDGER_ROWS_PER_COMMAND`]; mark earlier ones with [`stage`] and no new blocks).
/// Returns the Finalizing record. Only one of this CAS and [`abort`]'s Uploading -> Aborting
/// CAS can win.
///
/// Errors: [`Error::OperationState`] when the operation is not Uploading;
/// [`Error::InvalidArgument`]; codec and storage errors.
pub fn finalize(
    shard: &MetaShard,
    id: &OperationId,
    expected_length: u64,
    expected_digest_uri: &str,
    marks: &[(u64, StagedProviderState)],
) -> Result<PublishOperation> {
    validate_digest_uri("body digest", expected_digest_uri)?;
    if marks.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let (bytes, op) =
            read_uploading(snap, &key, id, "finalization needs an Uploading operation")?;
        let mut next = op.clone();
        next.phase = PublishPhase::Finalizing;
        next.expected_length = expected_length;
        next.expected_digest_uri = Some(expected_digest_uri.to_owned());
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"finalize", id, expected_digest_uri.as_bytes()),
            id,
            PublishPhase::Finalizing,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(checked_publish(&op, next.clone())).encode(),
        ));
        push_marks(shard, snap, id, &op, marks, &mut cmd)?;
        Ok(Step::Command(Box::new(cmd), next))
    })
}

/// The own blocks of the current attempt (rows of `op`'s revision) in sequence order.
pub fn own_rows(op: &PublishOperation, rows: &[(u64, StagedObject)]) -> Vec<(u64, StagedObject)> {
    rows.iter()
        .filter(|(_, r)| r.artifact_revision_id == op.artifact_revision_id)
        .cloned()
        .collect()
}
