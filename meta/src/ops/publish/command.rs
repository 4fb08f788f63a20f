//! The publication command: planned at one snapshot (fences, replay, generation CAS, append base, dependencies, namespace) and executed once.

use super::invariants::checked_publish;
use super::request::{
    command_digest, dependency_digest, dependency_owners, receipt, validate_request, PathCondition,
    PublishReceipt, PublishRequest,
};
use crate::codec::{
    artifact_manifest, artifact_revision, gc_candidate, manifest_digest_uri, path_current,
    revision_ref, workspace_current, ArtifactRevision, ChangeEvent, ChangeKind, CommandResult,
    GcCandidate, GcClaimState, PathEntry, RefOwner, RevisionRef, RevisionState, WorkspaceCurrent,
};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::projection::{self as index_projection};
use crate::command::{CommandOutcome, MetadataCommand, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::ArtifactRevisionId;
use crate::read::namespace_check;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::Snapshot;
use std::collections::BTreeMap;

/// Publishes one body (see the module docs). Validation happens before any read or write; an
/// exact request-id replay returns the stored receipt even after later commits.
///
/// Errors: [`Error::InvalidArgument`], [`Error::WorkspaceNotFound`], [`Error::PathAlreadyExists`],
/// [`Error::PathNotFound`], [`Error::PathIsDirectory`], [`Error::AncestorIsFile`],
/// [`Error::GenerationConflict`], [`Error::RequestReplayMismatch`],
/// [`Error::RevisionUnavailable`], [`Error::ReadVersionConflict`] after [`crate::ops::MAX_ATTEMPTS`],
/// [`Error::Fenced`], codec and storage errors.
pub fn publish(shard: &MetaShard, req: PublishRequest) -> Result<PublishReceipt> {
    validate_request(&req)?;
    let digest = command_digest(&req);
    crate::ops::sequenced_retrying(shard, |seq| attempt(shard, seq, &req, digest))
}

/// Reads one ArtifactRevision row, returning its bytes and decoded value.
pub(super) fn read_revision<S: Snapshot>(
    snap: &S,
    key: &[u8],
) -> Result<Option<(Vec<u8>, ArtifactRevision)>> {
    match snap.get(Family::ArtifactRevision, key)? {
        None => Ok(None),
        Some(b) => {
            let r = ArtifactRevision::decode(&b)?;
            Ok(Some((b, r)))
        }
    }
}

/// What one publication attempt turns into at a snapshot.
pub(crate) enum Planned {
    /// The stored result of an earlier identical request.
    Replay(Box<CommandOutcome>),
    /// The command to execute.
    Command(Box<MetadataCommand>),
}

pub(super) fn attempt(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    req: &PublishRequest,
    digest: [u8; 32],
) -> Result<PublishReceipt> {
    seq.prepare_write()?;
    let snap = seq.snapshot();
    match plan(shard, &snap, req, digest)? {
        Planned::Replay(out) => receipt(*out),
        Planned::Command(cmd) => {
            drop(snap);
            receipt(seq.execute(*cmd)?)
        }
    }
}

/// Builds the publication command at `snap`: point reads of the fence rows (marker, RootFence,
/// owner epoch, recovery tail), the CommandDedupe row, WorkspaceCurrent, PathCurrent, the new
/// ArtifactRevision (must be absent), each distinct dependency owner (≤
/// [`MAX_DEPENDENCY_OWNERS`]) and the replaced revision; when the path is created, the
/// [`namespace_check`] (ancestor point reads and one limit-1 descendant probe).
pub(crate) fn plan<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    req: &PublishRequest,
    digest: [u8; 32],
) -> Result<Planned> {
    plan_with(shard, snap, req, digest, None)
}

/// The publish operation a ledger-driven publication moves Finalizing -> Published in the same
/// command (see [`crate::ops::publish::operation`]).
pub(crate) struct OperationBinding {
    /// Operation key.
    pub(crate) key: Vec<u8>,
    /// Exact value read, which the command predicates unchanged (`None`: the row must be
    /// absent — a reserved publication creates the operation in its final command).
    pub(crate) bytes: Option<Vec<u8>>,
    /// The decoded operation.
    pub(crate) op: crate::codec::PublishOperation,
}

