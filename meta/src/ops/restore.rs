//! Restore (docs/metadata-format.md, "Restore Closure"): same-root, destination-creating restore of a frozen
//! source — a leased snapshot's read version or a sealed commit's CommitMember rows — into a fresh
//! staging incarnation that becomes visible in one final marker command.
//!
//! ## Identity
//!
//! The operation id is deterministic: [`restore_identity_digest`] over the root, the source
//! workbench and incarnation, the concrete source selector (snapshot id or commit id; aliases are
//! point-resolved by the caller before [`plan`]), the destination workbench and the fresh
//! destination incarnation; `operation_id = identity_digest[..16]`. The destination incarnation is
//! derived from the request and the retired incarnation it reclaims, if any
//! ([`destination_incarnation_for`]), so every plan of the same attempt — also after process loss
//! before the prepare command — reproduces the same identity; it is never reused (the prepare
//! command predicates its WorkspaceIncarnationClaim absent, and a reclaiming attempt chains the
//! retired incarnation). Once prepared, plans find the operation through the destination's
//! `WorkspaceCurrent.owning_operation`. The
//! [`initialization_digest`] binds the identity to the exact encoded `PathEntry` of
//! `metadata/restore_manifest.json` sealed into the operation.
//!
//! ## Phases, one metadata command each
//!
//! ```text
//! prepare        (none) -> Preparing   Operation(Restore), WorkspaceCurrent(Staging, fresh
//!                                      incarnation, owning_operation), WorkspaceIncarnationClaim,
//!                                      the RestoreStaging manifest revision + its Path RevisionRef
//!                                      + PathCurrent + index rows (all under the staging
//!                                      incarnation), and the source attachment:
//!                                        snapshot: SnapshotRef Active & lease > now, consumer
//!                                                  count/epoch +1, HistoryHold(Restore, op)
//!                                        commit:   Commit Sealed, consumer count/epoch +1,
//!                                                  CommitConsumer(Lease, op)
//! copy batch     Preparing|Copying -> Copying
//!                                      ≤ MAX_BATCH_MEMBERS source entries: destination
//!                                      PathCurrent, Path RevisionRef (+1 count/epoch on the shared
//!                                      ArtifactRevision), SecondaryIndex rows, RestoreMember(seq,
//!                                      row digest), next cursor/sequence, running member digest;
//!                                      the batch that reaches end-of-source records EOF
//! seal           Copying(EOF) -> SourceSealed     member_count / member_digest frozen
//! verify         SourceSealed -> Ready            RestoreMember rows re-read and re-digested
//!                                                 against the staged PathCurrent rows; the source
//!                                                 rescanned at its held read version (or its
//!                                                 CommitMember rows) must give the same count and
//!                                                 digest
//! publish        Ready -> Complete                destination Staging -> Visible, one
//!                                                 WorkspaceCreated ChangeEvent, source hold /
//!                                                 consumer released
//! abort          Preparing..Ready -> Aborting     terminal error recorded
//! cleanup batch  Aborting|Cleaning -> Cleaning    driven by RestoreMember rows (never a listing):
//!                                                 each staged PathCurrent, index rows and Path
//!                                                 RevisionRef removed (count/epoch −1; GcCandidate
//!                                                 at zero), the member row deleted
//! cleanup final  Cleaning -> Cleaned              manifest path removed, Staging -> Retired,
//!                                                 source hold / consumer released exactly once
//! ```
//!
//! Every step command predicates the exact bytes of the Operation row it read, so a step, a
//! concurrent duplicate driver, publication and abort all CAS the same record and exactly one
//! wins. Staging rows produce no ChangeEvent. No object bytes are copied: destination paths
//! reference the source's immutable revisions.
//!
//! Destination path entries keep the source `PathEntry` (generation, revision, digests,
//! projection). The restore manifest's entry uses generation
//! `source_read_version + 1` (greater than every copied generation, deterministic across retries).
//! A source `metadata/restore_manifest.json` (a source that was itself restored) is not copied:
//! the destination holds its own.
//!
//! A restore never publishes a path that is both a file and a directory: a source that holds
//! such a clash (written before the rule was enforced) fails its copy step with
//! [`RestoreError::SourceNamespaceClash`] and is aborted and cleaned up, so no destination
//! becomes visible that listings and materialization could not walk.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::codec::operation::restore_identity_digest;
use crate::codec::{
    artifact_manifest, artifact_revision, commit_member, gc_candidate, manifest_digest_uri,
    path_current, revision_ref, workspace_current, workspace_incarnation_claim, ArtifactRevision,
    ChangeEvent, ChangeKind, CommandResult, Commit, CommitConsumer, CommitConsumerKey, CommitKey,
    CommitMember, CommitState, ConsumerOwner, GcCandidate, GcClaimState, HistoryHoldKey, HoldId,
    ManifestRow, Operation, OperationKey, OperationKind, OperationResult, PathEntry, RefOwner,
    RestoreCursor, RestoreMember, RestoreMemberKey, RestoreOperation, RestorePhase, RestoreResult,
    RestoreSource, RevisionRef, RevisionState, TerminalError, WorkspaceCurrent,
    WorkspaceIncarnationClaim, WorkspaceState,
};
use crate::command::projection as index_projection;
use crate::command::{
    MetadataCommand, Mutation, Predicate, MAX_COMMAND_MUTATIONS, MAX_COMMAND_PREDICATES,
    MAX_INDEX_MUTATIONS,
};
use crate::error::Error;
use crate::family::Family;
use crate::ids::{
    validate_workbench_id, ArtifactRevisionId, OperationId, RequestId, RootId,
    WorkspaceIncarnationId,
};
use crate::path::{normalize_stored, ordered_key, NormPath};
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore, MAX_SCAN_ITEMS};

use super::lease_clock;
use super::snapshot::{
    attach_consumer_parts, release_consumer_parts, SnapshotPolicy, SnapshotSelector, SnapshotStatus,
};
use super::MAX_ATTEMPTS;

/// The reserved destination path of the restore manifest (docs/metadata-format.md: RestoreStaging is authorized
/// only for this path).
pub const RESTORE_MANIFEST_PATH: &str = "metadata/restore_manifest.json";
/// Domain separator of [`initialization_digest`] (docs/metadata-format.md, "Restore Closure").
pub const RESTORE_INITIALIZATION_DOMAIN: &[u8] = b"nokv.restore.initialization.v3\0";
/// Domain separator of one RestoreMember row digest (decision recorded here).
pub const RESTORE_MEMBER_ROW_DOMAIN: &[u8] = b"nokv.restore.member_row.v1\0";
/// Domain separator of the running member digest chain (decision recorded here).
pub const RESTORE_MEMBER_CHAIN_DOMAIN: &[u8] = b"nokv.restore.member_chain.v1\0";
/// Most source entries one copy or cleanup batch handles. A batch also stops earlier when its
/// SecondaryIndex, mutation or predicate budget (see [`crate::command`]) would be exceeded.
pub const MAX_BATCH_MEMBERS: usize = 64;
/// Member digest of an empty member set (the chain's starting value).
pub const EMPTY_MEMBER_DIGEST: [u8; 32] = [0; 32];

