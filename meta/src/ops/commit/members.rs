//! CommitMember batches of `Building`.

use super::keys::{chain, encode_build, op_key, run_manifest_path};
use super::model::{MEMBER_BATCH, MEMBER_DOMAIN};
use super::state::{advanced, checked_build, commit_version, header, read_build, step_digest};
use crate::codec::{
    artifact_revision, revision_ref, ArtifactRevision, BuildCommitOperation, BuildCommitPhase,
    CommitMember, CommitMemberKey, OperationKind, PathEntry, RefOwner, RevisionRef, RevisionState,
    SetCursor, StagedManifestBinding,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId};
use crate::ops::{run_step as run, Step as Built};
use crate::path::{ordered_key, NormPath};
use crate::shard::MetaShard;
use crate::store::Snapshot;
use std::collections::BTreeSet;

pub(super) fn member_from_entry(entry: &PathEntry) -> CommitMember {
    CommitMember {
        artifact_revision_id: entry.artifact_revision_id,
        path_generation: entry.generation,
        body_digest_uri: entry.body_digest_uri.clone(),
        manifest_digest_uri: entry.manifest_digest_uri.clone(),
        logical_size: entry.logical_size,
        dependency_count: entry.dependency_count,
        dependency_depth: entry.dependency_depth,
        content_type: entry.content_type.clone(),
        producer: entry.producer.clone(),
        manifest_id: entry.manifest_id.clone(),
        projection: entry.index_projection.clone(),
    }
}

pub(super) fn virtual_member(op: &BuildCommitOperation, b: &StagedManifestBinding) -> CommitMember {
    CommitMember {
        artifact_revision_id: b.revision,
        // The run manifest's path generation is assigned by the final publishing command; the
        // frozen member records 0.
        path_generation: 0,
        body_digest_uri: b.body_digest_uri.clone(),
        manifest_digest_uri: b.manifest_digest_uri.clone(),
        logical_size: b.logical_size,
        dependency_count: 0,
        dependency_depth: 0,
        content_type: b.content_type.clone(),
        producer: op.producer.clone(),
        manifest_id: None,
        projection: Vec::new(),
    }
}

/// The next ≤ [`MEMBER_BATCH`] members after the cursor and whether the scan is complete.
pub(super) fn next_members(
    shard: &MetaShard,
    op: &BuildCommitOperation,
) -> Result<(Vec<(NormPath, CommitMember)>, bool)> {
    let Some(binding) = &op.staged_manifest else {
        return Err(Error::CommitLifecycle {
            reason: "the staged run manifest is not recorded".into(),
        });
    };
    let vpath = run_manifest_path()?;
    let vkey = ordered_key(&vpath);
    let reader = shard.read_at(op.source_read_version)?;
    let mut members: Vec<(NormPath, CommitMember)> = Vec::new();
    let mut after = op.cursor.members.after.clone();
    let mut more = true;
    while members.len() < MEMBER_BATCH && more {
        let (files, m) = reader.scan_files(
            &op.source_incarnation,
            None,
            after.as_ref(),
            MEMBER_BATCH - members.len(),
        )?;
        more = m;
        if let Some((p, _)) = files.last() {
            after = Some(p.clone());
        }
        for (p, e) in files {
            if p != vpath {
                members.push((p, member_from_entry(&e)));
            }
        }
    }
    let virtual_pending = op
        .cursor
        .members
        .after
        .as_ref()
        .is_none_or(|a| ordered_key(a) < vkey);
    if virtual_pending {
        let fits = !more || members.last().is_some_and(|(p, _)| vkey < ordered_key(p));
        if fits {
            members.push((vpath.clone(), virtual_member(op, binding)));
            members.sort_by_key(|(p, _)| ordered_key(p));
            if members.len() > MEMBER_BATCH {
                members.pop();
                more = true;
            }
        }
    }
    Ok((members, !more))
}

pub(super) fn member_batch(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Building || op.cursor.members.complete {
            return Ok(Built::Done(()));
        }
        let (members, complete) = next_members(shard, &op)?;
        let cv = commit_version(snap)?;
        let mut next = op.clone();
        let mut predicates = vec![Predicate::equals(
            Family::Operation,
            key.clone(),
            bytes.clone(),
        )];
        let mut mutations = Vec::new();
        let mut seen: BTreeSet<ArtifactRevisionId> = BTreeSet::new();
        for (path, member) in &members {
            let mkey = CommitMemberKey {
                root,
                commit_id: op.commit_id,
                path: path.clone(),
            }
            .encode();
            let value = member.encode();
            next.member_digest = chain(
                MEMBER_DOMAIN,
                &next.member_digest,
                &[&ordered_key(path), &value],
            );
            next.member_count += 1;
            // No per-member predicate: the Operation CAS orders member batches (a command bound
            // of 192 predicates leaves room for one Equals + one Absent per new revision).
            mutations.push(Mutation::put(Family::CommitMember, mkey, value));
            let rev = member.artifact_revision_id;
            if !seen.insert(rev) {
                continue;
            }
            let rkey = revision_ref::key(&root, &RefOwner::Commit(op.commit_id), &rev);
            if snap.get(Family::RevisionRef, &rkey)?.is_some() {
                continue;
            }
            let akey = artifact_revision::key(&root, &rev);
            let Some(abytes) = snap.get(Family::ArtifactRevision, &akey)? else {
                return Err(Error::RevisionUnavailable {
                    revision: rev.to_hex(),
                    reason: "missing".into(),
                });
            };
            let mut arow = ArtifactRevision::decode(&abytes)?;
            if arow.state != RevisionState::Available {
                return Err(Error::RevisionUnavailable {
                    revision: rev.to_hex(),
                    reason: format!("state {:?}", arow.state),
                });
            }
            arow.strong_reference_count = arow.strong_reference_count.saturating_add(1);
            arow.reference_epoch = arow.reference_epoch.saturating_add(1);
            predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                akey.clone(),
                abytes,
            ));
            predicates.push(Predicate::absent(Family::RevisionRef, rkey.clone()));
            mutations.push(Mutation::put(
                Family::RevisionRef,
                rkey,
                RevisionRef {
                    reference_epoch_at_add: arow.reference_epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            mutations.push(Mutation::put(Family::ArtifactRevision, akey, arow.encode()));
        }
        next.cursor.members = SetCursor {
            after: members
                .last()
                .map(|(p, _)| p.clone())
                .or(op.cursor.members.after.clone()),
            complete,
        };
        if next.cursor.members.complete && next.parents.is_empty() {
            next.cursor.parents.complete = true;
        }
        mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(checked_build(&op, &next)),
        ));
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"members", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        Ok(Built::Command(Box::new(cmd), ()))
    })
}
