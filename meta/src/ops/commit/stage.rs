//! Staging the run manifest of a build.

use super::keys::{encode_build, first16, op_key, sha, staged_manifest_revision};
use super::model::{StagedManifest, STAGED_PUBLISH_DOMAIN};
use super::state::{advanced, checked_build, commit_version, header, read_build, step_digest};
use crate::codec::{
    artifact_manifest, artifact_revision, manifest_digest_uri, revision_ref, ArtifactRevision,
    BuildCommitOperation, BuildCommitPhase, OperationKind, RefOwner, RevisionRef, RevisionState,
    StagedManifestBinding,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::OperationId;
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;

/// Step 2: records the uploaded staged run manifest (see the module docs). Idempotent: when the
/// operation already carries the same binding nothing is written.
///
/// Errors: [`Error::InvalidArgument`] (wrong revision id, malformed rows),
/// [`Error::CommitLifecycle`] (operation not `Building`), [`Error::OperationInputMismatch`]
/// (another binding is recorded), codec and storage errors.
pub fn stage_manifest(
    shard: &MetaShard,
    op_id: &OperationId,
    staged: &StagedManifest,
) -> Result<BuildCommitOperation> {
    let root = shard.root_id();
    if staged.revision_id != staged_manifest_revision(&root, op_id) {
        return Err(Error::invalid(
            "the staged run manifest must use the operation's staged revision id",
        ));
    }
    let mut offset = 0u64;
    for (i, row) in staged.manifest.iter().enumerate() {
        if row.object_index != i as u64
            || row.logical_offset != offset
            || row.length == 0
            || row.physical_owner_revision != staged.revision_id
        {
            return Err(Error::invalid("staged manifest rows are malformed"));
        }
        offset = offset
            .checked_add(row.length)
            .ok_or_else(|| Error::invalid("manifest lengths overflow"))?;
    }
    if offset != staged.logical_size || staged.manifest.len() > crate::command::MAX_MANIFEST_ROWS {
        return Err(Error::invalid(
            "staged manifest rows do not cover the logical size",
        ));
    }
    crate::ops::publish::validate_digest_uri("body_digest_uri", &staged.body_digest_uri)?;
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::CommitLifecycle {
                reason: "the build operation does not exist".into(),
            });
        };
        let binding = StagedManifestBinding {
            publish_operation_id: OperationId(first16(&sha(&[
                STAGED_PUBLISH_DOMAIN,
                op_id.as_bytes(),
            ]))),
            incarnation: op.source_incarnation,
            revision: staged.revision_id,
            logical_size: staged.logical_size,
            body_digest_uri: staged.body_digest_uri.clone(),
            manifest_digest_uri: manifest_digest_uri(&staged.manifest),
            content_type: staged.content_type.clone(),
        };
        if let Some(existing) = &op.staged_manifest {
            if *existing == binding {
                return Ok(Built::Done(op));
            }
            return Err(Error::OperationInputMismatch {
                reason: "another staged run manifest is already bound".into(),
            });
        }
        if op.phase != BuildCommitPhase::Building {
            return Err(Error::CommitLifecycle {
                reason: format!("build operation is {:?}", op.phase),
            });
        }
        let cv = commit_version(snap)?;
        let rev_key = artifact_revision::key(&root, &staged.revision_id);
        let revision = ArtifactRevision {
            logical_size: staged.logical_size,
            body_digest_uri: staged.body_digest_uri.clone(),
            manifest_digest_uri: binding.manifest_digest_uri.clone(),
            block_count: staged.manifest.len() as u64,
            dependency_count: 0,
            dependency_depth: 0,
            dependency_digest: sha(&[]),
            content_type: staged.content_type.clone(),
            state: RevisionState::Available,
            reference_epoch: 1,
            strong_reference_count: 1,
            last_zero_ref_version: None,
            created_version: cv,
        };
        let mut next = op.clone();
        next.staged_manifest = Some(binding);
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"stage", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates = vec![
            Predicate::equals(Family::Operation, key.clone(), bytes),
            Predicate::absent(Family::ArtifactRevision, rev_key.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::ArtifactRevision, rev_key, revision.encode()),
            Mutation::put(
                Family::RevisionRef,
                revision_ref::key(&root, &RefOwner::Commit(op.commit_id), &staged.revision_id),
                RevisionRef {
                    reference_epoch_at_add: 1,
                    created_version: cv,
                }
                .encode(),
            ),
            Mutation::put(
                Family::Operation,
                key.clone(),
                encode_build(checked_build(&op, &next)),
            ),
        ];
        for row in &staged.manifest {
            cmd.mutations.push(Mutation::put(
                Family::ArtifactManifest,
                artifact_manifest::key(&root, &staged.revision_id, row.object_index),
                row.encode_value(),
            ));
        }
        Ok(Built::Command(Box::new(cmd), next))
    })
}