/// Typed failures of a restore operation.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A metadata-layer failure (codec, storage, fence, exhausted read-version retries, an
    /// unavailable shared revision, …).
    #[error(transparent)]
    Meta(#[from] Error),
    /// The source workbench has no `Visible` marker.
    #[error("source workbench {workbench_id:?} not found")]
    SourceWorkbenchNotFound {
        /// The source workbench id.
        workbench_id: String,
    },
    /// No snapshot with this id exists in the source workbench (of its current incarnation).
    #[error("snapshot {snapshot_id} not found")]
    SnapshotNotFound {
        /// The numeric snapshot id.
        snapshot_id: u64,
    },
    /// The snapshot's lease deadline passed, it was retired, or it was reaped (the same answer
    /// a read `at_snapshot` gives: facade `SnapshotExpired` with `details.state`).
    #[error("snapshot {snapshot_id} is {status}")]
    SnapshotExpired {
        /// The numeric snapshot id.
        snapshot_id: u64,
        /// Derived status: `expired`, `retired` or `reaped`.
        status: &'static str,
    },
    /// No sealed commit of the source workbench has this id.
    #[error("commit {commit_id} not found")]
    CommitNotFound {
        /// 64 lowercase hex.
        commit_id: String,
    },
    /// The commit is retiring or retired; no lease can attach.
    #[error("commit {commit_id} is {state:?}")]
    CommitUnavailable {
        /// 64 lowercase hex.
        commit_id: String,
        /// Its lifecycle state.
        state: CommitState,
    },
    /// The destination name is visible, or held by another operation's staging incarnation.
    #[error("destination workbench {workbench_id:?} already exists or is reserved")]
    DestinationExists {
        /// The destination workbench id.
        workbench_id: String,
    },
    /// The same short operation id names an operation with a different identity digest.
    #[error("restore operation id collision")]
    IdentityCollision,
    /// The same identity was prepared with a different initialization digest.
    #[error("restore request does not match the prepared operation")]
    RequestMismatch,
    /// Source closure verification failed (the operation should be aborted).
    #[error("restore source closure mismatch: {reason}")]
    SourceClosureMismatch {
        /// What differed.
        reason: String,
    },
    /// The source holds `path` both as a file and as an implicit directory (a namespace written
    /// before the file-or-directory rule was enforced). A restore never publishes such a
    /// namespace: the copy step refuses it and the caller aborts and cleans up the operation.
    /// `path` is workbench-relative.
    #[error("the restore source holds {path} both as a file and as a directory")]
    SourceNamespaceClash {
        /// The path that is both a file and a directory in the source.
        path: String,
    },
    /// The operation ended in cleanup with this terminal error.
    #[error("restore aborted: {}", .0.message)]
    Aborted(TerminalError),
    /// The operation is in a phase that does not allow the requested step.
    #[error("restore operation is {phase:?}: {reason}")]
    InvalidPhase {
        /// Its current phase.
        phase: RestorePhase,
        /// Why the step was refused.
        reason: String,
    },
    /// No restore operation with this id exists.
    #[error("restore operation not found")]
    OperationNotFound,
}

type Result<T> = std::result::Result<T, RestoreError>;

/// What to restore: a concrete source (snapshot id or commit id; aliases resolved by the caller)
/// of `source_workbench_id` into the new workbench `destination_workbench_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreTarget {
    /// Source workbench (must be `Visible` for a fresh restore).
    pub source_workbench_id: String,
    /// Concrete source selector.
    pub source: RestoreSource,
    /// Destination workbench (must be absent, or `Retired` after a cleaned restore).
    pub destination_workbench_id: String,
    /// Owner-observed wall clock, Unix milliseconds. A snapshot source must be alive on the
    /// shard's persisted lease clock (`max(wall, high-water)`; see
    /// [`crate::ops::lease_clock`]), and the attach command predicates that lease-clock row.
    pub now_unix_ms: u64,
    /// Snapshot policy (skew grace of the lease clock reading).
    pub policy: SnapshotPolicy,
}

/// The resolved identity of one restore request (see [`plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePlan {
    /// The request.
    pub target: RestoreTarget,
    /// Source workspace incarnation.
    pub source_incarnation: WorkspaceIncarnationId,
    /// Source read version: the snapshot's read version or the commit's seal version.
    pub source_read_version: u64,
    /// Destination incarnation (fresh, or the one of the existing operation).
    pub destination_incarnation: WorkspaceIncarnationId,
    /// Complete identity digest.
    pub identity_digest: [u8; 32],
    /// `identity_digest[..16]`.
    pub operation_id: OperationId,
    /// The existing operation of this exact request, if it was prepared before.
    pub existing: Option<Box<RestoreOperation>>,
    /// Exact bytes of a `Retired` destination marker the fresh prepare reclaims.
    reclaim_marker: Option<Vec<u8>>,
}

/// The RestoreStaging body of `metadata/restore_manifest.json`, uploaded by the caller under
/// `revision_id` before [`prepare`] (a revision id derived from the operation id, so retries
/// reuse the same objects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreManifestDescriptor {
    /// Revision owning the uploaded blocks.
    pub revision_id: ArtifactRevisionId,
    /// Body length in bytes.
    pub logical_size: u64,
    /// `sha256:` digest URI of the body.
    pub body_digest_uri: String,
    /// Content type (`application/json`).
    pub content_type: String,
    /// Producer recorded on the path entry.
    pub producer: String,
    /// Manifest rows (object_index 0.., contiguous, owned by `revision_id`).
    pub manifest: Vec<ManifestRow>,
}

/// Domain separator of [`destination_incarnation_for`] (decision recorded here).
pub const RESTORE_DESTINATION_INCARNATION_DOMAIN: &[u8] =
    b"nokv.restore.destination_incarnation.v1\0";

/// The destination incarnation of one restore attempt:
/// `sha256("nokv.restore.destination_incarnation.v1\0" || root_id || u32be(len) || source_workbench_id
/// || source_incarnation || u8 source_kind || source_identity || u32be(len) ||
/// destination_workbench_id || previous_incarnation)[..16]`, where `previous_incarnation` is the
/// incarnation of the `Retired` marker a new attempt reclaims (16 zero bytes for the first).
///
/// Deterministic, so a process lost between writing the restore manifest object and the prepare
/// command re-derives the same operation id (and object key) instead of leaking a second one;
/// still never reused: every attempt after a cleaned one chains the retired incarnation, and the
/// prepare command predicates the WorkspaceIncarnationClaim absent.
pub fn destination_incarnation_for(
    root: &RootId,
    source_workbench_id: &str,
    source_incarnation: &WorkspaceIncarnationId,
    source: &RestoreSource,
    destination_workbench_id: &str,
    previous: Option<&WorkspaceIncarnationId>,
) -> WorkspaceIncarnationId {
    let mut h = Sha256::new();
    h.update(RESTORE_DESTINATION_INCARNATION_DOMAIN);
    h.update(root.as_bytes());
    h.update((source_workbench_id.len() as u32).to_be_bytes());
    h.update(source_workbench_id.as_bytes());
    h.update(source_incarnation.as_bytes());
    match source {
        RestoreSource::Snapshot(id) => {
            h.update([1u8]);
            h.update(id.get().to_be_bytes());
        }
        RestoreSource::Commit(id) => {
            h.update([2u8]);
            h.update(id.as_bytes());
        }
    }
    h.update((destination_workbench_id.len() as u32).to_be_bytes());
    h.update(destination_workbench_id.as_bytes());
    h.update(previous.map_or([0u8; 16], |p| *p.as_bytes()));
    let d: [u8; 32] = h.finalize().into();
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    WorkspaceIncarnationId(id)
}

