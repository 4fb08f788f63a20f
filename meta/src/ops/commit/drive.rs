//! The step driver: one durable step of a BuildCommit per call.

use super::abort::{abort, abort_for, cleanup_batch, to_cleaning};
use super::members::member_batch;
use super::model::StepOutcome;
use super::parents::parent_batch;
use super::publish::publish_commit;
use super::seal::seal;
use super::state::read_build;
use crate::codec::BuildCommitPhase;
use crate::error::{Error, Result};
use crate::ids::OperationId;
use crate::shard::MetaShard;
use crate::store::TxnStore;

/// Drives the build operation by exactly one command (or reports that it needs the staged
/// manifest, or is terminal). Call repeatedly until [`StepOutcome::Terminal`].
///
/// Errors: [`Error::CommitLifecycle`] for a seal that does not verify, [`Error::Fenced`],
/// [`Error::ReadVersionConflict`], codec and storage errors. Permanent precondition failures are
/// not errors: they abort the operation, whose terminal result then carries them.
pub fn step(shard: &MetaShard, op_id: &OperationId) -> Result<StepOutcome> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let Some((_, op)) = read_build(&snap, &root, op_id)? else {
        return Err(Error::CommitLifecycle {
            reason: "the build operation does not exist".into(),
        });
    };
    drop(snap);
    let outcome = match op.phase {
        BuildCommitPhase::Complete | BuildCommitPhase::Cleaned | BuildCommitPhase::Quarantined => {
            return Ok(StepOutcome::Terminal)
        }
        BuildCommitPhase::Building => {
            if op.staged_manifest.is_none() {
                return Ok(StepOutcome::NeedsManifest);
            }
            if !op.cursor.members.complete {
                member_batch(shard, op_id).map(|_| "member-batch")
            } else if !op.cursor.parents.complete {
                parent_batch(shard, op_id).map(|_| "parents")
            } else {
                seal(shard, op_id).map(|_| "sealing")
            }
        }
        BuildCommitPhase::Sealing => publish_commit(shard, op_id),
        BuildCommitPhase::Aborting => to_cleaning(shard, op_id).map(|_| "cleaning"),
        BuildCommitPhase::Cleaning => cleanup_batch(shard, op_id),
    };
    match outcome {
        Ok(name) => Ok(StepOutcome::Advanced(name)),
        Err(e) => match abort_for(&e) {
            Some(a) => {
                abort(shard, op_id, a)?;
                Ok(StepOutcome::Advanced("aborting"))
            }
            None => Err(e),
        },
    }
}
