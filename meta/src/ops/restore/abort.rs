//! Claiming cleanup: `Preparing..Ready -> Aborting`.

use super::copy::staging_marker;
use super::row::read_op;
use super::row::{commit_op, retrying};
use super::state::{checked_restore, RestoreError, RestoreMark, Result};
use crate::codec::{OperationResult, RestoreOperation, RestorePhase, TerminalError};
use crate::ids::OperationId;
use crate::shard::MetaShard;

/// Claims cleanup: CASes the exact observed nonterminal phase (`Preparing`, `Copying`,
/// `SourceSealed`, `Ready`) to `Aborting` and records `error` as the terminal result. Returns the
/// phase afterwards (`Aborting`, or the unchanged phase of an operation already aborting or
/// terminal — a `Complete` restore is never torn down).
///
/// Errors: [`RestoreError::OperationNotFound`]; exhausted read-version retries; fence, codec and
/// storage errors.
pub fn abort(shard: &MetaShard, op_id: &OperationId, error: TerminalError) -> Result<RestorePhase> {
    let root = shard.root_id();
    retrying(|| {
        shard.sequenced(|seq| {
            let snap = seq.snapshot();
            let (bytes, op) =
                read_op(&snap, &root, op_id)?.ok_or(RestoreError::OperationNotFound)?;
            match op.phase {
                RestorePhase::Preparing
                | RestorePhase::Copying
                | RestorePhase::SourceSealed
                | RestorePhase::Ready => {}
                p => return Ok(p),
            }
            let (_, marker) = staging_marker(&snap, &root, &op)?;
            let from = RestoreMark::of(&op);
            let next = RestoreOperation {
                phase: RestorePhase::Aborting,
                cleanup_next_sequence: 0,
                result: OperationResult::Failed(error.clone()),
                ..op
            };
            commit_op(
                shard,
                seq,
                &snap,
                bytes,
                checked_restore(from, next),
                &marker,
                b"abort",
            )
        })
    })
}
