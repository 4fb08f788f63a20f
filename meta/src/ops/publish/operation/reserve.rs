//! Revision reservations: block keys owned ahead of the puts that will use them, so a small put
//! publishes with ONE metadata command after its object is durable (docs/metadata-format.md,
//! "Upload And Append", "Revision reservations").
//!
//! ```text
//! reserve           -> Operation(Reserve) with up to 32 (revision id, block-0 key) pairs and
//!                      its pending-registry row, in one command; the caller sends no byte
//!                      under a key before this command is durable                [reserve]
//! publish_reserved  -> after the block is durable under a reserved key: ONE command creates
//!                      the Publish operation directly as Published (its one StagedObject row
//!                      Uploaded) together with the publication, predicated on the reservation
//!                      row being unchanged                                    [publish_reserved]
//! retire            -> the reservation row and its registry row are deleted once every
//!                      revision it holds is published or its object deleted     [retire]
//! sweep (recovery)  -> for a reservation left by a dead process: every revision without an
//!                      ArtifactRevision row has its object deleted, then the row is retired
//! ```
//!
//! A reserved revision id is used by at most one put. Its key is owned by the reservation from
//! the reservation command on, and by the revision's manifest from its publication on; between
//! the two no other party can own it (revision ids are fresh and never reused), so the sweep's
//! rule "no ArtifactRevision row → delete the object" is exact for a reservation whose owner is
//! gone.

use super::begin::{fresh_operation, staged_row, validate_block, validate_intent};
use super::final_request::{plan_final, stored_receipt};
use super::ledger::{ledger_digest, op_key, read_op, staged_key, state_error};
use super::state::{PublishIntent, StagedBlock};
use crate::codec::system::{
    decode_pending_operation_key, decode_pending_operation_value, pending_operation_key,
    pending_operation_prefix, PENDING_OPERATION_VALUE,
};
use crate::codec::{
    CommandResult, Operation, OperationKey, OperationKind, PublishPhase, ReserveOperation,
    ReservePhase, ReservedRevision, StagedProviderState, MAX_RESERVED_REVISIONS,
};
use crate::command::executor::check_handle_fences;
use crate::command::{MetadataCommand, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{OperationId, RequestId};
use crate::ops::publish::{self, checked_publish, Planned, PublishReceipt};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// A live revision reservation (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The reservation's operation id.
    pub id: OperationId,
    /// The reserved revisions and their block-0 keys.
    pub revisions: Vec<ReservedRevision>,
}

fn reserve_key(shard: &MetaShard, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: shard.root_id(),
        kind: OperationKind::Reserve,
        operation_id: *id,
    }
    .encode()
}

fn header(
    shard: &MetaShard,
    read_version: u64,
    step: &[u8],
    id: &OperationId,
    phase: ReservePhase,
) -> Result<MetadataCommand> {
    Ok(shard.command_header(
        RequestId::random()?,
        ledger_digest(step, id, &[]),
        read_version,
        CommandResult::OperationRecorded {
            kind: OperationKind::Reserve,
            operation_id: *id,
            phase: phase.to_u8(),
        },
    ))
}

fn retire_mutations(shard: &MetaShard, id: &OperationId, cmd: &mut MetadataCommand) {
    cmd.mutations.push(Mutation::Delete {
        family: Family::Operation,
        key: reserve_key(shard, id),
    });
    cmd.mutations.push(Mutation::Delete {
        family: Family::System,
        key: pending_operation_key(OperationKind::Reserve, id),
    });
}

/// A change of the reservations carried by a publication command (so a refill costs no commit
/// of its own): write `reserve` (new, its key must be absent) and retire `retire` (the caller
/// vouches that each of their revisions is published or its object deleted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReservationChange {
    /// A new reservation to write.
    pub reserve: Option<Reservation>,
    /// Reservations to delete, at most 8.
    pub retire: Vec<OperationId>,
}

impl ReservationChange {
    /// True when the change writes nothing.
    pub fn is_empty(&self) -> bool {
        self.reserve.is_none() && self.retire.is_empty()
    }
}

