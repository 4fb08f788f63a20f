//! Claiming cleanup: `Preparing..Ready -> Aborting`.

#[allow(unused_imports)]
use super::*;

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