/// [`plan`] with an optional publish-operation binding: the command then also predicates the
/// operation row unchanged and writes it as Published with the result (commit version and new
/// path generation).
pub(crate) fn plan_with<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    req: &PublishRequest,
    digest: [u8; 32],
    binding: Option<&OperationBinding>,
) -> Result<Planned> {
    let root = shard.root_id();
    // Validation order (docs/metadata-format.md): schema marker, RootFence and owner epoch before replay.
    check_handle_fences(snap, &shard.inner.fence())?;
    if let Some(out) = replay_lookup(snap, &root, &req.request_id, &digest)? {
        return Ok(Planned::Replay(Box::new(out)));
    }
    let read_version = snap.version();
    let cv = read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;

    // Workspace marker.
    let ws_key = workspace_current::key(&root, &req.workbench_id);
    let ws_bytes = snap
        .get(Family::WorkspaceCurrent, &ws_key)?
        .ok_or_else(|| Error::WorkspaceNotFound {
            workbench_id: req.workbench_id.clone(),
        })?;
    let ws = WorkspaceCurrent::decode(&ws_bytes)?;
    if !crate::read::workspace_live(snap, &ws, shard.wall_unix_ms())? {
        return Err(Error::WorkspaceNotFound {
            workbench_id: req.workbench_id.clone(),
        });
    }
    let inc = ws.incarnation;

    // Path condition.
    let path_key = path_current::key(&root, &inc, &req.path);
    let old_bytes = snap.get(Family::PathCurrent, &path_key)?;
    let old = old_bytes.as_deref().map(PathEntry::decode).transpose()?;
    let actual = old.as_ref().map(|e| e.generation);
    // A path the command would create must be neither below a file nor a directory; this is
    // checked before the condition so a replace or append naming a directory is refused as one.
    let namespace = match old {
        None => namespace_check(snap, &root, &inc, &req.path)?,
        Some(_) => Vec::new(),
    };
    match req.condition {
        PathCondition::Create => {
            if old.is_some() {
                return Err(Error::PathAlreadyExists);
            }
        }
        PathCondition::Replace {
            expected_generation,
        } => match actual {
            None => return Err(Error::PathNotFound),
            Some(g) if g != expected_generation => {
                return Err(Error::GenerationConflict {
                    expected: expected_generation,
                    actual: g,
                })
            }
            Some(_) => {}
        },
        PathCondition::Append {
            expected_generation,
        } => {
            if actual != expected_generation {
                return Err(Error::GenerationConflict {
                    expected: expected_generation.unwrap_or(0),
                    actual: actual.unwrap_or(0),
                });
            }
        }
    }

    // The new revision must be unused.
    let new_rev_key = artifact_revision::key(&root, &req.revision_id);
    if snap.get(Family::ArtifactRevision, &new_rev_key)?.is_some() {
        return Err(Error::invalid(format!(
            "artifact revision {} already exists; allocate a fresh revision id",
            req.revision_id
        )));
    }

    let mut predicates = vec![
        Predicate::equals(Family::WorkspaceCurrent, ws_key.clone(), ws_bytes),
        match &old_bytes {
            None => Predicate::absent(Family::PathCurrent, path_key.clone()),
            Some(b) => Predicate::equals(Family::PathCurrent, path_key.clone(), b.clone()),
        },
        Predicate::absent(Family::ArtifactRevision, new_rev_key.clone()),
    ];
    predicates.extend(namespace);
    let mut mutations = Vec::new();

    // Revisions whose reference counts change: id -> (original bytes, updated row).
    let mut touched: BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)> = BTreeMap::new();

    // Dependency owners: each must be Available; add one RevisionDependency ref each.
    let owners = dependency_owners(req);
    let mut expected_depth = 0u32;
    for owner in &owners {
        let key = artifact_revision::key(&root, owner);
        let Some((bytes, mut row)) = read_revision(snap, &key)? else {
            return Err(Error::RevisionUnavailable {
                revision: owner.to_hex(),
                reason: "missing".into(),
            });
        };
        if row.state != RevisionState::Available {
            return Err(Error::RevisionUnavailable {
                revision: owner.to_hex(),
                reason: format!("state {:?}", row.state),
            });
        }
        expected_depth = expected_depth.max(row.dependency_depth.saturating_add(1));
        row.strong_reference_count = row.strong_reference_count.saturating_add(1);
        row.reference_epoch = row.reference_epoch.saturating_add(1);
        mutations.push(Mutation::put(
            Family::RevisionRef,
            revision_ref::key(
                &root,
                &RefOwner::RevisionDependency {
                    child: req.revision_id,
                },
                owner,
            ),
            RevisionRef {
                reference_epoch_at_add: row.reference_epoch,
                created_version: cv,
            }
            .encode(),
        ));
        touched.insert(*owner, (bytes, row));
    }
    if req.dependency_depth != expected_depth {
        return Err(Error::invalid(format!(
            "dependency_depth is {} but the manifest's owners give {expected_depth}",
            req.dependency_depth
        )));
    }

    // Release the replaced path reference.
    let path_owner = RefOwner::Path {
        incarnation: inc,
        path: req.path.clone(),
    };
    if let Some(old) = &old {
        let old_rev = old.artifact_revision_id;
        mutations.push(Mutation::Delete {
            family: Family::RevisionRef,
            key: revision_ref::key(&root, &path_owner, &old_rev),
        });
        let slot = match touched.entry(old_rev) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let key = artifact_revision::key(&root, &old_rev);
                let Some(found) = read_revision(snap, &key)? else {
                    return Err(Error::codec(
                        "artifact_revision",
                        format!("PathCurrent names missing revision {old_rev}"),
                    ));
                };
                v.insert(found)
            }
        };
        let row = &mut slot.1;
        row.strong_reference_count = row
            .strong_reference_count
            .checked_sub(1)
            .ok_or_else(|| Error::codec("artifact_revision", "strong reference count underflow"))?;
        row.reference_epoch = row.reference_epoch.saturating_add(1);
    }
    for (id, (bytes, mut row)) in touched {
        let key = artifact_revision::key(&root, &id);
        if row.strong_reference_count == 0 {
            row.last_zero_ref_version = Some(cv);
            mutations.push(Mutation::put(
                Family::GcCandidate,
                gc_candidate::key(&root, &id, row.reference_epoch),
                GcCandidate {
                    last_zero_ref_version: cv,
                    claim_state: GcClaimState::Candidate,
                    retry_count: 0,
                }
                .encode(),
            ));
        }
        predicates.push(Predicate::equals(
            Family::ArtifactRevision,
            key.clone(),
            bytes,
        ));
        mutations.push(Mutation::put(Family::ArtifactRevision, key, row.encode()));
    }

    // The new revision, its manifest and its path reference.
    let manifest_digest = manifest_digest_uri(&req.manifest);
    let revision = ArtifactRevision {
        logical_size: req.logical_size,
        body_digest_uri: req.body_digest_uri.clone(),
        manifest_digest_uri: manifest_digest.clone(),
        block_count: req.manifest.len() as u64,
        dependency_count: owners.len() as u32,
        dependency_depth: req.dependency_depth,
        dependency_digest: dependency_digest(&owners),
        content_type: req.content_type.clone(),
        state: RevisionState::Available,
        reference_epoch: 1,
        strong_reference_count: 1,
        last_zero_ref_version: None,
        created_version: cv,
    };
    mutations.push(Mutation::put(
        Family::ArtifactRevision,
        new_rev_key,
        revision.encode(),
    ));
    mutations.push(Mutation::put(
        Family::RevisionRef,
        revision_ref::key(&root, &path_owner, &req.revision_id),
        RevisionRef {
            reference_epoch_at_add: 1,
            created_version: cv,
        }
        .encode(),
    ));
    let entry = PathEntry {
        generation: cv,
        artifact_revision_id: req.revision_id,
        logical_size: req.logical_size,
        body_digest_uri: req.body_digest_uri.clone(),
        manifest_digest_uri: manifest_digest,
        dependency_count: owners.len() as u32,
        dependency_depth: req.dependency_depth,
        content_type: req.content_type.clone(),
        producer: req.producer.clone(),
        manifest_id: req.manifest_id.clone(),
        created_version: old.as_ref().map_or(cv, |o| o.created_version),
        modified_version: cv,
        index_projection: index_projection::encode_projection(&req.index_fields)?,
    };
    mutations.push(Mutation::put(Family::PathCurrent, path_key, entry.encode()));
    // Index projection: same command as PathCurrent (bounded by the field count).
    mutations.extend(index_projection::index_mutations(
        &root,
        &inc,
        &req.workbench_id,
        &req.path,
        old.as_ref(),
        Some(&entry),
    )?);
    let ws_next = ws.advanced(cv);
    mutations.push(Mutation::put(
        Family::WorkspaceCurrent,
        ws_key,
        ws_next.encode(),
    ));
    for row in &req.manifest {
        mutations.push(Mutation::put(
            Family::ArtifactManifest,
            artifact_manifest::key(&root, &req.revision_id, row.object_index),
            row.encode_value(),
        ));
    }

    if let Some(b) = binding {
        predicates.push(match &b.bytes {
            Some(bytes) => Predicate::equals(Family::Operation, b.key.clone(), bytes.clone()),
            None => Predicate::absent(Family::Operation, b.key.clone()),
        });
        let mut published = b.op.clone();
        published.phase = crate::codec::PublishPhase::Published;
        published.result = crate::codec::OperationResult::Succeeded(crate::codec::PublishResult {
            commit_version: cv,
            path_generation: Some(cv),
        });
        mutations.push(Mutation::put(
            Family::Operation,
            b.key.clone(),
            crate::codec::Operation::Publish(checked_publish(&b.op, published)).encode(),
        ));
    }

    let mut cmd = shard.command_header(
        req.request_id,
        digest,
        read_version,
        CommandResult::Published {
            generation: cv,
            created: old.is_none(),
            replaced_generation: actual,
            entry,
        },
    );
    cmd.predicates = predicates;
    cmd.mutations = mutations;
    cmd.event_projection = vec![ChangeEvent {
        workbench_id: req.workbench_id.clone(),
        incarnation: inc,
        kind: if matches!(req.condition, PathCondition::Append { .. }) {
            ChangeKind::ArtifactAppended
        } else {
            ChangeKind::ArtifactPublished
        },
        path: Some(req.path.clone()),
        before_generation: actual,
        after_generation: Some(cv),
        moved_from: None,
    }];
    Ok(Planned::Command(Box::new(cmd)))
}
impl MetaShard {
    /// Publishes one artifact body (see [`publish`]).
    pub fn publish(&self, req: PublishRequest) -> Result<PublishReceipt> {
        publish(self, req)
    }
}
