//! `(none) -> Preparing`: the prepare command.

use super::identity::{initialization_digest, manifest_path, restore_manifest_entry};
use super::plan::{read_commit, snapshot_error};
use super::row::{command, retrying, run};
use super::row::{op_key, read_op};
use super::state::{
    RestoreError, RestoreManifestDescriptor, RestorePlan, Result, EMPTY_MEMBER_DIGEST,
};
use crate::codec::{
    artifact_manifest, artifact_revision, path_current, revision_ref, workspace_current,
    workspace_incarnation_claim, ArtifactRevision, CommitConsumer, CommitConsumerKey, CommitKey,
    CommitState, ConsumerOwner, Operation, OperationResult, RefOwner, RestoreCursor,
    RestoreOperation, RestorePhase, RestoreSource, RevisionRef, RevisionState, WorkspaceCurrent,
    WorkspaceIncarnationClaim, WorkspaceState,
};
use crate::command::projection as index_projection;
use crate::command::{Mutation, Predicate};
use crate::error::Error;
use crate::family::Family;
use crate::ops::lease_clock;
use crate::ops::snapshot::attach_consumer_parts;
use crate::shard::MetaShard;
use crate::store::Snapshot;
use sha2::{Digest, Sha256};

/// Creates the operation (phase `Preparing`) with its staging marker, manifest path and source
/// attachment in one command — or, when this exact request was prepared before, authenticates
/// it and returns the stored record.
///
/// Errors: [`RestoreError::IdentityCollision`], [`RestoreError::RequestMismatch`], the source
/// errors of [`plan`] (re-checked at the command's read version),
/// [`RestoreError::DestinationExists`], [`RestoreError::Meta`] (invalid manifest descriptor,
/// exhausted read-version retries, fence, codec, storage).
pub fn prepare(
    shard: &MetaShard,
    plan: &RestorePlan,
    desc: &RestoreManifestDescriptor,
) -> Result<RestoreOperation> {
    crate::ops::publish::validate_digest_uri("body_digest_uri", &desc.body_digest_uri)?;
    if desc.content_type.is_empty() || desc.manifest.is_empty() {
        return Err(Error::invalid("restore manifest descriptor is incomplete").into());
    }
    let entry = restore_manifest_entry(plan.source_read_version, desc);
    let entry_bytes = entry.encode();
    let init = initialization_digest(&plan.identity_digest, &entry_bytes);
    let authenticate = |op: RestoreOperation| -> Result<RestoreOperation> {
        if op.identity_digest != plan.identity_digest {
            return Err(RestoreError::IdentityCollision);
        }
        if op.initialization_digest != init {
            return Err(RestoreError::RequestMismatch);
        }
        Ok(op)
    };
    if let Some(op) = &plan.existing {
        return authenticate((**op).clone());
    }
    let root = shard.root_id();
    let op_id = plan.operation_id;
    let t = &plan.target;
    let mpath = manifest_path()?;
    retrying(|| {
        shard.sequenced(|seq| {
            let snap = seq.snapshot();
            if let Some((_, op)) = read_op(&snap, &root, &op_id)? {
                return authenticate(op);
            }
            let read_version = snap.version();
            let cv = read_version + 1;
            let mut predicates = vec![Predicate::absent(Family::Operation, op_key(&root, &op_id))];
            let mut mutations = Vec::new();

            // Destination marker: absent, or the exact Retired marker of a cleaned restore.
            let dest_key = workspace_current::key(&root, &t.destination_workbench_id);
            let current = snap.get(Family::WorkspaceCurrent, &dest_key)?;
            match (&current, &plan.reclaim_marker) {
                (None, _) => predicates.push(Predicate::absent(
                    Family::WorkspaceCurrent,
                    dest_key.clone(),
                )),
                (Some(b), Some(r)) if b == r => predicates.push(Predicate::equals(
                    Family::WorkspaceCurrent,
                    dest_key.clone(),
                    b.clone(),
                )),
                _ => {
                    return Err(RestoreError::DestinationExists {
                        workbench_id: t.destination_workbench_id.clone(),
                    })
                }
            }
            let marker = WorkspaceCurrent {
                incarnation: plan.destination_incarnation,
                workspace_revision: 1,
                state: WorkspaceState::Staging,
                owning_operation: Some(op_id),
                created_version: cv,
                modified_version: cv,
                expires_at_unix_ms: None,
            };
            mutations.push(Mutation::put(
                Family::WorkspaceCurrent,
                dest_key,
                marker.encode(),
            ));
            let claim_key = workspace_incarnation_claim::key(&root, &plan.destination_incarnation);
            predicates.push(Predicate::absent(
                Family::WorkspaceIncarnationClaim,
                claim_key.clone(),
            ));
            mutations.push(Mutation::put(
                Family::WorkspaceIncarnationClaim,
                claim_key,
                WorkspaceIncarnationClaim {
                    workbench_id: t.destination_workbench_id.clone(),
                }
                .encode(),
            ));

            // Source attachment.
            match t.source {
                RestoreSource::Snapshot(id) => {
                    let lease = lease_clock::peek(&snap, t.now_unix_ms, t.policy.skew_grace_ms)?;
                    let parts = attach_consumer_parts(
                        shard,
                        &snap,
                        &plan.source_incarnation,
                        id,
                        op_id,
                        &lease,
                    )
                    .map_err(|e| snapshot_error(e, id.get()))?;
                    if parts.read_version != plan.source_read_version {
                        return Err(RestoreError::SnapshotNotFound {
                            snapshot_id: id.get(),
                        });
                    }
                    predicates.extend(parts.predicates);
                    mutations.extend(parts.mutations);
                }
                RestoreSource::Commit(id) => {
                    let (bytes, mut c) = read_commit(&snap, &root, &id)?.ok_or_else(|| {
                        RestoreError::CommitNotFound {
                            commit_id: id.to_hex(),
                        }
                    })?;
                    if c.state != CommitState::Sealed {
                        return Err(RestoreError::CommitUnavailable {
                            commit_id: id.to_hex(),
                            state: c.state,
                        });
                    }
                    c.consumer_count = c.consumer_count.saturating_add(1);
                    c.consumer_epoch = c.consumer_epoch.saturating_add(1);
                    let key = CommitKey {
                        root,
                        commit_id: id,
                    }
                    .encode();
                    predicates.push(Predicate::equals(Family::Commit, key.clone(), bytes));
                    let consumer_key = CommitConsumerKey {
                        root,
                        commit_id: id,
                        owner: ConsumerOwner::Lease {
                            operation_id: op_id,
                        },
                    }
                    .encode();
                    predicates.push(Predicate::absent(
                        Family::CommitConsumer,
                        consumer_key.clone(),
                    ));
                    mutations.push(Mutation::put(
                        Family::CommitConsumer,
                        consumer_key,
                        CommitConsumer {
                            consumer_epoch_at_add: c.consumer_epoch,
                            created_version: cv,
                        }
                        .encode(),
                    ));
                    mutations.push(Mutation::put(Family::Commit, key, c.encode()));
                }
            }

            // RestoreStaging manifest: hidden revision, its path reference and PathCurrent under
            // the staging incarnation.
            let rev_key = artifact_revision::key(&root, &desc.revision_id);
            predicates.push(Predicate::absent(Family::ArtifactRevision, rev_key.clone()));
            mutations.push(Mutation::put(
                Family::ArtifactRevision,
                rev_key,
                ArtifactRevision {
                    logical_size: desc.logical_size,
                    body_digest_uri: desc.body_digest_uri.clone(),
                    manifest_digest_uri: entry.manifest_digest_uri.clone(),
                    block_count: desc.manifest.len() as u64,
                    dependency_count: 0,
                    dependency_depth: 0,
                    dependency_digest: Sha256::digest(b"").into(),
                    content_type: desc.content_type.clone(),
                    state: RevisionState::Available,
                    reference_epoch: 1,
                    strong_reference_count: 1,
                    last_zero_ref_version: None,
                    created_version: cv,
                }
                .encode(),
            ));
            for row in &desc.manifest {
                mutations.push(Mutation::put(
                    Family::ArtifactManifest,
                    artifact_manifest::key(&root, &desc.revision_id, row.object_index),
                    row.encode_value(),
                ));
            }
            mutations.push(Mutation::put(
                Family::RevisionRef,
                revision_ref::key(
                    &root,
                    &RefOwner::Path {
                        incarnation: plan.destination_incarnation,
                        path: mpath.clone(),
                    },
                    &desc.revision_id,
                ),
                RevisionRef {
                    reference_epoch_at_add: 1,
                    created_version: cv,
                }
                .encode(),
            ));
            mutations.push(Mutation::put(
                Family::PathCurrent,
                path_current::key(&root, &plan.destination_incarnation, &mpath),
                entry_bytes.clone(),
            ));
            mutations.extend(index_projection::index_mutations(
                &root,
                &plan.destination_incarnation,
                &t.destination_workbench_id,
                &mpath,
                None,
                Some(&entry),
            )?);

            let op = RestoreOperation {
                phase: RestorePhase::Preparing,
                source_workbench_id: t.source_workbench_id.clone(),
                source_incarnation: plan.source_incarnation,
                source: t.source,
                source_read_version: plan.source_read_version,
                destination_workbench_id: t.destination_workbench_id.clone(),
                destination_incarnation: plan.destination_incarnation,
                identity_digest: plan.identity_digest,
                initialization_digest: init,
                restore_manifest_entry: entry_bytes.clone(),
                cursor: RestoreCursor::default(),
                member_count: 0,
                member_digest: EMPTY_MEMBER_DIGEST,
                cleanup_next_sequence: 0,
                result: OperationResult::Pending,
            };
            mutations.push(Mutation::put(
                Family::Operation,
                op_key(&root, &op_id),
                Operation::Restore(Box::new(op.clone())).encode(),
            ));
            let cmd = command(shard, read_version, b"prepare", &op_id, &marker)?;
            run(seq, cmd, predicates, mutations, Vec::new())?;
            Ok(op)
        })
    })
}
