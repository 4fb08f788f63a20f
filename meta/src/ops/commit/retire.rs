//! CommitRetire: explicit retirement of a commit.

use super::abort::release_batch;
use super::keys::{commit_key, op_key, retire_operation_id, sha};
use super::model::RETIRE_DOMAIN;
use super::state::{advanced, checked_retire, commit_version, header, read_commit};
use crate::codec::{
    ClosureCursor, CommitRetireOperation, CommitRetirePhase, CommitState, Operation, OperationKind,
    OperationResult,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{CommitId, OperationId, RootId};
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Outcome of [`retire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetireReceipt {
    /// The CommitRetire operation id.
    pub operation_id: OperationId,
    /// Commit version that published `Retired`.
    pub commit_version: u64,
    /// True when the commit had already been retired by an earlier call.
    pub already_retired: bool,
}

pub(super) fn read_retire(
    snap: &impl Snapshot,
    root: &RootId,
    op_id: &OperationId,
) -> Result<Option<(Vec<u8>, CommitRetireOperation)>> {
    match snap.get(
        Family::Operation,
        &op_key(root, OperationKind::CommitRetire, op_id),
    )? {
        None => Ok(None),
        Some(b) => match Operation::decode_for_kind(OperationKind::CommitRetire, &b)? {
            Operation::CommitRetire(r) => Ok(Some((b, r))),
            _ => Err(Error::codec("operation", "not a CommitRetire operation")),
        },
    }
}

/// Explicitly retires a commit (see the module docs). Only a `Sealed` commit with
/// `consumer_count == 0` can be claimed; the release then runs to completion in bounded
/// batches (resumed by a later call after process loss).
///
/// Errors: [`Error::CommitNotFound`], [`Error::CommitLifecycle`] (consumers remain — heads,
/// tags, leases or child commits — or the commit is not `Sealed`), [`Error::Fenced`], codec and
/// storage errors.
pub fn retire(shard: &MetaShard, commit_id: &CommitId) -> Result<RetireReceipt> {
    let root = shard.root_id();
    let op_id = retire_operation_id(&root, commit_id);
    let okey = op_key(&root, OperationKind::CommitRetire, &op_id);
    let ckey = commit_key(&root, commit_id);
    // Claim (one command) unless the operation exists.
    run(shard, |snap| {
        if read_retire(snap, &root, &op_id)?.is_some() {
            return Ok(Built::Done(()));
        }
        let Some((cbytes, c)) = read_commit(snap, &root, commit_id)? else {
            return Err(Error::CommitNotFound {
                commit_id: commit_id.to_hex(),
            });
        };
        if c.state != CommitState::Sealed {
            return Err(Error::CommitLifecycle {
                reason: format!("the commit is {:?}", c.state),
            });
        }
        if c.consumer_count != 0 {
            return Err(Error::CommitLifecycle {
                reason: format!(
                    "the commit still has {} consumer(s) (workbench head, tags, restore leases or child commits)",
                    c.consumer_count
                ),
            });
        }
        let mut next = c.clone();
        next.state = CommitState::Retiring;
        next.retirement_cursor = Some(ClosureCursor::default());
        let op = Operation::CommitRetire(CommitRetireOperation {
            phase: CommitRetirePhase::Releasing,
            commit_id: *commit_id,
            expected_consumer_epoch: c.consumer_epoch,
            cursor: ClosureCursor::default(),
            result: OperationResult::Pending,
        });
        let mut cmd = header(
            shard,
            snap,
            sha(&[RETIRE_DOMAIN, b"claim", op_id.as_bytes(), &cbytes]),
            advanced(
                OperationKind::CommitRetire,
                &op_id,
                CommitRetirePhase::Releasing.to_u8(),
            ),
        )?;
        cmd.predicates = vec![
            Predicate::equals(Family::Commit, ckey.clone(), cbytes),
            Predicate::absent(Family::Operation, okey.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::Commit, ckey.clone(), next.encode()),
            Mutation::put(Family::Operation, okey.clone(), op.encode()),
        ];
        Ok(Built::Command(Box::new(cmd), ()))
    })?;
    loop {
        let done = run(shard, |snap| {
            let Some((obytes, op)) = read_retire(snap, &root, &op_id)? else {
                return Err(Error::codec("operation", "retire operation vanished"));
            };
            match (op.phase, &op.result) {
                (CommitRetirePhase::Complete, OperationResult::Succeeded(v)) => {
                    return Ok(Built::Done(Some((*v, true))))
                }
                (CommitRetirePhase::Releasing, _) => {}
                (phase, _) => {
                    return Err(Error::CommitLifecycle {
                        reason: format!("the retirement is {phase:?}"),
                    })
                }
            }
            let Some((cbytes, c)) = read_commit(snap, &root, commit_id)? else {
                return Err(Error::codec("commit", "retiring commit missing"));
            };
            let cv = commit_version(snap)?;
            let mut cmd = header(
                shard,
                snap,
                sha(&[RETIRE_DOMAIN, b"release", op_id.as_bytes(), &obytes]),
                advanced(
                    OperationKind::CommitRetire,
                    &op_id,
                    CommitRetirePhase::Releasing.to_u8(),
                ),
            )?;
            cmd.predicates = vec![
                Predicate::equals(Family::Operation, okey.clone(), obytes.clone()),
                Predicate::equals(Family::Commit, ckey.clone(), cbytes.clone()),
            ];
            let mut next_op = op.clone();
            let mut next_c = c.clone();
            let result = match release_batch(snap, &root, commit_id, &c.parents, &op.cursor, cv)? {
                Some((p, m, cursor)) => {
                    cmd.predicates.extend(p);
                    cmd.mutations.extend(m);
                    next_op.cursor = cursor.clone();
                    next_c.retirement_cursor = Some(cursor);
                    None
                }
                None => {
                    next_op.phase = CommitRetirePhase::Complete;
                    next_op.result = OperationResult::Succeeded(cv);
                    next_c.state = CommitState::Retired;
                    cmd.result = advanced(
                        OperationKind::CommitRetire,
                        &op_id,
                        CommitRetirePhase::Complete.to_u8(),
                    );
                    Some((cv, false))
                }
            };
            cmd.mutations.push(Mutation::put(
                Family::Operation,
                okey.clone(),
                Operation::CommitRetire(checked_retire(&op, next_op)).encode(),
            ));
            cmd.mutations
                .push(Mutation::put(Family::Commit, ckey.clone(), next_c.encode()));
            Ok(Built::Command(Box::new(cmd), result))
        })?;
        if let Some((commit_version, already)) = done {
            return Ok(RetireReceipt {
                operation_id: op_id,
                commit_version,
                already_retired: already,
            });
        }
    }
}