/// The operation id of an identity digest: its first 16 bytes (docs/metadata-format.md).
pub fn operation_id_of(identity_digest: &[u8; 32]) -> OperationId {
    let mut id = [0u8; 16];
    id.copy_from_slice(&identity_digest[..16]);
    OperationId(id)
}

/// The initialization digest (docs/metadata-format.md, "Restore Closure"):
/// `sha256("nokv.restore.initialization.v3\0" || identity_digest || u32be(1) || u8(1) ||
/// u32be(len path) || "metadata/restore_manifest.json" || u32be(len entry) || encoded_path_entry)`.
pub fn initialization_digest(identity_digest: &[u8; 32], encoded_path_entry: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RESTORE_INITIALIZATION_DOMAIN);
    h.update(identity_digest);
    h.update(1u32.to_be_bytes());
    h.update([1u8]);
    h.update((RESTORE_MANIFEST_PATH.len() as u32).to_be_bytes());
    h.update(RESTORE_MANIFEST_PATH.as_bytes());
    h.update((encoded_path_entry.len() as u32).to_be_bytes());
    h.update(encoded_path_entry);
    h.finalize().into()
}

/// The digest of one RestoreMember row: `sha256("nokv.restore.member_row.v1\0" ||
/// u64be(member_sequence) || u32be(len path) || path || artifact_revision_id(16) ||
/// u64be(path_generation) || u32be(len entry) || encoded destination PathEntry)`.
pub fn member_row_digest(sequence: u64, path: &NormPath, encoded_entry: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RESTORE_MEMBER_ROW_DOMAIN);
    h.update(sequence.to_be_bytes());
    h.update((path.as_str().len() as u32).to_be_bytes());
    h.update(path.as_str().as_bytes());
    // The entry bytes start with the value version then the generation and revision id; they
    // are hashed whole, so revision and generation are bound through them.
    h.update((encoded_entry.len() as u32).to_be_bytes());
    h.update(encoded_entry);
    h.finalize().into()
}

/// One link of the member digest chain: `sha256("nokv.restore.member_chain.v1\0" || previous ||
/// row_digest)`, starting from [`EMPTY_MEMBER_DIGEST`].
pub fn chain_member_digest(previous: &[u8; 32], row_digest: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RESTORE_MEMBER_CHAIN_DOMAIN);
    h.update(previous);
    h.update(row_digest);
    h.finalize().into()
}

/// The `PathEntry` sealed into the operation for `metadata/restore_manifest.json`.
pub fn restore_manifest_entry(
    source_read_version: u64,
    desc: &RestoreManifestDescriptor,
) -> PathEntry {
    let generation = source_read_version.saturating_add(1);
    PathEntry {
        generation,
        artifact_revision_id: desc.revision_id,
        logical_size: desc.logical_size,
        body_digest_uri: desc.body_digest_uri.clone(),
        manifest_digest_uri: manifest_digest_uri(&desc.manifest),
        dependency_count: 0,
        dependency_depth: 0,
        content_type: desc.content_type.clone(),
        producer: desc.producer.clone(),
        manifest_id: None,
        created_version: generation,
        modified_version: generation,
        index_projection: Vec::new(),
    }
}

fn manifest_path() -> Result<NormPath> {
    normalize_stored(RESTORE_MANIFEST_PATH).map_err(|e| RestoreError::Meta(Error::Path(e)))
}

fn present(family: Family, key: Vec<u8>) -> Predicate {
    Predicate {
        family,
        key,
        expect: crate::command::Expectation::Present,
    }
}

fn op_key(root: &RootId, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: *root,
        kind: OperationKind::Restore,
        operation_id: *id,
    }
    .encode()
}

/// Reads the restore operation `id` at `snap`: `(bytes, decoded)`.
pub(crate) fn read_op<S: Snapshot>(
    snap: &S,
    root: &RootId,
    id: &OperationId,
) -> Result<Option<(Vec<u8>, RestoreOperation)>> {
    let Some(bytes) = snap.get(Family::Operation, &op_key(root, id))? else {
        return Ok(None);
    };
    match Operation::decode_for_kind(OperationKind::Restore, &bytes)? {
        Operation::Restore(op) => Ok(Some((bytes, *op))),
        _ => Err(RestoreError::Meta(Error::codec(
            "operation",
            "restore key holds another kind",
        ))),
    }
}

/// Reads the restore operation `id` at the current version.
///
/// Errors: codec and storage errors.
pub fn load(shard: &MetaShard, id: &OperationId) -> Result<Option<RestoreOperation>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_op(&snap, &shard.root_id(), id)?.map(|(_, op)| op))
}

fn same_request(op: &RestoreOperation, t: &RestoreTarget) -> bool {
    op.source_workbench_id == t.source_workbench_id
        && op.source == t.source
        && op.destination_workbench_id == t.destination_workbench_id
}

