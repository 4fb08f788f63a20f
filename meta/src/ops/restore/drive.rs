//! Driving the operation one metadata command at a time: step headers, retries and the phase dispatch.

#[allow(unused_imports)]
use super::*;

/// A command header for one restore step; the command digest binds the step name, operation id
/// and read version (request ids are fresh: every step CASes the Operation row instead).
pub(super) fn command(
    shard: &MetaShard,
    read_version: u64,
    step: &[u8],
    op_id: &OperationId,
    marker: &WorkspaceCurrent,
) -> Result<MetadataCommand> {
    let mut h = Sha256::new();
    h.update(b"nokv.restore.step.v1\0");
    h.update((step.len() as u32).to_be_bytes());
    h.update(step);
    h.update(op_id.as_bytes());
    h.update(read_version.to_be_bytes());
    Ok(shard.command_header(
        RequestId::random()?,
        h.finalize().into(),
        read_version,
        CommandResult::WorkspaceCreated {
            workspace: marker.clone(),
        },
    ))
}

pub(super) fn run(
    seq: &mut Sequenced<'_>,
    mut cmd: MetadataCommand,
    predicates: Vec<Predicate>,
    mutations: Vec<Mutation>,
    events: Vec<ChangeEvent>,
) -> Result<()> {
    // A writer's first write advances its owner epoch (a commit) first; the command then meets a
    // stale read version and every caller's retry loop re-plans it.
    seq.prepare_write()?;
    cmd.predicates = predicates;
    cmd.mutations = mutations;
    cmd.event_projection = events;
    seq.execute(cmd)?;
    Ok(())
}

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

/// Runs `attempt` (one re-read and one command) up to [`MAX_ATTEMPTS`] times, again on a stale
/// read version or a failed predicate.
pub(super) fn retrying<T>(mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    for _ in 0..MAX_ATTEMPTS {
        match attempt() {
            Err(RestoreError::Meta(Error::ReadVersionConflict { .. }))
            | Err(RestoreError::Meta(Error::CommandPredicateFailed)) => continue,
            other => return other,
        }
    }
    Err(Error::ReadVersionConflict {
        attempts: MAX_ATTEMPTS,
    }
    .into())
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

/// A command that only rewrites the Operation row (CAS on its exact bytes).
pub(super) fn commit_op<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    next: RestoreOperation,
    marker: &WorkspaceCurrent,
    step: &[u8],
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let id = next.operation_id();
    let key = op_key(&root, &id);
    let phase = next.phase;
    let cmd = command(shard, snap.version(), step, &id, marker)?;
    run(
        seq,
        cmd,
        vec![Predicate::equals(Family::Operation, key.clone(), old)],
        vec![Mutation::put(
            Family::Operation,
            key,
            Operation::Restore(Box::new(next)).encode(),
        )],
        Vec::new(),
    )?;
    Ok(phase)
}
