//! Abort, `Cleaning` and the cleanup batches (`Cleaned` | `Quarantined`).

use super::keys::{
    commit_key, commit_ref_prefix, consumer_key, encode_build, hold_key, op_key, ref_target,
};
use super::model::{PARENT_BATCH, RELEASE_BATCH};
use super::refs::{adjust_revision, release_consumer};
use super::state::{
    advance_build, advanced, checked_build, commit_version, header, read_build, read_commit,
    step_digest,
};
use crate::codec::{
    artifact_revision, commit_member, ArtifactRevision, BuildCommitPhase, ClosureCursor,
    CommitMemberKey, ConsumerOwner, OperationKind, OperationResult, TerminalError,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{CommitId, OperationId, RootId};
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot};

/// A permanent failure that aborts the build with a terminal error.
pub(super) struct Abort {
    pub(super) code: &'static str,
    pub(super) message: String,
}

pub(super) fn abort_for(err: &Error) -> Option<Abort> {
    let (code, message) = match err {
        Error::RevisionUnavailable { .. } => (
            "InvalidState",
            "an artifact of the workbench is no longer available; commit again".to_string(),
        ),
        Error::CommitLifecycle { reason } => ("InvalidState", reason.clone()),
        Error::CommitNotFound { .. } => ("NotFound", "a parent commit no longer exists".into()),
        _ => return None,
    };
    Some(Abort { code, message })
}