/// Resolves a request to its deterministic identity (read-only).
///
/// Operation lookup precedes all live source reads: when the destination marker is owned by a
/// restore operation of this exact request (staging, visible or — for a cleaned one — retired),
/// its identity is reused and the live source is not consulted.
///
/// Errors: [`RestoreError::Meta`] with `InvalidArgument` for invalid ids or `destination == source`;
/// [`RestoreError::DestinationExists`]; [`RestoreError::SourceWorkbenchNotFound`];
/// [`RestoreError::SnapshotNotFound`] / [`RestoreError::SnapshotExpired`];
/// [`RestoreError::CommitNotFound`] / [`RestoreError::CommitUnavailable`]; codec and storage
/// errors.
pub fn plan(shard: &MetaShard, target: &RestoreTarget) -> Result<RestorePlan> {
    validate_workbench_id(&target.source_workbench_id)?;
    validate_workbench_id(&target.destination_workbench_id)?;
    if target.source_workbench_id == target.destination_workbench_id {
        return Err(Error::invalid("the destination workbench must differ from the source").into());
    }
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let dest_key = workspace_current::key(&root, &target.destination_workbench_id);
    let mut reclaim_marker = None;
    if let Some(bytes) = snap.get(Family::WorkspaceCurrent, &dest_key)? {
        let marker = WorkspaceCurrent::decode(&bytes)?;
        let owned = match marker.owning_operation {
            Some(id) => read_op(&snap, &root, &id)?,
            None => None,
        };
        let exists = || RestoreError::DestinationExists {
            workbench_id: target.destination_workbench_id.clone(),
        };
        match (marker.state, owned) {
            (WorkspaceState::Staging | WorkspaceState::Visible, Some((_, op)))
                if same_request(&op, target)
                    && op.destination_incarnation == marker.incarnation =>
            {
                return Ok(RestorePlan {
                    target: target.clone(),
                    source_incarnation: op.source_incarnation,
                    source_read_version: op.source_read_version,
                    destination_incarnation: op.destination_incarnation,
                    identity_digest: op.identity_digest,
                    operation_id: op.operation_id(),
                    existing: Some(Box::new(op)),
                    reclaim_marker: None,
                });
            }
            (WorkspaceState::Retired, Some((_, op))) if op.phase == RestorePhase::Cleaned => {
                reclaim_marker = Some(bytes);
            }
            _ => return Err(exists()),
        }
    }
    let src = snap
        .get(
            Family::WorkspaceCurrent,
            &workspace_current::key(&root, &target.source_workbench_id),
        )?
        .map(|b| WorkspaceCurrent::decode(&b))
        .transpose()?
        .filter(|w| w.state == WorkspaceState::Visible)
        .ok_or_else(|| RestoreError::SourceWorkbenchNotFound {
            workbench_id: target.source_workbench_id.clone(),
        })?;
    let source_read_version = match target.source {
        RestoreSource::Snapshot(id) => {
            let info = super::snapshot::get(
                shard,
                &target.source_workbench_id,
                &SnapshotSelector::Id(id),
                target.now_unix_ms,
                &target.policy,
            )
            .map_err(|e| snapshot_error(e, id.get()))?;
            match info.status {
                SnapshotStatus::Alive => {}
                // Retired answers like a read at the snapshot does (SnapshotExpired, "retired").
                status @ (SnapshotStatus::Expired
                | SnapshotStatus::Reaped
                | SnapshotStatus::Retired) => {
                    return Err(RestoreError::SnapshotExpired {
                        snapshot_id: id.get(),
                        status: status.as_str(),
                    })
                }
            }
            if info.incarnation != src.incarnation {
                return Err(RestoreError::SnapshotNotFound {
                    snapshot_id: id.get(),
                });
            }
            info.record.read_version
        }
        RestoreSource::Commit(id) => {
            let commit = read_commit(&snap, &root, &id)?
                .map(|(_, c)| c)
                .filter(|c| {
                    c.source_workbench_id == target.source_workbench_id
                        && c.source_incarnation == src.incarnation
                })
                .ok_or_else(|| RestoreError::CommitNotFound {
                    commit_id: id.to_hex(),
                })?;
            if commit.state != CommitState::Sealed {
                return Err(RestoreError::CommitUnavailable {
                    commit_id: id.to_hex(),
                    state: commit.state,
                });
            }
            commit.created_version
        }
    };
    let previous = match &reclaim_marker {
        Some(b) => Some(WorkspaceCurrent::decode(b)?.incarnation),
        None => None,
    };
    let destination_incarnation = destination_incarnation_for(
        &root,
        &target.source_workbench_id,
        &src.incarnation,
        &target.source,
        &target.destination_workbench_id,
        previous.as_ref(),
    );
    if snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &workspace_incarnation_claim::key(&root, &destination_incarnation),
        )?
        .is_some()
    {
        return Err(RestoreError::IdentityCollision);
    }
    let identity_digest = restore_identity_digest(
        &root,
        &target.source_workbench_id,
        &src.incarnation,
        &target.source,
        &target.destination_workbench_id,
        &destination_incarnation,
    );
    Ok(RestorePlan {
        target: target.clone(),
        source_incarnation: src.incarnation,
        source_read_version,
        destination_incarnation,
        identity_digest,
        operation_id: operation_id_of(&identity_digest),
        existing: None,
        reclaim_marker,
    })
}

/// Maps the snapshot module's typed errors onto restore's.
fn snapshot_error(e: Error, snapshot_id: u64) -> RestoreError {
    match e {
        Error::SnapshotNotFound => RestoreError::SnapshotNotFound { snapshot_id },
        Error::SnapshotExpired { status, .. } => RestoreError::SnapshotExpired {
            snapshot_id,
            status,
        },
        other => RestoreError::Meta(other),
    }
}

fn read_commit<S: Snapshot>(
    snap: &S,
    root: &RootId,
    id: &crate::ids::CommitId,
) -> Result<Option<(Vec<u8>, Commit)>> {
    let key = CommitKey {
        root: *root,
        commit_id: *id,
    }
    .encode();
    match snap.get(Family::Commit, &key)? {
        None => Ok(None),
        Some(b) => {
            let c = Commit::decode(&b)?;
            Ok(Some((b, c)))
        }
    }
}

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

/// A command header for one restore step; the command digest binds the step name, operation id
/// and read version (request ids are fresh: every step CASes the Operation row instead).
fn command(
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

fn run(
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

/// One page of source entries strictly after `after`, in canonical path order, at most `limit`,
/// and whether more follow. A snapshot source reads PathCurrent of the source incarnation at the
/// held read version (holt `view_at`); a commit source reads its immutable CommitMember rows.
fn source_page(
    shard: &MetaShard,
    op: &RestoreOperation,
    after: Option<&NormPath>,
    limit: usize,
) -> Result<(Vec<(NormPath, PathEntry)>, bool)> {
    match op.source {
        RestoreSource::Snapshot(_) => {
            let reader = shard.read_at(op.source_read_version)?;
            Ok(reader.scan_files(&op.source_incarnation, None, after, limit)?)
        }
        RestoreSource::Commit(id) => {
            let root = shard.root_id();
            let snap = shard.inner.store.snapshot();
            let prefix = commit_member::commit_prefix(&root, &id);
            let mut marker = after.map(|p| {
                let mut m = prefix.clone();
                m.extend_from_slice(&ordered_key(p));
                m
            });
            let mut out = Vec::new();
            loop {
                let spec = ScanSpec {
                    prefix: prefix.clone(),
                    start_after: marker.clone(),
                    delimiter: None,
                    limit: (limit + 1 - out.len()).clamp(1, MAX_SCAN_ITEMS),
                };
                let batch = snap.scan(Family::CommitMember, &spec)?;
                let exhausted = batch.len() < spec.limit;
                for item in batch {
                    let ScanItem::Row { key, value } = item else {
                        return Err(Error::codec("commit_member", "unexpected rollup").into());
                    };
                    if out.len() == limit {
                        return Ok((out, true));
                    }
                    let path = crate::codec::CommitMemberKey::decode(&key)?.path;
                    let m = CommitMember::decode(&value)?;
                    out.push((path, member_entry(m)));
                    marker = Some(key);
                }
                if exhausted {
                    return Ok((out, false));
                }
            }
        }
    }
}

/// The destination PathEntry of one CommitMember (created/modified versions = its generation).
fn member_entry(m: CommitMember) -> PathEntry {
    PathEntry {
        generation: m.path_generation,
        artifact_revision_id: m.artifact_revision_id,
        logical_size: m.logical_size,
        body_digest_uri: m.body_digest_uri,
        manifest_digest_uri: m.manifest_digest_uri,
        dependency_count: m.dependency_count,
        dependency_depth: m.dependency_depth,
        content_type: m.content_type,
        producer: m.producer,
        manifest_id: m.manifest_id,
        created_version: m.path_generation,
        modified_version: m.path_generation,
        index_projection: m.projection,
    }
}

/// Running reference-count changes of one command: revision -> (original bytes, updated row).
type Touched = BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)>;

fn touch<'a, S: Snapshot>(
    snap: &S,
    root: &RootId,
    touched: &'a mut Touched,
    rev: ArtifactRevisionId,
) -> Result<&'a mut ArtifactRevision> {
    if let std::collections::btree_map::Entry::Vacant(v) = touched.entry(rev) {
        let bytes = snap
            .get(
                Family::ArtifactRevision,
                &artifact_revision::key(root, &rev),
            )?
            .ok_or_else(|| Error::RevisionUnavailable {
                revision: rev.to_hex(),
                reason: "missing".into(),
            })?;
        let row = ArtifactRevision::decode(&bytes)?;
        v.insert((bytes, row));
    }
    match touched.get_mut(&rev) {
        Some((_, row)) => Ok(row),
        None => Err(Error::codec("artifact_revision", "touched revision vanished").into()),
    }
}

