//! `Deleting -> Deleted`: the final command releasing the revision's dependencies.

use super::rows::{manifest_rows, op_key, owned, read_revision, read_rows, recorded, step_digest};
use super::state::{checked_gc, CollectedRevision};
use crate::codec::{
    artifact_manifest, artifact_revision, revision_ref, GcCandidateKey, GcPhase, Operation,
    OperationResult, RefOwner, RevisionState,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId, RequestId};
use crate::ops::{run_step, Step};
use crate::shard::MetaShard;
use crate::store::Snapshot;
use std::collections::BTreeSet;

/// The final command: Deleted, dependency set released, manifest and candidate pruned.
pub(super) fn finish(
    shard: &MetaShard,
    key: &GcCandidateKey,
    id: &OperationId,
) -> Result<Option<CollectedRevision>> {
    let root = key.root;
    let okey = op_key(&root, id);
    let rkey = artifact_revision::key(&root, &key.revision);
    let ckey = key.encode();
    run_step(shard, |snap| {
        let Some(rows) = read_rows(snap, key, id)? else {
            return Ok(Step::Done(None));
        };
        let Some((op_bytes, op)) = rows.op else {
            return Ok(Step::Done(None));
        };
        let ok = matches!(
            (rows.rev.state, op.phase),
            (RevisionState::Deleting, GcPhase::Deleting)
                | (RevisionState::Quarantined, GcPhase::Quarantined)
        );
        if !ok {
            return Ok(Step::Done(None));
        }
        let cv = snap
            .version()
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        let manifest = manifest_rows(snap, &root, &key.revision, 0, usize::MAX)?;
        let owners: BTreeSet<ArtifactRevisionId> = manifest
            .iter()
            .map(|r| r.physical_owner_revision)
            .filter(|o| *o != key.revision)
            .collect();
        if owners.len() as u64 != u64::from(rows.rev.dependency_count)
            || crate::ops::publish::dependency_digest(&owners) != rows.rev.dependency_digest
        {
            return Err(Error::codec(
                "artifact_revision",
                format!(
                    "revision {}: the manifest's dependency owners do not match the sealed dependency count/digest; nothing released",
                    key.revision
                ),
            ));
        }
        let own = owned(&key.revision, &manifest);
        let mut next_rev = rows.rev.clone();
        next_rev.state = RevisionState::Deleted;
        let mut next_op = op.clone();
        next_op.phase = GcPhase::Deleted;
        next_op.result = OperationResult::Succeeded(cv);
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"deleted", id, &op_bytes),
            snap.version(),
            recorded(id, GcPhase::Deleted),
        );
        cmd.predicates = vec![
            Predicate::equals(Family::Operation, okey.clone(), op_bytes),
            Predicate::equals(Family::ArtifactRevision, rkey.clone(), rows.rev_bytes),
            Predicate::equals(Family::GcCandidate, ckey.clone(), rows.cand_bytes),
        ];
        cmd.mutations = vec![
            Mutation::put(
                Family::Operation,
                okey.clone(),
                Operation::Gc(checked_gc(&op, next_op)).encode(),
            ),
            Mutation::put(Family::ArtifactRevision, rkey.clone(), next_rev.encode()),
            Mutation::Delete {
                family: Family::GcCandidate,
                key: ckey.clone(),
            },
        ];
        for owner in &owners {
            let dep_key = revision_ref::key(
                &root,
                &RefOwner::RevisionDependency {
                    child: key.revision,
                },
                owner,
            );
            if snap.get(Family::RevisionRef, &dep_key)?.is_none() {
                return Err(Error::codec(
                    "revision_ref",
                    format!(
                        "revision {}: the dependency reference to {owner} is missing; nothing released",
                        key.revision
                    ),
                ));
            }
            let Some((obytes, mut orow)) = read_revision(snap, &root, owner)? else {
                return Err(Error::codec(
                    "artifact_revision",
                    format!("dependency owner {owner} is missing"),
                ));
            };
            let okey_rev = artifact_revision::key(&root, owner);
            if let Some(candidate) =
                crate::ops::commit::adjust_revision(&root, owner, &mut orow, false, cv)?
            {
                cmd.mutations.push(candidate);
            }
            cmd.predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                okey_rev.clone(),
                obytes,
            ));
            cmd.mutations.push(Mutation::put(
                Family::ArtifactRevision,
                okey_rev,
                orow.encode(),
            ));
            cmd.predicates.push(Predicate {
                family: Family::RevisionRef,
                key: dep_key.clone(),
                expect: crate::command::Expectation::Present,
            });
            cmd.mutations.push(Mutation::Delete {
                family: Family::RevisionRef,
                key: dep_key,
            });
        }
        for row in &manifest {
            cmd.mutations.push(Mutation::Delete {
                family: Family::ArtifactManifest,
                key: artifact_manifest::key(&root, &key.revision, row.object_index),
            });
        }
        let collected = CollectedRevision {
            revision: key.revision,
            logical_size: rows.rev.logical_size,
            objects: own.len() as u64,
            object_bytes: own.iter().map(|o| o.length).sum(),
            released_dependencies: owners.into_iter().collect(),
            commit_version: Some(cv),
            reconciled: false,
        };
        Ok(Step::Command(Box::new(cmd), Some(collected)))
    })
}
