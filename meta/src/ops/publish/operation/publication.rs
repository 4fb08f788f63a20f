//! `Finalizing -> Published` (and the sealed `Uploading -> Published`): the publication command
//! planned by `final_request.rs`.

use super::final_request::{plan_final, stored_receipt};
use super::finalize::{finalize, own_rows};
use super::ledger::{get, ledger, op_key, read_op, state_error, unregister};
use super::reserve::{apply_change, push_change, validate_change, ReservationChange};
use super::stage::push_marks;
use super::state::MAX_LEDGER_ROWS_PER_COMMAND;
use crate::codec::{PublishPhase, StagedProviderState};
use crate::command::executor::check_handle_fences;
use crate::command::{MAX_COMMAND_MUTATIONS, MAX_COMMAND_PREDICATES};
use crate::error::{Error, Result};
use crate::ids::OperationId;
use crate::ops::publish::{self, checked_publish, validate_digest_uri, Planned, PublishReceipt};
use crate::shard::MetaShard;

/// The objects a Finalizing (or any) operation's final publication would reference as its own:
/// `(object_key, length, digest_uri)` of the current attempt, in object-index order. Recovery
/// verifies these before resuming a Finalizing operation.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn own_objects(shard: &MetaShard, id: &OperationId) -> Result<Vec<(String, u64, String)>> {
    let Some(op) = get(shard, id)? else {
        return Ok(Vec::new());
    };
    Ok(own_rows(&op, &ledger(shard, id)?)
        .into_iter()
        .map(|(_, r)| (r.object_key, r.expected_length, r.expected_digest_uri))
        .collect())
}

/// The final publication: the publication command of [`crate::ops::publish`] built from the
/// frozen request, extended so the same single command moves Finalizing -> Published and stores
/// the result on the operation. A Published operation returns its stored receipt
/// (`idempotent_replay = true`).
///
/// Errors: [`Error::OperationState`] when the operation is neither Finalizing nor Published;
/// the publication errors of [`crate::ops::publish::publish`] ([`Error::PathAlreadyExists`],
/// [`Error::GenerationConflict`], [`Error::WorkspaceNotFound`], [`Error::RevisionUnavailable`],
/// …) — the operation then stays Finalizing and the caller takes it over with [`abort`].
pub fn publish_operation(shard: &MetaShard, id: &OperationId) -> Result<PublishReceipt> {
    let key = op_key(shard, id);
    crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let Some((bytes, op)) = read_op(&snap, &key)? else {
            return Err(state_error(
                id,
                None,
                "publication needs a Finalizing operation",
            ));
        };
        if op.phase == PublishPhase::Published {
            return stored_receipt(shard, &snap, id);
        }
        if op.phase != PublishPhase::Finalizing {
            return Err(state_error(
                id,
                Some(op.phase),
                "publication needs a Finalizing operation",
            ));
        }
        let planned = plan_final(shard, &snap, id, Some(bytes), op, None)?;
        drop(snap);
        let out = match planned {
            Planned::Replay(out) => *out,
            Planned::Command(mut cmd) => {
                // Published is terminal: the registry row goes in the publication command.
                cmd.mutations.push(unregister(id));
                seq.execute(*cmd)?
            }
        };
        publish::receipt(out)
    })
}

/// Finalize and publish in ONE command: `Uploading -> Published`, the Finalizing step folded into
/// the publication command (docs/metadata-format.md, "Upload And Append": "Sealed publication").
/// The command predicates the exact Uploading row, seals `expected_length` (bytes) and
/// `expected_digest_uri` on it, records the provider states `marks` (at most
/// [`MAX_LEDGER_ROWS_PER_COMMAND`]) and carries everything [`publish_operation`] writes. A small
/// put therefore waits for two metadata commits (begin, this) instead of three. The same command
/// applies `change` (a reservation refill for the caller's later puts, retirements; dropped
/// with the two-step fallback).
///
/// Outcomes: the receipt; or, when the publication is refused (the same errors as
/// [`publish_operation`]), nothing was written and the operation is still **Uploading**, so the
/// caller aborts and cleans it (no take-over proof is needed: it never was Finalizing). When the
/// combined command would exceed the command bounds, it runs [`finalize`] then
/// [`publish_operation`] instead (a refusal then leaves the operation Finalizing, as there). An
/// operation found already Finalizing is published as by [`publish_operation`], and a Published
/// one returns its stored receipt (`idempotent_replay = true`).
///
/// Errors: [`Error::OperationState`] when the operation is Aborting or later (cleanup won; the
/// caller joins it); [`Error::InvalidArgument`]; the publication errors; codec and storage
/// errors.
pub fn finalize_and_publish(
    shard: &MetaShard,
    id: &OperationId,
    expected_length: u64,
    expected_digest_uri: &str,
    marks: &[(u64, StagedProviderState)],
    change: &ReservationChange,
) -> Result<PublishReceipt> {
    validate_digest_uri("body digest", expected_digest_uri)?;
    validate_change(change)?;
    if marks.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    let key = op_key(shard, id);
    let combined = crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let Some((bytes, op)) = read_op(&snap, &key)? else {
            return Err(state_error(
                id,
                None,
                "finalization needs an Uploading operation",
            ));
        };
        match op.phase {
            PublishPhase::Uploading => {}
            PublishPhase::Published => return stored_receipt(shard, &snap, id).map(Some),
            // Sealed by an earlier finalize: publish it as publish_operation does.
            PublishPhase::Finalizing => return Ok(None),
            other => {
                return Err(state_error(
                    id,
                    Some(other),
                    "finalization needs an Uploading operation",
                ))
            }
        }
        // The Finalizing record this command seals, never written on its own.
        let mut sealed = op.clone();
        sealed.phase = PublishPhase::Finalizing;
        sealed.expected_length = expected_length;
        sealed.expected_digest_uri = Some(expected_digest_uri.to_owned());
        let sealed = checked_publish(&op, sealed);
        let out = match plan_final(shard, &snap, id, Some(bytes), sealed.clone(), None)? {
            // The final request id was already applied: another party published this
            // operation under the same id (the row would say Published; be exact anyway).
            Planned::Replay(out) => *out,
            Planned::Command(mut cmd) => {
                push_marks(shard, &snap, id, &sealed, marks, &mut cmd)?;
                cmd.mutations.push(unregister(id));
                push_change(shard, change, &mut cmd);
                if cmd.bounded_mutations() > MAX_COMMAND_MUTATIONS
                    || cmd.predicates.len() > MAX_COMMAND_PREDICATES
                {
                    return Ok(None); // too large for one command: two steps below
                }
                drop(snap);
                seq.execute(*cmd)?
            }
        };
        publish::receipt(out).map(Some)
    })?;
    let receipt = match combined {
        Some(receipt) => receipt,
        None => {
            if get(shard, id)?.is_some_and(|op| op.phase == PublishPhase::Uploading) {
                finalize(shard, id, expected_length, expected_digest_uri, marks)?;
            }
            let receipt = publish_operation(shard, id)?;
            apply_change(shard, change)?;
            return Ok(receipt);
        }
    };
    if receipt.idempotent_replay {
        apply_change(shard, change)?;
    }
    Ok(receipt)
}