/// Predicates + puts for every touched revision (GcCandidate when a count reaches zero).
fn flush_touched(
    root: &RootId,
    cv: u64,
    touched: Touched,
    predicates: &mut Vec<Predicate>,
    mutations: &mut Vec<Mutation>,
) {
    for (id, (bytes, mut row)) in touched {
        let key = artifact_revision::key(root, &id);
        if row.strong_reference_count == 0 {
            row.last_zero_ref_version = Some(cv);
            mutations.push(Mutation::put(
                Family::GcCandidate,
                gc_candidate::key(root, &id, row.reference_epoch),
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
}

fn staging_marker<S: Snapshot>(
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
) -> Result<(Vec<u8>, WorkspaceCurrent)> {
    let key = workspace_current::key(root, &op.destination_workbench_id);
    let bytes = snap.get(Family::WorkspaceCurrent, &key)?.ok_or_else(|| {
        RestoreError::Meta(Error::codec(
            "workspace_current",
            "restore staging marker is missing",
        ))
    })?;
    let marker = WorkspaceCurrent::decode(&bytes)?;
    if marker.state != WorkspaceState::Staging
        || marker.incarnation != op.destination_incarnation
        || marker.owning_operation != Some(op.operation_id())
    {
        return Err(RestoreError::Meta(Error::codec(
            "workspace_current",
            "destination marker is not this operation's staging marker",
        )));
    }
    Ok((bytes, marker))
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
fn retrying<T>(mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
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

fn advance_once(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    op_id: &OperationId,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let snap = seq.snapshot();
    let (bytes, op) = read_op(&snap, &root, op_id)?.ok_or(RestoreError::OperationNotFound)?;
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
            commit_op(shard, seq, &snap, bytes, next, &marker, b"seal")
        }
        RestorePhase::SourceSealed => {
            verify(shard, &snap, &op)?;
            let (_, marker) = staging_marker(&snap, &root, &op)?;
            let next = RestoreOperation {
                phase: RestorePhase::Ready,
                ..op
            };
            commit_op(shard, seq, &snap, bytes, next, &marker, b"ready")
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
fn commit_op<S: Snapshot>(
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

fn copy_batch<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    mut op: RestoreOperation,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let (_, marker) = staging_marker(snap, &root, &op)?;
    let cv = snap.version() + 1;
    let dest = op.destination_incarnation;
    let mpath = manifest_path()?;
    let (page, more) = source_page(shard, &op, op.cursor.after_path.as_ref(), MAX_BATCH_MEMBERS)?;
    let mut predicates = Vec::new();
    let mut mutations = Vec::new();
    let mut index_rows = 0usize;
    let mut touched = Touched::new();
    let mut consumed = 0usize;
    for (path, entry) in &page {
        // The namespace rule (a path is a file or a directory, never both). The ordered path key's order
        // puts a path's whole subtree immediately before its exact row, so the source holds
        // `path` as both exactly when the entry copied just before it lies below it; a source
        // path below the restore manifest would clash with the destination's own manifest.
        let below_previous = op
            .cursor
            .after_path
            .as_ref()
            .is_some_and(|prev| prev.starts_with_dir(path));
        if below_previous || path.starts_with_dir(&mpath) {
            let clash = if below_previous { path } else { &mpath };
            return Err(RestoreError::SourceNamespaceClash {
                path: clash.as_str().to_owned(),
            });
        }
        if *path != mpath {
            let index = index_projection::index_mutations(
                &root,
                &dest,
                &op.destination_workbench_id,
                path,
                None,
                Some(entry),
            )?;
            // Budget: 4 bounded mutations + ≤ 2 predicates per member, plus the operation row
            // and one revision row/predicate per touched revision.
            let bounded = mutations.len() - index_rows;
            let over = index_rows + index.len() > MAX_INDEX_MUTATIONS
                || bounded + 3 + 2 * (touched.len() + 1) + 2 > MAX_COMMAND_MUTATIONS
                || predicates.len() + 1 + touched.len() + 1 + 1 > MAX_COMMAND_PREDICATES;
            if over && consumed > 0 {
                break;
            }
            let row = touch(snap, &root, &mut touched, entry.artifact_revision_id)?;
            if row.state != RevisionState::Available {
                return Err(Error::RevisionUnavailable {
                    revision: entry.artifact_revision_id.to_hex(),
                    reason: format!("state {:?}", row.state),
                }
                .into());
            }
            row.strong_reference_count = row.strong_reference_count.saturating_add(1);
            row.reference_epoch = row.reference_epoch.saturating_add(1);
            let epoch = row.reference_epoch;
            let seq = op.cursor.next_member_sequence;
            let entry_bytes = entry.encode();
            let row_digest = member_row_digest(seq, path, &entry_bytes);
            let pkey = path_current::key(&root, &dest, path);
            predicates.push(Predicate::absent(Family::PathCurrent, pkey.clone()));
            mutations.push(Mutation::put(Family::PathCurrent, pkey, entry_bytes));
            mutations.push(Mutation::put(
                Family::RevisionRef,
                revision_ref::key(
                    &root,
                    &RefOwner::Path {
                        incarnation: dest,
                        path: path.clone(),
                    },
                    &entry.artifact_revision_id,
                ),
                RevisionRef {
                    reference_epoch_at_add: epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            mutations.push(Mutation::put(
                Family::RestoreMember,
                RestoreMemberKey {
                    root,
                    operation_id: op.operation_id(),
                    member_sequence: seq,
                }
                .encode(),
                RestoreMember {
                    destination_path: path.clone(),
                    artifact_revision_id: entry.artifact_revision_id,
                    path_generation: entry.generation,
                    row_digest,
                }
                .encode(),
            ));
            index_rows += index.len();
            mutations.extend(index);
            op.member_digest = chain_member_digest(&op.member_digest, &row_digest);
            op.member_count += 1;
            op.cursor.next_member_sequence = seq + 1;
        }
        op.cursor.after_path = Some(path.clone());
        consumed += 1;
    }
    if consumed == page.len() && !more {
        op.cursor.source_eof = true;
    }
    flush_touched(&root, cv, touched, &mut predicates, &mut mutations);
    op.phase = RestorePhase::Copying;
    let key = op_key(&root, &op.operation_id());
    predicates.push(Predicate::equals(Family::Operation, key.clone(), old));
    let cmd = command(shard, snap.version(), b"copy", &op.operation_id(), &marker)?;
    mutations.push(Mutation::put(
        Family::Operation,
        key,
        Operation::Restore(Box::new(op)).encode(),
    ));
    run(seq, cmd, predicates, mutations, Vec::new())?;
    Ok(RestorePhase::Copying)
}

/// Step 4 of the seed: re-reads the ordered RestoreMember index (dense sequences, each row digest
/// recomputed from the staged PathCurrent) and rescans the source from its start; both must
/// reproduce the sealed member count and digest. A commit source must also have exactly the
/// sealed Commit's member count.
fn verify<S: Snapshot>(shard: &MetaShard, snap: &S, op: &RestoreOperation) -> Result<()> {
    let root = shard.root_id();
    let mismatch = |reason: String| RestoreError::SourceClosureMismatch { reason };
    // 1. The member index against the staged rows.
    let prefix = RestoreMemberKey {
        root,
        operation_id: op.operation_id(),
        member_sequence: 0,
    }
    .encode();
    let prefix = prefix[..32].to_vec();
    let mut marker: Option<Vec<u8>> = None;
    let mut expected_seq = 0u64;
    let mut digest = EMPTY_MEMBER_DIGEST;
    loop {
        let spec = ScanSpec {
            prefix: prefix.clone(),
            start_after: marker.clone(),
            delimiter: None,
            limit: MAX_SCAN_ITEMS,
        };
        let batch = snap.scan(Family::RestoreMember, &spec)?;
        let exhausted = batch.len() < spec.limit;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("restore_member", "unexpected rollup").into());
            };
            let k = RestoreMemberKey::decode(&key)?;
            if k.member_sequence != expected_seq {
                return Err(mismatch(format!(
                    "member sequence {} where {expected_seq} was expected",
                    k.member_sequence
                )));
            }
            let m = RestoreMember::decode(&value)?;
            let staged = snap
                .get(
                    Family::PathCurrent,
                    &path_current::key(&root, &op.destination_incarnation, &m.destination_path),
                )?
                .ok_or_else(|| mismatch(format!("member {expected_seq} has no staged path")))?;
            if member_row_digest(expected_seq, &m.destination_path, &staged) != m.row_digest {
                return Err(mismatch(format!(
                    "member {expected_seq} does not match its staged path"
                )));
            }
            digest = chain_member_digest(&digest, &m.row_digest);
            expected_seq += 1;
            marker = Some(key);
        }
        if exhausted {
            break;
        }
    }
    if expected_seq != op.member_count || digest != op.member_digest {
        return Err(mismatch(
            "member index differs from the sealed count/digest".into(),
        ));
    }
    // 2. The source closure.
    let mpath = manifest_path()?;
    let mut after: Option<NormPath> = None;
    let mut seq = 0u64;
    let mut scanned = 0u64;
    let mut digest = EMPTY_MEMBER_DIGEST;
    loop {
        let (page, more) = source_page(shard, op, after.as_ref(), MAX_SCAN_ITEMS)?;
        for (path, entry) in &page {
            scanned += 1;
            if *path != mpath {
                let row = member_row_digest(seq, path, &entry.encode());
                digest = chain_member_digest(&digest, &row);
                seq += 1;
            }
        }
        after = page.last().map(|(p, _)| p.clone());
        if !more || after.is_none() {
            break;
        }
    }
    if seq != op.member_count || digest != op.member_digest {
        return Err(mismatch(
            "source rescan differs from the sealed member count/digest".into(),
        ));
    }
    if let RestoreSource::Commit(id) = op.source {
        let (_, commit) = read_commit(snap, &root, &id)?
            .ok_or_else(|| mismatch("the source commit disappeared".into()))?;
        if commit.member_count != scanned {
            return Err(mismatch(format!(
                "commit seals {} members, {scanned} were scanned",
                commit.member_count
            )));
        }
        // The CommitMember rows must still reproduce the sealed Commit member count/digest.
        let seals = super::commit::closure_seals(shard, &id)?;
        if seals.member_count != commit.member_count || seals.member_digest != commit.member_digest
        {
            return Err(mismatch(
                "the commit's members no longer match its member seal".into(),
            ));
        }
    }
    Ok(())
}

/// Mutations and predicates that release the source attachment (hold + snapshot consumer, or
/// commit lease consumer) exactly once.
fn release_source<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
    cv: u64,
    predicates: &mut Vec<Predicate>,
    mutations: &mut Vec<Mutation>,
) -> Result<()> {
    let op_id = op.operation_id();
    match op.source {
        RestoreSource::Snapshot(id) => {
            let hold_key = HistoryHoldKey {
                root: *root,
                hold: HoldId::Restore(op_id),
            }
            .encode();
            if snap.get(Family::HistoryHold, &hold_key)?.is_some() {
                let parts = release_consumer_parts(shard, snap, &op.source_incarnation, id, op_id)?;
                predicates.extend(parts.predicates);
                mutations.extend(parts.mutations);
            }
        }
        RestoreSource::Commit(id) => {
            let consumer_key = CommitConsumerKey {
                root: *root,
                commit_id: id,
                owner: ConsumerOwner::Lease {
                    operation_id: op_id,
                },
            }
            .encode();
            if snap.get(Family::CommitConsumer, &consumer_key)?.is_some() {
                predicates.push(present(Family::CommitConsumer, consumer_key.clone()));
                mutations.push(Mutation::Delete {
                    family: Family::CommitConsumer,
                    key: consumer_key,
                });
                if let Some((bytes, mut c)) = read_commit(snap, root, &id)? {
                    c.consumer_count = c.consumer_count.checked_sub(1).ok_or_else(|| {
                        Error::codec("commit", "consumer count underflow on release")
                    })?;
                    c.consumer_epoch = c.consumer_epoch.saturating_add(1);
                    if c.consumer_count == 0 {
                        c.last_zero_consumer_version = Some(cv);
                    }
                    let key = CommitKey {
                        root: *root,
                        commit_id: id,
                    }
                    .encode();
                    predicates.push(Predicate::equals(Family::Commit, key.clone(), bytes));
                    mutations.push(Mutation::put(Family::Commit, key, c.encode()));
                }
            }
        }
    }
    Ok(())
}

/// Step 5: the one final command (Ready -> Complete, Staging -> Visible, one event, source
/// released).
fn publish<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    mut op: RestoreOperation,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let (marker_bytes, marker) = staging_marker(snap, &root, &op)?;
    let read_version = snap.version();
    let cv = read_version + 1;
    let manifest_entry = PathEntry::decode(&op.restore_manifest_entry)?;
    let visible = WorkspaceCurrent {
        workspace_revision: marker.workspace_revision.saturating_add(1),
        state: WorkspaceState::Visible,
        modified_version: cv,
        ..marker.clone()
    };
    let key = op_key(&root, &op.operation_id());
    let dest_key = workspace_current::key(&root, &op.destination_workbench_id);
    let mut predicates = vec![
        Predicate::equals(Family::Operation, key.clone(), old),
        Predicate::equals(Family::WorkspaceCurrent, dest_key.clone(), marker_bytes),
    ];
    let mut mutations = vec![Mutation::put(
        Family::WorkspaceCurrent,
        dest_key,
        visible.encode(),
    )];
    release_source(shard, snap, &root, &op, cv, &mut predicates, &mut mutations)?;
    op.phase = RestorePhase::Complete;
    op.result = OperationResult::Succeeded(RestoreResult {
        commit_version: cv,
        destination_generation: manifest_entry.generation,
    });
    let event = ChangeEvent {
        workbench_id: op.destination_workbench_id.clone(),
        incarnation: op.destination_incarnation,
        kind: ChangeKind::WorkspaceCreated,
        path: None,
        before_generation: None,
        after_generation: None,
    };
    let cmd = command(
        shard,
        read_version,
        b"publish",
        &op.operation_id(),
        &visible,
    )?;
    mutations.push(Mutation::put(
        Family::Operation,
        key,
        Operation::Restore(Box::new(op)).encode(),
    ));
    run(seq, cmd, predicates, mutations, vec![event])?;
    Ok(RestorePhase::Complete)
}

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
            let next = RestoreOperation {
                phase: RestorePhase::Aborting,
                cleanup_next_sequence: 0,
                result: OperationResult::Failed(error.clone()),
                ..op
            };
            commit_op(shard, seq, &snap, bytes, next, &marker, b"abort")
        })
    })
}

