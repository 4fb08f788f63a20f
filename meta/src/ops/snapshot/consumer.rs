//! Consumer attachment: restore's lease on a snapshot (count/epoch and HistoryHold).

use super::rows::{digest, hold_key, receipt, resolve, visible_marker};
use super::state::{
    checked_snapshot, ConsumerParts, SnapshotReceipt, SnapshotSelector, SnapshotStatus,
};
use crate::codec::{CommandResult, HistoryHold, HistoryHoldState, HoldId, SnapshotRef};
use crate::command::executor::check_handle_fences;
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{OperationId, RequestId, SnapshotId, WorkspaceIncarnationId};
use crate::ops::lease_clock::{self, LeaseReading};
use crate::shard::history_floor::SnapshotPolicy;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Builds the parts that attach restore/fork operation `operation_id` as a consumer of snapshot
/// `snapshot_id` of incarnation `inc`, at `snap` (whose version must be the read version of the
/// command the parts go into): predicates on the exact `Active` SnapshotRef, the lease clock of
/// `lease` and an absent HistoryHold(Restore, operation_id); mutations incrementing
/// `consumer_count`/`consumer_epoch` and creating that `Active` hold at the snapshot's read
/// version with `source_snapshot_id`. docs/metadata-format.md, "Restore Closure".
///
/// Errors: [`Error::SnapshotNotFound`]; [`Error::SnapshotExpired`] unless the snapshot is
/// `Active` with a deadline later than the lease clock; [`Error::SnapshotLifecycle`] when the
/// operation is already attached; codec and storage errors.
pub fn attach_consumer_parts<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    inc: &WorkspaceIncarnationId,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    lease: &LeaseReading,
) -> Result<ConsumerParts> {
    let root = shard.root_id();
    let r = resolve(snap, &root, inc, &SnapshotSelector::Id(snapshot_id))?;
    let status = SnapshotStatus::of(&r.record, lease);
    if status != SnapshotStatus::Alive {
        return Err(Error::SnapshotExpired {
            snapshot_id: snapshot_id.get(),
            status: status.as_str(),
        });
    }
    let hkey = hold_key(&root, HoldId::Restore(operation_id));
    if snap.get(Family::HistoryHold, &hkey)?.is_some() {
        return Err(Error::SnapshotLifecycle {
            reason: "the operation already holds this snapshot".into(),
        });
    }
    let cv = snap
        .version()
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;
    let record = checked_snapshot(
        &r.record,
        SnapshotRef {
            consumer_count: r.record.consumer_count.saturating_add(1),
            consumer_epoch: r.record.consumer_epoch.saturating_add(1),
            ..r.record.clone()
        },
    );
    Ok(ConsumerParts {
        predicates: vec![
            Predicate::equals(Family::SnapshotRef, r.key.clone(), r.bytes.clone()),
            Predicate::absent(Family::HistoryHold, hkey.clone()),
            lease.predicate(),
        ],
        mutations: vec![
            Mutation::put(Family::SnapshotRef, r.key.clone(), record.encode()),
            Mutation::put(
                Family::HistoryHold,
                hkey,
                HistoryHold {
                    read_version: r.record.read_version,
                    source_snapshot_id: Some(snapshot_id),
                    state: HistoryHoldState::Active,
                    created_version: cv,
                }
                .encode(),
            ),
        ],
        read_version: r.record.read_version,
        record,
    })
}