/// CASes `Building | Sealing -> Aborting` with the terminal error.
pub(super) fn abort(shard: &MetaShard, op_id: &OperationId, a: Abort) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if !matches!(
            op.phase,
            BuildCommitPhase::Building | BuildCommitPhase::Sealing
        ) {
            return Ok(Built::Done(()));
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Aborting;
        next.result = OperationResult::Failed(TerminalError {
            code: a.code.to_owned(),
            message: a.message.clone(),
        });
        let mut cmd = advance_build(
            shard,
            snap,
            &key,
            bytes,
            op_id,
            b"abort",
            checked_build(&op, &next),
        )?;
        // Sealing -> Aborting only with fenced proof that no Commit exists.
        cmd.predicates.push(Predicate::absent(
            Family::Commit,
            commit_key(&root, &op.commit_id),
        ));
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

/// Requests cleanup of a non-terminal build (`Building | Sealing -> Aborting`) with the given
/// stable error code and message; [`step`] then drives it to `Cleaned`.
///
/// Errors: codec and storage errors.
pub fn request_abort(
    shard: &MetaShard,
    op_id: &OperationId,
    code: &'static str,
    message: &str,
) -> Result<()> {
    abort(
        shard,
        op_id,
        Abort {
            code,
            message: message.to_owned(),
        },
    )
}

pub(super) fn to_cleaning(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Aborting {
            return Ok(Built::Done(()));
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Cleaning;
        let cmd = advance_build(
            shard,
            snap,
            &key,
            bytes,
            op_id,
            b"cleaning",
            checked_build(&op, &next),
        )?;
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

/// Release progress of one closure (cleanup or retirement): deletes members, then revision
/// references, then parent consumers, ≤ [`RELEASE_BATCH`] rows per command. Returns the
/// predicates and mutations of the next batch and the advanced cursor, or `None` when all three
/// sets are released.
#[allow(clippy::type_complexity)]
pub(super) fn release_batch(
    snap: &impl Snapshot,
    root: &RootId,
    commit: &CommitId,
    parents: &[CommitId],
    cursor: &ClosureCursor,
    cv: u64,
) -> Result<Option<(Vec<Predicate>, Vec<Mutation>, ClosureCursor)>> {
    let mut next = cursor.clone();
    let mut predicates = Vec::new();
    let mut mutations = Vec::new();
    if !cursor.members.complete {
        let prefix = commit_member::commit_prefix(root, commit);
        let spec = ScanSpec {
            prefix: prefix.clone(),
            start_after: None,
            delimiter: None,
            limit: RELEASE_BATCH + 1,
        };
        let rows = snap.scan(Family::CommitMember, &spec)?;
        let more = rows.len() > RELEASE_BATCH;
        for item in rows.into_iter().take(RELEASE_BATCH) {
            if let ScanItem::Row { key, .. } = item {
                next.members.after = Some(CommitMemberKey::decode(&key)?.path);
                mutations.push(Mutation::Delete {
                    family: Family::CommitMember,
                    key,
                });
            }
        }
        next.members.complete = !more;
        return Ok(Some((predicates, mutations, next)));
    }
    if !cursor.revisions.complete {
        let spec = ScanSpec {
            prefix: commit_ref_prefix(root, commit),
            start_after: None,
            delimiter: None,
            limit: RELEASE_BATCH + 1,
        };
        let rows = snap.scan(Family::RevisionRef, &spec)?;
        let more = rows.len() > RELEASE_BATCH;
        for item in rows.into_iter().take(RELEASE_BATCH) {
            if let ScanItem::Row { key, .. } = item {
                let rev = ref_target(&key)?;
                let akey = artifact_revision::key(root, &rev);
                let Some(abytes) = snap.get(Family::ArtifactRevision, &akey)? else {
                    return Err(Error::codec(
                        "artifact_revision",
                        "referenced revision missing",
                    ));
                };
                let mut arow = ArtifactRevision::decode(&abytes)?;
                if let Some(gc) = adjust_revision(root, &rev, &mut arow, false, cv)? {
                    mutations.push(gc);
                }
                predicates.push(Predicate::equals(
                    Family::ArtifactRevision,
                    akey.clone(),
                    abytes,
                ));
                mutations.push(Mutation::put(Family::ArtifactRevision, akey, arow.encode()));
                mutations.push(Mutation::Delete {
                    family: Family::RevisionRef,
                    key,
                });
                next.revisions.after = Some(rev);
            }
        }
        next.revisions.complete = !more;
        return Ok(Some((predicates, mutations, next)));
    }
    if !cursor.parents.complete {
        let todo: Vec<CommitId> = parents
            .iter()
            .copied()
            .filter(|p| cursor.parents.after.is_none_or(|a| *p > a))
            .take(PARENT_BATCH)
            .collect();
        for p in &todo {
            let ck = consumer_key(root, p, ConsumerOwner::ChildCommit { child: *commit });
            if snap.get(Family::CommitConsumer, &ck)?.is_none() {
                continue;
            }
            let Some((cbytes, mut c)) = read_commit(snap, root, p)? else {
                return Err(Error::codec("commit", "parent commit missing"));
            };
            release_consumer(&mut c, cv)?;
            predicates.push(Predicate::equals(
                Family::Commit,
                commit_key(root, p),
                cbytes,
            ));
            mutations.push(Mutation::put(
                Family::Commit,
                commit_key(root, p),
                c.encode(),
            ));
            mutations.push(Mutation::Delete {
                family: Family::CommitConsumer,
                key: ck,
            });
        }
        next.parents.after = todo.last().copied().or(cursor.parents.after);
        next.parents.complete = parents
            .last()
            .is_none_or(|last| next.parents.after.is_some_and(|a| a >= *last));
        return Ok(Some((predicates, mutations, next)));
    }
    Ok(None)
}

pub(super) fn cleanup_batch(shard: &MetaShard, op_id: &OperationId) -> Result<&'static str> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Cleaning {
            return Ok(Built::Done("cleanup-batch"));
        }
        let cv = commit_version(snap)?;
        // Only the parents this build attached are released.
        let attached: Vec<CommitId> = op
            .parents
            .iter()
            .copied()
            .filter(|p| op.cursor.parents.after.is_some_and(|a| *p <= a))
            .collect();
        let mut next = op.clone();
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"cleanup", &bytes),
            advanced(
                OperationKind::BuildCommit,
                op_id,
                BuildCommitPhase::Cleaning.to_u8(),
            ),
        )?;
        cmd.predicates.push(Predicate::equals(
            Family::Operation,
            key.clone(),
            bytes.clone(),
        ));
        let name = match release_batch(
            snap,
            &root,
            &op.commit_id,
            &attached,
            &op.cleanup_cursor,
            cv,
        )? {
            Some((p, m, c)) => {
                cmd.predicates.extend(p);
                cmd.mutations.extend(m);
                next.cleanup_cursor = c;
                "cleanup-batch"
            }
            None => {
                next.phase = BuildCommitPhase::Cleaned;
                cmd.result = advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8());
                cmd.mutations.push(Mutation::Delete {
                    family: Family::HistoryHold,
                    key: hold_key(&root, op_id),
                });
                "cleaned"
            }
        };
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(checked_build(&op, &next)),
        ));
        Ok(Built::Command(Box::new(cmd), name))
    })
}