/// Number of SecondaryIndex rows the staged entry at `path` owns (0 when absent).
fn staged_index_rows<S: Snapshot>(
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
    path: &NormPath,
) -> Result<usize> {
    let dest = op.destination_incarnation;
    match snap.get(Family::PathCurrent, &path_current::key(root, &dest, path))? {
        None => Ok(0),
        Some(bytes) => {
            let entry = PathEntry::decode(&bytes)?;
            Ok(index_projection::index_rows(
                root,
                &dest,
                &op.destination_workbench_id,
                path,
                &entry,
            )?
            .len())
        }
    }
}

/// Removes one staged path (PathCurrent, index rows, Path RevisionRef, revision count) if present.
#[allow(clippy::too_many_arguments)]
fn unstage_path<S: Snapshot>(
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
    path: &NormPath,
    touched: &mut Touched,
    predicates: &mut Vec<Predicate>,
    mutations: &mut Vec<Mutation>,
) -> Result<usize> {
    let dest = op.destination_incarnation;
    let pkey = path_current::key(root, &dest, path);
    let mut index_rows = 0;
    if let Some(bytes) = snap.get(Family::PathCurrent, &pkey)? {
        let entry = PathEntry::decode(&bytes)?;
        let index = index_projection::index_mutations(
            root,
            &dest,
            &op.destination_workbench_id,
            path,
            Some(&entry),
            None,
        )?;
        index_rows = index.len();
        mutations.extend(index);
        predicates.push(Predicate::equals(Family::PathCurrent, pkey.clone(), bytes));
        mutations.push(Mutation::Delete {
            family: Family::PathCurrent,
            key: pkey,
        });
        let rkey = revision_ref::key(
            root,
            &RefOwner::Path {
                incarnation: dest,
                path: path.clone(),
            },
            &entry.artifact_revision_id,
        );
        if snap.get(Family::RevisionRef, &rkey)?.is_some() {
            mutations.push(Mutation::Delete {
                family: Family::RevisionRef,
                key: rkey,
            });
            let row = touch(snap, root, touched, entry.artifact_revision_id)?;
            row.strong_reference_count =
                row.strong_reference_count.checked_sub(1).ok_or_else(|| {
                    Error::codec("artifact_revision", "strong reference count underflow")
                })?;
            row.reference_epoch = row.reference_epoch.saturating_add(1);
        }
    }
    Ok(index_rows)
}

