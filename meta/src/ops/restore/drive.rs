//! Driving the operation one metadata command at a time: step headers, retries and the phase dispatch.

use super::cleanup::cleanup_batch;
use super::copy::{copy_batch, staging_marker};
use super::publish::publish;
use super::row::{commit_op, read_op, retrying};
use super::state::{checked_restore, RestoreError, RestoreMark, Result};
use super::verify::verify;
use crate::codec::{RestoreOperation, RestorePhase};
use crate::ids::OperationId;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;

/// Advances the operation by exactly one metadata command (see the module docs) and returns the
/// phase it is in afterwards. A terminal operation (`Complete`, `Cleaned`, `Quarantined`) is
/// returned unchanged.
///
/// Errors: [`RestoreError::OperationNotFound`]; [`RestoreError::SourceClosureMismatch`] when
/// verification fails (abort the operation); [`RestoreError::Meta`] with
/// `RevisionUnavailable` when a shared revision is no longer `Available`, exhausted read-version
/// retries, fence, codec and storage errors.
pub fn advance(shard: &MetaShard, op_id: &OperationId) -> Result<RestorePhase> {
    retrying(|| shard.sequenced(|seq| advance_once(shard, seq, op_id)))
}

pub(super) fn advance_once(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    op_id: &OperationId,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let snap = seq.snapshot();
    let (bytes, op) = read_op(&snap, &root, op_id)?.ok_or(RestoreError::OperationNotFound)?;
    let from = RestoreMark::of(&op);
    match op.phase {
        RestorePhase::Preparing | RestorePhase::Copying if !op.cursor.source_eof => {
            copy_batch(shard, seq, &snap, bytes, op)
        }
        RestorePhase::Copying => {
            let (_, marker) = staging_marker(&snap, &root, &op)?;
            let next = RestoreOperation {
                phase: RestorePhase::SourceSealed,
                ..op
            };
            commit_op(
                shard,
                seq,
                &snap,
                bytes,
                checked_restore(from, next),
                &marker,
                b"seal",
            )
        }
        RestorePhase::SourceSealed => {
            verify(shard, &snap, &op)?;
            let (_, marker) = staging_marker(&snap, &root, &op)?;
            let next = RestoreOperation {
                phase: RestorePhase::Ready,
                ..op
            };
            commit_op(
                shard,
                seq,
                &snap,
                bytes,
                checked_restore(from, next),
                &marker,
                b"ready",
            )
        }
        RestorePhase::Ready => publish(shard, seq, &snap, bytes, op),
        RestorePhase::Aborting | RestorePhase::Cleaning => {
            cleanup_batch(shard, seq, &snap, bytes, op)
        }
        RestorePhase::Preparing => Err(RestoreError::InvalidPhase {
            phase: op.phase,
            reason: "end of source recorded before copying".into(),
        }),
        p @ (RestorePhase::Complete | RestorePhase::Cleaned | RestorePhase::Quarantined) => Ok(p),
    }
}
