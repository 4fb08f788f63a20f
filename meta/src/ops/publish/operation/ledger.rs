//! The StagedObject ledger and the pending-operation registry: keys, reads, listings and the ledger command header.

use super::state::{final_request_id, ListedOperation, LEDGER_DIGEST_DOMAIN};
use crate::codec::system::{
    decode_pending_operation_key, pending_operation_key, pending_operation_prefix,
    PENDING_OPERATION_VALUE,
};
use crate::codec::{
    command_dedupe, CommandResult, Operation, OperationKey, OperationKind, PublishOperation,
    PublishPhase, StagedObject, StagedObjectKey,
};
use crate::command::{MetadataCommand, Mutation};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{OperationId, RequestId};
use crate::ops::publish::{self, PublishReceipt};
use crate::ops::Step;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};
use sha2::{Digest, Sha256};

pub(super) fn op_key(shard: &MetaShard, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: shard.root_id(),
        kind: OperationKind::Publish,
        operation_id: *id,
    }
    .encode()
}

pub(super) fn staged_key(shard: &MetaShard, id: &OperationId, seq: u64) -> Vec<u8> {
    StagedObjectKey {
        root: shard.root_id(),
        publish_operation_id: *id,
        object_sequence: seq,
    }
    .encode()
}

/// The registry row insert of operation `id` (see the module docs).
pub(super) fn register(id: &OperationId) -> Mutation {
    Mutation::put(
        Family::System,
        pending_operation_key(OperationKind::Publish, id),
        PENDING_OPERATION_VALUE.to_vec(),
    )
}

/// The registry row delete of operation `id` (see the module docs).
pub(super) fn unregister(id: &OperationId) -> Mutation {
    Mutation::Delete {
        family: Family::System,
        key: pending_operation_key(OperationKind::Publish, id),
    }
}

pub(super) fn phase_name(phase: PublishPhase) -> String {
    format!("{phase:?}")
}

pub(super) fn state_error(id: &OperationId, phase: Option<PublishPhase>, wanted: &str) -> Error {
    Error::OperationState {
        operation_id: id.to_hex(),
        phase: phase.map_or_else(|| "absent".to_owned(), phase_name),
        wanted: wanted.to_owned(),
    }
}

/// Reads the Publish operation row at `key` and requires it to be Uploading: `(bytes, record)`.
/// Errors: [`Error::OperationState`] naming `wanted` when it is absent or in another phase.
pub(super) fn read_uploading<S: Snapshot>(
    snap: &S,
    key: &[u8],
    id: &OperationId,
    wanted: &str,
) -> Result<(Vec<u8>, PublishOperation)> {
    match read_op(snap, key)? {
        Some((bytes, op)) if op.phase == PublishPhase::Uploading => Ok((bytes, op)),
        Some((_, op)) => Err(state_error(id, Some(op.phase), wanted)),
        None => Err(state_error(id, None, wanted)),
    }
}

/// Reads and decodes one Publish operation row at `snap`: `(bytes, record)`.
pub(super) fn read_op<S: Snapshot>(
    snap: &S,
    key: &[u8],
) -> Result<Option<(Vec<u8>, PublishOperation)>> {
    let Some(bytes) = snap.get(Family::Operation, key)? else {
        return Ok(None);
    };
    match Operation::decode_for_kind(OperationKind::Publish, &bytes)? {
        Operation::Publish(op) => Ok(Some((bytes, op))),
        _ => Err(Error::codec(
            "operation",
            "non-publish value under a publish key",
        )),
    }
}

/// The Publish operation `id`, if any (one point read at the current version).
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn get(shard: &MetaShard, id: &OperationId) -> Result<Option<PublishOperation>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_op(&snap, &op_key(shard, id))?.map(|(_, op)| op))
}

/// The non-terminal Publish operations, in operation-id order, found through the
/// pending-operation registry (see the module docs): one bounded System scan per 255 registry
/// rows plus one point read of each operation at the current version. Cost O(non-terminal
/// operations), independent of the terminal operations retained forever. An operation that
/// became terminal between the scan and its read is returned with its terminal phase (callers
/// skip it).
///
/// Errors: [`Error::Codec`] for a malformed registry row or one naming no operation; storage
/// errors.
pub fn list_pending(shard: &MetaShard) -> Result<Vec<ListedOperation>> {
    let prefix = pending_operation_prefix(OperationKind::Publish);
    let mut ids = Vec::new();
    shard.inner.store.snapshot().for_each_row(
        Family::System,
        &prefix,
        "system",
        |key, value| {
            let (_, id) = decode_pending_operation_key(key)?;
            crate::codec::system::decode_pending_operation_value(value)?;
            ids.push(id);
            Ok(())
        },
    )?;
    // The registry row and the Operation row change in one command and Operation rows are
    // never deleted, so a fresh read always finds the operation.
    let snap = shard.inner.store.snapshot();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some((_, operation)) = read_op(&snap, &op_key(shard, &id))? else {
            return Err(Error::codec(
                "system",
                format!("pending-operation registry names missing operation {id}"),
            ));
        };
        out.push(ListedOperation {
            operation_id: id,
            operation,
        });
    }
    Ok(out)
}