/// Builds the parts that release consumer `operation_id` from snapshot `snapshot_id`: predicates
/// on the exact SnapshotRef and the present HistoryHold(Restore, operation_id); mutations
/// decrementing `consumer_count`, incrementing `consumer_epoch` and deleting the hold. Works in
/// any snapshot state (a snapshot with consumers cannot be retired or reaped).
///
/// Errors: [`Error::SnapshotNotFound`]; [`Error::SnapshotLifecycle`] when the operation holds no
/// consumer on it (or the count is already zero); codec and storage errors.
pub fn release_consumer_parts<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    inc: &WorkspaceIncarnationId,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
) -> Result<ConsumerParts> {
    let root = shard.root_id();
    let r = resolve(snap, &root, inc, &SnapshotSelector::Id(snapshot_id))?;
    let hkey = hold_key(&root, HoldId::Restore(operation_id));
    let Some(hold) = snap.get(Family::HistoryHold, &hkey)? else {
        return Err(Error::SnapshotLifecycle {
            reason: "the operation holds no consumer on this snapshot".into(),
        });
    };
    let decoded = HistoryHold::decode(&hold)?;
    if decoded.source_snapshot_id != Some(snapshot_id) || r.record.consumer_count == 0 {
        return Err(Error::SnapshotLifecycle {
            reason: "the operation's hold does not consume this snapshot".into(),
        });
    }
    let record = checked_snapshot(
        &r.record,
        SnapshotRef {
            consumer_count: r.record.consumer_count - 1,
            consumer_epoch: r.record.consumer_epoch.saturating_add(1),
            ..r.record.clone()
        },
    );
    Ok(ConsumerParts {
        predicates: vec![
            Predicate::equals(Family::SnapshotRef, r.key.clone(), r.bytes.clone()),
            Predicate::equals(Family::HistoryHold, hkey.clone(), hold),
        ],
        mutations: vec![
            Mutation::put(Family::SnapshotRef, r.key.clone(), record.encode()),
            Mutation::Delete {
                family: Family::HistoryHold,
                key: hkey,
            },
        ],
        read_version: r.record.read_version,
        record,
    })
}

pub(super) fn consumer_command(
    shard: &MetaShard,
    workbench_id: &str,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    attach: bool,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    let root = shard.root_id();
    crate::ops::sequenced_retrying(shard, |seq| {
        let lease = lease_clock::observe_in(shard, seq, wall_unix_ms, policy.skew_grace_ms)?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let (_, ws) = visible_marker(&snap, &root, workbench_id, shard.wall_unix_ms())?;
        let parts = if attach {
            attach_consumer_parts(
                shard,
                &snap,
                &ws.incarnation,
                snapshot_id,
                operation_id,
                &lease,
            )?
        } else {
            release_consumer_parts(shard, &snap, &ws.incarnation, snapshot_id, operation_id)?
        };
        let digest = digest(
            b"nokv.snapshot.consumer.v1\0",
            &[
                &[u8::from(attach)],
                &snapshot_id.get().to_be_bytes(),
                operation_id.as_bytes(),
                &snap.version().to_be_bytes(),
            ],
        );
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id,
                snapshot: parts.record,
            },
        );
        cmd.predicates = parts.predicates;
        cmd.mutations = parts.mutations;
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}

/// Attaches `operation_id` as a restore/fork consumer of a snapshot of `workbench_id` in its own
/// command (see [`attach_consumer_parts`]; a restore normally splices the parts into its
/// preparing command instead).
///
/// Errors: those of [`attach_consumer_parts`], plus [`Error::WorkspaceNotFound`],
/// [`Error::ReadVersionConflict`] and [`Error::Fenced`].
pub fn attach_consumer(
    shard: &MetaShard,
    workbench_id: &str,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    consumer_command(
        shard,
        workbench_id,
        snapshot_id,
        operation_id,
        true,
        wall_unix_ms,
        policy,
    )
}

/// Releases consumer `operation_id` from a snapshot of `workbench_id` in its own command (see
/// [`release_consumer_parts`]).
///
/// Errors: those of [`release_consumer_parts`], plus [`Error::WorkspaceNotFound`],
/// [`Error::ReadVersionConflict`] and [`Error::Fenced`].
pub fn release_consumer(
    shard: &MetaShard,
    workbench_id: &str,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    consumer_command(
        shard,
        workbench_id,
        snapshot_id,
        operation_id,
        false,
        wall_unix_ms,
        policy,
    )
}

// ---------------------------------------------------------------------------------------------
// Invariants