fn cleanup_batch<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    mut op: RestoreOperation,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let (marker_bytes, marker) = staging_marker(snap, &root, &op)?;
    let read_version = snap.version();
    let cv = read_version + 1;
    let key = op_key(&root, &op.operation_id());
    let mut predicates = vec![Predicate::equals(Family::Operation, key.clone(), old)];
    let mut mutations = Vec::new();
    let mut touched = Touched::new();
    let end = op.cursor.next_member_sequence;
    let step: &[u8];
    let result_marker;
    if op.cleanup_next_sequence < end {
        // One bounded batch of members, in sequence order.
        let mut index_rows = 0usize;
        let mut handled = 0usize;
        while op.cleanup_next_sequence < end && handled < MAX_BATCH_MEMBERS {
            let mkey = RestoreMemberKey {
                root,
                operation_id: op.operation_id(),
                member_sequence: op.cleanup_next_sequence,
            }
            .encode();
            if let Some(bytes) = snap.get(Family::RestoreMember, &mkey)? {
                let m = RestoreMember::decode(&bytes)?;
                let need = staged_index_rows(snap, &root, &op, &m.destination_path)?;
                let bounded = mutations.len() - index_rows;
                if handled > 0
                    && (index_rows + need > MAX_INDEX_MUTATIONS
                        || bounded + 3 + 2 * (touched.len() + 1) + 2 > MAX_COMMAND_MUTATIONS
                        || predicates.len() + 1 + touched.len() + 1 + 1 > MAX_COMMAND_PREDICATES)
                {
                    break;
                }
                index_rows += unstage_path(
                    snap,
                    &root,
                    &op,
                    &m.destination_path,
                    &mut touched,
                    &mut predicates,
                    &mut mutations,
                )?;
                mutations.push(Mutation::Delete {
                    family: Family::RestoreMember,
                    key: mkey,
                });
            }
            op.cleanup_next_sequence += 1;
            handled += 1;
        }
        op.phase = RestorePhase::Cleaning;
        step = b"clean";
        result_marker = marker;
    } else {
        // Terminal: the manifest path, the marker, the source attachment.
        let mpath = manifest_path()?;
        unstage_path(
            snap,
            &root,
            &op,
            &mpath,
            &mut touched,
            &mut predicates,
            &mut mutations,
        )?;
        let dest_key = workspace_current::key(&root, &op.destination_workbench_id);
        let retired = WorkspaceCurrent {
            state: WorkspaceState::Retired,
            modified_version: cv,
            ..marker
        };
        predicates.push(Predicate::equals(
            Family::WorkspaceCurrent,
            dest_key.clone(),
            marker_bytes,
        ));
        mutations.push(Mutation::put(
            Family::WorkspaceCurrent,
            dest_key,
            retired.encode(),
        ));
        release_source(shard, snap, &root, &op, cv, &mut predicates, &mut mutations)?;
        op.phase = RestorePhase::Cleaned;
        if matches!(op.result, OperationResult::Pending) {
            op.result = OperationResult::Failed(TerminalError {
                code: "InvalidState".into(),
                message: "the restore was aborted".into(),
            });
        }
        step = b"cleaned";
        result_marker = retired;
    }
    flush_touched(&root, cv, touched, &mut predicates, &mut mutations);
    let phase = op.phase;
    let cmd = command(
        shard,
        read_version,
        step,
        &op.operation_id(),
        &result_marker,
    )?;
    mutations.push(Mutation::put(
        Family::Operation,
        key,
        Operation::Restore(Box::new(op)).encode(),
    ));
    run(seq, cmd, predicates, mutations, Vec::new())?;
    Ok(phase)
}