fn validate_revisions(revisions: &[ReservedRevision]) -> Result<()> {
    if revisions.is_empty() || revisions.len() > MAX_RESERVED_REVISIONS {
        return Err(Error::invalid(format!(
            "a reservation holds 1..={MAX_RESERVED_REVISIONS} revisions"
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for r in revisions {
        if !seen.insert(r.revision) {
            return Err(Error::invalid("a revision is reserved twice"));
        }
        if r.object_key.is_empty() || r.object_key.len() > publish::MAX_OBJECT_KEY_BYTES {
            return Err(Error::invalid("reserved object_key must be 1..=1024 bytes"));
        }
    }
    Ok(())
}

/// Checks a [`ReservationChange`]. Errors: [`Error::InvalidArgument`].
pub(super) fn validate_change(change: &ReservationChange) -> Result<()> {
    if change.retire.len() > 8 {
        return Err(Error::invalid(
            "at most 8 reservations retire in one command",
        ));
    }
    match &change.reserve {
        Some(r) => validate_revisions(&r.revisions),
        None => Ok(()),
    }
}

/// Adds the predicates and mutations of `change` to `cmd`.
pub(super) fn push_change(
    shard: &MetaShard,
    change: &ReservationChange,
    cmd: &mut MetadataCommand,
) {
    if let Some(r) = &change.reserve {
        let key = reserve_key(shard, &r.id);
        cmd.predicates
            .push(Predicate::absent(Family::Operation, key.clone()));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key,
            Operation::Reserve(ReserveOperation {
                revisions: r.revisions.clone(),
            })
            .encode(),
        ));
        cmd.mutations.push(Mutation::put(
            Family::System,
            pending_operation_key(OperationKind::Reserve, &r.id),
            PENDING_OPERATION_VALUE.to_vec(),
        ));
    }
    for old in &change.retire {
        retire_mutations(shard, old, cmd);
    }
}

/// Runs `change` as a command of its own, recorded as `step` / `phase` (nothing to do: no
/// command).
fn run_change(
    shard: &MetaShard,
    change: &ReservationChange,
    step: &[u8],
    phase: ReservePhase,
) -> Result<()> {
    validate_change(change)?;
    let Some(id) = change
        .reserve
        .as_ref()
        .map(|r| r.id)
        .or_else(|| change.retire.first().copied())
    else {
        return Ok(());
    };
    crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let mut cmd = header(shard, snap.version(), step, &id, phase)?;
        drop(snap);
        push_change(shard, change, &mut cmd);
        seq.execute(cmd).map(|_| ())
    })
}

/// Applies `change` in a command of its own (a publication that carried it was answered from
/// its stored receipt, or fell back to two steps).
///
/// Errors: [`Error::InvalidArgument`]; fence, codec and storage errors.
pub fn apply_change(shard: &MetaShard, change: &ReservationChange) -> Result<()> {
    run_change(shard, change, b"change", ReservePhase::Reserved)
}

/// Writes a new reservation of `revisions` (1..=[`MAX_RESERVED_REVISIONS`] distinct revision
/// ids, each with the provider key of its object index 0) in one command, and retires the
/// reservations `retire` in the same command (their row and registry row deleted; the caller
/// vouches that each of their revisions is published or its object deleted). Returns the new
/// reservation. No byte may be sent under a reserved key before this returns.
///
/// Errors: [`Error::InvalidArgument`] (no revision, too many, duplicates, a bad key, more than
/// 8 reservations to retire); fence, codec and storage errors.
pub fn reserve(
    shard: &MetaShard,
    revisions: Vec<ReservedRevision>,
    retire: &[OperationId],
) -> Result<Reservation> {
    let reservation = Reservation {
        id: OperationId::random()?,
        revisions,
    };
    let change = ReservationChange {
        reserve: Some(reservation.clone()),
        retire: retire.to_vec(),
    };
    run_change(shard, &change, b"reserve", ReservePhase::Reserved)?;
    Ok(reservation)
}

/// Deletes the reservations `ids` (at most 8) and their registry rows in one command (absent
/// ones: nothing to do, and no command when none is present). The caller vouches that each of
/// their revisions is published or its object deleted.
///
/// Errors: [`Error::InvalidArgument`] (more than 8); fence, codec and storage errors.
pub fn retire(shard: &MetaShard, ids: &[OperationId]) -> Result<()> {
    if ids.len() > 8 {
        return Err(Error::invalid(
            "at most 8 reservations retire in one command",
        ));
    }
    let snap = shard.inner.store.snapshot();
    let mut present = Vec::new();
    for id in ids {
        if snap
            .get(Family::Operation, &reserve_key(shard, id))?
            .is_some()
        {
            present.push(*id);
        }
    }
    drop(snap);
    let change = ReservationChange {
        reserve: None,
        retire: present,
    };
    run_change(shard, &change, b"retire", ReservePhase::Retired)
}

