//! Operation payloads of the commit closure: BuildCommit (value version 5) and CommitRetire
//! (value version 1).

use super::kind::put_cursor;
use crate::codec::cursor::{ClosureCursor, OperationResult};
use crate::codec::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, CommitId, OperationId, WorkspaceIncarnationId};

durable_enum!(
    /// Commit build phase (discriminants of docs/metadata-format.md).
    BuildCommitPhase, "operation" {
        /// Members, references and parents being written.
        Building = 1,
        /// Closure digests verified; final publication pending.
        Sealing = 2,
        /// Commit published.
        Complete = 3,
        /// Cleanup claimed.
        Aborting = 4,
        /// Cleanup running.
        Cleaning = 5,
        /// Cleanup complete.
        Cleaned = 6,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 7,
    }
);

durable_enum!(
    /// Commit retirement phase (discriminants of docs/metadata-format.md).
    CommitRetirePhase, "operation" {
        /// Sealed -> Retiring claimed.
        Claiming = 1,
        /// Releasing the closure in bounded batches.
        Releasing = 2,
        /// Retired published.
        Complete = 3,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 4,
    }
);

/// The expected WorkbenchCommitHead a build was frozen against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadRef {
    /// Head commit.
    pub commit_id: CommitId,
    /// Head generation.
    pub head_generation: u64,
}

/// Immutable binding of the staged canonical run manifest (docs/metadata-format.md, "Commit Closure" step 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedManifestBinding {
    /// Publish operation that staged the manifest revision.
    pub publish_operation_id: OperationId,
    /// Incarnation the manifest belongs to.
    pub incarnation: WorkspaceIncarnationId,
    /// Hidden manifest revision.
    pub revision: ArtifactRevisionId,
    /// Manifest body length.
    pub logical_size: u64,
    /// `sha256:` body digest URI (the envelope digest).
    pub body_digest_uri: String,
    /// `sha256:` manifest-rows digest URI.
    pub manifest_digest_uri: String,
    /// Content type (`application/json`).
    pub content_type: String,
}

/// Success payload of a build-commit operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildCommitResult {
    /// Commit version of the sealing command.
    pub commit_version: u64,
    /// New WorkbenchCommitHead generation.
    pub head_generation: u64,
    /// New generation of `metadata/run_manifest.json`.
    pub manifest_generation: u64,
}

/// A commit build with its complete frozen request (value version 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCommitOperation {
    /// Phase.
    pub phase: BuildCommitPhase,
    /// Commit identity being built.
    pub commit_id: CommitId,
    /// Opaque Agent projection-input digest.
    pub projection_input_digest: [u8; 32],
    /// `nokv.build-commit.initialization.v5\0` digest of the frozen request.
    pub initialization_digest: [u8; 32],
    /// Source workbench id.
    pub workbench_id: String,
    /// Frozen source incarnation.
    pub source_incarnation: WorkspaceIncarnationId,
    /// Frozen source read version (held by `HistoryHold(BuildCommit, operation_id)`).
    pub source_read_version: u64,
    /// Frozen workspace (tree) revision.
    pub source_workspace_revision: u64,
    /// Expected current head (`None`: no head yet).
    pub expected_head: Option<HeadRef>,
    /// The request's `replace` bit.
    pub replace: bool,
    /// Caller content digest URI.
    pub content_digest_uri: String,
    /// Canonical manifest digest URI.
    pub manifest_digest_uri: String,
    /// Exact run-manifest publication condition (`None`: must be absent).
    pub run_manifest_expected_generation: Option<u64>,
    /// First owner-observed commit time, Unix seconds.
    pub committed_at_unix_seconds: u64,
    /// Staged run-manifest binding, once step 2 ran.
    pub staged_manifest: Option<StagedManifestBinding>,
    /// Producer.
    pub producer: String,
    /// Opaque canonical lineage projection.
    pub lineage: Vec<u8>,
    /// Parent commits in request order.
    pub parents: Vec<CommitId>,
    /// Construction progress.
    pub cursor: ClosureCursor,
    /// Members written so far / sealed.
    pub member_count: u64,
    /// Member digest.
    pub member_digest: [u8; 32],
    /// Unique revisions referenced so far / sealed.
    pub revision_count: u64,
    /// Revision digest.
    pub revision_digest: [u8; 32],
    /// Unique parents attached so far / sealed.
    pub parent_count: u64,
    /// Parent digest.
    pub parent_digest: [u8; 32],
    /// Cleanup progress (Aborting/Cleaning).
    pub cleanup_cursor: ClosureCursor,
    /// Terminal result.
    pub result: OperationResult<BuildCommitResult>,
}

/// A commit retirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRetireOperation {
    /// Phase.
    pub phase: CommitRetirePhase,
    /// Commit being retired.
    pub commit_id: CommitId,
    /// Consumer epoch the Sealed -> Retiring CAS expected.
    pub expected_consumer_epoch: u64,
    /// Release progress.
    pub cursor: ClosureCursor,
    /// Terminal result (success payload: commit version that published Retired).
    pub result: OperationResult<u64>,
}

