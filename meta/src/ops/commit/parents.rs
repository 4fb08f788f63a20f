//! Lineage parent batches of `Building`.

use super::keys::{chain, commit_key, consumer_key, encode_build, op_key};
use super::model::{PARENT_BATCH, PARENT_DOMAIN};
use super::state::{
    advanced, checked_build, commit_version, header, read_build, read_commit, step_digest,
};
use crate::codec::{
    BuildCommitPhase, CommitConsumer, CommitState, ConsumerOwner, OperationKind, SetCursor,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{CommitId, OperationId};
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;

pub(super) fn parent_batch(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Building || op.cursor.parents.complete {
            return Ok(Built::Done(()));
        }
        let todo: Vec<CommitId> = op
            .parents
            .iter()
            .copied()
            .filter(|p| op.cursor.parents.after.is_none_or(|a| *p > a))
            .take(PARENT_BATCH)
            .collect();
        let cv = commit_version(snap)?;
        let mut next = op.clone();
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"parents", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates.push(Predicate::equals(
            Family::Operation,
            key.clone(),
            bytes.clone(),
        ));
        for p in &todo {
            let Some((cbytes, mut c)) = read_commit(snap, &root, p)? else {
                return Err(Error::CommitNotFound {
                    commit_id: p.to_hex(),
                });
            };
            if c.state != CommitState::Sealed {
                return Err(Error::CommitLifecycle {
                    reason: format!("parent commit is {:?}, not Sealed", c.state),
                });
            }
            c.consumer_count = c.consumer_count.saturating_add(1);
            c.consumer_epoch = c.consumer_epoch.saturating_add(1);
            let ck = consumer_key(
                &root,
                p,
                ConsumerOwner::ChildCommit {
                    child: op.commit_id,
                },
            );
            cmd.predicates.push(Predicate::equals(
                Family::Commit,
                commit_key(&root, p),
                cbytes,
            ));
            cmd.predicates
                .push(Predicate::absent(Family::CommitConsumer, ck.clone()));
            cmd.mutations.push(Mutation::put(
                Family::CommitConsumer,
                ck,
                CommitConsumer {
                    consumer_epoch_at_add: c.consumer_epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            cmd.mutations.push(Mutation::put(
                Family::Commit,
                commit_key(&root, p),
                c.encode(),
            ));
            next.parent_digest = chain(PARENT_DOMAIN, &next.parent_digest, &[p.as_bytes()]);
            next.parent_count += 1;
        }
        next.cursor.parents = SetCursor {
            after: todo.last().copied().or(op.cursor.parents.after),
            complete: next.parent_count == op.parents.len() as u64,
        };
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(checked_build(&op, &next)),
        ));
        Ok(Built::Command(Box::new(cmd), ()))
    })
}
