//! The reaper: expired leases claimed and finalized in bounded commands.

use super::read::scan_all;
use super::rows::{alias_rows, digest, hold_key, resolved_by_id, snapshot_event};
use super::state::{checked_snapshot, ReapReport};
use crate::codec::{
    snapshot_ref::SnapshotRefKey, workspace_incarnation_claim, ChangeKind, CommandResult, HoldId,
    SnapshotRef, SnapshotState, WorkspaceIncarnationClaim,
};
use crate::command::executor::check_handle_fences;
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{RequestId, RootId, WorkspaceIncarnationId};
use crate::ops::lease_clock::{self, LeaseReading};
use crate::shard::history_floor::{maintain_history_floor, SnapshotPolicy};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// One reaper pass at wall clock `wall_unix_ms`: observes the lease clock, claims every
/// reapable snapshot of the root (`Active -> ReapClaimed`, hold released, `SnapshotReaped`
/// event), finalizes claimed ones to `Reaped`, then maintains the history floor. A regressed
/// wall clock claims nothing (see [`LeaseReading::may_reap`]).
///
/// Errors: [`Error::Fenced`]; codec and storage errors. Per-snapshot CAS losses are skipped
/// (the next pass re-evaluates them).
pub fn reap(shard: &MetaShard, wall_unix_ms: u64, policy: &SnapshotPolicy) -> Result<ReapReport> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let rows = scan_all(&snap, Family::SnapshotRef, root.as_bytes().to_vec())?;
    let mut live = false;
    for (_, bytes) in &rows {
        let state = SnapshotRef::decode(bytes)?.state;
        live |= matches!(state, SnapshotState::Active | SnapshotState::ReapClaimed);
    }
    // The lease clock is observed (a durable command) only when a lease can be acted on; with
    // no live snapshot a read-only reading suffices, so opening a store without snapshots writes
    // nothing for the reaper.
    let lease = if live {
        drop(snap);
        lease_clock::observe(shard, wall_unix_ms, policy.skew_grace_ms)?
    } else {
        let reading = lease_clock::peek(&snap, wall_unix_ms, policy.skew_grace_ms)?;
        drop(snap);
        reading
    };
    let mut report = ReapReport {
        clock_regressed: lease.regressed(),
        ..ReapReport::default()
    };
    for (key, bytes) in rows {
        let k = SnapshotRefKey::decode(&key)?;
        let record = SnapshotRef::decode(&bytes)?;
        match record.state {
            SnapshotState::Active if lease.may_reap(record.lease_deadline_unix_ms) => {
                if record.consumer_count > 0 {
                    report.skipped_with_consumers += 1;
                    continue;
                }
                match claim(shard, &k, &lease) {
                    Ok(Some(wb)) => report.claimed.push((wb, k.snapshot_id)),
                    Ok(None) => {}
                    Err(Error::ReadVersionConflict { .. }) | Err(Error::CommandPredicateFailed) => {
                    }
                    Err(e) => return Err(e),
                }
                if finalize(shard, &k)? {
                    report.finalized += 1;
                }
            }
            SnapshotState::ReapClaimed if finalize(shard, &k)? => report.finalized += 1,
            _ => {}
        }
    }
    report.history_floor = maintain_history_floor(shard, policy)?;
    Ok(report)
}

pub(super) fn workbench_of<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
) -> Result<String> {
    let b = snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &workspace_incarnation_claim::key(root, inc),
        )?
        .ok_or_else(|| {
            Error::codec(
                "workspace_incarnation_claim",
                "snapshot of an unclaimed incarnation",
            )
        })?;
    Ok(WorkspaceIncarnationClaim::decode(&b)?.workbench_id)
}

/// Claims one snapshot (`Active -> ReapClaimed`, hold deleted) if it is still reapable at a fresh
/// snapshot. Returns its workbench id when this call claimed it.
pub(super) fn claim(
    shard: &MetaShard,
    k: &SnapshotRefKey,
    lease: &LeaseReading,
) -> Result<Option<String>> {
    let root = shard.root_id();
    crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let key = k.encode();
        let Some(bytes) = snap.get(Family::SnapshotRef, &key)? else {
            return Ok(None);
        };
        let record = SnapshotRef::decode(&bytes)?;
        if record.state != SnapshotState::Active
            || record.consumer_count > 0
            || !lease.may_reap(record.lease_deadline_unix_ms)
        {
            return Ok(None);
        }
        let workbench_id = workbench_of(&snap, &root, &k.incarnation)?;
        let r = resolved_by_id(&snap, &root, k, &key, &bytes, &record)?;
        let next = checked_snapshot(
            &r.record,
            SnapshotRef {
                state: SnapshotState::ReapClaimed,
                ..record
            },
        );
        let (mut predicates, mut mutations) = alias_rows(&r, Some(SnapshotState::ReapClaimed));
        let hkey = hold_key(&root, HoldId::Snapshot(k.snapshot_id));
        match snap.get(Family::HistoryHold, &hkey)? {
            Some(h) => {
                predicates.push(Predicate::equals(Family::HistoryHold, hkey.clone(), h));
                mutations.push(Mutation::Delete {
                    family: Family::HistoryHold,
                    key: hkey,
                });
            }
            None => predicates.push(Predicate::absent(Family::HistoryHold, hkey)),
        }
        predicates.push(Predicate::equals(Family::SnapshotRef, key.clone(), bytes));
        predicates.push(lease.predicate());
        mutations.push(Mutation::put(Family::SnapshotRef, key, next.encode()));
        let digest = digest(
            b"nokv.snapshot.reap_claim.v1\0",
            &[&k.encode(), &snap.version().to_be_bytes()],
        );
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id: k.snapshot_id,
                snapshot: next,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![snapshot_event(
            &workbench_id,
            k.incarnation,
            ChangeKind::SnapshotReaped,
            k.snapshot_id,
        )];
        drop(snap);
        seq.execute(cmd)?;
        Ok(Some(workbench_id))
    })
}

/// `ReapClaimed -> Reaped` (terminal), alias projection updated. Returns whether it wrote.
pub(super) fn finalize(shard: &MetaShard, k: &SnapshotRefKey) -> Result<bool> {
    let root = shard.root_id();
    crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let key = k.encode();
        let Some(bytes) = snap.get(Family::SnapshotRef, &key)? else {
            return Ok(false);
        };
        let record = SnapshotRef::decode(&bytes)?;
        if record.state != SnapshotState::ReapClaimed {
            return Ok(false);
        }
        let r = resolved_by_id(&snap, &root, k, &key, &bytes, &record)?;
        let next = checked_snapshot(
            &r.record,
            SnapshotRef {
                state: SnapshotState::Reaped,
                ..record
            },
        );
        let (mut predicates, mut mutations) = alias_rows(&r, Some(SnapshotState::Reaped));
        predicates.push(Predicate::equals(Family::SnapshotRef, key.clone(), bytes));
        mutations.push(Mutation::put(Family::SnapshotRef, key, next.encode()));
        let digest = digest(
            b"nokv.snapshot.reap_finalize.v1\0",
            &[&k.encode(), &snap.version().to_be_bytes()],
        );
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id: k.snapshot_id,
                snapshot: next,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        drop(snap);
        seq.execute(cmd)?;
        Ok(true)
    })
}

// ---------------------------------------------------------------------------------------------
// Consumers (restore / fork)
