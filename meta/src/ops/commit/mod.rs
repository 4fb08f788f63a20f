//! Durable commits: the BuildCommit operation and explicit commit retirement (docs/metadata-format.md,
//! "Commit Closure").
//!
//! # BuildCommit
//!
//! The operation id is deterministic: `first_16(sha256("nokv.build-commit.operation.v1\0" |
//! root_id | projection_input_digest))`, so an exact retry finds the same Operation row before any
//! live workspace, head or run-manifest read ("Operation lookup precedes all live … reads").
//! The retry is authenticated against the complete frozen request (workbench, identity digests,
//! `replace`, producer, lineage, parents); any difference is
//! [`Error::OperationInputMismatch`].
//!
//! Phases and the command each step is (every step CASes the exact Operation bytes it read, so
//! concurrent drivers of the same build have one winner per step):
//!
//! 1. [`begin`] — fresh construction only: evaluates the live preconditions (workspace
//!    `Visible`, head vs `replace`, parents `Sealed`), then one command creates
//!    `Operation(BuildCommit)` in `Building` with the frozen request (source incarnation,
//!    read version and workspace revision, expected head, run-manifest generation condition,
//!    first owner-observed `committed_at_unix_seconds`, initialization digest) and
//!    `HistoryHold(BuildCommit, operation_id)` at the source read version;
//! 2. [`stage_manifest`] — after the caller uploaded the canonical `run_manifest.json` blocks
//!    under the deterministic staged revision ([`staged_manifest_revision`]), one command creates
//!    the hidden ArtifactRevision (`Available`, one reference), its manifest rows, its
//!    `RevisionRef(Commit, commit_id)` and the immutable [`StagedManifestBinding`] — without
//!    PathCurrent;
//! 3. member batches ([`step`]) — the frozen workspace is scanned at the source read version in
//!    canonical path order, `metadata/run_manifest.json` replaced/inserted as one virtual member
//!    backed by the staged revision; each command writes ≤ [`MEMBER_BATCH`] CommitMember rows,
//!    one `RevisionRef(Commit)` per revision not yet referenced by this commit (count +1 /
//!    epoch +1 on the revision, which must be `Available`), and advances the member cursor, count
//!    and chained member digest;
//! 4. parent batches — one `CommitConsumer(parent, ChildCommit, child)` per unique parent
//!    against the parent's exact `Sealed` row (count +1 / epoch +1), chained parent digest;
//! 5. seal — re-scans CommitMember, `RevisionRef(Commit, commit_id)` and the parent consumer
//!    rows, verifies the member/revision/parent count+digest pairs against them, then CASes
//!    `Building -> Sealing` recording all three seals;
//! 6. publish — one command writes PathCurrent(`metadata/run_manifest.json`) and its Path
//!    RevisionRef (releasing the replaced one), its index rows, WorkspaceCurrent, the sealed
//!    Commit (consumer_count 1 for the head), WorkbenchCommitHead, the new head's
//!    `CommitConsumer(WorkbenchHead)` and the old head's release, `Sealing -> Complete` with
//!    the result, one ChangeEvent, and deletes the HistoryHold.
//!
//! Abort: a permanent failure (head moved, run-manifest generation moved, workspace gone, a
//! revision or parent no longer usable) CASes `Building|Sealing -> Aborting` with the terminal
//! error (`Sealing` only with a `Commit` Absent predicate), then `Aborting -> Cleaning`, then
//! cleanup batches delete CommitMember rows, release every `RevisionRef(Commit)` (count −1 /
//! epoch +1, GcCandidate at zero) and every parent consumer, and a final command deletes the
//! HistoryHold and sets `Cleaned`. `Quarantined` is never entered by this implementation (no
//! ambiguous external effect exists in the metadata steps).
//!
//! # Digests (decisions recorded here)
//!
//! - member digest: chained, `d_0 = 0^32`, `d_i = sha256("nokv.commit.member.v1\0" | d_{i-1} |
//!   u32 len | ordered path key | u32 len | CommitMember value)`;
//! - revision digest: `sha256("nokv.commit.revisions.v1\0" | ids…)` over the unique revision ids
//!   in ascending byte order (the `RevisionRef(Commit)` key order);
//! - parent digest: chained like the member digest with `"nokv.commit.parent.v1\0" | d | id`
//!   over the unique parents in ascending order.
//!
//! # CommitRetire
//!
//! [`retire`] claims `Sealed -> Retiring` in one command that predicates the exact Commit bytes
//! (so `consumer_count == 0` at the observed `consumer_epoch`) and creates the CommitRetire
//! operation directly in `Releasing` (the claim and the operation row are one atomic command, so
//! `Claiming` is never observable). Release batches delete members, release the unique revision
//! references and the outbound parent consumers with typed cursors; one final command publishes
//! `Retired` and `Complete`.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::codec::{
    artifact_manifest, artifact_revision, commit_member, gc_candidate, manifest_digest_uri,
    path_current, revision_ref, workspace_current, ArtifactRevision, BuildCommitOperation,
    BuildCommitPhase, BuildCommitResult, ChangeEvent, ChangeKind, ClosureCursor, CommandResult,
    Commit, CommitConsumer, CommitConsumerKey, CommitMember, CommitMemberKey,
    CommitRetireOperation, CommitRetirePhase, CommitState, ConsumerOwner, GcCandidate,
    GcClaimState, HeadRef, HistoryHold, HistoryHoldKey, HistoryHoldState, HoldId, ManifestRow,
    Operation, OperationKey, OperationKind, OperationResult, PathEntry, RefOwner, RevisionRef,
    RevisionState, SetCursor, StagedManifestBinding, TerminalError, WorkbenchCommitHead,
    WorkbenchCommitHeadKey, WorkspaceCurrent, WorkspaceState,
};
use crate::command::projection as index_projection;
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{
    validate_workbench_id, ArtifactRevisionId, CommitId, OperationId, RequestId, RootId,
    WorkspaceIncarnationId,
};
use crate::path::{normalize, ordered_key, NormPath};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore};