/// Every Publish operation of the root in operation-id order (bounded scans of ≤255 rows; cost
/// O(number of Publish operations ever begun — terminal rows are retained, docs/metadata-format.md). Recovery
/// uses [`list_pending`] instead.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn list(shard: &MetaShard) -> Result<Vec<ListedOperation>> {
    let snap = shard.inner.store.snapshot();
    let mut prefix = shard.root_id().as_bytes().to_vec();
    prefix.push(OperationKind::Publish.to_u8());
    let mut out = Vec::new();
    snap.for_each_row(Family::Operation, &prefix, "operation", |key, value| {
        let k = OperationKey::decode(key)?;
        match Operation::decode_for_kind(OperationKind::Publish, value)? {
            Operation::Publish(op) => out.push(ListedOperation {
                operation_id: k.operation_id,
                operation: op,
            }),
            _ => return Err(Error::codec("operation", "non-publish value")),
        }
        Ok(())
    })?;
    Ok(out)
}

/// Every StagedObject row of operation `id` as `(object_sequence, row)`, in sequence order.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn ledger(shard: &MetaShard, id: &OperationId) -> Result<Vec<(u64, StagedObject)>> {
    let snap = shard.inner.store.snapshot();
    ledger_at(shard, &snap, id)
}

pub(super) fn ledger_at<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
) -> Result<Vec<(u64, StagedObject)>> {
    let mut prefix = shard.root_id().as_bytes().to_vec();
    prefix.extend_from_slice(id.as_bytes());
    let mut out = Vec::new();
    snap.for_each_row(
        Family::StagedObject,
        &prefix,
        "staged_object",
        |key, value| {
            let k = StagedObjectKey::decode(key)?;
            out.push((k.object_sequence, StagedObject::decode(value)?));
            Ok(())
        },
    )?;
    Ok(out)
}

/// The stored receipt of a published operation (the CommandDedupe row of its
/// [`final_request_id`], with `idempotent_replay = true`), or `None` while it is not published.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn published_receipt(shard: &MetaShard, id: &OperationId) -> Result<Option<PublishReceipt>> {
    published_receipt_at(shard, &shard.inner.store.snapshot(), id)
}

/// [`published_receipt`] at `snap`.
pub(super) fn published_receipt_at<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
) -> Result<Option<PublishReceipt>> {
    let key = command_dedupe::key(&shard.root_id(), &final_request_id(id));
    let Some(bytes) = snap.get(Family::CommandDedupe, &key)? else {
        return Ok(None);
    };
    let stored = crate::codec::CommandDedupe::decode(&bytes)?;
    publish::receipt(crate::command::CommandOutcome {
        commit_version: stored.commit_version,
        result: stored.result,
        idempotent_replay: true,
        recovery_lsn: stored.recovery_lsn,
    })
    .map(Some)
}

pub(super) fn ledger_digest(step: &[u8], id: &OperationId, detail: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(LEDGER_DIGEST_DOMAIN);
    h.update((step.len() as u64).to_be_bytes());
    h.update(step);
    h.update(id.as_bytes());
    h.update((detail.len() as u64).to_be_bytes());
    h.update(detail);
    h.finalize().into()
}

/// Runs a ledger step through [`crate::ops::run_step`], handing `plan` the snapshot's read version.
pub(super) fn run<T>(
    shard: &MetaShard,
    mut plan: impl FnMut(&crate::store::ShardSnapshot, u64) -> Result<Step<T>>,
) -> Result<T> {
    crate::ops::run_step(shard, |snap| plan(snap, snap.version()))
}

pub(super) fn command(
    shard: &MetaShard,
    read_version: u64,
    digest: [u8; 32],
    id: &OperationId,
    phase: PublishPhase,
) -> Result<MetadataCommand> {
    Ok(shard.command_header(
        RequestId::random()?,
        digest,
        read_version,
        CommandResult::OperationRecorded {
            kind: OperationKind::Publish,
            operation_id: *id,
            phase: phase.to_u8(),
        },
    ))
}