/// Encodes the BuildCommitOperation payload (after the version and kind bytes).
pub(super) fn put_build(b: &BuildCommitOperation, e: &mut Enc) {
    e.u8(b.phase.to_u8())
        .raw(b.commit_id.as_bytes())
        .raw(&b.projection_input_digest)
        .raw(&b.initialization_digest)
        .str(&b.workbench_id)
        .raw(b.source_incarnation.as_bytes())
        .u64(b.source_read_version)
        .u64(b.source_workspace_revision);
    match &b.expected_head {
        None => e.u8(0),
        Some(h) => e.u8(1).raw(h.commit_id.as_bytes()).u64(h.head_generation),
    };
    e.bool(b.replace)
        .str(&b.content_digest_uri)
        .str(&b.manifest_digest_uri)
        .opt_u64(b.run_manifest_expected_generation)
        .u64(b.committed_at_unix_seconds);
    match &b.staged_manifest {
        None => e.u8(0),
        Some(s) => e
            .u8(1)
            .raw(s.publish_operation_id.as_bytes())
            .raw(s.incarnation.as_bytes())
            .raw(s.revision.as_bytes())
            .u64(s.logical_size)
            .str(&s.body_digest_uri)
            .str(&s.manifest_digest_uri)
            .str(&s.content_type),
    };
    e.str(&b.producer).bytes(&b.lineage).count(b.parents.len());
    for p in &b.parents {
        e.raw(p.as_bytes());
    }
    put_cursor(e, &b.cursor);
    e.u64(b.member_count)
        .raw(&b.member_digest)
        .u64(b.revision_count)
        .raw(&b.revision_digest)
        .u64(b.parent_count)
        .raw(&b.parent_digest);
    put_cursor(e, &b.cleanup_cursor);
    b.result.put(e, |r, e| {
        e.u64(r.commit_version)
            .u64(r.head_generation)
            .u64(r.manifest_generation);
    });
}

/// Encodes the CommitRetireOperation payload (after the version and kind bytes).
pub(super) fn put_retire(c: &CommitRetireOperation, e: &mut Enc) {
    e.u8(c.phase.to_u8())
        .raw(c.commit_id.as_bytes())
        .u64(c.expected_consumer_epoch);
    put_cursor(e, &c.cursor);
    c.result.put(e, |v, e| {
        e.u64(*v);
    });
}

pub(super) fn decode_build(d: &mut Dec<'_>) -> Result<BuildCommitOperation> {
    let phase = BuildCommitPhase::from_u8(d.u8()?)?;
    let commit_id = CommitId(d.b32()?);
    let projection_input_digest = d.b32()?;
    let initialization_digest = d.b32()?;
    let workbench_id = d.string()?;
    let source_incarnation = WorkspaceIncarnationId(d.b16()?);
    let source_read_version = d.u64()?;
    let source_workspace_revision = d.u64()?;
    let expected_head = if d.opt_tag()? {
        Some(HeadRef {
            commit_id: CommitId(d.b32()?),
            head_generation: d.u64()?,
        })
    } else {
        None
    };
    let replace = d.bool()?;
    let content_digest_uri = d.string()?;
    let manifest_digest_uri = d.string()?;
    let run_manifest_expected_generation = d.opt_u64()?;
    let committed_at_unix_seconds = d.u64()?;
    let staged_manifest = if d.opt_tag()? {
        Some(StagedManifestBinding {
            publish_operation_id: OperationId(d.b16()?),
            incarnation: WorkspaceIncarnationId(d.b16()?),
            revision: ArtifactRevisionId(d.b16()?),
            logical_size: d.u64()?,
            body_digest_uri: d.string()?,
            manifest_digest_uri: d.string()?,
            content_type: d.string()?,
        })
    } else {
        None
    };
    let producer = d.string()?;
    let lineage = d.bytes()?.to_vec();
    let n = d.count()?;
    let mut parents = Vec::new();
    for _ in 0..n {
        parents.push(CommitId(d.b32()?));
    }
    let cursor = ClosureCursor::get(d)?;
    let member_count = d.u64()?;
    let member_digest = d.b32()?;
    let revision_count = d.u64()?;
    let revision_digest = d.b32()?;
    let parent_count = d.u64()?;
    let parent_digest = d.b32()?;
    let cleanup_cursor = ClosureCursor::get(d)?;
    let result = OperationResult::get(d, |d| {
        Ok(BuildCommitResult {
            commit_version: d.u64()?,
            head_generation: d.u64()?,
            manifest_generation: d.u64()?,
        })
    })?;
    Ok(BuildCommitOperation {
        phase,
        commit_id,
        projection_input_digest,
        initialization_digest,
        workbench_id,
        source_incarnation,
        source_read_version,
        source_workspace_revision,
        expected_head,
        replace,
        content_digest_uri,
        manifest_digest_uri,
        run_manifest_expected_generation,
        committed_at_unix_seconds,
        staged_manifest,
        producer,
        lineage,
        parents,
        cursor,
        member_count,
        member_digest,
        revision_count,
        revision_digest,
        parent_count,
        parent_digest,
        cleanup_cursor,
        result,
    })
}

pub(super) fn decode_retire(d: &mut Dec<'_>) -> Result<CommitRetireOperation> {
    Ok(CommitRetireOperation {
        phase: CommitRetirePhase::from_u8(d.u8()?)?,
        commit_id: CommitId(d.b32()?),
        expected_consumer_epoch: d.u64()?,
        cursor: ClosureCursor::get(d)?,
        result: OperationResult::get(d, |d| d.u64())?,
    })
}
