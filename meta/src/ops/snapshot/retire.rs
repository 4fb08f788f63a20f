//! `Active -> Retiring -> Retired`: explicit retirement.

use super::rows::{
    alias_rows, digest, hold_key, receipt, resolve, selector_bytes, snapshot_event, visible_marker,
};
use super::state::{
    checked_snapshot, RetireSnapshotRequest, SnapshotReceipt, MAX_ANNOTATION_BYTES,
};
use crate::codec::{ChangeKind, CommandResult, HoldId, SnapshotRef, SnapshotState};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::shard::history_floor::SnapshotPolicy;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Retires the selected snapshot (retirement does not depend on the lease clock; `wall_unix_ms`
/// and `policy` keep the lifecycle calls uniform): `Active -> Retired` with zero consumers at the
/// expected epoch, its hold released, and the request's retire annotation stored in the same
/// SnapshotRef row (value version 2). Retiring an already retired snapshot writes nothing and
/// returns `changed = false` with the stored record — the *first* retirement's annotation, never
/// the retry's.
///
/// Errors: [`Error::InvalidArgument`] for an annotation over [`MAX_ANNOTATION_BYTES`];
/// [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`];
/// [`Error::ForkRetentionActive`] while restore/fork consumers hold it;
/// [`Error::SnapshotExpired`] (`reaped`) after the reaper's claim; [`Error::ReadVersionConflict`];
/// [`Error::Fenced`]; codec and storage errors.
pub fn retire(
    shard: &MetaShard,
    req: &RetireSnapshotRequest,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    let _ = (wall_unix_ms, policy);
    if req
        .annotation
        .as_ref()
        .is_some_and(|a| a.len() > MAX_ANNOTATION_BYTES)
    {
        return Err(Error::invalid(format!(
            "retire annotation is longer than {MAX_ANNOTATION_BYTES} bytes"
        )));
    }
    // A request without an annotation keeps its original digest.
    let selector = selector_bytes(&req.selector);
    let mut parts: Vec<&[u8]> = vec![req.workbench_id.as_bytes(), &selector];
    if let Some(a) = &req.annotation {
        parts.push(b"retire_annotation");
        parts.push(a);
    }
    let digest = digest(b"nokv.snapshot.retire.v1\0", &parts);
    let root = shard.root_id();
    crate::ops::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        if let Some(out) = replay_lookup(&snap, &root, &req.request_id, &digest)? {
            return receipt(out);
        }
        let (_, ws) = visible_marker(&snap, &root, &req.workbench_id, shard.wall_unix_ms())?;
        let r = resolve(&snap, &root, &ws.incarnation, &req.selector)?;
        match r.record.state {
            SnapshotState::Active => {}
            SnapshotState::Retired => {
                return Ok(SnapshotReceipt {
                    snapshot_id: r.id,
                    record: r.record,
                    commit_version: snap.version(),
                    idempotent_replay: false,
                    changed: false,
                })
            }
            SnapshotState::ReapClaimed | SnapshotState::Reaped => {
                return Err(Error::SnapshotExpired {
                    snapshot_id: r.id.get(),
                    status: "reaped",
                })
            }
        }
        if r.record.consumer_count > 0 {
            return Err(Error::ForkRetentionActive {
                snapshot_id: r.id.get(),
                consumer_count: r.record.consumer_count,
            });
        }
        let record = checked_snapshot(
            &r.record,
            SnapshotRef {
                state: SnapshotState::Retired,
                retire_annotation: req.annotation.clone(),
                ..r.record.clone()
            },
        );
        let (mut predicates, mut mutations) = alias_rows(&r, Some(SnapshotState::Retired));
        let hkey = hold_key(&root, HoldId::Snapshot(r.id));
        let hold = snap
            .get(Family::HistoryHold, &hkey)?
            .ok_or_else(|| Error::codec("history_hold", "active snapshot without its hold"))?;
        predicates.push(Predicate::equals(
            Family::SnapshotRef,
            r.key.clone(),
            r.bytes.clone(),
        ));
        predicates.push(Predicate::equals(Family::HistoryHold, hkey.clone(), hold));
        mutations.push(Mutation::put(
            Family::SnapshotRef,
            r.key.clone(),
            record.encode(),
        ));
        mutations.push(Mutation::Delete {
            family: Family::HistoryHold,
            key: hkey,
        });
        let mut cmd = shard.command_header(
            req.request_id,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id: r.id,
                snapshot: record,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![snapshot_event(
            &req.workbench_id,
            ws.incarnation,
            ChangeKind::SnapshotRetired,
            r.id,
        )];
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}

// ---------------------------------------------------------------------------------------------
// Reads