/// Every live reservation of the root, found through the pending-operation registry: cost
/// O(live reservations), independent of the publications ever made.
///
/// Errors: [`Error::Codec`] for a malformed registry row or one naming no reservation; storage
/// errors.
pub fn list_reservations(shard: &MetaShard) -> Result<Vec<Reservation>> {
    let snap = shard.inner.store.snapshot();
    let mut ids = Vec::new();
    snap.for_each_row(
        Family::System,
        &pending_operation_prefix(OperationKind::Reserve),
        "system",
        |key, value| {
            let (_, id) = decode_pending_operation_key(key)?;
            decode_pending_operation_value(value)?;
            ids.push(id);
            Ok(())
        },
    )?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(bytes) = snap.get(Family::Operation, &reserve_key(shard, &id))? else {
            return Err(Error::codec(
                "system",
                format!("pending-operation registry names missing reservation {id}"),
            ));
        };
        match Operation::decode_for_kind(OperationKind::Reserve, &bytes)? {
            Operation::Reserve(r) => out.push(Reservation {
                id,
                revisions: r.revisions,
            }),
            _ => return Err(Error::codec("operation", "non-reserve value")),
        }
    }
    Ok(out)
}

/// Publishes a one-block body whose block is durable under a reserved key, in ONE command: the
/// Publish operation `intent.operation_id` (which must not exist yet) is created directly as
/// Published with one StagedObject row (Uploaded) for `block`, together with everything the
/// final publication command writes (docs/metadata-format.md, "Revision reservations"). The
/// command predicates the reservation row unchanged, so a reservation swept by recovery can no
/// longer publish. `intent.revision_id` must be one of the reservation's revisions and
/// `block.object_key` its key; `intent` has no append base. The body is the block:
/// `body_digest_uri` is the block's digest. The same command applies `change` (a refill of the
/// caller's pool, retirements), and only when it publishes.
///
/// Outcomes: the receipt; a refusal (the publication errors of [`publish_operation`]:
/// [`Error::PathAlreadyExists`], [`Error::GenerationConflict`], …) commits nothing and the
/// caller deletes its object; an operation already Published under this id returns its stored
/// receipt (`idempotent_replay = true`).
///
/// Errors: [`Error::InvalidArgument`] (a revision or key not in the reservation, an append
/// intent, a bad block); [`Error::OperationState`] (the reservation is gone — swept — or the
/// operation exists in another phase); the publication errors; fence, codec and storage errors.
///
/// [`publish_operation`]: super::publish_operation
pub fn publish_reserved(
    shard: &MetaShard,
    reservation: &OperationId,
    intent: &PublishIntent,
    block: &StagedBlock,
    change: &ReservationChange,
) -> Result<PublishReceipt> {
    validate_intent(intent)?;
    validate_block(block)?;
    validate_change(change)?;
    if intent.base.is_some() {
        return Err(Error::invalid("a reserved publication has no append base"));
    }
    let id = intent.operation_id;
    let rkey = reserve_key(shard, reservation);
    let key = op_key(shard, &id);
    crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        if let Some((_, op)) = read_op(&snap, &key)? {
            if op.phase == PublishPhase::Published && op.intent_digest == intent.intent_digest {
                return stored_receipt(shard, &snap, &id);
            }
            return Err(state_error(
                &id,
                Some(op.phase),
                "a reserved publication creates its operation",
            ));
        }
        let Some(rbytes) = snap.get(Family::Operation, &rkey)? else {
            return Err(Error::OperationState {
                operation_id: reservation.to_hex(),
                phase: "absent".into(),
                wanted: "a live revision reservation".into(),
            });
        };
        let Operation::Reserve(r) = Operation::decode_for_kind(OperationKind::Reserve, &rbytes)?
        else {
            return Err(Error::codec("operation", "non-reserve value"));
        };
        if !r
            .revisions
            .iter()
            .any(|x| x.revision == intent.revision_id && x.object_key == block.object_key)
        {
            return Err(Error::invalid(
                "the revision and its key are not held by this reservation",
            ));
        }
        // The record the final command writes as Published: Uploading -> Finalizing in memory,
        // so the invariants are checked step by step; no intermediate row is ever written.
        let uploading = fresh_operation(intent, 1, 0)?;
        let mut sealed = uploading.clone();
        sealed.phase = PublishPhase::Finalizing;
        sealed.expected_length = block.length;
        sealed.expected_digest_uri = Some(block.digest_uri.clone());
        let sealed = checked_publish(&uploading, sealed);
        let mut row = staged_row(intent.revision_id, block);
        row.provider_state = StagedProviderState::Uploaded;
        let out = match plan_final(shard, &snap, &id, None, sealed, Some(vec![row.clone()]))? {
            Planned::Replay(out) => *out,
            Planned::Command(mut cmd) => {
                cmd.mutations.push(Mutation::put(
                    Family::StagedObject,
                    staged_key(shard, &id, 0),
                    row.encode(),
                ));
                cmd.predicates
                    .push(Predicate::equals(Family::Operation, rkey.clone(), rbytes));
                push_change(shard, change, &mut cmd);
                drop(snap);
                seq.execute(*cmd)?
            }
        };
        publish::receipt(out)
    })
    .and_then(|receipt| {
        if receipt.idempotent_replay {
            apply_change(shard, change)?;
        }
        Ok(receipt)
    })
}
