//! `Active -> Active`: extend-only lease renewal.

use super::rows::{
    alias_rows, digest, hold_key, receipt, resolve, selector_bytes, snapshot_event, validate_ttl,
    visible_marker,
};
use super::state::{checked_snapshot, RenewSnapshotRequest, SnapshotReceipt};
use crate::codec::{ChangeKind, CommandResult, HoldId, SnapshotRef, SnapshotState};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ops::lease_clock;
use crate::shard::history_floor::SnapshotPolicy;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Extends the lease of the selected snapshot to `lease clock now + ttl_ms` (extend-only; may
/// revive an expired but unclaimed snapshot).
///
/// Errors: [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`];
/// [`Error::SnapshotExpired`] (`reaped`) after the reaper's claim; [`Error::SnapshotLifecycle`]
/// for a retired snapshot or a deadline that would move earlier; [`Error::InvalidArgument`];
/// [`Error::ReadVersionConflict`]; [`Error::Fenced`]; codec and storage errors.
pub fn renew(
    shard: &MetaShard,
    req: &RenewSnapshotRequest,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    validate_ttl(req.ttl_ms)?;
    let digest = digest(
        b"nokv.snapshot.renew.v1\0",
        &[
            req.workbench_id.as_bytes(),
            &selector_bytes(&req.selector),
            &req.ttl_ms.to_be_bytes(),
        ],
    );
    let root = shard.root_id();
    crate::ops::sequenced_retrying(shard, |seq| {
        let lease = lease_clock::observe_in(shard, seq, wall_unix_ms, policy.skew_grace_ms)?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        if let Some(out) = replay_lookup(&snap, &root, &req.request_id, &digest)? {
            return receipt(out);
        }
        let (_, ws) = visible_marker(&snap, &root, &req.workbench_id, shard.wall_unix_ms())?;
        let r = resolve(&snap, &root, &ws.incarnation, &req.selector)?;
        match r.record.state {
            SnapshotState::Active => {}
            SnapshotState::ReapClaimed | SnapshotState::Reaped => {
                return Err(Error::SnapshotExpired {
                    snapshot_id: r.id.get(),
                    status: "reaped",
                })
            }
            SnapshotState::Retired => {
                return Err(Error::SnapshotLifecycle {
                    reason: "the snapshot was retired and cannot be renewed".into(),
                })
            }
        }
        let deadline = lease.now_unix_ms().saturating_add(req.ttl_ms);
        if deadline < r.record.lease_deadline_unix_ms {
            return Err(Error::SnapshotLifecycle {
                reason: "renewal is extend-only: the requested lease ends before the current one"
                    .into(),
            });
        }
        let record = checked_snapshot(
            &r.record,
            SnapshotRef {
                lease_deadline_unix_ms: deadline,
                ..r.record.clone()
            },
        );
        let (mut predicates, _) = alias_rows(&r, None);
        predicates.push(Predicate::equals(
            Family::SnapshotRef,
            r.key.clone(),
            r.bytes.clone(),
        ));
        predicates.push(Predicate::equals(
            Family::HistoryHold,
            hold_key(&root, HoldId::Snapshot(r.id)),
            snap.get(
                Family::HistoryHold,
                &hold_key(&root, HoldId::Snapshot(r.id)),
            )?
            .ok_or_else(|| Error::codec("history_hold", "active snapshot without its hold"))?,
        ));
        predicates.push(lease.predicate());
        let read_version = snap.version();
        let mut cmd = shard.command_header(
            req.request_id,
            digest,
            read_version,
            CommandResult::SnapshotLifecycle {
                snapshot_id: r.id,
                snapshot: record.clone(),
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = vec![Mutation::put(
            Family::SnapshotRef,
            r.key.clone(),
            record.encode(),
        )];
        cmd.event_projection = vec![snapshot_event(
            &req.workbench_id,
            ws.incarnation,
            ChangeKind::SnapshotRenewed,
            r.id,
        )];
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}
