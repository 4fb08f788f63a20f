//! What every step of the BuildCommit and CommitRetire machines shares: the limits, the domain
//! separators of their digests, and the request, handle and step-outcome types.

use crate::codec::{BuildCommitOperation, ManifestRow};
use crate::ids::{ArtifactRevisionId, CommitId, OperationId};

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

pub(super) const OPERATION_DOMAIN: &[u8] = b"nokv.build-commit.operation.v1\0";
/// Domain separator of `BuildCommitOperation.initialization_digest` (docs/metadata-format.md).
pub const INITIALIZATION_DOMAIN: &[u8] = b"nokv.build-commit.initialization.v5\0";
pub(super) const STAGED_REVISION_DOMAIN: &[u8] = b"nokv.build-commit.staged-manifest.v1\0";
pub(super) const STAGED_PUBLISH_DOMAIN: &[u8] = b"nokv.build-commit.staged-publish.v1\0";
pub(super) const MEMBER_DOMAIN: &[u8] = b"nokv.commit.member.v1\0";
pub(super) const REVISIONS_DOMAIN: &[u8] = b"nokv.commit.revisions.v1\0";
pub(super) const PARENT_DOMAIN: &[u8] = b"nokv.commit.parent.v1\0";
pub(super) const STEP_DOMAIN: &[u8] = b"nokv.build-commit.step.v1\0";
pub(super) const RETIRE_DOMAIN: &[u8] = b"nokv.commit-retire.operation.v1\0";

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
