//! Create: SnapshotRef + SnapshotAlias + HistoryHold minted at one read version.

use super::rows::{
    alias_key, digest, hold_key, read_alias, receipt, ref_key, snapshot_event, validate_ttl,
    visible_marker,
};
use super::state::{CreateSnapshotRequest, SnapshotReceipt, MAX_ANNOTATION_BYTES};
use crate::codec::{
    workbench_commit_head, workspace_current, ChangeKind, CommandResult, HistoryHold,
    HistoryHoldState, HoldId, SnapshotAlias, SnapshotRef, SnapshotState,
};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, SnapshotId};
use crate::ops::lease_clock;
use crate::shard::history_floor::SnapshotPolicy;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Mints a leased snapshot of `req.workbench_id` at the current read version (see the module
/// docs). The lease clock is observed at `wall_unix_ms` first.
///
/// Errors: [`Error::InvalidArgument`] (ttl, annotation size, workbench id);
/// [`Error::WorkspaceNotFound`]; [`Error::SnapshotLifecycle`] when `require_commit_head` and the
/// workbench has no commit head; [`Error::RequestReplayMismatch`]; [`Error::ReadVersionConflict`]
/// after [`crate::ops::MAX_ATTEMPTS`]; [`Error::Fenced`]; codec and storage errors.
pub fn create(
    shard: &MetaShard,
    req: &CreateSnapshotRequest,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    validate_workbench_id(&req.workbench_id)?;
    validate_ttl(req.ttl_ms)?;
    if req.annotation.len() > MAX_ANNOTATION_BYTES {
        return Err(Error::invalid(format!(
            "snapshot annotation is {} bytes; at most {MAX_ANNOTATION_BYTES} allowed",
            req.annotation.len()
        )));
    }
    let digest = digest(
        b"nokv.snapshot.create.v1\0",
        &[
            req.workbench_id.as_bytes(),
            req.alias
                .as_ref()
                .map_or(b"" as &[u8], |a| a.as_str().as_bytes()),
            &[
                u8::from(req.alias.is_some()),
                u8::from(req.require_commit_head),
            ],
            &req.ttl_ms.to_be_bytes(),
            &req.annotation,
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
        let (ws_bytes, ws) = visible_marker(&snap, &root, &req.workbench_id, shard.wall_unix_ms())?;
        let inc = ws.incarnation;
        let mut predicates = vec![
            Predicate::equals(
                Family::WorkspaceCurrent,
                workspace_current::key(&root, &req.workbench_id),
                ws_bytes,
            ),
            lease.predicate(),
        ];
        if req.require_commit_head {
            let head_key = workbench_commit_head::WorkbenchCommitHeadKey {
                root,
                incarnation: inc,
            }
            .encode();
            let Some(head) = snap.get(Family::WorkbenchCommitHead, &head_key)? else {
                return Err(Error::SnapshotLifecycle {
                    reason: format!(
                        "workbench {:?} has no commit; only a committed workbench can be snapshotted",
                        req.workbench_id
                    ),
                });
            };
            predicates.push(Predicate::equals(
                Family::WorkbenchCommitHead,
                head_key,
                head,
            ));
        }
        let read_version = snap.version();
        let cv = read_version
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        let id = SnapshotId(cv);
        let record = SnapshotRef {
            read_version,
            alias: req.alias.clone(),
            lease_deadline_unix_ms: lease.now_unix_ms().saturating_add(req.ttl_ms),
            state: SnapshotState::Active,
            consumer_count: 0,
            consumer_epoch: 0,
            annotation: req.annotation.clone(),
            retire_annotation: None,
        };
        let rkey = ref_key(&root, &inc, id);
        let hkey = hold_key(&root, HoldId::Snapshot(id));
        predicates.push(Predicate::absent(Family::SnapshotRef, rkey.clone()));
        predicates.push(Predicate::absent(Family::HistoryHold, hkey.clone()));
        let mut mutations = vec![
            Mutation::put(Family::SnapshotRef, rkey, record.encode()),
            Mutation::put(
                Family::HistoryHold,
                hkey,
                HistoryHold {
                    read_version,
                    source_snapshot_id: None,
                    state: HistoryHoldState::Active,
                    created_version: cv,
                }
                .encode(),
            ),
        ];
        if let Some(alias) = &req.alias {
            let akey = alias_key(&root, &inc, alias);
            let generation = match read_alias(&snap, akey.clone())? {
                None => {
                    predicates.push(Predicate::absent(Family::SnapshotAlias, akey.clone()));
                    1
                }
                Some((_, bytes, old)) => {
                    predicates.push(Predicate::equals(
                        Family::SnapshotAlias,
                        akey.clone(),
                        bytes,
                    ));
                    old.alias_generation.saturating_add(1)
                }
            };
            mutations.push(Mutation::put(
                Family::SnapshotAlias,
                akey,
                SnapshotAlias {
                    snapshot_id: id,
                    alias_generation: generation,
                    terminal_state: None,
                }
                .encode(),
            ));
        }
        let mut cmd = shard.command_header(
            req.request_id,
            digest,
            read_version,
            CommandResult::SnapshotLifecycle {
                snapshot_id: id,
                snapshot: record,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![snapshot_event(
            &req.workbench_id,
            inc,
            ChangeKind::SnapshotCreated,
            id,
        )];
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}
