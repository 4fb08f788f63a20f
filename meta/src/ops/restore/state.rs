//! Restore's shared vocabulary: reserved path, digest domains, batch bound, the typed error and the request/plan types.

use crate::codec::{
    CommitState, ManifestRow, RestoreOperation, RestorePhase, RestoreSource, TerminalError,
};
use crate::error::Error;
use crate::ids::{ArtifactRevisionId, OperationId, WorkspaceIncarnationId};
use crate::ops::snapshot::SnapshotPolicy;

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

pub(super) type Result<T> = std::result::Result<T, RestoreError>;

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
    pub(super) reclaim_marker: Option<Vec<u8>>,
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

/// What the restore invariants compare across one step: the phase and progress counters of the
/// operation before the step.
#[derive(Debug, Clone, Copy)]
pub(super) struct RestoreMark {
    phase: RestorePhase,
    identity_digest: [u8; 32],
    member_count: u64,
    next_member_sequence: u64,
    source_eof: bool,
    cleanup_next_sequence: u64,
}

impl RestoreMark {
    /// The mark of `op` before a step.
    pub(super) fn of(op: &RestoreOperation) -> Self {
        RestoreMark {
            phase: op.phase,
            identity_digest: op.identity_digest,
            member_count: op.member_count,
            next_member_sequence: op.cursor.next_member_sequence,
            source_eof: op.cursor.source_eof,
            cleanup_next_sequence: op.cleanup_next_sequence,
        }
    }
}

/// Debug-checks one restore step and returns `to` (docs/metadata-format.md, "Restore Closure"):
/// the phase moves only along Preparing -> Copying -> SourceSealed -> Ready -> Complete or
/// Preparing..Ready -> Aborting -> Cleaning -> Cleaned, a terminal operation is never rewritten,
/// the identity never changes, the copy counters never decrease before the abort, the member
/// seal never changes once sealed, EOF is never withdrawn, and the cleanup cursor only advances.
pub(super) fn checked_restore(from: RestoreMark, to: RestoreOperation) -> RestoreOperation {
    use RestorePhase::{
        Aborting, Cleaned, Cleaning, Complete, Copying, Preparing, Ready, SourceSealed,
    };
    debug_assert!(
        matches!(
            (from.phase, to.phase),
            (Preparing, Copying | Aborting)
                | (Copying, Copying | SourceSealed | Aborting)
                | (SourceSealed, Ready | Aborting)
                | (Ready, Complete | Aborting)
                | (Aborting, Cleaning | Cleaned)
                | (Cleaning, Cleaning | Cleaned)
        ),
        "Restore {:?} -> {:?} is not a documented transition",
        from.phase,
        to.phase
    );
    debug_assert!(
        from.identity_digest == to.identity_digest,
        "a restore step changed its identity"
    );
    debug_assert!(
        matches!(to.phase, Aborting | Cleaning | Cleaned)
            || (to.member_count >= from.member_count
                && to.cursor.next_member_sequence >= from.next_member_sequence
                && (!from.source_eof || to.cursor.source_eof)),
        "a restore step moved its copy progress back"
    );
    debug_assert!(
        !matches!(from.phase, SourceSealed | Ready) || to.member_count == from.member_count,
        "a restore step changed its sealed member count"
    );
    debug_assert!(
        !matches!(from.phase, Aborting | Cleaning)
            || to.cleanup_next_sequence >= from.cleanup_next_sequence,
        "a restore cleanup step moved its cursor back"
    );
    to
}
