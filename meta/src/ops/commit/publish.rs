//! `Sealing -> Complete`: the publication command of a commit.

use super::abort::{abort, Abort};
use super::keys::{
    commit_key, consumer_key, encode_build, head_key, hold_key, op_key, run_manifest_path,
};
use super::refs::{adjust_revision, release_consumer};
use super::state::{
    advanced, checked_build, commit_version, header, read_build, read_commit, read_ws, step_digest,
};
use crate::codec::{
    artifact_revision, path_current, revision_ref, ArtifactRevision, BuildCommitPhase,
    BuildCommitResult, ChangeEvent, ChangeKind, Commit, CommitConsumer, CommitState, ConsumerOwner,
    HeadRef, OperationKind, OperationResult, PathEntry, RefOwner, RevisionRef, RevisionState,
    WorkbenchCommitHead, WorkspaceState,
};
use crate::command::projection as index_projection;
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::OperationId;
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Step 9: the single publishing command. Returns the boundary name (`"complete"`, or
/// `"aborting"` when a live precondition no longer holds).
pub(super) fn publish_commit(shard: &MetaShard, op_id: &OperationId) -> Result<&'static str> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    let vpath = run_manifest_path()?;
    let outcome = run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Sealing {
            return Ok(Built::Done(Ok(())));
        }
        let Some(binding) = op.staged_manifest.clone() else {
            return Err(Error::codec(
                "operation",
                "sealed build without a staged manifest",
            ));
        };
        let conflict_code = if op.replace {
            "Conflict"
        } else {
            "WorkbenchCommitConflict"
        };
        let ws = match read_ws(snap, &root, &op.workbench_id)? {
            Some(w)
                if w.2.state == WorkspaceState::Visible
                    && w.2.incarnation == op.source_incarnation =>
            {
                w
            }
            _ => {
                return Ok(Built::Done(Err(Abort {
                    code: "NotFound",
                    message: "the workbench no longer exists".into(),
                })))
            }
        };
        let (ws_key, ws_bytes, ws) = ws;
        let inc = ws.incarnation;
        let hk = head_key(&root, &inc);
        let head_bytes = snap.get(Family::WorkbenchCommitHead, &hk)?;
        let head = head_bytes
            .as_deref()
            .map(WorkbenchCommitHead::decode)
            .transpose()?;
        let head_ref = head.map(|h| HeadRef {
            commit_id: h.commit_id,
            head_generation: h.head_generation,
        });
        if head_ref != op.expected_head {
            return Ok(Built::Done(Err(Abort {
                code: conflict_code,
                message:
                    "another commit moved the workbench head while this commit was built; retry"
                        .into(),
            })));
        }
        let pkey = path_current::key(&root, &inc, &vpath);
        let old_bytes = snap.get(Family::PathCurrent, &pkey)?;
        let old = old_bytes.as_deref().map(PathEntry::decode).transpose()?;
        if old.as_ref().map(|e| e.generation) != op.run_manifest_expected_generation {
            return Ok(Built::Done(Err(Abort {
                code: "Conflict",
                message: "metadata/run_manifest.json changed while this commit was built; retry"
                    .into(),
            })));
        }
        let cv = commit_version(snap)?;
        let mut predicates = vec![
            Predicate::equals(Family::Operation, key.clone(), bytes.clone()),
            Predicate::equals(Family::WorkspaceCurrent, ws_key.clone(), ws_bytes),
            match &head_bytes {
                None => Predicate::absent(Family::WorkbenchCommitHead, hk.clone()),
                Some(b) => Predicate::equals(Family::WorkbenchCommitHead, hk.clone(), b.clone()),
            },
            match &old_bytes {
                None => Predicate::absent(Family::PathCurrent, pkey.clone()),
                Some(b) => Predicate::equals(Family::PathCurrent, pkey.clone(), b.clone()),
            },
            Predicate::absent(Family::Commit, commit_key(&root, &op.commit_id)),
        ];
        let mut mutations = Vec::new();
        // The staged manifest revision gains its path reference.
        let skey = artifact_revision::key(&root, &binding.revision);
        let Some(sbytes) = snap.get(Family::ArtifactRevision, &skey)? else {
            return Err(Error::codec(
                "artifact_revision",
                "staged manifest revision missing",
            ));
        };
        let mut srow = ArtifactRevision::decode(&sbytes)?;
        if srow.state != RevisionState::Available {
            return Err(Error::RevisionUnavailable {
                revision: binding.revision.to_hex(),
                reason: format!("state {:?}", srow.state),
            });
        }
        adjust_revision(&root, &binding.revision, &mut srow, true, cv)?;
        predicates.push(Predicate::equals(
            Family::ArtifactRevision,
            skey.clone(),
            sbytes,
        ));
        mutations.push(Mutation::put(Family::ArtifactRevision, skey, srow.encode()));
        let path_owner = RefOwner::Path {
            incarnation: inc,
            path: vpath.clone(),
        };
        mutations.push(Mutation::put(
            Family::RevisionRef,
            revision_ref::key(&root, &path_owner, &binding.revision),
            RevisionRef {
                reference_epoch_at_add: srow.reference_epoch,
                created_version: cv,
            }
            .encode(),
        ));
        if let Some(old) = &old {
            let orev = old.artifact_revision_id;
            let okey = artifact_revision::key(&root, &orev);
            let Some(obytes) = snap.get(Family::ArtifactRevision, &okey)? else {
                return Err(Error::codec(
                    "artifact_revision",
                    "replaced manifest revision missing",
                ));
            };
            let mut orow = ArtifactRevision::decode(&obytes)?;
            if let Some(gc) = adjust_revision(&root, &orev, &mut orow, false, cv)? {
                mutations.push(gc);
            }
            predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                okey.clone(),
                obytes,
            ));
            mutations.push(Mutation::put(Family::ArtifactRevision, okey, orow.encode()));
            mutations.push(Mutation::Delete {
                family: Family::RevisionRef,
                key: revision_ref::key(&root, &path_owner, &orev),
            });
        }
        let entry = PathEntry {
            generation: cv,
            artifact_revision_id: binding.revision,
            logical_size: binding.logical_size,
            body_digest_uri: binding.body_digest_uri.clone(),
            manifest_digest_uri: binding.manifest_digest_uri.clone(),
            dependency_count: 0,
            dependency_depth: 0,
            content_type: binding.content_type.clone(),
            producer: op.producer.clone(),
            manifest_id: None,
            created_version: old.as_ref().map_or(cv, |o| o.created_version),
            modified_version: cv,
            index_projection: Vec::new(),
        };
        mutations.push(Mutation::put(Family::PathCurrent, pkey, entry.encode()));
        mutations.extend(index_projection::index_mutations(
            &root,
            &inc,
            &op.workbench_id,
            &vpath,
            old.as_ref(),
            Some(&entry),
        )?);
        let ws_next = ws.advanced(cv);
        mutations.push(Mutation::put(
            Family::WorkspaceCurrent,
            ws_key,
            ws_next.encode(),
        ));
        // The sealed commit, owned by the head consumer.
        let commit = Commit {
            source_workbench_id: op.workbench_id.clone(),
            source_incarnation: inc,
            content_digest_uri: op.content_digest_uri.clone(),
            manifest_digest_uri: op.manifest_digest_uri.clone(),
            tree_manifest_revision: binding.revision,
            member_count: op.member_count,
            member_digest: op.member_digest,
            unique_revision_count: op.revision_count,
            revision_digest: op.revision_digest,
            parents: op.parents.clone(),
            parent_digest: op.parent_digest,
            producer: op.producer.clone(),
            lineage: op.lineage.clone(),
            consumer_count: 1,
            consumer_epoch: 1,
            last_zero_consumer_version: None,
            state: CommitState::Sealed,
            retirement_cursor: None,
            created_version: cv,
            source_read_version: Some(op.source_read_version),
        };
        mutations.push(Mutation::put(
            Family::Commit,
            commit_key(&root, &op.commit_id),
            commit.encode(),
        ));
        mutations.push(Mutation::put(
            Family::WorkbenchCommitHead,
            hk,
            WorkbenchCommitHead {
                commit_id: op.commit_id,
                head_generation: cv,
            }
            .encode(),
        ));
        mutations.push(Mutation::put(
            Family::CommitConsumer,
            consumer_key(
                &root,
                &op.commit_id,
                ConsumerOwner::WorkbenchHead { incarnation: inc },
            ),
            CommitConsumer {
                consumer_epoch_at_add: 1,
                created_version: cv,
            }
            .encode(),
        ));
        if let Some(h) = &head {
            let Some((cbytes, mut c)) = read_commit(snap, &root, &h.commit_id)? else {
                return Err(Error::codec("commit", "head commit missing"));
            };
            release_consumer(&mut c, cv)?;
            predicates.push(Predicate::equals(
                Family::Commit,
                commit_key(&root, &h.commit_id),
                cbytes,
            ));
            mutations.push(Mutation::put(
                Family::Commit,
                commit_key(&root, &h.commit_id),
                c.encode(),
            ));
            mutations.push(Mutation::Delete {
                family: Family::CommitConsumer,
                key: consumer_key(
                    &root,
                    &h.commit_id,
                    ConsumerOwner::WorkbenchHead { incarnation: inc },
                ),
            });
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Complete;
        next.result = OperationResult::Succeeded(BuildCommitResult {
            commit_version: cv,
            head_generation: cv,
            manifest_generation: cv,
        });
        mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(checked_build(&op, &next)),
        ));
        mutations.push(Mutation::Delete {
            family: Family::HistoryHold,
            key: hold_key(&root, op_id),
        });
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"publish", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![ChangeEvent {
            workbench_id: op.workbench_id.clone(),
            incarnation: inc,
            kind: ChangeKind::ArtifactPublished,
            path: Some(vpath.clone()),
            before_generation: old.as_ref().map(|e| e.generation),
            after_generation: Some(cv),
            moved_from: None,
        }];
        Ok(Built::Command(Box::new(cmd), Ok(())))
    })?;
    match outcome {
        Ok(()) => Ok("complete"),
        Err(a) => {
            abort(shard, op_id, a)?;
            Ok("aborting")
        }
    }
}