use super::{run_step as run, Step as Built};

mod abort;
mod begin;
mod drive;
mod keys;
mod members;
mod parents;
mod publish;
mod refs;
mod request;
mod retire;
mod seal;
mod seals;
mod stage;
mod state;

pub use abort::*;
pub use begin::*;
pub use drive::*;
pub use keys::*;
use members::*;
use parents::*;
use publish::*;
pub(crate) use refs::*;
use request::*;
pub use retire::*;
use seal::*;
pub use seals::*;
pub use stage::*;
pub use state::*;

/// The reserved path the commit publishes (docs/metadata-format.md, "Commit Closure").
pub const RUN_MANIFEST_PATH: &str = "metadata/run_manifest.json";
/// CommitMember rows written by one member-batch command.
pub const MEMBER_BATCH: usize = 64;
/// Rows released by one cleanup / retirement command.
pub const RELEASE_BATCH: usize = 64;
/// Parents attached by one command.
pub const PARENT_BATCH: usize = 32;
/// Most unique parents one commit may name.
pub const MAX_PARENTS: usize = 64;
/// Largest opaque lineage projection, in bytes.
pub const MAX_LINEAGE_BYTES: usize = 16 * 1024;
/// Largest producer, in bytes.
pub const MAX_PRODUCER_BYTES: usize = 1024;

const OPERATION_DOMAIN: &[u8] = b"nokv.build-commit.operation.v1\0";
/// Domain separator of `BuildCommitOperation.initialization_digest` (docs/metadata-format.md).
pub const INITIALIZATION_DOMAIN: &[u8] = b"nokv.build-commit.initialization.v5\0";
const STAGED_REVISION_DOMAIN: &[u8] = b"nokv.build-commit.staged-manifest.v1\0";
const STAGED_PUBLISH_DOMAIN: &[u8] = b"nokv.build-commit.staged-publish.v1\0";
const MEMBER_DOMAIN: &[u8] = b"nokv.commit.member.v1\0";
const REVISIONS_DOMAIN: &[u8] = b"nokv.commit.revisions.v1\0";
const PARENT_DOMAIN: &[u8] = b"nokv.commit.parent.v1\0";
const STEP_DOMAIN: &[u8] = b"nokv.build-commit.step.v1\0";
const RETIRE_DOMAIN: &[u8] = b"nokv.commit-retire.operation.v1\0";

/// The caller's complete commit request (the facade computed the digests with its canonical
/// JSON and the docs/workbench.md commit identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCommitRequest {
    /// Workbench to commit (must be `Visible`).
    pub workbench_id: String,
    /// The 32-byte commit identity (docs/workbench.md) — also the root-global CommitId.
    pub commit_id: CommitId,
    /// The Agent projection-input digest (docs/metadata-format.md).
    pub projection_input_digest: [u8; 32],
    /// `sha256:` content digest URI supplied by the caller.
    pub content_digest_uri: String,
    /// `sha256:` digest URI of the canonical manifest.
    pub manifest_digest_uri: String,
    /// Move an existing head to this commit.
    pub replace: bool,
    /// Producer / provenance summary (≤ 1024 bytes).
    pub producer: String,
    /// Opaque canonical lineage projection (≤ 16 KiB).
    pub lineage: Vec<u8>,
    /// Parent commits (deduplicated and sorted before freezing; ≤ 64 unique).
    pub parents: Vec<CommitId>,
    /// The owner's current wall-clock time, Unix seconds; used only when the operation is
    /// created (a retry keeps the first owner-observed time).
    pub observed_unix_seconds: u64,
}

/// A build operation as read from its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildHandle {
    /// The operation id.
    pub operation_id: OperationId,
    /// The durable operation.
    pub operation: BuildCommitOperation,
    /// True when this call created the operation (fresh construction).
    pub created: bool,
}

/// The staged run manifest the caller uploaded (object-first) before [`stage_manifest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedManifest {
    /// Must equal [`staged_manifest_revision`] of the operation.
    pub revision_id: ArtifactRevisionId,
    /// Envelope length in bytes.
    pub logical_size: u64,
    /// `sha256:` digest URI of the envelope bytes.
    pub body_digest_uri: String,
    /// Content type (`application/json`).
    pub content_type: String,
    /// Manifest rows (numbered 0,1,2…, contiguous, owned by `revision_id`).
    pub manifest: Vec<ManifestRow>,
}

/// What one [`step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// The staged run manifest must be uploaded and recorded with [`stage_manifest`] first.
    NeedsManifest,
    /// One command applied; the name is the phase boundary just crossed (`"member-batch"`,
    /// `"parents"`, `"sealing"`, `"complete"`, `"aborting"`, `"cleaning"`, `"cleanup-batch"`,
    /// `"cleaned"`).
    Advanced(&'static str),
    /// The operation is terminal (`Complete`, `Cleaned` or `Quarantined`).
    Terminal,
}