/// The restore operation that owns `destination_workbench_id`'s marker, if any (a staging,
/// visible or retired destination created by a restore).
///
/// Errors: [`RestoreError::Meta`] with `InvalidArgument` for an invalid id; codec and storage
/// errors.
pub fn owning_operation(
    shard: &MetaShard,
    destination_workbench_id: &str,
) -> Result<Option<RestoreOperation>> {
    validate_workbench_id(destination_workbench_id)?;
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let Some(bytes) = snap.get(
        Family::WorkspaceCurrent,
        &workspace_current::key(&root, destination_workbench_id),
    )?
    else {
        return Ok(None);
    };
    let marker = WorkspaceCurrent::decode(&bytes)?;
    let Some(id) = marker.owning_operation else {
        return Ok(None);
    };
    Ok(read_op(&snap, &root, &id)?
        .map(|(_, op)| op)
        .filter(|op| op.destination_incarnation == marker.incarnation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{CommitId, SnapshotId};

    #[test]
    fn initialization_digest_follows_the_seed_byte_layout() {
        let identity = [0xabu8; 32];
        let entry = b"encoded-path-entry".to_vec();
        let mut bytes = b"nokv.restore.initialization.v3\0".to_vec();
        bytes.extend_from_slice(&identity);
        bytes.extend_from_slice(&[0, 0, 0, 1, 1]);
        bytes.extend_from_slice(&(30u32).to_be_bytes());
        bytes.extend_from_slice(b"metadata/restore_manifest.json");
        bytes.extend_from_slice(&(entry.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&entry);
        let expected: [u8; 32] = Sha256::digest(&bytes).into();
        assert_eq!(initialization_digest(&identity, &entry), expected);
        assert_ne!(initialization_digest(&identity, b"other"), expected);
    }

    #[test]
    fn identity_digest_follows_the_seed_byte_layout_and_names_the_operation() {
        let root = RootId([1; 16]);
        let src_inc = WorkspaceIncarnationId([2; 16]);
        let dst_inc = WorkspaceIncarnationId([3; 16]);
        let source = RestoreSource::Snapshot(SnapshotId(0x0102));
        let mut bytes = b"nokv.restore.operation.v2\0".to_vec();
        bytes.extend_from_slice(&[1; 16]);
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(b"src");
        bytes.extend_from_slice(&[2; 16]);
        bytes.push(1);
        bytes.extend_from_slice(&0x0102u64.to_be_bytes());
        bytes.extend_from_slice(&3u32.to_be_bytes());
        bytes.extend_from_slice(b"dst");
        bytes.extend_from_slice(&[3; 16]);
        let expected: [u8; 32] = Sha256::digest(&bytes).into();
        let got = restore_identity_digest(&root, "src", &src_inc, &source, "dst", &dst_inc);
        assert_eq!(got, expected);
        assert_eq!(operation_id_of(&got).as_bytes()[..], expected[..16]);
        let commit = RestoreSource::Commit(CommitId([9; 32]));
        assert_ne!(
            restore_identity_digest(&root, "src", &src_inc, &commit, "dst", &dst_inc),
            got
        );
    }

    #[test]
    fn destination_incarnation_is_stable_per_attempt_and_new_after_reclaim() {
        let root = RootId([1; 16]);
        let src_inc = WorkspaceIncarnationId([2; 16]);
        let source = RestoreSource::Snapshot(SnapshotId(7));
        let first = destination_incarnation_for(&root, "a", &src_inc, &source, "b", None);
        assert_eq!(
            first,
            destination_incarnation_for(&root, "a", &src_inc, &source, "b", None)
        );
        let second = destination_incarnation_for(&root, "a", &src_inc, &source, "b", Some(&first));
        assert_ne!(first, second);
        let other = RestoreSource::Snapshot(SnapshotId(8));
        assert_ne!(
            first,
            destination_incarnation_for(&root, "a", &src_inc, &other, "b", None)
        );
    }

    #[test]
    fn member_digest_binds_sequence_path_entry_and_order() {
        let a = normalize_stored("input/a").unwrap();
        let b = normalize_stored("input/b").unwrap();
        let ra = member_row_digest(0, &a, b"entry-a");
        let rb = member_row_digest(1, &b, b"entry-b");
        assert_ne!(ra, member_row_digest(1, &a, b"entry-a"));
        assert_ne!(ra, member_row_digest(0, &a, b"entry-x"));
        let ab = chain_member_digest(&chain_member_digest(&EMPTY_MEMBER_DIGEST, &ra), &rb);
        let ba = chain_member_digest(&chain_member_digest(&EMPTY_MEMBER_DIGEST, &rb), &ra);
        assert_ne!(ab, ba);
    }

    #[test]
    fn restore_manifest_entry_is_deterministic_and_newer_than_the_source() {
        let desc = RestoreManifestDescriptor {
            revision_id: ArtifactRevisionId([4; 16]),
            logical_size: 10,
            body_digest_uri: format!("sha256:{}", "00".repeat(32)),
            content_type: "application/json".into(),
            producer: "workbench_restore".into(),
            manifest: Vec::new(),
        };
        let e = restore_manifest_entry(41, &desc);
        assert_eq!(e.generation, 42);
        assert_eq!(e.encode(), restore_manifest_entry(41, &desc).encode());
    }
}
